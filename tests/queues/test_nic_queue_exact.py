"""Fixed-batch, exponential M/M[N]/1/K: exact checks of the fast cut recursion.

Every reference below is computed in the test by a method that shares no code with
``queues``: a closed form, a dense/sparse linear solve of the generator built here, or
a high-precision (mpmath) solve.
"""

from __future__ import annotations

import mpmath
import numpy as np
import pytest
import scipy.sparse as sp
import scipy.sparse.linalg as spla

from queues import BulkQueueSolution, bulk_service_queue, loss_probability


def generator(lam: float, mu: float, K: int, N: int) -> np.ndarray:
    """Dense generator of the chain on n = 0..K (docs/conventions.md §3), built from scratch."""
    Q = np.zeros((K + 1, K + 1))
    for n in range(K + 1):
        if n < K:
            Q[n, n + 1] += lam
        if n >= N:
            Q[n, n - N] += mu
    Q -= np.diag(Q.sum(axis=1))
    return Q


def dense_stationary(lam: float, mu: float, K: int, N: int) -> np.ndarray:
    """pi Q = 0, sum pi = 1 by numpy.linalg.solve with the last equation replaced."""
    A = generator(lam, mu, K, N).T
    A[-1, :] = 1.0
    rhs = np.zeros(K + 1)
    rhs[-1] = 1.0
    return np.linalg.solve(A, rhs)


def mpmath_stationary(lam: float, mu: float, K: int, N: int, dps: int) -> np.ndarray:
    """The same linear system in dps-digit arithmetic (mpmath LU), rounded to float."""
    with mpmath.workdps(dps):
        lam_, mu_ = mpmath.mpf(lam), mpmath.mpf(mu)
        A = mpmath.zeros(K + 1, K + 1)
        for n in range(K + 1):
            if n < K:
                A[n + 1, n] += lam_
                A[n, n] -= lam_
            if n >= N:
                A[n - N, n] += mu_
                A[n, n] -= mu_
        for j in range(K + 1):
            A[K, j] = 1
        rhs = mpmath.zeros(K + 1, 1)
        rhs[K] = 1
        x = mpmath.lu_solve(A, rhs)
        return np.array([float(v) for v in x])


@pytest.mark.parametrize("K", [1, 5, 64])
def test_batch_one_is_mm1k_closed_form(K: int) -> None:
    # Reference: M/M/1/K, p_k = (1 - rho) rho^k / (1 - rho^(K+1)) and p_k = 1/(K+1) at
    # rho = 1 (birth-death detailed balance lam p_k = mu p_{k+1}; Kleinrock 1975,
    # Queueing Systems Vol. 1, ch. 3).  Tolerance: 1e-12 relative on every p_k.
    mu = 1000.0
    rho = np.array([0.01, 0.3, 0.9, 1.0, 1.1, 3.0, 50.0])
    sol = bulk_service_queue(rho * mu, mu, K, 1)
    k = np.arange(K + 1)
    expected = np.empty((rho.size, K + 1))
    for i, r in enumerate(rho):
        expected[i] = (
            np.full(K + 1, 1.0 / (K + 1)) if r == 1.0 else r**k * (1 - r) / (1 - r ** (K + 1))
        )
    np.testing.assert_allclose(sol.occupancy_distribution, expected, rtol=1e-12, atol=0)
    np.testing.assert_allclose(sol.loss_probability, expected[:, K], rtol=1e-12, atol=0)
    np.testing.assert_allclose(loss_probability(rho * mu, mu, K, 1), expected[:, K], rtol=1e-12)


def test_buffer_of_one_batch_closed_form() -> None:
    # Reference: K = N.  Balance of states 1..N-1 gives pi(0) = ... = pi(N-1) = p and
    # state 0 gives lam p = mu pi(N), so pi(N) = (lam/mu) p and the loss is
    # (lam/mu) / (N + lam/mu) (derived by hand from docs/conventions.md §3).  Tolerance 1e-13.
    lam, mu, N = np.array([10.0, 1e3, 2.5e4, 1e6]), 2.08e4, 6
    x = lam / mu
    np.testing.assert_allclose(loss_probability(lam, mu, N, N), x / (N + x), rtol=1e-13)


@pytest.mark.parametrize(("K", "N"), [(64, 6), (30, 1), (17, 5), (40, 40)])
def test_matches_dense_generator_solve(K: int, N: int) -> None:
    # Reference: numpy.linalg.solve of the generator built above, over loads spanning
    # 0.05..5 times N*mu.  Tolerance: 1e-12 absolute on every probability (the dense solve
    # is only normwise accurate); means and throughput follow from the same vector.
    mu = 20_800.0
    lam = N * mu * np.array([0.05, 0.5, 0.9, 1.0, 1.5, 5.0])
    sol = bulk_service_queue(lam, mu, K, N, packet_bytes=1468)
    for i, rate in enumerate(lam):
        pi = dense_stationary(rate, mu, K, N)
        np.testing.assert_allclose(sol.occupancy_distribution[i], pi, rtol=0, atol=1e-12)
        assert sol.mean_occupancy[i] == pytest.approx(np.arange(K + 1) @ pi, rel=1e-10)
        assert sol.busy_probability[i] == pytest.approx(pi[N:].sum(), abs=1e-12)
        assert sol.throughput_pps[i] == pytest.approx(rate * (1 - pi[K]), rel=1e-12)
    assert sol.throughput_bps is not None
    np.testing.assert_allclose(sol.throughput_bps, 8 * 1468 * sol.throughput_pps, rtol=1e-15)


@pytest.mark.parametrize("ratio", [1e-7, 1e-3, 1.0, 1e3, 1e7])
def test_extreme_ratios_match_high_precision(ratio: float) -> None:
    # Reference: 350-digit mpmath LU solve of the same generator.  K = 40, N = 8 puts
    # mu/lam = 1e7 and 1e-7 on the log-domain path and the others on the linear path;
    # probabilities span down to ~1e-260.  Tolerance: 1e-11 relative on every state above
    # 1e-300 (the recursion has no subtraction, so relative accuracy survives).
    K, N, mu = 40, 8, 1.0
    lam = mu / ratio
    ref = mpmath_stationary(lam, mu, K, N, dps=350)
    got = bulk_service_queue(lam, mu, K, N).occupancy_distribution[0]
    keep = ref > 1e-300
    np.testing.assert_allclose(got[keep], ref[keep], rtol=1e-11, atol=0)
    assert np.all(got[~keep] < 1e-290)


def test_large_ring_matches_sparse_solve_and_is_flow_balanced() -> None:
    # Reference: scipy.sparse.linalg.spsolve of the 4097-state generator built here.
    # Tolerance: 1e-12 absolute per probability.  Loads 0.3..3 N*mu put every rate on the
    # log-domain path (the values span far beyond the double range).
    K, N, mu = 4096, 64, 20_800.0
    lam = N * mu * np.array([0.3, 0.99, 3.0])
    sol = bulk_service_queue(lam, mu, K, N)
    n = np.arange(K + 1)
    for i, rate in enumerate(lam):
        up, down = n[:-1], n[N:]
        Q = sp.coo_array(
            (
                np.r_[np.full(up.size, rate), np.full(down.size, mu)],
                (np.r_[up, down], np.r_[up + 1, down - N]),
            ),
            shape=(K + 1, K + 1),
        ).tocsr()
        Q = Q - sp.diags_array(Q.sum(axis=1))
        A = Q.T.tolil()
        A[K, :] = 1.0
        rhs = np.zeros(K + 1)
        rhs[K] = 1.0
        pi = spla.spsolve(A.tocsc(), rhs)
        np.testing.assert_allclose(sol.occupancy_distribution[i], pi, rtol=0, atol=1e-12)
    # Flow balance: lam (1 - l) = N mu P(busy), tolerance 1e-10 relative.
    np.testing.assert_allclose(
        lam * (1 - sol.loss_probability), N * mu * sol.busy_probability, rtol=1e-10
    )


@pytest.mark.parametrize(("K", "N"), [(64, 6), (8, 1), (300, 32), (6, 6)])
def test_flow_balance(K: int, N: int) -> None:
    # Accepted rate = batch service rate x P(service running): lam (1 - l) = N mu P(n >= N)
    # (rate conservation across the chain; docs/conventions.md §3).  P(n >= N) is summed here from
    # the returned distribution.  Tolerance: 1e-11 relative.
    mu = 20_800.0
    lam = np.geomspace(0.01, 100.0, 41) * N * mu
    sol = bulk_service_queue(lam, mu, K, N)
    busy = sol.occupancy_distribution[:, N:].sum(axis=1)
    np.testing.assert_allclose(lam * (1 - sol.loss_probability), N * mu * busy, rtol=1e-11)
    np.testing.assert_allclose(sol.busy_probability, busy, rtol=1e-12)
    np.testing.assert_allclose(sol.throughput_pps, sol.interrupt_rate * sol.mean_batch, rtol=1e-11)


def test_shapes_types_and_read_only() -> None:
    sol = bulk_service_queue(50_000.0, 20_800.0, 64, 6)
    assert isinstance(sol, BulkQueueSolution)
    assert sol.occupancy_distribution.shape == (1, 65)
    assert sol.loss_probability.shape == (1,)
    assert sol.throughput_bps is None
    assert sol.method == "cut-recursion"
    assert (sol.capacity, sol.batch, sol.min_batch) == (64, 6, 6)
    with pytest.raises(ValueError):
        sol.loss_probability[0] = 0.5
    assert np.shape(loss_probability(50_000.0, 20_800.0, 64, 6)) == ()
    assert loss_probability([5e4, 6e4], 20_800.0, 64, 6).shape == (2,)
    # The caller's array is copied, not frozen.
    rates = np.array([5e4, 6e4])
    bulk_service_queue(rates, 20_800.0, 64, 6)
    rates[0] = 1.0
    # The loss-only fast path equals the full solution (the same recursion, summed in
    # another order: a few ulps).
    fast = float(loss_probability(50_000.0, 20_800.0, 64, 6))
    assert fast == pytest.approx(sol.loss_probability[0], rel=1e-14)
