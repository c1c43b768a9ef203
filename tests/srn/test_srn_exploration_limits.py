"""Exploration stops at its limits, promptly, and says which setting to raise (issue #13).

* Vanishing markings count against ``Limits.max_vanishing``: a small net with k
  concurrent immediate transitions has 2^k - 1 vanishing markings (every subset of
  the k firings but the full one; the full one is the tangible marking).
* ``max_states`` stops exploration at the limit: no frontier chunk is expanded beyond
  the room left for new states, and the error reports ``max_states + 1``.
"""

from __future__ import annotations

import numpy as np
import pytest

from srn import LimitExceededError, Limits, Net, compile_net, immediate, reachability_graph, timed


def concurrent_immediates(k: int) -> Net:
    """k independent immediate moves p_i -> q_i from a vanishing start, and a timed reset."""
    places = {f"p{i}": 1 for i in range(k)} | {f"q{i}": 0 for i in range(k)}
    moves = [immediate(f"t{i}", inputs={f"p{i}": 1}, outputs={f"q{i}": 1}) for i in range(k)]
    reset = timed(
        "reset",
        1.0,
        inputs={f"q{i}": 1 for i in range(k)},
        outputs={f"p{i}": 1 for i in range(k)},
    )
    return Net(places, [*moves, reset])


def test_every_subset_of_concurrent_immediate_firings_is_one_vanishing_marking():
    graph = reachability_graph(concurrent_immediates(12))
    assert graph.n_states == 1
    assert graph.n_vanishing == 2**12 - 1


def test_vanishing_markings_count_against_max_vanishing():
    # 2^20 vanishing markings (issue #13's 4 KB net); a limit of 5,000 is passed at the
    # fifth level of the elimination (1 + 20 + 190 + 1,140 + 4,845 > 5,000).
    with pytest.raises(LimitExceededError) as info:
        reachability_graph(concurrent_immediates(20), limits=Limits(max_vanishing=5_000))
    err = info.value
    assert (err.limit, err.maximum, err.reached, err.field) == (
        "max_vanishing",
        5_000,
        5_001,
        "max_vanishing",
    )
    assert "srn.Limits(max_vanishing=...)" in str(err)


def kanban(n: int, guard: str | None = None) -> Net:
    """The Kanban net of Ciardo and Tilgner (4 cells), as in benchmarks/srn_scale.py.

    A guard on ``in1`` (e.g. the always-true ``"#kan1 >= 0"``) keeps the net off the
    compiled constant-rules explorer, so the NumPy explorer is the one exercised.
    """
    redo, ok = (0.36, 0.42, 0.39, 0.33), (0.84, 0.98, 0.91, 0.77)
    places: dict[str, int] = {}
    ts = [timed("in1", 1.0, inputs={"kan1": 1}, outputs={"m1": 1}, guard=guard)]
    for i in range(1, 5):
        places |= {f"kan{i}": n, f"m{i}": 0, f"back{i}": 0, f"out{i}": 0}
        ts += [
            timed(f"redo{i}", redo[i - 1], inputs={f"m{i}": 1}, outputs={f"back{i}": 1}),
            timed(f"ok{i}", ok[i - 1], inputs={f"m{i}": 1}, outputs={f"out{i}": 1}),
            timed(f"back{i}", 0.3, inputs={f"back{i}": 1}, outputs={f"m{i}": 1}),
        ]
    ts += [
        timed(
            "s1",
            0.4,
            inputs={"out1": 1, "kan2": 1, "kan3": 1},
            outputs={"kan1": 1, "m2": 1, "m3": 1},
        ),
        timed(
            "s2",
            0.5,
            inputs={"out2": 1, "out3": 1, "kan4": 1},
            outputs={"kan2": 1, "kan3": 1, "m4": 1},
        ),
        timed("out4", 0.9, inputs={"out4": 1}, outputs={"kan4": 1}),
    ]
    return Net(places, ts)


def test_exploration_stops_at_the_state_limit():
    # Kanban N=3 has 58,400 tangible markings (Ciardo and Tilgner); stop at 20,000.
    limit = 20_000
    compiled = compile_net(kanban(3, guard="#kan1 >= 0"), Limits(max_states=limit))
    chunks: list[int] = []
    first_timed = compiled.timed[0]
    original = compiled.timed_enabled

    def record(t, markings, params):
        if t is first_timed:
            chunks.append(len(markings))
        return original(t, markings, params)

    compiled.timed_enabled = record  # type: ignore[method-assign]
    with pytest.raises(LimitExceededError) as info:
        compiled.reachability_graph()
    err = info.value
    assert (err.limit, err.maximum, err.reached) == ("max_states", limit, limit + 1)
    assert "srn.Limits(max_states=...)" in str(err)
    # Chunks are consecutive slices [lo, hi) of the stored states, and every stored
    # state counts: no chunk may exceed the room left, limit - hi (or 1,024 rows).
    hi = 0
    for size in chunks:
        hi += size
        assert size <= max(limit - hi, 1024)
    assert hi <= limit
    assert len(chunks) > 1


@pytest.mark.parametrize("limit", [50_001, 55_000])
def test_the_compiled_explorer_stops_at_the_state_limit_too(limit):
    # Kanban N=3 (58,400 states) has only constant firing rules: past 50,000 states the
    # compiled explorer takes over, and it stops at the limit as well.
    with pytest.raises(LimitExceededError) as info:
        reachability_graph(kanban(3), limits=Limits(max_states=limit))
    assert (info.value.limit, info.value.reached) == ("max_states", limit + 1)
    # 50,000 states have fewer than 400,000 edges (7.64 per state), so this limit is
    # reached by the compiled explorer, not the NumPy one before it.
    with pytest.raises(LimitExceededError) as info:
        reachability_graph(kanban(3), limits=Limits(max_edges=420_000))
    assert (info.value.limit, info.value.reached) == ("max_edges", 420_001)


def test_compiled_and_numpy_explorers_build_the_same_graph():
    # Same net, once with constant rules (compiled kernel past 50,000 states) and once
    # with an always-true guard (NumPy explorer): the same markings, edges and generator
    # up to the numbering of the states.
    fast = reachability_graph(kanban(3))
    slow = reachability_graph(kanban(3, guard="#kan1 >= 0"))
    assert fast.n_states == slow.n_states == 58_400
    assert fast.n_edges == slow.n_edges == 446_400  # PRISM Kanban case study, N = 3
    to_slow = np.array([slow.index(row) for row in fast.markings[:2000]])
    assert len(set(to_slow.tolist())) == 2000
    perm = np.empty(fast.n_states, dtype=np.intp)
    codes = {tuple(r): i for i, r in enumerate(slow.markings.tolist())}
    perm[:] = [codes[tuple(r)] for r in fast.markings.tolist()]
    Qf, Qs = fast.generator(), slow.generator()
    assert abs(Qs[perm][:, perm] - Qf).max() == 0.0
    assert fast.dead_states.size == slow.dead_states.size == 0
    assert fast.index(fast.markings[17]) == 17


def test_a_net_just_inside_the_state_limit_is_explored_whole():
    assert reachability_graph(kanban(2), limits=Limits(max_states=4_600)).n_states == 4_600
