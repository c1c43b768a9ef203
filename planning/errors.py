"""The exception raised for a bad sweep, what-if or plot request."""

from __future__ import annotations

__all__ = ["PlanningError"]


class PlanningError(ValueError):
    """A planning input is malformed or beyond a limit.

    Attributes
    ----------
    field : str
        The offending input, named as ``GET /bottleneck-rate`` names it (``"io_tasks"``,
        ``"file_size"``...) or as the planning call names it (``"points"``, ``"x"``).
    limit : str or None
        The name of the limit that was reached (e.g. ``"max_points"``), if any.
    maximum, reached : float or None
        The limit's value and the value the input reached.
    """

    def __init__(
        self,
        field: str,
        reason: str,
        *,
        limit: str | None = None,
        maximum: float | None = None,
        reached: float | None = None,
    ) -> None:
        super().__init__(f"{field}: {reason}")
        self.field = field
        self.reason = reason
        self.limit = limit
        self.maximum = maximum
        self.reached = reached
