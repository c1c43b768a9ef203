"""Transient distributions: uniformisation (and expm_multiply) against scipy.linalg.expm.

The reference is p(t) = p(0) expm(Q t), computed densely with ``scipy.linalg.expm``
(Pade approximation with scaling and squaring, Al-Mohy & Higham 2009), a method
that shares nothing with uniformisation.  Tolerance 1e-9 absolute per probability:
uniformisation is run with a Poisson truncation mass of 1e-12, and expm is accurate to
about 1e-13 on these well-scaled small matrices.
"""

from __future__ import annotations

import numpy as np
import pytest
import scipy.linalg as la

from srn import Net, SRNError, reachability_graph, timed, transient

TOL = 1e-9
TIMES = [0.0, 1e-3, 0.05, 0.7, 2.0, 9.5, 40.0]


def reference(Q, p0, times):
    Q = np.asarray(Q, dtype=float)
    return np.array([p0 @ la.expm(Q * t) for t in times])


def random_generator(n, seed, density=0.6):
    rng = np.random.default_rng(seed)
    Q = rng.uniform(0.05, 3.0, (n, n)) * (rng.random((n, n)) < density)
    Q += np.diag(np.ones(n - 1) * 0.1, 1) + np.diag([0.1], -(n - 1))  # a ring: irreducible
    np.fill_diagonal(Q, 0.0)
    np.fill_diagonal(Q, -Q.sum(axis=1))
    return Q


@pytest.mark.parametrize("seed", [0, 1, 2])
@pytest.mark.parametrize("method", ["uniformization", "expm"])
def test_random_chain_against_expm(seed, method):
    Q = random_generator(7, seed)
    p0 = np.random.default_rng(seed + 100).dirichlet(np.ones(7))
    sol = transient(Q, TIMES, p0, method=method)
    assert sol.method == method
    np.testing.assert_allclose(sol.probabilities, reference(Q, p0, TIMES), atol=TOL, rtol=0)
    np.testing.assert_array_equal(sol.times, TIMES)


def test_stiff_chain_against_expm():
    # Rates spanning six orders of magnitude: a fast pair (1e3) leaking slowly (1e-3)
    # into a third state that returns at 1e-2.
    Q = np.array(
        [
            [-1e3 - 1e-3, 1e3, 1e-3],
            [1e3, -1e3, 0.0],
            [1e-2, 0.0, -1e-2],
        ]
    )
    p0 = np.array([0.0, 1.0, 0.0])
    times = [1e-5, 1e-4, 1e-3, 0.1, 1.0, 5.0]
    sol = transient(Q, times, p0, method="uniformization")
    np.testing.assert_allclose(sol.probabilities, reference(Q, p0, times), atol=TOL, rtol=0)
    assert np.all(sol.error_bound <= 1e-12)
    expm_sol = transient(Q, times, p0, method="expm")
    np.testing.assert_allclose(expm_sol.probabilities, sol.probabilities, atol=TOL, rtol=0)


def test_net_transient_with_rewards_and_unsorted_times():
    lam, mu, K = 1.4, 1.0, 5
    net = Net(
        {"q": 0},
        [
            timed("arrive", lam, outputs={"q": 1}, inhibitors={"q": K}),
            timed("serve", mu, inputs={"q": 1}),
        ],
    )
    graph = reachability_graph(net)
    # The birth-death generator written from the model, in the graph's state order.
    counts = graph.markings[:, 0]
    Q = np.zeros((K + 1, K + 1))
    for i, n in enumerate(counts):
        for j, m in enumerate(counts):
            Q[i, j] = lam if m == n + 1 else mu if m == n - 1 else 0.0
    np.fill_diagonal(Q, -Q.sum(axis=1))
    times = [3.0, 0.0, 0.25, 12.0]
    sol = transient(graph.generator(), times, graph.initial_distribution)
    ref = reference(Q, graph.initial_distribution, times)
    np.testing.assert_allclose(sol.probabilities, ref, atol=TOL, rtol=0)
    # Expected reward at time t, one value per time.
    mean = graph.expected_reward("#q", sol.probabilities)
    assert mean.shape == (4,)
    np.testing.assert_allclose(mean, ref @ counts, atol=TOL * K)
    assert mean[1] == 0.0  # time 0: the queue starts empty


def test_transient_tends_to_steady_state():
    Q = random_generator(5, 7)
    p0 = np.eye(5)[0]
    far = transient(Q, [200.0], p0).probabilities[0]
    A = Q.T.copy()
    A[-1] = 1.0
    pi = np.linalg.solve(A, np.eye(5)[-1])
    np.testing.assert_allclose(far, pi, atol=TOL)


def test_absorbing_chain_transient_keeps_mass():
    # A state with no exit: uniformisation must leave its mass alone.
    Q = np.array([[-2.0, 2.0], [0.0, 0.0]])
    sol = transient(Q, [0.5, 3.0], [1.0, 0.0])
    np.testing.assert_allclose(sol.probabilities[:, 0], np.exp(-2.0 * np.array([0.5, 3.0])))
    np.testing.assert_allclose(sol.probabilities.sum(axis=1), 1.0, atol=1e-12)


@pytest.mark.parametrize(
    ("times", "initial"),
    [
        ([-1.0], [1.0, 0.0]),
        ([float("nan")], [1.0, 0.0]),
        ([1.0], [1.0, 0.0, 0.0]),
        ([1.0], [0.7, 0.7]),
        ([1.0], [1.5, -0.5]),
    ],
)
def test_transient_rejects_bad_times_and_initial_vectors(times, initial):
    Q = np.array([[-1.0, 1.0], [1.0, -1.0]])
    with pytest.raises(SRNError):
        transient(Q, times, initial)
