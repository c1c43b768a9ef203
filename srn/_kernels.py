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
def lower_solve(
    indptr: NDArray[np.int32],
    indices: NDArray[np.int32],
    data: NDArray[np.float64],
    diag: NDArray[np.float64],
    rhs: NDArray[np.float64],
    fixed: int,
    omega: float,
) -> NDArray[np.float64]:
    """Solve ``(D / omega + L) z = rhs``; row ``fixed`` is replaced by ``z[fixed] = rhs[fixed]``."""
    n = rhs.shape[0]
    z = np.zeros(n)
    for i in range(n):
        if i == fixed:
            z[i] = rhs[i]
            continue
        s = rhs[i]
        for k in range(indptr[i], indptr[i + 1]):
            j = indices[k]
            if j < i:
                s -= data[k] * z[j]
        z[i] = omega * s / diag[i]
    return z


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
