"""Benchmark of the effective-bottleneck-rate search against a brute-force scan.

Run from the repository root::

    .venv/bin/python benchmarks/transfer_search.py

The loss is a synthetic closed form (M/M/1/K blocking with mu = 70,000 packets/s, K = 64,
1468-byte packets), so the figures measure the search, not a queue solver.  The setting is
the paper's: 500 MB, 100 ms one way, 1 Gbps line.  It times, in the same run:

* one ``effective_bottleneck_rate`` call (median over many repeats);
* a brute-force scan of every 0.1 Mbps over (0, 1 Gbps] (10,000 rates: the loss and
  ``transfer_time`` on all of them, then the argmin), median over fewer repeats;

and prints both, their ratio, the loss evaluations of each and how far apart the two
answers are.  The same comparison is then run, for information, with the project's NIC
queue solver (``queues.loss_probability``, M/M[6]/1/64) when it can be imported: there
each loss evaluation costs more, which is what the search saves.  Figures only: nothing
is asserted.
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from transport import effective_bottleneck_rate, transfer_time

PACKET_BYTES = 1468
LINE_RATE = 1e9  # bit/s
FILE_SIZE = 500_000_000  # bytes
DELAY = 0.1  # s, one way
STEP = 1e5  # bit/s: the brute-force resolution, 0.1 Mbps


def mm1k_loss(mu: float, capacity: int) -> Callable[[np.ndarray], np.ndarray]:
    """M/M/1/K blocking probability at sending rate B (bit/s); lambda = B / (8 * 1468)."""

    def loss(rate_bps: np.ndarray) -> np.ndarray:
        rho = rate_bps / (8 * PACKET_BYTES) / mu
        out = np.full(rho.shape, 1.0 / (capacity + 1))
        below = rho < 1 - 1e-9
        above = rho > 1 + 1e-9
        r = rho[below]
        out[below] = (1 - r) * r**capacity / (1 - r ** (capacity + 1))
        q = 1 / rho[above]  # rho > 1 rewritten with q = 1/rho: no overflow
        out[above] = (1 - q) / (1 - q ** (capacity + 1))
        return out

    return loss


def median_time(fn: Callable[[], object], repeats: int) -> float:
    """Median wall time (s) of ``repeats`` calls, after one warm-up call."""
    fn()
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def run_case(
    label: str, loss: Callable[[np.ndarray], np.ndarray], repeats: int, brute_repeats: int
) -> None:
    """Time the search and the brute-force scan with one loss function; print the figures."""
    kwargs = {
        "line_rate_bps": LINE_RATE,
        "file_size_bytes": FILE_SIZE,
        "propagation_delay_s": DELAY,
    }
    grid = STEP * np.arange(1, round(LINE_RATE / STEP) + 1)

    def search() -> object:
        return effective_bottleneck_rate(loss, **kwargs)  # type: ignore[arg-type]

    def brute() -> tuple[float, float]:
        t = transfer_time(grid, loss(grid), FILE_SIZE, DELAY)
        total = np.where(t.completes, t.total_s, np.inf)
        j = int(np.argmin(total))
        return float(grid[j]), float(total[j])

    t_search = median_time(search, repeats)
    t_brute = median_time(brute, brute_repeats)
    best = effective_bottleneck_rate(loss, **kwargs)  # type: ignore[arg-type]
    rate_b, total_b = brute()

    print(f"\n{label}")
    print(
        f"  search      : {t_search * 1e3:8.3f} ms median of {repeats:4d}, "
        f"{best.loss_evaluations:6d} loss evaluations -> {best.rate_bps / 1e6:.4f} Mbps, "
        f"T = {best.transfer_time_s:.9f} s ({best.limited_by})"
    )
    print(
        f"  brute force : {t_brute * 1e3:8.3f} ms median of {brute_repeats:4d}, "
        f"{grid.size:6d} loss evaluations -> {rate_b / 1e6:.4f} Mbps, T = {total_b:.9f} s"
    )
    print(f"  ratio       : brute force / search = {t_brute / t_search:.1f}x")
    print(
        f"  agreement   : |rate difference| = {abs(best.rate_bps - rate_b) / 1e6:.4f} Mbps, "
        f"T(search) - T(brute) = {best.transfer_time_s - total_b:+.3e} s"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mu", type=float, default=70_000.0, help="packets/s (default 70000)")
    parser.add_argument("--capacity", type=int, default=64, help="buffer K (default 64)")
    parser.add_argument("--repeats", type=int, default=500, help="search repeats (500)")
    parser.add_argument("--brute-repeats", type=int, default=50, help="brute repeats (50)")
    args = parser.parse_args()

    print(f"python {platform.python_version()}, numpy {np.__version__}, {os.cpu_count()} CPUs")
    print(
        f"setting: {FILE_SIZE / 1e6:.0f} MB, {DELAY * 1e3:.0f} ms one way, "
        f"{LINE_RATE / 1e6:.0f} Mbps line; brute force = every {STEP / 1e6:g} Mbps"
    )
    run_case(
        f"synthetic closed-form loss: M/M/1/K, mu = {args.mu:g} packets/s, K = {args.capacity}",
        mm1k_loss(args.mu, args.capacity),
        args.repeats,
        args.brute_repeats,
    )

    # For information: the same comparison with the project's NIC queue solver, whose
    # cost per call is far higher than the closed form's (an O(K) recursion).
    try:
        from queues import loss_probability
    except ImportError:
        print("\nNIC queue solver: skipped (queues.loss_probability not importable)")
        return
    mu_interrupts = 41_600.0 / 3  # SX280, 2 CPU-bound tasks: 1 / E[service] (SPEC part 2)

    def nic_loss(rate_bps: np.ndarray) -> np.ndarray:
        return loss_probability(rate_bps / (8 * PACKET_BYTES), mu_interrupts, 64, 6)

    run_case(
        f"NIC queue solver: M/M[6]/1/64, mu = {mu_interrupts:.0f} interrupts/s",
        nic_loss,
        max(args.repeats // 10, 5),
        max(args.brute_repeats // 10, 3),
    )


if __name__ == "__main__":
    main()
