"""A timed transition whose rate is 0 at a marking is not enabled there (SPNP semantics).

Reference: Ciardo, Muppala and Trivedi, "SPNP: Stochastic Petri Net Package" (PNPM
1989): a marking-dependent rate of zero disables the transition, so it neither fires
nor keeps its marking from being dead.  The counts and probabilities below follow by
hand from that rule.
"""

from __future__ import annotations

import numpy as np

from srn import Net, compile_net, reachability_graph, steady_state, timed


def test_a_zero_rate_disables_the_transition_so_the_marking_is_dead():
    # From issue #10: with a token in a, go's rate is 0, so go cannot fire; the only
    # reachable marking is the initial one, and it is dead.
    net = Net.from_dict(
        {
            "places": {"a": 1, "b": 0},
            "transitions": [
                {"name": "go", "rate": "if(#a>0,0,1)", "inputs": {"a": 1}, "outputs": {"b": 1}},
                {"name": "back", "rate": 1, "inputs": {"b": 1}, "outputs": {"a": 1}},
            ],
        }
    )
    graph = reachability_graph(net)
    assert graph.n_states == 1
    assert graph.marking(0) == {"a": 1, "b": 0}
    assert graph.dead_states.tolist() == [0]
    assert graph.n_edges == 0


def test_a_rate_that_drops_to_zero_bounds_an_otherwise_unbounded_queue():
    # Arrivals at rate lam while q < 3, rate 0 from q = 3 on: the chain is M/M/1/3,
    # whose stationary law is rho^k (1 - rho) / (1 - rho^4), k = 0..3.
    net = Net(
        {"q": 0},
        [
            timed("arrive", "if(#q < 3, lam, 0)", outputs={"q": 1}),
            timed("serve", "mu", inputs={"q": 1}),
        ],
        parameters={"lam": 1.0, "mu": 2.0},
    )
    graph = reachability_graph(net)
    assert graph.n_states == 4
    pi = steady_state(graph.generator()).probabilities
    rho = 0.5
    expected = np.array([rho**k for k in range(4)]) * (1 - rho) / (1 - rho**4)
    order = np.argsort(graph.markings[:, 0])
    np.testing.assert_allclose(pi[order], expected, rtol=1e-12)


def test_rate_parameters_that_reach_zero_re_explore_the_cached_graph():
    # q -> r at rate lam, r -> q at rate 1.  With lam = 0 the first move is disabled:
    # one state; with lam > 0 both states.  The compiled net caches graphs, and must
    # not reuse one across a change in which transitions have rate 0.
    net = Net(
        {"q": 1, "r": 0},
        [
            timed("go", "lam", inputs={"q": 1}, outputs={"r": 1}),
            timed("back", 1.0, inputs={"r": 1}, outputs={"q": 1}),
        ],
        parameters={"lam": 0.0},
    )
    compiled = compile_net(net)
    assert compiled.reachability_graph().n_states == 1
    assert compiled.reachability_graph({"lam": 2.0}).n_states == 2
    assert compiled.reachability_graph({"lam": 3.0}).n_states == 2
    assert compiled.reachability_graph({"lam": 0.0}).n_states == 1
    pi = steady_state(compiled.reachability_graph({"lam": 3.0}).generator()).probabilities
    np.testing.assert_allclose(sorted(pi), [0.25, 0.75], rtol=1e-12)


def test_zero_rate_only_where_the_expression_is_zero():
    # serve's rate mu * (#q - 1) is 0 with one customer: serve is disabled there, so
    # the single-customer marking is dead once arrivals stop (K = 2: q in 0..2 reached
    # from 0 by arrivals, serve only from q = 2 back to q = 1).
    net = Net(
        {"q": 0},
        [
            timed("arrive", 1.0, outputs={"q": 1}, inhibitors={"q": 2}),
            timed("serve", "mu * (#q - 1)", inputs={"q": 1}),
        ],
        parameters={"mu": 1.0},
    )
    graph = reachability_graph(net)
    assert sorted(graph.markings[:, 0].tolist()) == [0, 1, 2]
    q0, q1, q2 = (graph.index({"q": k}) for k in range(3))
    Q = graph.generator().toarray()
    assert Q[q1, q0] == 0.0  # serve disabled at q = 1
    assert Q[q2, q1] == 1.0  # rate mu * (2 - 1) at q = 2
    assert Q[q1, q2] == 1.0  # arrivals continue
