"""The search's NumPy steps (:mod:`transport._kernels_numpy`, and the queue's
:func:`queues._fixed.linear_loss_numpy`) against the compiled ones.

Reference: the compiled kernels (:mod:`transport._kernels`, :mod:`queues._fixed_kernel`),
themselves checked against the formula in 50-digit arithmetic (test_transport_terms.py),
brute-force scans (test_transport_search.py) and the exact queue
(tests/queues).  The twins run the same arithmetic in the same order, with libm's
``log`` and ``expm1`` as the compiled loops call them, so the tolerance is zero: every
array, every field of an answer and every point of its curve equal to the last bit.
"""

from __future__ import annotations

import json
import subprocess
import sys
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from test_transport_compiled_search import assert_same

from queues._fixed import forced_kernels, linear_loss_numpy
from queues._fixed_kernel import linear_loss
from transport import _kernels, _kernels_numpy, bulk_queue_bottleneck_rate
from transport.rbudp import transfer_time_terms


@settings(max_examples=150, deadline=None)
@given(
    mu=st.floats(1.0, 1e7),
    K=st.integers(1, 3_000),
    N=st.integers(1, 64),
    lam=st.lists(st.floats(1e-3, 1e8), min_size=1, max_size=300),
)
def test_the_queue_loss_is_the_compiled_ones(mu: float, K: int, N: int, lam: list[float]) -> None:
    N = min(N, K)
    rates = np.array(lam)
    np.testing.assert_array_equal(
        linear_loss_numpy(rates, mu, K, N),
        linear_loss(rates, mu, K, N),
    )


losses = st.one_of(
    st.floats(0.0, 1.0),
    st.floats(1e-300, 1e-3),
    st.sampled_from([0.0, 1.0, 2.5, 0.5, 1 - 2**-53]),
)


@settings(max_examples=150, deadline=None)
@given(
    pairs=st.lists(st.tuples(st.floats(1e3, 1e11), losses), min_size=1, max_size=200),
    total=st.floats(1.0, 1e13),
    payload=st.sampled_from([1.0, 512.0, 1468.0, 8972.0]),
    delay=st.floats(1e-6, 10.0),
)
def test_the_transfer_time_terms_are_the_compiled_ones(
    pairs: list[tuple[float, float]], total: float, payload: float, delay: float
) -> None:
    rate = np.array([r for r, _ in pairs])
    loss = np.array([x for _, x in pairs])
    ours = _kernels_numpy.time_terms(rate, loss, total, payload, delay)
    theirs = _kernels.time_terms(rate, loss, total, payload, delay)
    for a, b in zip(ours, theirs, strict=True):
        np.testing.assert_array_equal(a, b)
        assert a.dtype == b.dtype


@settings(max_examples=100, deadline=None)
@given(
    mu=st.floats(2_000.0, 200_000.0),
    K=st.integers(1, 256),
    N=st.integers(1, 16),
    size=st.integers(1, 2_000_000_000),
    delay=st.floats(1e-4, 0.5),
    points=st.integers(2, 600),
)
def test_each_step_of_a_search_is_the_compiled_ones(
    mu: float, K: int, N: int, size: int, delay: float, points: int
) -> None:
    """Scan, cell choice, split and merge, pass after pass, compared array by array."""
    K = max(K, N)
    scan = 1e9 * (np.arange(1, 257) / 256)
    total, payload = float(size + 32 * -(-size // 1468)), 1468.0

    def loss(rates: np.ndarray) -> np.ndarray:
        return linear_loss(rates / (8 * 1468.0), mu, K, N)

    arrays = _kernels.scan_cells(scan, loss(scan), total, payload, delay)
    twin = _kernels_numpy.scan_cells(scan, loss(scan), total, payload, delay)
    split_at = np.arange(1, 8) / 8
    evaluations = scan.size
    for _ in range(8):
        for a, b in zip(arrays[:6], twin[:6], strict=True):
            np.testing.assert_array_equal(a, b)
        rates, totals, _, rounds, low, _ = arrays[:6]
        alive = _kernels.cells_worth_splitting(rates, totals, rounds, low, 1e5)
        np.testing.assert_array_equal(
            alive, _kernels_numpy.cells_worth_splitting(rates, totals, rounds, low, 1e5)
        )
        if alive.size == 0:
            break
        new = _kernels.split_points(rates, alive, split_at)
        np.testing.assert_array_equal(new, _kernels_numpy.split_points(rates, alive, split_at))
        new_loss = loss(new)
        step = (*arrays[:6], alive, new, new_loss, evaluations, total, payload, delay)
        arrays = _kernels.refine_cells(*step)
        twin = _kernels_numpy.refine_cells(*step)
        for a, b in zip(arrays[6], twin[6], strict=True):
            np.testing.assert_array_equal(a, b)
        evaluations += new.size


def answers(compiled: bool, mu: float, K: int, N: int, transfer: dict[str, Any]) -> Any:
    with forced_kernels(compiled):
        return bulk_queue_bottleneck_rate(mu, K, N, **transfer)


@settings(max_examples=100, deadline=None)
@given(
    mu=st.floats(2_000.0, 200_000.0),
    K=st.integers(1, 256),
    N=st.integers(1, 16),
    line_rate=st.sampled_from([1e8, 1e9, 1e10]),
    size=st.integers(1, 2_000_000_000),
    delay=st.floats(1e-4, 0.5),
    points=st.integers(2, 600),
)
def test_a_whole_search_is_the_compiled_ones(
    mu: float, K: int, N: int, line_rate: float, size: int, delay: float, points: int
) -> None:
    K = max(K, N)
    transfer = {
        "line_rate_bps": line_rate,
        "file_size_bytes": size,
        "propagation_delay_s": delay,
        "curve_points": points,
    }
    assert_same(answers(False, mu, K, N, transfer), answers(True, mu, K, N, transfer))


@pytest.mark.parametrize(("K", "N"), [(1_736, 6), (4_096, 32)])
def test_deep_rings_whose_recursion_is_rescaled(K: int, N: int) -> None:
    """Rates whose unscaled values would overflow a double."""
    transfer = {"line_rate_bps": 1e10, "file_size_bytes": 30_000_000, "propagation_delay_s": 0.01}
    assert_same(answers(False, 8e3, K, N, transfer), answers(True, 8e3, K, N, transfer))


def test_the_transfer_time_terms_follow_the_choice() -> None:
    rate, loss = np.array([1e9, 5e8]), np.array([0.05, 1.0])
    with forced_kernels(False):
        ours = transfer_time_terms(rate, loss, 1.5e8, 1468.0, 0.1)
    with forced_kernels(True):
        theirs = transfer_time_terms(rate, loss, 1.5e8, 1468.0, 0.1)
    for a, b in zip(ours, theirs, strict=True):
        np.testing.assert_array_equal(a, b)


def test_a_process_without_numba_uses_the_numpy_steps_and_never_loads_it() -> None:
    """What a one-shot ``blastrate rate`` relies on: the paper's answer at the paper's
    sizes loads neither Numba nor SciPy, nor the SRN engine's solvers (the nets'
    definitions, ``srn.net``, are plain Python)."""
    script = (
        "import json, sys\n"
        "from host import Workload\n"
        "from transport import paper_bottleneck_rate\n"
        "r = paper_bottleneck_rate(Workload(2, 1), file_size_bytes=500_000_000,\n"
        "                          propagation_delay_s=0.1)\n"
        "heavy = ('numba', 'scipy', 'llvmlite', 'srn.solvers', 'host.service_time')\n"
        "loaded = sorted(m for m in sys.modules if m.startswith(heavy))\n"
        "print(json.dumps([loaded, r.bottleneck.rate_bps]))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=120, check=True
    )
    loaded, rate = json.loads(done.stdout)
    assert loaded == []
    assert rate == 856262207.03125  # as the compiled search gives it (test above)


def test_loading_the_kernels_switches_a_process_to_them_with_the_same_answers() -> None:
    """transport.load_kernels: what the service and a sweep's workers call first."""
    script = (
        "import json, sys\n"
        "import transport\n"
        "from host import Workload\n"
        "from queues import compiled_kernels_preferred\n"
        "def answer():\n"
        "    return transport.paper_bottleneck_rate(Workload(3, 2), file_size_bytes=10**9,\n"
        "        propagation_delay_s=0.05).bottleneck.to_dict()\n"
        "before = [answer(), compiled_kernels_preferred(64)]\n"
        "seconds = transport.load_kernels()\n"
        "after = [answer(), compiled_kernels_preferred(64)]\n"
        "print(json.dumps([before, after, seconds > 0, transport.load_kernels()]))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=300, check=True
    )
    before, after, took, again = json.loads(done.stdout)
    assert before[1] is False and after[1] is True
    assert before[0] == after[0]
    assert took and again == 0.0
