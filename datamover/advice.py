"""The receiver's advice: the sending rate for this transfer, from the host that receives it.

A sender that asks (``blastrate send --rate auto``) puts an ``advise`` object in its HELLO;
the receiver answers in its ACCEPT with the rate its own model predicts (receiver
feedback, as RAPID's receiver told its sender the rate it could take).  The receiver knows
what no other party does: its calibrated profile, the datagrams its socket really holds
(K, from SO_RCVBUF), how many it drains per wake-up (N), and the tasks that compete for
the CPUs it may run on.  :class:`ReceiverAdvisor` puts these together; the receiver calls
it with the sender's request and sends back :meth:`RateAdvice.to_dict`.

The request (all optional but the delay)::

    {"propagation_delay_s": 0.01, "profile": "lab-1", "model": "timeslice"}
"""

from __future__ import annotations

from collections.abc import Callable, Collection
from dataclasses import dataclass, field
from typing import Any, Literal, get_args

from host import HostProfile, Workload
from transport import (
    DEFAULT_SETTLE_S,
    time_slice_bottleneck_rate,
    time_slice_costs,
    time_slice_work,
    workload_bottleneck_rate,
)

__all__ = [
    "MAX_ADVICE_WORK",
    "AdviceError",
    "AdviceModel",
    "RateAdvice",
    "ReceiverAdvisor",
    "parse_advice_request",
]

#: ``"timeslice"`` (the default: scheduler slices and finite blasts, :mod:`transport.timeslice`)
#: or ``"paper"`` (the paper's processor-sharing model, :mod:`transport.pipeline`).
AdviceModel = Literal["timeslice", "paper"]
_MODELS: tuple[str, ...] = get_args(AdviceModel)
_MAX_DELAY_S = 60.0
#: Most work (K * (7 (N + 1))^2, about the banded solve's flops per rate) a receiver puts
#: into one piece of advice: about a second for the whole search on this machine.
MAX_ADVICE_WORK = 2.0e8


class AdviceError(ValueError):
    """The sender's request for advice is malformed or names something unknown.

    Attributes
    ----------
    field : str
        The request's field, e.g. ``"propagation_delay_s"`` or ``"profile"``.
    """

    def __init__(self, field: str, reason: str) -> None:
        super().__init__(f"{field}: {reason}")
        self.field = field
        self.reason = reason


def parse_advice_request(request: Any) -> tuple[float, str | None, AdviceModel]:
    """Check the HELLO's ``advise`` object: (delay in s, profile name or None, model)."""
    if not isinstance(request, dict):
        raise AdviceError("advise", "must be a JSON object")
    delay = request.get("propagation_delay_s")
    if (
        isinstance(delay, bool)
        or not isinstance(delay, int | float)
        or not (0 < delay <= _MAX_DELAY_S)
    ):
        raise AdviceError(
            "propagation_delay_s", f"must be a number of seconds in (0, {_MAX_DELAY_S:g}]"
        )
    profile = request.get("profile")
    if profile is not None and (not isinstance(profile, str) or not 0 < len(profile) <= 64):
        raise AdviceError("profile", "must be a profile name of 1 to 64 characters")
    model = request.get("model", "timeslice")
    if model not in _MODELS:
        raise AdviceError("model", f"must be one of {', '.join(_MODELS)}")
    return float(delay), profile, model


@dataclass(frozen=True)
class RateAdvice:
    """A predicted rate and everything it was computed from.

    Attributes
    ----------
    rate_bps : float
        The effective bottleneck rate (payload bit/s).
    predicted_loss : float
        The model's loss at that rate (first-round loss for ``timeslice``, the stationary
        loss for ``paper``).
    predicted_time_s : float
        The model's transfer time at that rate (s).
    model : str
        ``"timeslice"`` or ``"paper"``.
    profile : str
        Name of the host profile used.
    workload : Workload
        C, I, m, d of the CPUs the receiver may run on.
    buffer_packets, coalesce_packets : int
        K and N of the receiver as it receives.
    propagation_delay_s : float
        The one-way delay the sender gave (s).
    time_slice_s : float
        The scheduler slice the model used (s).
    computed_by : str
        Who computed it (e.g. ``"receiver 10.0.0.2:9000"``).
    """

    rate_bps: float
    predicted_loss: float
    predicted_time_s: float
    model: str
    profile: str
    workload: Workload
    buffer_packets: int
    coalesce_packets: int
    propagation_delay_s: float
    time_slice_s: float
    computed_by: str = "receiver"
    extra: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form (what the ACCEPT carries and ``send --json`` reports)."""
        return {
            "profile": self.profile,
            "model": self.model,
            "workload": self.workload.to_dict(),
            "buffer_packets": self.buffer_packets,
            "coalesce_packets": self.coalesce_packets,
            "propagation_delay_s": self.propagation_delay_s,
            "time_slice_s": self.time_slice_s,
            "predicted_rate_bps": self.rate_bps,
            "predicted_loss": self.predicted_loss,
            "predicted_time_s": self.predicted_time_s,
            "computed_by": self.computed_by,
            **self.extra,
        }


class ReceiverAdvisor:
    """Computes :class:`RateAdvice` for a receiver as it receives.

    Parameters
    ----------
    own : callable
        ``own() -> (HostProfile, provenance)``: the receiver's host profile and the
        provenance stored with it, read at each request (so that a new host default from
        ``blastrate calibrate`` applies at once).  Its K and N are replaced by the next
        two; the provenance's ``time_slice_s``, ``kernel_s_per_datagram``, ``wakeup_s``
        and ``effective_competitors`` (from a calibration) feed the time-slice model
        (:func:`transport.time_slice_costs`).
    buffer_packets : int or None
        K, datagrams the receiver's socket holds (measured from its SO_RCVBUF); None
        keeps the profile's.
    batch_packets : int
        N, datagrams the receiver drains per wake-up.
    cpus : collection of int
        The CPUs the receiver may run on (its affinity): m is their number.
    workload : callable
        ``workload(cpus) -> Workload``: the tasks competing for those CPUs now (a probe
        of the host, :meth:`host.probe.HostProbe.workload_on`).
    settle_s : float, default 0.02
        The receiver's wait for stragglers after a lossy blast (s).
    profiles : callable, optional
        ``profiles(name) -> (HostProfile, provenance)`` for a sender that names a
        profile; None refuses such requests.
    name : str, default "receiver"
        What ``computed_by`` says.
    """

    def __init__(
        self,
        own: Callable[[], tuple[HostProfile, dict[str, Any] | None]],
        *,
        buffer_packets: int | None,
        batch_packets: int,
        cpus: Collection[int],
        workload: Callable[[Collection[int]], Workload],
        settle_s: float = DEFAULT_SETTLE_S,
        profiles: Callable[[str], tuple[HostProfile, dict[str, Any] | None]] | None = None,
        name: str = "receiver",
    ) -> None:
        self.own = own
        self.buffer_packets = buffer_packets
        self.batch_packets = batch_packets
        self.cpus = frozenset(cpus)
        self.workload = workload
        self.settle_s = settle_s
        self.profiles = profiles
        self.name = name

    def __call__(self, file_size_bytes: int, request: Any) -> RateAdvice:
        """Advice for a file of ``file_size_bytes`` and the sender's ``request``.

        Raises
        ------
        AdviceError
            A malformed request or an unknown profile name.
        """
        delay, profile_name, model = parse_advice_request(request)
        profile, provenance = self.own()
        if profile_name is not None and profile_name != profile.name:
            if self.profiles is None:
                raise AdviceError("profile", "this receiver uses only its own profile")
            try:
                profile, provenance = self.profiles(profile_name)
            except LookupError as exc:
                raise AdviceError("profile", str(exc)) from None
        costs = time_slice_costs(provenance, profile)
        k = profile.buffer_packets if self.buffer_packets is None else self.buffer_packets
        # The time-slice chain costs about K * (N * phases)^2 per rate: refuse what would
        # keep this receiver (which serves one sender at a time) busy for seconds.
        n_batch = min(self.batch_packets, k)
        if model == "timeslice" and time_slice_work(k, n_batch) > MAX_ADVICE_WORK:
            raise AdviceError(
                "buffer_packets",
                f"K={k} with N={n_batch} is beyond what this receiver advises on "
                f"(max_advice_work={MAX_ADVICE_WORK}); use a smaller --batch or --rcvbuf, "
                "or --model paper",
            )
        host = profile.replace(buffer_packets=k, coalesce_packets=min(self.batch_packets, k))
        workload = self.workload(self.cpus)
        size = max(int(file_size_bytes), 1)
        if model == "paper":
            paper = workload_bottleneck_rate(
                workload, host, file_size_bytes=size, propagation_delay_s=delay
            )
            rate, loss, t = (
                paper.bottleneck.rate_bps,
                paper.bottleneck.loss,
                paper.bottleneck.transfer_time_s,
            )
        else:
            ts = time_slice_bottleneck_rate(
                workload,
                host,
                file_size_bytes=size,
                propagation_delay_s=delay,
                settle_s=self.settle_s,
                **costs.to_dict(),
            )
            rate, loss, t = ts.rate_bps, ts.first_round_loss, ts.transfer_time_s
        return RateAdvice(
            rate_bps=float(rate),
            predicted_loss=float(loss),
            predicted_time_s=float(t),
            model=model,
            profile=profile.name,
            workload=workload,
            buffer_packets=host.buffer_packets,
            coalesce_packets=host.coalesce_packets,
            propagation_delay_s=delay,
            time_slice_s=costs.time_slice_s,
            computed_by=self.name,
        )
