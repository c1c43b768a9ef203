"""The time-slice model of a receiving host: the rate that minimises a real RBUDP transfer.

The paper's model (:func:`transport.workload_bottleneck_rate`) lets the receiver share its
CPU with the C CPU-bound tasks by processor sharing and scores each sending rate with the
stationary loss of an M/M[N]/1/K queue.  Measured on a real receiver (README,
"Validation"), two things it leaves out decide the loss:

* **Time slices.**  The scheduler runs the receiver for a slice, then each competitor for
  one; the buffer must hold a whole vacation's arrivals.  With the default socket buffer
  (K of about 90 datagrams) this loses datagrams far below the average drain rate.
* **Finite blasts.**  Each RBUDP round starts on an empty buffer, which absorbs its start;
  resend rounds are short and lose little even where the stationary loss is high.

This model keeps the paper's stage 1 for the receiver's wake-up rate while it runs (the
interrupt service rate with the I/O-bound tasks but no CPU-bound one), puts the C tasks in
a scheduler environment (by default the lag account,
:func:`queues.modulated.lag_environment`: the receiver waits while c = max(0, (C + 1) / m
- 1) competitors run their slices only once it has run a slice beyond its share; or the
rotation, :func:`queues.modulated.time_slice_environment`: its slice, then theirs,
whatever its load), and plays the rounds out:
round r blasts n_r datagrams and loses ``L(n_r) = clip(p_K n_r + lambda D, 0, n_r)``
(:func:`queues.modulated.blast_loss`); the transfer time is the sum over rounds of the
blast, the two one-way delays of the feedback exchange and, for a round that lost
something, the receiver's settle time.
"""

from __future__ import annotations

import math
import threading
from collections import OrderedDict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np
from numpy.typing import NDArray

from host import HostProfile, Workload, interrupt_service_rate
from queues.modulated import (
    ModulatedQueue,
    blast_loss_terms,
    lag_environment,
    time_slice_environment,
)

from . import _validation as check
from .curve import TransferCurve
from .errors import NoCompletingRateError, TransportParameterError
from .models import (
    DEFAULT_SETTLE_S,
    DEFAULT_TIME_SLICE_S,
    MAX_TIME_SLICE_CURVE_WORK,
    MAX_TIME_SLICE_WORK,
    time_slice_work,
)
from .send_sizes import SendSizes, send_sizes_from

__all__ = [
    "DEFAULT_SETTLE_S",
    "DEFAULT_TIME_SLICE_S",
    "MAX_TIME_SLICE_WORK",
    "TimeSliceCosts",
    "TimeSliceCurve",
    "TimeSliceResult",
    "TimeSliceTerms",
    "competitors_per_core",
    "scheduled_competitors",
    "time_slice_bottleneck_rate",
    "time_slice_costs",
    "time_slice_curve_points",
    "time_slice_grid",
    "time_slice_refinement",
    "time_slice_terms",
    "time_slice_with_curve",
    "time_slice_work",
]

_MAX_ROUNDS = 1000
# A curve point's fixed cost in units of time_slice_work (see MAX_TIME_SLICE_CURVE_WORK).
_CURVE_POINT_WORK = 2.0e5
# Points of a curve where none are asked for (the paper's curve's default too).
_DEFAULT_CURVE_POINTS = 200
# Bounds on a calibration read from a free-form provenance; outside them, the default.
_MAX_SLICE_S = 1.0
_MAX_KERNEL_S = 0.01
# Measured competitors: values and length that a calibration can give.
_MIN_COMPETITORS = 1e-3
_MAX_COMPETITORS = 1e3
_MAX_TABLE = 1024
# The mark a calibration stores beside c_C solved under today's receiver cost (each read
# pays a + N b): host.kernel_path.COMPETITORS_COST, written here so that reading a
# profile does not import the calibration's sockets (tests/host pins the two equal).
_COMPETITORS_COST = "per_read"


@dataclass(frozen=True)
class TimeSliceCosts:
    """The time-slice model's calibrated inputs (s), as :func:`time_slice_costs` reads them.

    Attributes
    ----------
    time_slice_s : float
        The scheduler's slice (s).
    kernel_s_per_datagram : float
        The kernel's CPU time per datagram on the receiver's CPU (s).
    wakeup_s : float
        A wake-up's cost beyond its datagrams' (s).
    effective_competitors : tuple of float
        The measured c for 1, 2, ... busy tasks on the receiver's core (empty: c = C).
    scheduler : str
        How the scheduler sends the receiver away (``"lag"``, the default, or
        ``"rotation"``; :func:`time_slice_bottleneck_rate`).  Not calibrated.
    send_sizes : SendSizes or None
        The sender's send size and the socket's capacity against the rate (None: single
        datagrams, K and N as the profile's).
    """

    time_slice_s: float = DEFAULT_TIME_SLICE_S
    kernel_s_per_datagram: float = 0.0
    wakeup_s: float = 0.0
    effective_competitors: tuple[float, ...] = ()
    scheduler: str = "lag"
    send_sizes: SendSizes | None = None

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form (the keywords of :func:`time_slice_bottleneck_rate`)."""
        return {
            "time_slice_s": self.time_slice_s,
            "kernel_s_per_datagram": self.kernel_s_per_datagram,
            "wakeup_s": self.wakeup_s,
            "effective_competitors": list(self.effective_competitors),
            "scheduler": self.scheduler,
            "send_sizes": None if self.send_sizes is None else self.send_sizes.to_dict(),
        }


def time_slice_costs(
    provenance: Mapping[str, Any] | None,
    profile: HostProfile,
    *,
    buffer_by_send: Mapping[int, int] | None = None,
) -> TimeSliceCosts:
    """The time-slice model's calibrated inputs from a stored profile's provenance.

    ``blastrate calibrate`` stores the scheduler's slice as ``time_slice_s``; a
    calibration on the link itself (``benchmarks/validate_transfer.py``) also stores
    ``kernel_s_per_datagram``, ``wakeup_s`` and ``effective_competitors``.  What is
    absent, not a positive number (or above 1 s for the slice, 10 ms for the kernel's cost),
    or (for ``wakeup_s``) not below a whole wake-up's time ``1 / mu_net`` falls back to the
    default: :data:`DEFAULT_TIME_SLICE_S`, 0 and 0; an ``effective_competitors`` that is not
    a list of at most 1,024 numbers in [0.001, 1000], to none.  A table is taken only
    beside ``"competitors_cost": "per_read"``, the receiver cost it was solved under
    (``host.kernel_path.COMPETITORS_COST``); a calibration stored before 2026-11-29 solved
    it for a receiver that skipped its wake-up cost when backlogged, and its c_C, too large
    for today's model, would give too low advice: without the mark, c = C until the host is
    calibrated again.  ``send_sizes`` (:class:`transport.SendSizes`' dict form) is taken
    when it is well formed and describes the profile's socket: its capacity for single
    datagrams is the profile's K (a profile whose K was changed has another socket).

    Parameters
    ----------
    provenance : mapping or None
        The provenance stored with the profile (None for a built-in profile).
    profile : HostProfile
        The profile as it will be used (its ``mu_net``, 1/s, bounds ``wakeup_s``).
    buffer_by_send : mapping of int to int, optional
        The socket that will be read, filled at each send size (a receiver measures its
        own at start): in place of the stored table, beside the stored sender's time
        per call.

    Returns
    -------
    TimeSliceCosts
    """
    stored = provenance or {}

    def number(key: str, upper: float) -> float | None:
        return _bounded_number(stored.get(key), upper)

    wakeup = number("wakeup_s", 1.0) or 0.0
    if wakeup * profile.mu_net >= 1.0:
        wakeup = 0.0  # no wake-up can cost more than its whole time
    # A table solved under another receiver cost is no table: c = C until calibrated again.
    same_cost = stored.get("competitors_cost") == _COMPETITORS_COST
    table = stored.get("effective_competitors") if same_cost else None
    try:
        measured = tuple(_competitor_table(table)) if table else ()
    except TransportParameterError:
        measured = ()
    sent = stored.get("send_sizes")
    if buffer_by_send is not None and isinstance(sent, Mapping):
        sent = {**sent, "buffer_by_send": dict(buffer_by_send)}
    try:
        sends = send_sizes_from(sent)
    except TransportParameterError:
        sends = None
    if sends is not None and sends.buffer_packets(1.0) != profile.buffer_packets:
        sends = None  # the table of another socket
    return TimeSliceCosts(
        time_slice_s=number("time_slice_s", _MAX_SLICE_S) or DEFAULT_TIME_SLICE_S,
        kernel_s_per_datagram=number("kernel_s_per_datagram", _MAX_KERNEL_S) or 0.0,
        wakeup_s=wakeup,
        effective_competitors=measured,
        send_sizes=sends,
    )


def _bounded_number(value: Any, upper: float, lower: float = 0.0) -> float | None:
    """``value`` as a float in (lower, upper], else None (a stored provenance is free-form:
    bools, strings, ints too large for a float and NaN all land here)."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    try:
        x = float(value)
    except OverflowError:
        return None
    return x if math.isfinite(x) and lower < x <= upper else None


def _competitor_table(table: Any) -> NDArray[np.float64]:
    values = list(table) if isinstance(table, list | tuple | np.ndarray) else None
    if values is not None and len(values) <= _MAX_TABLE:
        parsed = [
            _bounded_number(v, _MAX_COMPETITORS, lower=_MIN_COMPETITORS * (1 - 1e-12))
            for v in values
        ]
        if all(x is not None for x in parsed):
            return np.array(parsed, dtype=np.float64)
    raise TransportParameterError(
        "effective_competitors",
        f"must be a list of at most {_MAX_TABLE} numbers in [{_MIN_COMPETITORS:g}, "
        f"{_MAX_COMPETITORS:g}], got {table!r}"[:300],
    )


def scheduled_competitors(
    competitors: float, measured: Sequence[float] | NDArray[np.float64] = ()
) -> float:
    """c as the scheduler makes it: the measured value for a number of busy tasks.

    A backlogged receiver with C busy tasks on its core does not get the 1 / (C + 1) of
    processor sharing: the kernel's work that the scheduler charges to whichever task it
    interrupts, and the preference it gives a waking task, move the share (README,
    "Validation").  ``benchmarks/validate_transfer.py``'s calibration measures
    the share ``1 / (1 + c_C)`` a backlogged receiver gets beside C = 1, 2, ... busy
    loops; this interpolates linearly through ``(0, 0), (1, c_1), (2, c_2), ...`` and
    beyond the last measured ``n`` scales ``c_n / n``.

    Parameters
    ----------
    competitors : float
        c from the workload (:func:`competitors_per_core`), >= 0.
    measured : sequence of float, optional
        c_1, c_2, ... measured for 1, 2, ... busy tasks (each in [0.001, 1000]); empty:
        c unchanged.

    Returns
    -------
    float
        The c the scheduler environment uses (>= 0).
    """
    c = float(competitors)
    table = _competitor_table(measured)
    if table.size == 0 or c <= 0:
        return c
    n = table.size
    if c >= n:
        return c * float(table[-1]) / n
    return float(np.interp(c, np.arange(n + 1), np.r_[0.0, table]))


def competitors_per_core(cpu_tasks: int, cores: int) -> float:
    """c, the CPU-bound tasks that take turns with the receiver on its CPU.

    The receiver and C tasks spread over m CPUs, ``(C + 1) / m`` to a CPU; the receiver
    waits for the others on its own: ``max(0, (C + 1) / m - 1)``.
    """
    return max(0.0, (cpu_tasks + 1) / cores - 1.0)


@dataclass(frozen=True)
class TimeSliceCurve:
    """The model at a set of sending rates.

    Attributes
    ----------
    rate_bps : ndarray
        Sending rates (payload bit/s).
    first_round_loss : ndarray
        Expected fraction of the first blast lost (dimensionless).
    stationary_loss : ndarray
        The buffer's stationary loss probability p_K at each rate.
    transfer_time_s : ndarray
        Expected transfer time (s); ``inf`` where the transfer never completes.
    rounds : ndarray
        Blasts until nothing is missing (expected-value play-out).
    """

    rate_bps: NDArray[np.float64]
    first_round_loss: NDArray[np.float64]
    stationary_loss: NDArray[np.float64]
    transfer_time_s: NDArray[np.float64]
    rounds: NDArray[np.int64]


@dataclass(frozen=True)
class TimeSliceResult:
    """The rate that minimises the modelled transfer time, and how it was found.

    Attributes
    ----------
    rate_bps : float
        The effective bottleneck rate (payload bit/s).
    transfer_time_s : float
        Modelled transfer time at that rate (s).
    first_round_loss : float
        Modelled loss of the first blast at that rate.
    loss_onset_bps : float or None
        Lowest searched rate whose first-round loss exceeds 1 %; None if none does.
    service_rate_per_s : float
        Wake-ups per second while the receiver runs (stage 1 without CPU-bound tasks).
    competitors : float
        c, CPU-bound tasks taking turns with the receiver on its CPU (as scheduled:
        :func:`scheduled_competitors`).
    time_slice_s : float
        The scheduler's slice used (s).
    curve : TimeSliceCurve
        The model at every rate searched.
    inputs : dict
        Everything the result depends on.
    """

    rate_bps: float
    transfer_time_s: float
    first_round_loss: float
    loss_onset_bps: float | None
    service_rate_per_s: float
    competitors: float
    time_slice_s: float
    curve: TimeSliceCurve
    inputs: dict[str, Any] = field(default_factory=dict)

    @property
    def rounds(self) -> int:
        """Blasts at :attr:`rate_bps` (the curve's point nearest to it)."""
        k = int(np.argmin(np.abs(self.curve.rate_bps - self.rate_bps)))
        return int(self.curve.rounds[k])

    @property
    def limited_by(self) -> str:
        """``"line-rate"`` when the answer is the line rate, else ``"end-system"``."""
        line = float(self.inputs["profile"]["line_rate_bps"])
        return "line-rate" if self.rate_bps >= line * (1 - 1e-9) else "end-system"


def _play_rounds(
    rate_bps: NDArray[np.float64],
    p_k: NDArray[np.float64],
    shift: NDArray[np.float64],
    backlog: NDArray[np.float64],
    drain_per_s: NDArray[np.float64],
    packets: int,
    payload_bytes: int,
    delay_s: float,
    settle_s: float,
) -> tuple[NDArray[np.float64], NDArray[np.float64], NDArray[np.int64]]:
    """Expected-value play-out of the rounds at every rate at once (vectorised over rates).

    ``shift`` is lambda * D (datagrams): a blast of n loses clip(p_K n + shift, 0, n).
    ``backlog`` (datagrams) is what a long blast leaves in the buffer, drained at
    ``drain_per_s`` before the receiver can answer.
    """
    n = np.full(rate_bps.shape, float(packets))
    time_s = np.zeros_like(rate_bps)
    rounds = np.zeros(rate_bps.shape, dtype=np.int64)
    first = np.clip(p_k * n + shift, 0.0, n) / n
    live = np.ones(rate_bps.shape, dtype=bool)
    for _ in range(_MAX_ROUNDS):  # rounds, not states: each step is one array operation
        if not live.any():
            break
        lost = np.clip(p_k * n + shift, 0.0, n)
        drain = np.minimum(backlog, n - lost) / drain_per_s
        time_s += np.where(live, n * 8.0 * payload_bytes / rate_bps + 2.0 * delay_s + drain, 0.0)
        time_s += np.where(live & (lost >= 0.5), settle_s, 0.0)
        rounds += live
        n = np.where(live, lost, n)
        live &= n >= 0.5
    time_s[live] = np.inf  # still losing after the last round: never completes
    return first, time_s, rounds


def time_slice_grid(line_rate_bps: float, grid_points: int = 32) -> NDArray[np.float64]:
    """The coarse rates :func:`time_slice_bottleneck_rate` scores first (bit/s):
    ``grid_points`` evenly spaced over (0, line rate]."""
    points = check.whole_number(grid_points, "grid_points", minimum=2, maximum=4096, unit="points")
    line = float(line_rate_bps)
    return np.linspace(line / points, line, points)


def time_slice_refinement(coarse_bps: NDArray[np.float64], best: int) -> NDArray[np.float64]:
    """The 17 rates (bit/s) that refine a coarse grid around its best point ``best``:
    evenly over the two cells beside it."""
    lo = coarse_bps[max(best - 1, 0)]
    hi = coarse_bps[min(best + 1, coarse_bps.size - 1)]
    return np.linspace(lo, hi, 17)


# The arrays of TimeSliceTerms, one value per rate.
_RATE_ARRAYS = (
    "rate_bps",
    "stationary_loss",
    "shift",
    "backlog",
    "drain_per_s",
    "buffer_packets",
    "batch_packets",
)


@dataclass(frozen=True)
class TimeSliceTerms:
    """The time-slice model of one host and workload at a set of rates, before any transfer.

    Solving the scheduler chain at a rate is the model's whole cost; what comes out of it
    depends on the host, its workload and the rate, never on the file or the delay.
    :meth:`play` turns these terms into transfer times for any file and delay with a few
    array operations, so a receiver can solve ahead of time and answer a sender at once.
    Made by :func:`time_slice_terms`.

    Attributes
    ----------
    rate_bps : ndarray
        Sending rates (payload bit/s), ascending.
    stationary_loss : ndarray
        p_K, the buffer's stationary loss probability at each rate.
    shift : ndarray
        lambda * D (datagrams): a blast of n loses ``clip(p_K n + shift, 0, n)``.
    backlog : ndarray
        Datagrams a long blast leaves in the buffer.
    drain_per_s : ndarray
        Datagrams per second at which that backlog drains after the blast.
    service_rate_per_s : float
        Wake-ups per second while the receiver runs.
    competitors : float
        c as scheduled (:func:`scheduled_competitors`).
    time_slice_s : float
        The scheduler's slice (s).
    payload_bytes : int
        File bytes per datagram.
    buffer_packets, batch_packets : ndarray of int
        K and N at each rate (datagrams): the profile's, or with ``send_sizes`` those of
        each rate's send size (:class:`transport.SendSizes`).
    inputs : dict
        Everything the terms depend on.
    """

    rate_bps: NDArray[np.float64]
    stationary_loss: NDArray[np.float64]
    shift: NDArray[np.float64]
    backlog: NDArray[np.float64]
    drain_per_s: NDArray[np.float64]
    service_rate_per_s: float
    competitors: float
    time_slice_s: float
    payload_bytes: int
    buffer_packets: NDArray[np.int64]
    batch_packets: NDArray[np.int64]
    inputs: dict[str, Any] = field(default_factory=dict)

    def merged(self, other: TimeSliceTerms) -> TimeSliceTerms:
        """These terms and ``other``'s (same host and workload) in one set, by rate."""
        if other.inputs != self.inputs:
            raise TransportParameterError("terms", "terms of different hosts or workloads")
        order = np.argsort(np.concatenate([self.rate_bps, other.rate_bps]), kind="stable")
        arrays: dict[str, Any] = {
            name: np.concatenate([getattr(self, name), getattr(other, name)])[order]
            for name in _RATE_ARRAYS
        }
        return replace(self, **arrays)

    def curve(
        self, file_size_bytes: int, propagation_delay_s: float, settle_s: float = 0.0
    ) -> TimeSliceCurve:
        """The model at every rate of these terms for one transfer.

        Parameters
        ----------
        file_size_bytes : int
            File size (bytes), >= 1.
        propagation_delay_s : float
            One-way delay (s), > 0.
        settle_s : float, default 0
            The receiver's wait for stragglers after a lossy blast (s).
        """
        size = check.whole_number(file_size_bytes, "file_size_bytes", minimum=1)
        delay = check.positive_real(propagation_delay_s, "propagation_delay_s", "s")
        packets = -(-size // self.payload_bytes)
        first, t, rounds = _play_rounds(
            self.rate_bps,
            self.stationary_loss,
            self.shift,
            self.backlog,
            self.drain_per_s,
            packets,
            self.payload_bytes,
            delay,
            float(settle_s),
        )
        return TimeSliceCurve(self.rate_bps, first, self.stationary_loss, t, rounds)

    def best_index(
        self, file_size_bytes: int, propagation_delay_s: float, settle_s: float = 0.0
    ) -> int:
        """Index of the rate with the shortest modelled transfer (the first if none
        completes)."""
        times = self.curve(file_size_bytes, propagation_delay_s, settle_s).transfer_time_s
        return int(np.argmin(times))

    def play(
        self, file_size_bytes: int, propagation_delay_s: float, settle_s: float = 0.0
    ) -> TimeSliceResult:
        """The best of these rates for one transfer (see :meth:`curve` for the arguments).

        Raises
        ------
        NoCompletingRateError
            When the transfer does not complete at any of these rates.
        """
        curve = self.curve(file_size_bytes, propagation_delay_s, settle_s)
        completes = np.isfinite(curve.transfer_time_s)
        if not completes.any():
            # Never a transfer that never finishes reported as a number (SPEC section 4).
            raise NoCompletingRateError(
                f"the transfer is still losing datagrams after {_MAX_ROUNDS} rounds at all "
                f"{curve.rate_bps.size} scored rates up to {float(curve.rate_bps[-1])!r} "
                "bit/s: it never completes",
                TransferCurve(
                    curve.rate_bps.copy(),
                    curve.transfer_time_s.copy(),
                    curve.first_round_loss.copy(),
                    completes,
                ),
            )
        best = int(np.argmin(np.where(completes, curve.transfer_time_s, np.inf)))
        lossy = np.flatnonzero(curve.first_round_loss > 0.01)
        return TimeSliceResult(
            rate_bps=float(curve.rate_bps[best]),
            transfer_time_s=float(curve.transfer_time_s[best]),
            first_round_loss=float(curve.first_round_loss[best]),
            loss_onset_bps=float(curve.rate_bps[lossy[0]]) if lossy.size else None,
            service_rate_per_s=self.service_rate_per_s,
            competitors=self.competitors,
            time_slice_s=self.time_slice_s,
            curve=curve,
            inputs={
                **self.inputs,
                "file_size_bytes": int(file_size_bytes),
                "propagation_delay_s": float(propagation_delay_s),
                "settle_s": float(settle_s),
            },
        )


def time_slice_terms(
    workload: Workload,
    profile: HostProfile,
    *,
    rates_bps: NDArray[np.float64],
    time_slice_s: float = DEFAULT_TIME_SLICE_S,
    kernel_s_per_datagram: float = 0.0,
    wakeup_s: float = 0.0,
    wakeup_preemption: bool = False,
    scheduler: str = "lag",
    effective_competitors: Sequence[float] = (),
    slice_stages: int = 3,
    sleep_s: float = 0.0,
    send_sizes: SendSizes | Mapping[str, Any] | None = None,
) -> TimeSliceTerms:
    """Solve the time-slice model's scheduler chain at each of ``rates_bps``.

    The costly half of :func:`time_slice_bottleneck_rate` (one small chain per rate); the
    keywords are its keywords, and :meth:`TimeSliceTerms.play` is the other half.

    Parameters
    ----------
    workload, profile
        As :func:`time_slice_bottleneck_rate`.
    rates_bps : ndarray
        Sending rates (payload bit/s), each > 0.
    time_slice_s, kernel_s_per_datagram, wakeup_s, wakeup_preemption, scheduler, \
effective_competitors, slice_stages, sleep_s, send_sizes
        As :func:`time_slice_bottleneck_rate`.

    Returns
    -------
    TimeSliceTerms
    """
    rates = np.asarray(rates_bps, dtype=np.float64)
    if rates.ndim != 1 or rates.size == 0 or not np.all(np.isfinite(rates) & (rates > 0)):
        raise TransportParameterError(
            "rates_bps", "must be a non-empty list of finite rates > 0 bit/s"
        )
    slice_s = check.positive_real(time_slice_s, "time_slice_s", "s")
    stages = check.whole_number(slice_stages, "slice_stages", minimum=1, maximum=64, unit="stages")
    alone = Workload(
        cpu_tasks=0, io_tasks=workload.io_tasks, cores=workload.cores, disks=workload.disks
    )
    mu = interrupt_service_rate(alone, profile)
    measured = _competitor_table(effective_competitors)
    c = scheduled_competitors(competitors_per_core(workload.cpu_tasks, workload.cores), measured)
    kernel_s = float(kernel_s_per_datagram)
    if not (np.isfinite(kernel_s) and kernel_s >= 0):
        raise TransportParameterError(
            "kernel_s_per_datagram", f"must be finite and >= 0 s, got {kernel_s_per_datagram}"
        )
    wakeup = float(wakeup_s)
    if not (np.isfinite(wakeup) and 0 <= wakeup < 1.0 / mu):
        raise TransportParameterError(
            "wakeup_s",
            f"must be >= 0 s and below a wake-up's whole time 1/mu = {1.0 / mu:.4g} s, "
            f"got {wakeup_s}",
        )
    if scheduler not in ("lag", "rotation"):
        raise TransportParameterError(
            "scheduler", f"must be 'lag' or 'rotation', got {scheduler!r}"[:200]
        )
    if wakeup_preemption and scheduler != "rotation":
        raise TransportParameterError(
            "wakeup_preemption", "applies to scheduler='rotation' only (the lag model has it)"
        )
    sleep = float(sleep_s)
    if not (np.isfinite(sleep) and 0 <= sleep <= wakeup):
        raise TransportParameterError(
            "sleep_s", f"must be >= 0 s and at most wakeup_s = {wakeup:.4g} s, got {sleep_s}"
        )
    sends = send_sizes_from(send_sizes)
    if sends is not None:
        k_top, n_top = sends.largest(profile)
        if time_slice_work(k_top, n_top) > MAX_TIME_SLICE_WORK:
            raise TransportParameterError(
                "send_sizes",
                f"at its largest send size the socket holds K={k_top} and a wake-up takes "
                f"N={n_top}: about {time_slice_work(k_top, n_top):.3g} operations a rate, "
                f"more than {MAX_TIME_SLICE_WORK:g}",
            )
    payload = profile.packet_payload_bytes
    lam = rates / (8.0 * payload)
    # The kernel's share at each rate comes first; the tasks split what is left.
    left = np.clip(1.0 - lam * kernel_s, 1e-6, 1.0)
    p_k, deviation_s = np.empty(lam.size), np.empty(lam.size)
    backlog, drain = np.empty(lam.size), np.empty(lam.size)
    held = np.full(lam.size, profile.buffer_packets, dtype=np.int64)
    batch = np.full(lam.size, profile.coalesce_packets, dtype=np.int64)
    for i in range(lam.size):  # one small chain per rate
        mu_i = mu
        if sends is not None:
            held[i], batch[i] = sends.at(profile, float(rates[i]))
            # A wake-up of n datagrams costs a + n b, b = (1 / mu - a) / N.
            mu_i = 1.0 / (wakeup + batch[i] * (1.0 / mu - wakeup) / profile.coalesce_packets)
        scheduling: dict[str, Any]
        if scheduler == "lag":
            env, idle, service, start = lag_environment(c, slice_s, mu_i * left[i], stages=stages)
            scheduling = {
                "idle_environment": idle,
                "fixed_cost_fraction": wakeup * mu_i,
                "start": start,
            }
        else:
            env, service = time_slice_environment(c, slice_s, mu_i * left[i], stages=stages)
            scheduling = {"idle_holds": wakeup_preemption}
        # A backlogged receiver that skips sleep_s of each wake-up (0 by default) reads
        # that much faster.
        queue = ModulatedQueue(
            env,
            service,
            int(held[i]),
            int(batch[i]),
            backlogged_rates=service * (1.0 / (1.0 - sleep * mu_i)),
            **scheduling,
        )
        terms = blast_loss_terms(queue, lam[i : i + 1])
        p_k[i], deviation_s[i], backlog[i] = (t[0] for t in terms)
        # The backlog drains after the blast, when the kernel has no more arrivals
        # to take its share: at the receiver's whole share of the CPU.
        drain[i] = queue.mean_capacity() / left[i]
    return TimeSliceTerms(
        rate_bps=rates,
        stationary_loss=p_k,
        shift=lam * deviation_s,
        backlog=backlog,
        drain_per_s=drain,
        service_rate_per_s=mu,
        competitors=c,
        time_slice_s=slice_s,
        payload_bytes=payload,
        buffer_packets=held,
        batch_packets=batch,
        inputs={
            "workload": workload.to_dict(),
            "profile": profile.to_dict(),
            "time_slice_s": slice_s,
            "kernel_s_per_datagram": kernel_s,
            "wakeup_s": wakeup,
            "sleep_s": sleep,
            "wakeup_preemption": wakeup_preemption,
            "scheduler": scheduler,
            "effective_competitors": measured.tolist(),
            "slice_stages": stages,
            "send_sizes": None if sends is None else sends.to_dict(),
        },
    )


def time_slice_bottleneck_rate(
    workload: Workload,
    profile: HostProfile,
    *,
    file_size_bytes: int,
    propagation_delay_s: float,
    time_slice_s: float = DEFAULT_TIME_SLICE_S,
    kernel_s_per_datagram: float = 0.0,
    settle_s: float = 0.0,
    wakeup_s: float = 0.0,
    wakeup_preemption: bool = False,
    scheduler: str = "lag",
    effective_competitors: Sequence[float] = (),
    slice_stages: int = 3,
    sleep_s: float = 0.0,
    send_sizes: SendSizes | Mapping[str, Any] | None = None,
    rates_bps: NDArray[np.float64] | None = None,
    grid_points: int = 32,
) -> TimeSliceResult:
    """The effective bottleneck rate of the time-slice model.

    Parameters
    ----------
    workload : Workload
        C, I, m, d of the receiving host (C and m: of the receiver's CPUs).
    profile : HostProfile
        Service rates (1/s), buffer K and batch N (datagrams), line rate (bit/s), payload
        (bytes).
    file_size_bytes : int
        File size (bytes), >= 1.
    propagation_delay_s : float
        One-way delay (s), > 0.
    time_slice_s : float, default 1.5e-3
        The scheduler's slice (s): calibrated (:func:`host.calibration.measure_time_slice`)
        or the kernel's default.
    kernel_s_per_datagram : float, default 0
        CPU time the kernel spends on each datagram in softirq context on the receiver's
        CPU (s).  That work preempts every task, the receiver's competitors included, so
        it is not shared by the scheduler: at lambda datagrams/s it leaves the tasks
        ``1 - lambda * k`` of the CPU.  ``mu_net`` is then the receiver's own wake-up
        rate, kernel work excluded.
    settle_s : float, default 0
        The receiver's wait for stragglers after a lossy blast (s).
    wakeup_s : float, default 0
        CPU time of a wake-up beyond its datagrams' (s): a cost per read, calibrated as
        ``a`` of the fit ``a W + b D`` (wake-ups W, datagrams D).  Under the lag account
        a read of n < N datagrams costs ``wakeup_s + n b`` rather than a whole wake-up's
        ``1 / mu`` (see ``scheduler``).  A read of N costs ``1 / mu`` whether the
        receiver slept before it or found the batch waiting, unless ``sleep_s`` says
        otherwise.
    wakeup_preemption : bool, default False
        True: the receiver's slice runs down only while it has datagrams to take; an idle
        receiver sleeps, keeps its turn (CFS and EEVDF keep a sleeper's lag) and gets the
        CPU back on wake-up (:class:`queues.modulated.ModulatedQueue` ``idle_holds``).
        False: the vacations come regardless of the receiver's own load.  Applies to
        ``scheduler="rotation"`` only (the lag account has its own idle behaviour); with
        ``"lag"``, True is refused.
    scheduler : {"lag", "rotation"}, default "lag"
        How the scheduler sends the receiver away.  ``"lag"``
        (:func:`queues.modulated.lag_environment`): only once it has run a slice ahead of
        its share; a receiver that needs less than its share is served as it wakes, and
        a wake-up that takes n < N datagrams costs ``wakeup_s + n b`` with ``b = (1 / mu
        - wakeup_s) / N`` rather than a full wake-up's ``1 / mu``.  ``"rotation"`` (the
        model scored before, :func:`queues.modulated.time_slice_environment`): a slice,
        then ``c`` others' slices, whatever the receiver's load, and every wake-up costs
        ``1 / mu``.
    effective_competitors : sequence of float, optional
        c measured for 1, 2, ... busy tasks on the receiver's core (each in [0.001, 1000],
        at most 1,024 of them): the scheduler environment uses
        :func:`scheduled_competitors` of the workload's c, so that a backlogged receiver
        gets the share of its core it was measured to get.
        Empty (the default): c from the workload, the processor-sharing share.
    slice_stages : int, default 3
        Erlang stages of the slice and of the vacation (coefficient of variation
        ``1 / sqrt(slice_stages)``).  The kernel's are nearly constant (README,
        ``benchmarks/slice_trace.py``: CV 0.00-0.12 at C = 2, 3); the chain's cost grows
        with about the square of the stages (12 stages: 10 times the time of 3).  At most 64.
    sleep_s : float, default 0
        The part of ``wakeup_s`` that a backlogged receiver skips (s), 0 <= sleep_s <=
        wakeup_s: from N datagrams waiting up, the buffer drains at ``1 / (1 / mu -
        sleep_s)`` wake-ups per second of its CPU instead of mu
        (:class:`queues.modulated.ModulatedQueue` ``backlogged_rates``).  0, the
        default: every read of N costs ``1 / mu``, backlogged or not.  The fit ``a W + b
        D`` measures ``a + N b = 1 / mu`` well and its split poorly (b came out 0-14.6 us
        on one machine's runs), and a backlogged receiver that skipped all of ``a``
        would drain at ``1 / b``: without bound as b goes to 0.  ``sleep_s = wakeup_s``
        was the default until 2026-11-29 (the ablation ``timeslice-skip-wakeup`` of
        ``benchmarks/validate_transfer.py``; docs/validation.md).
    send_sizes : SendSizes or its dict form, optional
        The sender's send size against the rate and the socket's capacity against it
        (:mod:`transport.send_sizes`): each rate is solved with the K and N of its send
        size, and a wake-up of n datagrams costs ``wakeup_s + n b``.  None (the
        default): every datagram arrives on its own, K and N as the profile's.
    rates_bps : ndarray, optional
        Score exactly these rates (bit/s) and take the best of them; default: a grid of
        ``grid_points`` rates over (0, line rate], refined around its best.
    grid_points : int, default 32
        Points of the default grid.

    Returns
    -------
    TimeSliceResult

    Raises
    ------
    NoCompletingRateError
        When the transfer does not complete at any scored rate (the rounds' play-out
        still loses datagrams after its last round).
    """
    size = check.whole_number(file_size_bytes, "file_size_bytes", minimum=1)
    delay = check.positive_real(propagation_delay_s, "propagation_delay_s", "s")
    host: dict[str, Any] = dict(
        time_slice_s=time_slice_s,
        kernel_s_per_datagram=kernel_s_per_datagram,
        wakeup_s=wakeup_s,
        wakeup_preemption=wakeup_preemption,
        scheduler=scheduler,
        effective_competitors=effective_competitors,
        slice_stages=slice_stages,
        sleep_s=sleep_s,
        send_sizes=send_sizes_from(send_sizes),
    )
    if rates_bps is not None:
        terms = _SOLVED.terms(workload, profile, np.asarray(rates_bps, dtype=np.float64), host)
        return terms.play(size, delay, settle_s)
    coarse = _SOLVED.terms(
        workload, profile, time_slice_grid(profile.line_rate_bps, grid_points), host
    )
    best = coarse.best_index(size, delay, settle_s)
    fine = _SOLVED.terms(workload, profile, time_slice_refinement(coarse.rate_bps, best), host)
    return coarse.merged(fine).play(size, delay, settle_s)


class _SolvedTerms:
    """The terms this process solved last, by everything they depend on (an LRU).

    The terms of a host and workload hold for every file and delay: a sweep over file
    sizes or delays, a plot beside an answer, or a service asked the same workload for
    another transfer, solves the coarse grid once and each refinement once, where each
    answer solved 49 chains.  The arrays are made read-only, as they are shared.
    """

    def __init__(self, entries: int) -> None:
        self.entries = entries
        self._lock = threading.Lock()
        self._solved: OrderedDict[Any, TimeSliceTerms] = OrderedDict()

    def terms(
        self,
        workload: Workload,
        profile: HostProfile,
        rates: NDArray[np.float64],
        host: Mapping[str, Any],
    ) -> TimeSliceTerms:
        try:
            measured = tuple(float(c) for c in host["effective_competitors"])
            key = (
                workload,
                profile,
                rates.shape,
                rates.tobytes(),
                tuple({**host, "effective_competitors": measured}.items()),
            )
            hash(key)
        except (TypeError, ValueError):  # an input of an odd type: solved (or refused) uncached
            return time_slice_terms(workload, profile, rates_bps=rates, **host)
        with self._lock:
            found = self._solved.get(key)
            if found is not None:
                self._solved.move_to_end(key)
                return found
        solved = time_slice_terms(workload, profile, rates_bps=rates, **host)
        for name in _RATE_ARRAYS:
            getattr(solved, name).flags.writeable = False
        with self._lock:
            self._solved[key] = solved
            while len(self._solved) > self.entries:
                self._solved.popitem(last=False)
        return solved


#: The process's solved terms: about 2 KB each.
_SOLVED = _SolvedTerms(512)


def time_slice_curve_points(profile: HostProfile, curve_points: int | None = None) -> int:
    """Points of a curve of the time-slice model for ``profile``.

    Each point is a chain of its own: a curve may cost at most
    :data:`transport.MAX_TIME_SLICE_CURVE_WORK`, points times ``max(K (7 (N + 1))^2, 2e5)``.

    Parameters
    ----------
    profile : HostProfile
        Its buffer K and batch N (datagrams) set the cost of a point.
    curve_points : int, optional
        Points asked for, 2 .. 100,000.  None: 200, or as many as the bound allows where
        that is fewer (95 at K = 1,736 and N = 6).

    Returns
    -------
    int

    Raises
    ------
    TransportParameterError
        ``curve_points`` beyond the bound, naming the most this profile allows.
    """
    per_point = max(
        time_slice_work(profile.buffer_packets, profile.coalesce_packets), _CURVE_POINT_WORK
    )
    most = int(MAX_TIME_SLICE_CURVE_WORK // per_point)
    if curve_points is None:
        return max(2, min(_DEFAULT_CURVE_POINTS, most))
    points = check.whole_number(curve_points, "curve_points", minimum=2, maximum=100_000)
    if points > most:
        raise TransportParameterError(
            "curve_points",
            f"{points} points of the time-slice model at K={profile.buffer_packets}, "
            f"N={profile.coalesce_packets} would take about {points * per_point:.4g} "
            f"operations, more than {MAX_TIME_SLICE_CURVE_WORK:.4g}: at most {most} points "
            "here (or model=paper)",
        )
    return points


def time_slice_with_curve(
    workload: Workload,
    profile: HostProfile,
    *,
    file_size_bytes: int,
    propagation_delay_s: float,
    curve_points: int | None = None,
    **keywords: Any,
) -> tuple[TimeSliceResult, TransferCurve]:
    """The time-slice answer and T(B_send) on evenly spaced rates, for a plot or a table.

    The answer is :func:`time_slice_bottleneck_rate`'s, whether or not a curve is asked
    for.  The curve is scored on its own grid, ``line_rate * k / curve_points`` for
    k = 1 .. ``curve_points``.  The model's time against the rate is a sawtooth (a round
    more or fewer), and the search refines around one tooth only, so a point of the curve
    may lie a little below the answer: at most 0.34 % over 75 workloads
    (``benchmarks/timeslice_search.py``).

    Parameters
    ----------
    workload, profile, file_size_bytes, propagation_delay_s
        As :func:`time_slice_bottleneck_rate`.
    curve_points : int, optional
        Points of the curve (:func:`time_slice_curve_points`; default 200, or fewer where
        K and N allow fewer).
    **keywords
        The other keywords of :func:`time_slice_bottleneck_rate` (slice, costs,
        scheduler, settle), except ``rates_bps`` and ``grid_points``.

    Returns
    -------
    result : TimeSliceResult
        The answer.
    curve : TransferCurve
        The transfer time (s, ``inf`` where the transfer never completes) and the first
        blast's loss at each rate of the grid (bit/s).

    Raises
    ------
    NoCompletingRateError
        When the search finds no rate at which the transfer completes.
    TransportParameterError
        ``curve_points`` beyond :data:`transport.MAX_TIME_SLICE_CURVE_WORK`.
    """
    points = time_slice_curve_points(profile, curve_points)
    result = time_slice_bottleneck_rate(
        workload,
        profile,
        file_size_bytes=file_size_bytes,
        propagation_delay_s=propagation_delay_s,
        **keywords,
    )
    grid = np.linspace(profile.line_rate_bps / points, profile.line_rate_bps, points)
    try:
        on_grid = time_slice_bottleneck_rate(
            workload,
            profile,
            file_size_bytes=file_size_bytes,
            propagation_delay_s=propagation_delay_s,
            rates_bps=grid,
            **keywords,
        )
    except NoCompletingRateError as exc:
        # Every point of the grid loses forever, the search's best does not: the curve
        # is drawn as it is.
        assert exc.curve is not None
        return result, exc.curve
    curve = on_grid.curve
    return result, TransferCurve(
        grid,
        curve.transfer_time_s.copy(),
        curve.first_round_loss.copy(),
        np.isfinite(curve.transfer_time_s),
    )
