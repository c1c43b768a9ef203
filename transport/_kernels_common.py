"""What the compiled search steps and their NumPy twins share: a constant and the shapes
of their results (:mod:`transport._kernels`, :mod:`transport._kernels_numpy`)."""

from __future__ import annotations

import numpy as np
from numpy.typing import NDArray

__all__ = ["CEIL_RELATIVE_SLACK", "SearchArrays", "TermArrays"]

# N_resend is a ratio of two logarithms, each rounded; when it is mathematically an
# integer k the computed value can land a few ulps above k, and a bare ceil would then add
# a whole extra resend round.  Values within this relative distance above an integer count
# as that integer.  (1e-12 is ~5000 ulps: far above rounding noise, far below any real
# change in the loss.)
CEIL_RELATIVE_SLACK = 1e-12

#: First blast, resend, feedback and total (s), N_resend, rounds, and ``completes``.
TermArrays = tuple[
    NDArray[np.float64],
    NDArray[np.float64],
    NDArray[np.float64],
    NDArray[np.float64],
    NDArray[np.float64],
    NDArray[np.float64],
    NDArray[np.bool_],
]


#: The search's sorted arrays -- rates (bit/s), T (s), losses, rounds, the bounds of the
#: cells the points start (s), where each point was evaluated -- and T's terms at the
#: points just evaluated.
SearchArrays = tuple[
    NDArray[np.float64],
    NDArray[np.float64],
    NDArray[np.float64],
    NDArray[np.float64],
    NDArray[np.float64],
    NDArray[np.intp],
    TermArrays,
]
