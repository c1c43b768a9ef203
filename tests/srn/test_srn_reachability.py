"""State-space generation details: wide markings, growing token counts, initial
distributions over several markings, and their validation.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
import scipy.sparse as sp

from srn import (
    Net,
    NetDefinitionError,
    compile_net,
    immediate,
    reachability_graph,
    steady_state,
    timed,
)


def ring(places: int, tokens: int) -> Net:
    """A closed cyclic network of identical single-server exponential stations."""
    names = [f"s{i}" for i in range(places)]
    return Net(
        {name: tokens if i == 0 else 0 for i, name in enumerate(names)},
        [
            timed(f"move{i}", 1.0, inputs={names[i]: 1}, outputs={names[(i + 1) % places]: 1})
            for i in range(places)
        ],
    )


@pytest.mark.parametrize(("places", "tokens"), [(5, 6), (40, 2)])
def test_ring_state_count_and_uniform_steady_state(places, tokens):
    # 40 places need more than 64 bits of packed key, so the byte-key path is used; 6
    # tokens on one place of 5 outgrow the initial bit widths of the other places.
    graph = reachability_graph(ring(places, tokens))
    count = math.comb(places + tokens - 1, tokens)  # multisets of size `tokens`
    assert graph.n_states == count
    assert len(np.unique(graph.markings, axis=0)) == count
    # Closed cyclic network of identical ./M/1 stations: product form with equal
    # factors, so every state is equally likely (Gordon & Newell 1967).
    pi = steady_state(graph.generator()).probabilities
    np.testing.assert_allclose(pi, 1 / count, rtol=1e-9)
    # Every state can be looked up by its marking.
    for state in (0, count // 2, count - 1):
        assert graph.index(graph.markings[state]) == state
        assert graph.index(graph.marking(state)) == state


def test_large_token_counts_are_indexed():
    net = Net(
        {"q": 0},
        [
            timed("up", 1.0, outputs={"q": 1000}, inhibitors={"q": 100_000}),
            timed("down", 2.0, inputs={"q": 1}),
        ],
    )
    graph = reachability_graph(net)
    assert graph.n_states == 100_000 + 1000
    assert graph.index({"q": 100_999}) >= 0
    with pytest.raises(KeyError):
        graph.index({"q": 2**40})


def test_keys_switch_from_packed_to_bytes_during_exploration():
    # Three places start at 2 bits each; their counts grow to 4 * 2**20, which needs
    # 3 x 24 > 64 bits, so the key encoding changes while states are being added.
    step = 2**20
    net = Net(
        {"a": 0, "b": 0, "c": 0},
        [timed(f"add_{p}", 1.0, outputs={p: step}, inhibitors={p: 4 * step}) for p in "abc"]
        + [timed(f"drop_{p}", 1.0, inputs={p: step}) for p in "abc"],
    )
    graph = reachability_graph(net)
    assert graph.n_states == 5**3
    assert sorted(set(graph.markings[:, 0].tolist())) == [k * step for k in range(5)]
    for state in range(graph.n_states):
        assert graph.index(graph.markings[state]) == state
    with pytest.raises(KeyError):
        graph.index({"a": 1})


def test_graph_is_cached_per_structure():
    compiled = compile_net(ring(4, 2))
    first = compiled.reachability_graph()
    assert compiled.reachability_graph().markings is first.markings


def test_initial_markings_are_validated():
    compiled = compile_net(ring(3, 1))
    for bad in ([[1, 0]], [[1, 0, -1]], np.zeros((0, 3)), [1, 0, 0]):
        with pytest.raises(NetDefinitionError) as info:
            compiled.reachability_graph(initial_markings=bad)
        assert info.value.field == "initial_markings"
    graph = compiled.reachability_graph(initial_markings=[[1, 0, 0], [0, 1, 0]])
    # Uniform over the given markings when no probabilities are passed.
    assert graph.initial_distribution[graph.index([1, 0, 0])] == 0.5
    for bad_p in ([0.5], [0.7, 0.7], [1.5, -0.5], [float("nan"), 1.0]):
        with pytest.raises(NetDefinitionError) as info:
            graph.with_initial(bad_p)
        assert info.value.field == "initial_probabilities"


def test_marking_lookup_validation():
    graph = reachability_graph(ring(3, 1))
    with pytest.raises(NetDefinitionError):
        graph.index({"nowhere": 1})
    with pytest.raises(NetDefinitionError):
        graph.index([1, 0])
    with pytest.raises(NetDefinitionError):
        graph.index({"s0": -1})


def test_edges_and_rates_rebuild_the_generator():
    """The public edge list with edge_rates() reproduces generator() exactly."""
    net = Net(
        {"q": 0, "r": 0},
        [
            timed("arrive", 1.5, outputs={"q": 1}, inhibitors={"q": 4}),
            timed("move", "0.5 * #q", inputs={"q": 1}, outputs={"r": 1}, inhibitors={"r": 3}),
            timed("leave", 2.0, inputs={"r": 1}),
        ],
    )
    graph = reachability_graph(net)
    src, dst = graph.edges
    assert len(src) == graph.n_edges
    with pytest.raises(ValueError):
        src[0] = 1
    off = sp.coo_array((graph.edge_rates(), (src, dst)), shape=(graph.n_states,) * 2).toarray()
    np.fill_diagonal(off, 0.0)
    np.fill_diagonal(off, -off.sum(axis=1))
    np.testing.assert_array_equal(off, graph.generator().toarray())


def test_start_states_split_a_vanishing_initial_marking_by_weight():
    """A vanishing start resolved by weights 1:3 starts in two tangible states (hand-derived)."""
    net = Net(
        {"p": 1, "a": 0, "b": 0},
        [
            immediate("to_a", inputs={"p": 1}, outputs={"a": 1}, weight=1.0),
            immediate("to_b", inputs={"p": 1}, outputs={"b": 1}, weight=3.0),
            timed("reset_a", 1.0, inputs={"a": 1}, outputs={"p": 1}),
            timed("reset_b", 1.0, inputs={"b": 1}, outputs={"p": 1}),
        ],
    )
    graph = reachability_graph(net)
    initial, state, probability = graph.start_states
    assert list(initial) == [0, 0]
    got = {graph.marking(int(s))["a"]: float(p) for s, p in zip(state, probability, strict=True)}
    assert got == pytest.approx({1: 0.25, 0: 0.75}, abs=1e-15)


@pytest.mark.parametrize(("tokens", "dtype"), [(100, np.int8), (300, np.int16)])
def test_markings_are_stored_narrow_and_expressions_still_compute_in_int64(tokens, dtype):
    # A queue with room for `tokens`: the graph keeps its markings in the narrowest signed
    # type (issue #24: Kanban N = 7 then keeps 16 bytes a state, not 64), and a reward or
    # rate that leaves that type's range is computed exactly (int8 * 1000 would wrap).
    net = Net(
        {"q": 0},
        [
            timed(
                "arrive",
                "0.5 * (#q - 2 * #q + 1000) / 1000",
                outputs={"q": 1},
                inhibitors={"q": tokens},
            ),
            timed("serve", 1.0, inputs={"q": 1}),
        ],
    )
    graph = reachability_graph(net)
    assert graph.markings.dtype == dtype
    assert not graph.markings.flags.writeable  # shared by clones and caches
    assert graph.n_states == tokens + 1
    pi = steady_state(graph.generator()).probabilities
    q = np.arange(tokens + 1, dtype=float)
    # Birth-death chain: pi_q proportional to prod_{j<q} lambda_j / mu, with
    # lambda_j = 0.5 (1000 - j) / 1000 computed here in floats (closed form).
    lam = 0.5 * (1000.0 - q[:-1]) / 1000.0
    expected = np.concatenate([[1.0], np.cumprod(lam)])
    expected /= expected.sum()
    order = np.argsort(graph.markings[:, 0])
    np.testing.assert_allclose(pi[order], expected, rtol=1e-9, atol=1e-300)
    mean = float(expected @ q)
    assert graph.expected_reward("#q * 1000", pi) == pytest.approx(1000 * mean, rel=1e-9)
    assert graph.expected_reward("#q - 1000", pi) == pytest.approx(mean - 1000, rel=1e-9)
