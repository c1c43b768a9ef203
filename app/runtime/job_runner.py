"""Run queued SRN jobs in worker processes, report their progress, and stop them on request.

One dispatcher thread per service process claims queued jobs from the
:class:`~app.runtime.job_store.JobStore` (up to ``workers`` at a time), starts one process per
job, and then, every ``poll_s`` seconds, reads the progress the process sends through
its pipe, writes it to the store with a heartbeat, and kills the process (SIGKILL) when
the job is cancelled or overruns its wall time.  Because the queue lives in the
database, jobs queued before a restart are picked up after it, and jobs that were
running when their process died are marked ``interrupted`` instead of staying
``running`` forever.
"""

from __future__ import annotations

import contextlib
import json
import logging
import math
import multiprocessing
import multiprocessing.connection
import os
import signal
import socket
import threading
import time
import traceback
import uuid
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from .lifeline import end_with
from .pool import worker_context

if TYPE_CHECKING:  # the job processes import this module; they need no database code
    from .job_store import JobRecord, JobStore

__all__ = ["JobRunner"]

log = logging.getLogger("blastrate.jobs")


def _problem(slug: str, detail: str, field_: str, limit: str | None = None, **extra: Any) -> Any:
    from app.schemas.problems import FieldProblem, ProblemError

    return ProblemError(
        slug,
        detail,
        [FieldProblem(field_, detail, limit, extra.get("allowed"), extra.get("actual"))],
    ).to_dict("")


def _orphaned() -> Any:
    return _problem(
        "internal-error",
        "the service stopped while the job ran (restart or crash); submit it again",
        "job",
    )


def _job_main(
    conn: multiprocessing.connection.Connection,
    request: dict[str, Any],
    budget: dict[str, Any],
    max_result_bytes: int,
    server_pid: int | None = None,
) -> None:
    """Body of a job process: solve, sending progress and then the answer through ``conn``."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    if server_pid is not None:
        end_with(server_pid)
    from app.operations.srn_solve import SolveBudget, solve_srn
    from app.schemas.problems import problem_from_exception

    def progress(info: dict[str, Any]) -> None:
        with contextlib.suppress(BrokenPipeError, OSError):
            conn.send(("progress", info))

    try:
        result = solve_srn(request, SolveBudget(**budget), progress=progress)
        size = len(json.dumps(result))
        if size > max_result_bytes:
            reply: tuple[str, Any] = (
                "problem",
                _problem(
                    "limit-exceeded",
                    f"the result is {size} bytes; max_job_result_bytes={max_result_bytes}",
                    "body",
                    "max_job_result_bytes",
                    allowed=max_result_bytes,
                    actual=size,
                ),
            )
        else:
            reply = ("ok", result)
    except MemoryError:
        reply = (
            "problem",
            _problem("limit-exceeded", "the solve ran out of memory", "body", "memory"),
        )
    except Exception as exc:
        problem = problem_from_exception(exc, prefix="body.")
        if problem is not None:
            reply = ("problem", problem.to_dict(""))
        else:
            reply = ("error", "".join(traceback.format_exception(exc)))
    with contextlib.suppress(BrokenPipeError, OSError):
        conn.send(reply)


@dataclass
class _Running:
    record: JobRecord
    process: Any
    conn: multiprocessing.connection.Connection
    started: float
    progress: dict[str, Any] = field(default_factory=dict)
    last_beat: float = 0.0


class JobRunner:
    """Claims and runs jobs of a :class:`JobStore` in worker processes.

    Parameters
    ----------
    store : JobStore
        Where jobs are queued and recorded.
    budget : dict
        Keyword arguments of :class:`app.operations.srn_solve.SolveBudget` for every job.
    workers : int
        Jobs this process runs at the same time.
    timeout_s : float
        Wall time of one job (s), from its start; the process is killed after it.
    max_result_bytes : int
        Largest result body kept (bytes of JSON).
    poll_s : float
        Dispatcher period (s).
    stale_after_s : float
        A running job whose heartbeat is older than this is taken as orphaned at start-up.
    retention_s : float
        Finished jobs are deleted this long after they end (s).
    """

    def __init__(
        self,
        store: JobStore,
        budget: dict[str, Any],
        *,
        workers: int = 1,
        timeout_s: float = 600.0,
        max_result_bytes: int = 20_000_000,
        poll_s: float = 0.2,
        stale_after_s: float = 30.0,
        retention_s: float = 7 * 86_400.0,
    ) -> None:
        self.store = store
        self.budget = budget
        self.workers = workers
        self.timeout_s = timeout_s
        self.max_result_bytes = max_result_bytes
        self.poll_s = poll_s
        self.stale_after_s = stale_after_s
        self.retention_s = retention_s
        self._last_purge = -math.inf
        self._last_sweep = time.monotonic()
        self.owner = f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"
        self._context = worker_context()
        # Written by the dispatcher thread only; read by others (pids) under the lock.
        self._running: dict[str, _Running] = {}
        self._running_lock = threading.Lock()
        self._wake = threading.Event()
        self._wake_r, self._wake_w = os.pipe()
        os.set_blocking(self._wake_r, False)
        # Guards the pipe's closing: a closed descriptor's number can be reused by any
        # file the process opens next, so nobody may write to it after.
        self._pipe_lock = threading.Lock()
        self._pipe_open = True
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    # -- life cycle ------------------------------------------------------------------------
    def start(self) -> None:
        """Mark orphaned jobs interrupted and start the dispatcher (blocking; idempotent)."""
        if self._thread is not None:
            return
        if self._stop.is_set():
            raise RuntimeError("a closed JobRunner cannot start again; make a new one")
        orphaned = self.store.interrupt_stale(self.stale_after_s, _orphaned())
        if orphaned:
            log.warning("jobs interrupted by a restart", extra={"jobs": orphaned})
        self._thread = threading.Thread(target=self._loop, name="blastrate-jobs", daemon=True)
        self._thread.start()

    def notify(self) -> None:
        """Wake the dispatcher now (a job was queued or cancelled)."""
        self._wake.set()
        with self._pipe_lock, contextlib.suppress(OSError):
            if self._pipe_open:
                os.write(self._wake_w, b"!")

    def close(self, timeout_s: float = 10.0) -> bool:
        """Stop the dispatcher, kill running jobs and mark them interrupted (blocking).

        Parameters
        ----------
        timeout_s : float
            Longest wait for the dispatcher (s).  It may be inside a database call that
            waits for another process's write lock.

        Returns
        -------
        bool
            True if the runner has stopped.  False if the dispatcher is still inside a
            database call after ``timeout_s``: it then stops by itself when the call
            returns, interrupting its jobs and starting no new one, so the caller must
            keep the store open.
        """
        self._stop.set()
        self.notify()
        thread, self._thread = self._thread, None
        if thread is None:
            self._shut_down()  # never started: nothing else touches the jobs
            return True
        thread.join(timeout=timeout_s)
        if thread.is_alive():
            log.warning(
                "job dispatcher still in a database call; it stops when the call returns",
                extra={"timeout_s": timeout_s},
            )
            self._thread = thread
            return False
        return True

    @property
    def stopped(self) -> bool:
        """True once the dispatcher has ended (or before it starts)."""
        return self._thread is None or not self._thread.is_alive()

    def pids(self) -> dict[str, int]:
        """Process id of each running job (by job id)."""
        with self._running_lock:
            return {job_id: run.process.pid for job_id, run in self._running.items()}

    def _shut_down(self) -> None:
        """Kill the running jobs, mark them interrupted, close the wake pipe (once)."""
        with self._pipe_lock:
            if not self._pipe_open:
                return  # done already; the descriptor numbers may belong to other files now
        for job_id, run in list(self._running.items()):
            self._kill(run)
            try:
                self.store.finish(
                    job_id,
                    "interrupted",
                    problem=_problem(
                        "internal-error",
                        "the service stopped while the job ran; submit it again",
                        "job",
                    ),
                    progress=run.progress,
                )
            except Exception:  # the stale-job sweep of the next service marks it instead
                log.exception("could not mark a job interrupted", extra={"job": job_id})
        with self._running_lock:
            self._running.clear()
        with self._pipe_lock:
            self._pipe_open = False
            for fd in (self._wake_r, self._wake_w):
                with contextlib.suppress(OSError):
                    os.close(fd)

    # -- the dispatcher --------------------------------------------------------------------
    def _loop(self) -> None:
        try:
            self._dispatch()
        finally:
            # Here, not in close(): only this thread touches the running jobs, and it may
            # outlive close()'s wait.
            self._shut_down()

    def _dispatch(self) -> None:
        while not self._stop.is_set():
            woken = self._wake.is_set()
            self._wake.clear()
            try:
                self._tend(force_beat=woken)
                self._claim()
                if time.monotonic() - self._last_sweep > min(10.0, self.stale_after_s / 3):
                    # Jobs whose owner died (crash, kill -9) stop beating; whichever service
                    # process notices first marks them interrupted.
                    self._last_sweep = time.monotonic()
                    self.store.interrupt_stale(self.stale_after_s, _orphaned())
                if time.monotonic() - self._last_purge > 60.0:
                    self._last_purge = time.monotonic()
                    self.store.purge(self.retention_s)
            except Exception:  # the store may be briefly unavailable; try again
                log.exception("job dispatcher error")
            # Sleep until a job process sends something, a job is queued or cancelled, or
            # the poll period ends (heartbeats, wall-time checks, other service processes).
            ready = multiprocessing.connection.wait(
                [self._wake_r, *(run.conn for run in self._running.values())], self.poll_s
            )
            if self._wake_r in ready:
                with contextlib.suppress(BlockingIOError, OSError):
                    os.read(self._wake_r, 4096)

    def _claim(self) -> None:
        while len(self._running) < self.workers and not self._stop.is_set():
            record = self.store.claim(self.owner)
            if record is None:
                return
            if self._stop.is_set():
                # close() was called while the claim waited for the database: start
                # nothing, and leave the job to the next service to start.
                self.store.release(record.id, self.owner)
                return
            parent, child = self._context.Pipe(duplex=False)
            process = self._context.Process(
                target=_job_main,
                args=(child, record.request, self.budget, self.max_result_bytes, os.getpid()),
                daemon=True,
                name=f"blastrate-job-{record.id[:8]}",
            )
            process.start()
            child.close()
            now = time.monotonic()
            with self._running_lock:
                self._running[record.id] = _Running(
                    record, process, parent, now, {"stage": "starting"}
                )
            log.info("job started", extra={"job": record.id, "pid": process.pid})

    def _tend(self, force_beat: bool) -> None:
        for job_id, run in list(self._running.items()):
            done = self._drain(job_id, run)
            if done:
                continue
            elapsed = time.monotonic() - run.started
            run.progress["elapsed_s"] = round(elapsed, 3)
            if force_beat or time.monotonic() - run.last_beat >= 1.0:
                run.last_beat = time.monotonic()
                if self.store.heartbeat(job_id, run.progress):
                    self._end(job_id, run, "cancelled", kill=True)
                    continue
            if elapsed > self.timeout_s:
                self._end(
                    job_id,
                    run,
                    "failed",
                    kill=True,
                    problem=_problem(
                        "limit-exceeded",
                        f"the job took longer than job_timeout_s={self.timeout_s:g} s and was "
                        "stopped",
                        "body",
                        "job_timeout_s",
                        allowed=self.timeout_s,
                        actual=round(elapsed, 3),
                    ),
                )
            elif not run.process.is_alive():
                # It may have answered just before exiting.
                if self._drain(job_id, run):
                    continue
                self._end(
                    job_id,
                    run,
                    "failed",
                    problem=_problem(
                        "limit-exceeded",
                        "the job's process died before answering (most likely out of memory)",
                        "body",
                        "memory",
                    ),
                )

    def _drain(self, job_id: str, run: _Running) -> bool:
        """Read what the process sent; True if the job ended."""
        try:
            while run.conn.poll():
                kind, value = run.conn.recv()
                if kind == "progress":
                    run.progress.update(value)
                    continue
                if kind == "ok":
                    value["solved_in"] = "worker-pool"
                    self._end(job_id, run, "succeeded", result=value)
                elif kind == "problem":
                    self._end(job_id, run, "failed", problem=value)
                else:
                    log.error("job failed", extra={"job": job_id, "traceback": value})
                    self._end(
                        job_id,
                        run,
                        "failed",
                        problem=_problem("internal-error", "the solver failed unexpectedly", "job"),
                    )
                return True
        except (EOFError, OSError):
            run.process.join(timeout=1)
            self._end(
                job_id,
                run,
                "failed",
                kill=True,
                problem=_problem(
                    "limit-exceeded",
                    "the job's process died before answering (most likely out of memory)",
                    "body",
                    "memory",
                ),
            )
            return True
        return False

    def _end(
        self,
        job_id: str,
        run: _Running,
        status: str,
        *,
        kill: bool = False,
        result: dict[str, Any] | None = None,
        problem: dict[str, Any] | None = None,
    ) -> None:
        if kill:
            self._kill(run)
        else:
            run.process.join(timeout=5)
            run.conn.close()
        run.progress["stage"] = status
        run.progress["elapsed_s"] = round(time.monotonic() - run.started, 3)
        if problem is not None and not problem.get("instance"):
            # Made outside any request (in the job's process, or here): it is about the job.
            problem = {**problem, "instance": f"/srn/jobs/{job_id}"}
        self.store.finish(job_id, status, result=result, problem=problem, progress=run.progress)
        with self._running_lock:
            self._running.pop(job_id, None)
        log.info("job ended", extra={"job": job_id, "status": status})

    @staticmethod
    def _kill(run: _Running) -> None:
        if run.process.is_alive():
            run.process.kill()
        run.process.join(timeout=5)
        with contextlib.suppress(OSError):
            run.conn.close()
