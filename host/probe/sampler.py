"""A background thread that keeps the latest probe of the host.

A probe blocks for its whole window, so a service cannot take one per request: a
:class:`ProbeSampler` probes back to back in a daemon thread and hands out the latest
completed window in microseconds (:meth:`ProbeSampler.latest`).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from typing import Any

from .probe import HostProbe, probe_host

__all__ = ["ProbeSampler"]

log = logging.getLogger("blastrate.probe")


class ProbeSampler:
    """Probe the host continuously in a background thread.

    Parameters
    ----------
    interval_s : float
        Window of each probe (s).
    pause_s : float
        Rest between the end of one window and the start of the next (s).
    probe : callable, optional
        Takes ``interval_s`` and returns a :class:`HostProbe`; default
        :func:`probe_host` with its defaults (this process and its descendants left
        out).
    **options
        Passed to :func:`probe_host` (``interface``, ``samples``, ...).

    Examples
    --------
    >>> sampler = ProbeSampler(0.2)  # doctest: +SKIP
    >>> sampler.start(); sampler.wait(timeout=5); sampler.latest().cpu_tasks.value  # doctest: +SKIP
    """

    def __init__(
        self,
        interval_s: float,
        pause_s: float = 0.0,
        probe: Callable[..., HostProbe] | None = None,
        **options: Any,
    ) -> None:
        self.interval_s = float(interval_s)
        self.pause_s = float(pause_s)
        self._probe = probe or probe_host
        # Waits inside a window end at once when the sampler is stopped, so that a
        # service shuts down without waiting for the window (the result is discarded).
        self._options = {"sleep": self._wait, **options} if probe is None else options
        self._latest: HostProbe | None = None
        self._error: str | None = None
        self._stop = threading.Event()
        self._ready = threading.Event()
        self._thread: threading.Thread | None = None
        self.windows = 0

    def start(self) -> None:
        """Start the thread (idempotent)."""
        if self._thread is not None and self._thread.is_alive():
            return
        self._stop.clear()
        self._thread = threading.Thread(target=self._run, name="blastrate-probe", daemon=True)
        self._thread.start()

    def stop(self, timeout: float | None = None) -> None:
        """Ask the thread to stop and wait for it (at most a window plus ``timeout``)."""
        self._stop.set()
        thread = self._thread
        if thread is not None:
            thread.join(self.interval_s + (5.0 if timeout is None else timeout))

    def latest(self) -> HostProbe | None:
        """The latest completed probe, or None before the first window ends."""
        return self._latest

    @property
    def error(self) -> str | None:
        """Why the last probe failed, if it did (cleared by the next success)."""
        return self._error

    @property
    def running(self) -> bool:
        """True while the thread runs."""
        return self._thread is not None and self._thread.is_alive()

    def wait(self, timeout: float | None = None) -> bool:
        """Wait for the first completed window; True if there is one."""
        return self._ready.wait(timeout)

    def _wait(self, seconds: float) -> None:
        self._stop.wait(seconds)

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                result = self._probe(interval_s=self.interval_s, **self._options)
            except Exception as exc:  # reported by error; the next window tries again
                self._error = f"{type(exc).__name__}: {exc}"
                log.warning("probe failed: %s", self._error)
                self._stop.wait(max(self.interval_s, 1.0))
                continue
            if self._stop.is_set():
                break  # the window was cut short by stop(): not a full window
            self._latest = result
            self._error = None
            self.windows += 1
            self._ready.set()
            if self.pause_s > 0:
                self._stop.wait(self.pause_s)
            else:
                time.sleep(0)  # let other threads in between windows
