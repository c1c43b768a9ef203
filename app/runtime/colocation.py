"""The event loop and the compute threads on one CPU.

Every uncached ``GET /bottleneck-rate`` hands its model to a compute thread and takes
the answer back: two wake-ups of a sleeping thread, each followed by a hand-over of the
interpreter lock.  When the two threads sit on different CPUs, every wake-up is an
inter-processor interrupt, and the request's data (the parsed query, the chain, the
answer) moves between the two CPUs' caches.  On the 2-vCPU machines this service was
measured on, a round trip to an idle thread of a ``ThreadPoolExecutor`` took about
90 us across CPUs and 23 us on one CPU, and the pin cuts the uncached request's p50 by
0.13-0.2 ms (of 1.1-1.4 ms); ``benchmarks/service_latency.py --compare-unpinned``
measures both settings in one run.

The work given to the compute threads holds the interpreter lock, so they cannot run
in parallel with the event loop anyway: putting them on the loop's CPU costs no
parallelism.  Work that can use other CPUs runs in processes (the solve pool, the SRN
jobs, the sweeps), and those are kept off the pin: the fork server that starts the
pool's and the jobs' workers is started before the pin, and a thread that starts
processes of its own widens itself back to the process's CPUs first
(:func:`on_process_cpus`).

Linux only (``sched_setaffinity``); elsewhere, and when the process may run on one CPU
only, nothing is pinned.  Several server processes on one host (``--workers``) must
not pin: each would pin to the CPU it happened to be on, and two could pick the same.
The service does not pin when it finds it is one of several
(:func:`app.service.multiprocess_metrics.one_of_several_servers`) unless told to.
"""

from __future__ import annotations

import ctypes
import logging
import os
from collections.abc import Callable
from dataclasses import dataclass
from typing import TypeVar

__all__ = ["LoopCpu", "on_process_cpus", "pin_loop_thread", "pin_this_thread"]

log = logging.getLogger("blastrate.colocation")

T = TypeVar("T")


@dataclass(frozen=True)
class LoopCpu:
    """Where the event loop runs after :func:`pin_loop_thread`.

    Attributes
    ----------
    cpu : int
        The CPU the event loop thread and the compute threads are pinned to.
    process_cpus : frozenset of int
        The CPUs the process could use before the pin (what child processes get).
    """

    cpu: int
    process_cpus: frozenset[int]


def _current_cpu() -> int | None:
    """The CPU the calling thread runs on now (glibc's ``sched_getcpu``, else /proc)."""
    try:
        cpu = int(ctypes.CDLL(None, use_errno=True).sched_getcpu())
        if cpu >= 0:
            return cpu
    except (OSError, AttributeError):
        pass
    try:
        with open("/proc/thread-self/stat") as stat:
            # Field 39 ("processor"), counted after the parenthesised command name,
            # which may itself hold spaces.
            return int(stat.read().rpartition(")")[2].split()[36])
    except (OSError, ValueError, IndexError):
        return None


def pin_loop_thread() -> LoopCpu | None:
    """Pin the calling thread (the event loop's) to the CPU it runs on now.

    Call it on the event loop thread once start-up has started its background threads
    and processes: threads and processes started later by a pinned thread inherit the
    pin.  The fork server of :func:`app.runtime.pool.worker_context` is started here first, so
    the pool's and the jobs' worker processes keep every CPU of the process.

    Returns
    -------
    LoopCpu or None
        The CPU and the process's CPUs before the pin; None when nothing was pinned
        (no ``sched_setaffinity``, a single CPU, or the CPU could not be read).
    """
    if not hasattr(os, "sched_setaffinity"):
        return None
    cpus = frozenset(os.sched_getaffinity(0))
    cpu = _current_cpu()
    if len(cpus) < 2 or cpu is None or cpu not in cpus:
        return None
    # Late import: app.runtime.pool imports the solver stack.
    from .pool import worker_context

    context = worker_context()
    if context.get_start_method() == "forkserver":
        from multiprocessing import forkserver

        forkserver.ensure_running()
    try:
        os.sched_setaffinity(0, {cpu})
    except OSError as exc:  # a cpuset changed under us: run unpinned
        log.warning("could not pin the event loop to CPU %d: %s", cpu, exc)
        return None
    log.info("event loop and compute threads pinned to CPU %d", cpu)
    return LoopCpu(cpu, cpus)


def pin_this_thread(where: LoopCpu | None) -> None:
    """Pin the calling thread to ``where.cpu`` (the compute threads' initializer)."""
    if where is not None:
        try:
            os.sched_setaffinity(0, {where.cpu})
        except OSError as exc:
            log.warning("compute thread left unpinned: %s", exc)


def on_process_cpus(where: LoopCpu | None, function: Callable[[], T]) -> T:
    """Run ``function`` after widening the calling thread back to the process's CPUs.

    For a thread started by the pinned event loop that is about to start worker
    processes (which inherit the starting thread's CPUs).  The thread stays widened:
    it is not one of the compute threads.
    """
    if where is not None:
        try:
            os.sched_setaffinity(0, where.process_cpus)
        except OSError as exc:
            log.warning("could not widen a thread to the process's CPUs: %s", exc)
    return function()
