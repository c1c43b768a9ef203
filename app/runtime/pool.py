"""A small pool of solver processes whose jobs can be stopped for real.

``concurrent.futures.ProcessPoolExecutor`` cannot cancel a running job, and killing one
of its processes breaks the whole executor.  Here each worker is one process with its own
pipe: a job that overruns its wall time gets its process killed (SIGKILL, so no CPU keeps
burning), and a fresh process takes its place.  Processes come from a ``forkserver`` that
has already imported NumPy, SciPy and the libraries, so a replacement starts in tens of
milliseconds, and forking never happens from the threaded server process itself.

Every job is bounded in wall time and memory: the parent watches the worker's resident
memory while it waits, and the worker's address space is capped (``RLIMIT_AS``) as a
backstop.  A job over its bounds is a 422 naming the limit; a worker that dies for any
other reason (the kernel's OOM killer, an operator's SIGKILL) is the server's fault, a 503
with ``Retry-After``.  A worker that comes back from a job bigger than
``recycle_bytes`` is replaced, so that one big solve does not pin its peak memory.

Jobs are named functions of :data:`app.runtime.jobs.JOBS` taking and returning plain JSON data;
exceptions come back as problem+json bodies.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import logging
import multiprocessing
import multiprocessing.connection
import os
import signal
import threading
import time
import traceback
from collections import Counter, deque
from typing import Any

import anyio.to_thread

from app.runtime.observability import Metrics
from app.schemas.problems import FieldProblem, ProblemError, problem_from_exception

from .guard import resident_bytes
from .lifeline import end_with

__all__ = ["CLIENT", "SolvePool", "worker_context"]

#: The client a solve is for (the request's address; set by the HTTP middleware), so
#: that the pool can share its workers fairly between clients.
CLIENT: contextvars.ContextVar[str] = contextvars.ContextVar("blastrate_client", default="")

log = logging.getLogger("blastrate.pool")


def _virtual_bytes(pid: int | str = "self") -> int:
    """Address space of a process (bytes), 0 if unknown."""
    try:
        with open(f"/proc/{pid}/statm", "rb") as f:
            return int(f.read().split()[0]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, IndexError, ValueError):
        return 0


def _memory_problem(limit: int, actual: float | None = None) -> ProblemError:
    return ProblemError(
        "limit-exceeded",
        f"the solve needed more memory than solve_memory_bytes={limit:g} and was stopped",
        [FieldProblem("body", "out of memory", "solve_memory_bytes", limit, actual)],
    )


# Address space kept free above the job's allowance for libraries loaded lazily (bytes).
_ADDRESS_SPACE_SLACK = 1_500_000_000


def _bound_worker(memory_bytes: int | None, blas_threads: int | None) -> int | None:
    """Apply the per-process bounds in a fresh worker; returns the address-space cap."""
    cap = None
    if blas_threads is not None:
        from .native_threads import limit_native_threads

        limit_native_threads(blas_threads)
    if memory_bytes is not None:
        import resource

        # The libraries map far more address space than they touch (thread stacks, JIT
        # arenas, Numba and LLVM loaded on first use), so the cap is what is mapped now plus
        # the job's allowance plus room for those; the parent's watch of the resident
        # memory enforces the allowance itself.
        cap = _virtual_bytes() + memory_bytes + _ADDRESS_SPACE_SLACK
        with contextlib.suppress(ValueError, OSError):
            resource.setrlimit(resource.RLIMIT_AS, (cap, cap))
    return cap


def _worker_main(
    conn: multiprocessing.connection.Connection,
    memory_bytes: int | None = None,
    blas_threads: int | None = None,
    server_pid: int | None = None,
) -> None:
    """Body of a worker process: run jobs from the pipe until told to stop."""
    # Ctrl-C in a terminal signals the whole process group; the server shuts the pool down.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    if server_pid is not None:
        end_with(server_pid)
    from .jobs import JOBS

    _bound_worker(memory_bytes, blas_threads)
    try:
        conn.send(("ready", os.getpid()))
    except (BrokenPipeError, OSError):
        return
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
            reply = ("memory", None)
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


# Longest a fresh worker process may take to start (import nothing: the fork server has).
_BOOT_TIMEOUT_S = 60.0


class _Worker:
    """One worker process and the parent's end of its pipe."""

    def __init__(
        self, context: Any, memory_bytes: int | None = None, blas_threads: int | None = None
    ) -> None:
        parent, child = context.Pipe()
        self.process = context.Process(
            target=_worker_main,
            args=(child, memory_bytes, blas_threads, os.getpid()),
            daemon=True,
            name="blastrate-solver",
        )
        self.process.start()
        child.close()
        self.conn: multiprocessing.connection.Connection = parent
        self.memory_bytes = memory_bytes
        self.peak_rss = 0
        self.ready = False

    @property
    def pid(self) -> int | None:
        return self.process.pid

    def alive(self) -> bool:
        return bool(self.process.is_alive())

    def rss(self) -> int:
        """Resident memory of the process now (bytes)."""
        return resident_bytes(self.pid) if self.pid is not None else 0

    def call(
        self, name: str, payload: Any, timeout: float, period: float = 0.05
    ) -> tuple[str, Any]:
        """Run one job.

        Returns ``("timeout", elapsed)`` if it overran, ``("memory", rss)`` if its memory
        went over ``memory_bytes`` (the process is then killed), ``("died", None)`` if the
        process died, or the worker's own reply.
        """
        self.peak_rss = 0
        if not self.ready:
            # A fresh process first says it is up; its start is not the job's time.
            if not self.conn.poll(_BOOT_TIMEOUT_S):
                return ("died", None)
            try:
                self.conn.recv()
            except (EOFError, OSError):
                return ("died", None)
            self.ready = True
        start = time.monotonic()
        self.conn.send((name, payload))
        while True:
            left = timeout - (time.monotonic() - start)
            if left <= 0:
                return ("timeout", time.monotonic() - start)
            if self.conn.poll(min(period, left)):
                break
            rss = self.rss()
            self.peak_rss = max(self.peak_rss, rss)
            if self.memory_bytes is not None and rss > self.memory_bytes:
                self.kill()
                return ("memory", rss)
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


def worker_context() -> Any:
    """The multiprocessing context of every worker process the service starts.

    A fork server where the platform has one, else spawn.  The solve pool and the SRN job
    runner share the one fork server, so its preload list is set here, once, for both:
    it imports the solver stack (``app.runtime.jobs``), the job runner and the time-slice
    model (the default answer, which always runs in a worker), and every worker it forks
    starts warm.
    """
    if "forkserver" in multiprocessing.get_all_start_methods():
        context = multiprocessing.get_context("forkserver")
        context.set_forkserver_preload(
            ["app.runtime.jobs", "app.runtime.job_runner", "transport.timeslice"]
        )
        return context
    return multiprocessing.get_context("spawn")


class SolvePool:
    """Worker processes for solves that may be large, with hard wall-time and memory limits.

    Parameters
    ----------
    workers : int
        Number of worker processes.
    queue_limit : int
        Solves that may wait for a free worker; one more gets a 429 problem.
    metrics : Metrics, optional
        Where busy/waiting gauges, timeouts and worker restarts are recorded.
    memory_bytes : int, optional
        Resident memory one job may use (``solve_memory_bytes``); None for no bound.
    recycle_bytes : int, optional
        A worker whose resident memory is above this after a job is replaced.
    retry_after_s : int
        ``Retry-After`` of the 503 sent when a worker dies on the server's side.
    blas_threads : int, optional
        Threads of each BLAS/OpenMP library in a worker.

    Notes
    -----
    Use from one event loop: :meth:`run` is a coroutine; :meth:`start` and :meth:`close`
    are blocking and meant for a thread (the app's lifespan runs them there).
    :meth:`abort` may be called from any thread (a signal handler's).
    """

    def __init__(
        self,
        workers: int,
        queue_limit: int,
        metrics: Metrics | None = None,
        *,
        memory_bytes: int | None = None,
        recycle_bytes: int | None = None,
        retry_after_s: int = 2,
        blas_threads: int | None = None,
    ) -> None:
        self.size = workers
        self.queue_limit = queue_limit
        self.metrics = metrics
        self.memory_bytes = memory_bytes
        self.recycle_bytes = recycle_bytes
        self.retry_after_s = retry_after_s
        self.blas_threads = blas_threads
        self._context = worker_context()
        self._idle: deque[_Worker] = deque()
        self._all: set[_Worker] = set()
        self._lock = threading.Lock()
        # The fair queue (see run): free workers, waiters by client, running by client.
        self._free: int | None = None
        self._queues: dict[str, deque[asyncio.Future[None]]] = {}
        self._running: Counter[str] = Counter()
        self._waiting = 0
        self._busy = 0
        self._started = False
        self._aborted = False

    # -- life cycle ----------------------------------------------------------------------
    def start(self) -> None:
        """Start the worker processes (blocking; idempotent)."""
        with self._lock:
            if self._started or self._aborted:
                return
            for _ in range(self.size):
                if self._aborted:  # shutdown began while the processes were starting
                    break
                self._add_worker()
            self._started = True
        log.info("solver pool started", extra={"workers": self.size, "pids": self.pids()})

    def _new_worker(self) -> _Worker:
        return _Worker(self._context, self.memory_bytes, self.blas_threads)

    def _add_worker(self) -> _Worker:
        worker = self._new_worker()
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
            self._free = None
        for worker in workers:
            worker.stop()

    def abort(self) -> int:
        """Kill every worker now, running jobs included, and refuse new jobs (shutdown).

        The requests whose jobs were killed get a 503 ``service-unavailable``.  Safe to
        call from any thread.  Returns how many workers were killed.
        """
        self._aborted = True  # seen at once, even while start() holds the lock
        with self._lock:
            workers = list(self._all)
            self._all.clear()
            self._idle.clear()
            self._started = False
        for worker in workers:
            if worker.process.is_alive():
                worker.process.kill()
        return len(workers)

    def pids(self) -> list[int]:
        """Process ids of the live workers."""
        with self._lock:
            return sorted(w.pid for w in self._all if w.pid is not None)

    @property
    def busy(self) -> int:
        """Workers running a job now."""
        return self._busy

    @property
    def started(self) -> bool:
        return self._started

    # -- jobs ------------------------------------------------------------------------------
    def _unavailable(self, detail: str) -> ProblemError:
        return ProblemError(
            "service-unavailable",
            detail,
            headers={"Retry-After": str(self.retry_after_s)},
        )

    async def run(self, name: str, payload: Any, timeout: float, kind: str = "srn") -> Any:
        """Run job ``name`` on ``payload`` in a worker, stopping it after ``timeout`` s.

        The pool is shared fairly between clients (:data:`CLIENT`, the request's
        address): each client may have ``queue_limit`` solves waiting, and a freed
        worker goes to the waiting client with the fewest solves running (the longest
        waiting among equals).  One client's many slow solves therefore delay another
        client's by at most one solve, and never fill the other's queue.

        Raises
        ------
        ProblemError
            ``limit-exceeded`` (the wall time ``solve_timeout_s`` or the memory
            ``solve_memory_bytes``), ``too-many-requests`` when this client's queue is
            full, ``service-unavailable`` (503) when the worker died on the server's side
            or the server is shutting down, or the problem the job itself raised.
        """
        if self._aborted:
            raise self._unavailable("the server is shutting down")
        if not self._started:
            await anyio.to_thread.run_sync(self.start)
        client = CLIENT.get()
        await self._acquire(client, timeout)
        try:
            self._busy += 1
            self._gauges()
            return await anyio.to_thread.run_sync(self._run_blocking, name, payload, timeout, kind)
        finally:
            self._busy -= 1
            self._gauges()
            self._release(client)

    async def _acquire(self, client: str, timeout: float) -> None:
        if self._free is None:
            self._free = self.size
        if self._free > 0 and not self._queues:
            self._free -= 1
            self._running[client] += 1
            return
        queue = self._queues.get(client, ())
        if len(queue) >= self.queue_limit:
            raise ProblemError(
                "too-many-requests",
                f"all {self.size} solver workers are busy and this client has "
                f"{len(queue)} solves waiting",
                [FieldProblem("body", "queue full", "solve_queue", self.queue_limit, len(queue))],
                headers={"Retry-After": str(max(1, round(timeout)))},
            )
        turn: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._queues.setdefault(client, deque()).append(turn)
        self._waiting += 1
        self._gauges()
        try:
            await turn
        except BaseException:
            if turn.done() and not turn.cancelled():
                self._release(client)  # granted just as the request went away
            else:
                waiting = self._queues.get(client)
                if waiting is not None and turn in waiting:
                    waiting.remove(turn)
                    if not waiting:
                        del self._queues[client]
            raise
        finally:
            self._waiting -= 1
            self._gauges()

    def _release(self, client: str) -> None:
        self._running[client] -= 1
        if self._running[client] <= 0:
            del self._running[client]
        while self._queues:
            # The waiting client with the fewest solves running; dict order breaks ties
            # in favour of the client that has waited longest.
            chosen = min(self._queues, key=lambda c: self._running[c])
            queue = self._queues.pop(chosen)
            turn = queue.popleft()
            if queue:
                self._queues[chosen] = queue  # round robin: to the back of the order
            if turn.done():
                continue  # its request went away while it waited
            self._running[chosen] += 1
            turn.set_result(None)
            return
        self._free = (self._free or 0) + 1

    def _checkout(self) -> _Worker:
        with self._lock:
            if self._aborted or not self._idle:
                raise self._unavailable("the server is shutting down")
            worker = self._idle.popleft()
            if not worker.alive():
                self._all.discard(worker)
                worker.kill()
                worker = self._new_worker()
                self._all.add(worker)
            return worker

    def _checkin(self, worker: _Worker) -> None:
        rss = worker.rss()
        if self.recycle_bytes is not None and rss > self.recycle_bytes:
            # Freed memory often stays with the process (allocator arenas); a fresh
            # process gives it back to the host.
            log.info(
                "solver worker recycled",
                extra={"pid": worker.pid, "rss_bytes": rss, "recycle_bytes": self.recycle_bytes},
            )
            self._restarted("recycled")
            worker.stop()
            with self._lock:
                if worker in self._all:
                    self._all.discard(worker)
                    if not self._aborted:
                        self._add_worker()
            return
        with self._lock:
            if worker in self._all:
                self._idle.append(worker)
                return
        worker.stop()  # the pool was closed while it ran

    def _replace(self, worker: _Worker, reason: str) -> None:
        worker.kill()
        self._restarted(reason)
        with self._lock:
            if worker in self._all:
                self._all.discard(worker)
                if not self._aborted:
                    self._add_worker()

    def _restarted(self, reason: str) -> None:
        if self.metrics is not None:
            self.metrics.worker_restarts.labels(reason).inc()

    def _run_blocking(self, name: str, payload: Any, timeout: float, kind: str) -> Any:
        worker = self._checkout()
        start = time.perf_counter()
        try:
            status, value = worker.call(name, payload, timeout)
        except (BrokenPipeError, OSError):
            status, value = "died", None
        if status == "timeout":
            self._replace(worker, "timeout")
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
        if status == "memory":
            self._replace(worker, "memory")
            assert self.memory_bytes is not None
            log.warning(
                "solve stopped at its memory limit",
                extra={"memory_bytes": self.memory_bytes, "rss_bytes": value},
            )
            raise _memory_problem(self.memory_bytes, None if value is None else float(value))
        if status == "died":
            self._replace(worker, "died")
            if self._aborted:
                raise self._unavailable("the server is shutting down; the solve was stopped")
            if self.memory_bytes is not None and worker.peak_rss > 0.9 * self.memory_bytes:
                # Died close to its allowance: a native library failing at the address-space
                # cap rather than raising MemoryError.  The job's limit, not a server fault.
                raise _memory_problem(self.memory_bytes, float(worker.peak_rss))
            log.error(
                "solver process died",
                extra={"pid": worker.pid, "exitcode": worker.process.exitcode},
            )
            raise self._unavailable(
                f"the solver process died (exit code {worker.process.exitcode}) before "
                "answering; this is a fault on the server's side"
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
