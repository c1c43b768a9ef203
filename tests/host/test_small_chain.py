"""The compiled small-chain solve (:mod:`host._small_chain`).

References:

* the exact chains in 50-digit arithmetic (mpmath): Fig. 1a's generator solved for its
  steady state with no use of detailed balance, and ``-T`` with its exact diagonal
  (exit rate plus moves) solved twice for E[X] and E[X^2].  The compiled solve's
  subtraction-free elimination is accurate entrywise, so the moments must agree to
  1e-13 relative however stiff the rates (seen: 1.4e-15 over 300 draws with rates 1e-3
  to 1e9 1/s, ``benchmarks/stage1_accuracy.py``);
* the NumPy path of :func:`host.interrupt_service_time` (the solution used for larger
  chains, itself tested against the unlumped chain in ``test_reference.py``): on the
  paper's rates both agree to rounding, 1e-12 relative.
"""

from __future__ import annotations

import mpmath
import numpy as np
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st
from rate_strategies import log_uniform

from host import (
    HostProfile,
    InterruptServiceTime,
    Workload,
    _shape,
    host_profile,
    interrupt_service_time,
)
from host.nets import net_parameters
from host.service_time import DEFAULT_LIMITS

SX280 = host_profile("sx280-2007")


def exact_moments(w: Workload, p: HostProfile) -> tuple[float, float]:
    """E[X] and Var[X] of the interrupt service time, from the engine's edge rates in
    50-digit arithmetic (dense LU, no structure assumed)."""
    shape = _shape.SHAPES.get(w.io_tasks, w.disks, DEFAULT_LIMITS)
    values = net_parameters(w, p)
    with mpmath.workdps(50):
        rates_a = shape.graph_a.with_parameters(values).edge_rates()
        n = shape.n_states
        A = mpmath.zeros(n, n)  # Q transposed, its last row replaced by sum(pi) = 1
        for src, dst, rate in zip(*shape.graph_a.edges, rates_a, strict=True):
            if src != dst:
                A[int(dst), int(src)] += mpmath.mpf(rate)
                A[int(src), int(src)] -= mpmath.mpf(rate)
        for j in range(n):
            A[n - 1, j] = 1
        pi = mpmath.lu_solve(A, mpmath.matrix([0] * (n - 1) + [1]))
        rates_b = shape.graph_b.with_parameters(values).edge_rates()
        nt = len(shape.transient)
        minus_T = mpmath.zeros(nt, nt)
        for row, col, rate in zip(shape.b_rows, shape.b_cols, rates_b[shape.b_inner], strict=True):
            minus_T[int(row), int(col)] -= mpmath.mpf(rate)
            minus_T[int(row), int(row)] += mpmath.mpf(rate)
        for edge, row in zip(shape.b_exit, shape.b_exit_row, strict=True):
            minus_T[int(row), int(row)] += mpmath.mpf(rates_b[edge])
        alpha = [pi[int(k)] for k in shape.b_from_a]
        u = mpmath.lu_solve(minus_T, mpmath.matrix([1] * nt))
        v = mpmath.lu_solve(minus_T, u)
        mean = mpmath.fsum(a * x for a, x in zip(alpha, u, strict=True))
        second = 2 * mpmath.fsum(a * x for a, x in zip(alpha, v, strict=True))
        return float(mean), float(second - mean * mean)


def numpy_path(w: Workload, p: HostProfile) -> InterruptServiceTime:
    """The same result with the compiled solve switched off (on shapes of its own)."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(_shape.SmallChain, "of", classmethod(lambda cls, *args: None))
        shapes = _shape.ShapeCache()
        patch.setattr("host.service_time.SHAPES", shapes)
        result = interrupt_service_time(w, p)
        assert shapes.get(w.io_tasks, w.disks, DEFAULT_LIMITS).small_chain is None
        return result


def assert_compiled_path_taken(w: Workload, p: HostProfile) -> None:
    """The shape has a compiled solve, and it answers (passes its reversibility checks)."""
    small = _shape.SHAPES.get(w.io_tasks, w.disks, DEFAULT_LIMITS).small_chain
    assert small is not None
    assert small.solve(net_parameters(w, p)) is not None


def assert_same_distribution(fast: InterruptServiceTime, slow: InterruptServiceTime) -> None:
    """Occupancy, phase-type pair, quantiles and CDF as the NumPy path gives them."""
    assert fast.method == slow.method == "spectral"
    assert (fast.n_states, fast.n_transient_states) == (slow.n_states, slow.n_transient_states)
    # The steady state comes from the same logs in both: rounding only (absolute for
    # I - E[i], a difference).
    a, b = fast.occupancy, slow.occupancy
    absolute = 1e-14 * max(1, fast.workload.io_tasks)
    for name in (
        "io_tasks_at_processor",
        "io_tasks_at_disks",
        "processor_utilisation",
        "disk_utilisation",
        "io_throughput_per_s",
    ):
        np.testing.assert_allclose(getattr(a, name), getattr(b, name), rtol=1e-12, atol=absolute)
    # pi = exp(log pi - log sum): the logs agree to rounding, which exp turns into a
    # relative error of |log pi| * eps (1e-13 at pi = 1e-300).
    np.testing.assert_allclose(
        a.io_at_processor_distribution, b.io_at_processor_distribution, rtol=1e-12, atol=1e-300
    )
    np.testing.assert_allclose(
        fast.absorption.alpha, slow.absorption.alpha, rtol=1e-12, atol=1e-300
    )
    # T's rates are the shape's edge rates in both, its diagonal summed in the same order.
    np.testing.assert_array_equal(fast.absorption.T.indices, slow.absorption.T.indices)
    np.testing.assert_array_equal(fast.absorption.T.data, slow.absorption.T.data)
    # The expansion in exponentials is accurate to its a-posteriori bound (S(0) = 1 and
    # the solved mean), which stiff chains raise above rounding.  The NumPy path's bound
    # sets the tolerance; the compiled path's own bound must be as small, so a wrong
    # spectrum cannot widen its own allowance.
    # Within 20 times: both bounds are a-posteriori estimates of the same expansion's
    # error, not the error; a stiff chain (C = 424, I = 8, m = 1, rates up to 1e12 apart,
    # found by a random run on 2026-11-27) put the compiled path's at 10.2 times the
    # NumPy path's, 1.18e-6 against 1.15e-7, with the quantiles below still agreeing.
    bound = 1e-10 + 20 * slow.absorption.error_bound
    assert fast.absorption.error_bound <= bound
    for level, q in slow.quantiles_s.items():
        np.testing.assert_allclose(fast.quantiles_s[level], q, rtol=bound)
    # On the same times (each path builds its grid from its own quantiles).
    times = np.concatenate([slow.times_s, 2 * slow.times_s[-1:]])
    np.testing.assert_allclose(fast.cdf_at(times), slow.cdf_at(times), rtol=bound, atol=bound)


@pytest.mark.parametrize(
    "w",
    [
        Workload(1, 0),
        Workload(2, 1),
        Workload(4, 3),
        Workload(0, 3, cores=2),
        Workload(3, 7, cores=2, disks=3),
        Workload(1, 40, cores=4),
    ],
)
def test_paper_rates_agree_with_the_numpy_path_and_the_exact_chain(w: Workload) -> None:
    assert_compiled_path_taken(w, SX280)
    fast = interrupt_service_time(w, SX280)
    slow = numpy_path(w, SX280)
    np.testing.assert_allclose(fast.mean_s, slow.mean_s, rtol=1e-12)
    np.testing.assert_allclose(fast.variance_s2, slow.variance_s2, rtol=1e-12)
    np.testing.assert_allclose(fast.steady_state_residual, 0.0, atol=1e-9)
    assert_same_distribution(fast, slow)
    mean, variance = exact_moments(w, SX280)
    np.testing.assert_allclose(fast.mean_s, mean, rtol=1e-13)
    np.testing.assert_allclose(fast.variance_s2, variance, rtol=1e-13)


@pytest.mark.long
# Derandomized: the same 60 chains on every run (CI must not find a new one at random).
@settings(max_examples=60, deadline=None, derandomize=True)
@given(
    io=st.integers(0, 9),
    disks=st.integers(1, 3),
    cpu=st.integers(0, 900),
    cores=st.integers(1, 64),
    mu=st.tuples(*[log_uniform(1e-3, 1e9)] * 3),
)
# T's diagonal summed in another order than the NumPy path's: 4.4e-16 apart (review).
@example(
    io=9, disks=3, cpu=699, cores=40, mu=(583573687.7604833, 7846.568836198704, 630981285.6475183)
)
def test_stiff_rates_keep_full_accuracy(
    io: int, disks: int, cpu: int, cores: int, mu: tuple[float, float, float]
) -> None:
    """Rates up to 1e12 apart: the moments stay exact to rounding (an LU with pivoting,
    as the NumPy path uses, is off by up to 2e-7 on these), and everything else is the
    NumPy path's."""
    w = Workload(cpu, io, cores=cores, disks=disks)
    p = SX280.replace(mu_io_cpu=mu[0], mu_disk=mu[1], mu_net=mu[2])
    assert_compiled_path_taken(w, p)
    fast = interrupt_service_time(w, p)
    mean, variance = exact_moments(w, p)
    np.testing.assert_allclose(fast.mean_s, mean, rtol=1e-13)
    np.testing.assert_allclose(fast.variance_s2, variance, rtol=1e-13)
    assert_same_distribution(fast, numpy_path(w, p))


def test_shapes_beyond_small_keep_the_numpy_path() -> None:
    # One disk and more than SMALL transient states: the tridiagonal solution.
    w = Workload(1, _shape.SMALL + 1)
    assert _shape.SHAPES.get(w.io_tasks, w.disks, DEFAULT_LIMITS).small_chain is None
    assert interrupt_service_time(w, SX280).method == "spectral-tridiagonal"
