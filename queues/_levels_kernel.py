"""Compiled level-by-level censoring for the fixed-batch M/PH[N]/1/K queue.

The algorithm, its all-positive (GTH) arithmetic and its scaling are described in
:mod:`queues._levels`.  Each arrival rate is an independent solve whose work is a loop
over K levels and m phases with tiny inner products; as NumPy array operations over the
rates that is dozens of calls per level, so the loops are compiled with Numba instead.

Two builds of the same arithmetic:

* in blocks (:func:`_solve_blocks`): 16 to 32 rates at once, every scratch array with
  the block as its last, contiguous axis and every step an innermost loop over the
  block, which LLVM turns into SIMD instructions.  This is the fast path for the
  transfer-time search (a few hundred rates at K = 64): 2 to 3 times faster per rate
  than one rate at a time for m = 1..16 phases (measured when this was written).
* one rate at a time (:func:`_solve_rates`), with O(K m^2) scratch: for few rates (a
  block would be mostly padding; with fewer than 16 rates LLVM's vector loops do not
  even start, so small blocks are slower than this), for batches N > 32, and when a
  block's stored reductions would exceed :data:`_BLOCK_VALUES` (large K and m).

Both give every rate the same operations in the same order (Numba without fastmath:
no reassociation, no fused multiply-add), so neither the path taken nor a rate's
neighbours in its block change its result.  The per-level loops allocate nothing.  A
``share`` that is zero (for the rate, or for the whole block) is skipped -- common with
Erlang and Coxian service -- since adding ``0 * x`` to a finite number changes nothing.
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit
from numpy.typing import NDArray

_TINY = float(np.finfo(np.float64).tiny)
# Rates per block: at most _BLOCK, and blocks are only used from _MIN_BLOCK rates up.
# LLVM vectorises the block loops 4 doubles wide, interleaved 4 times, so a block needs
# 16 rates for the vector loop to run and a multiple of 4 to leave no scalar remainder.
_BLOCK = 32
_MIN_BLOCK = 16
# Largest stored reduction (float64 values) of one block, ~64 MB; beyond it the rates are
# solved one at a time (blocks were slower there, being memory-bound).
_BLOCK_VALUES = 8_000_000
# With larger batches the one-at-a-time build already vectorises its loops over the N
# landing levels and blocks gain nothing (K = 1024..4096, N = 48..64: within +-15%).
_MAX_BLOCK_BATCH = 32


def censored_levels(
    arrival_rate: NDArray[np.float64],
    K: int,
    N: int,
    alpha: NDArray[np.float64],
    T: NDArray[np.float64],
) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    """Occupancy distribution (R, K + 1) and per-phase busy mass (R, m) for every rate.

    ``arrival_rate`` (R,) in packets/s; ``alpha`` (m,) and ``T`` (m, m) in 1/s, validated
    by the caller; ``1 <= N <= K``.  All arrays float64 and C-contiguous.
    """
    R, m = arrival_rate.shape[0], alpha.shape[0]
    if R >= _MIN_BLOCK and N <= _MAX_BLOCK_BATCH:
        # Equal blocks of at most _BLOCK rates, rounded up to a multiple of 4.
        per_block = math.ceil(R / math.ceil(R / _BLOCK))
        lanes = 4 * math.ceil(per_block / 4)
        if lanes * (K - N + 1) * (m * m + 2 * m) <= _BLOCK_VALUES:
            return _solve_blocks(arrival_rate, K, N, alpha, T, lanes)
    return _solve_rates(arrival_rate, K, N, alpha, T)


@njit(cache=True, nogil=True, error_model="numpy")
def _exit_rates(T: NDArray[np.float64]) -> tuple[float, NDArray[np.float64]]:
    """max|T_kk| and the exit rates ``t = max(-T 1, 0)`` (1/s)."""
    m = T.shape[0]
    max_out = 0.0
    exit_raw = np.empty(m)
    for k in range(m):
        max_out = max(max_out, -T[k, k])
        total = 0.0
        for j in range(m):
            total += T[k, j]
        exit_raw[k] = max(-total, 0.0)
    return max_out, exit_raw


@njit(cache=True, nogil=True, error_model="numpy")
def _normalise(
    log_level: NDArray[np.float64],
    phase_at: NDArray[np.float64],
    dist: NDArray[np.float64],
    phase_mass: NDArray[np.float64],
) -> None:
    """One rate: ``dist`` from the log level masses, ``phase_mass`` = sum_n pi(n) phase_n."""
    K = log_level.shape[0] - 1
    levels, m = phase_at.shape[0], phase_at.shape[1]
    N = K + 1 - levels
    top = log_level[0]
    for n in range(1, K + 1):
        top = max(top, log_level[n])
    norm = 0.0
    for n in range(K + 1):
        p = math.exp(log_level[n] - top)
        dist[n] = p
        norm += p
    for n in range(K + 1):
        dist[n] /= norm
    for k in range(m):
        acc = 0.0
        for level in range(levels):
            acc += phase_at[level, k] * dist[N + level]
        phase_mass[k] = acc


# --- In blocks of rates -----------------------------------------------------------------


@njit(cache=True, nogil=True, error_model="numpy")
def _solve_blocks(
    arrival_rate: NDArray[np.float64],
    K: int,
    N: int,
    alpha: NDArray[np.float64],
    T: NDArray[np.float64],
    lanes: int,
) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    """The solve, ``lanes`` rates at a time; a last, partial block is padded."""
    R = arrival_rate.shape[0]
    m = alpha.shape[0]
    levels = K - N + 1  # busy levels N..K, stored at index n - N
    max_out, exit_raw = _exit_rates(T)
    dist = np.empty((R, K + 1))
    phase_mass = np.empty((R, m))
    # The GTH reduction of every busy level, kept for the upward pass: the within-level
    # rates W[i, j] at the time each phase was eliminated, and each phase's outflow s.
    kept_W = np.empty((levels, m, m, lanes))
    kept_s = np.empty((levels, m, lanes))
    phase_at = np.empty((levels, m, lanes))  # normalised phase distribution per level
    rate_off = np.empty((m, m, lanes))
    exit_rates = np.empty((m, lanes))
    D = np.empty((m, N, lanes))
    H = np.empty((m, N, lanes))
    exits = np.empty((N, lanes))
    log_level = np.empty((K + 1, lanes))
    vec = np.empty((m, lanes))
    lam = np.empty(lanes)
    work = np.empty(lanes)
    for start in range(0, R, lanes):
        # All rates are divided by lam + max|T_kk|: the stationary distribution is
        # unchanged and no rate exceeds 1, so extreme lam/mu cannot overflow.
        for b in range(lanes):
            raw = arrival_rate[min(start + b, R - 1)]
            scale = raw + max_out
            lam[b] = raw / scale
            for k in range(m):
                exit_rates[k, b] = exit_raw[k] / scale
                for j in range(m):
                    rate_off[k, j, b] = 0.0 if j == k else T[k, j] / scale
        _block_eliminate(lam, rate_off, exit_rates, alpha, kept_W, kept_s, D, H, work, lanes)
        _block_idle(alpha, H, exits, log_level, lanes)
        _block_busy(lam, alpha, kept_W, kept_s, vec, phase_at, log_level, work, lanes)
        for b in range(min(lanes, R - start)):
            _normalise(log_level[:, b], phase_at[:, :, b], dist[start + b], phase_mass[start + b])
    return dist, phase_mass


@njit(cache=True, nogil=True, error_model="numpy")
def _block_eliminate(
    lam: NDArray[np.float64],
    rate_off: NDArray[np.float64],
    exit_rates: NDArray[np.float64],
    alpha: NDArray[np.float64],
    kept_W: NDArray[np.float64],
    kept_s: NDArray[np.float64],
    D: NDArray[np.float64],
    H: NDArray[np.float64],
    share: NDArray[np.float64],
    lanes: int,
) -> None:
    """Remove the busy levels from K down to N; fill kept_W, kept_s, and H of level N.

    ``H[k, x]`` is the probability that the excursion started in phase k of the level
    just removed first lands on level ``n - N + x``; ``share`` is scratch.
    """
    levels, m = kept_s.shape[0], kept_s.shape[1]
    N = D.shape[1]
    for level in range(levels - 1, -1, -1):
        W = kept_W[level]
        s = kept_s[level]
        # Rates out of (n, k) once the levels above n are removed: phase changes,
        # completions (landing on n - N) and, below K, the arrival (lam) followed by the
        # excursion above n, which lands on n - N + 1 .. n as the previous H says; landing
        # on n itself re-enters with phases alpha (a within-level rate; self-loops are
        # dropped).  H of the level above is read here, before it is overwritten.
        top = level == levels - 1
        for k in range(m):
            for b in range(lanes):
                D[k, 0, b] = exit_rates[k, b]
            for j in range(m):
                for b in range(lanes):
                    W[k, j, b] = rate_off[k, j, b]
            if top:
                for x in range(1, N):
                    for b in range(lanes):
                        D[k, x, b] = 0.0
            else:
                for j in range(m):
                    if j != k and alpha[j] != 0.0:
                        for b in range(lanes):
                            W[k, j, b] += lam[b] * H[k, N - 1, b] * alpha[j]
                for x in range(1, N):
                    for b in range(lanes):
                        D[k, x, b] = lam[b] * H[k, x - 1, b]
        # GTH: remove phases from the last to the first.  Removing phase k sends the rate
        # W[i, k] of every phase i < k on along k's own rates, in proportion W[k, .] / s_k,
        # where s_k is the *sum* of k's rates to the phases still present and to the
        # landing levels -- no subtraction anywhere.
        for k in range(m - 1, -1, -1):
            for b in range(lanes):
                s[k, b] = 0.0
            for j in range(k):
                for b in range(lanes):
                    s[k, b] += W[k, j, b]
            for x in range(N):
                for b in range(lanes):
                    s[k, b] += D[k, x, b]
            for b in range(lanes):
                s[k, b] = max(s[k, b], _TINY)
            for i in range(k):
                nonzero = False
                for b in range(lanes):
                    share[b] = W[i, k, b] / s[k, b]
                    nonzero |= share[b] != 0.0
                if not nonzero:
                    continue
                for j in range(k):
                    if j != i:  # the diagonal stays 0: self-loops do not matter
                        for b in range(lanes):
                            W[i, j, b] += share[b] * W[k, j, b]
                for x in range(N):
                    for b in range(lanes):
                        D[i, x, b] += share[b] * D[k, x, b]
        # Exit distribution: from phase k the reduced chain moves to a phase j < k or
        # lands, so H is filled in from phase 0 up.
        for k in range(m):
            for x in range(N):
                for b in range(lanes):
                    H[k, x, b] = D[k, x, b]
            for j in range(k):
                for x in range(N):
                    for b in range(lanes):
                        H[k, x, b] += W[k, j, b] * H[j, x, b]
            for x in range(N):
                for b in range(lanes):
                    H[k, x, b] /= s[k, b]


@njit(cache=True, nogil=True, error_model="numpy")
def _block_idle(
    alpha: NDArray[np.float64],
    H: NDArray[np.float64],
    exits: NDArray[np.float64],
    log_level: NDArray[np.float64],
    lanes: int,
) -> None:
    """log pi(n) - log pi(0) for the idle levels n = 0..N-1 into ``log_level[:N]``.

    Level N - 1's arrival enters level N with phases alpha; ``exits[x]`` is the
    probability that the excursion it starts first lands on level x.  For idle level n,
    landing on n itself is a self-loop and the censored outflow is lam * P(land below n),
    so ``pi(n) = pi(n-1) / P(an excursion from n lands below n)``.
    """
    m, N = H.shape[0], H.shape[1]
    for x in range(N):
        for b in range(lanes):
            exits[x, b] = 0.0
        for k in range(m):
            for b in range(lanes):
                exits[x, b] += alpha[k] * H[k, x, b]
    for n in range(N - 1, 0, -1):
        for b in range(lanes):
            below = 0.0
            for x in range(n):
                below += exits[x, b]
            below = max(below, _TINY)
            log_level[n, b] = -math.log(below)  # the step; summed up below
            for x in range(n):
                exits[x, b] /= below
    for b in range(lanes):
        log_level[0, b] = 0.0
    for n in range(1, N):
        for b in range(lanes):
            log_level[n, b] += log_level[n - 1, b]


@njit(cache=True, nogil=True, error_model="numpy")
def _block_busy(
    lam: NDArray[np.float64],
    alpha: NDArray[np.float64],
    kept_W: NDArray[np.float64],
    kept_s: NDArray[np.float64],
    vec: NDArray[np.float64],
    phase_at: NDArray[np.float64],
    log_level: NDArray[np.float64],
    log_lam: NDArray[np.float64],
    lanes: int,
) -> None:
    """Back-substitution upward over the busy levels; fills phase_at and log_level[N:].

    Level n is entered from below only by arrivals, so pi_n solves
    ``pi_n (diag(s) - W) = lam pi_{n-1}`` (inflow with phases alpha at level N), with the
    stored GTH reduction: what enters phase k moves on to phase j < k with probability
    ``W[k, j] / s_k`` (passed down from the last phase), and the expected time in phase k
    is ``(inflow_k + sum_{i<k} x_i W[i, k]) / s_k``, from k = 0 up.  Both sweeps are done
    in place in ``vec``.  Each level is kept normalised, with the log of its mass.
    ``log_lam`` is scratch.
    """
    levels, m = kept_s.shape[0], kept_s.shape[1]
    first = log_level.shape[0] - levels  # = N
    for b in range(lanes):
        log_lam[b] = math.log(lam[b])
    for k in range(m):
        for b in range(lanes):
            vec[k, b] = alpha[k]
    for level in range(levels):
        W = kept_W[level]
        s = kept_s[level]
        for k in range(m - 1, 0, -1):
            for j in range(k):
                for b in range(lanes):
                    vec[j, b] += vec[k, b] * W[k, j, b] / s[k, b]
        for k in range(m):
            for i in range(k):
                for b in range(lanes):
                    vec[k, b] += vec[i, b] * W[i, k, b]
            for b in range(lanes):
                vec[k, b] /= s[k, b]
        n = first + level
        for b in range(lanes):
            total = 0.0
            for k in range(m):
                total += vec[k, b]
            total = max(total, _TINY)
            for k in range(m):
                vec[k, b] /= total
                phase_at[level, k, b] = vec[k, b]
            log_level[n, b] = log_level[n - 1, b] + log_lam[b] + math.log(total)


# --- One rate at a time: the same steps, with scalars in place of the block loops --------


@njit(cache=True, nogil=True, error_model="numpy")
def _solve_rates(
    arrival_rate: NDArray[np.float64],
    K: int,
    N: int,
    alpha: NDArray[np.float64],
    T: NDArray[np.float64],
) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    """The solve, one rate at a time (see :func:`_solve_blocks` for the steps)."""
    R = arrival_rate.shape[0]
    m = alpha.shape[0]
    levels = K - N + 1
    max_out, exit_raw = _exit_rates(T)
    dist = np.empty((R, K + 1))
    phase_mass = np.empty((R, m))
    kept_W = np.empty((levels, m, m))
    kept_s = np.empty((levels, m))
    phase_at = np.empty((levels, m))
    rate_off = np.empty((m, m))
    exit_rates = np.empty(m)
    D = np.empty((m, N))
    H = np.empty((m, N))
    exits = np.empty(N)
    log_level = np.empty(K + 1)
    vec = np.empty(m)
    for r in range(R):
        scale = arrival_rate[r] + max_out
        lam = arrival_rate[r] / scale
        for k in range(m):
            exit_rates[k] = exit_raw[k] / scale
            for j in range(m):
                rate_off[k, j] = 0.0 if j == k else T[k, j] / scale
        _rate_eliminate(lam, rate_off, exit_rates, alpha, kept_W, kept_s, D, H)
        _rate_idle(alpha, H, exits, log_level)
        _rate_busy(lam, alpha, kept_W, kept_s, vec, phase_at, log_level)
        _normalise(log_level, phase_at, dist[r], phase_mass[r])
    return dist, phase_mass


@njit(cache=True, nogil=True, error_model="numpy")
def _rate_eliminate(
    lam: float,
    rate_off: NDArray[np.float64],
    exit_rates: NDArray[np.float64],
    alpha: NDArray[np.float64],
    kept_W: NDArray[np.float64],
    kept_s: NDArray[np.float64],
    D: NDArray[np.float64],
    H: NDArray[np.float64],
) -> None:
    """:func:`_block_eliminate` for one rate."""
    levels, m = kept_s.shape
    N = D.shape[1]
    for level in range(levels - 1, -1, -1):
        W = kept_W[level]
        top = level == levels - 1
        for k in range(m):
            D[k, 0] = exit_rates[k]
            for j in range(m):
                W[k, j] = rate_off[k, j]
            if top:
                for x in range(1, N):
                    D[k, x] = 0.0
            else:
                back = lam * H[k, N - 1]
                for j in range(m):
                    if j != k and alpha[j] != 0.0:
                        W[k, j] += back * alpha[j]
                for x in range(1, N):
                    D[k, x] = lam * H[k, x - 1]
        for k in range(m - 1, -1, -1):
            s_k = 0.0
            for j in range(k):
                s_k += W[k, j]
            for x in range(N):
                s_k += D[k, x]
            s_k = max(s_k, _TINY)
            kept_s[level, k] = s_k
            for i in range(k):
                share = W[i, k] / s_k
                if share == 0.0:
                    continue
                for j in range(k):
                    if j != i:
                        W[i, j] += share * W[k, j]
                for x in range(N):
                    D[i, x] += share * D[k, x]
        for k in range(m):
            for x in range(N):
                H[k, x] = D[k, x]
            for j in range(k):
                w = W[k, j]
                for x in range(N):
                    H[k, x] += w * H[j, x]
            for x in range(N):
                H[k, x] /= kept_s[level, k]


@njit(cache=True, nogil=True, error_model="numpy")
def _rate_idle(
    alpha: NDArray[np.float64],
    H: NDArray[np.float64],
    exits: NDArray[np.float64],
    log_level: NDArray[np.float64],
) -> None:
    """:func:`_block_idle` for one rate."""
    m, N = H.shape
    for x in range(N):
        exits[x] = 0.0
        for k in range(m):
            exits[x] += alpha[k] * H[k, x]
    for n in range(N - 1, 0, -1):
        below = 0.0
        for x in range(n):
            below += exits[x]
        below = max(below, _TINY)
        log_level[n] = -math.log(below)
        for x in range(n):
            exits[x] /= below
    log_level[0] = 0.0
    for n in range(1, N):
        log_level[n] += log_level[n - 1]


@njit(cache=True, nogil=True, error_model="numpy")
def _rate_busy(
    lam: float,
    alpha: NDArray[np.float64],
    kept_W: NDArray[np.float64],
    kept_s: NDArray[np.float64],
    vec: NDArray[np.float64],
    phase_at: NDArray[np.float64],
    log_level: NDArray[np.float64],
) -> None:
    """:func:`_block_busy` for one rate."""
    levels, m = kept_s.shape
    first = log_level.shape[0] - levels
    log_lam = math.log(lam)
    for k in range(m):
        vec[k] = alpha[k]
    for level in range(levels):
        W = kept_W[level]
        s = kept_s[level]
        for k in range(m - 1, 0, -1):
            for j in range(k):
                vec[j] += vec[k] * W[k, j] / s[k]
        for k in range(m):
            for i in range(k):
                vec[k] += vec[i] * W[i, k]
            vec[k] /= s[k]
        total = 0.0
        for k in range(m):
            total += vec[k]
        total = max(total, _TINY)
        for k in range(m):
            vec[k] /= total
            phase_at[level, k] = vec[k]
        n = first + level
        log_level[n] = log_level[n - 1] + log_lam + math.log(total)
