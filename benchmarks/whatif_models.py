"""What ranking a host's upgrades (what-if) costs in each receiver model.

    .venv/bin/python benchmarks/whatif_models.py

What-if evaluates the point, its single changes (about 14) and a grid of rings and
coalescing batches up to a 4,096-packet ring (about 56): some 70 variants
(:func:`planning.variants.evaluate_variants`, as :func:`planning.whatif.what_if` calls it).
Both models on the same variants, the paper's first, each after a warm-up of two
variants: C = 3, I = 1, 500 MB over 100 ms, the built-in profile.  Why what-if ranks with
the paper's model unless told otherwise.  Bounded: one pass per model, about half a minute.
"""

from __future__ import annotations

import os
import time

import planning.whatif as whatif
from planning.points import resolve_point
from planning.variants import evaluate_variants

POINT = {"cpu_tasks": 3, "io_tasks": 1, "file_size": 500_000_000, "propagation_delay": 0.1}
MAX_RING = 4096


def variants(model: str) -> list[dict[str, object]]:
    """The variants what-if evaluates for :data:`POINT` in ``model``."""
    resolved = resolve_point({**POINT, "model": model})
    changes = whatif._changes(resolved, MAX_RING)
    k0, n0 = resolved["buffer_packets"], resolved["coalesce_packets"]
    rings = sorted({*(k0 * 2**j for j in range(32) if k0 * 2**j <= MAX_RING), MAX_RING})
    batches = sorted({*whatif.COALESCE_CANDIDATES, n0})
    grid = [
        {**resolved, "buffer_packets": k, "coalesce_packets": n}
        for k in rings
        for n in batches
        if n <= k
    ]
    return [resolved, *(change[5] for change in changes), *grid]


def main() -> None:
    print(f"load average {os.getloadavg()[0]:.2f} before")
    for model in ("paper", "timeslice"):
        points = variants(model)
        evaluate_variants(points[:2])  # imports and compiled kernels, not timed
        start = time.perf_counter()
        records = evaluate_variants(points)
        seconds = time.perf_counter() - start
        failed = sum(r["error"] is not None for r in records)
        print(f"{model:10} {len(points)} variants ({failed} without an answer): {seconds:.2f} s")
    print(f"load average {os.getloadavg()[0]:.2f} after")


if __name__ == "__main__":
    main()
