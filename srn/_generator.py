"""Checks and conversions shared by the CTMC solvers."""

from __future__ import annotations

from typing import Any

import numpy as np
import scipy.sparse as sp
import scipy.sparse.csgraph as csgraph
from numpy.typing import NDArray

from .errors import SRNError

__all__ = ["DENSE_MAX", "as_generator", "rcm_profile"]

#: Below this many states dense elimination beats sparse machinery on overhead.
DENSE_MAX = 300


#: How far a generator's row may be from summing to zero, relative to the row's total
#: rate (the sum of its off-diagonal magnitudes and its diagonal's): rounding leaves a few
#: units in the 16th digit; a diagonal that is not minus the row's off-diagonal sum leaves
#: more, and the routes would then answer different chains (the GTH routes and the LU's
#: refinement read only the off-diagonal rates, the iterative ones the diagonal too).
ROW_SUM_RTOL = 1e-9


def as_generator(Q: Any) -> sp.csr_array:
    """``Q`` as a float CSR array, checked to be a generator.

    Raises
    ------
    TypeError
        If ``Q`` is neither a SciPy sparse matrix nor a NumPy array.
    SRNError
        If it is not square, is empty, holds a non-finite or negative off-diagonal
        rate, or has a row that does not sum to zero (to :data:`ROW_SUM_RTOL` of the
        row's total rate); the message names the first such row.
    """
    if isinstance(Q, np.ndarray):
        Q = sp.csr_array(Q)
    if not sp.issparse(Q):
        raise TypeError("Q must be a SciPy sparse matrix or a NumPy array")
    Q = sp.csr_array(Q, dtype=float)
    if Q.shape[0] != Q.shape[1] or Q.shape[0] == 0:
        raise SRNError(f"the generator must be a non-empty square matrix, got shape {Q.shape}")
    _check_rows(Q)
    return Q


# Entries checked per block by _check_rows: its temporaries stay a few tens of MB on a
# generator of hundreds of millions of entries (Kanban N = 7: 450 million).
_CHECK_BLOCK = 1 << 21


def _check_rows(Q: sp.csr_array) -> None:
    """Raise :class:`SRNError` naming the first row of ``Q`` that a generator cannot have
    (see :func:`as_generator`), a block of rows at a time."""
    n, indptr = Q.shape[0], Q.indptr
    first = 0
    while first < n:
        last = int(np.searchsorted(indptr, indptr[first] + _CHECK_BLOCK, side="right")) - 1
        last = min(max(last, first + 1), n)
        a, b = int(indptr[first]), int(indptr[last])
        data, cols = Q.data[a:b], Q.indices[a:b]
        rows = np.repeat(np.arange(first, last), np.diff(indptr[first : last + 1]))
        if not np.isfinite(data).all():
            k = int(np.flatnonzero(~np.isfinite(data))[0])
            raise SRNError(f"the generator holds a non-finite rate in row {rows[k]}")
        negative = np.flatnonzero((data < 0) & (rows != cols))
        if negative.size:
            k = int(negative[0])
            raise SRNError(
                f"the generator has a negative rate {data[k]:.6g} from state {rows[k]} "
                f"to state {cols[k]}"
            )
        sums = np.bincount(rows - first, weights=data, minlength=last - first)
        total = np.bincount(rows - first, weights=np.abs(data), minlength=last - first)
        bad = np.flatnonzero(np.abs(sums) > ROW_SUM_RTOL * total)
        if bad.size:
            i = int(bad[0])
            raise SRNError(
                f"row {first + i} of the generator sums to {sums[i]:.6g}, not 0 (its "
                "diagonal must be minus the sum of its other rates)"
            )
        first = last


def rcm_profile(M: sp.csr_array) -> tuple[NDArray[np.intp], int, int]:
    """Reverse Cuthill-McKee order of ``M + M^T``, its bandwidth and its lower envelope.

    The envelope counts the entries between each row's first non-zero and the diagonal
    (excluded) in that order: what a banded or profile LU factor fills, used to estimate
    factor sizes before factorising.

    Parameters
    ----------
    M : csr_array, shape (n, n)
        A square matrix; only its pattern matters.

    Returns
    -------
    order : ndarray of int, shape (n,)
        The permutation (position -> state).
    bandwidth : int
        Largest ``|i - j|`` of a non-zero in that order.
    envelope : int
        Sum over the rows of ``i - first[i]`` in that order.
    """
    n = M.shape[0]
    pattern = sp.csr_array(abs(M) + abs(M.T))
    order = csgraph.reverse_cuthill_mckee(pattern, symmetric_mode=True).astype(np.intp)
    rank = np.empty_like(order)
    rank[order] = np.arange(n)
    coo = pattern.tocoo()
    r, c = rank[coo.row], rank[coo.col]
    first = np.arange(n)
    np.minimum.at(first, r, c)
    return order, int(np.abs(r - c).max(initial=0)), int((np.arange(n) - first).sum())
