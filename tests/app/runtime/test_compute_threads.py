"""The compute thread pool of the service (app.runtime.compute_threads)."""

from __future__ import annotations

import asyncio
import contextvars
import threading
import time

import pytest

from app.runtime.compute_threads import ComputeThreads

WHO = contextvars.ContextVar("WHO", default="nobody")


def test_work_runs_in_a_thread_with_the_callers_context_and_errors_reach_the_caller() -> None:
    pool = ComputeThreads(2, "t")

    async def scenario() -> tuple[str, str]:
        WHO.set("request-7")
        seen = await pool.run(WHO.get)
        name = await pool.run(lambda: threading.current_thread().name)
        with pytest.raises(ZeroDivisionError):
            await pool.run(lambda: 1 / 0)
        return seen, name

    seen, name = asyncio.run(scenario())
    pool.close()
    assert seen == "request-7"
    assert name.startswith("t_") and name != threading.current_thread().name


def test_sequential_work_reuses_one_thread_and_a_burst_stays_within_the_size() -> None:
    pool = ComputeThreads(3, "t")
    started: list[str] = []
    pool_init = ComputeThreads(3, "u", initializer=lambda: started.append("x"))

    def slow(k: int) -> int:
        time.sleep(0.02)
        return k * k

    async def scenario() -> list[int]:
        for _ in range(10):
            await pool.run(lambda: None)
        assert len(pool.threads) == 1
        results = await asyncio.gather(*(pool.run(lambda k=k: slow(k)) for k in range(20)))
        await asyncio.gather(*(pool_init.run(lambda: slow(1)) for _ in range(8)))
        return list(results)

    assert asyncio.run(scenario()) == [k * k for k in range(20)]
    assert len(pool.threads) == 3
    assert len(pool_init.threads) == 3 and started == ["x"] * 3  # once per thread
    pool.close()
    pool_init.close()


def test_work_whose_caller_has_gone_is_not_started() -> None:
    pool = ComputeThreads(1, "t")
    gate = threading.Event()
    ran: list[str] = []

    async def scenario() -> None:
        first = asyncio.ensure_future(pool.run(lambda: gate.wait(10) and ran.append("first")))
        second = asyncio.ensure_future(pool.run(lambda: ran.append("second")))
        await asyncio.sleep(0.05)
        second.cancel()
        await asyncio.sleep(0)
        gate.set()
        await first
        await pool.run(lambda: None)  # the queue behind the skipped work still runs

    asyncio.run(scenario())
    pool.close()
    assert ran == ["first"]


def test_close_drops_queued_work_refuses_new_work_and_ends_the_threads() -> None:
    pool = ComputeThreads(1, "t")
    gate = threading.Event()

    async def scenario() -> None:
        running = asyncio.ensure_future(pool.run(lambda: gate.wait(10)))
        queued = asyncio.ensure_future(pool.run(lambda: "never"))
        await asyncio.sleep(0.05)
        pool.close()
        with pytest.raises(RuntimeError, match="closed"):
            await pool.run(lambda: None)
        gate.set()
        assert await running is True  # work already running finishes
        with pytest.raises(asyncio.CancelledError):
            await queued

    asyncio.run(scenario())
    for thread in pool.threads:
        thread.join(timeout=5)
        assert not thread.is_alive()


def test_a_pool_needs_a_thread() -> None:
    with pytest.raises(ValueError, match="at least 1"):
        ComputeThreads(0, "t")


def test_a_pool_never_closed_does_not_hold_the_interpreter_at_exit() -> None:
    # An app whose lifespan never ran (as in many tests) never closes its pool.
    import subprocess
    import sys

    code = (
        "import asyncio\n"
        "from app.runtime.compute_threads import ComputeThreads\n"
        "pool = ComputeThreads(2, 't')\n"
        "print(asyncio.run(pool.run(lambda: 6 * 7)))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=False
    )
    assert done.returncode == 0 and done.stdout.strip() == "42", done.stderr
