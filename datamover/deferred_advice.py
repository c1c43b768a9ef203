"""The advice of a receiver that listens before its advisor is built.

``blastrate receive`` accepts senders within a fraction of a second of starting and
builds its advisor afterwards (the models' libraries, the socket's K, the profile
store: about a second).  :class:`DeferredAdvisor` stands in for it meanwhile.  It loads
nothing itself, so the receiver's start does not wait for the models.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import threading
import time
from collections.abc import Callable
from typing import Any

__all__ = ["AdviceUnavailable", "DeferredAdvisor", "lower_priority"]


class AdviceUnavailable(Exception):
    """The receiver has no advisor to answer with (it failed to build, or took too long).

    Attributes
    ----------
    field : str
        ``"advice"``, what the sender's error names.
    """

    field = "advice"


class DeferredAdvisor:
    """An advisor handed over later: a request before then waits for it.

    A sender that asks before the advisor is there waits, at most ``timeout_s``, and its
    answer says how long (``waited_for_start_s``).

    Parameters
    ----------
    timeout_s : float, default 30
        Longest wait for the advisor (s); past it the sender is told there is no advice.
    """

    def __init__(self, timeout_s: float = 30.0) -> None:
        self.timeout_s = timeout_s
        self._advisor: Callable[[int, Any], Any] | None = None
        self._error: str | None = None
        self._set = threading.Event()
        #: Set once a request is waiting for the advisor: whoever builds it should now.
        self.asked = threading.Event()

    def set(self, advisor: Callable[[int, Any], Any] | None, error: str | None = None) -> None:
        """Hand over the advisor, or None and why there is none."""
        self._advisor, self._error = advisor, error
        self._set.set()

    def __call__(self, file_size_bytes: int, request: Any) -> Any:
        """The advisor's answer (a :class:`datamover.RateAdvice`), once there is one.

        Raises
        ------
        AdviceUnavailable
            The advisor failed to build, or was not there within ``timeout_s``.
        """
        waited = 0.0
        if not self._set.is_set():
            started = time.monotonic()
            self.asked.set()
            self._set.wait(self.timeout_s)
            waited = time.monotonic() - started
        if self._advisor is None:
            raise AdviceUnavailable(
                self._error or f"the receiver's advisor was not ready within {waited:.0f} s"
            )
        advice = self._advisor(file_size_bytes, request)
        if waited:
            extra = {**advice.extra, "waited_for_start_s": waited}
            advice = dataclasses.replace(advice, extra=extra)
        return advice


def lower_priority(nice: int = 10) -> None:
    """Make the calling thread yield its CPU to the receive path (the advisor's build,
    the keeper): on Linux a thread is a task of its own, and its nice value applies to
    it alone.  Elsewhere, nothing."""
    with contextlib.suppress(AttributeError, OSError):
        os.setpriority(os.PRIO_PROCESS, threading.get_native_id(), nice)
