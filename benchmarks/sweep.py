"""Sweep throughput: 10,000 points on a local process pool (1 and 2 workers) and Dask.

Run from the repository root::

    OPENBLAS_NUM_THREADS=1 .venv/bin/python benchmarks/sweep.py            # 10,000 points
    OPENBLAS_NUM_THREADS=1 .venv/bin/python benchmarks/sweep.py --quick    #  2,000 points

The sweep is ``cpu_tasks 0..24 x io_tasks 0..19 x cores 1,2,4,8,16 x buffer_packets
32,64,96,128`` (10,000 points; ``--quick``: io_tasks 0..3) of the paper's transfer
(500 MB, 100 ms, sx280-2007).  In the same run it times:

* one call per point in this process (``evaluate_point`` in a loop) on the first 500
  points: the per-core baseline, with no pool at all;
* the whole sweep on a local process pool of 1 worker, then of 2 workers (pool start-up
  included: that is what a user waits for), and the start-up alone (a sweep of one
  point per worker), to show the rate without it;
* the whole sweep on a Dask ``LocalCluster`` of 2 single-threaded worker processes.

It prints points/s, points/s per worker, the speedup from 1 to 2 workers and the load
average (``os.getloadavg``) before and after each step: the machine is shared, and a
load above the core count means other processes took part of the cores.  It checks that
every run gave the same records as the baseline's points.  Figures only: nothing is
asserted.
"""

from __future__ import annotations

import argparse
import os
import platform
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from planning import evaluate_point, run_sweep, sweep_points

BASE = {"file_size": 500_000_000, "propagation_delay": 0.1}


def load() -> str:
    one, five, fifteen = os.getloadavg()
    return f"load {one:.2f} {five:.2f} {fifteen:.2f}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="2,000 points instead of 10,000")
    parser.add_argument("--no-dask", action="store_true", help="skip the Dask run")
    args = parser.parse_args()
    axes = {
        "cpu_tasks": list(range(25)),
        "io_tasks": list(range(4 if args.quick else 20)),
        "cores": [1, 2, 4, 8, 16],
        "buffer_packets": [32, 64, 96, 128],
    }
    points = sweep_points(BASE, axes)
    n = len(points)
    print(
        f"python {platform.python_version()}, {os.cpu_count()} CPUs, "
        f"affinity {len(os.sched_getaffinity(0))}, "
        f"OPENBLAS_NUM_THREADS={os.environ.get('OPENBLAS_NUM_THREADS')}"
    )
    print(f"sweep: {n} points ({' x '.join(f'{len(v)} {k}' for k, v in axes.items())})")

    # Warm the compiled kernels and nets once, as a long-running worker would be.
    evaluate_point(points[0])
    sample = points[:500]
    print(f"[{load()}] baseline: one call per point, this process, {len(sample)} points")
    t = time.perf_counter()
    reference = [evaluate_point(p) for p in sample]
    base_s = time.perf_counter() - t
    base_rate = len(sample) / base_s
    print(f"  {base_s:.2f} s, {base_rate:.0f} points/s on one core")

    results = {}
    for workers in (1, 2):
        # What starting a pool costs by itself: `workers` points, one batch each (spawned
        # interpreters import NumPy/SciPy/Numba and load the compiled kernels).
        t = time.perf_counter()
        run_sweep(BASE, {"cpu_tasks": list(range(workers))}, workers=workers, batch_size=1)
        startup = time.perf_counter() - t
        print(
            f"[{load()}] pool start-up with {workers} worker(s) (a {workers}-point sweep): "
            f"{startup:.2f} s"
        )
        print(f"[{load()}] process pool, {workers} worker(s), {n} points")
        t = time.perf_counter()
        res = run_sweep(BASE, axes, workers=workers)
        elapsed = time.perf_counter() - t
        results[workers] = elapsed
        same = res.records[: len(sample)] == reference
        print(
            f"  {elapsed:.2f} s, {n / elapsed:.0f} points/s, "
            f"{n / elapsed / workers:.0f} points/s per worker, {res.batches} batches, "
            f"identical to baseline: {same}"
        )
        print(f"  without the start-up: {n / max(elapsed - startup, 1e-9):.0f} points/s")
    print(f"[{load()}] speedup 1 -> 2 workers: {results[1] / results[2]:.2f}x")

    if not args.no_dask:
        from distributed import Client, LocalCluster

        with (
            LocalCluster(
                n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None
            ) as cluster,
            Client(cluster) as client,
        ):
            client.run(evaluate_point, points[0])  # warm each worker, as the pool's do
            print(f"[{load()}] Dask LocalCluster, 2 worker processes, {n} points")
            t = time.perf_counter()
            res = run_sweep(BASE, axes, cluster=client)
            elapsed = time.perf_counter() - t
            same = res.records[: len(sample)] == reference
            print(
                f"  {elapsed:.2f} s, {n / elapsed:.0f} points/s, "
                f"{n / elapsed / 2:.0f} points/s per worker, identical to baseline: {same}"
            )
    print(f"[{load()}] done")


if __name__ == "__main__":
    main()
