"""How quickly ``blastrate rate``, ``curve``, ``sweep`` and ``what-if`` answer, on the
time-slice model (the default; what-if ranks with the paper's) and on the paper's, and how
soon ``blastrate send`` starts its transfer, against ``python -c "import numpy"`` measured in
the same run.

    .venv/bin/python benchmarks/cli_quick.py [--runs 7] [--json FILE]

Each case runs the installed ``blastrate`` command beside this interpreter (what users
type; ``python -m app.commands`` where there is none) from the repository root.  The
cases are interleaved in rounds, in a new random order each round, so that a change of
load or clock touches them all alike.  Each command's time is divided by the NumPy
import's in the same round; the median of those ratios, the median wall time and its
range are printed, with the 1-minute load average before and after, and written to
``--json``.  Bounded: ``--runs`` rounds (at most 25), each command killed after 60 s.
The goal of issue #37 is a ratio under 3 for each command.

``blastrate send`` sends 1 MB at 500 Mbit/s to a ``blastrate receive`` that this script
starts on loopback (a database of its own with calibration off, the secret from the
environment it gives both).  Its start-up is its wall time less the ``total_s`` it
reports (from the first connect attempt to the end), so it includes the interpreter's
exit; the goal is under 0.3 s.  ``benchmarks/receiver_start.py`` times the receiver's.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import random
import secrets
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

from service_latency import free_port

ROOT = Path(__file__).resolve().parent.parent
WORKLOAD = ["-C", "2", "-I", "1", "--file-size", "500MB", "--delay", "100ms"]
_INSTALLED = Path(sys.executable).with_name("blastrate")
CLI = [str(_INSTALLED)] if _INSTALLED.exists() else [sys.executable, "-m", "app.commands"]
CASES: dict[str, list[str]] = {
    'python -c "import numpy"': [sys.executable, "-c", "import numpy"],
    "blastrate --version": [*CLI, "--version"],
    "blastrate rate (time-slice, the default)": [*CLI, "rate", *WORKLOAD],
    "blastrate curve (time-slice, the default)": [*CLI, "curve", *WORKLOAD],
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
SEND = "blastrate send (1 MB, start-up)"
SEND_BYTES = 1_000_000


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


@contextlib.contextmanager
def _receiver(folder: Path, env: dict[str, str]) -> Iterator[int]:
    """A ``blastrate receive`` on loopback for the send case; its control port."""
    port = free_port()  # the receiver's TCP control port
    out = folder / "received"
    out.mkdir()
    proc = subprocess.Popen(
        [*CLI, "receive", "--host", "127.0.0.1", "--port", str(port), "--output", str(out)],
        cwd=ROOT,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        deadline = time.monotonic() + TIMEOUT_S
        assert proc.stderr is not None
        for line in proc.stderr:  # it prints "receiving into" once it listens
            if "receiving into" in line or time.monotonic() > deadline:
                break
        if proc.poll() is not None:
            raise SystemExit(f"the receiver exited: {proc.returncode}")
        yield port
    finally:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def _send_start(argv: list[str], env: dict[str, str]) -> float:
    """Wall time of one ``send`` less the ``total_s`` it reports (s)."""
    start = time.perf_counter()
    done = subprocess.run(
        argv, cwd=ROOT, env=env, capture_output=True, text=True, check=True, timeout=TIMEOUT_S
    )
    wall = time.perf_counter() - start
    return wall - float(json.loads(done.stdout)["total_s"])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=7, help="rounds (default 7, at most 25)")
    ap.add_argument("--json", type=Path, help="write the figures here as JSON")
    ap.add_argument("--seed", type=int, default=0, help="seed of the order within rounds")
    args = ap.parse_args()
    runs = max(1, min(args.runs, MAX_RUNS))
    load_start = os.getloadavg()
    print(f"load average at start: {' '.join(f'{x:.2f}' for x in load_start)}")
    with tempfile.TemporaryDirectory(prefix="cli-quick-") as tmp:
        folder = Path(tmp)
        env = {
            **os.environ,
            "BLASTRATE_SECRET": secrets.token_hex(16),
            "BLASTRATE_DATABASE_URL": f"sqlite:///{folder / 'profiles.db'}",
            "BLASTRATE_NO_CALIBRATE": "1",
        }
        source = folder / "file.bin"
        source.write_bytes(os.urandom(SEND_BYTES))
        with _receiver(folder, env) as port:
            sends = iter(range(1_000_000))

            def send_argv() -> list[str]:
                name = f"copy-{next(sends)}.bin"
                to = f"127.0.0.1:{port}"
                return [*CLI, "send", str(source), "--to", to, "--rate", "500M", "--json",
                        "--name", name]  # fmt: skip

            for argv in CASES.values():
                # Warm: page cache, .pyc files, Numba's on-disk cache (compiled on a first run).
                _wall(argv, WARM_TIMEOUT_S)
            _send_start(send_argv(), env)
            rng = random.Random(args.seed)
            times: dict[str, list[float]] = {name: [] for name in [*CASES, SEND]}
            for _ in range(runs):
                order = list(times)
                rng.shuffle(order)
                for name in order:
                    if name == SEND:
                        times[name].append(_send_start(send_argv(), env))
                    else:
                        times[name].append(_wall(CASES[name]))
    baseline = 'python -c "import numpy"'
    rows = []
    for name, walls in times.items():
        ratios = [w / b for w, b in zip(walls, times[baseline], strict=True)]
        rows.append(
            {
                "command": name,
                "median_s": statistics.median(walls),
                "min_s": min(walls),
                "max_s": max(walls),
                "ratio_to_numpy_median": statistics.median(ratios),
                "ratio_to_numpy_max": max(ratios),
            }
        )
        print(
            f"{name:28s} median {rows[-1]['median_s']:6.3f} s  (min {min(walls):.3f}, "
            f"max {max(walls):.3f})  x{rows[-1]['ratio_to_numpy_median']:.2f} of import "
            f"numpy (per round; max x{rows[-1]['ratio_to_numpy_max']:.2f})"
        )
    load_end = os.getloadavg()
    print(f"load average at end:   {' '.join(f'{x:.2f}' for x in load_end)}")
    if args.json:
        args.json.write_text(
            json.dumps(
                {
                    "command": "benchmarks/cli_quick.py " + " ".join(sys.argv[1:]),
                    "when_utc": time.strftime("%Y-%m-%d %H:%M", time.gmtime()),
                    "runs": runs,
                    "load_average_start": load_start,
                    "load_average_end": load_end,
                    "cli": CLI,
                    "results": rows,
                },
                indent=2,
            )
            + "\n"
        )


if __name__ == "__main__":
    main()
