"""Compiled check that a large generator is irreducible (one strongly connected class).

State 0 reaches every state, and every state reaches state 0, exactly when the graph
is strongly connected; two breadth-first searches (the second on the transposed
pattern) decide it in linear time with a fraction of the memory and time of a full
strong-components labelling, which :func:`srn.steady_state` then needs only for
chains that are not irreducible.  Imported lazily, like Numba itself.
"""

from __future__ import annotations

import numpy as np
from numba import njit
from numpy.typing import NDArray


@njit(cache=True, nogil=True)
def _reaches_all(indptr: NDArray[np.int64], indices: NDArray[np.int32]) -> bool:
    """Whether a breadth-first search from state 0 along the stored entries reaches all.

    Breadth-first, because explored chains number their states in breadth-first order:
    the queue then walks the rows almost in storage order.
    """
    n = indptr.shape[0] - 1
    seen = np.zeros(n, dtype=np.bool_)
    queue = np.empty(n, dtype=np.int32)
    seen[0] = True
    queue[0] = 0
    head = 0
    tail = 1
    while head < tail:
        i = queue[head]
        head += 1
        for k in range(indptr[i], indptr[i + 1]):
            j = indices[k]
            if not seen[j]:
                seen[j] = True
                queue[tail] = j
                tail += 1
    return tail == n


@njit(cache=True, nogil=True)
def is_irreducible(indptr: NDArray[np.int64], indices: NDArray[np.int32]) -> bool:
    """Whether the CSR pattern, read as a directed graph, is strongly connected.

    Every stored entry counts as an edge, explicit zeros included (as in
    ``scipy.sparse.csgraph.connected_components``).
    """
    if not _reaches_all(indptr, indices):
        return False
    n = indptr.shape[0] - 1
    backward = np.zeros(n + 1, dtype=np.int64)
    for k in range(indptr[n]):
        backward[indices[k] + 1] += 1
    for i in range(n):
        backward[i + 1] += backward[i]
    tails = np.empty(backward[n], dtype=np.int32)
    at = backward[:-1].copy()
    for i in range(n):
        for k in range(indptr[i], indptr[i + 1]):
            j = indices[k]
            tails[at[j]] = i
            at[j] += 1
    return _reaches_all(backward, tails)
