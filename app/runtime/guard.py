"""Wall-time and memory bounds for work run in a thread of the server process.

Work in the server process is admitted only when an estimate made before it starts says
it is cheap (:func:`app.operations.srn_solve.estimate_srn_solve`); this module is the backstop for
an estimate that was wrong.  A watchdog thread looks at the clock and the process's
resident memory every few milliseconds and, when the work overruns, raises
:class:`WorkInterrupted` inside the working thread (CPython's asynchronous exception,
delivered between two bytecodes).  The caller then moves the work to the solver pool,
where a process can be killed, or gives up at shutdown.

A long call into compiled code (one sparse factorisation) finishes before the exception
lands; the estimate keeps such calls small in the server process.
"""

from __future__ import annotations

import ctypes
import os
import threading
import time
from collections.abc import Callable
from typing import Any, TypeVar

__all__ = ["GuardedWork", "WorkInterrupted", "cancel_all", "resident_bytes", "run_guarded"]

T = TypeVar("T")

try:
    _PAGE = os.sysconf("SC_PAGE_SIZE")
except (AttributeError, ValueError, OSError):  # pragma: no cover - not Linux
    _PAGE = 4096


def resident_bytes(pid: int | str = "self") -> int:
    """Resident set size of a process (bytes), 0 if it cannot be read (Linux ``/proc``)."""
    try:
        with open(f"/proc/{pid}/statm", "rb") as f:
            return int(f.read().split()[1]) * _PAGE
    except (OSError, IndexError, ValueError):
        return 0


class WorkInterrupted(BaseException):
    """Raised inside guarded work that overran a bound or was cancelled.

    A ``BaseException``, so that no ``except Exception`` inside the work swallows it.

    Attributes
    ----------
    reason : str
        ``"time"``, ``"memory"`` or ``"cancelled"``.
    elapsed_s : float
        Wall time the work had run (s).
    """

    def __init__(self, reason: str = "cancelled", elapsed_s: float = 0.0) -> None:
        super().__init__(reason)
        self.reason = reason
        self.elapsed_s = elapsed_s


def _raise_in(thread_id: int, exc: type[BaseException] | None) -> None:
    ctypes.pythonapi.PyThreadState_SetAsyncExc(
        ctypes.c_ulong(thread_id), ctypes.py_object(exc) if exc is not None else None
    )


class GuardedWork:
    """One piece of work running in the current thread under a time and memory bound.

    Use :func:`run_guarded`; :meth:`cancel` stops the work from any thread.
    """

    def __init__(self, seconds: float | None, memory_bytes: int | None) -> None:
        self.seconds = seconds
        self.memory_bytes = memory_bytes
        self.reason: str | None = None
        self._thread_id = threading.get_ident()
        self._lock = threading.Lock()
        self._done = False
        self._start = time.monotonic()

    def interrupt(self, reason: str) -> bool:
        """Stop the work with ``reason``; False if it had already finished or stopped."""
        with self._lock:
            if self._done or self.reason is not None:
                return False
            self.reason = reason
            _raise_in(self._thread_id, WorkInterrupted)
            return True

    def cancel(self) -> bool:
        """Stop the work (at shutdown)."""
        return self.interrupt("cancelled")

    def _finish(self) -> None:
        with self._lock:
            self._done = True
            if self.reason is not None:
                # An exception set but not yet delivered must not hit the thread's next job.
                _raise_in(self._thread_id, None)

    def _watch(self, period: float) -> None:
        base = resident_bytes() if self.memory_bytes is not None else 0
        while True:
            with self._lock:
                if self._done or self.reason is not None:
                    return
            elapsed = time.monotonic() - self._start
            if self.seconds is not None and elapsed > self.seconds:
                self.interrupt("time")
                return
            if self.memory_bytes is not None and resident_bytes() - base > self.memory_bytes:
                self.interrupt("memory")
                return
            time.sleep(period)


#: Work running under :func:`run_guarded` now, so that shutdown can cancel it.
ACTIVE: set[GuardedWork] = set()
_ACTIVE_LOCK = threading.Lock()


def cancel_all() -> int:
    """Cancel every guarded work of this process; returns how many were stopped."""
    with _ACTIVE_LOCK:
        works = list(ACTIVE)
    return sum(work.cancel() for work in works)


def run_guarded(
    work: Callable[[], T],
    seconds: float | None,
    memory_bytes: int | None = None,
    period: float = 0.01,
) -> T:
    """Run ``work()`` in this thread, interrupted when it overruns.

    Parameters
    ----------
    work : callable
        The computation.
    seconds : float or None
        Wall-time bound (s).
    memory_bytes : int or None
        Bound on the growth of this process's resident memory while the work runs
        (bytes).  Other threads' allocations count too, so it is a bound for the process.
    period : float
        How often the watchdog looks (s).

    Returns
    -------
    The value of ``work()``.

    Raises
    ------
    WorkInterrupted
        With ``reason`` "time", "memory" or "cancelled" (see :func:`cancel_all`).
    """
    guard = GuardedWork(seconds, memory_bytes)
    watchdog: threading.Thread | None = None
    if seconds is not None or memory_bytes is not None:
        watchdog = threading.Thread(
            target=guard._watch, args=(period,), daemon=True, name="blastrate-guard"
        )
    with _ACTIVE_LOCK:
        ACTIVE.add(guard)
    done = False
    result: Any = None
    try:
        if watchdog is not None:
            watchdog.start()
        result = work()
        done = True
    except WorkInterrupted:
        pass
    finally:
        _settle(guard)
    if not done:
        raise WorkInterrupted(guard.reason or "cancelled", time.monotonic() - guard._start)
    return result


def _settle(guard: GuardedWork) -> None:
    """Mark the work finished, absorbing an interruption that lands meanwhile.

    The asynchronous exception is delivered at most once, but possibly after the work
    returned: then it lands here, and the finished work keeps its result.
    """
    for _ in range(3):
        try:
            guard._finish()
            with _ACTIVE_LOCK:
                ACTIVE.discard(guard)
            return
        except WorkInterrupted:
            continue
