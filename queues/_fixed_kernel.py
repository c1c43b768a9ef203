"""Compiled form of the fixed-batch recursion of :mod:`queues._fixed` (linear domain).

The recursion runs down the K levels one at a time, so in NumPy it costs a handful of
small array operations per level whatever the number of rates; for the NIC sizes of
the transfer-time search (K = 64, a few hundred rates) that overhead is most of the
time. Numba runs the same arithmetic, in the same order, as one loop nest.
"""

from __future__ import annotations

import numpy as np
from numba import njit
from numpy.typing import NDArray


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
            served = last_served - (d - N) + 1
            for r in range(R):
                acc = 0.0
                for j in range(N - 1, -1, -1):
                    value = P[d - N + j, r] if j < served else 0.0
                    acc += value
                    suffix[j, r] = acc
                running[r] = 0.0
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
