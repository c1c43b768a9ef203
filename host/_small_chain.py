"""Compiled kernels that solve both end-system chains of a small shape in one call.

For paper-sized workloads (a handful of states) the NumPy solution of
:func:`host.interrupt_service_time` is some forty array operations on vectors of two to
ten entries, and their call overhead is nearly all of its cost, ahead of the model's
arithmetic by two orders of magnitude.  :func:`solve_small_chain` runs the same steps as
one Numba function:

1. the edge rates of both nets (the formulas of :class:`host._shape.EdgeRates`, in its
   order of operations, so the same doubles);
2. the Fig. 1a steady state by detailed balance (the grounded Laplacian's inverse, as
   :class:`host._shape.DetailedBalance` keeps it for small chains), with the same
   Kolmogorov check on every edge, and its residual ``||pi Q||_1``;
3. the occupancy measures of that steady state;
4. the tagged chain of Fig. 1b: its start vector, exit and total outflow rates, its
   detailed-balance weights (checked), the mean and second moment from two solves with
   ``-T``, and the symmetrised ``S`` that the eigen-decomposition needs on demand.

:class:`host._shape.SmallChain` holds a shape's arrays in the kernel's argument order
and calls it.  The kernels know arrays only, nothing of shapes.  Sums run in index
order and the matrix-vector products are plain loops, so results may differ from the
NumPy path's in the last bits (tested to 1e-12 relative).
"""

from __future__ import annotations

from typing import Any

import numpy as np
from numba import njit
from numpy.typing import NDArray

__all__ = ["solve_small_chain"]


@njit(cache=True, nogil=True)
def _edge_rates(
    c: float,
    m: float,
    mu_io_cpu: float,
    mu_disk: float,
    mu_net: float,
    disks: float,
    n_edges: int,
    to_disk: NDArray[np.intp],
    done: NDArray[np.intp],
    interrupt: NDArray[np.intp],
    io_in: NDArray[np.float64],
    present_in: NDArray[np.float64],
    ties_in: NDArray[np.float64],
    ties_out: NDArray[np.float64],
    present_interrupt: NDArray[np.float64],
) -> NDArray[np.float64]:
    """EdgeRates.__call__, operation for operation (see its comments for the formulas)."""
    rates = np.empty(n_edges)
    for k in range(to_disk.shape[0]):
        share = min(1.0, m / (c + present_in[k]))
        rates[to_disk[k]] = io_in[k] * mu_io_cpu * share * ties_in[k] / disks
    for k in range(done.shape[0]):
        rates[done[k]] = mu_disk * ties_out[k]
    for k in range(interrupt.shape[0]):
        rates[interrupt[k]] = mu_net * min(1.0, m / (c + present_interrupt[k]))
    return rates


@njit(cache=True, nogil=True)
def _log_weights(
    rates: NDArray[np.float64],
    rows: NDArray[np.intp],
    cols: NDArray[np.intp],
    reverse: NDArray[np.intp],
    inverse: NDArray[np.float64],
    n: int,
    tolerance: float,
) -> tuple[bool, NDArray[np.float64]]:
    """DetailedBalance.log_weights with the small-chain inverse: (reversible, log w)."""
    ell = np.zeros(n)
    if n == 1:
        return True, ell
    edges = rates.shape[0]
    g = np.empty(edges)
    into = np.zeros(n)
    out = np.zeros(n)
    scale = 1.0
    for k in range(edges):
        g[k] = np.log(rates[k]) - np.log(rates[reverse[k]])
        into[cols[k]] += g[k]
        out[rows[k]] += g[k]
        scale = max(scale, abs(g[k]))
    for i in range(1, n):
        total = 0.0
        for j in range(1, n):
            total += inverse[i - 1, j - 1] * (into[j] - out[j])
        ell[i] = total
    # Kolmogorov's criterion on every edge; a NaN fails it too.
    for k in range(edges):
        if not abs(ell[cols[k]] - ell[rows[k]] - g[k]) <= tolerance * scale:
            return False, ell
    top = ell.max()
    for i in range(n):
        ell[i] -= top
    return True, ell


@njit(cache=True, nogil=True)
def solve_small_chain(
    params: NDArray[np.float64],
    disks: float,
    tolerance: float,
    # Fig. 1a: edge-rate data, moving edges, detailed balance, occupancy maps.
    a_edges: int,
    a_to_disk: NDArray[np.intp],
    a_done: NDArray[np.intp],
    a_interrupt: NDArray[np.intp],
    a_io_in: NDArray[np.float64],
    a_present_in: NDArray[np.float64],
    a_ties_in: NDArray[np.float64],
    a_ties_out: NDArray[np.float64],
    a_present_interrupt: NDArray[np.float64],
    a_moving: NDArray[np.intp],
    a_src: NDArray[np.intp],
    a_dst: NDArray[np.intp],
    a_reverse: NDArray[np.intp],
    a_inverse: NDArray[np.float64],
    io_at_cpu: NDArray[np.float64],
    busy_disks: NDArray[np.float64],
    # Fig. 1b: edge-rate data, starts, inner and exit edges, detailed balance.
    b_edges: int,
    b_to_disk: NDArray[np.intp],
    b_done: NDArray[np.intp],
    b_interrupt: NDArray[np.intp],
    b_io_in: NDArray[np.float64],
    b_present_in: NDArray[np.float64],
    b_ties_in: NDArray[np.float64],
    b_ties_out: NDArray[np.float64],
    b_present_interrupt: NDArray[np.float64],
    b_from_a: NDArray[np.intp],
    b_inner: NDArray[np.intp],
    b_exit: NDArray[np.intp],
    b_exit_row: NDArray[np.intp],
    b_rows: NDArray[np.intp],
    b_cols: NDArray[np.intp],
    b_reverse: NDArray[np.intp],
    b_inverse: NDArray[np.float64],
) -> tuple[Any, ...]:
    c, m, mu_io_cpu, mu_disk, mu_net = params[0], params[1], params[2], params[3], params[4]
    fail = (
        False, 0.0, 0.0, 0.0, 0.0, np.empty(0), np.empty(0), np.empty(0), np.empty(0),
        np.empty(0), np.empty(0), np.empty((0, 0)), 0.0, 0.0,
    )  # fmt: skip

    # Step 1: the steady state of Fig. 1a, from its logs (exact where pi underflows).
    all_a = _edge_rates(
        c, m, mu_io_cpu, mu_disk, mu_net, disks, a_edges, a_to_disk, a_done, a_interrupt,
        a_io_in, a_present_in, a_ties_in, a_ties_out, a_present_interrupt,
    )  # fmt: skip
    rates_a = all_a[a_moving]
    n = io_at_cpu.shape[0]
    ok, log_pi = _log_weights(rates_a, a_src, a_dst, a_reverse, a_inverse, n, tolerance)
    if not ok:
        return fail
    log_pi -= np.log(np.exp(log_pi).sum())
    pi = np.exp(log_pi)
    balance = np.zeros(n)
    for k in range(rates_a.shape[0]):
        flow = pi[a_src[k]] * rates_a[k]
        balance[a_dst[k]] += flow
        balance[a_src[k]] -= flow
    residual = np.abs(balance).sum()

    # Occupancy: E[i], E[busy disks], E[min(C + i, m)] and P(i = k).
    io_tasks = int(io_at_cpu.max()) if n > 0 else 0
    distribution = np.zeros(io_tasks + 1)
    io_cpu = busy = cores = 0.0
    for s in range(n):
        io_cpu += pi[s] * io_at_cpu[s]
        busy += pi[s] * busy_disks[s]
        cores += pi[s] * min(c + io_at_cpu[s], m)
        distribution[int(io_at_cpu[s])] += pi[s]

    # Step 2: the tagged chain, started from that steady state.
    rates_b = _edge_rates(
        c, m, mu_io_cpu, mu_disk, mu_net, disks, b_edges, b_to_disk, b_done, b_interrupt,
        b_io_in, b_present_in, b_ties_in, b_ties_out, b_present_interrupt,
    )  # fmt: skip
    nt = b_from_a.shape[0]
    alpha = pi[b_from_a]
    inner = rates_b[b_inner]
    exits = np.zeros(nt)  # -T's row sums: the rate at which the interrupt completes
    for k in range(b_exit.shape[0]):
        exits[b_exit_row[k]] += rates_b[b_exit[k]]
    # -T's diagonal: inner edges summed from zero, then the exits added, as the NumPy
    # path does (exits + bincount), so that both give the same doubles.
    out_rate = np.zeros(nt)
    for k in range(inner.shape[0]):
        out_rate[b_rows[k]] += inner[k]
    for i in range(nt):
        out_rate[i] = exits[i] + out_rate[i]
    ok, log_w = _log_weights(inner, b_rows, b_cols, b_reverse, b_inverse, nt, tolerance)
    if not ok:
        return fail
    left = np.exp(log_pi[b_from_a] - 0.5 * log_w)  # alpha D^(-1/2)
    right = np.exp(0.5 * log_w)  # D^(1/2) 1
    moves = np.zeros((nt, nt))  # T's off-diagonal rates
    S = np.zeros((nt, nt))
    for k in range(inner.shape[0]):
        moves[b_rows[k], b_cols[k]] += inner[k]
        S[b_rows[k], b_cols[k]] += np.sqrt(inner[k] * inner[b_reverse[k]])
    for i in range(nt):
        S[i, i] = -out_rate[i]
    # Mean and second moment: u = (-T)^-1 1, w = (-T)^-1 u, E[X] = alpha u,
    # E[X^2] = 2 alpha w.
    if not _factor_m_matrix(moves, exits):
        return fail
    u = _solve_factored(moves, np.ones(nt))
    w = _solve_factored(moves, u)
    mean = 0.0
    second = 0.0
    for i in range(nt):
        mean += alpha[i] * u[i]
        second += alpha[i] * w[i]
    return (
        True, residual, io_cpu, busy, cores, distribution, alpha, inner, out_rate, left,
        right, S, mean, 2.0 * second,
    )  # fmt: skip


@njit(cache=True, nogil=True)
def _factor_m_matrix(moves: NDArray[np.float64], exits: NDArray[np.float64]) -> bool:
    """LU of ``-T`` in place, with no subtraction (Grassmann-Taksar-Heyman style).

    ``-T = diag(exits + row sums of moves) - moves`` is a nonsingular M-matrix when
    every state can reach an exit.  Gaussian elimination keeps its off-diagonal
    magnitudes and row sums (the exit rates) instead of its diagonal: each update adds
    nonnegative terms, and each pivot is recomputed as its row sum plus the remaining
    off-diagonals, so the factors are accurate entrywise however stiff the rates
    (Alfa, Xue and Ye, Math. Comp. 71, 2002).  An LU with partial pivoting loses about
    ``cond(T) * eps`` instead: 1e-7 relative on the mean for rates 1e10 apart.

    On return ``moves[k, k]`` holds pivot k, ``moves[k, j > k]`` the magnitudes of U's
    row k, ``moves[i > k, k]`` the multipliers.  ``exits`` is overwritten.  False if a
    pivot is not positive and finite (no exit reachable: the caller falls back).
    """
    n = moves.shape[0]
    for k in range(n):
        pivot = exits[k]
        for j in range(k + 1, n):
            pivot += moves[k, j]
        if not (0.0 < pivot < np.inf):
            return False
        moves[k, k] = pivot
        for i in range(k + 1, n):
            multiplier = moves[i, k] / pivot
            moves[i, k] = multiplier
            if multiplier == 0.0:
                continue
            exits[i] += multiplier * exits[k]
            for j in range(k + 1, n):
                if j != i:
                    moves[i, j] += multiplier * moves[k, j]
    return True


@njit(cache=True, nogil=True)
def _solve_factored(factors: NDArray[np.float64], b: NDArray[np.float64]) -> NDArray[np.float64]:
    """``(-T)^-1 b`` for ``b >= 0`` from :func:`_factor_m_matrix`'s factors: every term
    of both substitutions is nonnegative, so no accuracy is lost to cancellation."""
    n = b.shape[0]
    x = b.copy()
    for i in range(n):
        for k in range(i):
            x[i] += factors[i, k] * x[k]
    for k in range(n - 1, -1, -1):
        total = x[k]
        for j in range(k + 1, n):
            total += factors[k, j] * x[j]
        x[k] = total / factors[k, k]
    return x
