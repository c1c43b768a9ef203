"""The workload of a receiving host: CPU-bound and I/O-bound tasks, cores and disks."""

from __future__ import annotations

from dataclasses import dataclass

from ._checks import require_count
from .errors import WorkloadError

__all__ = ["MAX_CORES", "MAX_DISKS", "MAX_TASKS", "Workload"]

#: Largest workload accepted: cores m, tasks C + I, disks d.
MAX_CORES = 256
MAX_TASKS = 1_000
MAX_DISKS = 16


@dataclass(frozen=True)
class Workload:
    """What runs on the receiving host besides the transfer.

    Attributes
    ----------
    cpu_tasks : int
        C, CPU-bound tasks; they never leave the processor.
    io_tasks : int
        I, I/O-bound tasks; they alternate between the processor and a disk.
    cores : int
        m, processor cores shared by all tasks present (1..256).
    disks : int
        d, disks; each visit to a disk picks one uniformly (1..16).

    Raises
    ------
    WorkloadError
        Naming the field: a count that is not a whole number (booleans and floats are
        refused), a negative count, no core or disk, or a size limit exceeded
        (``max_cores`` 256, ``max_tasks`` C + I <= 1000, ``max_disks`` 16).

    Examples
    --------
    >>> Workload(cpu_tasks=2, io_tasks=1).to_dict()
    {'cpu_tasks': 2, 'io_tasks': 1, 'cores': 1, 'disks': 1}
    """

    cpu_tasks: int
    io_tasks: int
    cores: int = 1
    disks: int = 1

    def __post_init__(self) -> None:
        c = require_count(
            self.cpu_tasks, "cpu_tasks", minimum=0, maximum=MAX_TASKS, limit="max_tasks"
        )
        i = require_count(
            self.io_tasks, "io_tasks", minimum=0, maximum=MAX_TASKS, limit="max_tasks"
        )
        m = require_count(self.cores, "cores", minimum=1, maximum=MAX_CORES, limit="max_cores")
        d = require_count(self.disks, "disks", minimum=1, maximum=MAX_DISKS, limit="max_disks")
        if c + i > MAX_TASKS:
            raise WorkloadError(
                f"cpu_tasks + io_tasks = {c + i} exceeds the limit max_tasks = {MAX_TASKS}",
                field="tasks",
                limit="max_tasks",
                maximum=MAX_TASKS,
                reached=c + i,
            )
        object.__setattr__(self, "cpu_tasks", c)
        object.__setattr__(self, "io_tasks", i)
        object.__setattr__(self, "cores", m)
        object.__setattr__(self, "disks", d)

    def to_dict(self) -> dict[str, int]:
        """The workload as a JSON-ready dict."""
        return {
            "cpu_tasks": self.cpu_tasks,
            "io_tasks": self.io_tasks,
            "cores": self.cores,
            "disks": self.disks,
        }
