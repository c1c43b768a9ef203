"""Fixed-batch M/PH[N]/1/K: level-by-level censoring (GTH-style), vectorised over rates.

Level ``n`` of the chain is the number of packets in the buffer.  Levels ``n < N`` hold
one idle state; levels ``n >= N`` hold the ``m`` phases of the running service.  An
arrival moves up one level (same phase; from idle ``N-1`` into level ``N`` with phases
``alpha``); a completion from ``(n, k)`` at rate ``t_k`` lands on level ``n - N``, in the
idle state if ``n - N < N`` and with phases ``alpha`` otherwise.

Because the chain only ever goes *up* one level at a time, the levels can be eliminated
from the top (stochastic complementation).  After the levels above ``n`` are removed,
each state of level ``n`` has rates ``W_n`` to the other states of its level and rates
``D_n[:, i]`` of "landing" on the lower level ``n - N + i`` (``i = 0..N-1``); a landing
always enters the same states of its level, so one number per target level suffices.
Removing level ``n`` gives its exit distribution ``H_n`` over those landing levels, and
level ``n - 1`` gains the arrival-then-excursion rates ``lam * H_n``; the part that lands
back on level ``n - 1`` becomes a within-level rate.  The phases of a level are removed
one at a time by the GTH rule (Grassmann, Taksar and Heyman 1985): every outflow is
formed as a *sum* of positive rates and every update adds positive terms, so there is no
subtraction anywhere and tiny probabilities keep their relative accuracy.

Back-substitution runs up: level ``n`` is entered from below only by arrivals, so
``pi_n (diag(out_n) - W_n) = lam * pi_{n-1}``, solved with the stored GTH reduction (again
only positive terms).  Every level is rescaled to sum 1 with its log-scale kept, and all
rates are first divided by ``lam + max|T_kk|``, so very large or very small ``lam/mu``
neither overflow nor underflow.  The work is O(K * (m^3 + m^2 N)) per rate, in loops
compiled by Numba (:mod:`queues._levels_kernel`) that solve blocks of up to 32 rates side
by side (SIMD), or one rate at a time; every rate gets the same arithmetic either way.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import NDArray

__all__ = ["fixed_batch_phase_type"]


def fixed_batch_phase_type(
    arrival_rate: NDArray[np.float64],
    capacity: int,
    batch: int,
    alpha: NDArray[np.float64],
    T: NDArray[np.float64],
) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    """Occupancy distribution and per-phase busy probabilities, fixed batch N.

    Parameters
    ----------
    arrival_rate : ndarray, shape (R,)
        Packet arrival rates (packets/s), > 0.
    capacity : int
        Buffer size K (packets, including the batch in service), ``K >= batch``.
    batch : int
        Batch size N (packets per interrupt).
    alpha, T : ndarray, shapes (m,) and (m, m)
        Phase-type service time (T in 1/s), already validated.

    Returns
    -------
    distribution : ndarray, shape (R, K + 1)
        P(n packets in the buffer).
    phase_mass : ndarray, shape (R, m)
        P(a service is running and in phase k); sums to P(busy).
    """
    from ._levels_kernel import censored_levels

    return censored_levels(
        np.ascontiguousarray(arrival_rate, dtype=np.float64),
        int(capacity),
        int(batch),
        np.ascontiguousarray(alpha, dtype=np.float64),
        np.ascontiguousarray(T, dtype=np.float64),
    )
