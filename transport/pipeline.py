"""The paper's whole method in one call: workload in, effective bottleneck rate out.

Three stages, each a public function of its own package, composed here so that the REST
service and the CLI compute the same number the same way:

1. End system (:func:`interrupt_service_time`, SPEC sections 1-2): the workload's
   steady-state SRN (Fig. 1a) and the tagged-customer SRN (Fig. 1b) give the
   distribution of the time the host takes to service one network interrupt: its mean,
   the rate ``mu = 1 / mean`` and the phase-type pair ``(alpha, T)``.
2. NIC (:mod:`queues`, SPEC section 3): the M/M[N]/1/K bulk-service queue with the
   profile's buffer K and coalescing batch N gives the packet loss probability as a
   function of the sending rate, with the packet arrival rate
   ``lambda = B_send / (8 * S_pkt)``.  The interrupt service is either exponential with
   rate ``mu`` (the paper's approximation, ``nic_service="exponential"``) or the
   phase-type distribution of stage 1 itself (``nic_service="phase-type"``).
3. Transfer (:func:`transport.effective_bottleneck_rate`, SPEC section 4): the RBUDP
   transfer time over the sending rates in (0, line rate] and the rate that minimises it.

The loss curve of stage 2 is evaluated vectorised: the search of stage 3 asks for a few
hundred rates per call, a handful of calls in all.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, field
from typing import Any, get_args

import numpy as np
from numpy.typing import ArrayLike, NDArray

import queues
from host import HostProfile, InterruptServiceTime, Workload, interrupt_service_time

from . import _validation as check
from .errors import TransportParameterError
from .models import NicService
from .rate_search import (
    MAX_CURVE_POINTS,
    BottleneckRate,
    bulk_queue_bottleneck_rate,
    effective_bottleneck_rate,
)

__all__ = ["NicService", "PipelineResult", "workload_bottleneck_rate"]

_NIC_SERVICES: tuple[str, ...] = get_args(NicService)


@dataclass(frozen=True)
class PipelineResult:
    """The effective bottleneck rate of a workload and every intermediate result.

    Attributes
    ----------
    workload : Workload
        The workload analysed (CPU-bound and I/O-bound tasks, cores, disks).
    profile : HostProfile
        The host profile used, overrides applied: service rates (1/s), NIC buffer K and
        batch N (packets), line rate (bit/s), packet payload S_pkt (bytes).
    nic_service : {"exponential", "phase-type"}
        The interrupt service model of the NIC queue.
    service : InterruptServiceTime
        Stage 1: the interrupt service-time distribution (CDF, mean, variance, quantiles,
        phase-type pair, rate ``mu = 1 / mean`` in interrupts/s, processor and disk
        occupancy).
    bottleneck : BottleneckRate
        Stage 3: the effective bottleneck rate (bit/s), the transfer time there (s), the
        loss there, the rounds, ``limited_by`` and the curve T(B_send).
    queue_at_rate : queues.BulkQueueSolution
        Stage 2 evaluated at the effective bottleneck rate (one arrival rate): loss,
        throughput (packets/s and bit/s), mean occupancy, busy probability and the
        occupancy distribution of the NIC buffer.  Solved on first access (the rate
        and the loss there do not need it), then kept.
    """

    workload: Workload
    profile: HostProfile
    nic_service: NicService
    service: InterruptServiceTime
    bottleneck: BottleneckRate
    # Stage 2 as a function of the rate, for queue_at_rate (internal).
    _nic: _NicQueue = field(repr=False, compare=False)

    @functools.cached_property
    def queue_at_rate(self) -> queues.BulkQueueSolution:
        """Stage 2 at the effective bottleneck rate (see the class attributes)."""
        return self._nic.solve([self.bottleneck.rate_bps])

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready form: the headline figures first, then each stage in full.

        No infinity or NaN: every value is a finite number, a string, a bool, ``None`` or
        a list of those.
        """
        q = self.queue_at_rate
        queue: dict[str, Any] = {
            "arrival_rate_pps": float(q.arrival_rate[0]),
            "loss_probability": float(q.loss_probability[0]),
            "throughput_pps": float(q.throughput_pps[0]),
            "throughput_bps": None if q.throughput_bps is None else float(q.throughput_bps[0]),
            "mean_occupancy_packets": float(q.mean_occupancy[0]),
            "busy_probability": float(q.busy_probability[0]),
            "interrupt_rate_per_s": float(q.interrupt_rate[0]),
            "mean_batch_packets": float(q.mean_batch[0]),
            "capacity_packets": q.capacity,
            "batch_packets": q.batch,
            "method": q.method,
            "occupancy_distribution": q.occupancy_distribution[0].tolist(),
        }
        return {
            "effective_bottleneck_rate_bps": self.bottleneck.rate_bps,
            "transfer_time_s": self.bottleneck.transfer_time_s,
            "loss_probability": self.bottleneck.loss,
            "interrupt_service_rate_per_s": self.service.rate_per_s,
            "limited_by": self.bottleneck.limited_by,
            "nic_service": self.nic_service,
            "workload": self.workload.to_dict(),
            "profile": self.profile.to_dict(),
            "service_time": self.service.to_dict(),
            "nic_queue": queue,
            "bottleneck": self.bottleneck.to_dict(),
        }


def _nic_service(value: Any) -> NicService:
    if not isinstance(value, str) or value not in _NIC_SERVICES:
        raise TransportParameterError(
            "nic_service", f"must be one of {', '.join(map(repr, _NIC_SERVICES))}, got {value!r}"
        )
    return value  # type: ignore[return-value]


class _NicQueue:
    """Stage 2 as a function of the sending rate: the loss curve the search calls, and
    the full queue solution at one rate.

    Exponential service uses :func:`queues.loss_probability` (the loss alone, the fast
    path); phase-type service takes ``(alpha, T)`` from stage 1 once and solves the
    fixed-batch M/PH[N]/1/K chain.
    """

    def __init__(self, service: InterruptServiceTime, host: HostProfile, kind: NicService) -> None:
        self.capacity = host.buffer_packets
        self.batch = host.coalesce_packets
        self.payload = host.packet_payload_bytes
        self.bits_per_packet = 8.0 * host.packet_payload_bytes
        self.mu: float | None = None
        self.phase_type: tuple[NDArray[np.float64], Any] | None = None
        if kind == "exponential":
            self.mu = service.rate_per_s
        else:
            self.phase_type = service.phase_type()

    def __call__(self, rates_bps: NDArray[np.float64]) -> NDArray[np.float64]:
        """Loss probability at each sending rate (bit/s)."""
        lam = rates_bps / self.bits_per_packet  # packets/s (SPEC section 3)
        if self.mu is not None:
            return queues.loss_probability(lam, self.mu, self.capacity, self.batch)
        return self.solve(rates_bps).loss_probability

    def solve(self, rates_bps: ArrayLike) -> queues.BulkQueueSolution:
        """Every stationary measure of the NIC queue at the given sending rates (bit/s)."""
        lam = np.asarray(rates_bps, dtype=np.float64) / self.bits_per_packet
        return queues.bulk_service_queue(
            lam,
            self.mu,
            self.capacity,
            self.batch,
            phase_type=self.phase_type,
            packet_bytes=self.payload,
        )


def workload_bottleneck_rate(
    workload: Workload,
    profile: HostProfile | str = "sx280-2007",
    *,
    file_size_bytes: float,
    propagation_delay_s: float,
    nic_service: NicService = "exponential",
    curve_points: int = 200,
    service_time_grid: ArrayLike | None = None,
) -> PipelineResult:
    """The effective bottleneck rate of a receiving host: the paper's whole method.

    Stage 1 solves the end-system SRNs for the interrupt service time, stage 2 turns it
    into the NIC's loss curve (M/M[N]/1/K, ``lambda = B_send / (8 * S_pkt)``), stage 3
    finds the sending rate in (0, line rate] that minimises the RBUDP transfer time.

    Parameters
    ----------
    workload : Workload
        CPU-bound tasks C, I/O-bound tasks I, cores m, disks d.
    profile : HostProfile or str, default "sx280-2007"
        The host: a profile, or the name of a built-in one.  It supplies the service rates
        (1/s), the NIC buffer K and coalescing batch N (packets), the line rate (bit/s)
        and the packet payload S_pkt (bytes).
    file_size_bytes : int
        Size of the file to transfer (bytes), a whole number >= 1.
    propagation_delay_s : float
        One-way propagation delay (s), > 0.
    nic_service : {"exponential", "phase-type"}, default "exponential"
        Interrupt service of the NIC queue: exponential with ``mu = 1 / E[S]`` (the
        paper's approximation) or stage 1's phase-type distribution ``(alpha, T)``.
    curve_points : int, default 200
        Points of the curve T(B_send) returned for plotting, 2..100000.
    service_time_grid : array_like, optional
        Times (s) at which stage 1 reports the service-time CDF; chosen for you when
        omitted.

    Returns
    -------
    PipelineResult
        The rate (``result.bottleneck.rate_bps``, bit/s) and every intermediate result.

    Raises
    ------
    TransportParameterError
        ``parameter`` names the offending argument: ``nic_service``,
        ``file_size_bytes``, ``propagation_delay_s`` or ``curve_points`` (checked before
        any model is solved), or ``loss`` (:class:`NoCompletingRateError`).
    WorkloadError
        ``field`` names the workload or profile field (unknown profile, impossible
        workload, a state space beyond the engine's limits).
    queues.QueueParameterError
        ``parameter`` names the NIC parameter the profile got wrong for the queue.

    Examples
    --------
    >>> from host import Workload
    >>> r = workload_bottleneck_rate(
    ...     Workload(cpu_tasks=2, io_tasks=1),
    ...     file_size_bytes=500_000_000,
    ...     propagation_delay_s=0.1,
    ... )
    >>> r.bottleneck.limited_by, r.bottleneck.rate_bps < 1e9
    ('end-system', True)
    """
    # Cheap argument checks first: a typo in the transfer must not cost an SRN solve.
    kind = _nic_service(nic_service)
    size = check.whole_number(file_size_bytes, "file_size_bytes", minimum=1)
    delay = check.positive_real(propagation_delay_s, "propagation_delay_s", "s")
    points = check.whole_number(
        curve_points, "curve_points", minimum=2, maximum=MAX_CURVE_POINTS, unit="points"
    )

    service = interrupt_service_time(workload, profile, times=service_time_grid)
    host = service.profile
    nic = _NicQueue(service, host, kind)
    transfer: dict[str, Any] = {
        "line_rate_bps": host.line_rate_bps,
        "file_size_bytes": size,
        "propagation_delay_s": delay,
        "packet_payload_bytes": host.packet_payload_bytes,
        "curve_points": points,
    }
    if nic.mu is not None:
        # The same search with the queue's loss inside one compiled loop.
        bottleneck = bulk_queue_bottleneck_rate(nic.mu, nic.capacity, nic.batch, **transfer)
    else:
        bottleneck = effective_bottleneck_rate(nic, **transfer)
    return PipelineResult(
        workload=service.workload,
        profile=host,
        nic_service=kind,
        service=service,
        bottleneck=bottleneck,
        _nic=nic,
    )
