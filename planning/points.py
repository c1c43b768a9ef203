"""One point of a plan: the inputs of ``GET /bottleneck-rate`` in, the headline results out.

A point is a flat mapping named exactly as ``GET /bottleneck-rate`` names its query
parameters, with values in SI units (``file_size`` in bytes, ``propagation_delay`` in s,
``line_rate`` in bit/s, ``packet_payload`` in bytes), so a sweep's record can be pasted
back into a query string.  :func:`resolve_point` fills in the defaults and the profile's
values and validates everything without solving; :func:`evaluate_point` solves.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from typing import Any, NamedTuple, TypeVar

import queues
import transport
from host import DEFAULT_PROFILE, HostProfile, Workload, WorkloadError, host_profile

from .errors import PlanningError

T = TypeVar("T")

__all__ = [
    "INPUT_FIELDS",
    "REQUIRED_INPUTS",
    "RESULT_FIELDS",
    "PointCurve",
    "evaluate_point",
    "evaluate_points",
    "input_name",
    "point_objects",
    "resolve_point",
    "solve_point",
]

#: The inputs every point needs (the rest have defaults).
REQUIRED_INPUTS = ("cpu_tasks", "io_tasks", "file_size", "propagation_delay")

#: Every input of a point: its name in ``GET /bottleneck-rate`` -> its kind
#: (``int``, ``float``, ``size`` in bytes, ``bitrate`` in bit/s, ``duration`` in s,
#: ``name``).
INPUT_FIELDS: dict[str, str] = {
    "cpu_tasks": "int",
    "io_tasks": "int",
    "cores": "int",
    "disks": "int",
    "profile": "name",
    "mu_io_cpu": "float",
    "mu_disk": "float",
    "mu_net": "float",
    "buffer_packets": "int",
    "coalesce_packets": "int",
    "line_rate": "bitrate",
    "packet_payload": "size",
    "file_size": "size",
    "propagation_delay": "duration",
    "nic_service": "name",
    "model": "name",
}

#: The results of a point, beside its inputs: bit/s, s, probability, 1/s, text, count.
RESULT_FIELDS = (
    "effective_bottleneck_rate_bps",
    "transfer_time_s",
    "loss_probability",
    "interrupt_service_rate_per_s",
    "limited_by",
    "rounds",
    "error",
)

# Profile field -> point input, where they differ.
_PROFILE_TO_INPUT = {
    "line_rate_bps": "line_rate",
    "packet_payload_bytes": "packet_payload",
}
_INPUT_TO_PROFILE = {v: k for k, v in _PROFILE_TO_INPUT.items()}
_HOST_INPUTS = (
    "mu_io_cpu",
    "mu_disk",
    "mu_net",
    "buffer_packets",
    "coalesce_packets",
    "line_rate",
    "packet_payload",
)
# Library parameter names -> point input names, for error messages.
_LIBRARY_TO_INPUT = {
    **_PROFILE_TO_INPUT,
    "tasks": "cpu_tasks",
    "name": "profile",
    "file_size_bytes": "file_size",
    "propagation_delay_s": "propagation_delay",
    "capacity": "buffer_packets",
    "batch": "coalesce_packets",
    "service_rate": "mu_net",
}


def input_name(library_field: str) -> str:
    """The point input that a library's parameter name stands for."""
    return _LIBRARY_TO_INPUT.get(library_field, library_field)


def _reason(exc: Exception, field: str) -> str:
    """The message of ``exc`` without a leading ``"<field>: "`` (and only that: a colon
    later in the reason, as in "known profiles: a, b", belongs to it)."""
    text = str(exc)
    return text[len(field) + 2 :] if text.startswith(field + ": ") else text


def _translate(exc: Exception) -> PlanningError:
    if isinstance(exc, WorkloadError):
        field = exc.field or "inputs"
        limit = getattr(exc, "limit", None)
        return PlanningError(
            input_name(field),
            _reason(exc, field),
            limit=limit,
            maximum=getattr(exc, "maximum", None),
            reached=getattr(exc, "reached", None),
        )
    field = getattr(exc, "parameter", None) or "inputs"
    return PlanningError(input_name(field), _reason(exc, field))


def resolve_point(point: Mapping[str, Any]) -> dict[str, Any]:
    """Every input of a point, defaults and the profile's values filled in, validated.

    Parameters
    ----------
    point : mapping
        Inputs named as :data:`INPUT_FIELDS` in SI units.  ``cpu_tasks``, ``io_tasks``,
        ``file_size`` (bytes) and ``propagation_delay`` (s) are required; ``profile``
        defaults to ``sx280-2007``, ``cores`` and ``disks`` to 1, ``nic_service`` to
        ``exponential``, ``model`` to :data:`transport.DEFAULT_RECEIVER_MODEL`, the host
        inputs to the profile's values.  ``model="timeslice"`` takes the exponential NIC
        service only, the kernel's default slice and no kernel or wake-up cost (the
        built-in profiles carry no calibration), and a K and N within
        :data:`transport.MAX_TIME_SLICE_WORK`.

    Returns
    -------
    dict
        All of :data:`INPUT_FIELDS`, in that order; integers as ``int``.

    Raises
    ------
    PlanningError
        Naming the input at fault (unknown name, missing value, out of range).
    """
    unknown = sorted(set(point) - set(INPUT_FIELDS))
    if unknown:
        raise PlanningError(unknown[0], f"not an input of GET /bottleneck-rate: {unknown[0]!r}")
    for name in REQUIRED_INPUTS:
        if point.get(name) is None:
            raise PlanningError(name, "required")
    try:
        workload = Workload(
            cpu_tasks=point["cpu_tasks"],
            io_tasks=point["io_tasks"],
            cores=point.get("cores") or 1,
            disks=point.get("disks") or 1,
        )
        base = host_profile(point.get("profile") or DEFAULT_PROFILE)
        changes = {
            _INPUT_TO_PROFILE.get(name, name): point[name]
            for name in _HOST_INPUTS
            if point.get(name) is not None
        }
        profile = base.replace(**changes) if changes else base
        size = transport.total_size_bytes(
            point["file_size"], packet_payload_bytes=profile.packet_payload_bytes
        )
        del size  # validated only: the solve recomputes S
        delay = float(point["propagation_delay"])
        if not (math.isfinite(delay) and delay > 0):
            raise PlanningError("propagation_delay", f"must be finite and > 0 s, got {delay!r}")
    except PlanningError:
        raise
    except (WorkloadError, transport.TransportParameterError, queues.QueueParameterError) as exc:
        raise _translate(exc) from None
    except (TypeError, ValueError) as exc:
        raise PlanningError("inputs", str(exc)) from None
    nic_service = point.get("nic_service") or "exponential"
    if nic_service not in ("exponential", "phase-type"):
        raise PlanningError(
            "nic_service", f"must be 'exponential' or 'phase-type', got {nic_service!r}"
        )
    model = point.get("model")
    if model is None:
        model = transport.DEFAULT_RECEIVER_MODEL
    if model not in transport.RECEIVER_MODELS:
        raise PlanningError(
            "model", f"must be one of {', '.join(transport.RECEIVER_MODELS)}, got {model!r}"
        )
    if model == "timeslice":
        _check_time_slice(profile, nic_service)
    out: dict[str, Any] = {**workload.to_dict(), "profile": profile.name}
    host = profile.to_dict()
    for name in _HOST_INPUTS:
        out[name] = host[_INPUT_TO_PROFILE.get(name, name)]
    out["file_size"] = int(point["file_size"])
    out["propagation_delay"] = delay
    out["nic_service"] = nic_service
    out["model"] = model
    return out


def _check_time_slice(profile: HostProfile, nic_service: str) -> None:
    """Refuse what the time-slice model does not take, or would take seconds over."""
    if nic_service != "exponential":
        raise PlanningError("nic_service", transport.TIME_SLICE_NIC_SERVICE)
    k, n = profile.buffer_packets, profile.coalesce_packets
    work = transport.time_slice_work(k, n)
    if work > transport.MAX_TIME_SLICE_WORK:
        raise PlanningError(
            "buffer_packets",
            f"K={k} with N={n} needs about {work:.3g} operations per rate in the time-slice "
            f"model, more than {transport.MAX_TIME_SLICE_WORK:g}; use a smaller "
            "buffer_packets or coalesce_packets, or model=paper",
            limit="max_advice_work",
            maximum=transport.MAX_TIME_SLICE_WORK,
            reached=work,
        )


def point_objects(resolved: Mapping[str, Any]) -> tuple[Workload, HostProfile]:
    """The workload and host profile of a resolved point (see :func:`resolve_point`)."""
    workload = Workload(
        resolved["cpu_tasks"], resolved["io_tasks"], resolved["cores"], resolved["disks"]
    )
    base = host_profile(resolved["profile"])
    changes = {
        _INPUT_TO_PROFILE.get(name, name): resolved[name]
        for name in _HOST_INPUTS
        if resolved[name] != getattr(base, _INPUT_TO_PROFILE.get(name, name))
    }
    return workload, base.replace(**changes) if changes else base


def solve_point(
    resolved: Mapping[str, Any], *, curve_points: int = 200
) -> transport.PipelineResult:
    """The whole method for one resolved point (see :func:`resolve_point`).

    Parameters
    ----------
    resolved : mapping
        The output of :func:`resolve_point`.
    curve_points : int, default 200
        Points of the curve T(B_send) kept for plotting.

    Returns
    -------
    transport.PipelineResult
        The effective bottleneck rate (bit/s) and every intermediate result.

    Raises
    ------
    PlanningError
        Naming the input at fault; ``field="loss"`` when no rate lets the transfer finish;
        ``field="model"`` for ``model="timeslice"``, whose answer has no
        :class:`transport.PipelineResult` (:func:`evaluate_point` takes both models).
    """
    if resolved.get("model", transport.DEFAULT_RECEIVER_MODEL) != "paper":
        raise PlanningError(
            "model",
            "the whole method's intermediate results are the paper's model's (model=paper); "
            "point_curve and evaluate_point take both models",
        )
    workload, profile = point_objects(resolved)
    return _translated(
        lambda: transport.workload_bottleneck_rate(
            workload,
            profile,
            file_size_bytes=resolved["file_size"],
            propagation_delay_s=resolved["propagation_delay"],
            nic_service=resolved["nic_service"],
            curve_points=curve_points,
        )
    )


class PointCurve(NamedTuple):
    """T(B_send) and the loss that decides it at a point, for either receiver model.

    Attributes
    ----------
    curve : transport.TransferCurve
        Transfer time (s) and loss at each sending rate (bit/s) of an even grid.
    rate_bps : float
        The effective bottleneck rate (bit/s).
    transfer_time_s : float
        T at that rate (s).
    loss : float
        The loss at that rate: the NIC queue's stationary loss (``paper``) or the first
        blast's (``timeslice``).
    line_rate_bps : float
        The line rate (bit/s): the right end of the curve.
    model : str
        The receiver model that drew it.
    """

    curve: transport.TransferCurve
    rate_bps: float
    transfer_time_s: float
    loss: float
    line_rate_bps: float
    model: str


def point_curve(resolved: Mapping[str, Any], *, curve_points: int | None = None) -> PointCurve:
    """The curve T(B_send) of a resolved point (see :func:`resolve_point`) in its model,
    with the answer that ``GET /bottleneck-rate?include_curve=true`` gives beside it.

    ``model="timeslice"`` uses the built-in profiles' costs (the kernel's default slice,
    no kernel or wake-up cost) and the receiver's default settle time, as
    :func:`evaluate_point` does.  ``curve_points``: default 200, or for the time-slice
    model as many as its work bound allows where that is fewer
    (:func:`transport.time_slice_curve_points`).

    Raises
    ------
    PlanningError
        Naming the input at fault; ``field="loss"`` when no rate lets the transfer finish.
    """
    if resolved["model"] != "timeslice":
        best = solve_point(resolved, curve_points=curve_points or 200).bottleneck
        return PointCurve(
            best.curve, best.rate_bps, best.transfer_time_s, best.loss, best.line_rate_bps, "paper"
        )
    workload, profile, keywords = _time_slice_inputs(resolved)
    result, curve = _translated(
        lambda: transport.time_slice_with_curve(
            workload, profile, curve_points=curve_points, **keywords
        )
    )
    return PointCurve(
        curve,
        result.rate_bps,
        result.transfer_time_s,
        result.first_round_loss,
        profile.line_rate_bps,
        "timeslice",
    )


def _time_slice_inputs(
    resolved: Mapping[str, Any],
) -> tuple[Workload, HostProfile, dict[str, Any]]:
    """The workload, profile and keywords of the time-slice model at a resolved point: a
    built-in profile's costs (the kernel's default slice, no kernel or wake-up cost) and
    the receiver's default settle time, as ``/bottleneck-rate?model=timeslice`` takes
    them for a built-in profile."""
    workload, profile = point_objects(resolved)
    keywords = {
        "file_size_bytes": resolved["file_size"],
        "propagation_delay_s": resolved["propagation_delay"],
        "settle_s": transport.DEFAULT_SETTLE_S,
        **transport.time_slice_costs(None, profile).to_dict(),
    }
    return workload, profile, keywords


def _paper_rate(resolved: Mapping[str, Any]) -> transport.PaperRate:
    """:func:`transport.paper_bottleneck_rate` at a resolved point (exponential NIC)."""
    workload, profile = point_objects(resolved)
    return _translated(
        lambda: transport.paper_bottleneck_rate(
            workload,
            profile,
            file_size_bytes=resolved["file_size"],
            propagation_delay_s=resolved["propagation_delay"],
        )
    )


def _translated(call: Callable[[], T]) -> T:
    """``call()``, with the libraries' errors as :class:`PlanningError` naming the input."""
    try:
        return call()
    except (WorkloadError, transport.TransportParameterError, queues.QueueParameterError) as exc:
        raise _translate(exc) from None


def evaluate_point(point: Mapping[str, Any]) -> dict[str, Any]:
    """One sweep record: the point's inputs and its headline results.

    Parameters
    ----------
    point : mapping
        Inputs named as :data:`INPUT_FIELDS`, SI units (see :func:`resolve_point`).

    Returns
    -------
    dict
        Every input (resolved) followed by :data:`RESULT_FIELDS`:
        ``effective_bottleneck_rate_bps`` (bit/s), ``transfer_time_s`` (s),
        ``loss_probability``, ``interrupt_service_rate_per_s`` (1/s), ``limited_by``,
        ``rounds`` and ``error`` (None, or ``"field: reason"`` when this point has no
        answer; the results are then None).

    Examples
    --------
    >>> r = evaluate_point(
    ...     {"cpu_tasks": 1, "io_tasks": 0, "file_size": 10**8, "propagation_delay": 0.01,
    ...      "model": "paper"}
    ... )
    >>> r["interrupt_service_rate_per_s"]  # SPEC section 2 check: mu_net / 2
    20800.0
    """
    try:
        resolved = resolve_point(point)
    except PlanningError as exc:
        record = {name: point.get(name) for name in INPUT_FIELDS}
        return {**record, **dict.fromkeys(RESULT_FIELDS), "error": str(exc)}
    if resolved["model"] == "timeslice":
        return {**resolved, **_time_slice_results(resolved)}
    try:
        if resolved["nic_service"] == "exponential":
            # mu alone: the same numbers as solve_point's, without the distribution.
            mu, best = _paper_rate(resolved)
        else:
            result = solve_point(resolved)
            mu, best = result.service.rate_per_s, result.bottleneck
    except PlanningError as exc:
        return {**resolved, **dict.fromkeys(RESULT_FIELDS), "error": str(exc)}
    return {
        **resolved,
        "effective_bottleneck_rate_bps": best.rate_bps,
        "transfer_time_s": best.transfer_time_s,
        "loss_probability": best.loss,
        "interrupt_service_rate_per_s": mu,
        "limited_by": best.limited_by,
        "rounds": best.rounds,
        "error": None,
    }


def _time_slice_results(resolved: Mapping[str, Any]) -> dict[str, Any]:
    """:data:`RESULT_FIELDS` of the time-slice model at a resolved point, as
    ``/bottleneck-rate?model=timeslice`` answers them for a built-in profile: the loss is the
    first blast's, the service rate the receiver's wake-up rate while it holds the CPU."""
    workload, profile, keywords = _time_slice_inputs(resolved)
    try:
        result = transport.time_slice_bottleneck_rate(workload, profile, **keywords)
    except (WorkloadError, transport.TransportParameterError, queues.QueueParameterError) as exc:
        return {**dict.fromkeys(RESULT_FIELDS), "error": str(_translate(exc))}
    return {
        "effective_bottleneck_rate_bps": result.rate_bps,
        "transfer_time_s": result.transfer_time_s,
        "loss_probability": result.first_round_loss,
        "interrupt_service_rate_per_s": result.service_rate_per_s,
        "limited_by": result.limited_by,
        "rounds": result.rounds,
        "error": None,
    }


#: A batch of at least this many points runs on the compiled kernels
#: (:func:`transport.load_kernels`); smaller ones, as a one-shot command, on NumPy.
COMPILED_BATCH_POINTS = 64


def evaluate_points(points: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """:func:`evaluate_point` on each point, in order: the unit of work of a sweep task.

    Points that share (I, d) reuse the compiled nets cached in the worker, so a batch
    sorted by (I, d) pays each compilation once.

    Parameters
    ----------
    points : list of mapping
        Inputs named as :data:`INPUT_FIELDS`, SI units.

    Returns
    -------
    list of dict
        One record per point, see :func:`evaluate_point`.
    """
    if len(points) >= COMPILED_BATCH_POINTS:
        # Loading the compiled kernels (about half a second, once per process) pays for
        # itself after a few hundred points (0.3 ms a point instead of about 2 ms).
        transport.load_kernels()
    return [evaluate_point(p) for p in points]
