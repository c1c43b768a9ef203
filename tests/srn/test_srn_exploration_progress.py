"""Exploration progress: reports while exploring, a last one when done, and cancellation.

Both explorers are covered: the compiled one (Kanban, constant firing rules, past 50,000
states) and the NumPy one (a net whose rate is an expression).  The counts are checked
against the finished graph's own (the reference), and the reports are made as often as
possible (``ExplorationReporter.EVERY`` set to 0) so that a short exploration still
gives several.
"""

from __future__ import annotations

import threading

import pytest
from test_srn_kanban import kanban

from srn import ExplorationProgress, Net, reachability_graph, timed
from srn.progress import ExplorationReporter


@pytest.fixture
def every_report(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(ExplorationReporter, "EVERY", 0.0)


def check_reports(reports: list[ExplorationProgress], graph) -> None:
    *running, last = reports
    assert running, "no report before the end"
    assert not any(r.done for r in running)
    assert last.done
    counts = (last.states, last.edges, last.expanded)
    assert counts == (graph.n_states, graph.n_edges, graph.n_states)
    states = [r.states for r in reports]
    assert states == sorted(states)
    assert all(0 <= r.expanded <= r.states and r.edges >= 0 for r in reports)
    seconds = [r.seconds for r in reports]
    assert seconds == sorted(seconds)


def test_the_compiled_explorer_reports_its_counts(every_report: None) -> None:
    # Kanban N = 3: 58,400 states, past the switch to the compiled explorer, which starts
    # over; the reports still never go back.
    reports: list[ExplorationProgress] = []
    graph = reachability_graph(kanban(3), progress=reports.append)
    assert graph.n_states == 58_400
    check_reports(reports, graph)
    assert any(r.states > 50_000 and not r.done for r in reports)


def test_the_numpy_explorer_reports_its_counts(every_report: None) -> None:
    # A rate that is an expression keeps the net on the NumPy explorer.  Two queues of
    # capacity 400 in tandem: 401^2 = 160,801 states, two frontier chunks or more.
    K = 400
    net = Net(
        {"a": 0, "b": 0},
        [
            timed("arr", "if(#a < 10, 1.2, 1.0)", outputs={"a": 1}, inhibitors={"a": K}),
            timed("mv", 1.5, inputs={"a": 1}, outputs={"b": 1}, inhibitors={"b": K}),
            timed("dep", 2.0, inputs={"b": 1}),
        ],
    )
    reports: list[ExplorationProgress] = []
    graph = reachability_graph(net, progress=reports.append)
    assert graph.n_states == (K + 1) ** 2
    check_reports(reports, graph)


def test_a_raising_callback_stops_the_compiled_explorer(
    every_report: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Kanban N = 5 (2,546,432 states): stop as soon as 100,000 are found.  The exception
    # reaches the caller before the graph is complete, the kernel itself returned early
    # (its status is STOPPED, with fewer states than the graph has), and its thread is gone.
    from srn import _exploration_kernels as kernels

    class Enough(Exception):
        pass

    returned: list[tuple[int, int]] = []
    kernel = kernels.explore_constant

    def recorded(*args):
        result = kernel(*args)
        returned.append((int(result[0]), len(result[1])))
        return result

    monkeypatch.setattr(kernels, "explore_constant", recorded)

    seen: list[ExplorationProgress] = []

    def stop(report: ExplorationProgress) -> None:
        seen.append(report)
        if report.states > 100_000:
            raise Enough

    with pytest.raises(Enough):
        reachability_graph(kanban(5), progress=stop)
    assert not seen[-1].done
    assert seen[-1].states < 2_546_432
    assert not [t for t in threading.enumerate() if t.name.startswith("srn-explore")]
    ((status, states),) = returned
    assert status == kernels.STOPPED
    assert states < 2_546_432
