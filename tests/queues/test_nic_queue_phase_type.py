"""Phase-type interrupt service, fixed batch: checks against chains built in the test."""

from __future__ import annotations

import mpmath
import numpy as np
import pytest
import scipy.sparse as sp
import scipy.sparse.linalg as spla
from hypothesis import given, settings
from hypothesis import strategies as st

from queues import bulk_service_queue
from queues._general import general_bulk_queue

MU = 20_800.0  # interrupts/s (docs/conventions.md §2 check value)


def erlang(k: int, mu: float) -> tuple[np.ndarray, np.ndarray]:
    """Erlang-k with mean 1/mu: k phases in series, each at rate k*mu."""
    alpha = np.zeros(k)
    alpha[0] = 1.0
    T = -k * mu * np.eye(k) + k * mu * np.eye(k, k=1)
    return alpha, T


def hyperexponential(mu: float, scv: float) -> tuple[np.ndarray, np.ndarray]:
    """Two-phase hyperexponential with mean 1/mu, squared coefficient of variation scv and
    balanced means (p1/mu1 = p2/mu2)."""
    p = 0.5 * (1 + np.sqrt((scv - 1) / (scv + 1)))
    return np.array([p, 1 - p]), np.diag([-2 * p * mu, -2 * (1 - p) * mu])


def n_phase_generator(
    lam: float, K: int, N: int, alpha: np.ndarray, T: np.ndarray
) -> tuple[sp.csr_array, np.ndarray, np.ndarray]:
    """Generator of the (n, phase) chain, built state by state, with each state's n and t_k.

    States: (n, None) idle for n < N; (n, k) serving in phase k for n >= N.  Arrivals
    n -> n+1 (lost at K; idle N-1 -> (N, k) with prob alpha_k); phase moves T[k, j];
    completion at t_k = -sum_j T[k, j] to n - N, idle if n - N < N, else phases alpha.
    Returns Q (sparse), the level n of every state and its completion rate (0 when idle).
    A row sum of T that should be 0 can come out as -1e-15: t is clipped at 0, as the
    solver's validation documents (a negative rate would make Q no generator).
    """
    m = alpha.size
    t = np.clip(-T.sum(axis=1), 0.0, None)
    states = [(n, None) for n in range(N)] + [(n, k) for n in range(N, K + 1) for k in range(m)]
    index = {s: i for i, s in enumerate(states)}
    rows, cols, vals = [], [], []

    def enter(n: int) -> list[tuple[tuple[int, int | None], float]]:
        if n < N:
            return [((n, None), 1.0)]
        return [((n, k), float(alpha[k])) for k in range(m) if alpha[k] > 0]

    for (n, k), i in index.items():
        targets: list[tuple[tuple[int, int | None], float]] = []
        if k is None:
            targets += [(s, lam * p) for s, p in enter(n + 1)]
        else:
            if n < K:
                targets.append(((n + 1, k), lam))
            targets += [((n, j), T[k, j]) for j in range(m) if j != k and T[k, j] > 0]
            targets += [(s, t[k] * p) for s, p in enter(n - N)]
        for s, rate in targets:
            rows.append(i)
            cols.append(index[s])
            vals.append(rate)
    size = len(states)
    Q = sp.csr_array((vals, (rows, cols)), shape=(size, size))
    Q = Q - sp.diags_array(Q.sum(axis=1))
    level = np.array([n for n, _ in states])
    completion = np.array([0.0 if k is None else t[k] for _, k in states])
    return Q, level, completion


def n_phase_chain(lam: float, K: int, N: int, alpha: np.ndarray, T: np.ndarray) -> np.ndarray:
    """Occupancy distribution of the (n, phase) chain of :func:`n_phase_generator`, solved
    by scipy.sparse.linalg.spsolve with one balance equation replaced by sum = 1."""
    Q, level, _ = n_phase_generator(lam, K, N, alpha, T)
    size = Q.shape[0]
    A = Q.T.tolil()
    A[0, :] = 1.0
    rhs = np.zeros(size)
    rhs[0] = 1.0
    pi = spla.spsolve(A.tocsc(), rhs)
    return np.bincount(level, weights=pi, minlength=K + 1)


LAMBDAS = np.array([0.1, 0.5, 0.9, 1.2, 3.0]) * 6 * MU


def test_one_phase_equals_exponential_solver() -> None:
    # Reference: the exponential fast path (cut recursion), a different algorithm from the
    # phase-type level censoring.  Tolerance: 1e-12 absolute per probability, 1e-10
    # relative on the loss (the loss spans 1e-16..0.7 here).
    phase = (np.array([1.0]), np.array([[-MU]]))
    ph = bulk_service_queue(LAMBDAS, None, 64, 6, phase_type=phase)
    ex = bulk_service_queue(LAMBDAS, MU, 64, 6)
    assert ph.method != ex.method
    np.testing.assert_allclose(ph.occupancy_distribution, ex.occupancy_distribution, atol=1e-12)
    np.testing.assert_allclose(ph.loss_probability, ex.loss_probability, rtol=1e-10)
    np.testing.assert_allclose(ph.busy_probability, ex.busy_probability, rtol=1e-12)
    np.testing.assert_allclose(ph.mean_occupancy, ex.mean_occupancy, rtol=1e-12)


@pytest.mark.parametrize("k", [2, 3, 5])
def test_erlang_matches_independent_n_phase_chain(k: int) -> None:
    # Reference: sparse direct solve of the (n, phase) chain built above.  Tolerance:
    # 1e-12 absolute per probability (the reference LU is normwise accurate only).
    K, N = 64, 6
    alpha, T = erlang(k, MU)
    sol = bulk_service_queue(LAMBDAS, None, K, N, phase_type=(alpha, T), packet_bytes=1468)
    for i, lam in enumerate(LAMBDAS):
        ref = n_phase_chain(lam, K, N, alpha, T)
        np.testing.assert_allclose(sol.occupancy_distribution[i], ref, rtol=0, atol=1e-12)
        assert sol.busy_probability[i] == pytest.approx(ref[N:].sum(), abs=1e-12)


@pytest.mark.parametrize(("K", "N"), [(20, 3), (5, 5), (12, 1)])
def test_hyperexponential_and_coupled_phases_match_independent_chain(K: int, N: int) -> None:
    # Reference: the (n, phase) chain above; one H2 (scv 4) and one phase-type with
    # back-and-forth phase moves and a mixed alpha.  Tolerance: 1e-12 absolute.
    coupled = (np.array([0.3, 0.7]), np.array([[-0.5, 0.1], [0.2, -3.0]]) * MU)
    for alpha, T in (hyperexponential(MU, 4.0), coupled):
        sol = bulk_service_queue(LAMBDAS, None, K, N, phase_type=(alpha, T))
        for i, lam in enumerate(LAMBDAS):
            ref = n_phase_chain(lam, K, N, alpha, T)
            np.testing.assert_allclose(sol.occupancy_distribution[i], ref, rtol=0, atol=1e-12)


def mpmath_n_phase_chain(
    lam: float, K: int, N: int, alpha: np.ndarray, T: np.ndarray, dps: int
) -> np.ndarray:
    """The chain of n_phase_chain, solved by an mpmath LU in dps digits."""
    m = alpha.size
    t = -T.sum(axis=1)
    states = [(n, None) for n in range(N)] + [(n, k) for n in range(N, K + 1) for k in range(m)]
    index = {s: i for i, s in enumerate(states)}
    size = len(states)
    with mpmath.workdps(dps):
        A = mpmath.zeros(size, size)  # A = Q^T

        def enter(n: int) -> list[tuple[tuple[int, int | None], mpmath.mpf]]:
            if n < N:
                return [((n, None), mpmath.mpf(1))]
            return [((n, k), mpmath.mpf(alpha[k])) for k in range(m) if alpha[k] > 0]

        for (n, k), i in index.items():
            out: list[tuple[tuple[int, int | None], mpmath.mpf]] = []
            if k is None:
                out += [(s, lam * p) for s, p in enter(n + 1)]
            else:
                if n < K:
                    out.append(((n + 1, k), mpmath.mpf(lam)))
                out += [((n, j), mpmath.mpf(T[k, j])) for j in range(m) if j != k and T[k, j] > 0]
                out += [(s, t[k] * p) for s, p in enter(n - N)]
            for s, rate in out:
                A[index[s], i] += rate
                A[i, i] -= rate
        for j in range(size):
            A[size - 1, j] = 1
        rhs = mpmath.zeros(size, 1)
        rhs[size - 1] = 1
        x = mpmath.lu_solve(A, rhs)
        dist = [mpmath.mpf(0)] * (K + 1)
        for (n, _), i in index.items():
            dist[n] += x[i]
        return np.array([float(v) for v in dist])


@pytest.mark.parametrize("ratio", [1e-6, 1.0, 1e6])
def test_extreme_ratios_match_high_precision(ratio: float) -> None:
    # Reference: 250-digit mpmath LU solve of the (n, phase) chain, Erlang-2 service,
    # K = 20, N = 3, lam * E[S] = 1/ratio; probabilities span down to ~1e-113.
    # Tolerance: 1e-11 relative on every probability (the level censoring is
    # subtraction-free, so tiny probabilities keep their relative accuracy).
    alpha, T = erlang(2, 1.0)
    ref = mpmath_n_phase_chain(1.0 / ratio, 20, 3, alpha, T, dps=250)
    got = bulk_service_queue(1.0 / ratio, None, 20, 3, phase_type=(alpha, T))
    np.testing.assert_allclose(got.occupancy_distribution[0], ref, rtol=1e-11, atol=0)


def test_phase_type_flow_balance() -> None:
    # Accepted rate = interrupt completion rate x N, where the completion rate is summed
    # over phases as sum_k P(serving, phase k) t_k (rate conservation).  Tolerance 1e-10.
    alpha, T = erlang(3, MU)
    lam = np.geomspace(0.01, 100, 25) * 6 * MU
    sol = bulk_service_queue(lam, None, 64, 6, phase_type=(alpha, T))
    np.testing.assert_allclose(sol.mean_batch, 6.0)
    np.testing.assert_allclose(lam * (1 - sol.loss_probability), 6 * sol.interrupt_rate, rtol=1e-10)
    np.testing.assert_allclose(sol.occupancy_distribution.sum(axis=1), 1.0, rtol=1e-13)


def test_levels_and_sparse_lu_methods_agree() -> None:
    # Internal cross-check of the two general algorithms on fixed batches (a == b): the
    # vectorised level censoring and the reduced sparse LU.  Tolerance 1e-13 absolute.
    alpha, T = hyperexponential(MU, 4.0)
    for K, N in ((64, 6), (9, 9), (30, 1)):
        x = general_bulk_queue(LAMBDAS, K, N, N, alpha, T, method="levels")
        y = general_bulk_queue(LAMBDAS, K, N, N, alpha, T, method="sparse-lu")
        np.testing.assert_allclose(x.distribution, y.distribution, rtol=0, atol=1e-13)
        np.testing.assert_allclose(x.interrupt_rate, y.interrupt_rate, rtol=1e-12)


def test_service_variability_orders_the_loss() -> None:
    # Same mean service time, more variable service -> more loss (Erlang-4 < exponential
    # < H2), at the paper's parameters (K = 64, N = 6, 500..1000 Mbps at 1468 B).
    lam = np.linspace(500e6, 1000e6, 6) / (8 * 1468)
    e4 = bulk_service_queue(lam, None, 64, 6, phase_type=erlang(4, MU)).loss_probability
    ex = bulk_service_queue(lam, MU, 64, 6).loss_probability
    h2 = bulk_service_queue(lam, None, 64, 6, phase_type=hyperexponential(MU, 4.0))
    assert np.all(e4 < ex)
    assert np.all(ex < h2.loss_probability)


def test_sparse_sub_generator_is_accepted() -> None:
    alpha, T = erlang(2, MU)
    dense = bulk_service_queue(LAMBDAS, None, 64, 6, phase_type=(alpha, T))
    sparse = bulk_service_queue(LAMBDAS, None, 64, 6, phase_type=(alpha, sp.csr_array(T)))
    np.testing.assert_array_equal(dense.loss_probability, sparse.loss_probability)


def dense_gth(Q: np.ndarray) -> np.ndarray:
    """Stationary vector of a dense irreducible generator by GTH state reduction
    (Grassmann, Taksar and Heyman, Oper. Res. 33(5), 1985), state by state on the whole
    chain -- no level structure.  Subtraction-free, so every entry keeps its relative
    accuracy (O'Cinneide, Numer. Math. 65, 1993)."""
    A = np.array(Q, dtype=np.float64)
    np.fill_diagonal(A, 0.0)
    size = A.shape[0]
    out = np.zeros(size)
    for k in range(size - 1, 0, -1):
        out[k] = A[k, :k].sum()
        A[:k, :k] += np.outer(A[:k, k] / out[k], A[k, :k])  # diagonal: self-loops, unused
    pi = np.zeros(size)
    pi[0] = 1.0
    for k in range(1, size):
        pi[k] = pi[:k] @ A[:k, k] / out[k]
    return pi / pi.sum()


# A rate of a random phase-type pair: zero (a missing transition) or 0.01..100 (1/s).
ph_rates = st.one_of(st.just(0.0), st.floats(min_value=1e-2, max_value=1e2))


@st.composite
def phase_type_pairs(draw: st.DrawFn) -> tuple[np.ndarray, np.ndarray]:
    """Random (alpha, T) of order 1..6: sparse alpha, moves between any two phases.

    Absorption is made certain by giving every phase without an exit rate a move to a
    later phase, and the last phase an exit rate.
    """
    m = draw(st.integers(min_value=1, max_value=6))
    weights = np.array(
        draw(st.lists(st.one_of(st.just(0.0), st.floats(1e-2, 1.0)), min_size=m, max_size=m))
    )
    weights[draw(st.integers(min_value=0, max_value=m - 1))] += 1.0
    off = np.array(draw(st.lists(ph_rates, min_size=m * m, max_size=m * m))).reshape(m, m)
    np.fill_diagonal(off, 0.0)
    exits = np.array(draw(st.lists(ph_rates, min_size=m, max_size=m)))
    for k in range(m - 1):
        if exits[k] == 0.0 and not off[k, k + 1 :].any():
            off[k, k + 1] = draw(st.floats(min_value=1e-2, max_value=1e2))
    if exits[m - 1] == 0.0:
        exits[m - 1] = draw(st.floats(min_value=1e-2, max_value=1e2))
    T = off - np.diag(off.sum(axis=1) + exits)
    return weights / weights.sum(), T


@settings(max_examples=80, deadline=None)
@given(
    ph=phase_type_pairs(),
    N=st.integers(min_value=1, max_value=5),
    extra=st.integers(min_value=0, max_value=10),
    loads=st.lists(st.floats(min_value=1e-2, max_value=1e2), min_size=1, max_size=40),
)
def test_random_phase_type_matches_dense_gth(
    ph: tuple[np.ndarray, np.ndarray], N: int, extra: int, loads: list[float]
) -> None:
    # Reference: the (n, phase) generator built state by state (n_phase_generator) and
    # solved densely by GTH, per rate.  Lists of 16 rates or more take the solver's
    # block path, shorter ones its one-rate-at-a-time path.  Both methods are
    # subtraction-free, so the tolerance is relative on every probability, tiny ones
    # included: 1e-12 (observed up to 3e-14 over 3,000 examples of up to 71 states).
    alpha, T = ph
    K = N + extra
    mean = float(alpha @ np.linalg.solve(-T, np.ones(alpha.size)))
    lam = np.asarray(loads) * N / mean
    sol = bulk_service_queue(lam, None, K, N, phase_type=(alpha, T))
    for i, rate in enumerate(lam):
        Q, level, completion = n_phase_generator(float(rate), K, N, alpha, T)
        pi = dense_gth(Q.toarray())
        ref = np.bincount(level, weights=pi, minlength=K + 1)
        np.testing.assert_allclose(sol.occupancy_distribution[i], ref, rtol=1e-12, atol=0)
        assert sol.interrupt_rate[i] == pytest.approx(pi @ completion, rel=1e-12, abs=0)


def test_block_and_single_rate_paths_agree() -> None:
    # The compiled solver takes blocks of rates side by side (>= 16 rates) or one rate at
    # a time; each rate gets the same operations in the same order either way, so the two
    # must agree to rounding (1e-14 relative allows a vectorised log/exp differing in the
    # last bit).  The extreme loads give probabilities down to ~1e-127.
    coupled = (np.array([0.3, 0.0, 0.7]), np.array([[-5, 1, 2], [0.5, -1, 0], [3, 0, -4.0]]) * MU)
    lam = np.geomspace(1e-3, 1e3, 37) * 6 * MU
    together = bulk_service_queue(lam, None, 64, 6, phase_type=coupled)
    for i in (0, 18, 36):
        alone = bulk_service_queue(lam[i], None, 64, 6, phase_type=coupled)
        np.testing.assert_allclose(
            together.occupancy_distribution[i], alone.occupancy_distribution[0], rtol=1e-14, atol=0
        )
        assert together.interrupt_rate[i] == pytest.approx(alone.interrupt_rate[0], rel=1e-14)
