"""Compiled form of the fixed-batch recursion of :mod:`queues._fixed` (linear domain).

The recursion runs down the K levels one at a time, so in NumPy it costs a handful of
small array operations per level whatever the number of rates; for deep buffers
(K in the thousands) that overhead is most of the time. Numba runs the same arithmetic,
in the same order, as one loop nest.  :func:`linear_loss` is the loss-only form the
transfer-time search calls: it keeps one block of levels and the running total instead
of the whole table, and rescales instead of leaving deep buffers to the log domain.
:func:`queues._fixed.linear_loss_numpy` is its NumPy twin (the same doubles).
"""

from __future__ import annotations

import numpy as np
from numba import njit
from numpy.typing import NDArray

# Numba freezes these globals into the cached machine code and does not notice a change in
# another file: after editing them in queues._fixed_numpy, clear this module's Numba cache.
from ._fixed_numpy import MAX_SCALED_RATIO, SCALE_BITS


@njit(cache=True, nogil=True, inline="always")
def _block_suffix(
    levels: NDArray[np.float64],
    first: int,
    served: int,
    suffix: NDArray[np.float64],
    running: NDArray[np.float64],
) -> None:
    """``suffix[j] = sum of levels[first + j : first + served]`` per rate (0 for
    ``j >= served``), then ``running`` reset to 0 for the new block's prefix sum.

    Rows ``first .. first + N - 1`` of ``levels`` hold the last block's N levels (an
    offset rather than a slice: Numba vectorises loops over whole C-ordered arrays
    only); the rates are the inner loop so that every loop runs along contiguous rows.
    ``running`` is the accumulator.
    """
    N, R = suffix.shape
    for r in range(R):
        running[r] = 0.0
    for j in range(N - 1, -1, -1):
        if j < served:
            for r in range(R):
                running[r] += levels[first + j, r]
                suffix[j, r] = running[r]
        else:
            for r in range(R):
                suffix[j, r] = running[r]
    for r in range(R):
        running[r] = 0.0


@njit(cache=True, nogil=True)
def linear_recursion(ratio: NDArray[np.float64], K: int, N: int) -> NDArray[np.float64]:
    """Unnormalised ``pi(n)`` with ``pi(K) = 1``, shape (K + 1, R), row n = level n.

    ``ratio`` is ``mu / lam`` per rate; the recursion (a running prefix sum plus a
    reversed cumulative suffix of the previous block) is derived in :mod:`queues._fixed`.
    """
    R = ratio.shape[0]
    P = np.empty((K + 1, R))  # row d holds pi(K - d)
    last_served = K - N
    running = np.ones(R)
    suffix = np.zeros((N, R))  # zero until the first block is complete
    for r in range(R):
        P[0, r] = 1.0
    for d in range(1, K + 1):
        t = d % N
        if t == 0:
            _block_suffix(P, d - N, last_served - (d - N) + 1, suffix, running)
        for r in range(R):
            value = ratio[r] * (running[r] + suffix[t, r])
            P[d, r] = value
            if d <= last_served:
                running[r] += value
    out = np.empty((K + 1, R))
    for d in range(K + 1):
        for r in range(R):
            out[K - d, r] = P[d, r]
    return out


@njit(cache=True, nogil=True)
def linear_loss(
    arrival_rate: NDArray[np.float64], service_rate: float, K: int, N: int
) -> NDArray[np.float64]:
    """``pi(K)`` alone, per rate, by the recursion of :func:`linear_recursion`.

    The loss needs only ``pi(K) = 1 / sum_n pi(n)`` of the unnormalised recursion, so
    the kernel keeps the last block of ``N`` levels and a running total instead of the
    (K + 1, R) table: one pass, no normalisation pass, and memory O(N * R) (the
    transfer-time search calls this a few times per request with a few hundred rates).
    The rates stay the inner loop, as in :func:`linear_recursion`, so the arithmetic
    vectorises across them.

    Deep buffers take the same pass: a rate whose total passes ``2**SCALE_BITS`` has all
    its values multiplied by ``2**-SCALE_BITS`` (exact: a power of two) and the count
    kept; values that fall below the smallest double count for less than its share of a
    total of at least 1.  Only rates with ``mu / lam >= MAX_SCALED_RATIO`` are not
    computed: their entry is NaN, for the caller's log-domain recursion.
    """
    R = arrival_rate.shape[0]
    ratio = np.empty(R)
    linear = np.empty(R, dtype=np.bool_)
    for r in range(R):
        value = service_rate / arrival_rate[r]
        linear[r] = value < MAX_SCALED_RATIO
        # Outside, the ratio is replaced by 1 so that the loop below stays branch-free
        # across rates; those entries are overwritten with NaN.
        ratio[r] = value if linear[r] else 1.0
    last_served = K - N
    block = np.empty((N, R))  # block[t] holds pi(K - d) for the current block's d
    suffix = np.zeros((N, R))  # zero until the first block is complete
    running = np.ones(R)
    total = np.ones(R)  # pi(K) = 1 is the first term
    scaled = np.zeros(R, dtype=np.int64)  # how many times each rate was rescaled
    top = 2.0**SCALE_BITS
    down = 2.0**-SCALE_BITS
    for r in range(R):
        block[0, r] = 1.0
    for d in range(1, K + 1):
        t = d % N
        if t == 0:
            _block_suffix(block, 0, last_served - (d - N) + 1, suffix, running)
        # Two loops rather than a test per rate, so that each vectorises.
        if d <= last_served:
            for r in range(R):
                value = ratio[r] * (running[r] + suffix[t, r])
                block[t, r] = value
                total[r] += value
                running[r] += value
        else:
            for r in range(R):
                value = ratio[r] * (running[r] + suffix[t, r])
                block[t, r] = value
                total[r] += value
        large = False
        for r in range(R):
            large |= total[r] > top
        if large:
            for r in range(R):
                if total[r] > top:
                    for j in range(N):
                        block[j, r] *= down
                        suffix[j, r] *= down
                    running[r] *= down
                    total[r] *= down
                    scaled[r] += 1
    out = np.empty(R)
    for r in range(R):
        if not linear[r]:
            out[r] = np.nan
            continue
        loss = 1.0 / total[r]
        for _ in range(scaled[r]):
            loss *= down
        out[r] = loss
    return out
