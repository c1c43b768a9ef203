"""What one running app holds: settings, cache, metrics, the solver pool, readiness."""

from __future__ import annotations

import asyncio
import functools
import json
import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, TypeVar

from fastapi import Request
from starlette.responses import Response

from app.runtime.colocation import LoopCpu, pin_loop_thread, pin_this_thread
from app.runtime.compute_threads import ComputeThreads
from app.runtime.observability import Metrics
from app.runtime.pool import SolvePool
from app.schemas.problems import ProblemError
from app.settings import Settings

from .cache import CachedBody, QueryIndex, ResultCache, cache_key, etag_matches
from .multiprocess_metrics import one_of_several_servers

__all__ = ["ServiceState", "encode", "respond", "service"]

T = TypeVar("T")

log = logging.getLogger("blastrate.colocation")


@dataclass
class ServiceState:
    """Everything the routes share, created by :func:`app.service.factory.create_app`."""

    settings: Settings
    metrics: Metrics
    cache: ResultCache
    pool: SolvePool
    query_index: QueryIndex
    ready: bool = False
    compiled_nets: int = 0
    warm_up_error: str | None = None
    shutting_down: bool = False
    extras: dict[str, Any] = field(default_factory=dict)
    #: Where the event loop and the compute threads run, once pinned
    #: (:mod:`app.runtime.colocation`).
    loop_cpu: LoopCpu | None = None
    #: The threads that compute in-process work (see :attr:`compute_threads`).
    _compute_threads: ComputeThreads | None = None
    _compute_closed: bool = False
    #: Cache keys being computed right now -> the entry their requests wait for.
    _in_flight: dict[str, asyncio.Future[CachedBody]] = field(default_factory=dict)

    def cached(self, kind: str, inputs: Any) -> tuple[str, CachedBody | None]:
        """The cache key of ``inputs`` and the cached body, if any (counted in metrics)."""
        key = cache_key(kind, inputs)
        entry = self.cache.get(key)
        self.metrics.cache_lookups.labels(kind, "hit" if entry else "miss").inc()
        return key, entry

    def store(self, key: str, body: bytes) -> CachedBody:
        """Cache an encoded result body."""
        entry = self.cache.put(key, body)
        self.metrics.cache_entries.set(len(self.cache))
        return entry

    async def compute_once(self, key: str, compute: Callable[[], Awaitable[bytes]]) -> CachedBody:
        """The body for a cache miss, computed once however many requests ask for it.

        The first request for ``key`` starts ``compute()`` (which gives the encoded body:
        a coroutine, run as a task of its own, or a future already under way, such as
        :meth:`start_in_thread`'s); identical requests arriving while it runs wait for the
        same result, or its exception.  Each waits through a shield: a client that hangs
        up does not cancel the work the others are waiting for, and the result is cached
        either way.
        """
        entry = self._in_flight.get(key)
        if entry is None:
            work = asyncio.ensure_future(compute())  # a future passes through as it is
            entry = asyncio.get_running_loop().create_future()
            self._in_flight[key] = entry
            work.add_done_callback(functools.partial(self._settle, key, entry))
        return await asyncio.shield(entry)

    def _settle(
        self, key: str, entry: asyncio.Future[CachedBody], work: asyncio.Future[bytes]
    ) -> None:
        """On the loop, when a computation ends: cache its body and hand the entry (or
        the error) to the requests waiting for it."""
        if self._in_flight.get(key) is entry:
            del self._in_flight[key]
        if work.cancelled():
            entry.cancel()
        elif (error := work.exception()) is not None:
            entry.set_exception(error)
            entry.exception()  # retrieved here, so an error nobody awaits any more is quiet
        else:
            try:
                entry.set_result(self.store(key, work.result()))
            except Exception as exc:  # the waiters must not wait forever
                entry.set_exception(exc)
                entry.exception()

    @property
    def compute_threads(self) -> ComputeThreads:
        """The ``compute_threads`` threads that run in-process work, made on first use.

        :class:`app.runtime.compute_threads.ComputeThreads` rather than ``anyio.to_thread`` or
        ``run_in_executor``: on the hot path of ``GET /bottleneck-rate`` their futures,
        checkpoints and callbacks cost about 0.1 ms per request (measured); the pool
        bounds the threads just the same (work beyond them queues).  Each thread starts
        on the event loop's CPU when it is pinned (:meth:`pin_to_loop_cpu`).
        """
        if self._compute_threads is None:
            where = self.loop_cpu
            self._compute_threads = ComputeThreads(
                self.settings.compute_threads,
                "blastrate-compute",
                initializer=lambda: pin_this_thread(where),
            )
        return self._compute_threads

    def pin_to_loop_cpu(self) -> None:
        """At start-up, on the event loop, once the background threads and processes run:
        pin the loop and the compute threads to one CPU when ``compute_on_loop_cpu``
        (:func:`app.runtime.colocation.pin_loop_thread`).  Compute threads made before the pin
        are let go (they end when idle); new ones are made pinned."""
        if not self.settings.compute_on_loop_cpu or self.loop_cpu is not None:
            return
        if "compute_on_loop_cpu" not in self.settings.model_fields_set and one_of_several_servers():
            # Each server process would pin its loop to the CPU it started on, and two
            # could pick the same one; only an explicit setting pins them.
            log.info("event loop not pinned: one of several server processes")
            return
        self.loop_cpu = pin_loop_thread()
        if self.loop_cpu is not None and self._compute_threads is not None:
            self._compute_threads.close()
            self._compute_threads = None

    def submit_in_thread(self, function: Callable[[], T]) -> asyncio.Future[T]:
        """``function()`` queued for a compute thread now; the future of its outcome.

        The event loop only waits.

        It runs in a copy of the caller's context, so the request id reaches what it
        logs and the problems it raises.  A caller that is cancelled stops waiting: work
        not started yet is skipped, work already running finishes and its result is
        dropped (only the solve guard of :mod:`app.runtime.guard` can stop a thread early, where
        it is used); queued work is dropped at shutdown.

        Raises
        ------
        ProblemError
            ``service-unavailable`` (503) once the threads are closed at shutdown.
        """
        if self._compute_closed:
            raise ProblemError(
                "service-unavailable",
                "the server is shutting down",
                headers={"Retry-After": str(self.pool.retry_after_s)},
            )
        return self.compute_threads.submit(function)

    async def run_in_thread(self, function: Callable[[], T]) -> T:
        """``await`` of :meth:`submit_in_thread`: ``function()`` in a compute thread."""
        return await self.submit_in_thread(function)

    def open_compute_threads(self) -> None:
        """At start-up: accept in-process work (again, after a previous shutdown of the
        same app); the threads are made on first use."""
        if self._compute_closed:
            self._compute_threads = None
            self._compute_closed = False

    def close_compute_threads(self) -> None:
        """At shutdown, on the event loop: refuse new work (503), drop queued work, and
        let the threads end after their current work.

        Not waited for here: the shutdown has its own time bound, and in-process work is
        small by construction (larger chains go to the worker pool, where a wall-time
        limit holds).
        """
        self._compute_closed = True
        if self._compute_threads is not None:
            self._compute_threads.close()

    async def encoded(self, body: Any) -> bytes:
        """``body`` encoded as JSON in a compute thread (a large body takes milliseconds)."""
        return await self.run_in_thread(lambda: encode(body))

    def start_in_thread(self, kind: str, compute: Callable[[], Any]) -> asyncio.Future[bytes]:
        """Start ``compute`` in a compute thread, timed, its result encoded there too (the
        event loop only moves bytes); the future of the encoded body."""
        return self.submit_in_thread(lambda: encode(self.timed(kind, "process", compute)))

    async def in_thread(self, kind: str, compute: Callable[[], Any]) -> bytes:
        """``await`` of :meth:`start_in_thread`."""
        return await self.start_in_thread(kind, compute)

    def timed(self, kind: str, where: str, compute: Callable[[], Any]) -> Any:
        """Run ``compute`` and record its duration in the solve histogram."""
        start = time.perf_counter()
        try:
            return compute()
        finally:
            self.metrics.solves.labels(kind, where).observe(time.perf_counter() - start)


def service(request: Request) -> ServiceState:
    """The app's :class:`ServiceState`."""
    state: ServiceState = request.app.state.service
    return state


def encode(body: Any) -> bytes:
    """Compact JSON; NaN and infinities are refused (the API never sends them)."""
    return json.dumps(body, separators=(",", ":"), allow_nan=False).encode()


def respond(request: Request, entry: CachedBody, hit: bool) -> Response:
    """The response for a (possibly cached) result: 200 with an ETag, or 304 on GET."""
    headers = {"ETag": entry.etag, "Cache-Control": "no-cache", "X-Cache": "hit" if hit else "miss"}
    if request.method == "GET" and etag_matches(request.headers.get("if-none-match"), entry.etag):
        return Response(status_code=304, headers=headers)
    return Response(entry.body, media_type="application/json", headers=headers)
