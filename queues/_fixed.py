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
reversed cumulative sum, formed once per block).  The cost is O(K * rates): one compiled
loop nest (:mod:`queues._fixed_kernel`) in the linear domain, a Python loop of K vector
steps in the rarer log domain.

When ``K`` is large and ``mu/lam`` is far from 1, ``pi(n)/pi(K)`` spans more than the
double range; those rates are computed in the log domain (``logaddexp`` instead of ``+``)
with the same recursion.  A cheap a-priori bound picks the domain per rate.
"""

from __future__ import annotations

import math

import numpy as np
from numpy.typing import NDArray

__all__ = ["fixed_batch_distribution", "fixed_batch_loss"]

# The linear-domain recursion is used only when the bounds below keep every
# unnormalised value within exp(+-LINEAR_DOMAIN_LIMIT) of pi(K) = 1 (doubles reach exp(709)).
LINEAR_DOMAIN_LIMIT = 650.0


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

    The same recursion and the same choice of domain per rate as
    :func:`fixed_batch_distribution`, without building the distribution: rates in the
    linear domain go through one compiled pass that keeps only the last block of levels
    and the running total (:func:`queues._fixed_kernel.linear_loss`); the others take the
    log-domain recursion.

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
    from ._fixed_kernel import linear_loss

    lam = np.ascontiguousarray(arrival_rate, dtype=np.float64)
    loss = linear_loss(lam, float(service_rate), capacity, batch, LINEAR_DOMAIN_LIMIT)
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
