"""The loss-only recursion of :mod:`queues._fixed` in NumPy, and its rescaling constants.

:func:`linear_loss_numpy` is :func:`queues._fixed_kernel.linear_loss` with the same
arithmetic in the same order, one vector step over the rates per level, so the same
doubles; a process that has not loaded Numba uses it for buffers of up to
:data:`queues.NUMPY_MAX_LEVELS` levels (:func:`queues.compiled_kernels_preferred`).
"""

from __future__ import annotations

import numpy as np
from numpy.typing import NDArray

__all__ = ["MAX_SCALED_RATIO", "SCALE_BITS", "linear_loss_numpy"]

#: The loss-only recursion (:func:`fixed_batch_loss`) rescales a rate's values by
#: 2**-SCALE_BITS, exactly, when their total passes 2**SCALE_BITS.  The linear domain
#: keeps every value below exp(650) < 2**938, so those rates are never rescaled and their
#: answers do not depend on it.
SCALE_BITS = 940
#: Rates whose ``mu / lam`` reaches this are left to the log domain: one level can
#: multiply a total by up to ``1 + 2 mu / lam``, and from 2**940 that must stay finite.
MAX_SCALED_RATIO = 2.0**80


def linear_loss_numpy(
    arrival_rate: NDArray[np.float64], service_rate: float, K: int, N: int
) -> NDArray[np.float64]:
    """:func:`queues._fixed_kernel.linear_loss` in NumPy: ``pi(K)`` per rate, NaN for the
    rates with ``mu / lam >= MAX_SCALED_RATIO``.

    The same recursion and rescaling in the same order, one vector step over the rates
    per level, so the same doubles.
    """
    R = arrival_rate.shape[0]
    value = service_rate / arrival_rate
    linear = value < MAX_SCALED_RATIO
    # Outside, the ratio is 1, as in the kernel; those entries are NaN.
    ratio = np.where(linear, value, 1.0)
    block = np.empty((N, R))  # block[t] holds pi(K - d) for the current block's d
    suffix = np.zeros((N, R))  # zero until the first block is complete
    running = np.ones(R)
    total = np.ones(R)  # pi(K) = 1 is the first term
    scaled = np.zeros(R, dtype=np.int64)  # how many times each rate was rescaled
    block[0] = 1.0
    with np.errstate(under="ignore"):  # values below the smallest double count for nothing
        _recursion(ratio, K, N, block, suffix, running, total, scaled)
        loss = 1.0 / total
        for k in range(int(scaled.max(initial=0))):
            loss[scaled > k] *= 2.0**-SCALE_BITS
    return np.where(linear, loss, np.nan)


def _recursion(
    ratio: NDArray[np.float64],
    K: int,
    N: int,
    block: NDArray[np.float64],
    suffix: NDArray[np.float64],
    running: NDArray[np.float64],
    total: NDArray[np.float64],
    scaled: NDArray[np.int64],
) -> None:
    """The levels of :func:`linear_loss_numpy`, in place on its arrays."""
    last_served = K - N
    value = np.empty_like(total)
    top, down = 2.0**SCALE_BITS, 2.0**-SCALE_BITS
    for d in range(1, K + 1):
        t = d % N
        if t == 0:
            # The reversed cumulative sum of the block just completed (its first
            # ``served`` levels count), then a fresh running sum for the new block.
            served = last_served - (d - N) + 1
            running[:] = 0.0
            for j in range(N - 1, -1, -1):
                if j < served:
                    running += block[j]
                suffix[j] = running
            running[:] = 0.0
        np.add(running, suffix[t], out=value)
        np.multiply(ratio, value, out=block[t])
        total += block[t]
        if d <= last_served:
            running += block[t]
        large = total > top
        if large.any():
            block[:, large] *= down
            suffix[:, large] *= down
            running[large] *= down
            total[large] *= down
            scaled[large] += 1
