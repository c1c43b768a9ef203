"""One probe of the receiving host: its workload (C, I, m, d) and its NIC.

:func:`probe_host` samples the host's tasks over a window (blocking for the window's
length), reads the cores, disks and NIC, and returns a :class:`HostProbe` whose every
value says where it came from.  The probing process itself is left out: by default its
own tasks and every descendant process (a service's worker pool); the caller may name
the processes to leave out instead.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Collection
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from ..errors import WorkloadError
from ..profiles import DEFAULT_PROFILE, HostProfile, host_profile
from ..workload import Workload
from .classify import TaskVerdict, classify_tasks
from .cores import CpuQuota, effective_cores
from .disks import DiskInfo, real_disks
from .nic import CoalesceReader, NicReadings, RingReader, probe_nic
from .readings import Reading
from .tasks import TaskSnapshot, read_states, snapshot_tasks

__all__ = ["MAX_PROBE_INTERVAL_S", "MAX_PROBE_SAMPLES", "HostProbe", "probe_host"]

#: Longest sampling window (s) and most state samples in one window.
MAX_PROBE_INTERVAL_S = 600.0
MAX_PROBE_SAMPLES = 1_000


@dataclass(frozen=True)
class HostProbe:
    """What one probe found.

    Attributes
    ----------
    cpu_tasks, io_tasks, cores, disks : Reading
        The model's C, I, m and d, each with its source.
    nic : NicReadings
        Interface, line rate (bit/s), MTU and payload (bytes), K and N (packets).
    tasks : tuple of TaskVerdict
        The class of every task examined, with the evidence.
    excluded_tasks : int
        Tasks left out (the prober's own and those asked for; kernel threads).
    window_s : float
        Length of the sampling window (s).
    samples : int
        State samples taken in the window (fewer than asked when sampling fell behind).
    taken_at : datetime
        End of the window (UTC).
    affinity : Reading
        CPUs the process may run on.
    quota : CpuQuota
        The cgroup CPU quota.
    devices : tuple of DiskInfo
        Every block device examined.
    """

    cpu_tasks: Reading
    io_tasks: Reading
    cores: Reading
    disks: Reading
    nic: NicReadings
    tasks: tuple[TaskVerdict, ...]
    excluded_tasks: int
    window_s: float
    samples: int
    taken_at: datetime
    affinity: Reading
    quota: CpuQuota
    devices: tuple[DiskInfo, ...] = field(default=())

    def workload(self, *, cores: int | None = None, disks: int | None = None) -> Workload:
        """The model's workload from the probe (``cores`` and ``disks`` may override)."""
        return Workload(
            cpu_tasks=self.cpu_tasks.value,
            io_tasks=self.io_tasks.value,
            cores=self.cores.value if cores is None else cores,
            disks=self.disks.value if disks is None else disks,
        )

    def workload_on(
        self,
        cpus: Collection[int],
        *,
        affinity: Callable[[int], set[int]] | None = None,
    ) -> Workload:
        """The workload that competes for ``cpus``, with m = their number.

        A task whose affinity lies inside ``cpus`` counts as one; a task that may also
        run elsewhere counts for the share of its CPUs that are in ``cpus`` (the load
        balancer spreads it), and the shares are rounded to the nearest whole task.
        Disks are the probe's own.

        Parameters
        ----------
        cpus : collection of int
            The CPUs a process may run on (e.g. ``os.sched_getaffinity(0)``).
        affinity : callable, optional
            ``affinity(tid) -> set of CPUs``; default ``os.sched_getaffinity``.  A task
            that has gone since the probe counts as not competing.
        """
        mine = set(cpus)
        if not mine:
            raise WorkloadError("cpus must name at least one CPU", field="cpus")
        read = affinity or os.sched_getaffinity
        share = {"cpu": 0.0, "io": 0.0}
        for task in self.tasks:
            if task.kind not in share:
                continue
            try:
                allowed = set(read(task.tid))
            except OSError:
                continue
            if allowed:
                share[task.kind] += len(allowed & mine) / len(allowed)
        return Workload(
            cpu_tasks=round(share["cpu"]),
            io_tasks=round(share["io"]),
            cores=len(mine),
            disks=self.disks.value,
        )

    def verdict(self, pid: int) -> list[TaskVerdict]:
        """The verdicts of the tasks of process ``pid``."""
        return [t for t in self.tasks if t.pid == pid]

    def to_dict(self, *, tasks: bool = False) -> dict[str, Any]:
        """JSON-ready form: ``workload`` (four readings), ``nic``, the window, and the
        per-task verdicts when ``tasks`` is true (only the CPU- and I/O-bound ones)."""
        out: dict[str, Any] = {
            "workload": {
                "cpu_tasks": self.cpu_tasks.to_dict(),
                "io_tasks": self.io_tasks.to_dict(),
                "cores": self.cores.to_dict(),
                "disks": self.disks.to_dict(),
            },
            "nic": self.nic.to_dict(),
            "window_s": round(self.window_s, 6),
            "samples": self.samples,
            "taken_at": self.taken_at.isoformat(),
            "tasks_examined": len(self.tasks),
            "tasks_excluded": self.excluded_tasks,
            "cpu": {
                "affinity": self.affinity.to_dict(),
                "cgroup_quota_cpus": self.quota.cpus,
                "cgroup_quota_source": self.quota.source,
            },
            "block_devices": [d.to_dict() for d in self.devices],
        }
        if tasks:
            out["tasks"] = [t.to_dict() for t in self.tasks if t.kind != "idle"]
        return out


def _descendants(snapshot: dict[int, TaskSnapshot], roots: Collection[int]) -> set[int]:
    """Pids of ``roots`` and of every process descended from them."""
    children: dict[int, set[int]] = {}
    for task in snapshot.values():
        if task.pid == task.tid:  # the thread-group leader carries the process's parent
            children.setdefault(task.ppid, set()).add(task.pid)
    found, todo = set(roots), list(roots)
    while todo:
        for child in children.get(todo.pop(), ()):
            if child not in found:
                found.add(child)
                todo.append(child)
    return found


def probe_host(
    root: str | Path = "/",
    *,
    interval_s: float = 2.0,
    samples: int = 20,
    interface: str | None = None,
    defaults: HostProfile | None = None,
    exclude_pids: Collection[int] | None = None,
    include_kernel_threads: bool = False,
    ring_reader: RingReader | None = None,
    coalesce_reader: CoalesceReader | None = None,
    sleep: Callable[[float], None] = time.sleep,
    clock: Callable[[], float] = time.monotonic,
) -> HostProbe:
    """Probe the receiving host over a window of ``interval_s`` seconds (blocks).

    Parameters
    ----------
    root : str or Path
        File-system root holding ``/proc`` and ``/sys``; ``"/"`` for this host (tests
        pass a fake tree).
    interval_s : float
        Length of the sampling window (s), in (0, :data:`MAX_PROBE_INTERVAL_S`].
    samples : int
        Task-state samples taken in the window, spread evenly, 1 to
        :data:`MAX_PROBE_SAMPLES`.
    interface : str, optional
        The receiving interface; default: the default route's.
    defaults : HostProfile, optional
        Profile whose values stand in for unread NIC values (``sx280-2007``).
    exclude_pids : collection of int, optional
        Processes (all their threads) to leave out.  Default: this process and every
        process descended from it.  When given, exactly these are left out.
    include_kernel_threads : bool
        Count kernel threads too (default: no; the model's tasks are user work, and the
        kernel's network work is what mu_net measures).
    ring_reader, coalesce_reader : callable, optional
        See :func:`host.probe.nic.probe_nic`.
    sleep, clock : callable
        Wait and monotonic clock (s); tests pass fakes.

    Returns
    -------
    HostProbe

    Raises
    ------
    WorkloadError
        ``field="interval"`` or ``"samples"`` out of range; ``"interface"`` unknown.
    """
    if not (isinstance(interval_s, int | float) and 0 < interval_s <= MAX_PROBE_INTERVAL_S):
        raise WorkloadError(
            f"interval must lie in (0, {MAX_PROBE_INTERVAL_S:g}] s, got {interval_s!r}",
            field="interval",
            limit="max_probe_interval_s",
            maximum=MAX_PROBE_INTERVAL_S,
            reached=float(interval_s) if isinstance(interval_s, int | float) else None,
        )
    if (
        isinstance(samples, bool)
        or not isinstance(samples, int)
        or not 1 <= samples <= MAX_PROBE_SAMPLES
    ):
        raise WorkloadError(
            f"samples must be an integer in [1, {MAX_PROBE_SAMPLES}], got {samples!r}",
            field="samples",
        )
    base = defaults or host_profile(DEFAULT_PROFILE)
    # NIC first: a bad interface name fails before the window is spent.
    nic = probe_nic(root, interface, base, ring_reader=ring_reader, coalesce_reader=coalesce_reader)

    start = snapshot_tasks(root)
    t0 = clock()
    if exclude_pids is None:
        excluded_pids = _descendants(start, {os.getpid()})
    else:
        excluded_pids = set(exclude_pids)
    watched = {
        tid: t.pid
        for tid, t in start.items()
        if t.pid not in excluded_pids and (include_kernel_threads or not t.kernel_thread)
    }
    states = []
    step = interval_s / samples
    for i in range(samples):
        # Samples at the middle of each of `samples` equal slices of the window.  On a
        # loaded host a sample can take longer than a slice: the samples that no longer
        # fit are dropped rather than stretching the window.
        target = t0 + (i + 0.5) * step
        delay = target - clock()
        if delay > 0:
            sleep(delay)
        elif clock() >= t0 + interval_s:
            break
        states.append(read_states(root, watched))
    delay = t0 + interval_s - clock()
    if delay > 0:
        sleep(delay)
    end = snapshot_tasks(root)
    window = clock() - t0
    kept_start = {tid: t for tid, t in start.items() if tid in watched}
    ticks = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100
    verdicts = classify_tasks(kept_start, end, states, window, float(ticks))

    c = sum(1 for v in verdicts if v.kind == "cpu")
    i = sum(1 for v in verdicts if v.kind == "io")
    has_schedstat = any(t.run_ns is not None for t in kept_start.values())
    basis = "/proc/<pid>/task/<tid>/schedstat" if has_schedstat else "/proc/<pid>/task/<tid>/stat"
    where = f"over {window:.3g} s, {len(states)} state samples, {len(verdicts)} tasks"
    cpu_tasks = Reading(c, f"{basis} {where}: runnable >= 50% of the window")
    io_tasks = Reading(
        i,
        f"/proc/<pid>/task/<tid>/stat, status, io {where}: repeated wake-ups with storage waits",
    )
    cores, affinity, quota = effective_cores(root)
    disks, devices = real_disks(root)
    return HostProbe(
        cpu_tasks=cpu_tasks,
        io_tasks=io_tasks,
        cores=cores,
        disks=disks,
        nic=nic,
        tasks=tuple(verdicts),
        excluded_tasks=len(start) - len(watched),
        window_s=window,
        samples=len(states),
        taken_at=datetime.now(UTC),
        affinity=affinity,
        quota=quota,
        devices=tuple(devices),
    )
