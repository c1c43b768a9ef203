"""The effective bottleneck rate: the sending rate in (0, line rate] that minimises T.

T(B_send) is not smooth: ``ceil(N_resend)`` makes it jump up each time ``N_resend``
crosses an integer, so it is a sawtooth whose teeth can hold local minima right before a
jump (the infimum of a tooth is approached from one side and, with ``ceil``, attained at
the left end of the jump when the loss rises with the rate).  A local descent from one
start would stop in whichever tooth it started in, so the search is global, a
branch-and-bound over cells of the rate axis:

1. Coarse scan: T on a fixed grid of 256 equally spaced rates ``L k / 256`` plus the
   plotting grid ``L k / curve_points``, all in one vectorised call of the loss function.
   Consecutive scanned rates (and 0) delimit the first cells.
2. Bound: T(B, l) decreases with the rate B at a fixed loss and increases with the loss l
   at a fixed rate, so when the loss is monotone in the rate no rate in a cell ``[a, b]``
   does better than ``T(b, min(l(a), l(b)))``: the formula at the right end with the
   smaller end loss.  This costs no loss evaluation.  (For the first cell ``(0, r1]``
   the no-traffic limit, loss 0, stands in for ``l(0)``: a bound for any loss.)
3. Prune and split: a cell is worth splitting only if its bound does not exceed the best
   T evaluated so far, and if it can beat its own two ends at all: either it holds a
   jump (``ceil(N_resend)`` or the ``completes`` flag differs at its ends: the lower side
   of a jump can dip below both), or one of its ends is a local minimum of the samples
   (a smooth dip).  Those cells are cut into 8, the 7 new rates of all of them evaluated
   in one vectorised loss call.  Repeat until no such cell is wider than the resolution:
   0.1 Mbps (1e5 bit/s), or 1e-4 of the line rate if that is finer.  At most 64 cells
   (the lowest bounds) are split per pass, which bounds the cost for pathological loss
   curves.
4. Answer: the evaluated rate with the smallest T (ties: the lowest rate) -- an actual
   evaluated point, so T is attained there, never an extrapolated infimum.

Every tooth of the sawtooth is either refined or ruled out by its bound.  The search can
only miss a dip of T that starts and ends between two neighbouring coarse rates (0.4% of
the line rate apart) with the same ``ceil(N_resend)`` at both: that takes a loss curve
that turns sharply inside one such cell.

Everything is deterministic (fixed grids, no random starts), so the same inputs give the
same rate bit for bit.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable
from dataclasses import dataclass
from types import ModuleType
from typing import Any, Literal

import numpy as np
from numpy.typing import ArrayLike, NDArray

import queues
from queues import compiled_kernels_preferred

from . import _validation as check
from .curve import TransferCurve
from .errors import NoCompletingRateError, TransportParameterError
from .rbudp import (
    DEFAULT_HEADER_BYTES,
    DEFAULT_PACKET_PAYLOAD_BYTES,
    TransferTerms,
    total_size_bytes,
)

__all__ = [
    "MAX_CURVE_POINTS",
    "BottleneckRate",
    "LossFunction",
    "TransferCurve",
    "bulk_queue_bottleneck_rate",
    "effective_bottleneck_rate",
]

#: A vectorised loss model: sending rates (bit/s, 1-D float array) -> loss probabilities.
LossFunction = Callable[[NDArray[np.float64]], ArrayLike]

# Coarse scan size: 3.9 Mbps spacing at 1 Gbps.  It only seeds the branch-and-bound, but
# it also fixes where the refinement looks first, so it is a constant (reproducibility).
_COARSE_POINTS = 256
# Each surviving cell is cut into this many: 1 Gbps needs two passes to get from 3.9 Mbps
# to 0.1 Mbps, 10 Gbps three.
_SPLIT = 8
# At most this many cells are split per pass (the lowest bounds first).  Usually a handful
# survive (two per local minimum, plus the teeth whose bound is within reach); a long
# sawtooth of near-equal teeth can exceed this, and then the teeth with the lowest
# bounds are the ones refined.
_MAX_SPLIT_CELLS = 64
# Target cell width: 0.1 Mbps (the reproducibility promised to users) ...
_RESOLUTION_BPS = 1e5
# ... or this fraction of the line rate when finer (slow links), ...
_RESOLUTION_RELATIVE = 1e-4
# ... but never below what doubles can still separate near the line rate.
_RESOLUTION_FLOOR_RELATIVE = 1e-9
# Each pass divides the widths by 8 (at most ~8 passes); this cap only guards against a
# logic error.
_MAX_PASSES = 64
# Scan grids are cached for curves up to this many points (at most 64 grids of ~35 kB).
_CACHED_CURVE_POINTS = 2_000
# Where the new rates sit inside a split cell, as fractions of its width.
_SPLIT_AT = np.arange(1, _SPLIT) / _SPLIT
# The compiled search of bulk_queue_bottleneck_rate holds a block of N levels per rate,
# but its scan is checked like the general one's loss call: past this many rates x
# levels, the general search (and the queue's own limits) take over.
_COMPILED_MAX_CELLS = 5_000_000
# Status codes of _kernels.exponential_search.
_OUTSIDE_LINEAR_DOMAIN = 1
_NEVER_COMPLETES = 2
#: Most points a curve T(B_send) may have (points).
MAX_CURVE_POINTS = 100_000


@dataclass(frozen=True)
class BottleneckRate:
    """The effective bottleneck rate and the transfer there.

    Attributes
    ----------
    rate_bps : float
        The sending rate B_send that minimises T (bit/s), in (0, line_rate_bps].
    transfer_time_s : float
        T at that rate (s); always finite.
    loss : float
        Loss probability at that rate (dimensionless), < 1.
    n_resend : float
        ``N_resend`` at that rate (real-valued, >= 0).
    rounds : int
        ``ceil(N_resend) + 1``: the first blast plus the resend rounds.
    first_blast_s, resend_s, feedback_s : float
        The three terms of T at that rate (s).
    limited_by : {"end-system", "line-rate"}
        ``"line-rate"`` when the optimum is within ``resolution_bps`` of the line rate (the
        link, not the receiving host, is what stops a faster transfer); otherwise
        ``"end-system"``.
    line_rate_bps : float
        Upper end of the searched interval (bit/s).
    resolution_bps : float
        Width (bit/s) to which the search cells were refined: 1e5 (0.1 Mbps), or
        ``1e-4 * line_rate_bps`` if smaller.
    loss_evaluations : int
        Number of rates passed to the loss function in total.
    curve : TransferCurve
        T(B_send) on ``curve_points`` equally spaced rates, for plotting.
    """

    rate_bps: float
    transfer_time_s: float
    loss: float
    n_resend: float
    rounds: int
    first_blast_s: float
    resend_s: float
    feedback_s: float
    limited_by: Literal["end-system", "line-rate"]
    line_rate_bps: float
    resolution_bps: float
    loss_evaluations: int
    curve: TransferCurve

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready form (the curve via :meth:`TransferCurve.to_dict`); no infinity."""
        return {
            "rate_bps": self.rate_bps,
            "transfer_time_s": self.transfer_time_s,
            "loss": self.loss,
            "n_resend": self.n_resend,
            "rounds": self.rounds,
            "first_blast_s": self.first_blast_s,
            "resend_s": self.resend_s,
            "feedback_s": self.feedback_s,
            "limited_by": self.limited_by,
            "line_rate_bps": self.line_rate_bps,
            "resolution_bps": self.resolution_bps,
            "loss_evaluations": self.loss_evaluations,
            "curve": self.curve.to_dict(),
        }


def _steps(levels: int = 0) -> ModuleType:
    """The search's steps: the compiled ones (:mod:`transport._kernels`) where
    :func:`queues.compiled_kernels_preferred` says so for a buffer of ``levels``, their
    NumPy twins (:mod:`transport._kernels_numpy`, the same doubles) otherwise."""
    if compiled_kernels_preferred(levels):
        from . import _kernels as steps
    else:
        from . import _kernels_numpy as steps  # type: ignore[no-redef]
    return steps


def _scan_grid(line_rate: float, n_curve: int) -> tuple[NDArray[np.float64], NDArray[np.intp]]:
    """The coarse scan's rates (ascending, read-only) and where the curve's rates are in it.

    They depend on the line rate and the curve size only, so the usual sizes are built
    once per pair (a bounded cache of small arrays); long curves are built each time.
    """
    if n_curve <= _CACHED_CURVE_POINTS:
        return _cached_scan_grid(line_rate, n_curve)
    return _build_scan_grid(line_rate, n_curve)


@functools.lru_cache(maxsize=64)
def _cached_scan_grid(
    line_rate: float, n_curve: int
) -> tuple[NDArray[np.float64], NDArray[np.intp]]:
    return _build_scan_grid(line_rate, n_curve)


def _build_scan_grid(
    line_rate: float, n_curve: int
) -> tuple[NDArray[np.float64], NDArray[np.intp]]:
    # Both grids are line_rate * (k / n): k / n is exactly 1 at k = n, so they end exactly
    # at the line rate ((line_rate * k) / n could round one ulp above it).
    coarse = line_rate * (np.arange(1, _COARSE_POINTS + 1) / _COARSE_POINTS)
    curve_rates = line_rate * (np.arange(1, n_curve + 1) / n_curve)
    # np.union1d, without the import of numpy.ma that np.unique makes (10 ms of a
    # one-shot command): the sorted values, each once.
    merged = np.sort(np.concatenate([coarse, curve_rates]))
    scan = merged[np.concatenate([[True], merged[1:] != merged[:-1]])]
    scan = scan[scan > 0.0]  # a line rate near the smallest double can underflow k/n
    at = np.searchsorted(scan, curve_rates)
    scan.flags.writeable = False
    at.flags.writeable = False
    return scan, at


def _call_loss(loss: LossFunction, rates: NDArray[np.float64]) -> NDArray[np.float64]:
    """Call the user's loss function and check what comes back."""
    # A copy: a loss function that works in place must not corrupt the search grid.
    raw = loss(rates.copy())
    try:
        values = np.asarray(raw, dtype=np.float64)
    except (TypeError, ValueError) as exc:
        raise TransportParameterError(
            "loss", f"the loss function must return numbers, got {type(raw).__name__} ({exc})"
        ) from None
    if values.ndim == 0:
        # A constant loss (e.g. ``lambda r: 0.0``) is accepted and applies to every rate.
        values = np.full(rates.shape, float(values))
    elif not (values.flags.c_contiguous and values.flags.writeable):
        # A view (np.broadcast_to, a slice, a read-only cache) would make Numba compile
        # another version of every search kernel for that array type.
        values = values.copy()
    if values.shape != rates.shape:
        raise TransportParameterError(
            "loss",
            f"the loss function returned shape {values.shape} for {rates.shape} rates; it "
            "must be vectorised (one loss per rate)",
        )
    valid = values >= 0.0  # False for NaN too: one test on the usual path
    if not valid.all():
        bad = np.isnan(values)
        if bad.any():
            at = float(rates[np.argmax(bad)])
            raise TransportParameterError(
                "loss", f"the loss function returned NaN at send rate {at!r} bit/s"
            )
        i = int(np.argmax(~valid))
        raise TransportParameterError(
            "loss",
            f"the loss function returned {float(values[i])!r} at send rate "
            f"{float(rates[i])!r} bit/s; a loss probability must be >= 0",
        )
    return values


def _cells_to_split(
    steps: ModuleType,
    rates: NDArray[np.float64],
    totals: NDArray[np.float64],
    rounds: NDArray[np.float64],
    low: NDArray[np.float64],
    resolution: float,
) -> NDArray[np.intp]:
    """Indices ``i`` of the cells ``[rates[i], rates[i + 1]]`` worth splitting, ascending.

    The arrays are sorted by rate; entry 0 is rate 0 (T = +inf).  ``low[i]`` is the lower
    bound on T inside cell ``i``: T at its right end with the smaller of its two end
    losses (the module docstring, step 2); the last entry is unused.
    """
    # A cell can beat its two ends only through a jump of ceil(N_resend) inside it (the
    # lower side of a jump dips below both scanned ends: the sawtooth's teeth), or
    # through a smooth dip, which the samples show as a local minimum at one of its ends.
    alive = steps.cells_worth_splitting(rates, totals, rounds, low, resolution)
    if alive.size > _MAX_SPLIT_CELLS:
        # Lowest bounds first; ties by rate so that the choice is deterministic.
        keep = np.lexsort((alive, low[alive]))[:_MAX_SPLIT_CELLS]
        alive = np.sort(alive[keep])
    return alive


def _search_arguments(
    line_rate_bps: float,
    file_size_bytes: int,
    propagation_delay_s: float,
    packet_payload_bytes: int,
    header_bytes: int,
    curve_points: int,
) -> tuple[float, float, int, int, float, float]:
    """The checked line rate (bit/s), delay (s), payload (bytes) and curve size, the
    total bytes on the wire, and the search's resolution (bit/s)."""
    line_rate = check.positive_real(line_rate_bps, "line_rate_bps", "bit/s")
    delay = check.positive_real(propagation_delay_s, "propagation_delay_s", "s")
    size = check.whole_number(file_size_bytes, "file_size_bytes", minimum=1)
    payload = check.whole_number(packet_payload_bytes, "packet_payload_bytes", minimum=1)
    header = check.whole_number(header_bytes, "header_bytes", minimum=0)
    n_curve = check.whole_number(
        curve_points, "curve_points", minimum=2, maximum=MAX_CURVE_POINTS, unit="points"
    )
    total_bytes = float(total_size_bytes(size, packet_payload_bytes=payload, header_bytes=header))
    resolution = max(
        min(_RESOLUTION_BPS, _RESOLUTION_RELATIVE * line_rate),
        _RESOLUTION_FLOOR_RELATIVE * line_rate,
    )
    return line_rate, delay, payload, n_curve, total_bytes, resolution


def _never_completes(scanned: int, line_rate: float, curve: TransferCurve) -> NoCompletingRateError:
    return NoCompletingRateError(
        f"the loss is >= 1 at all {scanned} scanned rates in (0, {line_rate!r}] bit/s: "
        "the transfer never completes at any sending rate",
        curve,
    )


def _limited_by(
    line_rate: float, rate: float, resolution: float
) -> Literal["end-system", "line-rate"]:
    return "line-rate" if line_rate - rate <= resolution else "end-system"


def effective_bottleneck_rate(
    loss: LossFunction,
    *,
    line_rate_bps: float,
    file_size_bytes: int,
    propagation_delay_s: float,
    packet_payload_bytes: int = DEFAULT_PACKET_PAYLOAD_BYTES,
    header_bytes: int = DEFAULT_HEADER_BYTES,
    curve_points: int = 200,
) -> BottleneckRate:
    """The sending rate in (0, line rate] that minimises the RBUDP transfer time.

    A global search robust to the jumps of T (see the module docstring): a coarse
    vectorised scan of 256 rates plus the plotting grid, then a branch-and-bound over the
    cells between scanned rates: cells whose lower bound on T exceeds the best T found are
    dropped, cells holding a jump of ``ceil(N_resend)`` or next to a local minimum are
    split, down to 0.1 Mbps.  The answer is the evaluated rate with the smallest T.

    Parameters
    ----------
    loss : callable
        Vectorised loss model ``loss(send_rate_bps) -> loss probabilities``: takes a 1-D
        float array of sending rates (bit/s) and returns an array of the same shape (or a
        scalar, for a constant loss) of values >= 0, not NaN; values >= 1 mean the transfer
        never completes at that rate.  It is called a few times (one call per pass, 3-5
        in all) with a few hundred rates each, about 1,000 rates in total.  The search's
        guarantee assumes the loss does not decrease as the rate grows (true of a queue's
        loss); for other curves it is a careful heuristic.
    line_rate_bps : float
        Line rate (bit/s), finite and > 0: the upper end of the search interval.
    file_size_bytes : int
        File size (bytes), a whole number >= 1.
    propagation_delay_s : float
        One-way propagation delay T_prop (s), finite and > 0.
    packet_payload_bytes : int, default 1468
        Payload per packet S_pkt (bytes), >= 1.
    header_bytes : int, default 32
        Overhead per packet (bytes), >= 0; S = file size + ceil(file size / S_pkt) * header.
    curve_points : int, default 200
        Number of equally spaced rates ``line_rate * k / curve_points`` in the plotting
        curve, 2..100000.  They are part of the scan, so no plotted point is ever below the
        reported optimum.

    Returns
    -------
    BottleneckRate
        The rate (bit/s), T there (s), the loss, ``n_resend`` and ``rounds`` there, the
        terms of T, ``limited_by`` and the curve.

    Raises
    ------
    TransportParameterError
        (a ``ValueError``) naming the parameter and the reason: invalid sizes, rates or
        delay; a loss that is not callable, returns the wrong shape, NaN or negative values.
    NoCompletingRateError
        (a ``TransportParameterError`` with ``parameter == "loss"``) when the loss is >= 1 at
        every scanned rate, so no rate lets the transfer finish; its ``curve`` attribute
        holds the scanned curve.

    Examples
    --------
    >>> def mm1k(rate_bps, mu=80_000.0, k=64):  # M/M/1/K loss, packets of 1468 bytes
    ...     rho = rate_bps / (8 * 1468) / mu
    ...     return (1 - rho) * rho**k / (1 - rho ** (k + 1))
    >>> best = effective_bottleneck_rate(
    ...     mm1k, line_rate_bps=1e9, file_size_bytes=500_000_000, propagation_delay_s=0.1
    ... )
    >>> best.limited_by
    'end-system'
    """
    if not callable(loss):
        raise TransportParameterError(
            "loss", f"must be a callable loss(send_rate_bps) -> array, got {type(loss).__name__}"
        )
    line_rate, delay, payload, n_curve, total_bytes, resolution = _search_arguments(
        line_rate_bps,
        file_size_bytes,
        propagation_delay_s,
        packet_payload_bytes,
        header_bytes,
        curve_points,
    )

    # 1. Coarse scan, the plotting grid included (one loss call).  Rate 0 heads the
    #    arrays as a cell end that is never evaluated (see scan_cells).  Per point: its
    #    rate, T, loss, rounds, the bound of the cell it starts (the last point starts
    #    none), and where it was evaluated -- an index into the concatenated results of
    #    the passes (-1 for rate 0), so that the terms at the optimum are read back
    #    rather than recomputed.
    steps = _steps()
    scan, at = _scan_grid(line_rate, n_curve)
    scan_loss = _call_loss(loss, scan)
    rates, totals, losses, rounds, low, origin, raw_terms = steps.scan_cells(
        scan, scan_loss, total_bytes, float(payload), delay
    )
    scan_terms = TransferTerms(*raw_terms)
    curve = TransferCurve(
        send_rate_bps=scan[at],
        total_s=scan_terms.total_s[at],
        loss=scan_loss[at],
        completes=scan_terms.completes[at],
    )
    if not scan_terms.completes.any():
        raise _never_completes(scan.size, line_rate, curve)

    # 2.-4. Refine.
    passes = [scan_terms]
    evaluations = scan.size
    for _ in range(_MAX_PASSES):
        alive = _cells_to_split(steps, rates, totals, rounds, low, resolution)
        if alive.size == 0:
            break
        new_rates = steps.split_points(rates, alive, _SPLIT_AT)
        new_loss = _call_loss(loss, new_rates)
        # T at the new points, the bounds of the _SPLIT sub-cells of each split cell,
        # and the merge that keeps the arrays sorted (every new rate lies inside its own
        # cell), in one compiled step.
        rates, totals, losses, rounds, low, origin, raw_terms = steps.refine_cells(
            rates,
            totals,
            losses,
            rounds,
            low,
            origin,
            alive,
            new_rates,
            new_loss,
            evaluations,
            total_bytes,
            float(payload),
            delay,
        )
        passes.append(TransferTerms(*raw_terms))
        evaluations += new_rates.size

    # The best evaluated point; argmin takes the first, i.e. the lowest rate, on a tie.
    i = int(np.argmin(totals))
    rate = float(rates[i])
    j = int(origin[i])
    for at_best in passes:
        if j < at_best.total_s.size:
            break
        j -= at_best.total_s.size
    return BottleneckRate(
        rate_bps=rate,
        transfer_time_s=float(at_best.total_s[j]),
        loss=float(losses[i]),
        n_resend=float(at_best.n_resend[j]),
        rounds=int(at_best.rounds[j]),
        first_blast_s=float(at_best.first_blast_s[j]),
        resend_s=float(at_best.resend_s[j]),
        feedback_s=float(at_best.feedback_s[j]),
        limited_by=_limited_by(line_rate, rate, resolution),
        line_rate_bps=line_rate,
        resolution_bps=resolution,
        loss_evaluations=evaluations,
        curve=curve,
    )


def bulk_queue_bottleneck_rate(
    service_rate: float,
    capacity: int,
    batch: int,
    *,
    line_rate_bps: float,
    file_size_bytes: int,
    propagation_delay_s: float,
    packet_payload_bytes: int = DEFAULT_PACKET_PAYLOAD_BYTES,
    header_bytes: int = DEFAULT_HEADER_BYTES,
    curve_points: int = 200,
) -> BottleneckRate:
    """The effective bottleneck rate into an exponential M/M[N]/1/K NIC queue.

    The same answer, bit for bit, as :func:`effective_bottleneck_rate` with the loss
    ``queues.loss_probability(B / (8 * S_pkt), service_rate, capacity, batch)``, found
    in one compiled call: the scan, every pass of the branch-and-bound and the queue's
    loss recursion run in one loop instead of a Python round trip per pass (half the
    time of the general search on the paper's workloads, ``benchmarks/pipeline.py``).  A rate the
    queue's kernel leaves to the log domain (``mu / lam >= 2**80``), unusual argument
    types and searches of more than a few MB run the general search, which gives the
    same answer.  In a process that has not loaded Numba, buffers of up to
    :data:`queues.NUMPY_MAX_LEVELS` run the general search with the NumPy steps: the
    same doubles, without loading the compiled kernels.

    Parameters
    ----------
    service_rate : float
        Exponential interrupt service rate mu (interrupts/s), > 0.
    capacity : int
        NIC buffer K (packets), ``K >= batch``.
    batch : int
        Coalescing size N (packets per interrupt), >= 1.
    line_rate_bps, file_size_bytes, propagation_delay_s, packet_payload_bytes, \
header_bytes, curve_points
        As :func:`effective_bottleneck_rate`; ``packet_payload_bytes`` S_pkt (bytes) is
        also the packet size of the queue's arrival rate ``lam = B / (8 * S_pkt)``.

    Returns
    -------
    BottleneckRate
        As :func:`effective_bottleneck_rate`.

    Raises
    ------
    TransportParameterError, NoCompletingRateError
        As :func:`effective_bottleneck_rate`.
    queues.QueueParameterError
        Naming the queue parameter at fault, as :func:`queues.loss_probability`.

    Examples
    --------
    A host that services 8,000 interrupts/s, a 64-packet ring, 6 packets per interrupt:

    >>> best = bulk_queue_bottleneck_rate(
    ...     8_000.0, 64, 6, line_rate_bps=1e9, file_size_bytes=500_000_000,
    ...     propagation_delay_s=0.1,
    ... )
    >>> best.limited_by, round(best.rate_bps / 1e6)
    ('end-system', 585)
    """
    bits_per_packet = 8.0 * packet_payload_bytes if type(packet_payload_bytes) is int else 0.0

    def loss(rates_bps: NDArray[np.float64]) -> NDArray[np.float64]:
        return queues.loss_probability(rates_bps / bits_per_packet, service_rate, capacity, batch)

    def general() -> BottleneckRate:
        return effective_bottleneck_rate(
            loss,
            line_rate_bps=line_rate_bps,
            file_size_bytes=file_size_bytes,
            propagation_delay_s=propagation_delay_s,
            packet_payload_bytes=packet_payload_bytes,
            header_bytes=header_bytes,
            curve_points=curve_points,
        )

    # Only plain, valid queue parameters take the compiled path; anything else gets the
    # general search's checks and errors.
    plain = (
        type(capacity) is int
        and type(batch) is int
        and 1 <= batch <= capacity
        and type(service_rate) in (float, int)
        and 0.0 < service_rate < math.inf
        and bits_per_packet > 0.0
    )
    if not plain or not compiled_kernels_preferred(capacity):
        # In a process without Numba, the general search with the NumPy loss is the
        # same answer without loading the compiled kernels.
        return general()
    line_rate, delay, payload, n_curve, total_bytes, resolution = _search_arguments(
        line_rate_bps,
        file_size_bytes,
        propagation_delay_s,
        packet_payload_bytes,
        header_bytes,
        curve_points,
    )
    scan, at = _scan_grid(line_rate, n_curve)
    if scan.size * (capacity + 1) > _COMPILED_MAX_CELLS:
        return general()
    from ._kernels import exponential_search

    status, scan_loss, scan_total, scan_completes, best = exponential_search(
        scan,
        bits_per_packet,
        float(service_rate),
        capacity,
        batch,
        total_bytes,
        float(payload),
        delay,
        resolution,
        _SPLIT_AT,
        _MAX_SPLIT_CELLS,
        _MAX_PASSES,
    )
    if status == _OUTSIDE_LINEAR_DOMAIN:
        return general()
    curve = TransferCurve(
        send_rate_bps=scan[at],
        total_s=scan_total[at],
        loss=scan_loss[at],
        completes=scan_completes[at],
    )
    if status == _NEVER_COMPLETES:
        raise _never_completes(scan.size, line_rate, curve)
    rate = float(best[0])
    return BottleneckRate(
        rate_bps=rate,
        transfer_time_s=float(best[1]),
        loss=float(best[2]),
        n_resend=float(best[3]),
        rounds=int(best[4]),
        first_blast_s=float(best[5]),
        resend_s=float(best[6]),
        feedback_s=float(best[7]),
        limited_by=_limited_by(line_rate, rate, resolution),
        line_rate_bps=line_rate,
        resolution_bps=resolution,
        loss_evaluations=int(best[8]),
        curve=curve,
    )
