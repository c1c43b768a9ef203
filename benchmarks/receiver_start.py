"""How soon ``blastrate receive`` listens, and how soon its rate advice is ready.

    .venv/bin/python benchmarks/receiver_start.py [--runs 5] [--json out.json]

The installed command, started as a user starts it (``--profile`` not given, a profile
database of this run's own that already holds a host default, so no quick calibration
runs), pinned to CPU 0: alone, and beside 2 busy loops on the same CPU.  For each start:
the time from ``Popen`` to its "receiving into" line (it accepts senders from then on)
and to its "rate advice ready" line (the model is solved ahead for the workload it
sees).  ``python -c "import numpy"`` is timed in the same run, pinned the same way, as
the baseline.  Starts alternate between the set-ups; the 1-minute load is printed
before and after (measure on a quiet machine).  Every process is ended by the script;
every wait is bounded.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

BLASTRATE = str(Path(sys.executable).with_name("blastrate"))
BUSY = "import time\nend = time.monotonic() + {s}\nwhile time.monotonic() < end:\n    pass\n"


def _port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _busy(cpu: int, n: int, seconds: float) -> list[subprocess.Popen[bytes]]:
    return [
        subprocess.Popen(
            ["taskset", "-c", str(cpu), sys.executable, "-c", BUSY.format(s=seconds)],
            start_new_session=True,
        )
        for _ in range(n)
    ]


def one_start(cpu: int, env: dict[str, str], out: Path, limit_s: float = 60.0) -> dict[str, float]:
    """Seconds from start to listening and to advice ready, for one receiver."""
    port = _port()
    cmd = ["taskset", "-c", str(cpu), BLASTRATE, "receive", "--host", "127.0.0.1"]
    cmd += ["--port", str(port), "--output", str(out)]
    started = time.perf_counter()
    proc = subprocess.Popen(cmd, env=env, stderr=subprocess.PIPE, text=True)
    got: dict[str, float] = {}
    try:
        assert proc.stderr is not None
        deadline = started + limit_s
        for line in proc.stderr:
            now = time.perf_counter() - started
            if "receiving into" in line:
                got["listening_s"] = now
            if "rate advice ready" in line:
                got["ready_s"] = now
                break
            if time.perf_counter() > deadline:
                break
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(30)
    return got


def _numpy(cpu: int) -> float:
    started = time.perf_counter()
    subprocess.run(["taskset", "-c", str(cpu), sys.executable, "-c", "import numpy"], check=True)
    return time.perf_counter() - started


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--cpu", type=int, default=0)
    ap.add_argument("--json", default=None)
    args = ap.parse_args()
    work = Path(tempfile.mkdtemp(prefix="blastrate-rxstart-"))
    out = work / "out"
    out.mkdir()
    env = {
        **os.environ,
        "BLASTRATE_DATABASE_URL": f"sqlite:///{work / 'p.db'}",
        "BLASTRATE_SECRET": "receiver-start-benchmark-secret-0123",
    }
    # A host default already stored: the start measured is every start after the first.
    for argv in (["put", "lab", "--base", "sx280-2007"], ["default", "lab"]):
        subprocess.run([BLASTRATE, "profiles", *argv], env=env, check=True, capture_output=True)
    load_before = os.getloadavg()
    print(f"# load before {load_before}")
    results: dict[str, list[dict[str, float]]] = {"alone": [], "beside 2 busy loops": []}
    numpy: dict[str, list[float]] = {"alone": [], "beside 2 busy loops": []}
    one_start(args.cpu, env, out)  # warm the page cache
    for _ in range(args.runs):
        for setup in results:
            loops = _busy(args.cpu, 2, 120) if setup != "alone" else []
            try:
                time.sleep(0.3 if loops else 0)  # the loops are running before the start
                numpy[setup].append(_numpy(args.cpu))
                results[setup].append(one_start(args.cpu, env, out))
            finally:
                for p in loops:
                    os.killpg(p.pid, signal.SIGKILL)
                    p.wait(10)
    summary: dict[str, Any] = {}
    for setup, starts in results.items():
        row: dict[str, Any] = {"numpy_s": statistics.median(numpy[setup])}
        for key in ("listening_s", "ready_s"):
            xs = [s[key] for s in starts if key in s]
            row[key] = {
                "median": statistics.median(xs) if xs else None,
                "max": max(xs) if xs else None,
                "n": len(xs),
                "of": len(starts),
            }
        summary[setup] = row
        lst, rdy = row["listening_s"], row["ready_s"]
        print(
            f"{setup:20s} listening median {lst['median']:.3f} s (max {lst['max']:.3f}); "
            f"advice ready median {rdy['median']:.3f} s (max {rdy['max']:.3f}, "
            f"{rdy['n']}/{rdy['of']}); python -c 'import numpy' {row['numpy_s']:.3f} s "
            f"(listening / numpy {lst['median'] / row['numpy_s']:.2f})"
        )
    load_after = os.getloadavg()
    print(f"# load after {load_after}")
    if args.json:
        Path(args.json).write_text(
            json.dumps(
                {
                    "runs": args.runs,
                    "load_before": load_before,
                    "load_after": load_after,
                    "command": shlex.join(sys.argv),
                    "summary": summary,
                    "starts": results,
                },
                indent=1,
            )
        )
    shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
