"""Many variants of one point at once: what-if changes and finite-difference steps.

Variants of a point usually differ only in the NIC (ring K, coalescing N), the line or
the transfer, so they share the end-system solve (stage 1, milliseconds), while their
NIC queues (stage 2, up to a second for a ring of 4096 packets) are independent.  Stage 1
runs once per distinct end system, in this thread (the host model caches compiled nets
per shape and is not meant to be shared between threads); stages 2-3 run on a thread
pool, where the compiled queue kernels release the GIL.

The arithmetic is exactly that of :func:`transport.workload_bottleneck_rate` with the
exponential NIC service, so each record is bit for bit :func:`planning.evaluate_point`'s
(phase-type variants and the time-slice model's are simply solved one after the other by
that function).
"""

from __future__ import annotations

import concurrent.futures
import os
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
from numpy.typing import NDArray

import queues
import transport
from host import HostProfile, Workload, WorkloadError, interrupt_service_rate

from .errors import PlanningError
from .points import RESULT_FIELDS, evaluate_point, input_name, point_objects

__all__ = ["evaluate_variants"]


class _ExponentialNic:
    """The loss of the M/M[N]/1/K NIC queue at sending rates (bit/s), as the pipeline
    computes it (``lambda = B_send / (8 S_pkt)``)."""

    def __init__(self, mu: float, host: HostProfile) -> None:
        self.mu = mu
        self.capacity = host.buffer_packets
        self.batch = host.coalesce_packets
        self.bits_per_packet = 8.0 * host.packet_payload_bytes

    def __call__(self, rates_bps: NDArray[np.float64]) -> NDArray[np.float64]:
        lam = rates_bps / self.bits_per_packet
        return queues.loss_probability(lam, self.mu, self.capacity, self.batch)


def _failed(resolved: Mapping[str, Any], exc: Exception) -> dict[str, Any]:
    field = getattr(exc, "field", None) or getattr(exc, "parameter", None) or "inputs"
    reason = str(exc).split(": ", 1)[-1]
    return {**resolved, **dict.fromkeys(RESULT_FIELDS), "error": f"{input_name(field)}: {reason}"}


def _search(resolved: Mapping[str, Any], mu: float, host: HostProfile) -> dict[str, Any]:
    try:
        best = transport.effective_bottleneck_rate(
            _ExponentialNic(mu, host),
            line_rate_bps=host.line_rate_bps,
            file_size_bytes=resolved["file_size"],
            propagation_delay_s=resolved["propagation_delay"],
            packet_payload_bytes=host.packet_payload_bytes,
            curve_points=200,
        )
    except (transport.TransportParameterError, queues.QueueParameterError) as exc:
        return _failed(resolved, exc)
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


def evaluate_variants(
    resolved: Sequence[Mapping[str, Any]], *, threads: int | None = None
) -> list[dict[str, Any]]:
    """Sweep records of already resolved points (see :func:`planning.resolve_point`).

    Parameters
    ----------
    resolved : sequence of mapping
        Resolved points (every input present, SI units).
    threads : int, optional
        Threads for the NIC queue searches; default: the CPUs available.

    Returns
    -------
    list of dict
        One record per point, in order, equal to :func:`planning.evaluate_point`'s.
    """
    out: list[dict[str, Any] | None] = [None] * len(resolved)
    jobs: list[tuple[int, float, HostProfile]] = []
    rates: dict[tuple[Workload, float, float, float], float] = {}
    for i, point in enumerate(resolved):
        if point["nic_service"] != "exponential" or point.get("model") == "timeslice":
            out[i] = evaluate_point(point)
            continue
        try:
            workload, host = point_objects(point)
            key = (workload, host.mu_io_cpu, host.mu_disk, host.mu_net)
            if key not in rates:
                rates[key] = interrupt_service_rate(workload, host)
        except (WorkloadError, ValueError) as exc:
            out[i] = _failed(point, exc)
            continue
        jobs.append((i, rates[key], host))
    workers = max(1, min(threads or len(os.sched_getaffinity(0)), len(jobs)))
    with concurrent.futures.ThreadPoolExecutor(workers) as pool:
        futures = {pool.submit(_search, resolved[i], mu, host): i for i, mu, host in jobs}
        for future in concurrent.futures.as_completed(futures):
            out[futures[future]] = future.result()
    if any(r is None for r in out):  # pragma: no cover - every index is filled above
        raise PlanningError("inputs", "a variant was not evaluated")
    return [r for r in out if r is not None]
