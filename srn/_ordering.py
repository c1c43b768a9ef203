"""Fill-reducing orderings for the sparse LU route: approximate minimum degree (AMD).

SuperLU's own minimum-degree ordering of ``A + A^T`` (``MMD_AT_PLUS_A``) is what SciPy
offers.  On the grid-like chains of closed queueing networks AMD (Amestoy, Davis and
Duff, SIAM J. Matrix Anal. Appl. 17(4), 1996) leaves about a tenth less fill and, with
its post-ordered elimination tree, larger supernodes: on the three-station ring of
193,131 states SuperLU's numeric factorisation took 0.56 s in AMD's order against 1.1 s
in its own (``benchmarks/srn_small_chains.py``).

AMD is SuiteSparse's C library (BSD-3-Clause), which Debian and Ubuntu ship as
``libamd2``/``libamd3``; the project's set-up scripts install it.  No Python wheel with
a permissive licence exposes it (CVXOPT's does, under the GPL), so it is called through
:mod:`ctypes`.  Where the library is missing, :func:`amd_order` raises
:class:`OrderingUnavailable` and the LU route falls back to SuperLU's ordering: the answer
is the same, only slower.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import functools

import numpy as np
import scipy.sparse as sp
from numpy.typing import NDArray

__all__ = ["OrderingUnavailable", "amd_order"]


class OrderingUnavailable(Exception):
    """AMD cannot order this matrix here: the library is missing, or it refused.  The
    message says which; the caller falls back to another ordering."""


# From SuiteSparse's amd.h: the lengths of the Control and Info arrays and the status
# codes amd_l_order returns.
_AMD_CONTROL = 5
_AMD_INFO = 20
_AMD_OK = 0
_AMD_OK_BUT_JUMBLED = 1
_AMD_OUT_OF_MEMORY = -1


@functools.cache
def _library() -> ctypes.CDLL | None:
    """SuiteSparse's AMD, loaded once; ``None`` when the system has none."""
    for name in (ctypes.util.find_library("amd"), "libamd.so.3", "libamd.so.2"):
        if not name:
            continue
        try:
            lib = ctypes.CDLL(name)
            order = lib.amd_l_order
        except (OSError, AttributeError):
            continue
        index = np.ctypeslib.ndpointer(np.int64, flags="C_CONTIGUOUS")
        real = np.ctypeslib.ndpointer(np.float64, flags="C_CONTIGUOUS")
        order.argtypes = [ctypes.c_int64, index, index, index, real, real]
        order.restype = ctypes.c_int64
        return lib
    return None


def amd_order(matrix: sp.csc_array) -> NDArray[np.intp]:
    """AMD ordering of the pattern of ``matrix + matrix^T``.

    Parameters
    ----------
    matrix : scipy.sparse.csc_array, shape (n, n)
        Any square matrix; only its pattern is read, and the diagonal is ignored.

    Returns
    -------
    order : ndarray of intp, shape (n,)
        The rows (and columns) in elimination order: factorise
        ``matrix[order][:, order]``.

    Raises
    ------
    OrderingUnavailable
        The AMD library is not installed, or it refused the pattern.
    MemoryError
        AMD could not allocate its workspace.
    """
    lib = _library()
    if lib is None:
        raise OrderingUnavailable("libamd not found: install Debian's libamd3 (or libamd2)")
    # AMD symmetrises a nonsymmetric pattern itself, but the order in which that leaves
    # each column's entries steers its tie-breaks: on the ring above, the pinned balance
    # equations as given filled 18.1 M entries and their symmetrised pattern 15.0 M.
    pattern = sp.csc_array(matrix).astype(bool)  # a copy, a byte an entry, not eight
    csc = sp.csc_array(pattern + pattern.T)
    csc.sort_indices()  # unsorted columns cost AMD a copy (AMD_OK_BUT_JUMBLED)
    n = csc.shape[0]
    indptr = np.ascontiguousarray(csc.indptr, dtype=np.int64)
    indices = np.ascontiguousarray(csc.indices, dtype=np.int64)
    order = np.empty(n, dtype=np.int64)
    control = np.zeros(_AMD_CONTROL)
    lib.amd_l_defaults(control.ctypes.data_as(ctypes.POINTER(ctypes.c_double)))
    info = np.zeros(_AMD_INFO)
    status = lib.amd_l_order(n, indptr, indices, order, control, info)
    if status == _AMD_OUT_OF_MEMORY:
        raise MemoryError(f"AMD ordering of {n} rows: out of memory")
    if status not in (_AMD_OK, _AMD_OK_BUT_JUMBLED):
        # AMD_INVALID: not reachable with the well-formed CSC built above.
        raise OrderingUnavailable(f"AMD refused the pattern (status {status})")
    return order.astype(np.intp, copy=False)
