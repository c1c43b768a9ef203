"""Progress of a state-space exploration, for callers that show it or may cancel it.

:func:`srn.reachability_graph` takes a ``progress`` callback, called with an
:class:`ExplorationProgress` about twice a second while it explores (the solver's
counterpart is :class:`srn.SolveProgress`).  An exception the callback raises stops the
exploration and propagates: the way to cancel one.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

__all__ = ["ExplorationProgress", "ExplorationReporter"]


@dataclass(frozen=True)
class ExplorationProgress:
    """Where an exploration stands.

    Attributes
    ----------
    states : int
        Tangible markings found so far.
    edges : int
        CTMC edges (timed firings between tangible markings) generated so far.
    expanded : int
        Markings whose successors are all known; exploration ends when it reaches
        ``states``.
    seconds : float
        Wall-clock seconds since the exploration started.
    done : bool
        True for the last report, made once the graph is complete.
    """

    states: int
    edges: int
    expanded: int
    seconds: float
    done: bool = False


class ExplorationReporter:
    """Passes counts to a ``progress`` callback at most every ``every`` seconds.

    The explorers call it as often as is cheap for them; it forwards a report when
    ``every`` seconds have passed since the last one (and always the final one).  A
    report with fewer states than the last is dropped, so the callback sees counts that
    never decrease even when exploration starts over in the compiled explorer.

    Parameters
    ----------
    callback : callable
        Receives each :class:`ExplorationProgress`.
    every : float, optional
        Seconds between reports; :attr:`EVERY` by default.
    """

    #: Default seconds between reports: often enough for a progress bar, rarely enough
    #: that reporting costs nothing.
    EVERY = 0.5

    def __init__(
        self, callback: Callable[[ExplorationProgress], None], every: float | None = None
    ) -> None:
        self.callback = callback
        self.every = self.EVERY if every is None else every
        self.start = time.perf_counter()
        self._last = self.start
        self._states = -1

    def __call__(self, states: int, edges: int, expanded: int, *, done: bool = False) -> None:
        """Report these counts if it is time to (always when ``done``)."""
        now = time.perf_counter()
        if not done and (now - self._last < self.every or states < self._states):
            return
        self._last = now
        self._states = max(self._states, int(states))
        self.callback(
            ExplorationProgress(int(states), int(edges), int(expanded), now - self.start, done)
        )
