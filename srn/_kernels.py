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
