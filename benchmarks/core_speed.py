"""How steady is this machine's CPU?  A pinned loop's speed, window by window.

Every figure of the receiver model is a CPU cost measured once (the kernel's cost per
datagram, the wake-up cost, mu_net) and then assumed to hold for the transfers it
predicts.  On a virtual machine the vCPU's speed can change under the guest: another
tenant on the host's sibling thread, its memory traffic, the host's clock.  Steal time
(``/proc/stat``) shows only the time the vCPU did not run, not a vCPU that runs slower.

This script runs a fixed pure-Python loop pinned to each core in turn, with nothing else
of ours running, and counts its iterations in windows of ``--window`` seconds:

* **per CPU second**: iterations over the thread's own CPU time (``time.thread_time``;
  with ``CONFIG_PARAVIRT_TIME_ACCOUNTING`` stolen time is not in it), so a change here is
  the core running slower, not the loop being sent away;
* **per wall second**: iterations over the window, which also loses whatever the kernel
  or the hypervisor took.

It prints, per core, the median and the 10th/90th percentiles and the extremes, each
relative to the median, and the steal ticks over the run.  A steady machine stays within
a few per cent; a spread of +-10 % or more bounds how well any model fitted to one
calibration can predict a loss onset (which moves with the receiver's speed) at another
moment.  Bounded: ``--windows`` x ``--window`` seconds per core::

    .venv/bin/python benchmarks/core_speed.py [--window 0.5] [--windows 60] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import time
from pathlib import Path
from typing import Any

CHUNK = 10_000


def _steal_ticks() -> int:
    return int(Path("/proc/stat").read_text().split("\n", 1)[0].split()[8])


def windows(cpu: int, window_s: float, count: int) -> dict[str, list[float]]:
    """Iterations per CPU second and per wall second of a loop pinned to ``cpu``, in
    ``count`` windows of ``window_s`` seconds each."""
    old = os.sched_getaffinity(0)
    os.sched_setaffinity(0, {cpu})
    per_cpu, per_wall = [], []
    try:
        for _ in range(count):
            c0, t0, done = time.thread_time(), time.monotonic(), 0
            while (now := time.monotonic()) - t0 < window_s:
                for _ in range(CHUNK):
                    pass
                done += CHUNK
            per_cpu.append(done / (time.thread_time() - c0))
            per_wall.append(done / (now - t0))
    finally:
        os.sched_setaffinity(0, old)
    return {"per_cpu_s": per_cpu, "per_wall_s": per_wall}


def summary(values: list[float]) -> dict[str, float]:
    """Median (iterations/s) and the 10th/90th percentiles and extremes over the median."""
    cuts = statistics.quantiles(values, n=10)
    med = statistics.median(values)
    return {
        "median": med,
        "p10": cuts[0] / med,
        "p90": cuts[-1] / med,
        "min": min(values) / med,
        "max": max(values) / med,
    }


def main() -> None:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--window", type=float, default=0.5, help="seconds per window")
    ap.add_argument("--windows", type=int, default=60, help="windows per core (3..1000)")
    ap.add_argument("--json", default=None)
    args = ap.parse_args()
    if not 3 <= args.windows <= 1000 or not 0.01 <= args.window <= 10:
        ap.error("--windows 3..1000 and --window 0.01..10 s")
    load, steal0 = os.getloadavg(), _steal_ticks()
    print(f"# load before {load}")
    cores: dict[str, Any] = {}
    for cpu in sorted(os.sched_getaffinity(0)):
        got = windows(cpu, args.window, args.windows)
        cores[str(cpu)] = {"windows": got, "summary": {k: summary(v) for k, v in got.items()}}
        for kind in ("per_cpu_s", "per_wall_s"):
            s = cores[str(cpu)]["summary"][kind]
            print(
                f"cpu {cpu} {kind:>10}: median {s['median'] / 1e6:.1f} M iterations; "
                f"p10 {s['p10']:.2f}, p90 {s['p90']:.2f}, min {s['min']:.2f}, "
                f"max {s['max']:.2f} of the median ({args.windows} x {args.window:g} s)"
            )
    steal = _steal_ticks() - steal0
    for name, entry in cores.items():
        x = entry["windows"]["per_cpu_s"]
        # Does a slow window predict the next?  (A probe just before a transfer would
        # then tell what the transfer will get.)
        entry["lag1_autocorrelation"] = statistics.correlation(x[:-1], x[1:])
        print(f"cpu {name}: window-to-window correlation {entry['lag1_autocorrelation']:+.2f}")
    print(f"# steal {steal} ticks over the run; load at end {os.getloadavg()}")
    if args.json:
        Path(args.json).write_text(
            json.dumps(
                {"config": vars(args), "load_before": load, "steal_ticks": steal, "cores": cores},
                indent=1,
            )
        )


if __name__ == "__main__":
    main()
