"""GSPN semantics: immediate transitions, priorities, weights, inhibitors, guards, and
marking-dependent arcs, each checked against a CTMC derived by hand in the test.

Every expected generator below is written down from the net's definition (the
derivation is in the comments), independently of the engine, and compared entry by
entry with the engine's generator; steady states are then compared with a dense
``numpy.linalg.solve`` of the hand-built chain.
"""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from srn import Net, immediate, reachability_graph, steady_state, timed

# Generators are assembled from the same float rates both ways: 1e-13 absorbs the
# rounding of weight normalisation (w / sum w) and nothing else.
ATOL = 1e-13


def expected_generator(graph, edges):
    """Dense generator, in the graph's state order, from hand-derived (from, to, rate)."""
    Q = np.zeros((graph.n_states, graph.n_states))
    for src, dst, rate in edges:
        i, j = graph.index(src), graph.index(dst)
        if i != j:
            Q[i, j] += rate
            Q[i, i] -= rate
    return Q


def dense_steady_state(Q):
    A = Q.T.copy()
    A[-1, :] = 1.0
    b = np.zeros(len(Q))
    b[-1] = 1.0
    return np.linalg.solve(A, b)


def test_weights_priorities_guard_and_a_chain_of_immediates():
    a, b, c, d, u, v = 1.3, 0.7, 2.1, 5.0, 0.4, 0.9
    net = Net(
        {"idle": 1, "v1": 0, "v2": 0, "A": 0, "B": 0, "C": 0, "flag": 0},
        [
            timed("start", a, inputs={"idle": 1}, outputs={"v1": 1}),
            # v1 is vanishing: weight 1 vs 3.
            immediate("i1", weight=1, inputs={"v1": 1}, outputs={"A": 1}),
            immediate("i2", weight=3, inputs={"v1": 1}, outputs={"v2": 1}),
            # v2 is vanishing too (a chain): i3 has priority when its guard holds.
            immediate("i3", priority=2, guard="#flag == 1", inputs={"v2": 1}, outputs={"B": 1}),
            immediate("i4", priority=1, weight=100, inputs={"v2": 1}, outputs={"C": 1}),
            timed("doneA", b, inputs={"A": 1}, outputs={"idle": 1}),
            timed("doneB", c, inputs={"B": 1}, outputs={"idle": 1}),
            timed("doneC", d, inputs={"C": 1}, outputs={"idle": 1}),
            timed("on", u, outputs={"flag": 1}, inhibitors={"flag": 1}),
            timed("off", v, inputs={"flag": 1}),
        ],
    )
    graph = reachability_graph(net)

    def m(loc, flag):
        return {loc: 1, "flag": flag}

    # By hand: from idle, start fires at rate a; i1 wins with probability 1/4 (to A), i2
    # with 3/4 (to v2); from v2, i3 (priority 2) fires when flag = 1 (to B), else i4 (to C).
    edges = []
    for f in (0, 1):
        edges += [
            (m("idle", f), m("A", f), a / 4),
            (m("idle", f), m("B" if f else "C", f), 3 * a / 4),
            (m("A", f), m("idle", f), b),
            (m("B", f), m("idle", f), c),
            (m("C", f), m("idle", f), d),
        ]
    for loc in ("idle", "A", "B", "C"):
        edges += [(m(loc, 0), m(loc, 1), u), (m(loc, 1), m(loc, 0), v)]
    assert graph.n_states == 8
    Q_hand = expected_generator(graph, edges)
    np.testing.assert_allclose(graph.generator().toarray(), Q_hand, atol=ATOL)

    pi_hand = dense_steady_state(Q_hand)
    pi = steady_state(graph.generator()).probabilities
    np.testing.assert_allclose(pi, pi_hand, atol=1e-14)

    flows = graph.throughput(pi)
    p_idle = [pi_hand[graph.index(m("idle", f))] for f in (0, 1)]
    assert flows["start"] == pytest.approx(a * sum(p_idle), rel=1e-12)
    assert flows["i1"] == pytest.approx(a / 4 * sum(p_idle), rel=1e-12)
    assert flows["i2"] == pytest.approx(3 * a / 4 * sum(p_idle), rel=1e-12)
    assert flows["i3"] == pytest.approx(3 * a / 4 * p_idle[1], rel=1e-12)
    assert flows["i4"] == pytest.approx(3 * a / 4 * p_idle[0], rel=1e-12)
    # Vanishing places never hold a token in a tangible marking.
    assert graph.mean_tokens(pi)["v1"] == 0 and graph.mean_tokens(pi)["v2"] == 0


def test_diamond_of_independent_immediates_is_merged():
    a, b = 2.0, 3.0
    net = Net(
        {"src": 1, "x": 0, "y": 0, "x2": 0, "y2": 0, "z": 0},
        [
            timed("fork", a, inputs={"src": 1}, outputs={"x": 1, "y": 1}),
            immediate("ix", weight=0.3, inputs={"x": 1}, outputs={"x2": 1}),
            immediate("iy", weight=1.7, inputs={"y": 1}, outputs={"y2": 1}),
            immediate("join", inputs={"x2": 1, "y2": 1}, outputs={"z": 1}),
            timed("finish", b, inputs={"z": 1}, outputs={"src": 1}),
        ],
    )
    graph = reachability_graph(net)
    # Both firing orders (ix then iy, iy then ix) reach x2 + y2, then join fires: every
    # fork leads to z with probability 1.  Vanishing markings: x+y, x2+y, x+y2, x2+y2.
    assert graph.n_states == 2
    assert graph.n_vanishing == 4
    Q_hand = expected_generator(graph, [({"src": 1}, {"z": 1}, a), ({"z": 1}, {"src": 1}, b)])
    np.testing.assert_allclose(graph.generator().toarray(), Q_hand, atol=ATOL)
    pi = steady_state(graph.generator()).probabilities
    flows = graph.throughput(pi)
    cycle = a * b / (a + b)  # throughput of the two-state cycle
    for name in ("fork", "ix", "iy", "join", "finish"):
        assert flows[name] == pytest.approx(cycle, rel=1e-12), name


def test_marking_dependent_weights_inhibitors_and_or_guard():
    lam, mu_a, mu_b, cap = 1.5, 1.0, 2.0, 2
    net = Net(
        {"qa": 0, "qb": 0, "arr": 0},
        [
            timed("arrive", lam, outputs={"arr": 1}, guard="#qa < 2 or #qb < 2"),
            # Route to the shorter queue more often: weight 1 / (1 + length).
            immediate(
                "toA",
                weight="1 / (1 + #qa)",
                inputs={"arr": 1},
                outputs={"qa": 1},
                inhibitors={"qa": cap},
            ),
            immediate(
                "toB",
                weight="1 / (1 + #qb)",
                inputs={"arr": 1},
                outputs={"qb": 1},
                inhibitors={"qb": cap},
            ),
            timed("serveA", mu_a, inputs={"qa": 1}),
            timed("serveB", mu_b, inputs={"qb": 1}),
        ],
    )
    graph = reachability_graph(net)
    edges = []
    for qa, qb in itertools.product(range(cap + 1), repeat=2):
        here = {"qa": qa, "qb": qb}
        wa = 1 / (1 + qa) if qa < cap else 0.0  # inhibited at the cap
        wb = 1 / (1 + qb) if qb < cap else 0.0
        if wa + wb > 0:
            edges.append((here, {"qa": qa + 1, "qb": qb}, lam * wa / (wa + wb)))
            edges.append((here, {"qa": qa, "qb": qb + 1}, lam * wb / (wa + wb)))
        if qa:
            edges.append((here, {"qa": qa - 1, "qb": qb}, mu_a))
        if qb:
            edges.append((here, {"qa": qa, "qb": qb - 1}, mu_b))
    edges = [e for e in edges if e[2] > 0]
    assert graph.n_states == (cap + 1) ** 2
    Q_hand = expected_generator(graph, edges)
    np.testing.assert_allclose(graph.generator().toarray(), Q_hand, atol=ATOL)
    pi = steady_state(graph.generator()).probabilities
    np.testing.assert_allclose(pi, dense_steady_state(Q_hand), atol=1e-14)
    # In the full state the guard disables arrivals altogether.
    full = graph.index({"qa": cap, "qb": cap})
    assert graph.throughput(np.eye(graph.n_states)[full])["arrive"] == 0


def test_flush_with_marking_dependent_input_arc_against_closed_form():
    # Arrivals (rate lam, blocked at K) and a "catastrophe" that empties the queue at rate
    # g: input arc multiplicity #q.  Balance equations solved by hand:
    #   pi_0 = g / (lam + g),  pi_n = pi_0 r^n (1 <= n < K) with r = lam / (lam + g),
    #   pi_K = (lam / g) pi_{K-1}.
    lam, g, K = 1.2, 0.5, 6
    net = Net(
        {"q": 0},
        [
            timed("arrive", lam, outputs={"q": 1}, inhibitors={"q": K}),
            timed("flush", g, inputs={"q": "#q"}, guard="#q > 0"),
        ],
    )
    graph = reachability_graph(net)
    pi = steady_state(graph.generator()).probabilities
    r = lam / (lam + g)
    expected = np.array([g / (lam + g) * r**n for n in range(K)])
    expected = np.append(expected, lam / g * expected[-1])
    assert expected.sum() == pytest.approx(1.0, rel=1e-14)
    counts = graph.markings[:, 0]
    np.testing.assert_allclose(pi, expected[counts], rtol=1e-12)
    assert graph.throughput(pi)["flush"] == pytest.approx(g * (1 - expected[0]), rel=1e-12)


def test_marking_dependent_output_arc_and_conditional_rate():
    # Arrivals come in pairs, truncated at K: output multiplicity min(2, K - #q).
    # Service rate 2/#q guarded by if(): the if() branch must not divide by zero at #q=0.
    lam, K = 0.8, 5
    net = Net(
        {"q": 0},
        [
            timed("arrive", lam, outputs={"q": "min(2, K - #q)"}, inhibitors={"q": "K"}),
            timed("serve", "if(#q > 0, 2 / #q, 0) + 1", inputs={"q": 1}),
        ],
        parameters={"K": K},
    )
    graph = reachability_graph(net)
    edges = []
    for n in range(K + 1):
        if n < K:
            edges.append(({"q": n}, {"q": min(n + 2, K)}, lam))
        if n > 0:
            edges.append(({"q": n}, {"q": n - 1}, 2 / n + 1))
    Q_hand = expected_generator(graph, edges)
    np.testing.assert_allclose(graph.generator().toarray(), Q_hand, atol=ATOL)


def test_guard_is_only_evaluated_where_the_input_arcs_allow_firing():
    # 1 / #p would divide by zero at #p = 0, but there the input arc disables the
    # transition already, so the guard must not be evaluated.
    net = Net(
        {"p": 2, "q": 0},
        [
            timed("move", 1.0, inputs={"p": 1}, outputs={"q": 1}, guard="1 / #p > 0"),
            timed("back", 1.0, inputs={"q": 1}, outputs={"p": 1}),
        ],
    )
    assert reachability_graph(net).n_states == 3


def test_inhibitor_multiplicity_zero_removes_the_arc():
    # The inhibitor on q is #s: with s = 0 the arc is absent and "add" stays enabled
    # until the explicit cap of 3 (second inhibitor arc, on a different place) is hit.
    net = Net(
        {"s": 0, "q": 0, "cap": 0},
        [
            timed("add", 1.0, outputs={"q": 1, "cap": 1}, inhibitors={"q": "#s", "cap": 3}),
            timed("drain", 1.0, inputs={"q": 1, "cap": 1}),
        ],
    )
    graph = reachability_graph(net)
    assert sorted(graph.markings[:, 1].tolist()) == [0, 1, 2, 3]


def test_vanishing_initial_marking_spreads_by_weight():
    net = Net(
        {"start": 1, "A": 0, "B": 0},
        [
            immediate("left", weight=1, inputs={"start": 1}, outputs={"A": 1}),
            immediate("right", weight=2, inputs={"start": 1}, outputs={"B": 1}),
            timed("ab", 1.0, inputs={"A": 1}, outputs={"B": 1}),
            timed("ba", 1.0, inputs={"B": 1}, outputs={"A": 1}),
        ],
    )
    graph = reachability_graph(net)
    assert graph.n_states == 2
    init = graph.initial_distribution
    assert init[graph.index({"A": 1})] == pytest.approx(1 / 3, rel=1e-15)
    assert init[graph.index({"B": 1})] == pytest.approx(2 / 3, rel=1e-15)


def test_dead_and_absorbing_states_are_reported():
    net = Net(
        {"p": 1, "a": 0, "b": 0},
        [
            timed("to_a", 1.0, inputs={"p": 1}, outputs={"a": 1}),
            timed("to_b", 2.0, inputs={"p": 1}, outputs={"b": 1}),
            # In b a transition is enabled but only returns to b: absorbing, not dead.
            timed("spin", 5.0, inputs={"b": 1}, outputs={"b": 1}),
        ],
    )
    graph = reachability_graph(net)
    a, b, p = graph.index({"a": 1}), graph.index({"b": 1}), graph.index({"p": 1})
    assert graph.dead_states.tolist() == [a]
    assert sorted(graph.absorbing_states.tolist()) == sorted([a, b])
    assert p not in graph.absorbing_states
    # The self-loop does not appear in the generator.
    Q = graph.generator().toarray()
    assert Q[b, b] == 0 and Q[p, p] == -3.0
    assert graph.marking(a) == {"p": 0, "a": 1, "b": 0}


def test_unreachable_marking_lookup_is_a_key_error():
    graph = reachability_graph(Net({"p": 1}, [timed("t", 1.0, inputs={"p": 1})]))
    with pytest.raises(KeyError, match="not"):
        graph.index({"p": 7})
