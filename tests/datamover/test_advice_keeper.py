"""A receiver's advice kept ready in the background (datamover.advice_keeper, the
advisor's solved terms, datamover.deferred_advice).

References: :func:`transport.time_slice_bottleneck_rate` solved fresh for the same
inputs (an answer from terms solved ahead is the same floating-point result: ``==``);
the keeper's own counters and events for what it did and did not do (no sleeps).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Collection
from typing import Any

import pytest

from datamover.advice import ReceiverAdvisor
from datamover.advice_keeper import AdviceKeeper
from datamover.deferred_advice import AdviceUnavailable, DeferredAdvisor
from host import Workload, host_profile
from transport import time_slice_bottleneck_rate, workload_bottleneck_rate

PROFILE = host_profile("sx280-2007").replace(name="lab", mu_net=20_000.0, line_rate_bps=8e8)
PROVENANCE = {"time_slice_s": 0.003, "kind": "quick", "started_unix": 1.0}
BUSY_LOOPS = Workload(cpu_tasks=2, io_tasks=0, cores=1, disks=1)
WAIT_S = 60.0


class FakeProbe:
    """Stands in for probe_host: a look that sees ``workload`` and sleeps through the
    keeper's own sleep (so that a transfer can cut it short)."""

    def __init__(self, workload: Workload) -> None:
        self.workload = workload
        self.calls = 0
        self.windows = threading.Event()

    def __call__(self, *, interval_s: float, samples: int, sleep: Callable[[float], None]) -> Any:
        self.calls += 1
        sleep(interval_s / 10)
        probe = self

        class Seen:
            def workload_on(self, cpus: Collection[int]) -> Workload:
                return probe.workload

        self.windows.set()
        return Seen()


def _advisor(**kw: Any) -> ReceiverAdvisor:
    return ReceiverAdvisor(
        lambda: (PROFILE, PROVENANCE),
        buffer_packets=300,
        batch_packets=8,
        cpus={0},
        workload=lambda cpus: BUSY_LOOPS,
        **kw,
    )


def _fresh(size: int, delay: float) -> Any:
    return time_slice_bottleneck_rate(
        BUSY_LOOPS,
        PROFILE.replace(buffer_packets=300, coalesce_packets=8),
        file_size_bytes=size,
        propagation_delay_s=delay,
        time_slice_s=0.003,
        settle_s=0.02,
    )


def test_the_paper_model_once_asked_is_warmed_ahead_and_exact() -> None:
    # Once a sender has asked for the paper's model, prepare computes it for the workload,
    # so that later answers do not pay for building its chain; each answer is the
    # library's own call.
    advisor = _advisor()
    paper = {"propagation_delay_s": 0.01, "model": "paper"}
    cold = advisor(30_000_000, paper)
    assert cold.model == "paper" and cold.extra["ready"] is False
    assert advisor.prepare() is True
    warm = advisor(30_000_000, paper)
    expected = workload_bottleneck_rate(
        BUSY_LOOPS,
        PROFILE.replace(buffer_packets=300, coalesce_packets=8),
        file_size_bytes=30_000_000,
        propagation_delay_s=0.01,
    ).bottleneck
    assert warm.extra["ready"] is True and warm.extra["refined"] is True
    assert warm.rate_bps == cold.rate_bps == expected.rate_bps
    assert warm.predicted_time_s == expected.transfer_time_s


def test_an_answer_from_terms_solved_ahead_is_the_fresh_solve() -> None:
    advisor = _advisor()
    assert advisor.prepare() is True
    assert advisor.prepare() is False  # nothing left to solve for this workload
    advice = advisor(30_000_000, {"propagation_delay_s": 0.01, "model": "timeslice"})
    expected = _fresh(30_000_000, 0.01)
    assert advice.rate_bps == expected.rate_bps
    assert advice.predicted_time_s == expected.transfer_time_s
    assert advice.extra["ready"] is True and advice.extra["refined"] is True
    assert advice.extra["profile_kind"] == "quick" and advice.extra["profile_age_s"] > 0


def test_an_unsolved_workload_is_solved_at_once_and_says_so() -> None:
    advice = _advisor()(30_000_000, {"propagation_delay_s": 0.01, "model": "timeslice"})
    assert advice.extra["ready"] is False
    assert advice.rate_bps == _fresh(30_000_000, 0.01).rate_bps


def test_a_refinement_not_solved_ahead_is_asked_for_and_then_exact() -> None:
    advisor = _advisor()
    advisor.prepare()
    # 300 kB at 10 ms: its best coarse rate (index 24 of 32 here) is none of the
    # reference transfers' (16, 28, 31), so its refinement was not solved ahead.
    size, delay = 300_000, 0.01
    first = advisor(size, {"propagation_delay_s": delay, "model": "timeslice"})
    assert first.extra["refined"] is False and first.extra["ready"] is True
    assert advisor.wanted.is_set()
    assert advisor.refine_wanted() == 1 and not advisor.wanted.is_set()
    second = advisor(size, {"propagation_delay_s": delay, "model": "timeslice"})
    assert second.extra["refined"] is True
    assert second.rate_bps == _fresh(size, delay).rate_bps


def test_the_keeper_looks_solves_and_answers_without_waiting() -> None:
    advisor = _advisor()
    probe = FakeProbe(BUSY_LOOPS)
    solved = threading.Event()
    prepare = advisor.prepare

    def traced_prepare(*a: Any, **kw: Any) -> bool:
        done = prepare(*a, **kw)
        solved.set()
        return done

    advisor.prepare = traced_prepare  # type: ignore[method-assign]
    keeper = AdviceKeeper(advisor, busy=lambda: False, probe=probe, pause_s=0.01)
    keeper.start()
    try:
        assert keeper.wait_ready(WAIT_S) and solved.wait(WAIT_S)
        advice = advisor(30_000_000, {"propagation_delay_s": 0.01})
    finally:
        keeper.stop()
    assert advice.extra["ready"] is True and advice.extra["refined"] is True
    assert advice.workload == BUSY_LOOPS
    assert advice.extra["workload_age_s"] >= 0 and advice.extra["calibrating"] is False


def test_the_keeper_stands_aside_while_a_transfer_is_received() -> None:
    advisor = _advisor()
    probe = FakeProbe(BUSY_LOOPS)
    asked = threading.Event()
    count = [0]

    def busy() -> bool:
        count[0] += 1
        if count[0] > 20:
            asked.set()
        return True

    keeper = AdviceKeeper(advisor, busy=busy, probe=probe, pause_s=0.01)
    keeper.start()
    try:
        assert asked.wait(WAIT_S)
    finally:
        keeper.stop()
    assert probe.calls == 0 and keeper.windows == 0


def test_a_look_that_a_transfer_interrupts_is_thrown_away() -> None:
    advisor = _advisor()
    probe = FakeProbe(BUSY_LOOPS)
    receiving = threading.Event()

    def busy() -> bool:
        # Not busy when the keeper decides to look; busy once the look has begun.
        return receiving.is_set()

    def interrupting(**kw: Any) -> Any:
        receiving.set()
        return probe(**kw)

    keeper = AdviceKeeper(advisor, busy=busy, probe=interrupting, pause_s=0.01)
    keeper.start()
    try:
        assert receiving.wait(WAIT_S)
        while probe.calls == 0:
            receiving.wait(0.01)
    finally:
        keeper.stop()
    assert keeper.windows == 0 and keeper.info()["workload_age_s"] is None


def test_a_quick_calibration_runs_once_before_anything_is_solved() -> None:
    order: list[str] = []
    advisor = _advisor()
    prepare = advisor.prepare

    def traced_prepare(*a: Any, **kw: Any) -> bool:
        order.append("prepare")
        return prepare(*a, **kw)

    advisor.prepare = traced_prepare  # type: ignore[method-assign]
    keeper = AdviceKeeper(
        advisor,
        busy=lambda: False,
        calibrate=lambda: order.append("calibrate"),
        probe=FakeProbe(BUSY_LOOPS),
        pause_s=0.01,
    )
    keeper.start()
    try:
        assert keeper.wait_ready(WAIT_S)
        while order.count("prepare") < 2:
            threading.Event().wait(0.01)
    finally:
        keeper.stop()
    assert order[0] == "calibrate" and order.count("calibrate") == 1


def test_a_deferred_advisor_waits_for_the_real_one_and_says_how_long() -> None:
    deferred = DeferredAdvisor(timeout_s=WAIT_S)
    advisor = _advisor()
    answered: list[Any] = []
    t = threading.Thread(
        target=lambda: answered.append(deferred(2_000_000, {"propagation_delay_s": 0.01}))
    )
    t.start()
    assert deferred.asked.wait(WAIT_S)  # the request is waiting: whoever builds, builds
    deferred.set(advisor)
    t.join(WAIT_S)
    (advice,) = answered
    assert advice.rate_bps > 0 and advice.extra["waited_for_start_s"] > 0
    # Once set, a request does not wait and says nothing of it.
    again = deferred(2_000_000, {"propagation_delay_s": 0.01})
    assert "waited_for_start_s" not in again.extra


def test_a_deferred_advisor_without_an_advisor_names_why() -> None:
    deferred = DeferredAdvisor()
    deferred.set(None, "the profile store is unreachable")
    with pytest.raises(AdviceUnavailable, match="unreachable") as err:
        deferred(1, {"propagation_delay_s": 0.01})
    assert err.value.field == "advice"
