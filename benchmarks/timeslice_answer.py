"""What one answer of the time-slice model costs, against the paper's model in the same run.

    OPENBLAS_NUM_THREADS=1 .venv/bin/python benchmarks/timeslice_answer.py \
        [--blocks 5] [--compare-tree CHECKOUT] [--json docs/results/timeslice_answer.json]

What a user waits for is ``blastrate rate --model timeslice`` end to end; most of the
difference between the two models is the solve itself, so both are timed:

* ``solve``: :func:`planning.evaluate_point` in a warm worker process (imports, Numba
  caches and compiled nets loaded before timing), per workload;
* ``cli``: the installed ``blastrate rate ... --model M --json`` as a shell runs it;
* ``sweep``: ten file sizes (100 MB to 1 GB) of one workload in the warm worker, as a
  sweep over ``file_size`` evaluates them.

Each job starts with none of the terms the process keeps (``transport.timeslice``), so
``solve`` is a first answer and ``sweep`` reuses only what its own ten points share.

Workloads: the built-in profile (K = 64, N = 6) and the lab's buffer (K = 1,736), C = 0,
2 and 5 CPU-bound tasks, I = 1, 500 MB over 100 ms.  Each block runs every (tree, model,
workload) once in a shuffled order; ratios are geometric means over workloads and blocks
with 95 % intervals that resample blocks.  ``--compare-tree`` runs another checkout (a
``git worktree`` of an earlier commit) in the same blocks.

Bounded: blocks (default 5) x trees x 2 models x 6 workloads solves, and as many CLI runs.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
MODELS = ("paper", "timeslice")
WORKLOADS = [(k, c) for k in (64, 1736) for c in (0, 2, 5)]

# A worker: reads one JSON point per line, answers the seconds its solve took.
_WORKER = """
import json, sys, time
from planning.points import evaluate_point
for k in (64, 1736):
    for model in ("paper", "timeslice"):
        evaluate_point({"cpu_tasks": 2, "io_tasks": 1, "file_size": 500_000_000,
                        "propagation_delay": 0.1, "buffer_packets": k, "model": model})
print("ready", flush=True)
import transport.timeslice as timeslice
kept = getattr(timeslice, "_SOLVED", None)  # the terms a process keeps (not in old trees)
for line in sys.stdin:
    point = json.loads(line)
    sizes = point.pop("sizes", None)
    if kept is not None:
        kept._solved.clear()  # every job starts cold: nothing kept from an earlier one
    start = time.perf_counter()
    if sizes is None:
        record = evaluate_point(point)
    else:  # one workload, several file sizes: a sweep over file_size
        for size in sizes:
            record = evaluate_point({**point, "file_size": size})
    seconds = time.perf_counter() - start
    print(json.dumps({"s": seconds, "rate": record["effective_bottleneck_rate_bps"],
                      "error": record["error"]}), flush=True)
"""
#: The file sizes of the sweep case (bytes): 100 MB to 1 GB.
SWEEP_SIZES = [100_000_000 * k for k in range(1, 11)]


def _point(k: int, c: int, model: str) -> dict[str, Any]:
    return {
        "cpu_tasks": c,
        "io_tasks": 1,
        "file_size": 500_000_000,
        "propagation_delay": 0.1,
        "buffer_packets": k,
        "model": model,
    }


def _cli(tree: Path, k: int, c: int, model: str) -> tuple[float, float]:
    """Wall time (s) and answer (bit/s) of ``blastrate rate`` from ``tree``."""
    argv = [sys.executable, "-m", "app.commands", "rate", "-C", str(c), "-I", "1"]
    argv += ["--file-size", "500MB", "--delay", "100ms", "--buffer-packets", str(k)]
    argv += ["--model", model, "--json"]
    env = {**os.environ, "PYTHONPATH": str(tree)}
    start = time.perf_counter()
    done = subprocess.run(argv, env=env, cwd=tree, capture_output=True, text=True, timeout=300)
    seconds = time.perf_counter() - start
    if done.returncode != 0:
        raise SystemExit(f"{tree.name}: blastrate rate failed: {done.stderr.strip()[:300]}")
    return seconds, float(json.loads(done.stdout)["effective_bottleneck_rate_bps"])


def _ratio(
    times: dict[tuple[Any, ...], list[float]], num: tuple[Any, ...], den: tuple[Any, ...]
) -> dict[str, Any]:
    """Geometric mean over workloads and blocks of num / den, 95 % block bootstrap."""
    logs = np.array(
        [
            [np.log(times[(*num, w)][b] / times[(*den, w)][b]) for w in WORKLOADS]
            for b in range(len(times[(*num, WORKLOADS[0])]))
        ]
    )
    rng = np.random.default_rng(0)
    picks = rng.integers(0, logs.shape[0], size=(4000, logs.shape[0]))
    boot = np.exp(logs[picks].mean(axis=(1, 2)))
    low, high = np.percentile(boot, [2.5, 97.5])
    return {"geometric_mean": float(np.exp(logs.mean())), "blocks_95": [low, high]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--blocks", type=int, default=5, choices=range(1, 51), metavar="1..50")
    parser.add_argument("--compare-tree", type=Path, default=None)
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args()
    trees = {"this": ROOT}
    if args.compare_tree is not None:
        trees["before"] = args.compare_tree.resolve()
    workers = {}
    for name, tree in trees.items():
        env = {**os.environ, "PYTHONPATH": str(tree), "OPENBLAS_NUM_THREADS": "1"}
        workers[name] = subprocess.Popen(
            [sys.executable, "-c", _WORKER],
            cwd=tree,
            env=env,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        assert workers[name].stdout is not None
        if workers[name].stdout.readline().strip() != "ready":
            raise SystemExit(f"{name}: the worker did not start")
    solve: dict[tuple[Any, ...], list[float]] = {}
    sweep: dict[tuple[Any, ...], list[float]] = {}
    cli: dict[tuple[Any, ...], list[float]] = {}
    answers: dict[tuple[Any, ...], float] = {}
    load_before = os.getloadavg()[0]
    rng = random.Random(1)
    try:
        for block in range(args.blocks):
            jobs = [(t, m, w) for t in trees for m in MODELS for w in WORKLOADS]
            rng.shuffle(jobs)
            for tree, model, (k, c) in jobs:
                worker = workers[tree]
                assert worker.stdin is not None and worker.stdout is not None
                worker.stdin.write(json.dumps(_point(k, c, model)) + "\n")
                worker.stdin.flush()
                answer = json.loads(worker.stdout.readline())
                if answer["error"]:
                    raise SystemExit(f"{tree} {model} K={k} C={c}: {answer['error']}")
                solve.setdefault((tree, model, (k, c)), []).append(answer["s"])
                answers[(tree, model, (k, c))] = answer["rate"]
                worker.stdin.write(json.dumps({**_point(k, c, model), "sizes": SWEEP_SIZES}) + "\n")
                worker.stdin.flush()
                answer = json.loads(worker.stdout.readline())
                sweep.setdefault((tree, model, (k, c)), []).append(answer["s"])
            rng.shuffle(jobs)
            for tree, model, (k, c) in jobs:
                seconds, _ = _cli(trees[tree], k, c, model)
                cli.setdefault((tree, model, (k, c)), []).append(seconds)
            print(f"block {block + 1}/{args.blocks} done", file=sys.stderr)
    finally:
        for worker in workers.values():
            worker.kill()
    load_after = os.getloadavg()[0]
    out: dict[str, Any] = {
        "command": "benchmarks/timeslice_answer.py " + " ".join(sys.argv[1:]),
        "blocks": args.blocks,
        "load_average_1min": [load_before, load_after],
        "median_s": {},
        "ratios": {},
    }
    print(f"load average {load_before:.2f} before, {load_after:.2f} after")
    print(
        f"{'tree':7} {'model':10} {'K':>5} {'C':>2} {'solve ms':>9} {'cli ms':>8} "
        f"{'sweep ms':>9} {'rate Mbit/s':>12}"
    )
    for tree in trees:
        for model in MODELS:
            for k, c in WORKLOADS:
                key = (tree, model, (k, c))
                s, cl = float(np.median(solve[key])), float(np.median(cli[key]))
                sw = float(np.median(sweep[key]))
                out["median_s"][f"{tree} {model} K={k} C={c}"] = {
                    "solve": s,
                    "cli": cl,
                    "sweep_10_sizes": sw,
                }
                print(
                    f"{tree:7} {model:10} {k:5d} {c:2d} {s * 1e3:9.1f} {cl * 1e3:8.0f} "
                    f"{sw * 1e3:9.1f} {answers[key] / 1e6:12.1f}"
                )
    pairs = [("timeslice over paper", ("this", "timeslice"), ("this", "paper"))]
    if "before" in trees:
        pairs.append(
            ("timeslice, this over before", ("this", "timeslice"), ("before", "timeslice"))
        )
        same = all(
            answers[("this", m, w)] == answers[("before", m, w)] for m in MODELS for w in WORKLOADS
        )
        out["same_answers_as_before"] = same
        print(f"same answers as before: {same}")
    for label, num, den in pairs:
        for kind, times in (("solve", solve), ("cli", cli), ("sweep", sweep)):
            r = _ratio(times, num, den)
            out["ratios"][f"{label} ({kind})"] = r
            low, high = r["blocks_95"]
            print(f"{label:32} {kind:5} {r['geometric_mean']:7.3f} [{low:.3f}, {high:.3f}]")
    if args.json is not None:
        args.json.write_text(json.dumps(out, indent=1) + "\n")


if __name__ == "__main__":
    main()
