"""Compiled level-by-level censoring for the fixed-batch M/PH[N]/1/K queue.

The algorithm, its all-positive (GTH) arithmetic and its scaling are described in
:mod:`queues._levels`.  Each rate is an independent solve whose work is a loop over K
levels and m phases with tiny inner products; as NumPy array operations over the rates
that is dozens of calls per level, so the loops are compiled with Numba instead, one
rate at a time, with O(K m^2) scratch reused across rates.
"""

from __future__ import annotations

import numpy as np
from numba import njit
from numpy.typing import NDArray

_TINY = float(np.finfo(np.float64).tiny)


@njit(cache=True, nogil=True)
def _eliminate_level(
    W: NDArray[np.float64],
    D: NDArray[np.float64],
    kept_W: NDArray[np.float64],
    kept_s: NDArray[np.float64],
    H: NDArray[np.float64],
) -> None:
    """GTH elimination of one level's phases; writes the exit distribution into H (m, N)."""
    m, N = D.shape
    for k in range(m - 1, -1, -1):
        s_k = 0.0
        for j in range(k):
            s_k += W[k, j]
        for x in range(N):
            s_k += D[k, x]
        s_k = max(s_k, _TINY)
        kept_s[k] = s_k
        for i in range(k):
            share = W[i, k] / s_k
            for j in range(k):
                W[i, j] += share * W[k, j]
            W[i, i] = 0.0
            for x in range(N):
                D[i, x] += share * D[k, x]
    kept_W[:, :] = W
    for k in range(m):
        for x in range(N):
            acc = D[k, x]
            for j in range(k):
                acc += W[k, j] * H[j, x]
            H[k, x] = acc / kept_s[k]


@njit(cache=True, nogil=True)
def _level_mass(
    vec: NDArray[np.float64], kept_W: NDArray[np.float64], kept_s: NDArray[np.float64]
) -> None:
    """Replace ``vec`` (the inflow) by the solution x of ``x (diag(out) - W) = inflow``."""
    m = vec.shape[0]
    b = vec.copy()
    for k in range(m - 1, 0, -1):
        for j in range(k):
            b[j] += b[k] * kept_W[k, j] / kept_s[k]
    for k in range(m):
        acc = b[k]
        for i in range(k):
            acc += vec[i] * kept_W[i, k]
        vec[k] = acc / kept_s[k]


@njit(cache=True, nogil=True)
def censored_levels(
    arrival_rate: NDArray[np.float64],
    K: int,
    N: int,
    alpha: NDArray[np.float64],
    T: NDArray[np.float64],
) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    """Occupancy distribution (R, K + 1) and per-phase busy mass (R, m), one rate at a time."""
    R = arrival_rate.shape[0]
    m = alpha.shape[0]
    busy_levels = K - N + 1
    max_out = 0.0
    for k in range(m):
        max_out = max(max_out, -T[k, k])
    dist_all = np.empty((R, K + 1))
    phase_all = np.empty((R, m))
    kept_W = np.empty((busy_levels, m, m))
    kept_s = np.empty((busy_levels, m))
    phase_at = np.empty((busy_levels, m))
    W = np.empty((m, m))
    D = np.empty((m, N))
    H = np.zeros((m, N))
    exit_rates = np.empty(m)
    log_level = np.empty(K + 1)
    exits = np.empty(N)
    vec = np.empty(m)
    for r in range(R):
        scale = arrival_rate[r] + max_out
        lam = arrival_rate[r] / scale
        for k in range(m):
            total = 0.0
            for j in range(m):
                total += T[k, j]
            exit_rates[k] = max(-total, 0.0) / scale
        for n in range(K, N - 1, -1):
            for k in range(m):
                D[k, 0] = exit_rates[k]
                for j in range(m):
                    W[k, j] = 0.0 if j == k else T[k, j] / scale
            if n == K:
                for k in range(m):
                    for x in range(1, N):
                        D[k, x] = 0.0
            else:
                for k in range(m):
                    back = lam * H[k, N - 1]
                    for j in range(m):
                        if j != k:
                            W[k, j] += back * alpha[j]
                    for x in range(1, N):
                        D[k, x] = lam * H[k, x - 1]
            _eliminate_level(W, D, kept_W[n - N], kept_s[n - N], H)
        # Idle levels N-1 .. 0: pi(n) = pi(n-1) / P(an excursion from n lands below n).
        for x in range(N):
            acc = 0.0
            for k in range(m):
                acc += alpha[k] * H[k, x]
            exits[x] = acc
        log_level[0] = 0.0
        steps = np.zeros(N)
        for n in range(N - 1, 0, -1):
            below = 0.0
            for x in range(n):
                below += exits[x]
            below = max(below, _TINY)
            steps[n] = -np.log(below)
            for x in range(n):
                exits[x] /= below
        for n in range(1, N):
            log_level[n] = log_level[n - 1] + steps[n]
        # Busy levels, upward: level n is entered from below only by arrivals.
        log_lam = np.log(lam)
        vec[:] = alpha
        for n in range(N, K + 1):
            _level_mass(vec, kept_W[n - N], kept_s[n - N])
            total = 0.0
            for k in range(m):
                total += vec[k]
            total = max(total, _TINY)
            for k in range(m):
                vec[k] /= total
                phase_at[n - N, k] = vec[k]
            log_level[n] = log_level[n - 1] + log_lam + np.log(total)
        top = log_level.max()
        norm = 0.0
        for n in range(K + 1):
            dist_all[r, n] = np.exp(log_level[n] - top)
            norm += dist_all[r, n]
        for n in range(K + 1):
            dist_all[r, n] /= norm
        for k in range(m):
            acc = 0.0
            for n in range(busy_levels):
                acc += phase_at[n, k] * dist_all[r, N + n]
            phase_all[r, k] = acc
    return dist_all, phase_all
