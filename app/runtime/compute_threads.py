"""A bounded pool of threads that run work for the event loop, with a short hand-off.

``loop.run_in_executor`` on a ``ThreadPoolExecutor`` goes through a
``concurrent.futures.Future``, a work item, the executor's thread accounting and an
asyncio future chained to the first by callbacks.  On the hot path of ``GET
/bottleneck-rate`` that machinery took about half of the hand-off to a compute thread
and back: 80 us of an uncached request's 1.0 ms on the 2-vCPU machines measured (the
threads on the loop's CPU, :mod:`app.runtime.colocation`), against about 45 us for what this
module does -- put the work on a ``SimpleQueue``; the thread runs it and hands the
outcome to the loop with one ``call_soon_threadsafe``.

Semantics kept from the executor: at most ``size`` threads, made on demand; work whose
caller stopped waiting before it started is skipped; :meth:`ComputeThreads.close`
drops queued work and lets the threads end after their current work.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import queue
import threading
from collections.abc import Callable
from typing import Any, TypeVar

__all__ = ["ComputeThreads"]

T = TypeVar("T")

# A queue entry: the loop, the future it waits on, and the work (run in the caller's
# context); None tells a thread to end.
_Work = tuple[
    asyncio.AbstractEventLoop, "asyncio.Future[Any]", contextvars.Context, Callable[[], Any]
]


def _deliver(future: asyncio.Future[Any], value: Any, error: BaseException | None) -> None:
    """On the loop: settle ``future``, unless its waiter has gone (cancelled)."""
    if future.done():
        return
    if error is None:
        future.set_result(value)
    else:
        future.set_exception(error)


class ComputeThreads:
    """Up to ``size`` threads named ``{name}_{k}``, each first running ``initializer()``.

    Parameters
    ----------
    size : int
        Most threads (>= 1); work beyond them waits in the queue.
    name : str
        Thread name prefix.
    initializer : callable, optional
        Run once at the start of each thread (the CPU pin of :mod:`app.runtime.colocation`).
    """

    def __init__(self, size: int, name: str, initializer: Callable[[], None] | None = None) -> None:
        if size < 1:
            raise ValueError(f"size must be at least 1, got {size}")
        self.size = size
        self.name = name
        self._initializer = initializer
        self._queue: queue.SimpleQueue[_Work | None] = queue.SimpleQueue()
        self._lock = threading.Lock()
        self._threads: list[threading.Thread] = []
        self._idle = 0
        self._closed = False

    @property
    def threads(self) -> list[threading.Thread]:
        """The threads made so far (alive or ended)."""
        with self._lock:
            return list(self._threads)

    async def run(self, function: Callable[[], T]) -> T:
        """``function()`` in one of the threads, in a copy of the caller's context.

        A caller that is cancelled stops waiting: work not started yet is skipped, work
        already running finishes and its result is dropped.

        Raises
        ------
        RuntimeError
            After :meth:`close`.
        """
        return await self.submit(function)

    def submit(self, function: Callable[[], T]) -> asyncio.Future[T]:
        """Queue ``function()`` now; the future of the running loop that gets its outcome.

        As :meth:`run`, for a caller that wants the future itself (cancelling it skips
        work not started yet); call it on the event loop.

        Raises
        ------
        RuntimeError
            After :meth:`close`, or without a running event loop.
        """
        loop = asyncio.get_running_loop()
        future: asyncio.Future[T] = loop.create_future()
        with self._lock:
            if self._closed:
                raise RuntimeError("the compute threads are closed")
            self._queue.put((loop, future, contextvars.copy_context(), function))
            # An idle thread is counted as taken here, not when it picks the work up,
            # so that a burst of submissions does not count one idle thread many times.
            if self._idle > 0:
                self._idle -= 1
            elif len(self._threads) < self.size:
                # Daemon threads, as an executor's are in effect: a pool that is never
                # closed (an app whose lifespan never ran) must not hold the interpreter
                # open at exit.  The service closes its pool at shutdown.
                thread = threading.Thread(
                    target=self._work, name=f"{self.name}_{len(self._threads)}", daemon=True
                )
                self._threads.append(thread)
                thread.start()
        return future

    def close(self) -> None:
        """Refuse new work, drop queued work (its waiters get ``CancelledError``), and
        let each thread end after its current work.  Does not wait."""
        with self._lock:
            self._closed = True
            while True:
                try:
                    item = self._queue.get_nowait()
                except queue.Empty:
                    break
                if item is not None:
                    loop, future, _, _ = item
                    if not loop.is_closed():
                        loop.call_soon_threadsafe(future.cancel)
            for _ in self._threads:
                self._queue.put(None)

    def _work(self) -> None:
        if self._initializer is not None:
            self._initializer()
        get = self._queue.get
        while True:
            item = get()
            if item is None:
                return
            loop, future, context, function = item
            value: Any = None
            error: BaseException | None = None
            ran = not future.done()  # a waiter that has gone does not need the work
            if ran:
                try:
                    value = context.run(function)
                except BaseException as exc:  # handed to the waiter, raised there
                    error = exc
            # Idle from here on, before the waiter hears of it: its next submission
            # must find this thread rather than start another.
            with self._lock:
                self._idle += 1
            if ran:
                # RuntimeError: the loop has closed, so nobody waits any more.
                with contextlib.suppress(RuntimeError):
                    loop.call_soon_threadsafe(_deliver, future, value, error)
            del value, error  # an idle thread holds no result
