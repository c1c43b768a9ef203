"""RBUDP transfer time and the effective bottleneck rate (SPEC section 4).

The transfer time of one file for many sending rates at once, and the sending rate that
minimises it given a vectorised loss model::

    from transport import effective_bottleneck_rate, transfer_time

    t = transfer_time([500e6, 950e6], [0.0, 0.02], 500_000_000, 0.1)
    t.total_s, t.rounds, t.completes          # seconds, rounds, False where loss >= 1

    best = effective_bottleneck_rate(
        loss,                                  # loss(send_rate_bps: ndarray) -> ndarray
        line_rate_bps=1e9, file_size_bytes=500_000_000, propagation_delay_s=0.1,
    )
    best.rate_bps, best.transfer_time_s, best.limited_by, best.curve

The whole method -- end-system SRNs, NIC queue, transfer -- in one call::

    from host import Workload
    from transport import workload_bottleneck_rate

    r = workload_bottleneck_rate(
        Workload(cpu_tasks=2, io_tasks=1), "sx280-2007",
        file_size_bytes=500_000_000, propagation_delay_s=0.1,
        nic_service="exponential",             # or "phase-type"
    )
    r.bottleneck.rate_bps, r.service.rate_per_s, r.queue_at_rate.loss_probability

The time-slice model (scheduler slices, kernel work, finite blasts), which a receiver
uses to advise a sender's ``--rate auto``::

    from transport import time_slice_bottleneck_rate

    r = time_slice_bottleneck_rate(
        Workload(cpu_tasks=2, io_tasks=0, cores=1), profile,
        file_size_bytes=20_000_000, propagation_delay_s=0.01, time_slice_s=3.8e-3,
    )
    r.rate_bps, r.first_round_loss, r.loss_onset_bps, r.curve

With a calibration's ``send_sizes`` (:class:`transport.SendSizes`), each rate is solved
with the socket's K and the wake-up's N at the sender's send size at that rate.

Its costly half (a scheduler chain per rate) does not depend on the file or the delay:
``time_slice_terms`` solves it ahead of time and ``TimeSliceTerms.play`` answers any
transfer from it in about a millisecond.

The real data mover (sender, receiver, wire format) that acts on these numbers is
the :mod:`datamover` package.

Conventions: S = file size + ceil(file size / S_pkt) * header bytes (32 by default),
rounds = ceil(N_resend) + 1, loss >= 1 never completes (``completes`` False, ``None`` in
``to_dict()``), and the search is a deterministic global scan plus refinement to 0.1 Mbps.
"""

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .curve import TransferCurve
    from .errors import NoCompletingRateError, TransportParameterError
    from .kernel_warmup import load_kernels
    from .models import (
        DEFAULT_RECEIVER_MODEL,
        DEFAULT_SETTLE_S,
        DEFAULT_TIME_SLICE_S,
        MAX_TIME_SLICE_CURVE_WORK,
        MAX_TIME_SLICE_WORK,
        RECEIVER_MODELS,
        TIME_SLICE_NIC_SERVICE,
        ReceiverModelName,
        time_slice_work,
    )
    from .paper_rate import PaperRate, paper_bottleneck_rate
    from .pipeline import PipelineResult, workload_bottleneck_rate
    from .rate_search import (
        MAX_CURVE_POINTS,
        BottleneckRate,
        LossFunction,
        bulk_queue_bottleneck_rate,
        effective_bottleneck_rate,
    )
    from .rbudp import (
        DEFAULT_HEADER_BYTES,
        DEFAULT_PACKET_PAYLOAD_BYTES,
        TransferTerms,
        TransferTime,
        total_size_bytes,
        transfer_time,
        transfer_time_terms,
    )
    from .send_sizes import MAX_SEND_DATAGRAMS, SendSizes
    from .timeslice import (
        TimeSliceCosts,
        TimeSliceCurve,
        TimeSliceResult,
        TimeSliceTerms,
        scheduled_competitors,
        time_slice_bottleneck_rate,
        time_slice_costs,
        time_slice_curve_points,
        time_slice_grid,
        time_slice_refinement,
        time_slice_terms,
        time_slice_with_curve,
    )

__all__ = [
    "DEFAULT_HEADER_BYTES",
    "DEFAULT_PACKET_PAYLOAD_BYTES",
    "DEFAULT_RECEIVER_MODEL",
    "DEFAULT_SETTLE_S",
    "DEFAULT_TIME_SLICE_S",
    "MAX_CURVE_POINTS",
    "MAX_SEND_DATAGRAMS",
    "MAX_TIME_SLICE_CURVE_WORK",
    "MAX_TIME_SLICE_WORK",
    "RECEIVER_MODELS",
    "TIME_SLICE_NIC_SERVICE",
    "BottleneckRate",
    "LossFunction",
    "NicService",
    "NoCompletingRateError",
    "PaperRate",
    "PipelineResult",
    "ReceiverModelName",
    "SendSizes",
    "TimeSliceCosts",
    "TimeSliceCurve",
    "TimeSliceResult",
    "TimeSliceTerms",
    "TransferCurve",
    "TransferTerms",
    "TransferTime",
    "TransportParameterError",
    "bulk_queue_bottleneck_rate",
    "effective_bottleneck_rate",
    "load_kernels",
    "paper_bottleneck_rate",
    "scheduled_competitors",
    "time_slice_bottleneck_rate",
    "time_slice_costs",
    "time_slice_curve_points",
    "time_slice_grid",
    "time_slice_refinement",
    "time_slice_terms",
    "time_slice_with_curve",
    "time_slice_work",
    "total_size_bytes",
    "transfer_time",
    "transfer_time_terms",
    "workload_bottleneck_rate",
]


# Each public name's module, imported when the name is first used (PEP 562), so that
# importing one light part (the errors, the profiles) does not load the solvers, SciPy
# and the compiled kernels of the rest.
_LAZY: dict[str, str] = {
    "TransferCurve": "curve",
    "NoCompletingRateError": "errors",
    "TransportParameterError": "errors",
    "DEFAULT_RECEIVER_MODEL": "models",
    "RECEIVER_MODELS": "models",
    "TIME_SLICE_NIC_SERVICE": "models",
    "ReceiverModelName": "models",
    "load_kernels": "kernel_warmup",
    "PaperRate": "paper_rate",
    "paper_bottleneck_rate": "paper_rate",
    "NicService": "models",
    "PipelineResult": "pipeline",
    "workload_bottleneck_rate": "pipeline",
    "BottleneckRate": "rate_search",
    "LossFunction": "rate_search",
    "MAX_CURVE_POINTS": "rate_search",
    "bulk_queue_bottleneck_rate": "rate_search",
    "effective_bottleneck_rate": "rate_search",
    "DEFAULT_HEADER_BYTES": "rbudp",
    "DEFAULT_PACKET_PAYLOAD_BYTES": "rbudp",
    "TransferTerms": "rbudp",
    "TransferTime": "rbudp",
    "total_size_bytes": "rbudp",
    "transfer_time": "rbudp",
    "transfer_time_terms": "rbudp",
    "DEFAULT_SETTLE_S": "models",
    "DEFAULT_TIME_SLICE_S": "models",
    "MAX_TIME_SLICE_CURVE_WORK": "models",
    "MAX_TIME_SLICE_WORK": "models",
    "MAX_SEND_DATAGRAMS": "send_sizes",
    "SendSizes": "send_sizes",
    "TimeSliceCosts": "timeslice",
    "TimeSliceCurve": "timeslice",
    "TimeSliceResult": "timeslice",
    "TimeSliceTerms": "timeslice",
    "scheduled_competitors": "timeslice",
    "time_slice_bottleneck_rate": "timeslice",
    "time_slice_costs": "timeslice",
    "time_slice_curve_points": "timeslice",
    "time_slice_grid": "timeslice",
    "time_slice_refinement": "timeslice",
    "time_slice_terms": "timeslice",
    "time_slice_with_curve": "timeslice",
    "time_slice_work": "models",
}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    from importlib import import_module

    value = getattr(import_module(f"{__name__}.{module}"), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *_LAZY})
