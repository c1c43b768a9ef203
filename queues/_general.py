"""General bulk service [a, b] with phase-type service: a reduced sparse linear system.

State of the full chain: ``(n, s, k)`` with ``n`` packets in the buffer (including the
batch in service), ``s`` the batch being served (0 when idle) and ``k`` the service
phase.  Service starts when at least ``a`` packets wait and takes ``min(n, b)``, fixed at
the start; with ``a = b = N`` this is the paper's fixed-batch rule.

Two facts keep the system small (about ``m * K`` unknowns instead of ``m * (b-a+1) * K``):

* Every service start at level ``r`` enters the same states: batch ``phi(r) = min(r, b)``
  with phases drawn from ``alpha``.  For ``a <= r < b`` the batch is ``r`` itself, and the
  states ``(n, r, .)`` (a "side chain") are entered only there.  During one service the
  level only rises (arrivals) until the completion, so the side chain's probabilities are
  its entry rate ``f(r)`` (1/s) times known per-service quantities, and it lands on level
  ``min(A, K - r)``, where ``A`` is the number of Poisson arrivals during one service:
  ``P(A = j) = alpha G^j (lam I - T)^-1 t`` with ``G = lam (lam I - T)^-1`` (the
  M/G/1-type arrival-count probabilities).  Each side chain is a single unknown.
* The states with batch ``b`` are entered at every level ``r >= b``; they stay explicit.

Unknowns, in order: the batch-``b`` states ``(n, k)`` for ``n = b..K``; the side-chain
masses ``g(s) = f(s) * E[S]`` for ``s = a..b-1`` (probability units, so every column has
the same scale); the idle states ``n = a-1, ..., 0``.  Row ``i`` is the balance (outflow -
inflow) of unknown ``i``; the columns sum to zero, so the matrix is a singular,
column-diagonally-dominant M-matrix (the balance equations of a CTMC in which a side
chain is one state held for an exponential time of mean ``E[S]``).  The last row (idle
state 0, which every state can reach) is replaced by the normalisation, and the system is
solved by one sparse LU (SuperLU) per arrival rate; the pattern is built once.  In this
order, elimination without pivoting is stable (column diagonal dominance) and fills only
the band ``m * (b + 1)`` of the batch-b block plus the ``b`` border rows and columns
(work linear in K); SuperLU's COLAMD order with partial pivoting fills less and ran about
twice as fast with the same accuracy, so it is used.  The result is accurate to ~1e-16 *absolute*
per probability; probabilities far below that carry few correct digits (the fixed-batch
solvers keep relative accuracy).

For a fixed batch (``a == b``) :mod:`queues._levels` is used instead: level-by-level
censoring, vectorised over the rates and relatively accurate even for tiny
probabilities.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp
import scipy.sparse.linalg as spla
from numpy.typing import NDArray

from ._levels import fixed_batch_phase_type

__all__ = ["GeneralResult", "general_bulk_queue", "saturated_limit"]

# Column ordering for SuperLU.  COLAMD with partial pivoting gave less fill and ran about
# twice as fast as the natural (no-pivoting) order on K = 4096, [1, 64], with the same
# absolute accuracy.
_ORDERING = "COLAMD"

# lam / mu above this times K: the saturation limit instead of the sparse LU.  There the
# limit's relative error in 1 - loss (about K * mu / lam) is below 1e-9, while the LU's
# grows like lam / mu * 1e-17 (measured: 4e-6 at lam/mu = 1e12, K = 64, [2, 6]) and
# SuperLU reports the matrix exactly singular from about 1e17.
_LIMIT_RATIO = 1e9


@dataclass(frozen=True)
class GeneralResult:
    """Per-rate results of :func:`general_bulk_queue` (rows index the rates).

    Attributes
    ----------
    distribution : ndarray, shape (R, K + 1)
        P(n packets in the buffer), marginal over batch and phase.
    busy : ndarray, shape (R,)
        P(a service is running).
    interrupt_rate : ndarray, shape (R,)
        Completed services per second.
    mean_batch : ndarray, shape (R,)
        Mean packets per completed service.
    method : str
        ``"level-censoring"`` or ``"reduced-sparse-lu"``.
    """

    distribution: NDArray[np.float64]
    busy: NDArray[np.float64]
    interrupt_rate: NDArray[np.float64]
    mean_batch: NDArray[np.float64]
    method: str


@dataclass(frozen=True)
class _Pattern:
    """Sparsity pattern (CSC order) and value recipe of the reduced system.

    The value of entry ``e`` for one rate is
    ``const[e] + lam * per_lam[e] + per_landing[e] * landing[landing_index[e]]`` where
    ``landing = mu_bar * concatenate([pmf, tail])`` holds the arrival-count probabilities
    ``P(A = j)`` and ``P(A >= j)``, ``j = 0..K``: side chain ``s`` lands on level ``x``
    with probability ``P(A = x)`` for ``x < K - s`` and ``P(A >= K - s)`` for ``x = K - s``.
    """

    indices: NDArray[np.int32]
    indptr: NDArray[np.int32]
    const: NDArray[np.float64]
    per_lam: NDArray[np.float64]
    per_landing: NDArray[np.float64]
    landing_index: NDArray[np.intp]
    size: int


class _Builder:
    """Collects matrix entries as (row, col, const, per_lam, per_landing, landing_index)."""

    def __init__(self) -> None:
        self.parts: list[tuple[NDArray[np.generic], ...]] = []

    def add(
        self,
        row: NDArray[np.intp] | int,
        col: NDArray[np.intp] | int,
        const: NDArray[np.float64] | float = 0.0,
        per_lam: NDArray[np.float64] | float = 0.0,
        per_landing: NDArray[np.float64] | float = 0.0,
        landing_index: NDArray[np.intp] | int = 0,
    ) -> None:
        arrays = np.broadcast_arrays(
            np.asarray(row, dtype=np.intp),
            np.asarray(col, dtype=np.intp),
            np.asarray(const, dtype=np.float64),
            np.asarray(per_lam, dtype=np.float64),
            np.asarray(per_landing, dtype=np.float64),
            np.asarray(landing_index, dtype=np.intp),
        )
        self.parts.append(tuple(np.ravel(x) for x in arrays))

    def pattern(self, size: int, normalise_row: int) -> _Pattern:
        row, col, const, per_lam, per_landing, landing_index = (
            np.concatenate([p[i] for p in self.parts]) for i in range(6)
        )
        keep = row != normalise_row
        everything = np.arange(size)
        row = np.concatenate([row[keep], np.full(size, normalise_row)])
        col = np.concatenate([col[keep], everything])
        const = np.concatenate([const[keep], np.ones(size)])
        per_lam = np.concatenate([per_lam[keep], np.zeros(size)])
        per_landing = np.concatenate([per_landing[keep], np.zeros(size)])
        landing_index = np.concatenate([landing_index[keep], np.zeros(size, dtype=np.intp)])
        order = np.lexsort((row, col))
        row, col = row[order], col[order]
        if np.any((np.diff(col) == 0) & (np.diff(row) == 0)):  # pragma: no cover
            raise AssertionError("duplicate entries in the bulk-queue pattern")
        indptr = np.zeros(size + 1, dtype=np.int32)
        np.cumsum(np.bincount(col, minlength=size), out=indptr[1:])
        return _Pattern(
            indices=row.astype(np.int32),
            indptr=indptr,
            const=const[order],
            per_lam=per_lam[order],
            per_landing=per_landing[order],
            landing_index=landing_index[order],
            size=size,
        )


def general_bulk_queue(
    arrival_rate: NDArray[np.float64],
    capacity: int,
    min_batch: int,
    batch: int,
    alpha: NDArray[np.float64],
    T: NDArray[np.float64],
    *,
    method: str = "auto",
) -> GeneralResult:
    """Solve the M/PH[a,b]/1/K queue for every arrival rate.

    Parameters
    ----------
    arrival_rate : ndarray, shape (R,)
        Packet arrival rates (packets/s), > 0.
    capacity : int
        Buffer size K (packets, including the batch in service).
    min_batch, batch : int
        The rule [a, b] (packets): ``1 <= a <= b <= K``.
    alpha, T : ndarray, shapes (m,) and (m, m)
        Phase-type service time: initial probabilities (summing to 1) and sub-generator
        (1/s), already validated.
    method : {"auto", "levels", "sparse-lu"}
        ``levels``: level-by-level censoring, vectorised over the rates (fixed batch
        ``a == b`` only); ``sparse-lu``: the reduced system, one sparse LU per rate (any
        rule).  ``auto`` picks ``levels`` when ``a == b``.

    Returns
    -------
    GeneralResult
    """
    K, a, b = capacity, min_batch, batch
    if method == "auto":
        method = "levels" if a == b else "sparse-lu"
    if method == "levels":
        if a != b:
            raise ValueError("the levels method needs a fixed batch (min_batch == batch)")
        exit_rates = np.clip(-T.sum(axis=1), 0.0, None)
        dist, phase_mass = fixed_batch_phase_type(arrival_rate, K, b, alpha, T)
        interrupt_rate = phase_mass @ exit_rates
        return GeneralResult(
            distribution=dist,
            busy=phase_mass.sum(axis=1),
            interrupt_rate=interrupt_rate,
            mean_batch=np.full(arrival_rate.size, float(b)),
            method="level-censoring",
        )
    if method != "sparse-lu":
        raise ValueError(f"unknown method {method!r}")
    lam = arrival_rate
    R, m = lam.size, alpha.size
    exit_rates = np.clip(-T.sum(axis=1), 0.0, None)
    mean_service = float(alpha @ np.linalg.solve(-T, np.ones(m)))
    mu_bar = 1.0 / mean_service
    n_levels = K + 1
    n_main = m * (K - b + 1)
    n_side = b - a

    pattern = _build_pattern(K, a, b, alpha, T, exit_rates, mu_bar)
    rhs = np.zeros(pattern.size)
    rhs[-1] = 1.0

    if n_side:
        counts = _arrival_counts(lam, K, alpha, T, exit_rates)
        landing = np.concatenate([counts.pmf, counts.tail], axis=1) * mu_bar

    # Where arrivals outpace service by more than _LIMIT_RATIO * K, the system's matrix
    # spans more than the double range (SuperLU then reports it exactly singular, or
    # loses every digit of 1 - loss); the answer there is the exact limit, below.
    extreme = lam / mu_bar > _LIMIT_RATIO * K
    solution = np.zeros((R, pattern.size))
    for i in range(R):
        if extreme[i]:
            continue
        values = pattern.const + lam[i] * pattern.per_lam
        if n_side:
            values += pattern.per_landing * landing[i, pattern.landing_index]
        A = sp.csc_array(
            (values, pattern.indices, pattern.indptr), shape=(pattern.size, pattern.size)
        )
        lu = spla.splu(A, permc_spec=_ORDERING)
        solution[i] = lu.solve(rhs)
    solution[extreme, -1] = 1.0  # placeholder (idle state 0), replaced below
    np.clip(solution, 0.0, None, out=solution)
    solution /= solution.sum(axis=1, keepdims=True)

    main = solution[:, :n_main].reshape(R, K - b + 1, m)
    side_mass = solution[:, n_main : n_main + n_side]  # g(s), s = a..b-1
    idle = solution[:, n_main + n_side :][:, ::-1]  # idle states x = 0..a-1
    dist = np.zeros((R, n_levels))
    dist[:, :a] = idle
    dist[:, b:] += main.sum(axis=2)
    if n_side:
        side_rate = side_mass * mu_bar  # f(s), services per second
        for j, s in enumerate(range(a, b)):
            f = side_rate[:, j : j + 1]
            dist[:, s:K] += f * counts.sojourn[:, : K - s]
            dist[:, K] += f[:, 0] * counts.sojourn_full[:, K - s]
        sizes = np.arange(a, b, dtype=np.float64)
        side_interrupts = side_rate.sum(axis=1)
        side_packets = side_rate @ sizes
    else:
        side_interrupts = side_packets = np.zeros(R)
    main_interrupts = main.sum(axis=1) @ exit_rates
    interrupt_rate = main_interrupts + side_interrupts
    served = b * main_interrupts + side_packets
    with np.errstate(invalid="ignore", divide="ignore"):
        mean_batch = np.where(interrupt_rate > 0, served / interrupt_rate, float(b))
    dist /= dist.sum(axis=1, keepdims=True)
    busy = 1.0 - idle.sum(axis=1)
    if extreme.any():
        limit = saturated_limit(lam[extreme], mu_bar, K, a, b)
        dist[extreme] = limit.distribution
        busy[extreme] = limit.busy
        interrupt_rate[extreme] = limit.interrupt_rate
        mean_batch[extreme] = limit.mean_batch
    return GeneralResult(
        distribution=dist,
        busy=busy,
        interrupt_rate=interrupt_rate,
        mean_batch=mean_batch,
        method="reduced-sparse-lu" if not extreme.all() else "saturation-limit",
    )


def saturated_limit(
    arrival_rate: NDArray[np.float64], mean_rate: float, capacity: int, min_batch: int, batch: int
) -> GeneralResult:
    """The M/G[a,b]/1/K queue when arrivals outpace service by many orders of magnitude.

    With ``lam / mu`` astronomically large, the buffer refills to ``K`` within ``~K / lam``
    of every service completion, long before the next one (mean ``1 / mu``): the server
    is always busy and each batch is fixed by the level the previous one left,
    ``s' = clip(K - s, a, b)``.  That map (a clipped reflection) settles on the batch
    ``b`` when ``K >= 2b``, on ``a`` when ``K <= 2a``, and otherwise on pairs
    ``{s, K - s}``: the long-run mean batch is ``m = clip(K / 2, a, b)`` in every case.
    Hence

        throughput = mu * m,    loss = P(K) = 1 - mu * m / lam,

    with corrections of relative order ``K * mu / lam`` (1e-9 or less where this is
    used).  Below ``K`` the buffer spends ``1 / lam`` at each level of every refill; the
    mass, ``mu * m / lam`` in all, is laid out here for the batches ``floor(K/2)`` and
    ``ceil(K/2)`` in the middle case (the other cycles differ only in where that same
    tiny mass sits).

    Parameters
    ----------
    arrival_rate : ndarray, shape (R,)
        Packet arrival rates (packets/s).
    mean_rate : float
        1 / E[service time] (1/s).
    capacity, min_batch, batch : int
        K, a and b (packets).

    Returns
    -------
    GeneralResult
        ``method`` is ``"saturation-limit"``.
    """
    K, a, b = capacity, min_batch, batch
    lam = np.asarray(arrival_rate, dtype=np.float64)
    if 2 * b <= K:
        cycle = [b]
    elif 2 * a >= K:
        cycle = [a]
    else:
        cycle = [K // 2, K - K // 2]
    per_level = mean_rate / lam  # time share of one level of one refill, per service
    below = np.zeros(K + 1)  # services-weighted count of refills passing each level
    idle = 0.0
    for s in cycle:
        below[K - s : K] += 1.0 / len(cycle)
        idle += max(0, a - (K - s)) / len(cycle)
    dist = per_level[:, None] * below[None, :]
    dist[:, K] = 1.0 - dist[:, :K].sum(axis=1)
    busy = 1.0 - per_level * idle
    m = float(np.mean(cycle))
    return GeneralResult(
        distribution=dist,
        busy=busy,
        interrupt_rate=mean_rate * busy,
        mean_batch=np.full(lam.size, m),
        method="saturation-limit",
    )


def _build_pattern(
    K: int,
    a: int,
    b: int,
    alpha: NDArray[np.float64],
    T: NDArray[np.float64],
    exit_rates: NDArray[np.float64],
    mu_bar: float,
) -> _Pattern:
    m = alpha.size
    n_main = m * (K - b + 1)
    n_side = b - a
    size = n_main + b
    n_levels = K + 1
    phases = np.arange(m)

    def main_idx(n: NDArray[np.intp] | int, k: NDArray[np.intp] | int) -> NDArray[np.intp]:
        return (np.asarray(n) - b) * m + np.asarray(k)

    # Where a service start (or an idle arrival/landing) at level x goes, for every x:
    # up to m rows, each with a share (alpha for batch-b levels, 1 for a side chain or an
    # idle state).  Unused slots have share 0.
    start_rows = np.zeros((n_levels, m), dtype=np.intp)
    start_share = np.zeros((n_levels, m))
    xs = np.arange(n_levels)
    high = xs >= b
    start_rows[high] = main_idx(xs[high, None], phases[None, :])
    start_share[high] = alpha
    side = (xs >= a) & (xs < b)
    start_rows[side, 0] = n_main + xs[side] - a
    start_share[side, 0] = 1.0
    low = xs < a
    start_rows[low, 0] = n_main + n_side + (a - 1 - xs[low])
    start_share[low, 0] = 1.0

    B = _Builder()
    levels = np.arange(b, K + 1)
    nn, kk = np.meshgrid(levels, phases, indexing="ij")
    here = main_idx(nn, kk)
    # Batch-b states: outflow lam [n < K] + |T_kk| (arrivals at K are lost).
    B.add(here, here, const=-np.diag(T)[kk], per_lam=(nn < K).astype(np.float64))
    # Inflow by arrival from (n - 1, k).
    B.add(here[1:], here[:-1], per_lam=-1.0)
    # Inflow by phase change k' -> k within the same service.
    for k_from in range(m):
        for k_to in range(m):
            if k_from != k_to and T[k_from, k_to] > 0.0:
                B.add(main_idx(levels, k_to), main_idx(levels, k_from), const=-T[k_from, k_to])
    # Completions of batch-b services at level n land on level n - b.
    src_levels = np.arange(b, K + 1)
    dest = src_levels - b
    rows = start_rows[dest][:, :, None]  # (levels, m_to, 1)
    share = start_share[dest][:, :, None]
    cols = main_idx(src_levels[:, None, None], phases[None, None, :])  # (levels, 1, m_from)
    value = -share * exit_rates[None, None, :]
    used = np.broadcast_to(share > 0, value.shape)
    B.add(
        np.broadcast_to(rows, value.shape)[used],
        np.broadcast_to(cols, value.shape)[used],
        const=value[used],
    )
    # Idle states x < a: outflow lam, inflow by arrival from x - 1; an arrival to idle
    # a - 1 starts a service at level a.
    idle = n_main + n_side + (a - 1 - np.arange(a))
    B.add(idle, idle, per_lam=1.0)
    B.add(idle[1:], idle[:-1], per_lam=-1.0)
    used_a = start_share[a] > 0
    B.add(start_rows[a][used_a], idle[a - 1], per_lam=-start_share[a][used_a])
    # Side chains: outflow f(s) = mu_bar * g(s) minus the chain's own landings on level s
    # (a service that starts at s and sees s arrivals starts the next one at s again).
    if n_side:
        sides = np.arange(a, b)
        own = sides <= K - sides
        B.add(
            n_main + sides - a,
            n_main + sides - a,
            const=mu_bar,
            per_landing=-own.astype(np.float64),
            landing_index=np.where(own, _landing_index(sides, sides, K), 0),
        )
        # Landings of side chain s on level x = min(A, K - s), for x != s.
        s_grid, x_grid = np.meshgrid(sides, xs, indexing="ij")
        valid = (x_grid <= K - s_grid) & (x_grid != s_grid)
        s_v, x_v = s_grid[valid], x_grid[valid]
        rows = start_rows[x_v]  # (entries, m)
        share = start_share[x_v]
        used = share > 0
        B.add(
            rows[used],
            np.broadcast_to((n_main + s_v - a)[:, None], share.shape)[used],
            per_landing=-share[used],
            landing_index=np.broadcast_to(_landing_index(s_v, x_v, K)[:, None], share.shape)[used],
        )
    return B.pattern(size, normalise_row=size - 1)


@dataclass(frozen=True)
class _ArrivalCounts:
    """Per-rate sequences for one service started with phases alpha, j = 0..K.

    pmf[:, j]          P(exactly j arrivals during the service)
    tail[:, j]         P(at least j arrivals)
    sojourn[:, j]      expected time (s) spent with exactly j arrivals so far
    sojourn_full[:, j] expected time (s) after the j-th arrival, arrivals beyond it ignored
                       (the time spent at level K when j = K - start level)
    """

    pmf: NDArray[np.float64]
    tail: NDArray[np.float64]
    sojourn: NDArray[np.float64]
    sojourn_full: NDArray[np.float64]


def _arrival_counts(
    lam: NDArray[np.float64],
    K: int,
    alpha: NDArray[np.float64],
    T: NDArray[np.float64],
    exit_rates: NDArray[np.float64],
) -> _ArrivalCounts:
    R, m = lam.size, alpha.size
    shape = (R, K + 1)
    if m == 1:
        mu = float(-T[0, 0])
        theta = lam / (lam + mu)
        powers = np.power(theta[:, None], np.arange(K + 1)[None, :])
        return _ArrivalCounts(
            pmf=powers * (mu / (lam + mu))[:, None],
            tail=powers,
            sojourn=powers / (lam + mu)[:, None],
            sojourn_full=powers / mu,
        )
    M = lam[:, None, None] * np.eye(m)[None] - T[None]
    U = np.linalg.inv(M)  # (lam I - T)^-1, seconds
    G = lam[:, None, None] * U  # phase at the next arrival, if it comes first
    u_exit = U @ exit_rates  # (R, m)
    u_one = U.sum(axis=2)
    full_one = np.linalg.solve(-T, np.ones(m))  # (-T)^-1 1
    pmf, tail = np.empty(shape), np.empty(shape)
    sojourn, sojourn_full = np.empty(shape), np.empty(shape)
    v = np.broadcast_to(alpha, (R, m)).copy()
    for j in range(K + 1):
        pmf[:, j] = np.einsum("rk,rk->r", v, u_exit)
        tail[:, j] = v.sum(axis=1)
        sojourn[:, j] = np.einsum("rk,rk->r", v, u_one)
        sojourn_full[:, j] = v @ full_one
        v = np.einsum("rk,rkl->rl", v, G)
    return _ArrivalCounts(pmf=pmf, tail=tail, sojourn=sojourn, sojourn_full=sojourn_full)


def _landing_index(s: NDArray[np.intp], x: NDArray[np.intp], K: int) -> NDArray[np.intp]:
    """Index into ``concatenate([pmf, tail])`` of P(side chain s lands on level x)."""
    top = K - s
    return np.where(x < top, x, (K + 1) + top).astype(np.intp)
