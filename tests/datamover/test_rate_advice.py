"""Receiver feedback: a sender that asks gets the receiver's own rate, computed from the
receiver's profile, its socket's K, its batch N and the workload on its CPUs.  Real
transfers over loopback only, each bounded by a total timeout."""

from __future__ import annotations

import contextlib
import hashlib
import threading
from collections.abc import Collection
from pathlib import Path
from typing import Any

import pytest

from datamover import ReceiveError, Receiver, ReceiverLimits, SendError, send_file
from datamover.advice import (
    MAX_PAPER_BUFFER_PACKETS,
    AdviceError,
    ReceiverAdvisor,
    parse_advice_request,
)
from host import Workload, host_profile
from transport import DEFAULT_RECEIVER_MODEL, workload_bottleneck_rate
from transport.timeslice import time_slice_bottleneck_rate

SECRET = b"advice-test-secret-0123"
LIMITS = ReceiverLimits(total_timeout_s=30, idle_timeout_s=10, accept_timeout_s=10)
PROFILE = host_profile("sx280-2007").replace(name="lab", mu_net=20_000.0, line_rate_bps=8e8)
SEEN: list[frozenset[int]] = []


def _workload(cpus: Collection[int]) -> Workload:
    SEEN.append(frozenset(cpus))
    return Workload(cpu_tasks=2, io_tasks=0, cores=len(cpus))


def _advisor(**kw: Any) -> ReceiverAdvisor:
    return ReceiverAdvisor(
        lambda: (PROFILE, {"time_slice_s": 0.003}),
        buffer_packets=300,
        batch_packets=8,
        cpus={0},
        workload=_workload,
        **kw,
    )


def _send(tmp_path: Path, advisor: Any, advise: dict[str, Any]) -> Any:
    src = tmp_path / "f.bin"
    src.write_bytes(hashlib.shake_256(b"advice").digest(200_000))
    out = tmp_path / "out"
    out.mkdir()
    with Receiver(out, secret=SECRET, limits=LIMITS, advisor=advisor) as rx:

        def serve() -> None:
            # A sender that gave up on the advice closes the connection: expected.
            with contextlib.suppress(ReceiveError):
                rx.serve_one()

        t = threading.Thread(target=serve, daemon=True)
        t.start()
        try:
            return send_file(
                src,
                "127.0.0.1",
                rx.port,
                rate_bps=None,
                secret=SECRET,
                total_timeout_s=30,
                advise=advise,
            )
        finally:
            t.join(timeout=30)


def test_the_paper_model_advises_when_named(tmp_path: Path) -> None:
    report = _send(tmp_path, _advisor(), {"propagation_delay_s": 0.01, "model": "paper"})
    advice = report.advice
    # The receiver's model, recomputed here with the same inputs: an independent call.
    expected = workload_bottleneck_rate(
        Workload(cpu_tasks=2, io_tasks=0, cores=1),
        PROFILE.replace(buffer_packets=300, coalesce_packets=8),
        file_size_bytes=200_000,
        propagation_delay_s=0.01,
    )
    assert report.rate_bps == advice["predicted_rate_bps"]
    assert advice["predicted_rate_bps"] == pytest.approx(expected.bottleneck.rate_bps, rel=1e-12)
    assert advice["predicted_loss"] == pytest.approx(expected.bottleneck.loss, rel=1e-12)
    assert advice["profile"] == "lab" and advice["model"] == "paper"
    assert advice["buffer_packets"] == 300 and advice["coalesce_packets"] == 8
    assert advice["workload"] == {"cpu_tasks": 2, "io_tasks": 0, "cores": 1, "disks": 1}
    assert report.digest_ok


def test_the_sender_sends_at_the_receivers_rate(tmp_path: Path) -> None:
    # No model named: the default, the time-slice model (transport.DEFAULT_RECEIVER_MODEL).
    report = _send(tmp_path, _advisor(), {"propagation_delay_s": 0.01})
    advice = report.advice
    # The receiver's model, recomputed here with the same inputs: an independent call.
    expected = time_slice_bottleneck_rate(
        Workload(cpu_tasks=2, io_tasks=0, cores=1),
        PROFILE.replace(buffer_packets=300, coalesce_packets=8),
        file_size_bytes=200_000,
        propagation_delay_s=0.01,
        time_slice_s=0.003,
        settle_s=0.02,
    )
    assert report.rate_bps == advice["predicted_rate_bps"] == pytest.approx(expected.rate_bps)
    assert advice["profile"] == "lab" and advice["model"] == DEFAULT_RECEIVER_MODEL == "timeslice"
    assert advice["buffer_packets"] == 300 and advice["coalesce_packets"] == 8
    assert advice["workload"] == {"cpu_tasks": 2, "io_tasks": 0, "cores": 1, "disks": 1}
    assert advice["time_slice_s"] == 0.003 and SEEN[-1] == frozenset({0})
    assert report.digest_ok


def test_a_delay_left_to_the_sender_is_half_the_connections_round_trip(tmp_path: Path) -> None:
    report = _send(tmp_path, _advisor(), {"propagation_delay_s": None, "model": "paper"})
    assert 0 < report.advice["propagation_delay_s"] < 0.05  # loopback
    assert report.advice["model"] == "paper"


def test_a_receiver_without_advice_fails_the_transfer_before_sending(tmp_path: Path) -> None:
    with pytest.raises(SendError) as err:
        _send(tmp_path, None, {"propagation_delay_s": 0.01})
    assert err.value.field == "advice" and "no rate advice" in err.value.reason


def test_an_unknown_profile_is_named_to_the_sender(tmp_path: Path) -> None:
    def profiles(name: str) -> Any:
        raise LookupError(f"unknown host profile {name!r}")

    with pytest.raises(SendError) as err:
        _send(
            tmp_path,
            _advisor(profiles=profiles),
            {"propagation_delay_s": 0.01, "profile": "nope"},
        )
    assert err.value.field == "advice" and "profile" in err.value.reason


@pytest.mark.parametrize(
    ("request_", "field"),
    [
        ([], "advise"),
        ({"propagation_delay_s": 0}, "propagation_delay_s"),
        ({"propagation_delay_s": True}, "propagation_delay_s"),
        ({"propagation_delay_s": float("nan")}, "propagation_delay_s"),
        ({"propagation_delay_s": 0.1, "profile": ""}, "profile"),
        ({"propagation_delay_s": 0.1, "model": "magic"}, "model"),
    ],
)
def test_malformed_requests_name_their_field(request_: Any, field: str) -> None:
    with pytest.raises(AdviceError) as err:
        parse_advice_request(request_)
    assert err.value.field == field


@pytest.mark.parametrize(
    ("model", "buffer_packets", "said"),
    [("timeslice", 65_536, "max_advice_work"), ("paper", MAX_PAPER_BUFFER_PACKETS + 1, "paper")],
)
def test_a_huge_buffer_is_refused_not_solved_for_minutes(
    model: str, buffer_packets: int, said: str
) -> None:
    advisor = ReceiverAdvisor(
        lambda: (PROFILE, None),
        buffer_packets=buffer_packets,
        batch_packets=64,
        cpus={0},
        workload=_workload,
    )
    with pytest.raises(AdviceError) as err:
        advisor(20_000_000, {"propagation_delay_s": 0.01, "model": model})
    assert err.value.field == "buffer_packets" and said in err.value.reason


@pytest.mark.parametrize("rate", [1e-300, 1.0, -5.0, float("nan"), "fast", True, 1e20])
def test_a_hostile_advised_rate_is_refused(rate: Any) -> None:
    from datamover.sender import _advised_rate  # the sender's own check, tested directly

    with pytest.raises(SendError) as err:
        _advised_rate({"predicted_rate_bps": rate})
    assert err.value.field == "advice"


@pytest.mark.parametrize(("stored", "used"), [(20e-6, 20e-6), (1.0, 0.0), ("x", 0.0)])
def test_the_calibrated_wakeup_cost_feeds_the_model(stored: Any, used: float) -> None:
    # A wake-up cost from the calibration is the model's wakeup_s; one that no wake-up
    # could hold (1 s against 1/mu_net = 50 us) or that is not a number is ignored.
    advisor = ReceiverAdvisor(
        lambda: (PROFILE, {"time_slice_s": 0.003, "wakeup_s": stored}),
        buffer_packets=300,
        batch_packets=8,
        cpus={0},
        workload=_workload,
    )
    advice = advisor(2_000_000, {"propagation_delay_s": 0.01, "model": "timeslice"})
    expected = time_slice_bottleneck_rate(
        Workload(cpu_tasks=2, io_tasks=0, cores=1),
        PROFILE.replace(buffer_packets=300, coalesce_packets=8),
        file_size_bytes=2_000_000,
        propagation_delay_s=0.01,
        time_slice_s=0.003,
        settle_s=0.02,
        wakeup_s=used,
    )
    assert advice.rate_bps == pytest.approx(expected.rate_bps, rel=1e-12)
