"""A small pool of solver processes whose jobs can be stopped for real.

``concurrent.futures.ProcessPoolExecutor`` cannot cancel a running job, and killing one
of its processes breaks the whole executor.  Here each worker is one process with its own
pipe: a job that overruns its wall time gets its process killed (SIGKILL, so no CPU keeps
burning), and a fresh process takes its place.  Processes come from a ``forkserver`` that
has already imported NumPy, SciPy and the libraries, so a replacement starts in tens of
milliseconds, and forking never happens from the threaded server process itself.

Jobs are named functions of :data:`app.jobs.JOBS` taking and returning plain JSON data;
exceptions come back as problem+json bodies.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import multiprocessing
import multiprocessing.connection
import os
import signal
import threading
import time
import traceback
from collections import deque
from typing import Any

import anyio.to_thread

from .observability import Metrics
from .problems import FieldProblem, ProblemError, problem_from_exception

__all__ = ["SolvePool"]

log = logging.getLogger("blastrate.pool")


def _worker_main(conn: multiprocessing.connection.Connection) -> None:
    """Body of a worker process: run jobs from the pipe until told to stop."""
    # Ctrl-C in a terminal signals the whole process group; the server shuts the pool down.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    from .jobs import JOBS

    while True:
        try:
            message = conn.recv()
        except (EOFError, OSError):
            return
        if message is None:
            return
        name, payload = message
        try:
            reply: tuple[str, Any] = ("ok", JOBS[name](payload))
        except MemoryError:
            reply = (
                "problem",
                ProblemError(
                    "limit-exceeded",
                    "the solve ran out of memory",
                    [FieldProblem("body", "out of memory", "memory")],
                ).to_dict(""),
            )
        except Exception as exc:
            problem = problem_from_exception(exc, prefix="body.")
            if problem is not None:
                reply = ("problem", problem.to_dict(""))
            else:
                reply = ("error", "".join(traceback.format_exception(exc)))
        try:
            conn.send(reply)
        except (BrokenPipeError, OSError):
            return


class _Worker:
    """One worker process and the parent's end of its pipe."""

    def __init__(self, context: Any) -> None:
        parent, child = context.Pipe()
        self.process = context.Process(
            target=_worker_main, args=(child,), daemon=True, name="blastrate-solver"
        )
        self.process.start()
        child.close()
        self.conn: multiprocessing.connection.Connection = parent

    @property
    def pid(self) -> int | None:
        return self.process.pid

    def alive(self) -> bool:
        return bool(self.process.is_alive())

    def call(self, name: str, payload: Any, timeout: float) -> tuple[str, Any]:
        """Run one job; ``("timeout", None)`` if it overran, ``("died", None)`` if it died."""
        self.conn.send((name, payload))
        if not self.conn.poll(timeout):
            return ("timeout", None)
        try:
            reply: tuple[str, Any] = self.conn.recv()
        except (EOFError, OSError):
            return ("died", None)
        return reply

    def kill(self) -> None:
        """Stop the process now (SIGKILL) and reap it."""
        if self.process.is_alive():
            self.process.kill()
        self.process.join(timeout=5)
        self.conn.close()

    def stop(self) -> None:
        """Ask the process to exit; kill it if it does not."""
        with contextlib.suppress(BrokenPipeError, OSError):
            self.conn.send(None)
        self.process.join(timeout=2)
        self.kill()


def _context() -> Any:
    methods = multiprocessing.get_all_start_methods()
    if "forkserver" in methods:
        context = multiprocessing.get_context("forkserver")
        # Modules the fork server imports once, so that each worker starts warm.
        context.set_forkserver_preload(["app.jobs"])
        return context
    return multiprocessing.get_context("spawn")


class SolvePool:
    """Worker processes for solves that may be large, with a hard wall-time limit.

    Parameters
    ----------
    workers : int
        Number of worker processes.
    queue_limit : int
        Solves that may wait for a free worker; one more gets a 429 problem.
    metrics : Metrics, optional
        Where busy/waiting gauges and timeouts are recorded.

    Notes
    -----
    Use from one event loop: :meth:`run` is a coroutine; :meth:`start` and :meth:`close`
    are blocking and meant for a thread (the app's lifespan runs them there).
    """

    def __init__(self, workers: int, queue_limit: int, metrics: Metrics | None = None) -> None:
        self.size = workers
        self.queue_limit = queue_limit
        self.metrics = metrics
        self._context = _context()
        self._idle: deque[_Worker] = deque()
        self._all: set[_Worker] = set()
        self._lock = threading.Lock()
        self._slots: asyncio.Semaphore | None = None
        self._waiting = 0
        self._busy = 0
        self._started = False

    # -- life cycle ----------------------------------------------------------------------
    def start(self) -> None:
        """Start the worker processes (blocking; idempotent)."""
        with self._lock:
            if self._started:
                return
            for _ in range(self.size):
                self._add_worker()
            self._started = True
        log.info("solver pool started", extra={"workers": self.size, "pids": self.pids()})

    def _add_worker(self) -> _Worker:
        worker = _Worker(self._context)
        self._all.add(worker)
        self._idle.append(worker)
        return worker

    def close(self) -> None:
        """Stop every worker (blocking).  A later :meth:`run` starts them again."""
        with self._lock:
            workers = list(self._all)
            self._all.clear()
            self._idle.clear()
            self._started = False
            self._slots = None
        for worker in workers:
            worker.stop()

    def pids(self) -> list[int]:
        """Process ids of the live workers."""
        return sorted(w.pid for w in self._all if w.pid is not None)

    @property
    def busy(self) -> int:
        """Workers running a job now."""
        return self._busy

    @property
    def started(self) -> bool:
        return self._started

    # -- jobs ------------------------------------------------------------------------------
    async def run(self, name: str, payload: Any, timeout: float, kind: str = "srn") -> Any:
        """Run job ``name`` on ``payload`` in a worker, stopping it after ``timeout`` s.

        Raises
        ------
        ProblemError
            ``limit-exceeded`` (the wall time ``solve_timeout_s``, or the worker died, most
            likely of memory), ``too-many-requests`` when the queue is full, or the problem
            the job itself raised.
        """
        if not self._started:
            await anyio.to_thread.run_sync(self.start)
        if self._slots is None:
            self._slots = asyncio.Semaphore(self.size)
        slots = self._slots
        if slots.locked() and self._waiting >= self.queue_limit:
            raise ProblemError(
                "too-many-requests",
                f"all {self.size} solver workers are busy and {self._waiting} solves wait",
                [
                    FieldProblem(
                        "body", "queue full", "solve_queue", self.queue_limit, self._waiting
                    )
                ],
                headers={"Retry-After": str(max(1, round(timeout)))},
            )
        self._waiting += 1
        self._gauges()
        try:
            await slots.acquire()
        finally:
            self._waiting -= 1
        try:
            self._busy += 1
            self._gauges()
            return await anyio.to_thread.run_sync(self._run_blocking, name, payload, timeout, kind)
        finally:
            self._busy -= 1
            self._gauges()
            slots.release()

    def _checkout(self) -> _Worker:
        with self._lock:
            worker = self._idle.popleft()
            if not worker.alive():
                self._all.discard(worker)
                worker.kill()
                worker = _Worker(self._context)
                self._all.add(worker)
            return worker

    def _checkin(self, worker: _Worker) -> None:
        with self._lock:
            if worker in self._all:
                self._idle.append(worker)
                return
        worker.stop()  # the pool was closed while it ran

    def _replace(self, worker: _Worker) -> None:
        worker.kill()
        with self._lock:
            if worker in self._all:
                self._all.discard(worker)
                self._add_worker()

    def _run_blocking(self, name: str, payload: Any, timeout: float, kind: str) -> Any:
        worker = self._checkout()
        start = time.perf_counter()
        try:
            status, value = worker.call(name, payload, timeout)
        except (BrokenPipeError, OSError):
            status, value = "died", None
        if status in ("timeout", "died"):
            self._replace(worker)
            if status == "timeout":
                if self.metrics is not None:
                    self.metrics.solve_timeouts.labels(kind).inc()
                log.warning("solve stopped at its time limit", extra={"timeout_s": timeout})
                raise ProblemError(
                    "limit-exceeded",
                    f"the solve took longer than solve_timeout_s={timeout:g} s and was stopped",
                    [
                        FieldProblem(
                            "body",
                            "solve wall time exceeded",
                            "solve_timeout_s",
                            timeout,
                            round(time.perf_counter() - start, 3),
                        )
                    ],
                )
            raise ProblemError(
                "limit-exceeded",
                "the solver process died before answering (most likely out of memory)",
                [FieldProblem("body", "solver process died", "memory")],
            )
        self._checkin(worker)
        if self.metrics is not None:
            self.metrics.solves.labels(kind, "worker-pool").observe(time.perf_counter() - start)
        if status == "ok":
            return value
        if status == "problem":
            raise ProblemError.from_dict(value)
        raise RuntimeError(f"solver worker failed:\n{value}")

    def _gauges(self) -> None:
        if self.metrics is not None:
            self.metrics.pool_busy.set(self._busy)
            self.metrics.pool_waiting.set(self._waiting)


def pid_exists(pid: int) -> bool:
    """Whether a process with this id exists (and is not a zombie we own)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True
