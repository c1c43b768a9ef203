"""Which tasks are CPU-bound (the model's C) and which I/O-bound (I), over a window.

The model's C tasks always want the processor; its I tasks alternate between a
processor burst and a disk service.  Over a sampling window of W seconds the probe
compares two snapshots of every task's counters (:mod:`host.probe.tasks`) and looks
at the scheduler state of every task in ``samples`` instants in between.  The rules,
applied in this order:

1. **I/O-bound** when the task *repeatedly blocked on storage and woke up*:

   * it gave up the processor by blocking at least :data:`IO_MIN_WAKEUPS_PER_S` times
     per second (voluntary context switches), and at least as often by blocking as by
     being preempted (voluntary >= non-voluntary): it runs in short bursts;
   * and there is evidence that the blocking was on storage, any of: the task was in
     state ``D`` (uninterruptible, i.e. waiting for I/O) in at least
     :data:`IO_MIN_D_SAMPLES` samples and at least :data:`IO_MIN_D_FRACTION` of them;
     its block-I/O delay (``delayacct_blkio_ticks``, when delay accounting is on) grew
     by at least :data:`IO_MIN_BLKIO_FRACTION` of the window; or it moved at least
     :data:`IO_MIN_STORAGE_BYTES_PER_S` to or from storage (``/proc/<pid>/io``).

   A task that waits on sockets or timers sleeps in state ``S`` and moves no storage
   bytes, so it is not I/O-bound in the model's sense (its waits are not on the disk).

2. **CPU-bound** when the task was *runnable* (on a core, or waiting on a run queue
   for one) for at least :data:`CPU_RUNNABLE_FRACTION` of the window, from the growth
   of the two ``schedstat`` times.  Counting the run-queue wait matters: on a busy host a
   busy loop may get only a fifth of a core, yet it wants the processor all the time and
   is one of the C tasks competing with the network interrupt.  Without ``schedstat``
   the fraction of samples in state ``R`` is used instead.

3. Otherwise the task is **idle** (a sleeper): neither C nor I.

Why the I/O test comes first: a task that blocks on the disk thousands of times a
second spends, on a loaded host, most of its time *waiting for a core* after each
wake-up.  On the 2-core development host, a 4 KiB ``O_DIRECT`` random reader was
runnable 86 % of a 2 s window (on a core 16 %, queued 70 %) with 7,554 voluntary and 6
non-voluntary switches and 11 of 39 samples in ``D``; a busy loop beside it was
runnable 83 % with 1 voluntary and 305 non-voluntary switches.  The runnable fraction
alone would call both CPU-bound; the way each gives up the core tells them apart.

The thresholds are deliberately loose on the I/O side (a few wake-ups per second with
any storage evidence) and at one half on the CPU side (a task that wants the processor
more often than not); they are constants here so that the evidence behind every
verdict is reported beside it (:class:`TaskVerdict`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from .tasks import TaskSnapshot

__all__ = [
    "CPU_RUNNABLE_FRACTION",
    "IO_MIN_BLKIO_FRACTION",
    "IO_MIN_D_FRACTION",
    "IO_MIN_D_SAMPLES",
    "IO_MIN_STORAGE_BYTES_PER_S",
    "IO_MIN_WAKEUPS_PER_S",
    "TaskVerdict",
    "classify_tasks",
]

#: Runnable (on a core + queued) share of the window above which a task is CPU-bound.
CPU_RUNNABLE_FRACTION = 0.5
#: Voluntary context switches per second of window an I/O-bound task makes at least.
IO_MIN_WAKEUPS_PER_S = 5.0
#: Samples in state D, and their share of all samples, that count as storage evidence.
IO_MIN_D_SAMPLES = 2
IO_MIN_D_FRACTION = 0.05
#: Growth of the block-I/O delay, as a share of the window, that counts as evidence.
IO_MIN_BLKIO_FRACTION = 0.02
#: Bytes per second to or from storage that count as evidence (64 KiB/s).
IO_MIN_STORAGE_BYTES_PER_S = 65_536.0

Kind = Literal["cpu", "io", "idle"]


@dataclass(frozen=True)
class TaskVerdict:
    """The class of one task over a window and the evidence for it.

    Attributes
    ----------
    pid, tid : int
        Process and task ids.
    comm : str
        Command name.
    kind : {"cpu", "io", "idle"}
        CPU-bound, I/O-bound or neither.
    reason : str
        The rule that decided, with its numbers.
    runnable_fraction : float or None
        (on-core + queued time) / window, from ``schedstat``.
    on_cpu_fraction : float or None
        On-core time / window.
    r_samples, d_samples, samples : int
        Samples in state R, in state D, and in all.
    voluntary, nonvoluntary : int or None
        Context switches during the window.
    storage_bytes : int or None
        Bytes to and from storage during the window.
    blkio_s : float
        Growth of the block-I/O delay (s).
    """

    pid: int
    tid: int
    comm: str
    kind: Kind
    reason: str
    runnable_fraction: float | None
    on_cpu_fraction: float | None
    r_samples: int
    d_samples: int
    samples: int
    voluntary: int | None
    nonvoluntary: int | None
    storage_bytes: int | None
    blkio_s: float

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form (fractions rounded to 4 digits)."""
        return {
            "pid": self.pid,
            "tid": self.tid,
            "comm": self.comm,
            "kind": self.kind,
            "reason": self.reason,
            "runnable_fraction": _round(self.runnable_fraction),
            "on_cpu_fraction": _round(self.on_cpu_fraction),
            "r_samples": self.r_samples,
            "d_samples": self.d_samples,
            "samples": self.samples,
            "voluntary_switches": self.voluntary,
            "nonvoluntary_switches": self.nonvoluntary,
            "storage_bytes": self.storage_bytes,
            "blkio_s": round(self.blkio_s, 4),
        }


def _round(x: float | None) -> float | None:
    return None if x is None else round(x, 4)


def _delta(a: int | None, b: int | None) -> int | None:
    if a is None or b is None:
        return None
    return max(0, b - a)


def classify_tasks(
    start: Mapping[int, TaskSnapshot],
    end: Mapping[int, TaskSnapshot],
    states: Sequence[Mapping[int, str]],
    window_s: float,
    clock_ticks_per_s: float = 100.0,
) -> list[TaskVerdict]:
    """Classify every task present at both ends of a window.

    Parameters
    ----------
    start, end : dict of int to TaskSnapshot
        Snapshots at the start and the end of the window, by task id.
    states : sequence of dict of int to str
        The state letter of each task at each sample instant.
    window_s : float
        Length of the window (s), > 0.
    clock_ticks_per_s : float
        ``sysconf(SC_CLK_TCK)``: the unit of ``blkio_ticks``.

    Returns
    -------
    list of TaskVerdict
        By task id.  Tasks that started or ended during the window are left out (their
        counters do not cover the window).
    """
    if not window_s > 0:
        raise ValueError(f"window_s must be > 0, got {window_s}")
    verdicts: list[TaskVerdict] = []
    for tid in sorted(start.keys() & end.keys()):
        a, b = start[tid], end[tid]
        if a.pid != b.pid:
            continue  # the id was reused by another task
        seen = [s[tid] for s in states if tid in s]
        r_samples = sum(1 for s in seen if s == "R")
        d_samples = sum(1 for s in seen if s == "D")
        run = _delta(a.run_ns, b.run_ns)
        wait = _delta(a.wait_ns, b.wait_ns)
        runnable = None if run is None or wait is None else min(1.0, (run + wait) / 1e9 / window_s)
        on_cpu = None if run is None else min(1.0, run / 1e9 / window_s)
        vol = _delta(a.voluntary, b.voluntary)
        nonvol = _delta(a.nonvoluntary, b.nonvoluntary)
        storage = _delta(a.storage_bytes, b.storage_bytes)
        blkio_s = max(0, b.blkio_ticks - a.blkio_ticks) / clock_ticks_per_s

        evidence = []
        if d_samples >= IO_MIN_D_SAMPLES and seen and d_samples / len(seen) >= IO_MIN_D_FRACTION:
            evidence.append(f"state D in {d_samples}/{len(seen)} samples")
        if blkio_s / window_s >= IO_MIN_BLKIO_FRACTION:
            evidence.append(f"blocked on block I/O {blkio_s:.3g} s")
        if storage is not None and storage / window_s >= IO_MIN_STORAGE_BYTES_PER_S:
            evidence.append(f"{storage} bytes to/from storage")
        wakes = vol is not None and vol / window_s >= IO_MIN_WAKEUPS_PER_S
        bursts = vol is not None and vol >= (nonvol or 0)

        kind: Kind
        if evidence and wakes and bursts:
            kind = "io"
            reason = f"{vol} voluntary vs {nonvol} non-voluntary switches; " + "; ".join(evidence)
        elif runnable is not None and runnable >= CPU_RUNNABLE_FRACTION:
            kind = "cpu"
            reason = (
                f"runnable {runnable:.0%} of the window (on a core {on_cpu:.0%}, "
                f"queued {runnable - (on_cpu or 0.0):.0%})"
            )
        elif runnable is None and seen and r_samples / len(seen) >= CPU_RUNNABLE_FRACTION:
            kind = "cpu"
            reason = f"state R in {r_samples}/{len(seen)} samples (no schedstat)"
        else:
            kind = "idle"
            reason = (
                f"runnable {runnable:.0%} of the window"
                if runnable is not None
                else f"state R in {r_samples}/{len(seen)} samples"
            )
            if evidence and not (wakes and bursts):
                reason += f"; storage evidence ({'; '.join(evidence)}) without repeated wake-ups"
        verdicts.append(
            TaskVerdict(
                pid=b.pid,
                tid=tid,
                comm=b.comm,
                kind=kind,
                reason=reason,
                runnable_fraction=runnable,
                on_cpu_fraction=on_cpu,
                r_samples=r_samples,
                d_samples=d_samples,
                samples=len(seen),
                voluntary=vol,
                nonvoluntary=nonvol,
                storage_bytes=storage,
                blkio_s=blkio_s,
            )
        )
    return verdicts
