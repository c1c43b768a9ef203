"""The event loop and the compute threads on one CPU (app.runtime.colocation).

Pinning changes where threads run, never what they compute; these tests check the
pins themselves (``sched_getaffinity`` of each thread and worker process) and that what
must keep every CPU -- the solve pool's processes, a thread that starts sweep
processes -- does.  They need Linux and at least two CPUs.
"""

from __future__ import annotations

import multiprocessing
import os
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from app.runtime.colocation import LoopCpu, on_process_cpus, pin_loop_thread, pin_this_thread
from app.service.state import ServiceState

pytestmark = pytest.mark.skipif(
    not hasattr(os, "sched_setaffinity") or len(os.sched_getaffinity(0)) < 2,
    reason="needs sched_setaffinity and at least two CPUs",
)


QUERY = {"file_size": "500MB", "propagation_delay": "100ms"}


def in_thread(function: Callable[[], Any]) -> Any:
    """``function()`` in a new thread (pins stay off the test's own thread)."""
    out: list[Any] = []
    thread = threading.Thread(target=lambda: out.append(function()))
    thread.start()
    thread.join(timeout=30)
    return out[0]


def test_pin_loop_thread_pins_the_caller_to_its_own_cpu() -> None:
    before = frozenset(os.sched_getaffinity(0))

    def pin() -> tuple[LoopCpu | None, set[int]]:
        return pin_loop_thread(), os.sched_getaffinity(0)

    where, after = in_thread(pin)
    assert where is not None
    assert where.process_cpus == before
    assert after == {where.cpu} and where.cpu in before
    assert os.sched_getaffinity(0) == before  # only the calling thread was pinned


def test_threads_started_by_a_pinned_thread_inherit_the_pin_until_widened() -> None:
    def run() -> tuple[set[int], set[int], set[int], LoopCpu]:
        where = pin_loop_thread()
        assert where is not None
        inherited = in_thread(lambda: os.sched_getaffinity(0))
        widened = in_thread(lambda: on_process_cpus(where, lambda: os.sched_getaffinity(0)))

        def widen_then_pin() -> set[int]:
            on_process_cpus(where, lambda: None)
            pin_this_thread(where)
            return os.sched_getaffinity(0)

        repinned = in_thread(widen_then_pin)
        return inherited, widened, repinned, where

    inherited, widened, repinned, where = in_thread(run)
    assert inherited == {where.cpu}
    assert widened == set(where.process_cpus)
    assert repinned == {where.cpu}


def test_nothing_is_pinned_without_a_pin() -> None:
    before = os.sched_getaffinity(0)
    assert on_process_cpus(None, lambda: os.sched_getaffinity(0)) == before
    pin_this_thread(None)
    assert os.sched_getaffinity(0) == before


def compute_thread_cpus(state: ServiceState) -> list[set[int]]:
    threads = state.compute_threads.threads
    return [os.sched_getaffinity(t.native_id) for t in threads if t.native_id is not None]


def test_the_service_runs_compute_threads_on_the_loop_cpu_and_workers_everywhere(
    make_client: Callable[..., TestClient],
) -> None:
    everything = set(os.sched_getaffinity(0))
    client = make_client(compute_on_loop_cpu=True, solve_workers=1)
    state: ServiceState = client.app.state.service  # type: ignore[attr-defined]
    assert state.loop_cpu is not None
    assert set(state.loop_cpu.process_cpus) == everything
    r = client.get("/bottleneck-rate", params={**QUERY, "cpu_tasks": 3, "io_tasks": 1})
    assert r.status_code == 200
    cpus = compute_thread_cpus(state)
    assert cpus and all(c == {state.loop_cpu.cpu} for c in cpus)
    # The solve pool's workers start on first use, after the pin, from the fork server
    # started before it: they keep every CPU.
    pooled = make_client(compute_on_loop_cpu=True, solve_workers=1, inprocess_max_method_states=0)
    r = pooled.get("/bottleneck-rate", params={**QUERY, "cpu_tasks": 2, "io_tasks": 1})
    assert r.status_code == 200
    pids = pooled.app.state.service.pool.pids()  # type: ignore[attr-defined]
    assert pids and all(os.sched_getaffinity(pid) == everything for pid in pids)


def test_the_setting_turns_the_pin_off(make_client: Callable[..., TestClient]) -> None:
    everything = set(os.sched_getaffinity(0))
    client = make_client(compute_on_loop_cpu=False)
    state: ServiceState = client.app.state.service  # type: ignore[attr-defined]
    r = client.get("/bottleneck-rate", params={**QUERY, "cpu_tasks": 3, "io_tasks": 2})
    assert r.status_code == 200
    assert state.loop_cpu is None
    assert all(c == everything for c in compute_thread_cpus(state))


@pytest.mark.parametrize("explicit", [False, True])
@pytest.mark.parametrize("how", ["uvicorn workers", "process manager"])
def test_one_of_several_servers_does_not_pin_unless_told(
    make_client: Callable[..., TestClient],
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
    how: str,
    explicit: bool,
) -> None:
    # Each server process would pin its loop to the CPU it started on, and two could
    # pick the same one.  uvicorn --workers spawns its workers (they have a parent
    # process); gunicorn-style deployments set PROMETHEUS_MULTIPROC_DIR.
    if how == "uvicorn workers":
        monkeypatch.setattr(multiprocessing, "parent_process", lambda: object())
    else:
        monkeypatch.setenv("PROMETHEUS_MULTIPROC_DIR", str(tmp_path))
    overrides = {"compute_on_loop_cpu": True} if explicit else {}
    client = make_client(metrics_multiprocess="off", **overrides)
    state: ServiceState = client.app.state.service  # type: ignore[attr-defined]
    assert (state.loop_cpu is not None) == explicit
