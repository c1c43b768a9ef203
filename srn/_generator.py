"""Checks and conversions shared by the CTMC solvers."""

from __future__ import annotations

from typing import Any

import numpy as np
import scipy.sparse as sp

from .errors import SRNError

__all__ = ["DENSE_MAX", "as_generator"]

#: Below this many states dense elimination beats sparse machinery on overhead.
DENSE_MAX = 300


def as_generator(Q: Any) -> sp.csr_array:
    """``Q`` as a float CSR array, checked to be square and non-empty.

    Raises
    ------
    TypeError
        If ``Q`` is neither a SciPy sparse matrix nor a NumPy array.
    SRNError
        If it is not square or is empty.
    """
    if isinstance(Q, np.ndarray):
        Q = sp.csr_array(Q)
    if not sp.issparse(Q):
        raise TypeError("Q must be a SciPy sparse matrix or a NumPy array")
    Q = sp.csr_array(Q, dtype=float)
    if Q.shape[0] != Q.shape[1] or Q.shape[0] == 0:
        raise SRNError(f"the generator must be a non-empty square matrix, got shape {Q.shape}")
    return Q
