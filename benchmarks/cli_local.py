"""What running a local computation in a child process costs the CLI.

    OPENBLAS_NUM_THREADS=1 .venv/bin/python benchmarks/cli_local.py

``blastrate rate`` and ``solve`` compute in a forked child (:func:`app.commands.local.run_local`)
so that Ctrl-C and ``--timeout`` can stop them.  Measured in the same run, warm (imports and
Numba caches loaded once before timing):

* the README's ``rate`` computation called directly, against the same through ``run_local``;
* a trivial job through ``run_local``: the fixed cost of fork + pipe + reap.

Bounded: 15 repetitions each; prints medians.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from typing import Any

from app.commands.local import run_local
from app.operations.whole_method import compute_bottleneck, resolve_inputs

REPEATS = 15


def median_s(run: Callable[[], Any]) -> float:
    times = []
    for _ in range(REPEATS):
        start = time.perf_counter()
        run()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def main() -> None:
    inputs = resolve_inputs(
        {"cpu_tasks": 2, "io_tasks": 1},
        {"profile": "sx280-2007"},
        {"file_size_bytes": 500_000_000, "propagation_delay_s": 0.1},
    ).to_dict()
    options = {"curve_points": 200}
    compute_bottleneck(inputs, options)  # warm: imports, Numba caches, compiled shapes

    direct = median_s(lambda: compute_bottleneck(inputs, options))
    child = median_s(
        lambda: run_local(
            lambda payload, _report: compute_bottleneck(*payload),
            (inputs, options),
            timeout=60,
            label="rate",
        )
    )
    empty = median_s(lambda: run_local(lambda payload, _report: payload, 0, timeout=60, label="x"))
    print(f"rate, in process        {direct * 1e3:8.1f} ms")
    print(f"rate, via run_local     {child * 1e3:8.1f} ms  ({child / direct:.2f}x)")
    print(f"empty job via run_local {empty * 1e3:8.1f} ms  (fork + pipe + reap)")


if __name__ == "__main__":
    main()
