"""Benchmark of the NIC queue solvers against a dense NumPy solve of the same chains.

Run from the repository root::

    .venv/bin/python benchmarks/nic_queue.py

It times 1,000 arrival rates (500..1000 Mbps at 1468-byte packets) for K=64, N=6 and
K=4096, N=64 with the fixed-batch exponential solver, times numpy.linalg.solve of the
same generators (with one balance equation replaced by the normalisation) in the same
run, and prints the ratio.  For K=4096 the dense solve is timed on a few rates and
scaled to 1,000, as the output says.  The other solvers (phase-type service, the rule
[a, b]) are timed for information.

Phase-type service: the compiled level censoring (``queues._levels``) is timed against
the pure-NumPy implementation it replaced (kept below, in this script only, as the
baseline), on the same 1,000 rates and a dense phase-type service time (every phase can
move to every other, so the compiled code skips no zero rate), with the ratio and the
largest relative difference between the two distributions.  Figures only: nothing is
asserted.
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
from queues._levels import fixed_batch_phase_type

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


def dense_phase_type(m: int) -> tuple[np.ndarray, np.ndarray]:
    """A dense (alpha, T) of order m with mean 1/MU (fixed seed): all rates positive."""
    rng = np.random.default_rng(m)
    off = rng.uniform(0.1, 1.0, (m, m))
    np.fill_diagonal(off, 0.0)
    T = off - np.diag(off.sum(axis=1) + rng.uniform(0.1, 1.0, m))
    alpha = rng.uniform(0.1, 1.0, m)
    alpha /= alpha.sum()
    mean = float(alpha @ np.linalg.solve(-T, np.ones(m)))
    return alpha, T * mean * MU


def best_of(
    solve: Callable[..., tuple[np.ndarray, np.ndarray]], repeats: int, *args: object
) -> tuple[float, tuple[np.ndarray, np.ndarray]]:
    """Best wall time (s) of ``repeats`` calls ``solve(*args)``, and the last result."""
    best = np.inf
    for _ in range(repeats):
        start = time.perf_counter()
        result = solve(*args)
        best = min(best, time.perf_counter() - start)
    return best, result


def phase_type_section() -> None:
    print(
        f"\nPhase-type service, fixed batch, level censoring, {RATES.size:,} rates: compiled "
        "(queues) vs the NumPy version it replaced"
    )
    runs = ((64, 6, 4, 20, 4), (64, 6, 16, 5, 1), (4096, 64, 4, 2, 1))
    for K, N, m, new_repeats, old_repeats in runs:
        alpha, T = dense_phase_type(m)
        args = (RATES, K, N, alpha, T)
        fixed_batch_phase_type(RATES[:40], K, N, alpha, T)  # compile / load the kernels
        new, (dist, phases) = best_of(fixed_batch_phase_type, new_repeats, *args)
        old, (ref_dist, ref_phases) = best_of(numpy_levels, old_repeats, *args)
        large = relative_difference(dist, ref_dist, floor=1e-10)
        diff = max(relative_difference(dist, ref_dist), relative_difference(phases, ref_phases))
        print(
            f"  K={K:<5} N={N:<3} m={m:<3} compiled {fmt(new).strip():>10}  NumPy "
            f"{fmt(old).strip():>10}  ratio {old / new:6.1f} x  "
            f"max rel diff {large:.1e} / {diff:.1e}"
        )
        print(f"{'':21s}(best of {new_repeats} compiled, {old_repeats} NumPy runs)")
    print(
        "  max rel diff: over the probabilities >= 1e-10 / over all in the normal double range\n"
        "  (>= 2.2e-308; at K=4096 the top levels are subnormal or 0 in both versions).  Both\n"
        "  keep level masses as logs, so a probability e^-L picks up ~L * 1e-16 of relative\n"
        "  rounding per level: the tail differs more at large K."
    )


def relative_difference(x: np.ndarray, ref: np.ndarray, floor: float = 0.0) -> float:
    """max |x - ref| / ref over the entries where x or ref is a normal double >= floor."""
    normal = np.maximum(x, ref) >= max(floor, float(np.finfo(np.float64).tiny))
    with np.errstate(divide="ignore", invalid="ignore"):
        rel = np.abs(x - ref) / ref
    return float(np.max(rel, where=normal, initial=0.0))


# --- Baseline: the pure-NumPy level censoring that queues/_levels.py used before it was
# compiled with Numba (the same algorithm, vectorised over the rates, with a Python loop
# over levels and phases).  Kept here only to be timed against.

_NUMPY_CHUNK_VALUES = 8_000_000
_TINY = float(np.finfo(np.float64).tiny)


def numpy_levels(
    lam_all: np.ndarray, K: int, N: int, alpha: np.ndarray, T: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """Occupancy distribution (R, K + 1) and per-phase busy mass (R, m), in chunks."""
    R, m = lam_all.size, alpha.size
    chunk = max(1, _NUMPY_CHUNK_VALUES // ((K + 1) * (m * m + 2 * m + 3)))
    dist = np.empty((R, K + 1))
    phase_mass = np.empty((R, m))
    for start in range(0, R, chunk):
        stop = min(R, start + chunk)
        dist[start:stop], phase_mass[start:stop] = _numpy_solve(lam_all[start:stop], K, N, alpha, T)
    return dist, phase_mass


def _numpy_solve(
    lam: np.ndarray, K: int, N: int, alpha: np.ndarray, T: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    R, m = lam.size, alpha.size
    scale = lam + float(np.max(-np.diag(T)))
    lam = lam / scale
    exit_rates = np.clip(-T.sum(axis=1), 0.0, None)[:, None] / scale
    T_off = (T - np.diag(np.diag(T)))[:, :, None] / scale
    diag = np.arange(m)
    busy_levels = K - N + 1
    kept_W = np.empty((busy_levels, m, m, R))
    kept_s = np.empty((busy_levels, m, R))
    log_idle_step = np.zeros((N, R))
    H_prev: np.ndarray | None = None
    for n in range(K, N - 1, -1):
        D = np.empty((m, N, R))
        D[:, 0, :] = exit_rates
        if H_prev is None:
            W = T_off.copy()
            D[:, 1:, :] = 0.0
        else:
            back = lam * H_prev[:, N - 1, :]
            W = T_off + back[:, None, :] * alpha[None, :, None]
            np.multiply(lam, H_prev[:, : N - 1, :], out=D[:, 1:, :])
        W[diag, diag] = 0.0
        H_prev = _numpy_eliminate_level(W, D, kept_W[n - N], kept_s[n - N])
    assert H_prev is not None
    exits = np.einsum("k,kxr->xr", alpha, H_prev)
    for n in range(N - 1, 0, -1):
        below = np.maximum(exits[:n].sum(axis=0), _TINY)
        log_idle_step[n] = -np.log(below)
        exits = exits[:n] / below
    log_level = np.empty((K + 1, R))
    log_level[0] = 0.0
    log_lam = np.log(lam)
    for n in range(1, N):
        log_level[n] = log_level[n - 1] + log_idle_step[n]
    phase_at = np.empty((busy_levels, m, R))
    vec = np.repeat(alpha[:, None], R, axis=1)
    for n in range(N, K + 1):
        vec = _numpy_level_mass(vec, kept_W[n - N], kept_s[n - N])
        total = np.maximum(vec.sum(axis=0), _TINY)
        vec /= total
        log_level[n] = log_level[n - 1] + log_lam + np.log(total)
        phase_at[n - N] = vec
    log_level -= log_level.max(axis=0)
    dist = np.exp(log_level)
    dist /= dist.sum(axis=0)
    phase_mass = np.einsum("nkr,nr->rk", phase_at, dist[N:])
    return np.ascontiguousarray(dist.T), phase_mass


def _numpy_eliminate_level(
    W: np.ndarray, D: np.ndarray, kept_W: np.ndarray, kept_s: np.ndarray
) -> np.ndarray:
    m = W.shape[0]
    for k in range(m - 1, -1, -1):
        s_k = np.maximum(W[k, :k].sum(axis=0) + D[k].sum(axis=0), _TINY)
        kept_s[k] = s_k
        if k:
            share = W[:k, k] / s_k
            W[:k, :k] += share[:, None, :] * W[None, k, :k]
            lower = np.arange(k)
            W[lower, lower] = 0.0
            D[:k] += share[:, None, :] * D[None, k]
    kept_W[:] = W
    H = np.empty_like(D)
    for k in range(m):
        acc = D[k].copy()
        for j in range(k):
            acc += W[k, j] * H[j]
        H[k] = acc / kept_s[k]
    return H


def _numpy_level_mass(inflow: np.ndarray, kept_W: np.ndarray, kept_s: np.ndarray) -> np.ndarray:
    m = inflow.shape[0]
    b = inflow.copy()
    for k in range(m - 1, 0, -1):
        b[:k] += b[k] * kept_W[k, :k] / kept_s[k]
    x = np.empty_like(b)
    for k in range(m):
        x[k] = (b[k] + (x[:k] * kept_W[:k, k]).sum(axis=0)) / kept_s[k]
    return x


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
    phase_type_section()


if __name__ == "__main__":
    main()
