"""General bulk-service rule [a, b]: checks against the full (n, batch, phase) chain."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp
import scipy.sparse.linalg as spla

from queues import bulk_service_queue
from queues._general import general_bulk_queue

MU = 20_800.0


def full_chain(
    lam: float, K: int, a: int, b: int, alpha: np.ndarray, T: np.ndarray
) -> tuple[np.ndarray, float, float]:
    """Occupancy distribution, P(busy) and mean batch of the [a, b] chain, state by state.

    States: (n, 0, -) idle for n < a; (n, s, k) serving a batch of s in phase k for
    a <= s <= b, s <= n <= K.  Arrivals n -> n+1 (lost at K; idle a-1 starts a batch of a);
    phase moves T[k, j]; completion at t_k leaves n - s packets: idle if n - s < a, else a
    new batch min(n - s, b) with phases alpha.  Solved by spsolve with the balance
    equation of idle state 0 replaced by sum = 1.  This is the chain without any of the
    reductions the solver uses (side chains, landing vectors).
    """
    m = alpha.size
    t = -T.sum(axis=1)
    states = [(n, 0, -1) for n in range(a)]
    states += [(n, s, k) for s in range(a, b + 1) for n in range(s, K + 1) for k in range(m)]
    index = {st: i for i, st in enumerate(states)}

    def start(n: int) -> list[tuple[tuple[int, int, int], float]]:
        if n < a:
            return [((n, 0, -1), 1.0)]
        s = min(n, b)
        return [((n, s, k), float(alpha[k])) for k in range(m) if alpha[k] > 0]

    rows, cols, vals = [], [], []
    for (n, s, k), i in index.items():
        if s == 0:
            out = [(st, lam * p) for st, p in start(n + 1)]
        else:
            out = [((n + 1, s, k), lam)] if n < K else []
            out += [((n, s, j), T[k, j]) for j in range(m) if j != k and T[k, j] > 0]
            out += [(st, t[k] * p) for st, p in start(n - s)]
        for st, rate in out:
            rows.append(i)
            cols.append(index[st])
            vals.append(rate)
    size = len(states)
    Q = sp.csr_array((vals, (rows, cols)), shape=(size, size))
    Q = Q - sp.diags_array(Q.sum(axis=1))
    A = Q.T.tolil()
    A[0, :] = 1.0
    rhs = np.zeros(size)
    rhs[0] = 1.0
    pi = spla.spsolve(A.tocsc(), rhs)
    dist = np.zeros(K + 1)
    busy = completions = packets = 0.0
    for (n, s, k), i in index.items():
        dist[n] += pi[i]
        if s:
            busy += pi[i]
            completions += pi[i] * t[k]
            packets += pi[i] * t[k] * s
    return dist, busy, packets / completions


EXPONENTIAL = (np.array([1.0]), np.array([[-MU]]))
ERLANG2 = (np.array([1.0, 0.0]), np.array([[-2 * MU, 2 * MU], [0.0, -2 * MU]]))
LAMBDAS = np.array([0.05, 0.4, 1.0, 2.5]) * 6 * MU


def test_a_equals_b_equals_fixed_batch_solver() -> None:
    # Reference: the fixed-batch fast path (cut recursion).  min_batch = batch routes the
    # same chain through the general solver (level censoring); the [a, b] sparse-LU
    # method is forced as well, since the public API only uses it for a < b.
    # Tolerance: 1e-13 absolute per probability, 1e-9 relative on the loss (1e-38..0.6).
    fixed = bulk_service_queue(LAMBDAS, MU, 64, 6)
    general = bulk_service_queue(LAMBDAS, MU, 64, 6, min_batch=6)
    sparse = general_bulk_queue(LAMBDAS, 64, 6, 6, *EXPONENTIAL, method="sparse-lu")
    assert general.method != fixed.method
    assert sparse.method == "reduced-sparse-lu"
    for dist, busy in (
        (general.occupancy_distribution, general.busy_probability),
        (sparse.distribution, sparse.busy),
    ):
        np.testing.assert_allclose(dist, fixed.occupancy_distribution, rtol=0, atol=1e-13)
        np.testing.assert_allclose(busy, fixed.busy_probability, rtol=0, atol=1e-13)
    np.testing.assert_allclose(general.loss_probability, fixed.loss_probability, rtol=1e-9)


@pytest.mark.parametrize(
    ("K", "a", "b"), [(40, 1, 6), (40, 2, 6), (25, 3, 4), (12, 1, 12), (30, 5, 9)]
)
@pytest.mark.parametrize("service", ["exponential", "erlang2"])
def test_a_less_than_b_matches_full_chain(K: int, a: int, b: int, service: str) -> None:
    # Reference: full_chain above (sparse direct solve).  Tolerance: 1e-12 absolute per
    # probability (both solves are normwise accurate); busy probability 1e-12 absolute;
    # mean batch 1e-10 relative.
    alpha, T = EXPONENTIAL if service == "exponential" else ERLANG2
    mu = None if service == "erlang2" else MU
    phase = None if service == "exponential" else (alpha, T)
    sol = bulk_service_queue(LAMBDAS, mu, K, b, min_batch=a, phase_type=phase)
    for i, lam in enumerate(LAMBDAS):
        dist, busy, mean_batch = full_chain(lam, K, a, b, alpha, T)
        np.testing.assert_allclose(sol.occupancy_distribution[i], dist, rtol=0, atol=1e-12)
        assert sol.busy_probability[i] == pytest.approx(busy, abs=1e-12)
        assert sol.mean_batch[i] == pytest.approx(mean_batch, rel=1e-10)


@pytest.mark.parametrize(("a", "b"), [(1, 6), (3, 8), (6, 6)])
def test_general_rule_flow_balance(a: int, b: int) -> None:
    # Accepted rate = completion rate x mean batch, both summed over the server state by
    # the solver (rate conservation).  Tolerance 1e-10 relative.
    lam = np.geomspace(0.01, 100, 17) * b * MU
    sol = bulk_service_queue(lam, MU, 64, b, min_batch=a)
    np.testing.assert_allclose(
        lam * (1 - sol.loss_probability), sol.interrupt_rate * sol.mean_batch, rtol=1e-10
    )
    assert np.all((sol.mean_batch >= a - 1e-12) & (sol.mean_batch <= b + 1e-12))
