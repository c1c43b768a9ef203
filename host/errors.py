"""The error the host model reports about a workload or a host profile."""

from __future__ import annotations

from srn import SRNError

__all__ = ["WorkloadError"]


class WorkloadError(SRNError):
    """A workload or host profile is invalid: a task count, a rate, a name, a size limit.

    Attributes
    ----------
    field : str
        The offending field, e.g. ``"io_tasks"``, ``"mu_disk"`` or ``"profile"``.
    limit : str or None
        Name of the limit that was exceeded (``"max_cores"``, ``"max_tasks"``,
        ``"max_disks"``, ``"max_states"``), when the problem is a size limit.
    maximum : int or float or None
        The value of that limit.
    reached : int or float or None
        The value the input reached.
    """

    def __init__(
        self,
        message: str,
        *,
        field: str,
        limit: str | None = None,
        maximum: float | None = None,
        reached: float | None = None,
    ) -> None:
        super().__init__(message, field=field)
        self.limit = limit
        self.maximum = maximum
        self.reached = reached
