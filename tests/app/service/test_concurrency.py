"""Concurrent requests: one computation per key (single flight), computed off the loop."""

from __future__ import annotations

import asyncio
import json
import sys
import threading
import time
from collections.abc import Mapping
from pathlib import Path
from types import FrameType
from typing import Any

import httpx
import pytest

import app.service.routes.bottleneck_rate as bottleneck_routes
import app.service.routes.planning as planning_routes
from app import Settings, create_app
from app.operations.nic import solve_nic_queue
from app.operations.whole_method import run_method
from app.schemas.problems import FieldProblem, ProblemError

SETTINGS = {"warm_up": False, "log_level": "warning", "solve_workers": 1}
QUERY = {"cpu_tasks": 2, "io_tasks": 1, "file_size": "500MB", "propagation_delay": "100ms"}
_TRANSFER = {"file_size": "500MB", "propagation_delay": "100ms"}
# The paper's model, which the service computes in its own compute threads, where a test
# can wrap ``run_method``; the time-slice model (the default) goes to a worker process.
PAPER_QUERY = {**QUERY, "model": "paper"}


NIC = {
    "arrival_rates_pps": [1_000.0, 2_000.0],
    "service_rate_per_s": 20_800.0,
    "buffer_packets": 64,
    "coalesce_packets": 6,
}


async def _many(n: int, method: str, path: str, **kwargs: Any) -> list[httpx.Response]:
    """``n`` identical requests, all sent at once to one fresh app."""
    application = create_app(Settings(**SETTINGS))
    transport = httpx.ASGITransport(app=application)
    async with httpx.AsyncClient(transport=transport, base_url="http://test") as client:
        return list(
            await asyncio.gather(*(client.request(method, path, **kwargs) for _ in range(n)))
        )


@pytest.mark.parametrize("endpoint", ["nic", "bottleneck"])
def test_identical_concurrent_misses_compute_once(
    monkeypatch: pytest.MonkeyPatch, endpoint: str
) -> None:
    # Issue #13: identical concurrent requests were computed up to 5 times.
    calls: list[str] = []

    def slow(compute: Any) -> Any:
        def run(payload: Mapping[str, Any]) -> dict[str, Any]:
            calls.append(threading.current_thread().name)
            time.sleep(0.3)  # long enough for every request to arrive while it runs
            result: dict[str, Any] = compute(payload)
            return result

        return run

    if endpoint == "nic":
        monkeypatch.setattr(planning_routes, "solve_nic_queue", slow(solve_nic_queue))
        responses = asyncio.run(_many(8, "POST", "/queues/nic", json=NIC))
    else:
        monkeypatch.setattr(bottleneck_routes, "run_method", slow(run_method))
        responses = asyncio.run(_many(8, "GET", "/bottleneck-rate", params=PAPER_QUERY))
    assert [r.status_code for r in responses] == [200] * 8
    assert len({r.content for r in responses}) == 1
    assert len(calls) == 1
    # ... and not on the event loop's thread.
    assert threading.main_thread().name not in calls


def test_waiters_share_the_error(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[int] = []

    def failing(payload: Mapping[str, Any]) -> dict[str, Any]:
        calls.append(1)
        time.sleep(0.3)
        raise ProblemError(
            "invalid-parameter", "no", [FieldProblem("body.buffer_packets", "synthetic failure")]
        )

    monkeypatch.setattr(planning_routes, "solve_nic_queue", failing)
    responses = asyncio.run(_many(6, "POST", "/queues/nic", json=NIC))
    assert [r.status_code for r in responses] == [422] * 6
    assert {r.json()["errors"][0]["reason"] for r in responses} == {"synthetic failure"}
    assert len(calls) == 1


def test_distinct_requests_are_not_coalesced(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[int] = []

    def counting_method(payload: Mapping[str, Any]) -> dict[str, Any]:
        calls.append(1)
        return run_method(payload)

    monkeypatch.setattr(bottleneck_routes, "run_method", counting_method)

    async def scenario() -> list[httpx.Response]:
        application = create_app(Settings(**SETTINGS))
        transport = httpx.ASGITransport(app=application)
        async with httpx.AsyncClient(transport=transport, base_url="http://test") as client:
            return list(
                await asyncio.gather(
                    *(
                        client.get(
                            "/bottleneck-rate", params={**PAPER_QUERY, "file_size": 10**6 + k}
                        )
                        for k in range(4)
                    )
                )
            )

    responses = asyncio.run(scenario())
    assert [r.status_code for r in responses] == [200] * 4
    assert len(calls) == 4


def test_the_event_loop_stays_responsive_during_a_computation(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # No endpoint computes on the event loop: while a computation is held in progress,
    # /healthz answers.  Events, not timings: the computation starts, /healthz is asked
    # and must answer while the computation is still held; a loop blocked by it would
    # answer only once the hold times out (30 s), after the computation ended.
    started, release = threading.Event(), threading.Event()
    released: list[bool] = []

    def held_method(payload: Mapping[str, Any]) -> dict[str, Any]:
        started.set()
        released.append(release.wait(30.0))  # False: the hold timed out
        return run_method(payload)

    monkeypatch.setattr(bottleneck_routes, "run_method", held_method)

    async def scenario() -> tuple[bool, int, int]:
        application = create_app(Settings(**SETTINGS))
        transport = httpx.ASGITransport(app=application)
        async with httpx.AsyncClient(transport=transport, base_url="http://test") as client:
            heavy = asyncio.ensure_future(client.get("/bottleneck-rate", params=PAPER_QUERY))
            assert await asyncio.to_thread(started.wait, 30.0)
            health = await client.get("/healthz")
            still_held = not heavy.done() and not release.is_set()
            release.set()
            return still_held, health.status_code, (await heavy).status_code

    still_held, health_status, heavy_status = asyncio.run(scenario())
    assert (health_status, heavy_status) == (200, 200)
    assert still_held  # /healthz answered while the computation was in progress
    assert released == [True]  # and the computation was released, not timed out


ROOT = Path(__file__).resolve().parents[3]
LIBRARIES = tuple(str(ROOT / name) + "/" for name in ("srn", "host", "queues", "transport"))
PLANNING = str(ROOT / "planning") + "/"
# Library code that may run on the event loop: constructors and validation of inputs,
# closed-form size estimates made before any work is placed, axis parsing (bounded by the
# sweep limits), and serialisation.  Each is O(input size), never a solve.
ALLOWED_ON_LOOP = {
    "host/workload.py:Workload.__post_init__",
    "host/workload.py:Workload.to_dict",
    "host/profiles.py:HostProfile.to_dict",
    "host/nets.py:end_system_state_count",
    # The time-slice model's size estimate and its calibrated inputs read from a
    # profile's provenance: arithmetic on a few numbers, not a solve.
    "transport/models.py:time_slice_work",
    "transport/timeslice.py:time_slice_costs",
    "transport/timeslice.py:TimeSliceCosts.to_dict",
    # One integer read under a lock: whether this process changed the host default.
    "host/store.py:host_default_writes",
    "planning/axes.py:axis_values",
    "planning/sweep.py:SweepResult.to_dict",
    "planning/whatif.py:WhatIf.to_dict",
}
SOLVE_NET = json.loads((ROOT / "examples" / "cycle.json").read_text())
COMPUTING = [
    ("GET", "/bottleneck-rate", {"params": QUERY}),
    (
        "POST",
        "/bottleneck-rate",
        {
            "json": {
                "workload": {"cpu_tasks": 2, "io_tasks": 1},
                "transfer": {"file_size_bytes": 500_000_000, "propagation_delay_s": 0.1},
                "include_curve": True,
                "include_service_time": True,
            }
        },
    ),
    ("POST", "/workloads/service-time", {"json": {"workload": {"cpu_tasks": 2, "io_tasks": 1}}}),
    ("POST", "/queues/nic", {"json": NIC}),
    (
        "POST",
        "/transfer-time",
        {
            "json": {
                "file_size_bytes": 500_000_000,
                "propagation_delay_s": 0.1,
                "send_rates_bps": [2e8, 1e9],
                "loss_model": {"kind": "constant", "loss": 0.01},
            }
        },
    ),
    ("POST", "/srn/solve", {"json": {"net": SOLVE_NET}}),
    (
        "POST",
        "/sweeps",
        {"json": {"inputs": {**QUERY, "cpu_tasks": "0..2", "io_tasks": [0, 1]}}},
    ),
    ("POST", "/what-if", {"json": {"inputs": QUERY, "max_buffer_packets": 128}}),
    ("GET", "/plots/transfer-time", {"params": QUERY}),
    ("GET", "/plots/loss", {"params": QUERY}),
    ("GET", "/plots/service-time-cdf", {"params": {"cpu_tasks": 2, "io_tasks": 1}}),
    (
        "GET",
        "/plots/bottleneck-rate-grid",
        {"params": {"cpu_tasks": "0..2", "io_tasks": "0,1", **_TRANSFER}},
    ),
    (
        "GET",
        "/plots/sweep",
        {"params": {"cpu_tasks": 2, "io_tasks": "0..2", "cores": "1,2", **_TRANSFER}},
    ),
]


@pytest.mark.parametrize(
    ("method", "path", "request_kwargs"), COMPUTING, ids=[f"{m} {p}" for m, p, _ in COMPUTING]
)
def test_no_endpoint_runs_model_code_on_the_event_loop(
    method: str, path: str, request_kwargs: dict[str, Any]
) -> None:
    """Issue #13 item 5, for every computing endpoint: a profiler on the event loop's
    thread (``sys.setprofile`` is per thread) records each library function entered from
    outside the libraries.  Only input checks, size estimates and serialisation may be
    among them; a solve, a search or a curve must run in a compute thread or a worker."""
    entered: set[str] = set()
    depth = 0

    def watch(frame: FrameType, event: str, arg: object) -> None:
        nonlocal depth
        filename = frame.f_code.co_filename
        if not filename.startswith((*LIBRARIES, PLANNING)):
            return
        if event == "call":
            if depth == 0:
                relative = Path(filename).relative_to(ROOT).as_posix()
                entered.add(f"{relative}:{frame.f_code.co_qualname}")
            depth += 1
        elif event == "return":
            depth -= 1

    async def scenario() -> httpx.Response:
        # The lifespan would pin this (the main) thread to one CPU for the rest of the
        # session: the pin is app.runtime.colocation's business, not this test's.
        application = create_app(
            Settings(**SETTINGS, probe_enabled=False, compute_on_loop_cpu=False)
        )
        async with application.router.lifespan_context(application):
            transport = httpx.ASGITransport(app=application)
            async with httpx.AsyncClient(transport=transport, base_url="http://test") as client:
                sys.setprofile(watch)
                try:
                    return await client.request(method, path, **request_kwargs)
                finally:
                    sys.setprofile(None)

    response = asyncio.run(scenario())
    assert response.status_code == 200, response.text
    assert entered <= ALLOWED_ON_LOOP, sorted(entered - ALLOWED_ON_LOOP)


def test_compute_threads_see_the_request_context_and_close_at_shutdown() -> None:
    """The compute threads run in a copy of the caller's context (the request id reaches
    their logs and problems); after shutdown closed them, new work gets 503, not a 500
    from a shut-down executor, until the app starts again."""
    from app.schemas.problems import REQUEST_ID

    state = create_app(Settings(**SETTINGS)).state.service

    async def scenario() -> tuple[str | None, str]:
        REQUEST_ID.set("req-42")
        seen = await state.run_in_thread(REQUEST_ID.get)
        worker = await state.run_in_thread(lambda: threading.current_thread().name)
        state.close_compute_threads()
        with pytest.raises(ProblemError) as info:
            await state.run_in_thread(lambda: None)
        assert info.value.status == 503
        assert info.value.headers["Retry-After"]
        # The same app started again (a second lifespan) computes again.
        state.open_compute_threads()
        assert await state.run_in_thread(lambda: 7) == 7
        return seen, worker

    seen, worker = asyncio.run(scenario())
    assert seen == "req-42"
    assert worker.startswith("blastrate-compute")
