"""Benchmark of the NIC queue solvers against a dense NumPy solve of the same chains.

Run from the repository root::

    .venv/bin/python benchmarks/nic_queue.py

It times 1,000 arrival rates (500..1000 Mbps at 1468-byte packets) for K=64, N=6 and
K=4096, N=64 with the fixed-batch exponential solver, times numpy.linalg.solve of the
same generators (with one balance equation replaced by the normalisation) in the same
run, and prints the ratio.  For K=4096 the dense solve is timed on a few rates and
scaled to 1,000, as the output says.  The other solvers (phase-type service, the rule
[a, b]) are timed for information.  Figures only: nothing is asserted.
"""

from __future__ import annotations

import os
import platform
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
import scipy

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from queues import bulk_service_queue, loss_probability

MU = 20_800.0  # interrupts/s (SPEC section 2)
PACKET_BYTES = 1468
RATES = np.linspace(500e6, 1000e6, 1000) / (8 * PACKET_BYTES)  # packets/s
DENSE_SUBSET_K4096 = 3
TARGETS = {64: 5e-3, 4096: 1.0}  # seconds for 1,000 rates


def best_time(fn: Callable[[], object], repeats: int) -> tuple[float, float]:
    """Best and median wall time (s) of ``repeats`` calls."""
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return min(times), statistics.median(times)


def generators(lam: np.ndarray, K: int, N: int) -> np.ndarray:
    """Dense generators of the fixed-batch chain, one per rate: shape (R, K+1, K+1)."""
    Q = np.zeros((lam.size, K + 1, K + 1))
    n = np.arange(K + 1)
    Q[:, n[:-1], n[:-1] + 1] = lam[:, None]
    Q[:, n[N:], n[N:] - N] = MU
    Q[:, n, n] = -Q.sum(axis=2)
    return Q


def dense_system(lam: np.ndarray, K: int, N: int) -> tuple[np.ndarray, np.ndarray]:
    """Q^T with its last row replaced by ones (sum pi = 1), and the right-hand side."""
    A = np.transpose(generators(lam, K, N), (0, 2, 1)).copy()
    A[:, K, :] = 1.0
    rhs = np.zeros((lam.size, K + 1, 1))
    rhs[:, K, 0] = 1.0
    return A, rhs


def dense_solve(A: np.ndarray, rhs: np.ndarray) -> np.ndarray:
    """pi for every rate by (batched) numpy.linalg.solve."""
    return np.linalg.solve(A, rhs)[:, :, 0]


def fmt(seconds: float) -> str:
    return f"{seconds * 1e3:10.2f} ms" if seconds < 1 else f"{seconds:10.3f} s "


def fixed_batch_section(K: int, N: int) -> None:
    print(f"\nK={K}, N={N}: fixed batch, exponential service, {RATES.size:,} rates")
    repeats = 50 if K <= 256 else 5
    full, full_med = best_time(lambda: bulk_service_queue(RATES, MU, K, N), repeats)
    loss, _ = best_time(lambda: loss_probability(RATES, MU, K, N), repeats)
    sol = bulk_service_queue(RATES, MU, K, N)
    median = fmt(full_med).strip()
    print(f"  cut recursion, full solution  {fmt(full)}  (best of {repeats}; median {median})")
    print(f"  cut recursion, loss only      {fmt(loss)}")
    target = TARGETS[K]
    verdict = "met" if full < target else "NOT met"
    print(f"  target for 1,000 rates        {fmt(target)}  -> {verdict}")
    if K <= 256:
        A, rhs = dense_system(RATES, K, N)
        dense, _ = best_time(lambda: dense_solve(A, rhs), 5)
        pi = dense_solve(A, rhs)
        note = f"all {RATES.size:,} rates batched, solve only, best of 5"
    else:
        subset = RATES[:: RATES.size // DENSE_SUBSET_K4096][:DENSE_SUBSET_K4096]
        measured = 0.0
        rows = []
        for lam in subset:  # one 4097 x 4097 system at a time (134 MB each)
            A, rhs = dense_system(lam[None], K, N)
            start = time.perf_counter()
            rows.append(dense_solve(A, rhs)[0])
            measured += time.perf_counter() - start
        pi = np.array(rows)
        dense = measured * RATES.size / subset.size
        note = (
            f"solve only, timed on {subset.size} of {RATES.size:,} rates "
            f"({measured:.2f} s) and scaled x{RATES.size / subset.size:.0f}"
        )
        sol = bulk_service_queue(subset, MU, K, N)
    print(f"  dense numpy.linalg.solve      {fmt(dense)}  ({note})")
    print(f"  ratio dense / recursion       {dense / full:10.0f} x")
    err = np.abs(pi - sol.occupancy_distribution).max()
    print(f"  max |pi_dense - pi|           {err:10.1e}   (dense solve is normwise accurate only)")


def other_solvers() -> None:
    print("\nOther solvers (for information; not the targets above)")
    erlang2 = (np.array([1.0, 0.0]), np.array([[-2 * MU, 2 * MU], [0.0, -2 * MU]]))
    for K, N, repeats in ((64, 6, 5), (4096, 64, 1)):
        t, _ = best_time(
            lambda K=K, N=N: bulk_service_queue(RATES, None, K, N, phase_type=erlang2), repeats
        )
        print(
            f"  K={K:<5} N={N:<3} Erlang-2 service, level censoring, "
            f"{RATES.size:,} rates: {fmt(t).strip()}"
        )
    for K, a, b, count in ((64, 1, 6, 1000), (4096, 1, 64, 40)):
        subset = RATES[:count]
        t, _ = best_time(
            lambda K=K, a=a, b=b, s=subset: bulk_service_queue(s, MU, K, b, min_batch=a), 1
        )
        scaled = (
            ""
            if count == RATES.size
            else f" (timed on {count} rates, scaled x{RATES.size // count})"
        )
        print(
            f"  K={K:<5} [a,b]=[{a},{b}] exponential, sparse LU per rate, "
            f"{RATES.size:,} rates: {fmt(t * RATES.size / count).strip()}{scaled}"
        )


def main() -> None:
    print("blastrate NIC queue benchmark")
    print(
        f"  Python {platform.python_version()}, NumPy {np.__version__}, SciPy {scipy.__version__}, "
        f"{os.cpu_count()} CPUs, {platform.machine()}"
    )
    print(
        f"  arrival rates: {RATES.size:,} from {RATES[0]:,.0f} to {RATES[-1]:,.0f} packets/s "
        f"(500..1000 Mbps at {PACKET_BYTES} B); mu = {MU:,.0f} interrupts/s"
    )
    bulk_service_queue(RATES[:10], MU, 64, 6)  # warm-up (imports, caches)
    fixed_batch_section(64, 6)
    fixed_batch_section(4096, 64)
    other_solvers()


if __name__ == "__main__":
    main()
