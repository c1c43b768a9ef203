"""Compiled assembly of a CTMC generator in CSR form straight from its edge list.

SciPy's route (COO, then CSR, then summing duplicates) sorts and copies every entry
several times; for the tens of millions of edges of a large graph this kernel counts
entries per row, scatters them once, and sorts each row in place (rows hold a few
entries, one per enabled transition).  Imported lazily, like Numba itself.
"""

from __future__ import annotations

import numpy as np
from numba import njit
from numpy.typing import NDArray

# Rows longer than this are sorted with NumPy's sort rather than by insertion.
_INSERTION_MAX = 32


@njit(cache=True, nogil=True)
def _sort_row(indices: NDArray[np.int32], data: NDArray[np.float64], lo: int, hi: int) -> None:
    """Sort ``indices[lo:hi]`` (and ``data`` alongside) by column, stably."""
    if hi - lo > _INSERTION_MAX:
        order = np.argsort(indices[lo:hi], kind="mergesort")
        cols = indices[lo:hi][order]
        vals = data[lo:hi][order]
        indices[lo:hi] = cols
        data[lo:hi] = vals
        return
    for k in range(lo + 1, hi):
        col = indices[k]
        val = data[k]
        j = k - 1
        while j >= lo and indices[j] > col:
            indices[j + 1] = indices[j]
            data[j + 1] = data[j]
            j -= 1
        indices[j + 1] = col
        data[j + 1] = val


@njit(cache=True, nogil=True)
def generator_csr(
    n: int, src: NDArray[np.int32], dst: NDArray[np.int32], rate: NDArray[np.float64]
) -> tuple[NDArray[np.int64], NDArray[np.int32], NDArray[np.float64]]:
    """CSR arrays of the generator with off-diagonal ``rate`` on edges ``src -> dst``.

    Self-loops are dropped; parallel edges are summed; every row gets a diagonal entry
    holding minus the sum of its off-diagonal rates (added in edge order, as
    ``numpy.bincount`` adds them).  Columns come out sorted within each row.
    """
    counts = np.zeros(n + 1, dtype=np.int64)
    out = np.zeros(n)
    for e in range(src.shape[0]):
        s = src[e]
        if s != dst[e]:
            counts[s + 1] += 1
            out[s] += rate[e]
    counts[1:] += 1  # the diagonal
    for i in range(n):
        counts[i + 1] += counts[i]
    nnz = counts[n]
    indices = np.empty(nnz, dtype=np.int32)
    data = np.empty(nnz)
    at = counts[:-1].copy()
    for e in range(src.shape[0]):
        s = src[e]
        if s != dst[e]:
            k = at[s]
            indices[k] = dst[e]
            data[k] = rate[e]
            at[s] = k + 1
    indptr = np.empty(n + 1, dtype=np.int64)
    indptr[0] = 0
    write = 0
    for i in range(n):
        k = at[i]
        indices[k] = i
        data[k] = -out[i]
        lo = counts[i]
        hi = k + 1
        _sort_row(indices, data, lo, hi)
        # Compact in place, summing entries with the same column.
        for k in range(lo, hi):
            if write > indptr[i] and indices[write - 1] == indices[k]:
                data[write - 1] += data[k]
            else:
                indices[write] = indices[k]
                data[write] = data[k]
                write += 1
        indptr[i + 1] = write
    if write == nnz:
        return indptr, indices, data
    return indptr, indices[:write].copy(), data[:write].copy()
