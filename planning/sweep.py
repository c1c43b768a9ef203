"""Sweeps: the effective bottleneck rate over the product of ranges of any inputs.

A sweep is a base point (see :mod:`planning.points`) and a few axes, each a list of
values of one input; its points are the Cartesian product, the last axis varying
fastest.  The points are cut into batches, each batch one task for a local process pool
or a Dask distributed cluster, so the per-task overhead (pickling, scheduling) is shared
by many points.  Batches hold points sorted by (I, d): the host model caches its
compiled nets per (I, d), so each worker compiles a shape once and then only re-solves.

Each point is computed by exactly the function a single call uses
(:func:`planning.points.evaluate_point`), and the model is deterministic, so a sweep's
answers are bit-for-bit those of one call per point, wherever they ran.
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import csv
import io
import itertools
import math
import multiprocessing
import os
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass
from typing import Any, Literal

from .errors import PlanningError
from .points import INPUT_FIELDS, RESULT_FIELDS, evaluate_points

__all__ = ["DEFAULT_MAX_POINTS", "SweepResult", "plan_batches", "run_sweep", "sweep_points"]

#: Default bound on the points of one sweep.
DEFAULT_MAX_POINTS = 100_000
# Tasks per worker: enough that a slow batch does not leave the others idle at the end,
# few enough that scheduling costs little next to the points (~5 ms each).
_TASKS_PER_WORKER = 4
# Largest batch: a progress bar still moves, and one lost task costs little.
_MAX_BATCH = 256

#: ``progress(points_done, points_total)``, called as batches complete.
Progress = Callable[[int, int], None]
Runner = Literal["inline", "processes", "dask"]


@dataclass(frozen=True)
class SweepResult:
    """The records of a sweep, in the order of the Cartesian product of its axes.

    Attributes
    ----------
    axes : dict
        Input name -> the values swept (SI units), in product order.
    records : list of dict
        One per point: every input (named as ``GET /bottleneck-rate`` names it, SI
        units) and the results (:data:`planning.points.RESULT_FIELDS`).
    ran_on : {"inline", "processes", "dask"}
        Where the points were computed.
    workers : int
        Worker processes (or Dask workers) used.
    batches : int
        Tasks the points were cut into.
    """

    axes: dict[str, list[Any]]
    records: list[dict[str, Any]]
    ran_on: Runner
    workers: int
    batches: int

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready form: ``points``, ``failed``, ``axes``, ``ran_on``, ``records``."""
        return {
            "points": len(self.records),
            "failed": sum(r["error"] is not None for r in self.records),
            "axes": self.axes,
            "ran_on": self.ran_on,
            "workers": self.workers,
            "batches": self.batches,
            "records": self.records,
        }

    def to_csv(self) -> str:
        """The records as CSV with a header row (inputs, then results); floats as
        ``repr`` so that they read back bit for bit."""
        out = io.StringIO()
        writer = csv.writer(out, lineterminator="\n")
        columns = [*INPUT_FIELDS, *RESULT_FIELDS]
        writer.writerow(columns)
        for record in self.records:
            writer.writerow(["" if record.get(c) is None else record[c] for c in columns])
        return out.getvalue()


def sweep_points(
    base: Mapping[str, Any],
    axes: Mapping[str, Sequence[Any]],
    *,
    max_points: int = DEFAULT_MAX_POINTS,
) -> list[dict[str, Any]]:
    """The points of a sweep: ``base`` with each combination of axis values.

    Parameters
    ----------
    base : mapping
        Inputs shared by every point (names of :data:`planning.points.INPUT_FIELDS`).
    axes : mapping
        Input name -> list of values; the product is taken in this order, the last axis
        varying fastest.  An axis overrides the base's value of the same input.
    max_points : int
        The most points allowed.

    Returns
    -------
    list of dict
        The points.

    Raises
    ------
    PlanningError
        ``field="points"``, ``limit="max_points"`` beyond the limit (checked before any
        point is built); the axis's name for an unknown input or an empty axis.

    Examples
    --------
    >>> pts = sweep_points({"cpu_tasks": 1}, {"io_tasks": [0, 1], "cores": [1, 2]})
    >>> [(p["io_tasks"], p["cores"]) for p in pts]
    [(0, 1), (0, 2), (1, 1), (1, 2)]
    """
    for name, values in axes.items():
        if name not in INPUT_FIELDS:
            raise PlanningError(name, f"not an input of GET /bottleneck-rate: {name!r}")
        if len(values) == 0:
            raise PlanningError(name, "an axis needs at least one value")
    count = math.prod(len(v) for v in axes.values())
    if count > max_points:
        sizes = " x ".join(f"{len(v)} {k}" for k, v in axes.items())
        raise PlanningError(
            "points",
            f"{sizes} = {count} points, more than max_points={max_points}",
            limit="max_points",
            maximum=max_points,
            reached=count,
        )
    names = list(axes)
    return [
        {**base, **dict(zip(names, combo, strict=True))}
        for combo in itertools.product(*(axes[n] for n in names))
    ]


def plan_batches(
    points: Sequence[Mapping[str, Any]], workers: int, batch_size: int | None = None
) -> list[list[int]]:
    """Cut point indices into batches; points sharing (I, d) go together.

    Parameters
    ----------
    points : sequence of mapping
        The sweep's points.
    workers : int
        Workers that will share the batches (about four batches each).
    batch_size : int, optional
        Points per batch; by default ``ceil(n / (4 workers))``, at most 256.

    Returns
    -------
    list of list of int
        Indices into ``points``; each index appears in exactly one batch.

    Examples
    --------
    >>> pts = [{"io_tasks": i % 2} for i in range(6)]
    >>> plan_batches(pts, workers=1, batch_size=3)
    [[0, 2, 4], [1, 3, 5]]
    """
    n = len(points)
    if n == 0:
        return []
    size = batch_size or min(_MAX_BATCH, max(1, math.ceil(n / (_TASKS_PER_WORKER * workers))))
    order = sorted(
        range(n), key=lambda i: (points[i].get("io_tasks") or 0, points[i].get("disks") or 1)
    )
    return [order[k : k + size] for k in range(0, n, size)]


def _too_slow(timeout_s: float) -> PlanningError:
    return PlanningError(
        "points",
        f"the sweep did not finish within timeout_s={timeout_s:g} s; sweep fewer points",
        limit="timeout_s",
        maximum=timeout_s,
    )


def _cancelled() -> PlanningError:
    return PlanningError("cancelled", "the sweep was cancelled before it finished")


def _check(cancel: threading.Event | None) -> None:
    if cancel is not None and cancel.is_set():
        raise _cancelled()


def _end_with(parent_pid: int) -> None:
    """A sweep worker's initializer: end this process as soon as ``parent_pid`` ends.

    A server killed with ``kill -9`` cannot shut its pool down, and its workers would
    go on computing a sweep nobody reads (issue #36).  A ``pidfd`` (Linux 5.3+) becomes
    readable when the process ends; a daemon thread blocked on it ends the worker.
    Where there is none, the parent is polled every half second.
    """
    import select
    import signal

    # Ctrl-C in a terminal signals the whole process group: the parent decides, and
    # stops the workers (a worker's own KeyboardInterrupt only printed a traceback).
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        fd = os.pidfd_open(parent_pid)
    except (AttributeError, OSError):
        fd = -1

    def watch() -> None:
        if fd >= 0:
            poller = select.poll()
            poller.register(fd, select.POLLIN)
            poller.poll()
        else:
            while os.getppid() == parent_pid:
                time.sleep(0.5)
        os._exit(70)

    threading.Thread(target=watch, name="blastrate-sweep-lifeline", daemon=True).start()


def _run_processes(
    batches: list[list[dict[str, Any]]],
    workers: int,
    done: Callable[[int, Any], None],
    timeout_s: float | None,
    cancel: threading.Event | None,
) -> None:
    # spawn, not fork: a fork of a threaded server (uvicorn, a Dask client) can inherit a
    # lock held by another thread.
    context = multiprocessing.get_context("spawn")
    pool = concurrent.futures.ProcessPoolExecutor(
        workers, mp_context=context, initializer=_end_with, initargs=(os.getpid(),)
    )
    finished = False
    try:
        futures = {pool.submit(evaluate_points, b): k for k, b in enumerate(batches)}
        # Woken by each batch, and at least every quarter second to see a cancellation.
        deadline = None if timeout_s is None else time.monotonic() + timeout_s
        pending = set(futures)
        while pending:
            _check(cancel)
            wait = 0.25 if deadline is None else min(0.25, deadline - time.monotonic())
            if wait <= 0:
                raise _too_slow(timeout_s or 0.0)
            ready, pending = concurrent.futures.wait(
                pending, timeout=wait, return_when=concurrent.futures.FIRST_COMPLETED
            )
            for future in ready:
                done(futures[future], future.result())
        finished = True
    except BrokenProcessPool as exc:
        raise RuntimeError(f"a sweep worker process died: {exc}") from exc
    finally:
        # Queued batches are dropped.  On a timeout or a cancellation the running ones
        # are stopped too, not left to finish a batch nobody will read.
        processes = list((getattr(pool, "_processes", None) or {}).values())
        results = getattr(pool, "_result_queue", None)  # shutdown() drops the reference
        manager = getattr(pool, "_executor_manager_thread", None)  # and to this
        pool.shutdown(wait=False, cancel_futures=True)
        if not finished:
            for process in processes:
                process.kill()
            for process in processes:
                process.join(timeout=5)
            # A worker killed in the middle of sending a batch's records leaves the pool's
            # manager thread blocked on the rest of the message, and this process's exit
            # waited on that thread for ever (a Ctrl-C on a large sweep printed
            # "interrupted" and never ended).  With the workers gone, closing this
            # process's end of the results pipe, the last writer, turns that wait into an
            # end of file, which the thread takes for a broken pool.
            writer = getattr(results, "_writer", None)
            if writer is not None:
                with contextlib.suppress(OSError):
                    writer.close()
        # The manager thread closes its wake-up pipe as it ends, and CPython 3.11's exit
        # hook writes to that pipe unlocked: an exit while the thread was ending printed
        # "Exception ignored ... Bad file descriptor" after "interrupted".  Once the
        # thread has ended, the hook sees the pipe closed and skips it.
        if manager is not None:
            manager.join(timeout=10)


def _run_dask(
    batches: list[list[dict[str, Any]]],
    cluster: Any,
    done: Callable[[int, Any], None],
    timeout_s: float | None,
    connect_timeout_s: float,
    cancel: threading.Event | None,
) -> int:
    import dask.config
    from distributed import Client, as_completed

    own = isinstance(cluster, str)
    try:
        # The comm timeout bounds each connection attempt; Client's own bounds the retries.
        with dask.config.set({"distributed.comm.timeouts.connect": f"{connect_timeout_s}s"}):
            client = (
                Client(cluster, timeout=connect_timeout_s, set_as_default=False) if own else cluster
            )
    except OSError as exc:
        raise PlanningError(
            "cluster", f"cannot reach the Dask scheduler {cluster!r}: {exc}"
        ) from None
    try:
        workers = max(1, len(client.scheduler_info(n_workers=-1).get("workers", {})))
        futures = client.map(evaluate_points, batches, pure=False)
        index = {f.key: k for k, f in enumerate(futures)}
        start = time.monotonic()
        # The client's own loop: as_completed would otherwise look for a default client,
        # and this one is made with set_as_default=False ("No clients found").
        pending = as_completed(futures, loop=client.loop)
        try:
            while not pending.is_empty():
                _check(cancel)
                for future in pending.next_batch(block=False):
                    done(index[future.key], future.result())
                if timeout_s is not None and time.monotonic() - start > timeout_s:
                    raise _too_slow(timeout_s)
                if not pending.is_empty() and not pending.has_ready():
                    with pending.thread_condition:
                        pending.thread_condition.wait(timeout=0.25)
        except BaseException:
            client.cancel(futures)
            raise
    finally:
        if own:
            client.close()
    return workers


def run_sweep(
    base: Mapping[str, Any],
    axes: Mapping[str, Sequence[Any]],
    *,
    max_points: int = DEFAULT_MAX_POINTS,
    workers: int | None = None,
    cluster: Any = None,
    inline: bool = False,
    batch_size: int | None = None,
    progress: Progress | None = None,
    timeout_s: float | None = None,
    connect_timeout_s: float = 10.0,
    cancel: threading.Event | None = None,
) -> SweepResult:
    """Evaluate every point of a sweep, on a local process pool or a Dask cluster.

    Parameters
    ----------
    base : mapping
        Inputs shared by every point, named as ``GET /bottleneck-rate`` names them, SI
        units (``file_size`` bytes, ``propagation_delay`` s, ``line_rate`` bit/s).
    axes : mapping
        Input name -> values (SI units); the points are the product.
    max_points : int, default 100000
        The most points allowed; beyond it :class:`PlanningError` names ``max_points``.
    workers : int, optional
        Local worker processes; default: the CPUs available to this process.
    cluster : str or distributed.Client, optional
        A Dask scheduler address (``tcp://HOST:8786``) or a connected client: run the
        batches there instead of in a local pool.
    inline : bool, default False
        Compute in this process (small sweeps, where starting a pool costs more).
    batch_size : int, optional
        Points per task (see :func:`plan_batches`).
    progress : callable, optional
        ``progress(points_done, points_total)`` after each batch.
    timeout_s : float, optional
        Wall time (s) after which the sweep stops with :class:`PlanningError`
        (``limit="timeout_s"``); checked as batches complete.
    connect_timeout_s : float, default 10
        Wall time (s) allowed to connect to a Dask scheduler given by address.
    cancel : threading.Event, optional
        Set it (from another thread) to stop the sweep: within a quarter second on a
        pool or a cluster, after the current batch inline; the sweep then raises
        :class:`PlanningError` (field ``cancelled``) and its workers stop.

    Returns
    -------
    SweepResult
        The records in product order.  A point without an answer (no sending rate lets
        the transfer finish, an impossible combination) has ``error`` set and None
        results; the others are unaffected.

    Raises
    ------
    PlanningError
        Too many points (``limit="max_points"``), an unknown input, an unreachable
        cluster (``field="cluster"``).
    """
    points = sweep_points(base, axes, max_points=max_points)
    total = len(points)
    records: list[dict[str, Any] | None] = [None] * total
    finished = 0
    ran_on: Runner
    if cluster is not None:
        ran_on, n_workers = "dask", 1
    elif inline:
        ran_on, n_workers = "inline", 1
    else:
        ran_on = "processes"
        n_workers = workers or len(os.sched_getaffinity(0))
    if workers is not None and workers < 1:
        raise PlanningError("workers", f"must be >= 1, got {workers}")
    plan = plan_batches(points, n_workers, batch_size)
    batches = [[points[i] for i in batch] for batch in plan]

    def done(k: int, batch_records: list[dict[str, Any]]) -> None:
        nonlocal finished
        for i, record in zip(plan[k], batch_records, strict=True):
            records[i] = record
        finished += len(batch_records)
        if progress is not None:
            progress(finished, total)

    if ran_on == "dask":
        n_workers = _run_dask(batches, cluster, done, timeout_s, connect_timeout_s, cancel)
    elif ran_on == "processes" and total > 0:
        _run_processes(batches, min(n_workers, len(batches)), done, timeout_s, cancel)
    else:
        start = time.monotonic()
        for k, batch in enumerate(batches):
            _check(cancel)
            done(k, evaluate_points(batch))
            if timeout_s is not None and time.monotonic() - start > timeout_s:
                raise _too_slow(timeout_s)
    return SweepResult(
        axes={k: list(v) for k, v in axes.items()},
        records=[r for r in records if r is not None],
        ran_on=ran_on,
        workers=n_workers,
        batches=len(batches),
    )
