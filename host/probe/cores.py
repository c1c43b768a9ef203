"""The cores available to the receiver: CPU affinity and the cgroup CPU quota.

The model's ``m`` is the number of tasks the processor can run at once.  Two things
limit it for a process on Linux:

* its CPU affinity (``sched_getaffinity``; for a root other than ``/``, the
  ``Cpus_allowed_list`` line of ``/proc/self/status``, which shows the same mask);
* the CPU bandwidth quota of its cgroup and of every ancestor cgroup: cgroup v2
  ``cpu.max`` (``"<quota> <period>"`` or ``"max <period>"``), cgroup v1
  ``cpu.cfs_quota_us`` / ``cpu.cfs_period_us`` (quota ``-1`` = no limit).  The cgroup is
  found from ``/proc/self/cgroup`` and the mount table ``/proc/self/mountinfo``.

Effective cores = min(affinity count, ceil(quota / period)).  The quota is rounded
*up*: a quota of 1.5 CPUs still lets two tasks run at the same instant (they are then
throttled for part of each period), and ``m`` counts simultaneous servers, so rounding
down would hide a core the tasks do run on.  The unrounded ``quota / period`` is
reported in the source string so a user can see the fraction.
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass
from pathlib import Path

from .readings import Reading, under_root

__all__ = ["CpuQuota", "affinity_cores", "cgroup_cpu_quota", "effective_cores", "parse_cpu_list"]


def parse_cpu_list(text: str) -> set[int]:
    """CPU numbers of a kernel CPU list such as ``"0-3,8,10-11"``.

    Examples
    --------
    >>> sorted(parse_cpu_list("0-2,5"))
    [0, 1, 2, 5]
    """
    cpus: set[int] = set()
    for part in text.strip().split(","):
        if not part:
            continue
        lo, _, hi = part.partition("-")
        cpus.update(range(int(lo), int(hi or lo) + 1))
    return cpus


def affinity_cores(root: str | Path = "/") -> Reading:
    """CPUs this process may run on (count)."""
    if Path(root) == Path("/") and hasattr(os, "sched_getaffinity"):
        return Reading(len(os.sched_getaffinity(0)), "sched_getaffinity(0)")
    status = under_root(root, "/proc/self/status")
    try:
        for line in status.read_text().splitlines():
            if line.startswith("Cpus_allowed_list:"):
                cpus = parse_cpu_list(line.split(":", 1)[1])
                return Reading(len(cpus), "/proc/self/status Cpus_allowed_list")
    except (OSError, ValueError) as exc:
        return Reading(None, "/proc/self/status", f"unreadable: {exc}")
    return Reading(None, "/proc/self/status", "no Cpus_allowed_list line")


@dataclass(frozen=True)
class CpuQuota:
    """The tightest CPU bandwidth limit on this process's cgroup and its ancestors.

    Attributes
    ----------
    cpus : float or None
        quota / period in CPUs; None when no cgroup sets a limit.
    source : str
        The file that set it (or the files read, when none did).
    unread : str or None
        Why no cgroup could be examined (None when one was).
    """

    cpus: float | None
    source: str
    unread: str | None = None


def _mounts(root: str | Path) -> list[tuple[str, str, str, set[str]]]:
    """(root within the hierarchy, mount point, fs type, super options) per cgroup mount."""
    out = []
    for line in under_root(root, "/proc/self/mountinfo").read_text().splitlines():
        left, sep, right = line.partition(" - ")
        if not sep:
            continue
        fields, tail = left.split(), right.split()
        if len(fields) < 5 or len(tail) < 3 or tail[0] not in ("cgroup", "cgroup2"):
            continue
        # Mount points escape blanks as octal (\040).
        point = fields[4].encode().decode("unicode_escape")
        out.append((fields[3], point, tail[0], set(tail[2].split(","))))
    return out


def _cgroup_dirs(root: str | Path) -> list[tuple[str, Path, Path]]:
    """(kind, directory, mount point) of this process's cgroups that can hold a quota."""
    lines = under_root(root, "/proc/self/cgroup").read_text().splitlines()
    mounts = _mounts(root)
    found: list[tuple[str, Path, Path]] = []
    for line in lines:
        parts = line.split(":", 2)
        if len(parts) != 3:
            continue
        _, controllers, path = parts
        if controllers == "":
            kind, wanted = "v2", [m for m in mounts if m[2] == "cgroup2"]
        elif "cpu" in controllers.split(","):
            kind, wanted = "v1", [m for m in mounts if m[2] == "cgroup" and "cpu" in m[3]]
        else:
            continue
        for mount_root, point, _, _ in wanted:
            # The path is relative to the hierarchy's root; the mount shows the
            # hierarchy from mount_root (a container sees only its own subtree).
            if mount_root != "/" and (path + "/").startswith(mount_root.rstrip("/") + "/"):
                rel = path[len(mount_root.rstrip("/")) :]
            else:
                rel = path
            top = under_root(root, point)
            found.append((kind, top / rel.lstrip("/"), top))
            break
    return found


def _quota_at(kind: str, folder: Path) -> tuple[float | None, str] | None:
    """(CPUs or None for no limit, file) at one cgroup directory; None if no file."""
    if kind == "v2":
        path = folder / "cpu.max"
        try:
            quota, period = path.read_text().split()[:2]
        except (OSError, ValueError):
            return None
        return (None if quota == "max" else int(quota) / int(period), str(path))
    quota_path, period_path = folder / "cpu.cfs_quota_us", folder / "cpu.cfs_period_us"
    try:
        quota_us = int(quota_path.read_text())
        period_us = int(period_path.read_text())
    except (OSError, ValueError):
        return None
    return (None if quota_us < 0 else quota_us / period_us, str(quota_path))


def cgroup_cpu_quota(root: str | Path = "/") -> CpuQuota:
    """The tightest CPU quota (in CPUs) over this process's cgroup and its ancestors."""
    try:
        dirs = _cgroup_dirs(root)
    except OSError as exc:
        return CpuQuota(None, "/proc/self/cgroup", f"unreadable: {exc}")
    best: tuple[float, str] | None = None
    examined: list[str] = []
    for kind, folder, top in dirs:
        # Walk up to the mount point: a parent's quota limits every child.
        chain = [folder, *(p for p in folder.parents if p.is_relative_to(top))]
        for level in chain:
            found = _quota_at(kind, level)
            if found is None:
                continue
            examined.append(found[1])
            cpus, where = found
            if cpus is not None and (best is None or cpus < best[0]):
                best = (cpus, where)
    shown = [_host_path(p, root) for p in examined]
    if best is None:
        if not dirs:
            return CpuQuota(None, "/proc/self/cgroup", "no cgroup with a cpu controller mounted")
        return CpuQuota(None, "no limit in " + (", ".join(shown[:3]) or "the cgroup"))
    return CpuQuota(best[0], _host_path(best[1], root))


def _host_path(path: str, root: str | Path) -> str:
    return str(Path("/") / Path(path).relative_to(Path(root)))


def effective_cores(root: str | Path = "/") -> tuple[Reading, Reading, CpuQuota]:
    """(effective cores, affinity count, cgroup quota) of this process.

    Effective cores = min(affinity count, ceil(quota / period)); see the module notes
    for the rounding.  When the affinity cannot be read the quota alone decides; when
    neither can, the value is unread and the model's default of one core is named.
    """
    affinity = affinity_cores(root)
    quota = cgroup_cpu_quota(root)
    quota_cores = None if quota.cpus is None else max(1, math.ceil(quota.cpus - 1e-9))
    quota_note = (
        f"cgroup quota {quota.cpus:g} CPUs ({quota.source}) rounded up to {quota_cores}"
        if quota.cpus is not None
        else f"cgroup quota: {quota.unread or quota.source}"
    )
    if affinity.value is None and quota_cores is None:
        reason = f"affinity {affinity.unread}; {quota_note}"
        return Reading.defaulted(1, "1 core (SPEC section 1)", reason), affinity, quota
    counts = [c for c in (affinity.value, quota_cores) if c is not None]
    value = min(counts)
    source = f"min(affinity {affinity.value} via {affinity.source}, {quota_note})"
    return Reading(value, source), affinity, quota
