"""Accuracy of stage 1's moments on stiff rates: compiled path against the NumPy path.

Run from the repository root (needs the ``test`` extra for mpmath)::

    .venv/bin/python benchmarks/stage1_accuracy.py               # 300 draws
    .venv/bin/python benchmarks/stage1_accuracy.py --draws 50 --seed 3

Each draw is a random workload (C = 0..900, I = 0..9, m = 1..64, d = 1..3) on rates
``mu_io_cpu``, ``mu_disk``, ``mu_net`` drawn log-uniformly from 1e-3 to 1e9 1/s, so up to
twelve decades apart.  For the mean and the variance of the interrupt service time it
prints the relative error against the exact chains in 50-digit arithmetic (the test
suite's reference, ``tests/host/test_small_chain.py::exact_moments``) of

* the compiled small-chain solve (subtraction-free elimination of ``-T``), and
* the NumPy path the library takes for larger chains (LAPACK LU with pivoting),

as the median and the largest over the draws.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests" / "host"))

from test_small_chain import exact_moments, numpy_path  # noqa: E402

from host import Workload, host_profile, interrupt_service_time  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--draws", type=int, default=300, help="random workloads (300)")
    parser.add_argument("--seed", type=int, default=0, help="random seed (0)")
    args = parser.parse_args()
    rng = np.random.default_rng(args.seed)
    base = host_profile("sx280-2007")
    errors: dict[str, list[float]] = {
        "compiled mean": [],
        "compiled variance": [],
        "NumPy mean": [],
        "NumPy variance": [],
    }
    for _ in range(args.draws):
        w = Workload(
            int(rng.integers(0, 901)),
            int(rng.integers(0, 10)),
            cores=int(rng.integers(1, 65)),
            disks=int(rng.integers(1, 4)),
        )
        mu = 10.0 ** rng.uniform(-3, 9, size=3)
        p = base.replace(mu_io_cpu=mu[0], mu_disk=mu[1], mu_net=mu[2])
        mean, variance = exact_moments(w, p)
        for label, result in (
            ("compiled", interrupt_service_time(w, p)),
            ("NumPy", numpy_path(w, p)),
        ):
            errors[f"{label} mean"].append(abs(result.mean_s - mean) / mean)
            errors[f"{label} variance"].append(abs(result.variance_s2 - variance) / variance)
    print(f"{args.draws} draws, seed {args.seed}: rates 1e-3..1e9 1/s, relative error")
    print("  against 50-digit exact moments")
    print(f"  {'':20} {'median':>10} {'max':>10}")
    for label, values in errors.items():
        print(f"  {label:20} {np.median(values):10.1e} {np.max(values):10.1e}")


if __name__ == "__main__":
    main()
