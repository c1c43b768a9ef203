"""Every solve is bounded in time and memory, wherever it runs (issue #13, items 4, 6, 10).

* Work runs in the server process only when an estimate made before it starts says it is
  cheap; a net with many concurrent immediate transitions goes to the worker pool.
* Work the estimate let in but that overruns is stopped in the server process and moved
  to the pool (``inprocess_max_seconds``).
* A worker solve over ``solve_memory_bytes`` is stopped: 422 naming that limit.
* A worker killed from outside (OOM killer, operator) is the server's fault: 503 with
  Retry-After, never a 4xx.
* A worker whose memory grew past ``worker_recycle_bytes`` is replaced between jobs.
"""

from __future__ import annotations

import contextlib
import os
import signal
import threading
import time
from typing import Any

import numpy as np
import pytest

from app.operations.srn_solve import estimate_srn_solve
from app.runtime.guard import WorkInterrupted, cancel_all, run_guarded
from app.runtime.lifeline import pid_exists
from conftest import ENDLESS, explosive_net


def queue_net(k: int) -> dict[str, Any]:
    """An M/M/1/k queue: k + 1 states, beyond the test apps' in-process limit of 50."""
    return {
        "places": {"q": 0},
        "transitions": [
            {"name": "arrive", "rate": 1.0, "outputs": {"q": 1}, "inhibitors": {"q": k}},
            {"name": "serve", "rate": 2.0, "inputs": {"q": 1}},
        ],
    }


def metric(client: Any, name: str, **labels: str) -> float:
    """The value of one sample of ``/metrics`` (0 when absent)."""
    wanted = ",".join(f'{k}="{v}"' for k, v in labels.items())
    line_start = f"{name}{{{wanted}}} " if labels else f"{name} "
    for line in client.get("/metrics").text.splitlines():
        if line.startswith(line_start):
            return float(line.split()[-1])
    return 0.0


# -- the estimate made before any work ------------------------------------------------


def test_estimate_counts_concurrent_immediate_transitions() -> None:
    # 2000 states x 21 transitions x 2^20 orders of firing: far over the 2e7 budget.
    big = estimate_srn_solve({"net": explosive_net(20)}, 2_000, 2e7)
    assert (big.immediate, big.transitions) == (20, 21)
    assert big.work == 2_000 * 21 * 2.0**20
    assert not big.in_process
    small = estimate_srn_solve({"net": explosive_net(2)}, 2_000, 2e7)
    assert small.work == 2_000 * 3 * 4 and small.in_process


def test_an_explosive_net_goes_to_the_pool_before_any_work(make_client: Any) -> None:
    # 2^10 vanishing markings, one tangible state: small enough to answer, but the estimate
    # (immediate transitions that may fire in any order) sends it to a worker up front.
    client = make_client(inprocess_max_states=2_000)
    r = client.post("/srn/solve", json={"net": explosive_net(10)})
    assert r.status_code == 200, r.text
    body = r.json()
    assert body["solved_in"] == "worker-pool"
    assert body["n_states"] == 1
    assert metric(client, "blastrate_solves_moved_to_pool_total", kind="srn", reason="estimate")


def test_in_process_work_that_overruns_moves_to_the_pool(make_client: Any, problem_of: Any) -> None:
    # The estimate is told everything is cheap, so the 2^20-marking exploration starts in
    # the server process; its wall-time bound stops it there after 0.3 s and the pool's
    # limit (1.5 s) ends it.  Without the bound it runs for seconds in the server.
    client = make_client(
        inprocess_max_states=100_000,  # in-process vanishing limit 50x that: above 2^20
        max_states=100_000,
        inprocess_max_work=1e30,
        inprocess_max_seconds=0.3,
        solve_timeout_s=1.5,
    )
    client.app.state.service.pool.start()
    start = time.perf_counter()
    r = client.post("/srn/solve", json={"net": explosive_net(20)})
    elapsed = time.perf_counter() - start
    error = problem_of(r, 422)["errors"][0]
    assert (error["limit"], error["allowed"]) == ("solve_timeout_s", 1.5)
    assert elapsed < 0.3 + 1.5 + 3.0  # both bounds, plus slack for a loaded host
    assert metric(client, "blastrate_solves_moved_to_pool_total", kind="srn", reason="time") == 1


def test_a_worker_solve_over_its_memory_is_stopped(make_client: Any, problem_of: Any) -> None:
    # 2^18 vanishing markings need far more than 150 MB; the solve is stopped by the
    # pool's memory bound long before the 60 s wall time.
    client = make_client(solve_memory_bytes=150_000_000, solve_timeout_s=60.0)
    pool = client.app.state.service.pool
    pool.start()
    before = pool.pids()
    start = time.perf_counter()
    r = client.post("/srn/solve", json={"net": explosive_net(18)})
    error = problem_of(r, 422)["errors"][0]
    assert (error["limit"], error["allowed"]) == ("solve_memory_bytes", 150_000_000)
    assert time.perf_counter() - start < 30
    assert len(pool.pids()) == 1 and pool.pids() != before  # replaced by a fresh worker


def test_a_worker_killed_mid_solve_is_a_503_not_a_client_error(
    make_client: Any, problem_of: Any
) -> None:
    client = make_client(solve_timeout_s=30.0, solver_retry_after_s=3)
    pool = client.app.state.service.pool
    pool.start()
    (victim,) = pool.pids()
    answer: dict[str, Any] = {}
    thread = threading.Thread(
        target=lambda: answer.setdefault("r", client.post("/srn/solve", json=ENDLESS))
    )
    thread.start()
    deadline = time.monotonic() + 10
    while pool.busy == 0 and time.monotonic() < deadline:
        time.sleep(0.01)
    time.sleep(0.2)
    os.kill(victim, signal.SIGKILL)  # what the kernel's OOM killer does
    thread.join(timeout=20)
    assert not thread.is_alive()
    r = answer["r"]
    body = problem_of(r, 503)
    assert body["type"] == "/problems/service-unavailable"
    assert r.headers["retry-after"] == "3"
    assert "limit" not in str(body["errors"])
    # The pool carries on with a fresh worker.
    assert not pid_exists(victim) or victim not in pool.pids()
    ok = client.post("/srn/solve", json={"net": queue_net(100)})
    assert ok.status_code == 200 and ok.json()["solved_in"] == "worker-pool"


def test_a_worker_that_grew_is_recycled_between_jobs(make_client: Any) -> None:
    # Every worker is above 50 MB (NumPy, SciPy, Numba loaded), so each job recycles it.
    client = make_client(worker_recycle_bytes=50_000_000)
    pool = client.app.state.service.pool
    pool.start()
    first = pool.pids()
    r = client.post("/srn/solve", json={"net": queue_net(100)})
    assert r.status_code == 200 and r.json()["solved_in"] == "worker-pool"
    second = pool.pids()
    assert len(second) == 1 and second != first
    assert metric(client, "blastrate_pool_worker_restarts_total", reason="recycled") == 1
    # A bound above the worker's size keeps it.
    keep = make_client(worker_recycle_bytes=10_000_000_000)
    keep_pool = keep.app.state.service.pool
    keep_pool.start()
    before = keep_pool.pids()
    assert keep.post("/srn/solve", json={"net": queue_net(100)}).status_code == 200
    assert keep_pool.pids() == before


# -- the guard of work in the server process ----------------------------------------------


def test_guard_stops_a_python_loop_at_its_wall_time() -> None:
    def spin() -> None:
        while True:
            pass

    start = time.perf_counter()
    with pytest.raises(WorkInterrupted) as caught:
        run_guarded(spin, 0.2)
    assert caught.value.reason == "time"
    assert 0.2 <= time.perf_counter() - start < 2.0


def test_guard_stops_work_whose_memory_grows() -> None:
    blocks: list[np.ndarray] = []

    def grow() -> None:
        while True:
            blocks.append(np.ones(1_000_000))  # 8 MB each, touched

    with pytest.raises(WorkInterrupted) as caught:
        run_guarded(grow, 30.0, memory_bytes=100_000_000)
    assert caught.value.reason == "memory"
    assert len(blocks) * 8e6 < 100e6 + 400e6  # stopped soon after the bound
    blocks.clear()


def test_guard_cancel_and_no_stray_interruption() -> None:
    def spin() -> None:
        while True:
            pass

    threading.Timer(0.1, cancel_all).start()
    with pytest.raises(WorkInterrupted) as caught:
        run_guarded(spin, None)
    assert caught.value.reason == "cancelled"
    # Bounds that fire as the work finishes never leak into the code that follows.
    for _ in range(500):
        with contextlib.suppress(WorkInterrupted):
            run_guarded(lambda: sum(range(2_000)), 0.00005, period=0.00001)
        assert sum(range(2_000)) == 1_999_000
    assert run_guarded(lambda: 42, 1.0) == 42


def test_nic_queue_work_that_overruns_in_process_moves_to_the_pool(make_client: Any) -> None:
    # The same bound holds for the NIC queue: told the work is cheap, the server starts it,
    # stops it after 10 ms and the pool answers, with the same numbers as a direct solve.
    request = {
        "arrival_rates_pps": [float(r) for r in range(1_000, 401_000, 400)],
        "service_rate_per_s": 20_000.0,
        "buffer_packets": 4_096,
        "coalesce_packets": 64,
    }
    client = make_client(inprocess_max_queue_work=1e30, inprocess_max_seconds=0.01)
    client.app.state.service.pool.start()
    r = client.post("/queues/nic", json=request)
    assert r.status_code == 200, r.text
    assert metric(client, "blastrate_solves_moved_to_pool_total", kind="nic", reason="time") == 1
    direct = make_client(inprocess_max_queue_work=1e30).post("/queues/nic", json=request)
    assert direct.json() == r.json()
