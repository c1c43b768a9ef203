"""Compiled sweeps over a sparse matrix for the large-chain steady-state solver.

A Gauss-Seidel sweep visits states in order and needs each new value at once,
which no vectorised NumPy expression can do; these loops are compiled by Numba,
imported lazily so that small solves never pay its import or compile cost.
All matrices are CSR arrays of ``Q^T`` (row ``i`` holds the rates *into* state ``i``).
"""

from __future__ import annotations

import numpy as np
from numba import njit
from numpy.typing import NDArray


@njit(cache=True, nogil=True)
def row_hash(markings: NDArray[np.int32], origin: NDArray[np.intp]) -> NDArray[np.uint64]:
    """A 64-bit FNV-style hash of each ``(origin, marking row)``, in one pass over the rows."""
    n, k = markings.shape
    out = np.empty(n, dtype=np.uint64)
    prime = np.uint64(0x100000001B3)
    for i in range(n):
        h = np.uint64(origin[i]) * np.uint64(0x9E3779B97F4A7C15)
        for p in range(k):
            h ^= np.uint64(markings[i, p])
            h *= prime
            h ^= h >> np.uint64(29)
        out[i] = h
    return out


@njit(cache=True, nogil=True)
def same_as_previous(
    markings: NDArray[np.int32], origin: NDArray[np.intp], order: NDArray[np.intp]
) -> NDArray[np.bool_]:
    """``out[i]``: row ``order[i + 1]`` equals row ``order[i]`` (marking and origin)."""
    n, k = markings.shape
    out = np.zeros(max(n - 1, 0), dtype=np.bool_)
    for i in range(1, n):
        a, b = order[i - 1], order[i]
        if origin[a] != origin[b]:
            continue
        equal = True
        for p in range(k):
            if markings[a, p] != markings[b, p]:
                equal = False
                break
        out[i - 1] = equal
    return out


@njit(cache=True, nogil=True)
def sor_sweep(
    indptr: NDArray[np.int32],
    indices: NDArray[np.int32],
    data: NDArray[np.float64],
    exit_rate: NDArray[np.float64],
    x: NDArray[np.float64],
    omega: float,
) -> None:
    """One in-place SOR sweep on ``x Q = 0``: ``x_i <- (1-w) x_i + w (sum_j x_j q_ji) / q_i``."""
    n = x.shape[0]
    for i in range(n):
        s = 0.0
        for k in range(indptr[i], indptr[i + 1]):
            j = indices[k]
            if j != i:
                s += data[k] * x[j]
        x[i] = (1.0 - omega) * x[i] + omega * s / exit_rate[i]


@njit(cache=True, nogil=True)
def banded_gth(band: NDArray[np.float64], width: int) -> NDArray[np.float64]:
    """Unnormalised stationary vector of a banded generator by GTH elimination.

    ``band[i, width + j - i]`` holds the rate from state ``i`` to state ``j`` (off the
    diagonal, ``|i - j| <= width``); it is overwritten.  States are censored from the
    last: the rates of state k are redistributed to the states below it in proportion
    to where k goes next, normalised by the *sum* of k's rates to them, so nothing is
    subtracted (Grassmann, Taksar and Heyman, Oper. Res. 33(5), 1985).  Fill stays in
    the band, so the cost is ``n * width^2``.  The back substitution rescales when the
    values approach the top of the double range, so probabilities spanning more than
    600 orders of magnitude come out with the tiny ones flushed to zero, not overflowed.
    """
    n = band.shape[0]
    for k in range(n - 1, 0, -1):
        lo = max(0, k - width)
        leave = 0.0
        for j in range(lo, k):
            leave += band[k, width + j - k]
        if leave <= 0.0:
            continue
        for i in range(lo, k):
            f = band[i, width + k - i] / leave
            band[i, width + k - i] = f
            if f == 0.0:
                continue
            for j in range(lo, k):
                if j != i:
                    band[i, width + j - i] += f * band[k, width + j - k]
    x = np.zeros(n)
    x[0] = 1.0
    for k in range(1, n):
        s = 0.0
        for i in range(max(0, k - width), k):
            s += x[i] * band[i, width + k - i]
        x[k] = s
        if s > 1e280:
            for i in range(k + 1):
                x[i] *= 1e-280
    return x
