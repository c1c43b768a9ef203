"""The paper's answer alone: the effective bottleneck rate with the exponential NIC service.

:func:`transport.workload_bottleneck_rate` returns every intermediate result: the whole
interrupt service-time distribution, the queue, the curve.  Most callers read two
numbers, the interrupt service rate ``mu`` and the bottleneck, and with the exponential
NIC service (the paper's) those need only ``mu = 1 / E[S]`` from the first stage.
:func:`paper_bottleneck_rate` computes just that (:func:`host.interrupt_service_rate`)
and the search (:func:`transport.bulk_queue_bottleneck_rate`): the same numbers to the
last bit, without the SRN engine and, in a process that has not loaded Numba, without
the compiled kernels (what makes ``blastrate rate`` answer in a fraction of a second).
"""

from __future__ import annotations

from typing import NamedTuple

from host import HostProfile, Workload, host_profile, interrupt_service_rate

from . import _validation as check
from .rate_search import MAX_CURVE_POINTS, BottleneckRate, bulk_queue_bottleneck_rate

__all__ = ["PaperRate", "paper_bottleneck_rate"]


class PaperRate(NamedTuple):
    """The interrupt service rate (1/s) and the effective bottleneck rate there."""

    service_rate_per_s: float
    bottleneck: BottleneckRate


def paper_bottleneck_rate(
    workload: Workload,
    profile: HostProfile | str = "sx280-2007",
    *,
    file_size_bytes: int,
    propagation_delay_s: float,
    curve_points: int = 200,
) -> PaperRate:
    """The effective bottleneck rate of a workload with the exponential NIC service.

    ``workload_bottleneck_rate(..., nic_service="exponential")``'s ``service.rate_per_s``
    and ``bottleneck``, bit for bit, without the intermediate results.

    Parameters
    ----------
    workload : Workload
        CPU-bound tasks C, I/O-bound tasks I, cores m, disks d.
    profile : HostProfile or str, default "sx280-2007"
        The host, or the name of a built-in profile.
    file_size_bytes : int
        Size of the file (bytes), a whole number >= 1.
    propagation_delay_s : float
        One-way propagation delay (s), > 0.
    curve_points : int, default 200
        Points of the curve T(B_send), 2..100000.

    Returns
    -------
    PaperRate
        ``service_rate_per_s`` (1/s) and ``bottleneck`` (:class:`BottleneckRate`).

    Raises
    ------
    TransportParameterError, WorkloadError, queues.QueueParameterError
        As :func:`transport.workload_bottleneck_rate`, naming the argument at fault.

    Examples
    --------
    >>> r = paper_bottleneck_rate(
    ...     Workload(cpu_tasks=2, io_tasks=1), file_size_bytes=500_000_000,
    ...     propagation_delay_s=0.1,
    ... )
    >>> round(r.service_rate_per_s, 1), r.bottleneck.limited_by
    (12245.7, 'end-system')
    """
    # Cheap argument checks first, as workload_bottleneck_rate makes them.
    size = check.whole_number(file_size_bytes, "file_size_bytes", minimum=1)
    delay = check.positive_real(propagation_delay_s, "propagation_delay_s", "s")
    points = check.whole_number(
        curve_points, "curve_points", minimum=2, maximum=MAX_CURVE_POINTS, unit="points"
    )
    host = host_profile(profile) if isinstance(profile, str) else profile
    mu = interrupt_service_rate(workload, host)
    best = bulk_queue_bottleneck_rate(
        mu,
        host.buffer_packets,
        host.coalesce_packets,
        line_rate_bps=host.line_rate_bps,
        file_size_bytes=size,
        propagation_delay_s=delay,
        packet_payload_bytes=host.packet_payload_bytes,
        curve_points=points,
    )
    return PaperRate(mu, best)
