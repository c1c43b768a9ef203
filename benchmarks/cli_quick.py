"""How quickly ``blastrate rate``, ``curve``, ``sweep`` and ``what-if`` answer on the
paper's model, against ``python -c "import numpy"`` measured in the same run.

    .venv/bin/python benchmarks/cli_quick.py [--runs 7]

Each case runs as ``sys.executable -m app.commands ...`` from the repository root (so the
checkout's own packages are imported, not an installed copy).  The cases are interleaved
(one run of each, then the next round), so a change of load touches them all alike; the
median wall time of each and its ratio to the NumPy import are printed, with the 1-minute
load average before and after.  Bounded: ``--runs`` rounds (at most 25), each command
killed after 60 s.  The goal of issue #37 is a ratio under 3 for each command.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
WORKLOAD = ["-C", "2", "-I", "1", "--file-size", "500MB", "--delay", "100ms"]
CLI = [sys.executable, "-m", "app.commands"]
CASES: dict[str, list[str]] = {
    'python -c "import numpy"': [sys.executable, "-c", "import numpy"],
    "blastrate --version": [*CLI, "--version"],
    "blastrate rate (paper)": [*CLI, "rate", *WORKLOAD, "--model", "paper"],
    "blastrate curve (paper)": [*CLI, "curve", *WORKLOAD, "--model", "paper"],
    "blastrate sweep (3 points)": [
        *CLI,
        "sweep",
        "-C",
        "2",
        "-I",
        "0..2",
        "--file-size",
        "500MB",
        "--delay",
        "100ms",
        "--csv",
    ],
    "blastrate what-if (paper)": [*CLI, "what-if", *WORKLOAD],
}
TIMEOUT_S = 60.0
WARM_TIMEOUT_S = 600.0
MAX_RUNS = 25


def _wall(argv: list[str], timeout: float = TIMEOUT_S) -> float:
    start = time.perf_counter()
    subprocess.run(
        argv,
        cwd=ROOT,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        check=True,
        timeout=timeout,
    )
    return time.perf_counter() - start


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=7, help="rounds (default 7, at most 25)")
    args = ap.parse_args()
    runs = max(1, min(args.runs, MAX_RUNS))
    print(f"load average at start: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    for argv in CASES.values():
        # Warm: page cache, .pyc files, Numba's on-disk cache (compiled on a first run).
        _wall(argv, WARM_TIMEOUT_S)
    times: dict[str, list[float]] = {name: [] for name in CASES}
    for _ in range(runs):
        for name, argv in CASES.items():
            times[name].append(_wall(argv))
    base = statistics.median(times['python -c "import numpy"'])
    for name, walls in times.items():
        median = statistics.median(walls)
        print(
            f"{name:28s} median {median:6.3f} s  (min {min(walls):.3f}, max {max(walls):.3f})"
            f"  x{median / base:.2f} of import numpy"
        )
    print(f"load average at end:   {' '.join(f'{x:.2f}' for x in os.getloadavg())}")


if __name__ == "__main__":
    main()
