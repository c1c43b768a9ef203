"""The compiled search for the exponential NIC queue against the general search.

Reference: :func:`transport.effective_bottleneck_rate` with the loss
``queues.loss_probability(B / (8 S_pkt), mu, K, N)`` -- the general branch-and-bound,
whose Python loop calls the loss once per pass (itself checked against brute-force
scans in test_transport_search.py).  :func:`transport.bulk_queue_bottleneck_rate` runs
the same steps with the same arithmetic in one compiled loop, so the tolerance is zero:
every field of the answer, and every point of the curve, must be equal to the last bit.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import queues
from queues._fixed import forced_kernels
from transport import (
    BottleneckRate,
    TransportParameterError,
    bulk_queue_bottleneck_rate,
    effective_bottleneck_rate,
)


@pytest.fixture(autouse=True)
def compiled() -> Iterator[None]:
    """The compiled kernels, whether or not this process has loaded Numba yet (else a
    fresh worker would compare the NumPy search with itself)."""
    with forced_kernels(compiled=True):
        yield


def general(mu: float, K: int, N: int, **transfer: Any) -> BottleneckRate:
    bits = 8.0 * transfer.get("packet_payload_bytes", 1468)
    return effective_bottleneck_rate(
        lambda r: queues.loss_probability(r / bits, mu, K, N), **transfer
    )


def assert_same(a: BottleneckRate, b: BottleneckRate) -> None:
    for name in (
        "rate_bps",
        "transfer_time_s",
        "loss",
        "n_resend",
        "rounds",
        "first_blast_s",
        "resend_s",
        "feedback_s",
        "limited_by",
        "line_rate_bps",
        "resolution_bps",
        "loss_evaluations",
    ):
        assert getattr(a, name) == getattr(b, name), name
    for name in ("send_rate_bps", "total_s", "loss", "completes"):
        np.testing.assert_array_equal(getattr(a.curve, name), getattr(b.curve, name))


@settings(max_examples=150, deadline=None)
@given(
    mu=st.floats(2_000.0, 200_000.0),
    K=st.integers(1, 256),
    N=st.integers(1, 16),
    line_rate=st.sampled_from([1e8, 1e9, 1e10, 4e10]),
    size=st.integers(1, 2_000_000_000),
    delay=st.floats(1e-4, 0.5),
    payload=st.sampled_from([512, 1468, 8972]),
    points=st.integers(2, 600),
)
def test_the_compiled_search_equals_the_general_one(
    mu: float,
    K: int,
    N: int,
    line_rate: float,
    size: int,
    delay: float,
    payload: int,
    points: int,
) -> None:
    K = max(K, N)
    transfer = {
        "line_rate_bps": line_rate,
        "file_size_bytes": size,
        "propagation_delay_s": delay,
        "packet_payload_bytes": payload,
        "curve_points": points,
    }
    assert_same(bulk_queue_bottleneck_rate(mu, K, N, **transfer), general(mu, K, N, **transfer))


def test_the_paper_grid_gives_the_same_rates() -> None:
    # sx280-2007's NIC (K = 64, N = 6) over the service rates of the paper's workloads.
    transfer = {"line_rate_bps": 1e9, "file_size_bytes": 500_000_000, "propagation_delay_s": 0.1}
    for mu in np.linspace(5_000.0, 41_600.0, 25):
        assert_same(
            bulk_queue_bottleneck_rate(float(mu), 64, 6, **transfer),
            general(float(mu), 64, 6, **transfer),
        )


def counted_loss(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Count the calls of queues.loss_probability (the general search's loss)."""
    calls: list[int] = []
    original = queues.loss_probability

    def loss(*args: Any) -> Any:
        calls.append(1)
        return original(*args)

    monkeypatch.setattr(queues, "loss_probability", loss)
    return calls


def test_the_paper_setting_runs_compiled(monkeypatch: pytest.MonkeyPatch) -> None:
    calls = counted_loss(monkeypatch)
    transfer = {"line_rate_bps": 1e9, "file_size_bytes": 500_000_000, "propagation_delay_s": 0.1}
    best = bulk_queue_bottleneck_rate(20_800.0, 64, 6, **transfer)
    assert calls == [] and best.loss_evaluations > 256


def test_a_deep_buffer_at_low_load_stays_compiled(monkeypatch: pytest.MonkeyPatch) -> None:
    # Its unscaled values would overflow (the log domain, before the kernel rescaled).
    transfer = {"line_rate_bps": 1e9, "file_size_bytes": 50_000_000, "propagation_delay_s": 0.01}
    calls = counted_loss(monkeypatch)
    a = bulk_queue_bottleneck_rate(80_000.0, 4_000, 4, **transfer)
    assert calls == []
    monkeypatch.undo()
    assert_same(a, general(80_000.0, 4_000, 4, **transfer))


def test_rates_the_kernel_leaves_to_the_log_domain_take_the_general_search(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # mu / lam >= 2**80 (queues._fixed.MAX_SCALED_RATIO): a link of a microbit per
    # second into a host of 1e15 interrupts/s; only the general search (through
    # queues.loss_probability) completes those rates.
    transfer = {"line_rate_bps": 1e-6, "file_size_bytes": 1_000, "propagation_delay_s": 0.01}
    calls = counted_loss(monkeypatch)
    a = bulk_queue_bottleneck_rate(1e15, 64, 6, **transfer)
    assert calls
    monkeypatch.undo()
    assert_same(a, general(1e15, 64, 6, **transfer))


def test_bad_queue_parameters_get_the_queues_errors() -> None:
    transfer = {"line_rate_bps": 1e9, "file_size_bytes": 1_000_000, "propagation_delay_s": 0.01}
    with pytest.raises(queues.QueueParameterError) as caught:
        bulk_queue_bottleneck_rate(20_000.0, 4, 6, **transfer)
    assert caught.value.parameter == "capacity"
    with pytest.raises(queues.QueueParameterError) as caught:
        bulk_queue_bottleneck_rate(-1.0, 64, 6, **transfer)
    assert caught.value.parameter == "service_rate"
    with pytest.raises(queues.QueueParameterError):
        bulk_queue_bottleneck_rate(math.nan, 64, 6, **transfer)
    with pytest.raises(TransportParameterError) as transport_error:
        bulk_queue_bottleneck_rate(20_000.0, 64, 6, **{**transfer, "curve_points": 1})
    assert transport_error.value.parameter == "curve_points"


def test_numpy_integer_parameters_give_the_same_answer() -> None:
    transfer = {"line_rate_bps": 1e9, "file_size_bytes": 500_000_000, "propagation_delay_s": 0.1}
    assert_same(
        bulk_queue_bottleneck_rate(np.float64(20_800.0), np.int64(64), np.int32(6), **transfer),
        bulk_queue_bottleneck_rate(20_800.0, 64, 6, **transfer),
    )
