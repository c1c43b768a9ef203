"""Compiled cell test of the branch-and-bound in :mod:`transport.bottleneck`.

Which cells to split is a handful of comparisons per cell; in NumPy that is a dozen
temporary arrays per pass, here one loop (see ``_cells_to_split`` there for the rule).
"""

from __future__ import annotations

import numpy as np
from numba import njit
from numpy.typing import NDArray


@njit(cache=True, nogil=True)
def cells_worth_splitting(
    rates: NDArray[np.float64],
    totals: NDArray[np.float64],
    rounds: NDArray[np.float64],
    low: NDArray[np.float64],
    resolution: float,
) -> NDArray[np.intp]:
    """Indices ``i`` (ascending) of the cells ``[rates[i], rates[i + 1]]`` that can hold a
    better T than the best evaluated one and are wider than ``resolution`` (bit/s).

    A cell qualifies when its lower bound ``low[i]`` does not exceed the best T, and it
    holds a jump (``rounds`` differs at its ends; inf != finite marks the edge of the
    never-completes region) or one of its ends is a local minimum of the finite samples.
    """
    n = rates.shape[0]
    best = np.inf
    for i in range(n):
        if totals[i] < best:
            best = totals[i]
    at_min = np.zeros(n, dtype=np.bool_)
    for i in range(n):
        t = totals[i]
        before = totals[i - 1] if i > 0 else np.inf
        after = totals[i + 1] if i + 1 < n else np.inf
        at_min[i] = t < np.inf and t <= before and t <= after
    alive = np.empty(max(n - 1, 0), dtype=np.intp)
    count = 0
    for i in range(n - 1):
        if (
            low[i] <= best
            and rates[i + 1] - rates[i] > resolution
            and (rounds[i] != rounds[i + 1] or at_min[i] or at_min[i + 1])
        ):
            alive[count] = i
            count += 1
    return alive[:count]
