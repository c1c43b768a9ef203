"""Steady-state solution: agreement of the dense, direct and iterative methods, residuals,
and the handling of chains that are not ergodic or that have transient states.
"""

from __future__ import annotations

import numpy as np
import pytest
from scipy.special import logsumexp

from srn import Net, NotErgodicError, reachability_graph, steady_state, timed


def tandem(K: int) -> Net:
    """Two exponential stations in series with blocking: a (K+1)^2-state chain."""
    return Net(
        {"q1": 0, "q2": 0},
        [
            timed("arrive", 1.1, outputs={"q1": 1}, inhibitors={"q1": K}),
            timed(
                "serve1",
                "1.3 + 0.05 * #q1",
                inputs={"q1": 1},
                outputs={"q2": 1},
                inhibitors={"q2": K},
            ),
            timed("serve2", 1.2, inputs={"q2": 1}),
        ],
    )


@pytest.fixture(scope="module")
def tandem_graph():
    graph = reachability_graph(tandem(30))
    assert graph.n_states == 31**2
    return graph


def test_dense_direct_and_iterative_agree(tandem_graph):
    Q = tandem_graph.generator()
    dense = steady_state(Q, method="dense")
    direct = steady_state(Q, method="direct")
    iterative = steady_state(Q, method="iterative")
    assert dense.method == "dense"
    assert direct.method == "direct"
    assert isinstance(iterative.method, str) and iterative.method not in ("dense", "direct")
    for result in (dense, direct, iterative):
        pi = result.probabilities
        assert pi.shape == (tandem_graph.n_states,)
        assert np.all(pi >= 0)
        assert pi.sum() == pytest.approx(1.0, abs=1e-14)
        # The reported residual is ||pi Q||_1, recomputed here.
        assert result.residual == pytest.approx(np.abs(Q.T @ pi).sum(), rel=1e-6, abs=1e-18)
        assert result.residual <= 1e-10
        assert result.transient_states == 0
    # Different algorithms, same answer: 1e-10 absolute per state on a 961-state chain
    # whose residuals are all below 1e-10.
    np.testing.assert_allclose(direct.probabilities, dense.probabilities, atol=1e-12, rtol=0)
    np.testing.assert_allclose(iterative.probabilities, dense.probabilities, atol=1e-10, rtol=0)
    # Flow balance between the stations: throughput is the same everywhere.
    flows = tandem_graph.throughput(dense.probabilities)
    assert flows["serve1"] == pytest.approx(flows["arrive"], rel=1e-12)
    assert flows["serve2"] == pytest.approx(flows["arrive"], rel=1e-12)


def test_auto_method_is_reported(tandem_graph):
    result = steady_state(tandem_graph.generator())
    assert result.method
    assert result.seconds >= 0
    with pytest.raises(ValueError, match="method"):
        steady_state(tandem_graph.generator(), method="magic")


def two_absorbing_ends() -> Net:
    # From p the token moves to a or to b; each of {a <-> a2} and {b} is closed.
    return Net(
        {"p": 1, "a": 0, "a2": 0, "b": 0},
        [
            timed("to_a", 1.0, inputs={"p": 1}, outputs={"a": 1}),
            timed("to_b", 2.0, inputs={"p": 1}, outputs={"b": 1}),
            timed("a_a2", 1.0, inputs={"a": 1}, outputs={"a2": 1}),
            timed("a2_a", 1.0, inputs={"a2": 1}, outputs={"a": 1}),
        ],
    )


def test_two_closed_classes_are_not_ergodic():
    graph = reachability_graph(two_absorbing_ends())
    with pytest.raises(NotErgodicError) as info:
        steady_state(graph.generator())
    classes = sorted(sorted(int(s) for s in c) for c in info.value.classes)
    expected = sorted(
        [sorted([graph.index({"a": 1}), graph.index({"a2": 1})]), [graph.index({"b": 1})]]
    )
    assert classes == expected
    assert "2 closed classes" in str(info.value)


def test_unichain_with_transient_states():
    # p is transient; {a, b} is the single closed class with rates a->b 3, b->a 1.
    net = Net(
        {"p": 1, "a": 0, "b": 0},
        [
            timed("leave", 5.0, inputs={"p": 1}, outputs={"a": 1}),
            timed("ab", 3.0, inputs={"a": 1}, outputs={"b": 1}),
            timed("ba", 1.0, inputs={"b": 1}, outputs={"a": 1}),
        ],
    )
    graph = reachability_graph(net)
    for method in ("dense", "direct", "iterative"):
        result = steady_state(graph.generator(), method=method)
        pi = result.probabilities
        assert result.transient_states == 1
        assert pi[graph.index({"p": 1})] == 0.0
        # Two-state chain: pi_a = 1/(1+3), pi_b = 3/(1+3).
        assert pi[graph.index({"a": 1})] == pytest.approx(0.25, rel=1e-12)
        assert pi[graph.index({"b": 1})] == pytest.approx(0.75, rel=1e-12)
        assert result.residual < 1e-14


def test_single_state_chain():
    result = steady_state(np.zeros((1, 1)))
    np.testing.assert_array_equal(result.probabilities, [1.0])
    assert result.residual == 0.0


@pytest.mark.parametrize("mu", [2.0, 0.5])
@pytest.mark.parametrize("method", ["auto", "direct", "iterative"])
def test_long_geometric_tail_keeps_its_relative_accuracy(method, mu):
    """M/M/1/K with K = 3001 and rho = 1/2 or 2: probabilities span 900 orders of magnitude,
    with the tiny ones at either end of the chain.

    Reference: the M/M/1/K closed form pi_k = (1 - rho) rho^k / (1 - rho^(K+1))
    (Gross & Harris, Fundamentals of Queueing Theory, sec. 2.5). Pinning one state's
    probability at 1 overflows here when the pinned state is in the tail; the solvers must
    not depend on which state that is. Tolerance for the direct solvers: 1e-12 relative
    on the states that do not underflow (rho^k > 1e-280), 1e-300 absolute on the others.
    A Krylov solver controls the residual (target 1e-12 times the largest rate), not the
    relative error of tiny entries: it is held to 1e-11 absolute.
    """
    K, lam = 3001, 1.0
    graph = reachability_graph(
        Net(
            {"q": 0},
            [
                timed("arrive", lam, outputs={"q": 1}, inhibitors={"q": K}),
                timed("serve", mu, inputs={"q": 1}),
            ],
        )
    )
    result = steady_state(graph.generator(), method=method)
    k = graph.markings[:, 0]
    log_weight = k * np.log(lam / mu)
    expected = np.exp(log_weight - logsumexp(log_weight))
    if method == "iterative":
        np.testing.assert_allclose(result.probabilities, expected, rtol=0, atol=1e-11)
    else:
        big = expected > 1e-280
        np.testing.assert_allclose(result.probabilities[big], expected[big], rtol=1e-12)
        np.testing.assert_allclose(result.probabilities[~big], expected[~big], atol=1e-300)
    assert result.residual <= 1e-12
    if method == "auto":
        assert result.method == "direct"  # a birth-death chain has bandwidth 1
