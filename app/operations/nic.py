"""The NIC queue and the transfer-time curve as services: JSON data in, JSON data out."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import numpy as np
from numpy.typing import NDArray

import queues
import transport
from app.schemas.problems import translated_errors

__all__ = [
    "nic_queue_cells",
    "nic_queue_cost",
    "solve_nic_queue",
    "transfer_time_curve",
    "transfer_time_work",
]

# Library parameter -> API field, for the errors of POST /queues/nic.
_QUEUE_FIELDS = {
    "capacity": "buffer_packets",
    "batch": "coalesce_packets",
    "min_batch": "min_batch",
    "service_rate": "service_rate_per_s",
    "packet_bytes": "packet_payload_bytes",
    "phase_type": "phase_type",
}


def _rates(request: Mapping[str, Any]) -> tuple[NDArray[np.float64], NDArray[np.float64], str]:
    """(arrival rates in packets/s, sending rates in bit/s, the field they came from)."""
    bits_per_packet = 8.0 * float(request["packet_payload_bytes"])
    if request.get("send_rates_bps") is not None:
        send = np.asarray(request["send_rates_bps"], dtype=float)
        return send / bits_per_packet, send, "send_rates_bps"
    lam = np.asarray(request["arrival_rates_pps"], dtype=float)
    return lam, lam * bits_per_packet, "arrival_rates_pps"


def nic_queue_cost(request: Mapping[str, Any]) -> float:
    """Rough work of a NIC request (array cells touched), to route big ones to the pool."""
    rates = len(request.get("send_rates_bps") or request.get("arrival_rates_pps") or [])
    levels = int(request["buffer_packets"]) + 1
    phase = request.get("phase_type")
    phases = len(phase["alpha"]) if phase else 1
    if phase is None and request.get("min_batch") is None:
        return float(rates * levels)
    return float(rates * levels * phases * phases * int(request["coalesce_packets"]))


def nic_queue_cells(request: Mapping[str, Any]) -> int:
    """Rates x occupancy levels x phases: the memory a request needs, in float cells."""
    rates = len(request.get("send_rates_bps") or request.get("arrival_rates_pps") or [])
    phase = request.get("phase_type")
    phases = len(phase["alpha"]) if phase else 1
    return rates * (int(request["buffer_packets"]) + 1) * phases


def solve_nic_queue(request: Mapping[str, Any]) -> dict[str, Any]:
    """Solve ``POST /queues/nic`` (see :class:`app.schemas.bodies.NicQueueRequest`).

    Raises
    ------
    ProblemError
        ``invalid-parameter`` naming the field, e.g. ``body.buffer_packets`` when K < N.
    """
    lam, send, rate_field = _rates(request)
    phase = request.get("phase_type")
    aliases = {**_QUEUE_FIELDS, "arrival_rate": rate_field}
    with translated_errors(aliases, "body."):
        solution = queues.bulk_service_queue(
            lam,
            request.get("service_rate_per_s"),
            request["buffer_packets"],
            request["coalesce_packets"],
            min_batch=request.get("min_batch"),
            phase_type=None if phase is None else (phase["alpha"], phase["T"]),
            packet_bytes=request["packet_payload_bytes"],
        )
    assert solution.throughput_bps is not None  # packet_bytes was given
    return {
        "arrival_rate_pps": lam.tolist(),
        "send_rate_bps": send.tolist(),
        "loss_probability": solution.loss_probability.tolist(),
        "throughput_pps": solution.throughput_pps.tolist(),
        "throughput_bps": solution.throughput_bps.tolist(),
        "mean_occupancy": solution.mean_occupancy.tolist(),
        "busy_probability": solution.busy_probability.tolist(),
        "interrupt_rate_per_s": solution.interrupt_rate.tolist(),
        "mean_batch": solution.mean_batch.tolist(),
        "method": solution.method,
        "occupancy_distribution": (
            solution.occupancy_distribution.tolist()
            if request.get("include_distribution")
            else None
        ),
        "inputs": {
            "buffer_packets": solution.capacity,
            "coalesce_packets": solution.batch,
            "min_batch": solution.min_batch,
            "packet_payload_bytes": request["packet_payload_bytes"],
            "service_rate_per_s": request.get("service_rate_per_s"),
            "phase_type": phase is not None,
        },
    }


def _loss_function(
    model: Mapping[str, Any], payload_bytes: int
) -> Callable[[NDArray[np.float64]], NDArray[np.float64]]:
    kind = model["kind"]
    if kind == "constant":
        value = float(model["loss"])
        return lambda rates: np.full(np.shape(rates), value)
    if kind == "table":
        x = np.asarray(model["send_rate_bps"], dtype=float)
        y = np.asarray(model["loss"], dtype=float)
        order = np.argsort(x, kind="stable")
        x, y = x[order], y[order]
        return lambda rates: np.interp(rates, x, y)
    mu = float(model["service_rate_per_s"])
    capacity = int(model["buffer_packets"])
    batch = int(model["coalesce_packets"])
    bits = 8.0 * payload_bytes

    def nic_loss(rates: NDArray[np.float64]) -> NDArray[np.float64]:
        return np.asarray(queues.loss_probability(rates / bits, mu, capacity, batch))

    return nic_loss


_TRANSFER_FIELDS = {
    "capacity": "loss_model.buffer_packets",
    "batch": "loss_model.coalesce_packets",
    "service_rate": "loss_model.service_rate_per_s",
    "arrival_rate": "send_rates_bps",
    "send_rate_bps": "send_rates_bps",
    "loss": "loss_model",
}


def transfer_time_work(request: Mapping[str, Any]) -> float:
    """Rough NIC-queue work of a transfer-time request (rates x levels), for pool routing."""
    model = request["loss_model"]
    if model["kind"] != "nic-queue":
        return 0.0
    rates = len(request.get("send_rates_bps") or ()) or int(request["curve_points"])
    if request.get("find_optimum", True):
        rates += 1_024  # the bottleneck search's evaluations
    return float(rates * (int(model["buffer_packets"]) + 1))


def transfer_time_curve(request: Mapping[str, Any]) -> dict[str, Any]:
    """Solve ``POST /transfer-time`` (see :class:`app.schemas.bodies.TransferTimeRequest`)."""
    payload = int(request["packet_payload_bytes"])
    loss = _loss_function(request["loss_model"], payload)
    line_rate = float(request["line_rate_bps"])
    points = int(request["curve_points"])
    if request.get("send_rates_bps") is not None:
        rates = np.asarray(request["send_rates_bps"], dtype=float)
    else:
        rates = line_rate * (np.arange(1, points + 1) / points)
    common = {
        "file_size_bytes": request["file_size_bytes"],
        "propagation_delay_s": request["propagation_delay_s"],
        "packet_payload_bytes": payload,
        "header_bytes": request["header_bytes"],
    }
    with translated_errors(_TRANSFER_FIELDS, "body."):
        curve = transport.transfer_time(rates, loss(rates), **common)
        optimum = None
        if request.get("find_optimum", True):
            try:
                best = transport.effective_bottleneck_rate(
                    loss, line_rate_bps=line_rate, curve_points=points, **common
                )
            except transport.NoCompletingRateError:
                best = None
            if best is not None:
                optimum = {
                    "rate_bps": best.rate_bps,
                    "transfer_time_s": best.transfer_time_s,
                    "loss": best.loss,
                    "rounds": best.rounds,
                    "limited_by": best.limited_by,
                    "resolution_bps": best.resolution_bps,
                }
    body = curve.to_dict()
    total_bytes = body.pop("total_bytes")
    for key in ("file_size_bytes", "packet_payload_bytes", "header_bytes", "propagation_delay_s"):
        body.pop(key)
    return {
        "curve": body,
        "optimum": optimum,
        "total_bytes": total_bytes,
        "inputs": {**common, "line_rate_bps": line_rate, "loss_model": dict(request["loss_model"])},
    }
