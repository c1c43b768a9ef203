"""Capacity planning for the service and the CLI: human units in, planning calls, limits.

The library (:mod:`planning`) works in SI units and knows nothing of settings; this module
reads the user's text with the same unit parsers as ``GET /bottleneck-rate``
(:mod:`app.schemas.units`), enforces the service's limits by name and turns
:class:`planning.PlanningError` into problem+json.
"""

from __future__ import annotations

import math
import threading
from collections import OrderedDict
from collections.abc import Callable, Mapping
from typing import Any, get_args

import transport
from app.schemas.limits import MAX_BYTES, MAX_DELAY_S
from app.schemas.problems import FieldProblem, ProblemError
from app.schemas.units import (
    QuantityError,
    parse_bitrate,
    parse_duration,
    parse_number,
    parse_size,
)
from host import (
    DEFAULT_PROFILE,
    HOST_PROFILES,
    Workload,
    WorkloadError,
    end_system_state_count,
)
from planning import INPUT_FIELDS, REQUIRED_INPUTS, PlanningError, axis_values

__all__ = [
    "PlotCache",
    "check_point_limits",
    "parse_inputs",
    "planning_problem",
    "time_slice_points_work",
]


_PARSERS: dict[str, Callable[[str, str], float]] = {
    "int": parse_number,
    "float": parse_number,
    "size": lambda text, field: float(parse_size(text, field)),
    "bitrate": parse_bitrate,
    "duration": parse_duration,
}
# The transfer's bounds of GET /bottleneck-rate (app.schemas.inputs.TransferRequest), so
# that a sweep, a what-if or a plot refuses what a single answer refuses: one set of limits.
_TRANSFER_BOUNDS: dict[str, tuple[float, float, str]] = {
    "file_size": (1, MAX_BYTES, "bytes"),
    "propagation_delay": (0, MAX_DELAY_S, "s"),
}


def parse_inputs(
    specs: Mapping[str, Any], *, max_points: int, single: bool = False
) -> tuple[dict[str, Any], dict[str, list[Any]]]:
    """Split inputs given as text into fixed values and sweep axes (SI units).

    Parameters
    ----------
    specs : mapping
        Input name (as ``GET /bottleneck-rate`` names it) -> ``"0..20"``, ``"1,2,4"``,
        ``"500MB"``, a number or a list.  None values are skipped.
    max_points : int
        Bound on the values of one axis (``max_points`` is named when it is reached).
    single : bool, default False
        Every input must have exactly one value (what-if, the single-point plots).

    Returns
    -------
    base : dict
        Inputs with one value.
    axes : dict
        Inputs with several values, in the order given.

    Raises
    ------
    PlanningError
        Naming the input at fault; a required input (:data:`planning.REQUIRED_INPUTS`)
        given neither a value nor an axis is one.
    """
    base: dict[str, Any] = {}
    axes: dict[str, list[Any]] = {}
    for name, spec in specs.items():
        if spec is None:
            continue
        kind = INPUT_FIELDS.get(name)
        if kind is None:
            raise PlanningError(name, f"not an input of GET /bottleneck-rate: {name!r}")
        if kind == "name":
            values = axis_values(name, spec, str, max_values=max_points)
            if name == "profile":
                _built_in_profiles_only(values)
            # A name that no point can take is bad input, not a sweep of failed records.
            allowed = _CHOICES.get(name, ())
            for value in values:
                if allowed and value not in allowed:
                    raise PlanningError(
                        name, f"must be one of {', '.join(allowed)}, got {value[:40]!r}"
                    )
        else:
            values = axis_values(
                name,
                spec,
                _PARSERS[kind],
                integer=kind in ("int", "size"),
                max_values=max_points,
            )
        if name in _TRANSFER_BOUNDS:
            _check_transfer_bounds(name, values)
        if len(values) == 1:
            base[name] = values[0]
        elif single:
            raise PlanningError(name, f"one value expected here, got {len(values)}")
        else:
            axes[name] = values
    # Missing for every point: bad input, not a sweep of failed records.
    for name in REQUIRED_INPUTS:
        if name not in base and name not in axes:
            raise PlanningError(name, "required")
    return base, axes


def _check_transfer_bounds(name: str, values: list[Any]) -> None:
    low, high, unit = _TRANSFER_BOUNDS[name]
    for value in values:
        # The delay must be above 0, the size at least 1 byte (TransferRequest's gt / ge).
        if not (value > low if name == "propagation_delay" else value >= low) or value > high:
            side = f"above {low:g}" if name == "propagation_delay" else f"at least {low:g}"
            raise PlanningError(
                name, f"must be {side} and at most {high:g} {unit}, got {float(value):.4g}"
            )


def _built_in_profiles_only(values: list[Any]) -> None:
    # The planning library solves many points in other processes (or on a Dask cluster)
    # from plain data: it knows the built-in profiles, not this host's database.  A stored
    # name was a failed point per row and exit 0; it is refused here, once, with the way on.
    unknown = [value for value in values if value not in HOST_PROFILES]
    if unknown:
        raise PlanningError(
            "profile",
            f"unknown host profile {str(unknown[0])[:64]!r} here: sweeps, what-if and the "
            f"plots take built-in profiles only ({', '.join(sorted(HOST_PROFILES))}); "
            "give a stored profile's values as overrides (`blastrate profiles show NAME`)",
        )


#: Inputs that take one of a few names, and those names (as GET /bottleneck-rate takes them).
_CHOICES: dict[str, tuple[str, ...]] = {
    "model": transport.RECEIVER_MODELS,
    "nic_service": get_args(transport.NicService),
}


def check_point_limits(
    base: Mapping[str, Any],
    axes: Mapping[str, list[Any]],
    *,
    max_buffer_packets: int,
    max_states: int,
    max_time_slice_work: float | None = None,
) -> None:
    """Refuse, before any solve, inputs whose largest point costs more than allowed.

    The cost of a point grows with the NIC ring K (the queue's levels) and with the
    end-system chain (I/O tasks and disks), so the largest values of each are checked.
    With ``max_time_slice_work``, the points the time-slice model solves are bounded
    together as well (:func:`time_slice_points_work`).

    Raises
    ------
    PlanningError
        ``limit="planning_max_buffer_packets"``, ``"max_states"`` or
        ``"planning_max_time_slice_work"``.
    """
    if max_time_slice_work is not None:
        work = time_slice_points_work(base, axes)
        if work > max_time_slice_work:
            raise PlanningError(
                "points",
                f"{product_size(axes)} points of the time-slice model need about "
                f"{work:.3g} operations, more than planning_max_time_slice_work="
                f"{max_time_slice_work:g}; fewer points, a smaller buffer_packets or "
                "coalesce_packets, or model=paper",
                limit="planning_max_time_slice_work",
                maximum=max_time_slice_work,
                reached=work,
            )

    def largest(name: str, default: int) -> int:
        values = axes.get(name) or [base.get(name, default)]
        return max(int(v) for v in values if v is not None) if values else default

    k = largest("buffer_packets", 0)
    if k > max_buffer_packets:
        raise PlanningError(
            "buffer_packets",
            f"{k} packets is above planning_max_buffer_packets={max_buffer_packets}",
            limit="planning_max_buffer_packets",
            maximum=max_buffer_packets,
            reached=k,
        )
    try:
        workload = Workload(
            cpu_tasks=largest("cpu_tasks", 0),
            io_tasks=largest("io_tasks", 0),
            cores=largest("cores", 1),
            disks=largest("disks", 1),
        )
    except (WorkloadError, TypeError, ValueError):
        return  # the point itself reports the field; nothing large to guard against
    states = int(end_system_state_count(workload))
    if states > max_states:
        raise PlanningError(
            "disks" if largest("disks", 1) > 1 else "io_tasks",
            f"the largest workload's chain has {states} states; max_states={max_states}",
            limit="max_states",
            maximum=max_states,
            reached=states,
        )


#: The time-slice model's cost of a point beyond its chain's (``K (7 (N + 1))^2``), in
#: the same units: a search's fixed work.  On this 2-core machine a point took 42 ms at
#: K = 64 (4.5e5 units) and 0.71 s at K = 1,736 (4.5e6), about 0.1-0.16 us a unit
#: (``benchmarks/timeslice_answer.py``).
TIME_SLICE_POINT_WORK = 3.0e5


def time_slice_points_work(base: Mapping[str, Any], axes: Mapping[str, list[Any]]) -> float:
    """Rough work of the time-slice model over every point of a sweep or plot: the
    points it solves times the largest one's chain (:func:`transport.time_slice_work`)
    plus :data:`TIME_SLICE_POINT_WORK`; 0 when no point names it (nor defaults to it)."""
    models = axes.get("model") or [base.get("model")]
    share = sum(1 for m in models if (m or transport.DEFAULT_RECEIVER_MODEL) == "timeslice")
    if share == 0:
        return 0.0

    def values(name: str) -> list[Any]:
        return [v for v in axes.get(name) or [base.get(name)] if v]

    names = values("profile") or [DEFAULT_PROFILE]
    profiles = [HOST_PROFILES[n] for n in names if n in HOST_PROFILES]
    # What the points leave unset comes from their profiles.
    ks = [int(k) for k in values("buffer_packets")] or [p.buffer_packets for p in profiles]
    ns = [int(n) for n in values("coalesce_packets")] or [p.coalesce_packets for p in profiles]
    if not ks or not ns:
        return 0.0  # an unknown profile: the point itself reports it
    points = product_size(axes) * share / len(models)
    return points * (transport.time_slice_work(max(ks), max(ns)) + TIME_SLICE_POINT_WORK)


def planning_problem(
    exc: PlanningError | QuantityError, prefix: str, limits: Mapping[str, str] | None = None
) -> ProblemError:
    """The problem+json for a planning error; ``limits`` renames library limits to
    setting names (``{"max_points": "sweep_max_points"}``)."""
    if isinstance(exc, QuantityError):
        return ProblemError(
            "invalid-parameter", str(exc), [FieldProblem(prefix + exc.field, exc.reason)]
        )
    limit = exc.limit and (limits or {}).get(exc.limit, exc.limit)
    # "points" is the product of all the inputs, not one of them: the inputs object.
    field = prefix.rstrip(".") if exc.field == "points" else prefix + exc.field
    if exc.field == "loss":
        return ProblemError("never-completes", str(exc), [FieldProblem(field, exc.reason)])
    detail = f"{field}: {exc.reason}"
    if limit is not None and exc.limit is not None:
        detail = detail.replace(exc.limit + "=", limit + "=")
    entry = FieldProblem(
        field,
        detail.split(": ", 1)[-1],
        limit,
        exc.maximum if limit else None,
        exc.reached if limit else None,
    )
    return ProblemError("limit-exceeded" if limit else "invalid-parameter", detail, [entry])


class PlotCache:
    """A small, thread-safe LRU of rendered plots: key -> (bytes, media type)."""

    def __init__(self, entries: int) -> None:
        self.entries = entries
        self._items: OrderedDict[str, tuple[bytes, str]] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, key: str) -> tuple[bytes, str] | None:
        """The cached plot, or None (marks it as recently used)."""
        with self._lock:
            item = self._items.get(key)
            if item is not None:
                self._items.move_to_end(key)
            return item

    def put(self, key: str, value: tuple[bytes, str]) -> None:
        """Keep a plot, dropping the least recently used beyond ``entries``."""
        if self.entries <= 0:
            return
        with self._lock:
            self._items[key] = value
            self._items.move_to_end(key)
            while len(self._items) > self.entries:
                self._items.popitem(last=False)


def product_size(axes: Mapping[str, list[Any]]) -> int:
    """Points of the product of ``axes``."""
    return math.prod(len(v) for v in axes.values())
