"""Per-task scheduler statistics read from ``/proc``.

A *task* is what the Linux scheduler schedules: a thread, ``/proc/<pid>/task/<tid>``.
For each task this module reads

* ``stat``: state (field 3), parent pid (4), flags (9), utime and stime (14, 15, in
  clock ticks), ``delayacct_blkio_ticks`` (42: time blocked on block I/O, non-zero only
  when delay accounting is on);
* ``schedstat``: time on a CPU, time waiting on a run queue (both ns), timeslices run
  (absent without ``CONFIG_SCHED_INFO``);
* ``status``: voluntary and non-voluntary context switches;
* ``io``: bytes fetched from and sent to storage, read and write system calls
  (unreadable for other users' tasks unless privileged: then None).

Tasks come and go while they are read; a task that vanishes is skipped, never an error.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path

from .readings import under_root

__all__ = ["PF_KTHREAD", "TaskSnapshot", "read_states", "snapshot_tasks", "task_paths"]

#: ``stat`` flags bit of a kernel thread (include/linux/sched.h).
PF_KTHREAD = 0x00200000


@dataclass(frozen=True)
class TaskSnapshot:
    """Counters of one task at one instant (see the module notes for the files).

    Attributes
    ----------
    pid, tid : int
        Process (thread group) and task ids.
    comm : str
        Command name.
    state : str
        One-letter scheduler state (``R`` running or runnable, ``D`` uninterruptible
        sleep, ``S`` sleep, ...).
    ppid : int
        Parent process id.
    kernel_thread : bool
        True for kernel threads.
    cpu_ticks : int
        utime + stime (clock ticks).
    blkio_ticks : int
        Time blocked on block I/O (clock ticks; 0 without delay accounting).
    run_ns, wait_ns : int or None
        Time on a CPU and waiting on a run queue (ns), from ``schedstat``.
    timeslices : int or None
        Timeslices run, from ``schedstat``.
    voluntary, nonvoluntary : int or None
        Context switches from ``status``.
    storage_bytes : int or None
        ``read_bytes + write_bytes`` from ``io`` (bytes to and from storage).
    io_syscalls : int or None
        ``syscr + syscw`` from ``io``.
    """

    pid: int
    tid: int
    comm: str
    state: str
    ppid: int
    kernel_thread: bool
    cpu_ticks: int
    blkio_ticks: int
    run_ns: int | None
    wait_ns: int | None
    timeslices: int | None
    voluntary: int | None
    nonvoluntary: int | None
    storage_bytes: int | None
    io_syscalls: int | None


def task_paths(root: str | Path) -> Iterator[tuple[int, int, Path]]:
    """(pid, tid, directory) of every task under ``root``'s ``/proc``."""
    proc = under_root(root, "/proc")
    try:
        pids = [int(name) for name in os.listdir(proc) if name.isdigit()]
    except OSError:
        return
    for pid in sorted(pids):
        task_dir = proc / str(pid) / "task"
        try:
            tids = sorted(int(name) for name in os.listdir(task_dir) if name.isdigit())
        except OSError:
            continue  # the process ended
        for tid in tids:
            yield pid, tid, task_dir / str(tid)


def _split_stat(text: str) -> tuple[str, list[str]]:
    # The command name is in parentheses and may itself hold blanks and parentheses:
    # it ends at the last ')'.
    start, end = text.index("("), text.rindex(")")
    return text[start + 1 : end], text[end + 2 :].split()


def _read(path: Path) -> str | None:
    try:
        return path.read_text()
    except (OSError, UnicodeDecodeError):
        return None


def _keyed(text: str | None, keys: Iterable[str], sep: str = ":") -> dict[str, int]:
    wanted = set(keys)
    out: dict[str, int] = {}
    for line in (text or "").splitlines():
        key, found, value = line.partition(sep)
        if found and key.strip() in wanted:
            try:
                out[key.strip()] = int(value.split()[0])
            except (ValueError, IndexError):
                continue
    return out


def read_task(pid: int, tid: int, folder: Path) -> TaskSnapshot | None:
    """One task's counters, or None if it ended (or its ``stat`` cannot be parsed)."""
    stat = _read(folder / "stat")
    if stat is None:
        return None
    try:
        comm, rest = _split_stat(stat)
        state, ppid, flags = rest[0], int(rest[1]), int(rest[6])
        cpu_ticks = int(rest[11]) + int(rest[12])
        blkio = int(rest[39]) if len(rest) > 39 else 0
    except (ValueError, IndexError):
        return None
    run_ns = wait_ns = slices = None
    sched = _read(folder / "schedstat")
    if sched is not None:
        try:
            run_ns, wait_ns, slices = (int(x) for x in sched.split()[:3])
        except ValueError:
            run_ns = wait_ns = slices = None
    switches = _keyed(
        _read(folder / "status"), ("voluntary_ctxt_switches", "nonvoluntary_ctxt_switches")
    )
    io = _keyed(_read(folder / "io"), ("read_bytes", "write_bytes", "syscr", "syscw"))
    return TaskSnapshot(
        pid=pid,
        tid=tid,
        comm=comm,
        state=state,
        ppid=ppid,
        kernel_thread=bool(flags & PF_KTHREAD),
        cpu_ticks=cpu_ticks,
        blkio_ticks=blkio,
        run_ns=run_ns,
        wait_ns=wait_ns,
        timeslices=slices,
        voluntary=switches.get("voluntary_ctxt_switches"),
        nonvoluntary=switches.get("nonvoluntary_ctxt_switches"),
        storage_bytes=io["read_bytes"] + io["write_bytes"]
        if "read_bytes" in io and "write_bytes" in io
        else None,
        io_syscalls=io["syscr"] + io["syscw"] if "syscr" in io and "syscw" in io else None,
    )


def snapshot_tasks(root: str | Path = "/") -> dict[int, TaskSnapshot]:
    """Counters of every task on the host, by task id."""
    out: dict[int, TaskSnapshot] = {}
    for pid, tid, folder in task_paths(root):
        snap = read_task(pid, tid, folder)
        if snap is not None:
            out[tid] = snap
    return out


def read_states(root: str | Path, tasks: Mapping[int, int]) -> dict[int, str]:
    """The scheduler state letter of each task (tid -> pid given), skipping ended ones.

    Only ``stat`` is read, up to the state letter: this is the cheap sample taken many
    times per window.
    """
    proc = under_root(root, "/proc")
    out: dict[int, str] = {}
    for tid, pid in tasks.items():
        text = _read(proc / str(pid) / "task" / str(tid) / "stat")
        if text is None:
            continue
        end = text.rfind(")")
        if end >= 0 and end + 2 < len(text):
            out[tid] = text[end + 2]
    return out
