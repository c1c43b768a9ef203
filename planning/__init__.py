"""Capacity planning on top of the method: sweeps, what-if rankings and plots.

Sweeps evaluate the effective bottleneck rate over the product of ranges of any inputs
of ``GET /bottleneck-rate``, on a local process pool or a Dask cluster::

    from planning import axis_values, run_sweep

    result = run_sweep(
        {"cpu_tasks": 2, "file_size": 500_000_000, "propagation_delay": 0.1},
        {"io_tasks": axis_values("io_tasks", "0..20", integer=True), "cores": [1, 2, 4]},
    )
    result.records[0]["effective_bottleneck_rate_bps"]

:func:`what_if` ranks the single upgrades of a host by the transfer time they save;
:mod:`planning.plots` draws the paper's figures (Agg backend, SVG or PNG).
"""

from .axes import axis_values
from .errors import PlanningError
from .points import (
    INPUT_FIELDS,
    REQUIRED_INPUTS,
    RESULT_FIELDS,
    evaluate_point,
    resolve_point,
    solve_point,
)
from .sweep import DEFAULT_MAX_POINTS, SweepResult, plan_batches, run_sweep, sweep_points

__all__ = [
    "DEFAULT_MAX_POINTS",
    "INPUT_FIELDS",
    "REQUIRED_INPUTS",
    "RESULT_FIELDS",
    "PlanningError",
    "SweepResult",
    "axis_values",
    "evaluate_point",
    "plan_batches",
    "resolve_point",
    "run_sweep",
    "solve_point",
    "sweep_points",
]
