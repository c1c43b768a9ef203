"""How far the time-slice model's search lands from the lowest point of its own curve.

    .venv/bin/python benchmarks/timeslice_search.py

The model's transfer time against the sending rate is a sawtooth: it falls while the
number of rounds stays the same and jumps up by a round where one more is needed.
:func:`transport.time_slice_bottleneck_rate` scores a 32-point grid and refines around its
best point only, so the lowest tooth can be missed when the grid's best lies on another.
Here the search's time is divided by the lowest of a 400-point grid of the same model
(2.5 Mbit/s apart), for the search as shipped (one refinement) and for refinements around
the best two and three local minima of the coarse grid, over 75 workloads: K = 64, 92,
400; C = 0, 1, 2, 3, 5 (I = 1); 30 MB at 1, 10 and 100 ms, 500 MB at 100 ms and 2 GB at
10 ms; the built-in profile's rates and line (1 Gbit/s), no calibration.  A ratio is an
accuracy, not a speed: no timing here.  Bounded: 75 workloads, about a minute.
"""

from __future__ import annotations

import numpy as np

from host import Workload, host_profile
from transport import DEFAULT_SETTLE_S
from transport.timeslice import time_slice_grid, time_slice_refinement, time_slice_terms

TRANSFERS = [
    (30_000_000, 0.001),
    (30_000_000, 0.01),
    (30_000_000, 0.1),
    (500_000_000, 0.1),
    (2_000_000_000, 0.01),
]


def main() -> None:
    base = host_profile("sx280-2007")
    ratios: list[list[float]] = []
    worst: list[tuple[float, str]] = []
    for k, n in ((64, 6), (92, 8), (400, 8)):
        profile = base.replace(buffer_packets=k, coalesce_packets=n)
        for c in (0, 1, 2, 3, 5):
            workload = Workload(cpu_tasks=c, io_tasks=1)
            dense = time_slice_terms(workload, profile, rates_bps=np.linspace(2.5e6, 1e9, 400))
            coarse = time_slice_terms(workload, profile, rates_bps=time_slice_grid(1e9))
            for size, delay in TRANSFERS:
                lowest = float(np.min(dense.curve(size, delay, DEFAULT_SETTLE_S).transfer_time_s))
                times = coarse.curve(size, delay, DEFAULT_SETTLE_S).transfer_time_s
                last = len(times) - 1
                minima = sorted(
                    (
                        i
                        for i in range(len(times))
                        if np.isfinite(times[i])
                        and (i == 0 or times[i] <= times[i - 1])
                        and (i == last or times[i] <= times[i + 1])
                    ),
                    key=lambda i: times[i],
                )
                row = []
                for count in (1, 2, 3):
                    best = np.inf
                    for i in minima[:count]:
                        fine = time_slice_terms(
                            workload,
                            profile,
                            rates_bps=time_slice_refinement(coarse.rate_bps, i),
                        )
                        merged = coarse.merged(fine).curve(size, delay, DEFAULT_SETTLE_S)
                        best = min(best, float(np.min(merged.transfer_time_s)))
                    row.append(best / lowest)
                ratios.append(row)
                worst.append((row[0], f"K={k} C={c} {size / 1e6:g} MB {delay * 1e3:g} ms"))
    table = np.array(ratios)
    print(f"{len(ratios)} workloads; the search's time over the 400-point grid's lowest")
    for j, label in enumerate(("as shipped (1 refinement)", "2 refinements", "3 refinements")):
        column = table[:, j]
        print(
            f"{label:26} max {column.max():.5f}  geometric mean "
            f"{np.exp(np.log(column).mean()):.6f}  above 1.001: {(column > 1.001).sum()}"
        )
    for ratio, where in sorted(worst, reverse=True)[:3]:
        print(f"  worst as shipped: {ratio:.5f} at {where}")


if __name__ == "__main__":
    main()
