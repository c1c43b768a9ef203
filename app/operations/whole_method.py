"""The paper's whole method as a service: normalise the inputs, then compute.

:func:`resolve_inputs` turns a workload, a host (a profile name plus overrides) and a
transfer into :class:`MethodInputs`, every value in SI units with the profile's values
filled in; its :meth:`MethodInputs.to_dict` is the ``inputs`` member of the answer and the
cache key.  :func:`compute_bottleneck` and :func:`compute_service_time` take that dict
and return the response body, so the same functions serve ``GET`` and ``POST
/bottleneck-rate``, ``POST /workloads/service-time``, the worker pool and the CLI's local
mode.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

import host as host_models
import transport
from app.schemas.problems import translated_errors
from host import HOST_PROFILES, HostProfile, Workload, end_system_state_count

if TYPE_CHECKING:
    from host.store import ProfileStore

__all__ = [
    "HOST_FIELDS",
    "MODELS",
    "MethodInputs",
    "compute_bottleneck",
    "compute_service_time",
    "queue_cells",
    "queue_work",
    "resolve_host",
    "resolve_inputs",
    "run_method",
    "state_count",
    "time_slice_work",
]

# The bottleneck search evaluates the loss at about 500 rates per pass and at most about
# 1,100 in all (transport.rate_search: 256 + curve points, then 7 per refined cell).
_RATES_PER_PASS = 512
_RATES_PER_SEARCH = 1_024

#: Host profile fields that a request may override.
HOST_FIELDS = (
    "mu_io_cpu",
    "mu_disk",
    "mu_net",
    "buffer_packets",
    "coalesce_packets",
    "line_rate_bps",
    "packet_payload_bytes",
)


#: The receiver models a rate answer can come from: the paper's (processor sharing, the
#: stationary loss) or the time-slice model of :mod:`transport.timeslice`.
MODELS = transport.RECEIVER_MODELS


@dataclass(frozen=True)
class MethodInputs:
    """Normalised inputs of the method (SI units, profile values filled in).

    ``time_slice`` holds the time-slice model's calibrated inputs (with ``model ==
    "timeslice"`` only).
    """

    workload: Workload
    host: HostProfile
    file_size_bytes: int | None = None
    propagation_delay_s: float | None = None
    nic_service: str = "exponential"
    model: str = transport.DEFAULT_RECEIVER_MODEL
    time_slice: transport.TimeSliceCosts | None = None

    def to_dict(self) -> dict[str, Any]:
        """The JSON form: ``workload``, ``host`` (with ``profile``), ``transfer``,
        ``nic_service``, ``model`` and, for the time-slice model, ``time_slice``."""
        host = self.host.to_dict()
        host = {"profile": host.pop("name"), **host}
        out: dict[str, Any] = {"workload": self.workload.to_dict(), "host": host}
        if self.file_size_bytes is not None:
            out["transfer"] = {
                "file_size_bytes": self.file_size_bytes,
                "propagation_delay_s": self.propagation_delay_s,
            }
            out["nic_service"] = self.nic_service
            out["model"] = self.model
            if self.time_slice is not None:
                out["time_slice"] = {
                    **self.time_slice.to_dict(),
                    "settle_s": transport.DEFAULT_SETTLE_S,
                }
        return out


def _default_store() -> ProfileStore:
    # The profile store brings SQLAlchemy (a quarter of a second): loaded when a profile
    # is looked up by name, not when this module is imported.
    from host.store import default_store

    return default_store()


def _default_entry() -> tuple[HostProfile, Mapping[str, Any] | None]:
    """This host's default profile and its provenance: read without SQLAlchemy when it is
    a built-in one (:func:`host.default_profile.built_in_default`, no provenance), else
    from the store."""
    from host.default_profile import built_in_default

    built_in = built_in_default()
    if built_in is not None:
        return built_in, None
    entry = _default_store().default_entry()
    return entry.profile, entry.provenance


def resolve_host(profile: str | HostProfile, overrides: Mapping[str, Any]) -> HostProfile:
    """The profile with the given (non-None) overrides applied and validated.

    ``profile`` is a profile already fetched, or a name looked up in the profile store
    (:func:`host.store.default_store`: built-ins first, then the stored ones).

    Raises
    ------
    WorkloadError
        ``field="profile"`` for an unknown name, or the field of an invalid override.
    host.ProfileStoreError
        When a stored name cannot be read from the database.
    """
    if isinstance(profile, HostProfile):
        base = profile
    elif isinstance(profile, str) and profile in HOST_PROFILES:
        base = HOST_PROFILES[profile]  # what the store answers first, without opening it
    else:
        base = _default_store().get(profile)
    changes = {k: v for k, v in overrides.items() if v is not None}
    return base.replace(**changes) if changes else base


def resolve_inputs(
    workload: Mapping[str, Any],
    host: Mapping[str, Any],
    transfer: Mapping[str, Any] | None = None,
    nic_service: str = "exponential",
    model: str = transport.DEFAULT_RECEIVER_MODEL,
    provenance: Mapping[str, Any] | None = None,
) -> MethodInputs:
    """Validate and normalise the inputs of the method.

    Parameters
    ----------
    workload : dict
        ``cpu_tasks``, ``io_tasks`` and optionally ``cores``, ``disks``.
    host : dict
        ``profile`` (a name, a :class:`HostProfile` already fetched, or None for this
        host's default, :meth:`host.store.ProfileStore.default_entry`) and optional
        overrides of :data:`HOST_FIELDS`.
    transfer : dict, optional
        ``file_size_bytes`` (bytes) and ``propagation_delay_s`` (s); omitted for the
        service time alone.
    nic_service : {"exponential", "phase-type"}
        The NIC's service-time model.
    model : {"paper", "timeslice"}
        The receiver's model (:data:`MODELS`); the time-slice model takes the
        exponential NIC service only.
    provenance : dict, optional
        The provenance stored with ``host["profile"]`` when that is a profile already
        fetched (for the time-slice model's calibrated inputs,
        :func:`transport.time_slice_costs`); a named profile's is read here.

    Raises
    ------
    WorkloadError, transport.TransportParameterError
        Naming the field at fault.
    """
    load = Workload(
        cpu_tasks=workload["cpu_tasks"],
        io_tasks=workload["io_tasks"],
        cores=workload.get("cores", 1),
        disks=workload.get("disks", 1),
    )
    named = host.get("profile")
    base: str | HostProfile
    if named is None:
        base, default_provenance = _default_entry()
    else:
        base, default_provenance = named, None
    profile = resolve_host(base, {k: host.get(k) for k in HOST_FIELDS})
    if transfer is None:
        return MethodInputs(load, profile)
    if nic_service not in ("exponential", "phase-type"):
        raise transport.TransportParameterError(
            "nic_service", f"must be 'exponential' or 'phase-type', got {nic_service!r}"
        )
    if model not in MODELS:
        raise transport.TransportParameterError(
            "model", f"must be one of {', '.join(MODELS)}, got {model!r}"
        )
    costs = None
    if model == "timeslice":
        if nic_service != "exponential":
            raise transport.TransportParameterError("nic_service", transport.TIME_SLICE_NIC_SERVICE)
        if named is None:
            provenance = default_provenance
        elif isinstance(named, str) and named in HOST_PROFILES:
            provenance = None  # a built-in carries no calibration: the store stays closed
        elif not isinstance(named, HostProfile):
            provenance = _default_store().entry(named).provenance
        costs = transport.time_slice_costs(provenance, profile)
    return MethodInputs(
        load,
        profile,
        int(transfer["file_size_bytes"]),
        float(transfer["propagation_delay_s"]),
        nic_service,
        model,
        costs,
    )


def state_count(inputs: Mapping[str, Any]) -> int:
    """Tangible states of the tagged-customer chain of a normalised workload."""
    w = inputs["workload"]
    workload = Workload(w["cpu_tasks"], w["io_tasks"], w["cores"], w["disks"])
    return int(end_system_state_count(workload)) + 1


def queue_cells(inputs: Mapping[str, Any], states: int, curve_points: int = 200) -> int:
    """Float cells one loss evaluation of the search holds (rates x levels x phases)."""
    phases = states if inputs.get("nic_service") == "phase-type" else 1
    rates = max(_RATES_PER_PASS, 256 + curve_points)
    return rates * (int(inputs["host"]["buffer_packets"]) + 1) * phases


def queue_work(inputs: Mapping[str, Any], states: int) -> float:
    """Rough work of the NIC queue over one bottleneck search (for pool routing)."""
    levels = int(inputs["host"]["buffer_packets"]) + 1
    if inputs.get("nic_service") == "phase-type":
        return float(
            _RATES_PER_SEARCH * levels * states * states * inputs["host"]["coalesce_packets"]
        )
    return float(_RATES_PER_SEARCH * levels)


def time_slice_work(inputs: Mapping[str, Any]) -> float:
    """Rough work of one time-slice search, ``K * (7 (N + 1))^2`` (0 for the paper's
    model): compared with :data:`transport.MAX_TIME_SLICE_WORK`, as a receiver does."""
    if inputs.get("model") != "timeslice":
        return 0.0
    host = inputs["host"]
    return float(transport.time_slice_work(host["buffer_packets"], host["coalesce_packets"]))


def _objects(inputs: Mapping[str, Any]) -> tuple[Workload, HostProfile]:
    w = inputs["workload"]
    host = dict(inputs["host"])
    name = host.pop("profile")
    workload = Workload(w["cpu_tasks"], w["io_tasks"], w["cores"], w["disks"])
    base = HOST_PROFILES.get(name)
    if base is not None and base.to_dict() == {"name": name, **host}:
        return workload, base
    return workload, HostProfile(name=name, **host)


def _quantiles(values: Mapping[float, float]) -> list[dict[str, float]]:
    return [{"level": float(k), "seconds": float(v)} for k, v in values.items()]


def _floats(values: Any) -> list[float]:
    return [float(x) for x in np.asarray(values, dtype=float)]


def compute_bottleneck(inputs: Mapping[str, Any], options: Mapping[str, Any]) -> dict[str, Any]:
    """The ``/bottleneck-rate`` answer for normalised inputs.

    Parameters
    ----------
    inputs : dict
        :meth:`MethodInputs.to_dict` output.
    options : dict
        ``curve_points`` (int), ``include_curve`` (bool), ``include_service_time``
        (bool), ``service_time_points`` (int).

    Raises
    ------
    transport.NoCompletingRateError
        When no sending rate lets the transfer complete.
    """
    workload, host = _objects(inputs)
    if inputs.get("model") == "timeslice":
        return _time_slice_answer(workload, host, inputs, options)
    return _paper_answer(workload, host, inputs, options)


def _paper_answer(
    workload: Workload, host: HostProfile, inputs: Mapping[str, Any], options: Mapping[str, Any]
) -> dict[str, Any]:
    transfer = inputs["transfer"]
    arguments: dict[str, Any] = {
        "file_size_bytes": transfer["file_size_bytes"],
        "propagation_delay_s": transfer["propagation_delay_s"],
        "curve_points": int(options.get("curve_points") or 200),
    }
    service = None
    if inputs["nic_service"] == "exponential" and not options.get("include_service_time"):
        # Only mu is needed: the same numbers without the distribution (nor, in a
        # one-shot CLI process, the SRN engine and the compiled kernels).
        mu, best = transport.paper_bottleneck_rate(workload, host, **arguments)
    else:
        result = transport.workload_bottleneck_rate(
            workload, host, nic_service=inputs["nic_service"], **arguments
        )
        service, mu, best = result.service, result.service.rate_per_s, result.bottleneck
    body: dict[str, Any] = {
        "effective_bottleneck_rate_bps": best.rate_bps,
        "transfer_time_s": best.transfer_time_s,
        "loss_probability": best.loss,
        "interrupt_service_rate_per_s": mu,
        "limited_by": best.limited_by,
        "rounds": best.rounds,
        "inputs": dict(inputs),
    }
    if options.get("include_curve"):
        body["curve"] = best.curve.to_dict()
    if service is not None and options.get("include_service_time"):
        body["service_time"] = _service_time_summary(service, options)
    return body


def _time_slice_answer(
    workload: Workload, host: HostProfile, inputs: Mapping[str, Any], options: Mapping[str, Any]
) -> dict[str, Any]:
    transfer = inputs["transfer"]
    costs = inputs["time_slice"]

    arguments: dict[str, Any] = {
        "file_size_bytes": transfer["file_size_bytes"],
        "propagation_delay_s": transfer["propagation_delay_s"],
        **costs,  # TimeSliceCosts.to_dict() and settle_s: keywords of the model
    }
    curve = None
    if options.get("include_curve"):
        result, curve = transport.time_slice_with_curve(
            workload, host, curve_points=options.get("curve_points"), **arguments
        )
    else:
        result = transport.time_slice_bottleneck_rate(workload, host, **arguments)
    body: dict[str, Any] = {
        "effective_bottleneck_rate_bps": result.rate_bps,
        "transfer_time_s": result.transfer_time_s,
        # The loss that decides the time-slice model's answer: the first blast's.
        "loss_probability": result.first_round_loss,
        # The receiver's wake-up rate while it holds the CPU (stage 1 without the C
        # CPU-bound tasks, which the scheduler's slices stand for).
        "interrupt_service_rate_per_s": result.service_rate_per_s,
        "limited_by": result.limited_by,
        "rounds": result.rounds,
        "inputs": dict(inputs),
    }
    if curve is not None:
        body["curve"] = curve.to_dict()
    if options.get("include_service_time"):
        # The workload's interrupt service time as the paper defines it (all C tasks
        # shared), for comparison; the model above used the receiver's own rate.
        service = host_models.interrupt_service_time(workload, host)
        body["service_time"] = _service_time_summary(service, options)
    return body


def _service_time_summary(service: Any, options: Mapping[str, Any]) -> dict[str, Any]:
    """The ``service_time`` member from an interrupt service time (stage 1 of the paper)."""
    times = np.asarray(service.times_s, dtype=float)
    cdf = np.asarray(service.cdf, dtype=float)
    points = int(options.get("service_time_points", len(times)))
    if points != len(times):
        times = np.linspace(0.0, float(times[-1]), points)
        cdf = np.asarray(service.cdf_at(times), dtype=float)
    return {
        "mean_s": service.mean_s,
        "variance_s2": service.variance_s2,
        "rate_per_s": service.rate_per_s,
        "quantiles": _quantiles(service.quantiles_s),
        "times_s": times.tolist(),
        "cdf": _floats(cdf),
    }


def compute_service_time(inputs: Mapping[str, Any], options: Mapping[str, Any]) -> dict[str, Any]:
    """The ``/workloads/service-time`` answer for normalised inputs (workload and host).

    Parameters
    ----------
    inputs : dict
        :meth:`MethodInputs.to_dict` output (no transfer).
    options : dict
        ``times_s`` (list or None), ``grid_points`` (int), ``quantiles`` (list),
        ``include_phase_type`` (bool).
    """
    workload, host = _objects(inputs)
    service = host_models.interrupt_service_time(
        workload,
        host,
        times=options.get("times_s"),
        quantiles=tuple(options.get("quantiles", (0.5, 0.9, 0.99))),
        grid_points=int(options.get("grid_points", 101)),
    )
    full = service.to_dict(include_phase_type=bool(options.get("include_phase_type")))
    return {
        "mean_s": service.mean_s,
        "variance_s2": service.variance_s2,
        "std_s": service.std_s,
        "rate_per_s": service.rate_per_s,
        "quantiles": _quantiles(service.quantiles_s),
        "times_s": np.asarray(service.times_s, dtype=float).tolist(),
        "cdf": _floats(service.cdf),
        "occupancy": full["occupancy"],
        "n_states": service.n_states,
        "n_transient_states": service.n_transient_states,
        "method": service.method,
        "phase_type": full.get("phase_type"),
        "inputs": dict(inputs),
    }


_COMPUTE = {"bottleneck": compute_bottleneck, "service-time": compute_service_time}


def run_method(payload: Mapping[str, Any]) -> dict[str, Any]:
    """Run ``payload["function"]`` on its inputs and options, with library errors named
    as the request named the fields (``payload["aliases"]``, ``payload["prefix"]``).

    This is also the worker pool's ``method`` job.
    """
    with translated_errors(payload["aliases"], payload["prefix"]):
        return _COMPUTE[payload["function"]](payload["inputs"], payload["options"])
