"""Fixed-batch M/M[N]/1/K: exact stationary distribution by an all-positive recursion.

The chain is one-dimensional on ``n = 0..K``: ``n -> n+1`` at ``lam`` (``n < K``) and
``n -> n-N`` at ``mu`` (``n >= N``).  Transitions only go up by one, so the flow across
the cut between ``{0..n}`` and ``{n+1..K}`` gives, for ``n = K-1, ..., 0``::

    lam * pi(n) = mu * sum_{j=n+1}^{min(n+N, K)} pi(j) * [j >= N]

Starting from ``pi(K) = 1`` every ``pi(n)`` is ``mu/lam`` times a sum of positive
numbers already computed: no subtraction, so no cancellation, and the relative error
grows at most linearly with ``K``.  The sliding window sum is kept subtraction-free too:
with the states taken in blocks of ``N`` from the top, the window of state ``n`` is a
prefix of the current block (a running sum) plus a suffix of the previous block (a
reversed cumulative sum, formed once per block).  The cost is O(K * rates).

When ``K`` is large and ``mu/lam`` is far from 1, ``pi(n)/pi(K)`` spans more than the
double range.  The whole distribution (:func:`fixed_batch_distribution`) computes those
rates in the log domain (``logaddexp`` instead of ``+``) with the same recursion, a
cheap a-priori bound picking the domain per rate.  The loss alone
(:func:`fixed_batch_loss`, what the transfer-time search calls) needs no log domain: it
multiplies a rate's running values by ``2**-SCALE_BITS`` (exact) whenever their total
would leave the double range, which is both faster (one compiled pass,
:mod:`queues._fixed_kernel`, or K NumPy vector steps) and more accurate (3e-14 relative
against 40-digit arithmetic at K = 1,736 where the log domain was off by 1.9e-12).
"""

from __future__ import annotations

import contextlib
import math
import sys
from collections.abc import Iterator

import numpy as np
from numpy.typing import NDArray

from ._fixed_numpy import MAX_SCALED_RATIO, SCALE_BITS, linear_loss_numpy

__all__ = [
    "MAX_SCALED_RATIO",
    "NUMPY_MAX_LEVELS",
    "SCALE_BITS",
    "compiled_kernels_preferred",
    "fixed_batch_distribution",
    "fixed_batch_loss",
    "forced_kernels",
    "linear_loss_numpy",
]

# The linear-domain recursion is used only when the bounds below keep every
# unnormalised value within exp(+-LINEAR_DOMAIN_LIMIT) of pi(K) = 1 (doubles reach exp(709)).
LINEAR_DOMAIN_LIMIT = 650.0

#: Deepest buffer (levels K) whose loss recursion runs in NumPy in a process that has not
#: loaded Numba: K vector steps over the rates, about 1.5 ms for K = 256 and 500 rates,
#: against about 0.4 s to import Numba and load the compiled kernel from its cache.
NUMPY_MAX_LEVELS = 256


# Set by forced_kernels (tests and benchmarks); None: the rule below.
_forced: bool | None = None


@contextlib.contextmanager
def forced_kernels(compiled: bool) -> Iterator[None]:
    """Within the block, every search and loss of this process uses the compiled kernels
    (``True``) or the NumPy ones (``False``) whatever the rule: for tests and
    benchmarks that compare the two.  Process-wide, so not for concurrent use."""
    global _forced
    previous, _forced = _forced, compiled
    try:
        yield
    finally:
        _forced = previous


def compiled_kernels_preferred(levels: int) -> bool:
    """Whether the compiled (Numba) loss kernel is the faster choice here and now.

    A long-lived process (the service, its workers) loads Numba at start, so its kernels
    cost nothing more; a one-shot command (``blastrate rate``) would spend most of its
    time loading them.  So: the compiled kernel when this process has loaded Numba, or
    for buffers deeper than :data:`NUMPY_MAX_LEVELS`; the NumPy recursion otherwise.
    Both run the same arithmetic in the same order (tested equal to the last bit).
    """
    if _forced is not None:
        return _forced
    return "numba" in sys.modules or levels > NUMPY_MAX_LEVELS


def fixed_batch_distribution(
    arrival_rate: NDArray[np.float64], service_rate: float, capacity: int, batch: int
) -> NDArray[np.float64]:
    """Stationary distribution of the fixed-batch M/M[N]/1/K queue, one column per rate.

    Parameters
    ----------
    arrival_rate : ndarray, shape (R,)
        Packet arrival rates lam (packets/s), all > 0.
    service_rate : float
        Batch service rate mu (interrupts/s), > 0.
    capacity : int
        Buffer size K (packets, including those in service), ``K >= batch``.
    batch : int
        Batch size N (packets per interrupt), >= 1.

    Returns
    -------
    ndarray, shape (K + 1, R)
        ``P[n, i]``: probability of ``n`` packets in the buffer at rate ``arrival_rate[i]``;
        each column sums to 1.
    """
    K, N = capacity, batch
    log_ratio = np.log(service_rate) - np.log(arrival_rate)  # log(mu / lam), never overflows
    # Going down from pi(K) = 1: pi(n) <= ratio*N * max(window), so values stay below
    # max(1, ratio*N)^K; and pi(n) >= ratio * pi(n+1) for n >= N-1 (pi(n) >= ratio*pi(N)
    # below), so they stay above min(1, ratio)^(K+1).
    grow = K * np.maximum(log_ratio + math.log(N), 0.0) + math.log(K + 1)
    shrink = (K + 1) * np.maximum(-log_ratio, 0.0)
    linear = (grow < LINEAR_DOMAIN_LIMIT) & (shrink < LINEAR_DOMAIN_LIMIT)
    out = np.empty((K + 1, log_ratio.size))
    if linear.all():
        out[:] = _linear(service_rate / arrival_rate, K, N)
    elif not linear.any():
        out[:] = _logarithmic(log_ratio, K, N)
    else:
        out[:, linear] = _linear(service_rate / arrival_rate[linear], K, N)
        out[:, ~linear] = _logarithmic(log_ratio[~linear], K, N)
    return out


def fixed_batch_loss(
    arrival_rate: NDArray[np.float64], service_rate: float, capacity: int, batch: int
) -> NDArray[np.float64]:
    """``pi(K)`` of the fixed-batch M/M[N]/1/K queue, one entry per rate.

    The same recursion as :func:`fixed_batch_distribution`, without building the
    distribution: one pass that keeps only the last block of levels and the running
    total (:func:`queues._fixed_kernel.linear_loss`, or its NumPy twin), rescaled by
    powers of two where a deep buffer would overflow, so every rate but those with
    ``mu / lam >= MAX_SCALED_RATIO`` (the log-domain recursion) stays in it.  Rates in the
    linear domain of :func:`fixed_batch_distribution` get the same doubles as before
    the rescaling existed.

    Parameters
    ----------
    arrival_rate : ndarray, shape (R,)
        Packet arrival rates lam (packets/s), all > 0.
    service_rate : float
        Batch service rate mu (interrupts/s), > 0.
    capacity : int
        Buffer size K (packets), ``K >= batch``.
    batch : int
        Batch size N (packets per interrupt), >= 1.

    Returns
    -------
    ndarray, shape (R,)
        The probability that the buffer is full, per rate.
    """
    lam = np.ascontiguousarray(arrival_rate, dtype=np.float64)
    if compiled_kernels_preferred(capacity):
        from ._fixed_kernel import linear_loss

        loss = linear_loss(lam, float(service_rate), capacity, batch)
    else:
        loss = linear_loss_numpy(lam, float(service_rate), capacity, batch)
    outside = np.isnan(loss)
    if outside.any():
        log_ratio = np.log(service_rate) - np.log(lam[outside])
        loss[outside] = _logarithmic(log_ratio, capacity, batch)[capacity]
    return loss


def _linear(ratio: NDArray[np.float64], K: int, N: int) -> NDArray[np.float64]:
    from ._fixed_kernel import linear_recursion

    P = linear_recursion(np.ascontiguousarray(ratio, dtype=np.float64), K, N)
    P /= P.sum(axis=0)
    return P


def _logarithmic(log_ratio: NDArray[np.float64], K: int, N: int) -> NDArray[np.float64]:
    R = log_ratio.size
    L = np.empty((K + 1, R))
    L[0] = 0.0
    last_served = K - N
    running = np.zeros(R)  # log of the running sum; starts at log(pi(K)) = 0
    suffix: NDArray[np.float64] | None = None
    window = np.empty(R)
    for d in range(1, K + 1):
        t = d % N
        if t == 0:
            block = L[d - N : d]
            served = last_served - (d - N) + 1
            if served < N:
                block = block.copy()
                block[max(served, 0) :] = -np.inf
            suffix = np.logaddexp.accumulate(block[::-1], axis=0)[::-1]
            running[:] = -np.inf
        row = L[d]
        if suffix is None:
            np.add(log_ratio, running, out=row)
        else:
            np.logaddexp(running, suffix[t], out=window)
            np.add(log_ratio, window, out=row)
        if d <= last_served:
            np.logaddexp(running, row, out=running)
    L = L[::-1]
    L -= L.max(axis=0)
    P = np.exp(L)
    P /= P.sum(axis=0)
    return P
