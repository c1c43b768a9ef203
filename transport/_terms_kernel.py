"""Compiled form of the transfer-time formula (:func:`transport.rbudp.transfer_time_terms`).

The search of :mod:`transport.bottleneck` evaluates T at a few hundred rates per pass.
Written with NumPy, the formula is about twenty array operations, each a pass over memory
and a few microseconds of dispatch, which is most of the cost at that size; here it is
one loop that computes every term of one rate before the next, with the arithmetic of
the module docstring of :mod:`transport.rbudp` in the same order.
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit
from numpy.typing import NDArray

# N_resend is a ratio of two logarithms, each rounded; when it is mathematically an
# integer k the computed value can land a few ulps above k, and a bare ceil would then add
# a whole extra resend round.  Values within this relative distance above an integer count
# as that integer.  (1e-12 is ~5000 ulps: far above rounding noise, far below any real
# change in the loss.)
CEIL_RELATIVE_SLACK = 1e-12

#: First blast, resend, feedback and total (s), N_resend, rounds, and ``completes``.
TermArrays = tuple[
    NDArray[np.float64],
    NDArray[np.float64],
    NDArray[np.float64],
    NDArray[np.float64],
    NDArray[np.float64],
    NDArray[np.float64],
    NDArray[np.bool_],
]


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
            resend_rounds = math.ceil(resends * (1.0 - CEIL_RELATIVE_SLACK))
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
