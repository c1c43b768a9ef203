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
neither overflow nor underflow.  The work is O(K * (m^3 + m^2 N)) per rate, as array
operations over all the rates at once (a Python loop over levels and phases only).
"""

from __future__ import annotations

import numpy as np
from numpy.typing import NDArray

__all__ = ["fixed_batch_phase_type"]

# Rates are processed in chunks so that the stored level matrices stay below this many
# float64 values (~64 MB).
_CHUNK_VALUES = 8_000_000
# Floor for divisors and logarithms (a rate or mass that underflowed to zero).
_TINY = float(np.finfo(np.float64).tiny)


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
    R, m = arrival_rate.size, alpha.size
    K = capacity
    per_rate = (K + 1) * (m * m + 2 * m + 3)
    chunk = max(1, _CHUNK_VALUES // per_rate)
    dist = np.empty((R, K + 1))
    phase_mass = np.empty((R, m))
    for start in range(0, R, chunk):
        stop = min(R, start + chunk)
        dist[start:stop], phase_mass[start:stop] = _solve(
            arrival_rate[start:stop], K, batch, alpha, T
        )
    return dist, phase_mass


def _solve(
    lam: NDArray[np.float64],
    K: int,
    N: int,
    alpha: NDArray[np.float64],
    T: NDArray[np.float64],
) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    # Arrays keep the rate axis last (contiguous), so every per-level operation is a
    # plain elementwise operation on blocks of shape (..., R).  All rates are divided by
    # lam + max|T_kk| (per rate): the stationary distribution is unchanged and no rate
    # exceeds 1, so extreme lam/mu cannot overflow.
    R, m = lam.size, alpha.size
    scale = lam + float(np.max(-np.diag(T)))
    lam = lam / scale
    exit_rates = np.clip(-T.sum(axis=1), 0.0, None)[:, None] / scale  # (m, R)
    T_off = (T - np.diag(np.diag(T)))[:, :, None] / scale  # (m, m, R)
    diag = np.arange(m)
    busy_levels = K - N + 1
    # The GTH reduction of each busy level, kept for the upward pass: the within-level
    # rates W[i, j] at the time each phase was eliminated, and each phase's outflow s.
    kept_W = np.empty((busy_levels, m, m, R))
    kept_s = np.empty((busy_levels, m, R))
    log_idle_step = np.zeros((N, R))  # log(pi(n) / pi(n-1)) for idle levels n = 1..N-1

    H_prev: NDArray[np.float64] | None = None
    for n in range(K, N - 1, -1):
        # Rates out of (n, k) once the levels above n are removed: phase changes T_off,
        # completions t_k (landing on n - N) and, below K, the arrival (lam) followed by
        # the excursion above n, which lands on n - N + 1 .. n as H_prev says; landing on
        # n re-enters with phases alpha (a within-level rate; self-loops are dropped).
        D = np.empty((m, N, R))  # D[k, i]: rate of landing on level n - N + i
        D[:, 0, :] = exit_rates
        if H_prev is None:
            W = T_off.copy()
            D[:, 1:, :] = 0.0
        else:
            back = lam * H_prev[:, N - 1, :]  # (m, R): rate of landing back on n
            W = T_off + back[:, None, :] * alpha[None, :, None]
            np.multiply(lam, H_prev[:, : N - 1, :], out=D[:, 1:, :])
        W[diag, diag] = 0.0
        H_prev = _eliminate_level(W, D, kept_W[n - N], kept_s[n - N])
    assert H_prev is not None
    # Level N - 1 is idle: its arrival enters level N with phases alpha, and `exits[x]` is
    # the probability that the excursion it starts first lands on level x (0..N-1).  For
    # idle level n, landing on n itself is a self-loop; the censored outflow is
    # lam * P(land below n), so pi(n) = lam pi(n-1) / outflow = pi(n-1) / P(land below n).
    exits = np.einsum("k,kxr->xr", alpha, H_prev)
    for n in range(N - 1, 0, -1):
        below = np.maximum(exits[:n].sum(axis=0), _TINY)
        log_idle_step[n] = -np.log(below)
        exits = exits[:n] / below

    # Back-substitution upward: level n is entered from below only by arrivals, so pi_n
    # solves pi_n (diag(out) - W) = lam pi_{n-1} (inflow with phases alpha at level N).
    # Each level is stored normalised, with the log of its total mass.
    log_level = np.empty((K + 1, R))
    log_level[0] = 0.0  # pi(0) = 1
    log_lam = np.log(lam)
    for n in range(1, N):
        log_level[n] = log_level[n - 1] + log_idle_step[n]
    phase_at = np.empty((busy_levels, m, R))  # phase distribution within each busy level
    vec = np.repeat(alpha[:, None], R, axis=1)
    for n in range(N, K + 1):
        vec = _level_mass(vec, kept_W[n - N], kept_s[n - N])
        total = np.maximum(vec.sum(axis=0), _TINY)
        vec /= total
        log_level[n] = log_level[n - 1] + log_lam + np.log(total)
        phase_at[n - N] = vec
    log_level -= log_level.max(axis=0)
    dist = np.exp(log_level)
    dist /= dist.sum(axis=0)
    phase_mass = np.einsum("nkr,nr->rk", phase_at, dist[N:])
    return np.ascontiguousarray(dist.T), phase_mass


def _eliminate_level(
    W: NDArray[np.float64],
    D: NDArray[np.float64],
    kept_W: NDArray[np.float64],
    kept_s: NDArray[np.float64],
) -> NDArray[np.float64]:
    """GTH elimination of one level's phases; returns the exit distribution H (m, N, R).

    ``W`` (m, m, R) holds the within-level rates (zero diagonal) and ``D`` (m, N, R) the
    rates to the N landing levels below; both are overwritten.  Phases are removed from
    the last to the first: removing phase k sends the rate ``W[i, k]`` of every phase
    ``i < k`` on along k's own rates, in proportion ``W[k, .] / s_k``, where ``s_k`` is
    the *sum* of k's rates to the phases still present and to the landing levels -- so
    no subtraction ever occurs.  The reduced rates and the ``s_k`` are written to
    ``kept_W`` and ``kept_s`` for :func:`_level_mass`.
    """
    m = W.shape[0]
    for k in range(m - 1, -1, -1):
        s_k = np.maximum(W[k, :k].sum(axis=0) + D[k].sum(axis=0), _TINY)
        kept_s[k] = s_k
        if k:
            share = W[:k, k] / s_k  # (k, R): rate from phase i < k, per unit of k's rates
            W[:k, :k] += share[:, None, :] * W[None, k, :k]
            lower = np.arange(k)
            W[lower, lower] = 0.0  # self-loops of the reduced chain do not matter
            D[:k] += share[:, None, :] * D[None, k]
    kept_W[:] = W
    # Exit distribution: from phase k the next move of the reduced chain goes to a phase
    # j < k or lands, so H is filled in from phase 0 up.
    H = np.empty_like(D)
    for k in range(m):
        acc = D[k].copy()
        for j in range(k):
            acc += W[k, j] * H[j]
        H[k] = acc / kept_s[k]
    return H


def _level_mass(
    inflow: NDArray[np.float64], kept_W: NDArray[np.float64], kept_s: NDArray[np.float64]
) -> NDArray[np.float64]:
    """Solve ``x (diag(out) - W) = inflow`` with a level's GTH reduction (all positive).

    ``inflow`` (m, R) is passed down exactly as the rates were: what enters phase k moves
    on to phase j < k with probability ``W[k, j] / s_k``.  The expected time in phase k
    is then ``(inflow_k + sum_{i<k} x_i W[i, k]) / s_k``, from k = 0 up.
    """
    m = inflow.shape[0]
    b = inflow.copy()
    for k in range(m - 1, 0, -1):
        b[:k] += b[k] * kept_W[k, :k] / kept_s[k]
    x = np.empty_like(b)
    for k in range(m):
        x[k] = (b[k] + (x[:k] * kept_W[:k, k]).sum(axis=0)) / kept_s[k]
    return x
