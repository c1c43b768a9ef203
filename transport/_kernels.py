"""Compiled loops of the transport model: the transfer-time formula and the search's steps.

The formula (:func:`time_terms`, behind :func:`transport.rbudp.transfer_time_terms`)
computes every term of one rate before the next, with the arithmetic of the module
docstring of :mod:`transport.rbudp` in the same order.

A pass of the search of :mod:`transport.rate_search` is: pick the cells to split,
evaluate the user's loss at the new rates (in Python: the loss is any callable), then
evaluate T at them, bound T in each new sub-cell and merge the new points into the
sorted arrays.  In NumPy those steps are some forty small temporaries per pass, which
cost more than the arithmetic at the few hundred rates of a search; here each is one
loop.  The rules are documented in :mod:`transport.rate_search`; the split points and
bounds are the same expressions as there.

One module on purpose: Numba's on-disk cache of a compiled function is not invalidated
when a function it calls changes in *another* file, so the formula and its callers live
together.  :mod:`transport._kernels_numpy` holds the same steps in NumPy, for processes
that have not loaded Numba.
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit
from numpy.typing import NDArray

from queues.compiled import fixed_batch_loss_kernel

# Numba freezes these globals into the cached machine code and does not notice a change
# in another file: after editing _kernels_common, clear this module's Numba cache.
from ._kernels_common import CEIL_RELATIVE_SLACK, SearchArrays, TermArrays


@njit(cache=True, nogil=True)
def time_terms(
    rate_bps: NDArray[np.float64],
    loss: NDArray[np.float64],
    total_bytes: float,
    payload_bytes: float,
    delay_s: float,
) -> TermArrays:
    """First blast, resend, feedback, total (s), N_resend, rounds and ``completes``."""
    n = rate_bps.shape[0]
    first_blast = np.empty(n)
    resend = np.empty(n)
    feedback = np.empty(n)
    total = np.empty(n)
    n_resend = np.empty(n)
    rounds = np.empty(n)
    completes = np.empty(n, dtype=np.bool_)
    # ln(S_pkt / S) <= 0 for any file of more than one packet; a one-packet file needs no
    # resend round, hence the clamp.
    log_ratio = min(math.log(payload_bytes / total_bytes), 0.0)
    bitmap_bytes = total_bytes / (8.0 * payload_bytes)
    for i in range(n):
        byte_rate = rate_bps[i] / 8.0
        done = loss[i] < 1.0
        completes[i] = done
        first_blast[i] = delay_s + total_bytes / byte_rate
        if not done:
            # Infinity only inside the library: the result objects expose `completes`
            # and serialise these entries as None.
            resend[i] = feedback[i] = total[i] = n_resend[i] = rounds[i] = np.inf
            continue
        resends = 0.0
        resent_fraction = 0.0
        resend_rounds = 0.0
        if loss[i] > 0.0 and log_ratio < 0.0:
            log_loss = math.log(loss[i])
            resends = log_ratio / log_loss
            resend_rounds = np.ceil(resends * (1.0 - CEIL_RELATIVE_SLACK))
            # sum_{i=1..n} l * S_{i-1} = S * l * (1 - l**n) / (1 - l); 1 - l**n as
            # -expm1(n ln l) keeps its digits when l**n is close to 1, and 1 - l is exact
            # for l in [0.5, 1) (Sterbenz).
            resent_fraction = loss[i] * -math.expm1(resend_rounds * log_loss) / (1.0 - loss[i])
        n_resend[i] = resends
        rounds[i] = resend_rounds + 1.0
        resend[i] = resends * delay_s + total_bytes * resent_fraction / byte_rate
        feedback[i] = (resends + 1.0) * (bitmap_bytes / byte_rate + delay_s)
        total[i] = first_blast[i] + resend[i] + feedback[i]
    return first_blast, resend, feedback, total, n_resend, rounds, completes


@njit(cache=True, nogil=True)
def cells_worth_splitting(
    rates: NDArray[np.float64],
    totals: NDArray[np.float64],
    rounds: NDArray[np.float64],
    low: NDArray[np.float64],
    resolution: float,
) -> NDArray[np.intp]:
    """Indices ``i`` (ascending) of the cells ``[rates[i], rates[i + 1]]`` that can hold a
    better T than the best evaluated one and are wider than ``resolution`` (bit/s).

    A cell qualifies when its lower bound ``low[i]`` does not exceed the best T, and it
    holds a jump (``rounds`` differs at its ends; inf != finite marks the edge of the
    never-completes region) or one of its ends is a local minimum of the finite samples.
    """
    n = rates.shape[0]
    best = np.inf
    for i in range(n):
        if totals[i] < best:
            best = totals[i]
    at_min = np.zeros(n, dtype=np.bool_)
    for i in range(n):
        t = totals[i]
        before = totals[i - 1] if i > 0 else np.inf
        after = totals[i + 1] if i + 1 < n else np.inf
        at_min[i] = t < np.inf and t <= before and t <= after
    alive = np.empty(max(n - 1, 0), dtype=np.intp)
    count = 0
    for i in range(n - 1):
        if (
            low[i] <= best
            and rates[i + 1] - rates[i] > resolution
            and (rounds[i] != rounds[i + 1] or at_min[i] or at_min[i + 1])
        ):
            alive[count] = i
            count += 1
    return alive[:count]


@njit(cache=True, nogil=True)
def split_points(
    rates: NDArray[np.float64], alive: NDArray[np.intp], split_at: NDArray[np.float64]
) -> NDArray[np.float64]:
    """The new rates: ``left + (right - left) * f`` for each cell in ``alive`` and each
    fraction ``f`` of ``split_at``, cell after cell (ascending)."""
    inner = split_at.shape[0]
    out = np.empty(alive.shape[0] * inner)
    for c in range(alive.shape[0]):
        left = rates[alive[c]]
        width = rates[alive[c] + 1] - left
        for k in range(inner):
            out[c * inner + k] = left + width * split_at[k]
    return out


@njit(cache=True, nogil=True)
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
    """One pass's evaluation and merge, after the loss was evaluated at ``new_rates``.

    Each cell ``alive[c]`` was cut by the ``inner`` rates ``new_rates[c * inner:]`` into
    ``inner + 1`` sub-cells.  Returns the merged, still sorted ``rates``, ``totals``,
    ``losses``, ``rounds``, ``low`` (the bound of the cell each point starts: T at the
    sub-cell's right end with the smaller of its two end losses) and ``origin`` (the new
    points numbered from ``first_origin``), and T's terms at the new points.
    """
    cells = alive.shape[0]
    inner = new_rates.shape[0] // cells
    terms = time_terms(new_rates, new_loss, total_bytes, payload_bytes, delay_s)
    new_total, new_rounds = terms[3], terms[5]
    # Bounds of the sub-cells, cell after cell: sub-cell s ends at point s (the right end
    # of the cell for the last one).
    bound_rates = np.empty(cells * (inner + 1))
    bound_loss = np.empty(cells * (inner + 1))
    for c in range(cells):
        i = alive[c]
        previous = losses[i]
        for s in range(inner + 1):
            if s < inner:
                at, value = new_rates[c * inner + s], new_loss[c * inner + s]
            else:
                at, value = rates[i + 1], losses[i + 1]
            bound_rates[c * (inner + 1) + s] = at
            bound_loss[c * (inner + 1) + s] = min(previous, value)
            previous = value
    sub_low = time_terms(bound_rates, bound_loss, total_bytes, payload_bytes, delay_s)[3]
    n = rates.shape[0] + new_rates.shape[0]
    out_rates = np.empty(n)
    out_totals = np.empty(n)
    out_losses = np.empty(n)
    out_rounds = np.empty(n)
    out_low = np.empty(n)
    out_origin = np.empty(n, dtype=np.intp)
    j = 0
    c = 0
    for i in range(rates.shape[0]):
        out_rates[j] = rates[i]
        out_totals[j] = totals[i]
        out_losses[j] = losses[i]
        out_rounds[j] = rounds[i]
        out_origin[j] = origin[i]
        if c < cells and alive[c] == i:
            # The left end now starts the first sub-cell; the new points follow it.
            out_low[j] = sub_low[c * (inner + 1)]
            j += 1
            for k in range(inner):
                p = c * inner + k
                out_rates[j] = new_rates[p]
                out_totals[j] = new_total[p]
                out_losses[j] = new_loss[p]
                out_rounds[j] = new_rounds[p]
                out_low[j] = sub_low[c * (inner + 1) + k + 1]
                out_origin[j] = first_origin + p
                j += 1
            c += 1
        else:
            out_low[j] = low[i]
            j += 1
    return out_rates, out_totals, out_losses, out_rounds, out_low, out_origin, terms


@njit(cache=True, nogil=True)
def scan_cells(
    scan: NDArray[np.float64],
    scan_loss: NDArray[np.float64],
    total_bytes: float,
    payload_bytes: float,
    delay_s: float,
) -> SearchArrays:
    """The search's arrays after the coarse scan, headed by rate 0, and T's terms there.

    Rate 0 is a cell end that is never evaluated: T is +inf there, and the no-traffic
    limit (loss 0, one round) stands in for the bound and the jump test of the first cell
    ``(0, scan[0]]``.  Returns ``rates``, ``totals``, ``losses``, ``rounds``, ``low``
    (cell ``i`` ends at ``scan[i]``: T there with the smaller of its two end losses) and
    ``origin`` (-1 for rate 0, then the scan's indices), in the layout of
    :func:`refine_cells`.
    """
    n = scan.shape[0]
    terms = time_terms(scan, scan_loss, total_bytes, payload_bytes, delay_s)
    bound_loss = np.empty(n)
    previous = 0.0
    for i in range(n):
        bound_loss[i] = min(previous, scan_loss[i])
        previous = scan_loss[i]
    bounds = time_terms(scan, bound_loss, total_bytes, payload_bytes, delay_s)[3]
    rates = np.empty(n + 1)
    totals = np.empty(n + 1)
    losses = np.empty(n + 1)
    rounds = np.empty(n + 1)
    low = np.empty(n + 1)
    origin = np.empty(n + 1, dtype=np.intp)
    rates[0], totals[0], losses[0], rounds[0], origin[0] = 0.0, np.inf, 0.0, 1.0, -1
    for i in range(n):
        rates[i + 1] = scan[i]
        totals[i + 1] = terms[3][i]
        losses[i + 1] = scan_loss[i]
        rounds[i + 1] = terms[5][i]
        low[i] = bounds[i]
        origin[i + 1] = i
    low[n] = np.inf  # the last point starts no cell
    return rates, totals, losses, rounds, low, origin, terms


@njit(cache=True, nogil=True)
def _lowest_bounds(
    alive: NDArray[np.intp], low: NDArray[np.float64], keep: int
) -> NDArray[np.intp]:
    """The ``keep`` cells of ``alive`` with the lowest bounds (ties: the lower rate),
    ascending: ``np.lexsort((alive, low[alive]))[:keep]``, sorted.  A stable sort by
    bound keeps ``alive``'s ascending order among equal bounds."""
    order = np.argsort(low[alive], kind="mergesort")[:keep]
    return np.sort(alive[order])


@njit(cache=True, nogil=True)
def exponential_search(
    scan: NDArray[np.float64],
    bits_per_packet: float,
    service_rate: float,
    capacity: int,
    batch: int,
    total_bytes: float,
    payload_bytes: float,
    delay_s: float,
    resolution: float,
    split_at: NDArray[np.float64],
    max_split_cells: int,
    max_passes: int,
) -> tuple[int, NDArray[np.float64], NDArray[np.float64], NDArray[np.bool_], NDArray[np.float64]]:
    """The whole search of :func:`transport.rate_search.effective_bottleneck_rate` for the
    exponential NIC queue, its loss computed in the same loop.

    The same steps as the Python loop there, in the same order, with the loss of
    :func:`queues.loss_probability` at ``lam = rate / bits_per_packet`` (its compiled
    linear-domain recursion), so the answer is the same to the last bit.  Returns a
    status -- 0 found, 1 a rate the kernel leaves to the log domain (the caller runs the general
    search, which completes such rates in the log domain), 2 no scanned rate completes --
    the scan's losses, totals and ``completes`` (for the curve), and the answer:
    ``[rate, T, loss, N_resend, rounds, first blast, resend, feedback, evaluations]``.
    """
    summary = np.full(9, np.nan)
    scan_loss = fixed_batch_loss_kernel(scan / bits_per_packet, service_rate, capacity, batch)
    if np.isnan(scan_loss).any():
        return 1, scan_loss, scan_loss, np.zeros(0, dtype=np.bool_), summary
    rates, totals, losses, rounds, low, origin, terms = scan_cells(
        scan, scan_loss, total_bytes, payload_bytes, delay_s
    )
    if not terms[6].any():
        return 2, scan_loss, terms[3], terms[6], summary
    evaluations = scan.shape[0]
    for _ in range(max_passes):
        alive = cells_worth_splitting(rates, totals, rounds, low, resolution)
        if alive.shape[0] == 0:
            break
        if alive.shape[0] > max_split_cells:
            alive = _lowest_bounds(alive, low, max_split_cells)
        new_rates = split_points(rates, alive, split_at)
        new_loss = fixed_batch_loss_kernel(
            new_rates / bits_per_packet, service_rate, capacity, batch
        )
        if np.isnan(new_loss).any():
            return 1, scan_loss, terms[3], terms[6], summary
        rates, totals, losses, rounds, low, origin, _ = refine_cells(
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
            payload_bytes,
            delay_s,
        )
        evaluations += new_rates.shape[0]
    # The first minimum, i.e. the lowest rate on a tie; its terms by the same formula.
    i = np.argmin(totals)
    best = time_terms(rates[i : i + 1], losses[i : i + 1], total_bytes, payload_bytes, delay_s)
    summary[0] = rates[i]
    summary[1] = totals[i]
    summary[2] = losses[i]
    summary[3] = best[4][0]
    summary[4] = best[5][0]
    summary[5] = best[0][0]
    summary[6] = best[1][0]
    summary[7] = best[2][0]
    summary[8] = evaluations
    return 0, scan_loss, terms[3], terms[6], summary
