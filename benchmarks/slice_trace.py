"""How the scheduler shares a receiver's CPU with C busy tasks: its slices and vacations.

Run as root from the repository root (it mounts tracefs if needed)::

    .venv/bin/python benchmarks/slice_trace.py [--cpu-tasks 1,2,3] [--seconds 2] [--json out.json]

The time-slice model (:mod:`transport.timeslice`) lets the receiver run for a slice and then
wait while c competitors run theirs, both Erlang with 3 stages (a coefficient of variation
of 0.58).  This script measures what the kernel does.  For each C it pins C busy loops and a
UDP receiver (a blocking ``recv`` loop on a 2 MB socket buffer) to one CPU, and blasts
datagrams at the receiver over loopback from another CPU, as fast as the sender goes, so
that the receiver always has datagrams waiting.  Meanwhile ftrace records
``sched:sched_switch`` on the receiver's CPU.  From the trace, for the receiver's task:

* **slice**: a stretch on the CPU that ended with the task still runnable (preempted);
* **vacation**: the time from such a preemption until it runs again;
* **sleeps**: stretches that ended with the task asleep (its socket empty), counted apart.

It prints, per C: the number of each, their mean, coefficient of variation and 10/50/90th
percentiles (ms), and the receiver's share of the CPU.  Traffic goes only to 127.0.0.1, and
every loop ends by a deadline.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import os
import re
import socket
import statistics
import subprocess
import time
from pathlib import Path
from typing import Any

TRACING = Path("/sys/kernel/tracing")
PAYLOAD = 1468
RCVBUF = 2_000_000
# sched_switch: "prev_comm=... prev_pid=N prev_prio=P prev_state=S ==> next_comm=... next_pid=M";
# sched_wakeup: "comm=... pid=N prio=P target_cpu=C"
_EVENT = re.compile(
    r"\s(\d+\.\d+): (?:sched_switch: .*?prev_pid=(\d+) .*?prev_state=(\S+) ==> .*?next_pid=(\d+)"
    r"|sched_wakeup: .*?pid=(\d+) )"
)


def _busy(cpu: int, deadline: float) -> None:
    os.sched_setaffinity(0, {cpu})
    x = 0
    while time.monotonic() < deadline:
        for _ in range(10_000):
            x += 1


def _receiver(cpu: int, port: Any, ready: Any, deadline: float, counted: Any) -> None:
    os.sched_setaffinity(0, {cpu})
    sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, RCVBUF)
    sock.bind(("127.0.0.1", 0))
    sock.settimeout(0.2)
    port.value = sock.getsockname()[1]
    ready.set()
    buf = bytearray(2048)
    n = 0
    while time.monotonic() < deadline:
        try:
            sock.recv_into(buf)
            n += 1
        except TimeoutError:
            continue
    counted.value = n


def _write(name: str, value: str) -> None:
    (TRACING / name).write_text(value)


def _trace_on(cpu: int) -> None:
    if not (TRACING / "trace").exists():
        subprocess.run(["mount", "-t", "tracefs", "nodev", str(TRACING)], check=True)
    _write("tracing_on", "0")
    _write("trace", "")
    _write("buffer_size_kb", "32768")
    # Every CPU: the wake-up is recorded on the waker's CPU; the analysis keeps one pid.
    _write("tracing_cpumask", format((1 << (os.cpu_count() or 1)) - 1, "x"))
    _write("events/sched/sched_switch/enable", "1")
    _write("events/sched/sched_wakeup/enable", "1")
    _write("tracing_on", "1")


def _trace_off() -> str:
    _write("tracing_on", "0")
    _write("events/sched/sched_switch/enable", "0")
    _write("events/sched/sched_wakeup/enable", "0")
    text = (TRACING / "trace").read_text()
    _write("trace", "")
    _write("tracing_cpumask", format((1 << (os.cpu_count() or 1)) - 1, "x"))
    return text


def _summary(xs: list[float]) -> dict[str, float]:
    if not xs:
        return {"n": 0}
    ordered = sorted(xs)
    mean = statistics.fmean(xs)
    return {
        "n": len(xs),
        "mean_ms": 1e3 * mean,
        "cv": statistics.pstdev(xs) / mean if mean > 0 else 0.0,
        "p10_ms": 1e3 * ordered[len(ordered) // 10],
        "p50_ms": 1e3 * ordered[len(ordered) // 2],
        "p90_ms": 1e3 * ordered[(9 * len(ordered)) // 10],
        "p99_ms": 1e3 * ordered[(99 * len(ordered)) // 100],
        "p999_ms": 1e3 * ordered[(999 * len(ordered)) // 1000],
        "max_ms": 1e3 * ordered[-1],
        # The tail that overflows a small buffer: the share of waits above 0.5, 1, 2, 4 ms.
        "above_ms": {str(t): sum(x > t / 1e3 for x in xs) / len(xs) for t in (0.5, 1, 2, 4)},
    }


def analyse(text: str, pid: int) -> dict[str, Any]:
    """Slices, vacations and sleeps of task ``pid`` from a sched_switch trace."""
    slices: list[float] = []
    vacations: list[float] = []
    sleeps: list[float] = []
    wakeups: list[float] = []
    woken_at: float | None = None
    on_since: float | None = None
    off_since: float | None = None
    preempted = False
    first = last = None
    for m in _EVENT.finditer(text):
        if m[5] is not None:  # a wake-up: the receiver's socket got a datagram
            if int(m[5]) == pid and on_since is None:
                woken_at = float(m[1])
            continue
        t, prev, state, nxt = float(m[1]), int(m[2]), m[3], int(m[4])
        first = t if first is None else first
        last = t
        if prev == pid and on_since is not None:
            ran = t - on_since
            preempted = state.startswith("R")
            (slices if preempted else sleeps).append(ran)
            on_since, off_since = None, t
        if nxt == pid:
            if off_since is not None and preempted:
                vacations.append(t - off_since)
            if woken_at is not None:
                wakeups.append(t - woken_at)
            on_since, off_since, woken_at = t, None, None
    span = (last - first) if first is not None and last is not None else 0.0
    on = sum(slices) + sum(sleeps)
    return {
        "slices": _summary(slices),
        "vacations": _summary(vacations),
        "sleeps": _summary(sleeps),
        "wakeup_latency": _summary(wakeups),
        "share": on / span if span > 0 else None,
        "span_s": span,
    }


def measure(
    cpu_tasks: int, seconds: float, rx_cpu: int, tx_cpu: int, rate_pps: float | None = None
) -> dict[str, Any]:
    deadline = time.monotonic() + seconds + 3.0
    ctx = mp.get_context("fork")
    port, counted, ready = ctx.Value("i", 0), ctx.Value("l", 0), ctx.Event()
    rx = ctx.Process(target=_receiver, args=(rx_cpu, port, ready, deadline, counted))
    rx.start()
    busy = [ctx.Process(target=_busy, args=(rx_cpu, deadline)) for _ in range(cpu_tasks)]
    for b in busy:
        b.start()
    if not ready.wait(10):
        raise RuntimeError("the receiver did not start")
    os.sched_setaffinity(0, {tx_cpu})
    sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    data = bytes(PAYLOAD)
    target = ("127.0.0.1", port.value)
    time.sleep(0.5)  # the busy loops settle on the CPU
    _trace_on(rx_cpu)
    sent, start = 0, time.monotonic()
    stop = start + seconds
    while (now := time.monotonic()) < stop:
        # Paced: catch up to rate_pps in bursts of at most 8; else as fast as it goes.
        due = 64 if rate_pps is None else min(8, int((now - start) * rate_pps) - sent)
        for _ in range(due):
            sock.sendto(data, target)
        sent += max(due, 0)
    text = _trace_off()
    rx.join(deadline - time.monotonic() + 5)
    for b in busy:
        b.join(deadline - time.monotonic() + 5)
    assert rx.pid is not None
    result = analyse(text, rx.pid)
    result.update(cpu_tasks=cpu_tasks, sent=sent, received=counted.value, rate_pps=rate_pps)
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cpu-tasks", default="1,2,3")
    parser.add_argument("--seconds", type=float, default=2.0)
    parser.add_argument("--rx-cpu", type=int, default=0)
    parser.add_argument("--tx-cpu", type=int, default=1)
    parser.add_argument(
        "--rate",
        type=float,
        help="datagrams per second, paced (default: as fast as the sender goes, so that "
        "the receiver is always backlogged)",
    )
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    print(f"# kernel {os.uname().release}; load before {os.getloadavg()[0]:.2f}")
    rows = []
    for c in (int(x) for x in args.cpu_tasks.split(",")):
        r = measure(c, args.seconds, args.rx_cpu, args.tx_cpu, args.rate)
        rows.append(r)
        share = r["share"]
        print(
            f"C={c}: receiver share {share:.3f} (1/(C+1) = {1 / (c + 1):.3f}); "
            f"datagrams {r['received']:,} of {r['sent']:,}"
        )
        for kind in ("slices", "vacations", "sleeps", "wakeup_latency"):
            s = r[kind]
            if s["n"]:
                print(
                    f"  {kind:<9} n={s['n']:>6}  mean {s['mean_ms']:.3f} ms  cv {s['cv']:.2f}  "
                    f"p10/50/90/99/99.9 {s['p10_ms']:.3f}/{s['p50_ms']:.3f}/{s['p90_ms']:.3f}"
                    f"/{s['p99_ms']:.3f}/{s['p999_ms']:.3f} max {s['max_ms']:.3f} ms; "
                    f"above 0.5/1/2/4 ms: " + "/".join(f"{v:.4f}" for v in s["above_ms"].values())
                )
            else:
                print(f"  {kind:<9} none")
    print(f"# load after {os.getloadavg()[0]:.2f}")
    if args.json:
        args.json.write_text(json.dumps(rows, indent=2) + "\n")


if __name__ == "__main__":
    main()
