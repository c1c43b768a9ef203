"""Compiled check that a large generator is irreducible (one strongly connected class).

State 0 reaches every state, and every state reaches state 0, exactly when the graph
is strongly connected; two breadth-first searches decide it in linear time, a fraction
of the time of a full strong-components labelling, which :func:`srn.steady_state` then
needs only for chains that are not irreducible.  The backward search runs on the
transpose that the iterative solver builds anyway (:class:`srn._bicgstab.SplitSystem`),
so the check costs no copy of the matrix.  Imported lazily, like Numba itself.
"""

from __future__ import annotations

import numpy as np
from numba import njit
from numpy.typing import NDArray


@njit(cache=True, nogil=True)
def reaches_all(
    first_ptr: NDArray[np.int64],
    first_idx: NDArray[np.int32],
    second_ptr: NDArray[np.int64],
    second_idx: NDArray[np.int32],
) -> bool:
    """Whether a search from state 0 along the entries of two CSR patterns reaches all.

    Every stored entry counts as an edge, explicit zeros included (as in
    ``scipy.sparse.csgraph.connected_components``).  Breadth-first, because explored
    chains number their states in breadth-first order: the queue then walks the rows
    almost in storage order.
    """
    n = first_ptr.shape[0] - 1
    seen = np.zeros(n, dtype=np.bool_)
    queue = np.empty(n, dtype=np.int32)
    seen[0] = True
    queue[0] = 0
    head = 0
    tail = 1
    while head < tail:
        i = queue[head]
        head += 1
        for k in range(first_ptr[i], first_ptr[i + 1]):
            j = first_idx[k]
            if not seen[j]:
                seen[j] = True
                queue[tail] = j
                tail += 1
        for k in range(second_ptr[i], second_ptr[i + 1]):
            j = second_idx[k]
            if not seen[j]:
                seen[j] = True
                queue[tail] = j
                tail += 1
    return tail == n
