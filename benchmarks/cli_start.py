"""How long ``blastrate --version``, ``--help`` and a first ``rate`` take to start,
against a bare Python start-up in the same run (the baseline the ratio is taken to).

    .venv/bin/python benchmarks/cli_start.py [--runs 10]

Prints, for each command, the median and spread of wall and CPU time (s) over the runs,
and the ratio of its median wall time to the bare interpreter's; the 1-minute load
average is printed beside them (measure on a quiet machine).
"""

from __future__ import annotations

import argparse
import os
import resource
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

BLASTRATE = shutil.which("blastrate", path=str(Path(sys.executable).parent)) or "blastrate"
CASES = {
    "python -c pass (baseline)": [sys.executable, "-c", "pass"],
    "blastrate --version": [BLASTRATE, "--version"],
    "blastrate --help": [BLASTRATE, "--help"],
    "blastrate rate ... (a first answer)": [
        BLASTRATE,
        "rate",
        "-C",
        "2",
        "-I",
        "1",
        "--file-size",
        "500MB",
        "--delay",
        "100ms",
    ],
}


def _run(argv: list[str]) -> tuple[float, float]:
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    subprocess.run(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, cpu


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=10)
    args = ap.parse_args()
    print(f"load average (1 min) at start: {os.getloadavg()[0]:.2f}")
    base = None
    for name, argv in CASES.items():
        _run(argv)  # warm the page cache
        walls, cpus = zip(*(_run(argv) for _ in range(args.runs)), strict=True)
        median = statistics.median(walls)
        base = base or median
        print(
            f"{name:38s} wall {median:.3f} s (min {min(walls):.3f}, max {max(walls):.3f})  "
            f"cpu {statistics.median(cpus):.3f} s  x{median / base:.1f} of bare Python"
        )
    print(f"load average (1 min) at end: {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
