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

import contextlib
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Collection, Hashable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

# The time-slice model's functions are reached as transport.X when called, not imported
# here: the service imports this module at start, and the model brings Numba, the SRN engine
# and scipy.sparse with it (0.3-0.5 s before readiness; tests/app/service/test_warmup.py).
import transport
from host import HostProfile, Workload
from transport import (
    DEFAULT_RECEIVER_MODEL,
    DEFAULT_SETTLE_S,
    MAX_TIME_SLICE_WORK,
    RECEIVER_MODELS,
    ReceiverModelName,
    TransportParameterError,
    time_slice_work,
)

if TYPE_CHECKING:
    from transport import TimeSliceCosts, TimeSliceResult, TimeSliceTerms

__all__ = [
    "MAX_ADVICE_DELAY_S",
    "MAX_ADVICE_WORK",
    "MAX_PAPER_BUFFER_PACKETS",
    "PROFILE_KINDS",
    "AdviceError",
    "AdviceModel",
    "RateAdvice",
    "ReceiverAdvisor",
    "parse_advice_request",
    "profile_age_s",
    "profile_kind",
]

#: ``"timeslice"`` (the default, :data:`transport.DEFAULT_RECEIVER_MODEL`: scheduler slices
#: and finite blasts, :mod:`transport.timeslice`) or ``"paper"`` (the paper's
#: processor-sharing model, :mod:`transport.pipeline`); :mod:`transport.models` says why.
AdviceModel = ReceiverModelName
_MODELS: tuple[str, ...] = RECEIVER_MODELS
#: Longest one-way delay a receiver advises for (s).
MAX_ADVICE_DELAY_S = 60.0
_MAX_DELAY_S = MAX_ADVICE_DELAY_S
#: How a receiver's profile was made, as the ``auto`` object says: one of the paper's
#: (``built-in``, a host that is not this one), a few seconds' measurement at the
#: receiver's first start (``quick``), ``blastrate calibrate``'s (``calibrated``), or
#: learned from the transfers the receiver served (``learned``).
PROFILE_KINDS = ("built-in", "quick", "calibrated", "learned")
#: Chains solved between two checks of a prepare's ``stop``.
_CHAINS_PER_PIECE = 8
#: Reference transfers whose refinements are solved ahead of time: (bytes, delay in s).
_REFERENCE_TRANSFERS = ((30_000_000, 0.001), (30_000_000, 0.01), (30_000_000, 0.1), (2**30, 0.1))
#: Most work (K * (7 (N + 1))^2, about the banded solve's flops per rate) a receiver puts
#: into one piece of advice: :data:`transport.MAX_TIME_SLICE_WORK`, about a second for the
#: whole search on this machine.
MAX_ADVICE_WORK = MAX_TIME_SLICE_WORK
#: Largest K the paper's model advises on: its NIC queue holds K + 1 levels for each of
#: about a thousand rates, and at K = 65,536 one answer took 4.3 s and 450 MB here.
MAX_PAPER_BUFFER_PACKETS = 16_384


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
    model = request.get("model", DEFAULT_RECEIVER_MODEL)
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


def profile_kind(provenance: dict[str, Any] | None) -> str:
    """How a profile was made (:data:`PROFILE_KINDS`), from its stored provenance: none is
    a built-in; ``kind`` names the others; any other provenance is a calibration's."""
    if provenance is None:
        return "built-in"
    kind = provenance.get("kind")
    return kind if kind in PROFILE_KINDS else "calibrated"


def profile_age_s(provenance: dict[str, Any] | None, now: float) -> float | None:
    """Seconds since the profile's measurement started (its ``started_unix``), or None."""
    started = None if provenance is None else provenance.get("started_unix")
    if isinstance(started, bool) or not isinstance(started, int | float):
        return None
    return max(0.0, now - float(started))


@dataclass
class _Solved:
    """The time-slice model of one host and workload, solved ahead of any transfer: the
    coarse grid and the refinements around its points (by coarse index)."""

    coarse: TimeSliceTerms
    fine: dict[int, TimeSliceTerms] = field(default_factory=dict)


@dataclass(frozen=True)
class _Inputs:
    """Everything but the transfer that an answer depends on."""

    profile: HostProfile
    provenance: dict[str, Any] | None
    costs: TimeSliceCosts
    host: HostProfile
    workload: Workload

    def key(self) -> Hashable:
        return (
            tuple(sorted(self.host.to_dict().items())),
            repr(self.costs),
            tuple(sorted(self.workload.to_dict().items())),
        )

    def terms(self, rates_bps: Any) -> TimeSliceTerms:
        return transport.time_slice_terms(
            self.workload, self.host, rates_bps=rates_bps, **self.costs.to_dict()
        )


def _fits_paper(host: HostProfile) -> bool:
    """Whether the paper's model advises on ``host`` (K at most
    :data:`MAX_PAPER_BUFFER_PACKETS`)."""
    return host.buffer_packets <= MAX_PAPER_BUFFER_PACKETS


class ReceiverAdvisor:
    """Computes :class:`RateAdvice` for a receiver as it receives.

    The model's costly half (a scheduler chain per rate) depends on the host and its
    workload, never on the transfer (:class:`transport.TimeSliceTerms`).  The advisor
    keeps it solved for the workloads it has seen (:meth:`prepare`, called in the
    background by :class:`datamover.advice_keeper.AdviceKeeper`), so that a sender's
    request is answered by playing the rounds out over solved terms: about a
    millisecond, no chain solved while the sender waits.  A request that finds nothing
    solved for its workload is solved on the spot, and its answer says so (``ready``).

    Parameters
    ----------
    own : callable
        ``own() -> (HostProfile, provenance)``: the receiver's host profile and the
        provenance stored with it, read at each request (so that a new host default from
        ``blastrate calibrate`` applies at once).  Its K and N are replaced by the next
        two; the provenance's ``time_slice_s``, ``kernel_s_per_datagram``, ``wakeup_s``
        and ``effective_competitors`` (from a calibration) feed the time-slice model
        (:func:`transport.time_slice_costs`), its ``kind`` and ``started_unix`` say how
        and when it was made (:func:`profile_kind`).
    buffer_packets : int or None
        K, datagrams the receiver's socket holds (measured from its SO_RCVBUF); None
        keeps the profile's.
    buffer_by_send : mapping of int to int, optional
        The same socket filled in sends of each size (datagrams per send to datagrams
        held, :func:`host.calibration.measure_buffer_by_send`): with the sender's time
        per call that a calibration stored, the model gives each rate the K and N of its
        send size (:class:`transport.SendSizes`).  None: the stored table, where it is
        of a socket of this K.
    batch_packets : int
        N, datagrams the receiver drains per wake-up.
    cpus : collection of int
        The CPUs the receiver may run on (its affinity): m is their number.
    workload : callable
        ``workload(cpus) -> Workload``: the tasks competing for those CPUs now: the
        latest look of a background sampler (:class:`~datamover.advice_keeper.AdviceKeeper`),
        or any other source; it should not block.
    settle_s : float, default 0.02
        The receiver's wait for stragglers after a lossy blast (s).
    profiles : callable, optional
        ``profiles(name) -> (HostProfile, provenance)`` for a sender that names a
        profile; None refuses such requests.
    name : str, default "receiver"
        What ``computed_by`` says.
    workload_info : callable, optional
        ``workload_info() -> dict``: what the answer says of the workload's source (its
        age, say); merged into :meth:`RateAdvice.to_dict`.
    max_solved : int, default 32
        Workloads and hosts whose solved terms are kept (least recently used go first).
    """

    def __init__(
        self,
        own: Callable[[], tuple[HostProfile, dict[str, Any] | None]],
        *,
        buffer_packets: int | None,
        batch_packets: int,
        cpus: Collection[int],
        buffer_by_send: Mapping[int, int] | None = None,
        workload: Callable[[Collection[int]], Workload],
        settle_s: float = DEFAULT_SETTLE_S,
        profiles: Callable[[str], tuple[HostProfile, dict[str, Any] | None]] | None = None,
        name: str = "receiver",
        workload_info: Callable[[], dict[str, Any]] | None = None,
        max_solved: int = 32,
    ) -> None:
        self.own = own
        self.buffer_packets = buffer_packets
        self.buffer_by_send = None if buffer_by_send is None else dict(buffer_by_send)
        self.batch_packets = batch_packets
        self.cpus = frozenset(cpus)
        self.workload = workload
        self.settle_s = settle_s
        self.profiles = profiles
        self.name = name
        self.workload_info = workload_info
        self.max_solved = max_solved
        self._lock = threading.Lock()
        self._solved: OrderedDict[Hashable, _Solved] = OrderedDict()
        # Refinements an answer wanted and did not find: (inputs, coarse index).
        self._wanted: OrderedDict[tuple[Hashable, int], _Inputs] = OrderedDict()
        self.wanted = threading.Event()
        # Workloads whose paper model has been computed once (its shape and kernels warm).
        self._paper_ready: OrderedDict[Hashable, None] = OrderedDict()
        # Set by the first request for the paper's model: only then is it warmed ahead.
        self._paper_asked = False

    # -- inputs --------------------------------------------------------------------------

    def _inputs(self, profile_name: str | None, workload: Workload | None = None) -> _Inputs:
        profile, provenance = self.own()
        if profile_name is not None and profile_name != profile.name:
            if self.profiles is None:
                raise AdviceError("profile", "this receiver uses only its own profile")
            try:
                profile, provenance = self.profiles(profile_name)
            except LookupError as exc:
                raise AdviceError("profile", str(exc)) from None
        k = profile.buffer_packets if self.buffer_packets is None else self.buffer_packets
        host = profile.replace(buffer_packets=k, coalesce_packets=min(self.batch_packets, k))
        return _Inputs(
            profile=profile,
            provenance=provenance,
            # Of the socket this receiver reads (its K may not be the profile's).
            costs=transport.time_slice_costs(provenance, host, buffer_by_send=self.buffer_by_send),
            host=host,
            workload=self.workload(self.cpus) if workload is None else workload,
        )

    @staticmethod
    def _check_paper(host: HostProfile) -> None:
        if not _fits_paper(host):
            raise AdviceError(
                "buffer_packets",
                f"K={host.buffer_packets} is beyond what this receiver advises on with the "
                f"paper's model (at most {MAX_PAPER_BUFFER_PACKETS}); use a smaller --rcvbuf",
            )

    def _check_work(self, host: HostProfile, costs: transport.TimeSliceCosts) -> None:
        # The time-slice chain costs about K * (N * phases)^2 per rate: refuse what would
        # keep this receiver (which serves one sender at a time) busy for seconds.  With
        # send sizes, the largest rate's K and N.
        k, n_batch = host.buffer_packets, host.coalesce_packets
        if costs.send_sizes is not None:
            k, n_batch = costs.send_sizes.largest(host)
        if time_slice_work(k, n_batch) > MAX_ADVICE_WORK:
            raise AdviceError(
                "buffer_packets",
                f"K={k} with N={n_batch} is beyond what this receiver advises on "
                f"(max_advice_work={MAX_ADVICE_WORK}); use a smaller --batch or --rcvbuf, "
                "or --model paper",
            )

    # -- solving ahead ---------------------------------------------------------------------

    def _remember(self, key: Hashable, solved: _Solved) -> _Solved:
        with self._lock:
            kept = self._solved.setdefault(key, solved)
            self._solved.move_to_end(key)
            while len(self._solved) > self.max_solved:
                self._solved.popitem(last=False)
            return kept

    def _lookup(self, key: Hashable) -> _Solved | None:
        with self._lock:
            solved = self._solved.get(key)
            if solved is not None:
                self._solved.move_to_end(key)
            return solved

    def _refine(self, inputs: _Inputs, solved: _Solved, best: int) -> TimeSliceTerms:
        fine = solved.fine.get(best)
        if fine is None:
            fine = inputs.terms(transport.time_slice_refinement(solved.coarse.rate_bps, best))
            with self._lock:
                fine = solved.fine.setdefault(best, fine)
        return fine

    def prepare(
        self,
        workload: Workload | None = None,
        *,
        stop: Callable[[], bool] | None = None,
    ) -> bool:
        """Solve the models for this receiver's own profile and ``workload`` (default:
        the current one) ahead of any request: the time-slice model's coarse grid and the
        refinements that a few reference transfers (30 MB at 1, 10 and 100 ms, 1 GiB at
        100 ms) land in; and, once a sender has asked for the paper's model, that model
        once (which builds its chain's shape and loads its kernels).

        Parameters
        ----------
        workload : Workload, optional
            The workload to solve for.
        stop : callable, optional
            Checked between pieces of 8 chains: True stops early (a whole grid or
            refinement solved is kept; a part of one is not).

        Returns
        -------
        bool
            True if anything was solved.
        """
        inputs = self._inputs(None, workload)
        did = False
        key = inputs.key()
        if self._paper_asked and key not in self._paper_ready and _fits_paper(inputs.host):
            # The paper's model costs milliseconds once its chain's shape is built and
            # its kernels loaded; the first call in a process does both (about a second).
            # A workload with no completing rate for the reference transfer has built
            # them all the same; its answer to a sender names the cause.
            with contextlib.suppress(TransportParameterError):
                self._paper(inputs, *_REFERENCE_TRANSFERS[0])
            with self._lock:
                self._paper_ready[key] = None
                while len(self._paper_ready) > self.max_solved:
                    self._paper_ready.popitem(last=False)
            did = True
        self._check_work(inputs.host, inputs.costs)
        solved = self._lookup(key)
        if solved is None:
            # In pieces of a few chains, so that a blast that starts meanwhile waits for
            # at most one piece (the pieces' terms are each rate's own: merged, they are
            # the whole grid's, bit for bit).
            grid = transport.time_slice_grid(inputs.host.line_rate_bps)
            coarse: TimeSliceTerms | None = None
            for piece in np.array_split(grid, -(-grid.size // _CHAINS_PER_PIECE)):
                if stop is not None and stop():
                    return did
                part = inputs.terms(piece)
                coarse = part if coarse is None else coarse.merged(part)
            assert coarse is not None
            solved = self._remember(key, _Solved(coarse))
            did = True
        for size, delay in _REFERENCE_TRANSFERS:
            if stop is not None and stop():
                break
            best = solved.coarse.best_index(size, delay, self.settle_s)
            if best not in solved.fine:
                self._refine(inputs, solved, best)
                did = True
        return did

    def refine_wanted(self, *, stop: Callable[[], bool] | None = None) -> int:
        """Solve the refinements that answers wanted and did not find; returns how many.

        Parameters
        ----------
        stop : callable, optional
            Checked before each: True leaves the rest for the next call.
        """
        done = 0
        while not (stop is not None and stop()):
            with self._lock:
                if not self._wanted:
                    self.wanted.clear()
                    break
                (key, best), inputs = self._wanted.popitem(last=False)
            solved = self._lookup(key)
            if solved is not None:
                self._refine(inputs, solved, best)
                done += 1
        return done

    # -- answering -------------------------------------------------------------------------

    @staticmethod
    def _paper(inputs: _Inputs, size: int, delay: float) -> tuple[float, float, float]:
        """The paper's model: (rate in bit/s, stationary loss, transfer time in s)."""
        paper = transport.workload_bottleneck_rate(
            inputs.workload, inputs.host, file_size_bytes=size, propagation_delay_s=delay
        )
        best = paper.bottleneck
        return best.rate_bps, best.loss, best.transfer_time_s

    def _time_slice(
        self, inputs: _Inputs, size: int, delay: float
    ) -> tuple[TimeSliceResult, dict[str, Any]]:
        key = inputs.key()
        solved = self._lookup(key)
        ready = solved is not None
        if solved is None:
            # Nothing solved for this host and workload yet: solve it now, and keep it.
            solved = self._remember(
                key, _Solved(inputs.terms(transport.time_slice_grid(inputs.host.line_rate_bps)))
            )
        best = solved.coarse.best_index(size, delay, self.settle_s)
        fine = solved.fine.get(best)
        if fine is None and not ready:
            fine = self._refine(inputs, solved, best)
        if fine is None:
            # The coarse grid's answer now; the refinement in the background, for the next.
            with self._lock:
                self._wanted[(key, best)] = inputs
                self.wanted.set()
            return solved.coarse.play(size, delay, self.settle_s), {
                "ready": True,
                "refined": False,
            }
        result = solved.coarse.merged(fine).play(size, delay, self.settle_s)
        return result, {"ready": ready, "refined": True}

    def __call__(self, file_size_bytes: int, request: Any) -> RateAdvice:
        """Advice for a file of ``file_size_bytes`` and the sender's ``request``.

        The answer's extra fields: ``ready`` (False: nothing was solved ahead for this
        workload, and the sender waited for a solve), ``refined`` (False: the coarse
        grid's best rate, a grid step of the line rate / 32 from the refined one),
        ``advice_s`` (the time the answer took, s), ``profile_kind`` and
        ``profile_age_s`` (how and how long ago the profile was made) and what
        ``workload_info`` says.

        Raises
        ------
        AdviceError
            A malformed request or an unknown profile name.
        """
        started = time.perf_counter()
        delay, profile_name, model = parse_advice_request(request)
        inputs = self._inputs(profile_name)
        size = max(int(file_size_bytes), 1)
        state: dict[str, Any]
        if model == "paper":
            self._paper_asked = True
            self._check_paper(inputs.host)
            rate, loss, t = self._paper(inputs, size, delay)
            state = {"ready": inputs.key() in self._paper_ready, "refined": True}
        else:
            self._check_work(inputs.host, inputs.costs)
            ts, state = self._time_slice(inputs, size, delay)
            rate, loss, t = ts.rate_bps, ts.first_round_loss, ts.transfer_time_s
        extra: dict[str, Any] = {
            **state,
            "profile_kind": profile_kind(inputs.provenance),
            "profile_age_s": profile_age_s(inputs.provenance, time.time()),
        }
        if self.workload_info is not None:
            extra.update(self.workload_info())
        extra["advice_s"] = time.perf_counter() - started
        return RateAdvice(
            rate_bps=float(rate),
            predicted_loss=float(loss),
            predicted_time_s=float(t),
            model=model,
            profile=inputs.profile.name,
            workload=inputs.workload,
            buffer_packets=inputs.host.buffer_packets,
            coalesce_packets=inputs.host.coalesce_packets,
            propagation_delay_s=delay,
            time_slice_s=inputs.costs.time_slice_s,
            computed_by=self.name,
            extra=extra,
        )
