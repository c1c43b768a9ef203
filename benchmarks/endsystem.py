"""Benchmark of the end-system analysis (issue #3): interrupt service-time distribution.

Run from the repository root::

    .venv/bin/python benchmarks/endsystem.py            # everything (about a minute)
    .venv/bin/python benchmarks/endsystem.py --quick    # paper grid and small large shapes

It prints, measured in the same run:

* the paper grid (C = 1..4 CPU-bound, I = 0..3 I/O-bound tasks, one core, one disk):
  the cold time of a shape (compile both nets, explore both reachability graphs, first
  solve) and the warm time of one analysis (best and median of repeated calls), against
  the 1 ms target;
* where the warm time goes, step by step;
* two baselines for the same analyses: rebuilding the nets and solving them with the
  engine's generic calls on every request (``reachability_graph``, ``steady_state``,
  ``time_to_absorption``), and a dense ``scipy.linalg.expm`` evaluation of the same
  phase-type pair on the same grid, with the ratios;
* large shapes (up to m = 256 cores, C + I = 1000 tasks, d = 16 disks): states, method,
  cold and warm time, and the generic engine path for comparison.

BLAS threads: each analysis solves many small dense problems, where OpenBLAS's thread
pool only adds synchronisation (and, on a busy 2-core machine, stalls of 100x).  The
script therefore pins ``OPENBLAS_NUM_THREADS=1`` unless the environment sets it; it
prints the value used.  Figures only: nothing is asserted.
"""

from __future__ import annotations

import os

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
os.environ.setdefault("OMP_NUM_THREADS", "1")

import argparse
import platform
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
import scipy
import scipy.linalg as la
import scipy.sparse

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import srn
from host import (
    InterruptServiceTime,
    Workload,
    _shape,
    _spectral,
    end_system_nets,
    end_system_state_count,
    host_profile,
    interrupt_service_time,
    nets,
    service_time,
)

PROFILE = host_profile("sx280-2007")
PAPER = [Workload(c, i) for c in range(1, 5) for i in range(4)]
# (workload, also time the generic engine path?)  The generic path's sparse LU of T
# fills in badly on many-disk chains, so it is timed only where it finishes in seconds.
LARGE = [
    (Workload(990, 10, cores=256, disks=16), True),
    (Workload(0, 1000, cores=256, disks=1), True),
    (Workload(500, 500, cores=256, disks=1), True),
    (Workload(980, 20, cores=256, disks=16), True),
    (Workload(900, 100, cores=256, disks=2), True),
    (Workload(975, 25, cores=256, disks=16), True),
    (Workload(970, 30, cores=256, disks=16), False),
    (Workload(300, 700, cores=256, disks=2), False),
    (Workload(960, 40, cores=256, disks=16), False),
    (Workload(0, 1000, cores=256, disks=2), False),
]
QUICK_LARGE = LARGE[:4]
TARGET_S = 1e-3


def timings(fn: Callable[[], object], repeats: int, inner: int = 1) -> tuple[float, float]:
    """Best and median wall time (s) per call over ``repeats`` batches of ``inner`` calls."""
    out = []
    for _ in range(repeats):
        start = time.perf_counter()
        for _ in range(inner):
            fn()
        out.append((time.perf_counter() - start) / inner)
    return min(out), statistics.median(out)


def fmt(seconds: float) -> str:
    if seconds < 1e-3:
        return f"{seconds * 1e6:8.0f} us"
    if seconds < 1:
        return f"{seconds * 1e3:8.2f} ms"
    return f"{seconds:8.2f} s "


def engine_generic(w: Workload) -> srn.AbsorptionTime:
    """Baseline 1: build, compile and explore both nets, then the generic solvers."""
    steady, tagged = end_system_nets(w, PROFILE)
    graph_a = srn.reachability_graph(steady)
    pi = srn.steady_state(graph_a.generator()).probabilities
    n = graph_a.n_states
    starts = np.column_stack([graph_a.markings, np.ones(n, int), np.zeros(n, int)])
    graph_b = srn.reachability_graph(tagged, initial_markings=starts, initial_probabilities=pi)
    return srn.time_to_absorption(graph_b.generator(), graph_b.initial_distribution)


def dense_expm(r: InterruptServiceTime) -> np.ndarray:
    """Baseline 2: the same (alpha, T) on the same grid with dense expm at each time."""
    alpha, T = r.phase_type()
    dense = T.toarray()
    ones = np.ones(len(alpha))
    la.solve(-dense, ones)  # the mean, as the model computes it too
    return np.array([1.0 - alpha @ la.expm(dense * t) @ ones for t in r.times_s])


def paper_grid(repeats: int) -> None:
    print("\nPaper grid: C = 1..4, I = 0..3, m = 1, d = 1 (sx280-2007), default outputs")
    print("  (CDF on 101 points, p50/p90/p99, mean, variance, (alpha, T), occupancy)")
    print(
        f"  {'C':>2} {'I':>2} {'states':>6}  {'cold':>11}  {'warm best':>11}  {'warm median':>11}"
    )
    warm_best, warm_median, cold_all = [], [], []
    for w in PAPER:
        _shape.SHAPES.clear()
        start = time.perf_counter()
        r = interrupt_service_time(w, PROFILE)
        cold = time.perf_counter() - start
        best, median = timings(lambda w=w: interrupt_service_time(w, PROFILE), repeats, 20)
        warm_best.append(best)
        warm_median.append(median)
        cold_all.append(cold)
        print(
            f"  {w.cpu_tasks:>2} {w.io_tasks:>2} {r.n_states:>6}  {fmt(cold)}  {fmt(best)}  "
            f"{fmt(median)}"
        )
    worst = max(warm_median)
    verdict = "met" if worst < TARGET_S else "MISSED"
    print(
        f"  warm: median over the grid {fmt(statistics.median(warm_median))}, worst median "
        f"{fmt(worst)}; target {fmt(TARGET_S)} -> {verdict}"
    )
    print(f"  cold: median {fmt(statistics.median(cold_all))} (compile + explore + solve)")

    # Baselines, same workloads, same run.
    base1 = [timings(lambda w=w: engine_generic(w), max(3, repeats // 2))[0] for w in PAPER]
    results = [interrupt_service_time(w, PROFILE) for w in PAPER]
    base2 = [timings(lambda r=r: dense_expm(r), max(3, repeats // 2))[0] for r in results]
    model = statistics.median(warm_best)
    print("\n  Baselines (best time per analysis, median over the grid):")
    print(f"    model, warm                                      {fmt(model)}")
    b1 = statistics.median(base1)
    print(
        f"    rebuild nets + generic engine solvers each call  {fmt(b1)}  ratio {b1 / model:7.0f} x"
    )
    b2 = statistics.median(base2)
    print(
        f"    dense expm of (alpha, T) on the 101-point grid   {fmt(b2)}  ratio {b2 / model:7.0f} x"
    )
    err = max(float(np.max(np.abs(dense_expm(r) - r.cdf))) for r in results)
    print(f"    max |CDF_model - CDF_expm| over the grid         {err:10.1e}")


def breakdown(repeats: int) -> None:
    """Time each step of one warm analysis (C = 4, I = 3)."""
    w = Workload(4, 3)
    interrupt_service_time(w, PROFILE)
    shape = _shape.SHAPES.get(w.io_tasks, w.disks, service_time.DEFAULT_LIMITS)
    values = nets.net_parameters(w, PROFILE)
    levels = np.array([0.5, 0.9, 0.99])

    def rates_a() -> object:
        return shape.graph_a.with_parameters(dict(values)).edge_rates()

    graph_a = shape.graph_a.with_parameters(values)
    pi, log_pi, _ = service_time._steady_state(shape, graph_a)

    def rates_b() -> object:
        return shape.graph_b.with_parameters(dict(values)).with_initial(pi).edge_rates()

    graph_b = shape.graph_b.with_parameters(values).with_initial(pi)
    rb = graph_b.edge_rates()
    alpha = graph_b.initial_distribution[shape.transient]
    nt = len(alpha)
    inner = rb[shape.b_inner]
    exits = np.bincount(shape.b_exit_row, weights=rb[shape.b_exit], minlength=nt)
    out_rate = exits + np.bincount(shape.b_rows, weights=inner, minlength=nt)
    log_w = shape.balance_b.log_weights(inner)
    assert log_w is not None
    spectral = _spectral.spectral_solution(
        shape, inner, out_rate, exits, alpha, log_pi[shape.b_from_a], log_w
    )
    assert spectral is not None
    survival, mean = spectral[0]()[0], spectral[1]
    grid = np.linspace(0, 5 * mean, 101)
    r_example = interrupt_service_time(w, PROFILE)

    def result_objects(r: InterruptServiceTime) -> object:
        data = np.concatenate([inner, -out_rate])[shape.csr_order]
        T = scipy.sparse.csr_array((data, shape.csr_indices, shape.csr_indptr), shape=(nt, nt))
        a = srn.AbsorptionTime(
            times=np.linspace(0.0, mean, 101),
            cdf=r.cdf,
            mean=mean,
            variance=r.variance_s2,
            quantiles=dict(r.quantiles_s),
            alpha=alpha,
            T=T,
            transient_states=shape.transient,
            atom=0.0,
            error_bound=0.0,
        )
        return InterruptServiceTime(
            workload=w,
            profile=PROFILE,
            mean_s=a.mean,
            variance_s2=a.variance,
            rate_per_s=1 / a.mean,
            occupancy=r.occupancy,
            n_states=r.n_states,
            n_transient_states=nt,
            _distribution=a,
        )

    steps: list[tuple[str, Callable[[], object]]] = [
        (
            "validate request, state count, cache lookup",
            lambda: (
                service_time._validate_request(None, (0.5, 0.9, 0.99), 101),
                end_system_state_count(w),
                _shape.SHAPES.get(3, 1, service_time.DEFAULT_LIMITS),
            ),
        ),
        ("engine: Fig. 1a rate expressions", rates_a),
        (
            "Fig. 1a steady state (detailed balance)",
            lambda: service_time._steady_state(shape, graph_a),
        ),
        ("occupancy", lambda: service_time._occupancy(shape, pi, w, PROFILE)),
        ("engine: Fig. 1b rates + carried-over start", rates_b),
        ("Fig. 1b detailed-balance weights", lambda: shape.balance_b.log_weights(inner)),
        (
            "mean, var (solves with T)",
            lambda: _spectral.spectral_solution(
                shape, inner, out_rate, exits, alpha, log_pi[shape.b_from_a], log_w
            ),
        ),
        ("symmetrised eigen-decomposition (on demand)", spectral[0]),
        (
            "quantiles p50/p90/p99 + p99.9 (grid end)",
            lambda: _spectral.spectral_quantiles(survival, np.append(levels, 0.999), mean),
        ),
        ("CDF on 101 points", lambda: survival(grid)),
        ("T as CSR, grid, result objects", lambda: result_objects(r_example)),
    ]
    total, _ = timings(lambda: interrupt_service_time(w, PROFILE), repeats, 50)
    print(f"\nWhere the warm time goes (C = 4, I = 3; best of {repeats} x 50 calls)")
    parts = 0.0
    for label, fn in steps:
        best, _ = timings(fn, repeats, 50)
        parts += best
        print(f"  {label:46s} {fmt(best)}  {100 * best / total:5.1f} %")
    print(f"  {'(remainder: glue; steps timed in tight loops)':46s} {fmt(max(total - parts, 0.0))}")
    print(f"  {'whole call':46s} {fmt(total)}")


def large_shapes(shapes: list[tuple[Workload, bool]]) -> None:
    print("\nLarge shapes (sx280-2007): states of Fig. 1a, method, cold / warm time")
    print(
        f"  {'C':>4} {'I':>4} {'m':>3} {'d':>2} {'states':>7}  {'method':22s} {'cold':>11} "
        f"{'warm':>11}  generic engine   ratio"
    )
    for w, baseline in shapes:
        _shape.SHAPES.clear()
        start = time.perf_counter()
        r = interrupt_service_time(w, PROFILE)
        cold = time.perf_counter() - start
        warm, _ = timings(lambda w=w: interrupt_service_time(w, PROFILE), 3)
        line = (
            f"  {w.cpu_tasks:>4} {w.io_tasks:>4} {w.cores:>3} {w.disks:>2} {r.n_states:>7}  "
            f"{r.method:22s} {fmt(cold)} {fmt(warm)}"
        )
        if baseline:
            start = time.perf_counter()
            try:
                with np.errstate(all="ignore"):
                    ref = engine_generic(w)
            except srn.SRNError as exc:
                line += f"  generic path failed: {type(exc).__name__}: {str(exc)[:60]}"
            else:
                generic = time.perf_counter() - start
                rel = abs(ref.mean - r.mean_s) / ref.mean
                line += f"  {fmt(generic)} {generic / warm:6.0f} x  (mean agrees to {rel:.0e})"
        print(line)
    print(
        "  The state count depends on I and d only: sum_{k<=I} p(k, <=d parts); "
        "C and m are rate parameters."
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer repeats, small shapes")
    args = parser.parse_args()
    repeats = 5 if args.quick else 15
    print("blastrate end-system benchmark (issue #3)")
    print(
        f"  Python {platform.python_version()}, NumPy {np.__version__}, SciPy {scipy.__version__}, "
        f"{os.cpu_count()} CPUs, {platform.machine()}, "
        f"OPENBLAS_NUM_THREADS={os.environ.get('OPENBLAS_NUM_THREADS')}"
    )
    paper_grid(repeats)
    breakdown(repeats)
    large_shapes(QUICK_LARGE if args.quick else LARGE)


if __name__ == "__main__":
    main()
