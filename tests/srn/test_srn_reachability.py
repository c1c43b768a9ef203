"""State-space generation details: wide markings, growing token counts, initial
distributions over several markings, and their validation.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from srn import Net, NetDefinitionError, compile_net, reachability_graph, steady_state, timed


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
