"""A bounded shutdown: SIGTERM stops running solves and the process exits within a bound.

uvicorn stops accepting connections on SIGTERM and then waits for the requests in flight,
for as long as they take; a solve in the server process could hold it up for minutes.  The
service chains its own step before uvicorn's handler:

1. solves running in worker processes are killed (their requests get a 503 with
   ``Retry-After``) and the pool takes no more;
2. solves running in threads of the server process are interrupted (:mod:`app.runtime.guard`) and
   answered the same way;
3. a watchdog ends the process ``shutdown_timeout_s`` after the signal if it is still
   there (a thread stuck in compiled code, a client that does not read its answer).
"""

from __future__ import annotations

import logging
import multiprocessing
import os
import shutil
import signal
import threading
import time
from collections.abc import Callable
from types import FrameType
from typing import Any

from .guard import cancel_all
from .pool import SolvePool

__all__ = ["BoundedShutdown"]

log = logging.getLogger("blastrate.shutdown")

_SIGNALS = (signal.SIGTERM, signal.SIGINT)


def _remove_multiprocessing_tempdir() -> None:
    """Remove this process's multiprocessing temp folder (``pymp-*``) now.

    The fork server's socket lives there, and multiprocessing removes it from an
    ``atexit`` hook, which a process that ends by ``os._exit`` or by a signal's default
    action never runs.
    """
    tempdir = getattr(multiprocessing.current_process(), "_config", {}).get("tempdir")
    if tempdir:
        shutil.rmtree(tempdir, ignore_errors=True)


def _exit_now(code: int) -> None:
    """``os._exit``, after removing this process's multiprocessing temp folder: without
    that, every server ended by the watchdog (a Ctrl-C while it was still starting, a
    solve stuck past the bound) left one behind in the temp directory."""
    _remove_multiprocessing_tempdir()
    os._exit(code)


class BoundedShutdown:
    """Chains the service's shutdown step in front of the server's signal handlers.

    Parameters
    ----------
    pool : SolvePool
        The solver pool to abort.
    timeout_s : float
        Longest time from the signal to the end of the process (s).
    on_begin : callable, optional
        Called once when shutdown begins (e.g. to turn readiness off).
    exit : callable, optional
        How to end the process when the bound is reached (default ``os._exit``, after
        removing multiprocessing's temp folder, which ``os._exit`` would leave behind).
    """

    def __init__(
        self,
        pool: SolvePool,
        timeout_s: float,
        on_begin: Callable[[], None] | None = None,
        exit: Callable[[int], Any] = _exit_now,
    ) -> None:
        self.pool = pool
        self.timeout_s = timeout_s
        self.on_begin = on_begin
        self._exit = exit
        self._previous: dict[int, Any] = {}
        self._begun = threading.Event()
        self._terminated = False
        self.installed = False

    def install(self) -> bool:
        """Put the handlers in place (main thread only); False where that is impossible."""
        if threading.current_thread() is not threading.main_thread():
            return False
        for sig in _SIGNALS:
            self._previous[sig] = signal.signal(sig, self._on_signal)
        self.installed = True
        return True

    def uninstall(self) -> None:
        """Give the signals back to the handlers found at :meth:`install`.

        After a SIGTERM this is the process's last chance to remove multiprocessing's temp
        folder: uvicorn, once stopped, raises the SIGTERM again under the handler it found
        (the default action), so the process ends by the signal and no ``atexit`` hook
        runs.  Every ``kill`` of a server left its fork server's ``pymp-*`` folder behind.
        """
        if not self.installed or threading.current_thread() is not threading.main_thread():
            return
        for sig, handler in self._previous.items():
            if signal.getsignal(sig) == self._on_signal:
                signal.signal(sig, handler)
        self.installed = False
        if self._terminated:
            _remove_multiprocessing_tempdir()

    def _on_signal(self, sig: int, frame: FrameType | None) -> None:
        self._terminated = self._terminated or sig == signal.SIGTERM
        self.begin(signal.Signals(sig).name)
        previous = self._previous.get(sig)
        if callable(previous):
            previous(sig, frame)
        elif previous == signal.SIG_DFL and sig == signal.SIGINT:
            raise KeyboardInterrupt
        elif previous == signal.SIG_DFL:
            self._exit(128 + sig)

    def begin(self, reason: str = "shutdown") -> None:
        """Stop the running solves and start the exit watchdog (once; any thread).

        Returns at once: the stopping happens in a thread of its own, because a signal
        handler must not wait (the pool may be busy starting its processes).
        """
        if self._begun.is_set():
            return
        self._begun.set()
        if self.on_begin is not None:
            self.on_begin()
        if self.installed:
            threading.Thread(
                target=self._watchdog, daemon=True, name="blastrate-shutdown-watchdog"
            ).start()
        threading.Thread(
            target=self._stop_work, args=(reason,), daemon=True, name="blastrate-shutdown"
        ).start()

    def _stop_work(self, reason: str) -> None:
        interrupted = cancel_all()
        killed = self.pool.abort()
        log.info(
            "shutting down",
            extra={
                "reason": reason,
                "workers_killed": killed,
                "solves_interrupted": interrupted,
                "shutdown_timeout_s": self.timeout_s,
            },
        )

    def _watchdog(self) -> None:
        deadline = time.monotonic() + self.timeout_s
        while time.monotonic() < deadline:
            time.sleep(0.05)
            # Work that started after the signal (a request already being read) stops too.
            cancel_all()
        log.error(
            "shutdown exceeded its bound; exiting now",
            extra={"shutdown_timeout_s": self.timeout_s},
        )
        for handler in logging.getLogger("blastrate").handlers:
            handler.flush()
        self._exit(1)
