"""Ciardo & Tilgner's Kanban net (4 cells, 16 places), the standard state-space benchmark.

References
----------
- G. Ciardo and M. Tilgner, "On the use of Kronecker operators for the solution of
  generalized stochastic Petri nets", ICASE report 96-35, 1996: the net and its rates.
- Reachable state counts 160, 4,600 and 58,400 for N = 1, 2, 3: the published counts
  quoted in issue #2.  Transition counts 616, 28,120 and 446,400: the statistics table
  of the PRISM Kanban case study (prismmodelchecker.org/casestudies/kanban.php).  For
  N = 1 and 2 both are also recomputed here by a plain Python breadth-first search that
  shares no code with the engine.
- Throughput of in1 at N = 1: 0.0925846346333826, Storm's published value (issue #2).
"""

from __future__ import annotations

from collections import deque

import numpy as np
import pytest

from srn import Net, reachability_graph, steady_state, timed

REDO = (0.36, 0.42, 0.39, 0.33)
OK = (0.84, 0.98, 0.91, 0.77)


def kanban_arcs():
    """(name, rate, inputs, outputs) of the 16 transitions."""
    arcs = [("in1", 1.0, {"kan1": 1}, {"m1": 1})]
    for i in range(1, 5):
        arcs += [
            (f"redo{i}", REDO[i - 1], {f"m{i}": 1}, {f"back{i}": 1}),
            (f"ok{i}", OK[i - 1], {f"m{i}": 1}, {f"out{i}": 1}),
            (f"back{i}", 0.3, {f"back{i}": 1}, {f"m{i}": 1}),
        ]
    arcs += [
        ("synch1_23", 0.4, {"out1": 1, "kan2": 1, "kan3": 1}, {"kan1": 1, "m2": 1, "m3": 1}),
        ("synch23_4", 0.5, {"out2": 1, "out3": 1, "kan4": 1}, {"kan2": 1, "kan3": 1, "m4": 1}),
        ("out4", 0.9, {"out4": 1}, {"kan4": 1}),
    ]
    return arcs


def kanban_places(n: int) -> dict[str, int]:
    places = {}
    for i in range(1, 5):
        places |= {f"kan{i}": n, f"m{i}": 0, f"back{i}": 0, f"out{i}": 0}
    return places


def kanban(n: int) -> Net:
    return Net(
        kanban_places(n),
        [timed(name, rate, inputs=i, outputs=o) for name, rate, i, o in kanban_arcs()],
    )


def python_bfs(n: int) -> tuple[int, int]:
    """States and distinct (source, target) pairs, by a dictionary-based search."""
    names = list(kanban_places(n))
    start = tuple(kanban_places(n).values())
    moves = []
    for _, _, inputs, outputs in kanban_arcs():
        delta = [outputs.get(p, 0) - inputs.get(p, 0) for p in names]
        need = [(names.index(p), k) for p, k in inputs.items()]
        moves.append((need, delta))
    seen = {start}
    pairs = set()
    todo = deque([start])
    while todo:
        s = todo.popleft()
        for need, delta in moves:
            if all(s[i] >= k for i, k in need):
                t = tuple(x + d for x, d in zip(s, delta, strict=True))
                pairs.add((s, t))
                if t not in seen:
                    seen.add(t)
                    todo.append(t)
    return len(seen), len(pairs)


@pytest.mark.parametrize(
    ("n", "states", "edges"), [(1, 160, 616), (2, 4_600, 28_120), (3, 58_400, 446_400)]
)
def test_kanban_state_and_transition_counts(n, states, edges):
    graph = reachability_graph(kanban(n))
    assert graph.n_states == states
    assert graph.n_edges == edges
    Q = graph.generator()
    # No two firings join the same pair of states, and none is a self-loop.
    assert Q.nnz == edges + states
    assert len(graph.dead_states) == 0
    # Every marking keeps N tokens per cell: kan_i + m_i + back_i + out_i = N.
    for i in range(1, 5):
        cols = [graph.place_names.index(f"{p}{i}") for p in ("kan", "m", "back", "out")]
        assert np.all(graph.markings[:, cols].sum(axis=1) == n)


@pytest.mark.parametrize("n", [1, 2])
def test_kanban_counts_agree_with_an_independent_search(n):
    graph = reachability_graph(kanban(n))
    assert (graph.n_states, graph.n_edges) == python_bfs(n)


def test_kanban_n1_throughput_matches_storm():
    graph = reachability_graph(kanban(1))
    result = steady_state(graph.generator())
    # Storm's published value; tolerance 1e-9 absolute (Storm prints 16 digits, its
    # own default precision is looser than that).
    assert graph.throughput(result.probabilities)["in1"] == pytest.approx(
        0.0925846346333826, abs=1e-9
    )
    assert result.residual <= 1e-10
    # Flow balance: in steady state the token flow into every place equals the flow
    # out, i.e. the throughput-weighted incidence sums to zero place by place.
    flows = graph.throughput(result.probabilities)
    balance = dict.fromkeys(graph.place_names, 0.0)
    for name, _, inputs, outputs in kanban_arcs():
        for p, k in inputs.items():
            balance[p] -= k * flows[name]
        for p, k in outputs.items():
            balance[p] += k * flows[name]
    assert max(abs(v) for v in balance.values()) < 1e-13


def test_bicgstab_gs_agrees_with_gauss_seidel_sweeps_on_kanban_3():
    # Kanban N = 3 (58,400 states): the one-pass preconditioned BiCGSTAB must converge
    # without falling back, and agree with plain Gauss-Seidel sweeps (the "sor" route:
    # a stationary iteration that shares only the matrix with it) to 1e-11 absolute per
    # state; each stops at the residual target, 1e-12 times the largest exit rate.
    Q = reachability_graph(kanban(3)).generator()
    krylov = steady_state(Q, method="bicgstab-gs")
    assert [a.method for a in krylov.attempts] == ["bicgstab-gs"]
    assert krylov.iterations > 0
    sweeps = steady_state(Q, method="sor")
    assert sweeps.method == "sor"
    np.testing.assert_allclose(krylov.probabilities, sweeps.probabilities, rtol=0, atol=1e-11)


def test_bicgstab_gs_on_two_threads_agrees_with_one_on_kanban_3():
    # Two threads make the preconditioner block Gauss-Seidel over two blocks of states;
    # the answer must not change beyond the solver's tolerance: 1e-11 absolute per
    # state against the one-thread solve (each meets a residual of 1e-12 times the
    # largest exit rate), and the few transitions cut by the blocks cost few iterations.
    Q = reachability_graph(kanban(3)).generator()
    one = steady_state(Q, method="bicgstab-gs", workers=1)
    two = steady_state(Q, method="bicgstab-gs", workers=2)
    assert [a.method for a in two.attempts] == ["bicgstab-gs"]
    np.testing.assert_allclose(two.probabilities, one.probabilities, rtol=0, atol=1e-11)
    assert two.iterations <= 1.5 * one.iterations
    for bad in (0, 2.5, True):
        with pytest.raises(ValueError, match="workers"):
            steady_state(Q, workers=bad)


def test_steady_state_reports_its_progress_and_stops_when_the_callback_raises():
    # Kanban N = 3 takes a few dozen BiCGSTAB iterations: one report when the route
    # starts (no residual yet), then one every 10 iterations with a finite residual
    # estimate; times never decrease.  A callback that raises cancels the solve.
    Q = reachability_graph(kanban(3)).generator()
    reports = []
    result = steady_state(Q, method="bicgstab-gs", progress=reports.append)
    first, rest = reports[0], reports[1:]
    assert (first.method, first.iterations) == ("bicgstab-gs", 0)
    assert np.isnan(first.residual)
    assert [r.iterations for r in rest] == list(range(10, result.iterations + 1, 10))
    assert all(np.isfinite(r.residual) and r.residual > 0 for r in rest)
    assert all(r.target == first.target for r in reports)
    seconds = [r.seconds for r in reports]
    assert seconds == sorted(seconds)

    class Cancelled(Exception):
        pass

    def cancel(report):
        if report.iterations >= 10:
            raise Cancelled

    with pytest.raises(Cancelled):
        steady_state(Q, method="bicgstab-gs", progress=cancel)


def _edge_arrays(graph) -> dict[str, tuple[str, int]]:
    """The graph's arrays with one entry per edge: (dtype, bytes)."""
    n_edges = graph.n_edges
    return {
        name: (str(value.dtype), value.nbytes)
        for name, value in vars(graph).items()
        if isinstance(value, np.ndarray) and value.shape == (n_edges,)
    }


def test_a_solved_graph_holds_eight_bytes_an_edge_when_its_rates_are_constant():
    # Issue #24 (Kanban N = 7 in 20 GB): the graph held src, dst and transition ids
    # (int32) and the edge rates (float64) through the whole solve: 20 bytes an edge,
    # 9 GB at N = 7.  The ids are needed only to cut the edges into per-transition
    # slices, and constant rates refill faster than they are worth keeping.
    graph = reachability_graph(kanban(2))
    Q = graph.generator()
    pi = steady_state(Q).probabilities
    before = graph.throughput(pi)["in1"]
    held = _edge_arrays(graph)
    assert sum(nbytes for _, nbytes in held.values()) == 8 * graph.n_edges, held
    # Rates refilled on demand give the same answers.
    assert graph.throughput(pi)["in1"] == before
    np.testing.assert_array_equal(graph.generator().toarray(), Q.toarray())


def test_marking_dependent_rates_are_kept():
    # Evaluating them costs an expression per edge: kept, and the same array comes back.
    net = Net(
        {"a": 3, "b": 0},
        [
            timed("ab", "2 * #a", inputs={"a": 1}, outputs={"b": 1}),
            timed("ba", 1.0, inputs={"b": 1}, outputs={"a": 1}),
        ],
    )
    graph = reachability_graph(net)
    assert graph.edge_rates() is graph.edge_rates()
