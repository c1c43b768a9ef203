"""The search's steps of :mod:`transport._kernels` in NumPy, for processes without Numba.

Loading the compiled kernels costs a one-shot command (``blastrate rate``) about half a
second, a thousand times the arithmetic of a paper-sized search.  These functions take
the same arguments and return the same arrays as their compiled namesakes, with the same
arithmetic in the same order per rate, so the same doubles: the logarithms and
``expm1`` are libm's (``math.log``, ``math.expm1``, which the compiled loops call too),
not NumPy's SIMD ones, which differ in the last place for a few inputs in a thousand.
Which set a search uses is :func:`transport.rate_search`'s choice
(:func:`queues.compiled_kernels_preferred`).
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np
from numpy.typing import NDArray

from ._kernels_common import CEIL_RELATIVE_SLACK, SearchArrays, TermArrays

__all__ = ["cells_worth_splitting", "refine_cells", "scan_cells", "split_points", "time_terms"]


def _libm(function: Callable[[float], float], values: NDArray[np.float64]) -> NDArray[np.float64]:
    """``function`` (a ``math`` one) applied to each value, as a float array."""
    return np.fromiter(map(function, values), np.float64, values.shape[0])


def time_terms(
    rate_bps: NDArray[np.float64],
    loss: NDArray[np.float64],
    total_bytes: float,
    payload_bytes: float,
    delay_s: float,
) -> TermArrays:
    """First blast, resend, feedback, total (s), N_resend, rounds and ``completes``."""
    n = rate_bps.shape[0]
    log_ratio = min(math.log(payload_bytes / total_bytes), 0.0)
    bitmap_bytes = total_bytes / (8.0 * payload_bytes)
    byte_rate = rate_bps / 8.0
    completes = loss < 1.0
    first_blast = delay_s + total_bytes / byte_rate
    resends = np.zeros(n)
    resent_fraction = np.zeros(n)
    resend_rounds = np.zeros(n)
    lossy = np.flatnonzero(completes & (loss > 0.0)) if log_ratio < 0.0 else np.zeros(0, int)
    if lossy.size:
        lost = loss[lossy]
        log_loss = _libm(math.log, lost)
        resends[lossy] = log_ratio / log_loss
        resend_rounds[lossy] = np.ceil(resends[lossy] * (1.0 - CEIL_RELATIVE_SLACK))
        # As the compiled loop: l * (1 - l**n) / (1 - l), with 1 - l**n as -expm1(n ln l).
        shrink = _libm(math.expm1, resend_rounds[lossy] * log_loss)
        resent_fraction[lossy] = lost * -shrink / (1.0 - lost)
    resend = resends * delay_s + total_bytes * resent_fraction / byte_rate
    feedback = (resends + 1.0) * (bitmap_bytes / byte_rate + delay_s)
    total = first_blast + resend + feedback
    n_resend = resends
    rounds = resend_rounds + 1.0
    never = ~completes
    for values in (resend, feedback, total, n_resend, rounds):
        values[never] = np.inf
    return first_blast, resend, feedback, total, n_resend, rounds, completes


def cells_worth_splitting(
    rates: NDArray[np.float64],
    totals: NDArray[np.float64],
    rounds: NDArray[np.float64],
    low: NDArray[np.float64],
    resolution: float,
) -> NDArray[np.intp]:
    """Indices of the cells worth splitting, ascending (the compiled namesake's rule)."""
    n = rates.shape[0]
    best = totals.min(initial=np.inf)
    before = np.concatenate([[np.inf], totals[:-1]])
    after = np.concatenate([totals[1:], [np.inf]])
    at_min = (totals < np.inf) & (totals <= before) & (totals <= after)
    cells = slice(0, max(n - 1, 0))
    alive = (
        (low[cells] <= best)
        & (np.diff(rates) > resolution)
        & ((rounds[:-1] != rounds[1:]) | at_min[:-1] | at_min[1:])
    )
    return np.flatnonzero(alive).astype(np.intp)


def split_points(
    rates: NDArray[np.float64], alive: NDArray[np.intp], split_at: NDArray[np.float64]
) -> NDArray[np.float64]:
    """``left + (right - left) * f`` for each cell in ``alive`` and fraction ``f``."""
    left = rates[alive]
    width = rates[alive + 1] - left
    out: NDArray[np.float64] = (left[:, None] + width[:, None] * split_at[None, :]).ravel()
    return out


def refine_cells(
    rates: NDArray[np.float64],
    totals: NDArray[np.float64],
    losses: NDArray[np.float64],
    rounds: NDArray[np.float64],
    low: NDArray[np.float64],
    origin: NDArray[np.intp],
    alive: NDArray[np.intp],
    new_rates: NDArray[np.float64],
    new_loss: NDArray[np.float64],
    first_origin: int,
    total_bytes: float,
    payload_bytes: float,
    delay_s: float,
) -> SearchArrays:
    """One pass's evaluation and merge (the compiled namesake's layout and bounds)."""
    cells = alive.shape[0]
    inner = new_rates.shape[0] // cells
    terms = time_terms(new_rates, new_loss, total_bytes, payload_bytes, delay_s)
    # Sub-cell s of cell c ends at its new point s, the last at the cell's right end;
    # its bound takes the smaller of its two end losses.
    ends_rate = np.column_stack([new_rates.reshape(cells, inner), rates[alive + 1]])
    ends_loss = np.column_stack([new_loss.reshape(cells, inner), losses[alive + 1]])
    starts_loss = np.column_stack([losses[alive], ends_loss[:, :-1]])
    sub_low = time_terms(
        ends_rate.ravel(),
        np.minimum(starts_loss, ends_loss).ravel(),
        total_bytes,
        payload_bytes,
        delay_s,
    )[3].reshape(cells, inner + 1)
    # Each cell's new points go right after its left end, in order.
    at = np.repeat(alive + 1, inner)
    low = low.copy()
    low[alive] = sub_low[:, 0]
    return (
        np.insert(rates, at, new_rates),
        np.insert(totals, at, terms[3]),
        np.insert(losses, at, new_loss),
        np.insert(rounds, at, terms[5]),
        np.insert(low, at, sub_low[:, 1:].ravel()),
        np.insert(origin, at, first_origin + np.arange(new_rates.shape[0])),
        terms,
    )


def scan_cells(
    scan: NDArray[np.float64],
    scan_loss: NDArray[np.float64],
    total_bytes: float,
    payload_bytes: float,
    delay_s: float,
) -> SearchArrays:
    """The search's arrays after the coarse scan, headed by rate 0 (the compiled
    namesake's layout)."""
    n = scan.shape[0]
    terms = time_terms(scan, scan_loss, total_bytes, payload_bytes, delay_s)
    previous = np.concatenate([[0.0], scan_loss[:-1]])
    bounds = time_terms(scan, np.minimum(previous, scan_loss), total_bytes, payload_bytes, delay_s)[
        3
    ]
    return (
        np.concatenate([[0.0], scan]),
        np.concatenate([[np.inf], terms[3]]),
        np.concatenate([[0.0], scan_loss]),
        np.concatenate([[1.0], terms[5]]),
        np.concatenate([bounds, [np.inf]]),
        np.concatenate([[-1], np.arange(n)]).astype(np.intp),
        terms,
    )
