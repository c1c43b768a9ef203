"""Aggregation-disaggregation against the residual-driven routes on a wide NCD chain.

Run from the repository root::

    OPENBLAS_NUM_THREADS=1 .venv/bin/python benchmarks/iad_ncd.py                 # 1,200 states
    OPENBLAS_NUM_THREADS=1 .venv/bin/python benchmarks/iad_ncd.py --blocks 200 --size 100

The chain is the test suite's: ``blocks`` blocks of ``size`` states with internal rates
log-uniform in [1, 1e6], block i coupled to block i + 1 at a rate in [1e-6, 1e-5] plus
``blocks`` random weak edges, and ``couplings`` (default: one per state) random edges at
rates in [1e-12, 1e-11] tying the blocks into an expander, so no ordering leaves a narrow
band.  For each route it prints wall time (best of ``--repeat``), iterations, residual
``||pi Q||_1`` and the largest relative error of a block mass against the reference:
dense GTH up to 3,000 states, else the iad answer itself (then iad's own row reads 0).
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np
import scipy.sparse as sp

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from srn import ConvergenceError, steady_state  # noqa: E402


def ncd_chain(blocks: int, size: int, couplings: int, seed: int) -> sp.csr_array:
    """Wide nearly completely decomposable generator (see the module notes)."""
    rng = np.random.default_rng(seed)
    n = blocks * size
    base = np.repeat(np.arange(blocks) * size, size)
    local = np.tile(np.arange(size), blocks)
    # A ring inside each block plus three random chords per state.
    rows = np.concatenate([base + local] * 4)
    cols = np.concatenate(
        [base + (local + 1) % size] + [base + rng.integers(0, size, n) for _ in range(3)]
    )
    vals = 10 ** rng.uniform(0, 6, len(rows))
    ring_from = np.arange(blocks) * size + size - 1
    ring_to = ((np.arange(blocks) + 1) % blocks) * size
    extra = rng.integers(0, n, (2, blocks + couplings))
    weak = np.concatenate(
        [
            10 ** rng.uniform(-6, -5, 2 * blocks),
            10 ** rng.uniform(-12, -11, couplings),
        ]
    )
    rows = np.concatenate([rows, ring_from, extra[0]])
    cols = np.concatenate([cols, ring_to, extra[1]])
    vals = np.concatenate([vals, weak])
    keep = rows != cols
    Q = sp.coo_array((vals[keep], (rows[keep], cols[keep])), shape=(n, n)).tocsr()
    Q.sum_duplicates()
    return sp.csr_array(Q - sp.diags_array(np.asarray(Q.sum(axis=1)).ravel()))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--blocks", type=int, default=30)
    parser.add_argument("--size", type=int, default=40)
    parser.add_argument("--couplings", type=int, default=None)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--time-limit", type=float, default=120.0)
    args = parser.parse_args()
    n = args.blocks * args.size
    Q = ncd_chain(args.blocks, args.size, args.couplings or n, args.seed)
    print(f"{n} states, {Q.nnz} nonzeros, {args.blocks} blocks of {args.size}")
    auto = steady_state(Q, time_limit=args.time_limit)
    print(f"auto takes: {[a.method for a in auto.attempts]}")
    if n <= 3_000:
        began = time.perf_counter()
        reference = steady_state(Q, method="dense").probabilities
        label = f"dense GTH ({time.perf_counter() - began:.2f} s)"
    else:
        reference = steady_state(Q, method="iad", time_limit=args.time_limit).probabilities
        label = "iad"
    masses = reference.reshape(args.blocks, args.size).sum(axis=1)
    print(f"reference: {label}")
    print(f"{'route':<12} {'seconds':>9} {'iter':>5} {'residual':>10} {'block mass err':>15}")
    for method in ("iad", "sparse-lu", "bicgstab-gs", "gmres-ilu"):
        times = []
        try:
            for _ in range(args.repeat):
                began = time.perf_counter()
                result = steady_state(Q, method=method, time_limit=args.time_limit)
                times.append(time.perf_counter() - began)
        except ConvergenceError as err:
            print(f"{method:<12} failed: {err.attempts[-1].note}")
            continue
        got = result.probabilities.reshape(args.blocks, args.size).sum(axis=1)
        error = float(np.max(np.abs(got / masses - 1)))
        print(
            f"{method:<12} {min(times):9.4f} {result.iterations:5d} "
            f"{result.residual:10.2e} {error:15.2e}"
        )


if __name__ == "__main__":
    main()
