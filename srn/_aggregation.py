"""Nearly-completely-decomposable structure of a generator, for the ``iad`` route.

Iterative aggregation-disaggregation (Koury, McAllister and Stewart, SIAM J. Alg. Disc.
Meth. 5(2), 1984; W. J. Stewart, *Introduction to the Numerical Solution of Markov
Chains*, Princeton 1994, ch. 6) needs two things this module provides:

- :func:`ncd_partition`: the blocks of a nearly completely decomposable (NCD) chain,
  found from ``Q`` alone.
- :class:`BlockSolver`: solves of ``x (-Q_II) = b`` for each diagonal block ``Q_II``
  with ``b >= 0``, factorised once.  ``Q_II`` is nearly singular (its row sums are minus
  the weak exits), so an ordinary LU loses the weak exits in cancellation; the dense
  factors here are Grassmann-Taksar-Heyman elimination with the exits kept as a
  separate column, so every operation adds or multiplies non-negative numbers and the
  solution keeps full relative accuracy.

The iteration itself lives in :mod:`srn.stationary`, next to the dense GTH it uses for
the aggregated chain.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import scipy.linalg as la
import scipy.sparse as sp
import scipy.sparse.csgraph as csgraph
import scipy.sparse.linalg as spla
from numpy.typing import NDArray

from ._generator import rcm_profile

__all__ = ["BlockSolver", "NCDPartition", "ncd_partition"]

# A gap of at least this many decades between the weak and the strong rates makes a
# chain NCD.  With couplings 1e-3 of the internal rates IAD still converges in a few
# iterations (its error shrinks roughly by the coupling ratio each one), and residual
# methods start losing relative accuracy on block masses from about there on.
GAP_DECADES = 3.0
# Rates are binned in log10 at this width to find the gap without sorting every rate,
# this many at a time (bounding the temporaries on chains of 10^8 entries).
_BIN_DECADES = 0.05
_CHUNK = 1 << 22
# Most blocks: the aggregated chain is solved by dense GTH every iteration (O(B^3)),
# and every block Gauss-Seidel sweep visits each block once from Python.  Up to the
# engine's dense cut-off both stay at milliseconds per iteration.
MAX_BLOCKS = 300
# Blocks up to this many states get the subtraction-free dense factors; larger ones a
# sparse LU (factored once), whose solves are accurate only to the block's residual.
DENSE_BLOCK_MAX = 1_000
# Bytes per stored sparse factor entry (value + row index), as the cascade estimates.
_ENTRY_BYTES = 12


@dataclass(frozen=True)
class NCDPartition:
    """Blocks of a nearly completely decomposable generator.

    Attributes
    ----------
    labels : ndarray of int, shape (n,)
        Block of each state, ``0 .. n_blocks - 1``.
    n_blocks : int
        Number of blocks.
    threshold : float
        Rates (1/s) below this were taken as weak couplings.
    gap : float
        Width in decades of the empty band of rates the threshold sits in.
    """

    labels: NDArray[np.intp]
    n_blocks: int
    threshold: float
    gap: float


def ncd_partition(
    Q: sp.csr_array,
    max_blocks: int = MAX_BLOCKS,
    distinct_rates: NDArray[np.float64] | None = None,
) -> NCDPartition | str:
    """The NCD blocks of an irreducible generator, or why it has none.

    Rule: take the base-10 logarithms of the off-diagonal rates and find the widest
    band (in decades) that no rate falls in.  If it is at least ``GAP_DECADES`` wide,
    rates below it are weak couplings; dropping them, the strongly connected
    components of what remains are the blocks.  When that leaves one block, or every
    state alone, or more than ``max_blocks``, the next widest such band is tried.  This
    is Courtois' and Stewart's definition of near decomposability, ``P = I + Q / Lambda``
    with off-block entries of order epsilon, read off the rates themselves.

    Rates are compared on one scale rather than each against its row's exit rate
    ``q_ij / q_i``: inside a block a state's own rates may spread over many decades
    (the test chains draw them over six), so a strong rate can be a smaller fraction
    of its row than a weak coupling of a slow state is of its own, and the relative
    rates then show no gap at all.  The cost is that a chain whose time scales differ
    from region to region by more than the coupling gap is not recognised (the gap is
    filled); such a chain gets the other routes.

    Parameters
    ----------
    Q : csr_array, shape (n, n)
        Irreducible generator, rates in 1/s.
    max_blocks : int
        Most blocks accepted.
    distinct_rates : ndarray, optional
        The distinct off-diagonal rates of ``Q`` (1/s), when already known (the
        iterative solver's rate table): the gap depends only on which rates occur, so
        they stand in for a pass over every entry.

    Returns
    -------
    NCDPartition or str
        The partition, or a sentence saying why the chain is not NCD.
    """
    n = Q.shape[0]
    Q = sp.csr_array(Q)
    # The rates are the positive entries (the diagonal is minus the exit rates).  This
    # runs in every "auto" solve, Kanban's 116 million entries included, so it reads
    # Q.data in place: masked extremes first, then a histogram built chunk by chunk.
    data = Q.data if distinct_rates is None else np.asarray(distinct_rates, dtype=np.float64)
    hi_rate = float(data.max(initial=0.0))
    if hi_rate <= 0.0:
        return "the chain has no transitions"
    lo_rate = float(np.min(data, where=data > 0.0, initial=np.inf))
    lo, hi = math.log10(lo_rate), math.log10(hi_rate)
    if hi - lo < GAP_DECADES:
        return f"its rates span only {hi - lo:.2g} decades"
    top = int((hi - lo) / _BIN_DECADES)
    counts = np.zeros(top + 1, dtype=np.int64)
    for at in range(0, len(data), _CHUNK):
        part = data[at : at + _CHUNK]
        logs = np.log10(part[part > 0.0])
        bins = np.minimum(((logs - lo) / _BIN_DECADES).astype(np.intp), top)
        counts += np.bincount(bins, minlength=top + 1)
    occupied = np.flatnonzero(counts)
    empty = (np.diff(occupied) - 1) * _BIN_DECADES
    gaps = np.flatnonzero(empty >= GAP_DECADES)
    if len(gaps) == 0:
        widest = float(empty.max(initial=0.0))
        return f"no band of {GAP_DECADES:g} decades free of rates (widest {widest:.2g})"
    # Widest gap first; a narrower one may still split a chain whose weakest rates are
    # a second, finer level of coupling (those then stay inside the blocks, where the
    # subtraction-free block solves keep them accurate).
    reason = ""
    for k in gaps[np.argsort(-empty[gaps], kind="stable")]:
        # The middle of the empty band, in decades.
        threshold = 10.0 ** (lo + (occupied[k] + 1 + occupied[k + 1]) / 2 * _BIN_DECADES)
        S = Q.copy()
        S.data[S.data <= threshold] = 0.0  # the weak rates, and the diagonal
        S.eliminate_zeros()
        n_blocks, labels = csgraph.connected_components(S, directed=True, connection="strong")
        if n_blocks == 1:
            reason = "the strong rates alone leave the chain in one block"
        elif n_blocks == n:
            reason = "the strong rates alone leave every state in its own block"
        elif n_blocks > max_blocks:
            reason = f"{n_blocks} blocks, more than the {max_blocks} the route takes"
        else:
            return NCDPartition(labels.astype(np.intp), int(n_blocks), threshold, float(empty[k]))
    return reason


class BlockSolver:
    """Solves ``x (-Q_II) = b`` for the diagonal blocks of a generator in block order.

    Blocks of up to ``DENSE_BLOCK_MAX`` states are factorised by GTH elimination with
    an extra "outside" state that receives the block's exits (the chain censored on
    the block plus a sink).  Eliminating state ``k`` divides by ``leave_k``, the *sum*
    of its remaining rates including the exit, so ``-Q_II = (I - R) diag(leave) (I - U)``
    with ``R`` strictly lower, ``U`` strictly upper and both non-negative.  The solve is
    two triangular substitutions whose terms are all non-negative: no cancellation, and
    each entry of ``x`` keeps its relative accuracy however weak the exits (this is the
    augmented-chain solve: an outside state returning to the block in proportion to
    ``b``, rescaled).  Blocks of the same size range are eliminated together in one
    padded array, so the Python loop runs over positions in a block, not over states.

    Larger blocks get SuperLU (``x`` accurate only to the block's conditioning).

    Parameters
    ----------
    Q : csr_array, shape (n, n)
        Generator with the states of each block contiguous, rates in 1/s.
    bounds : ndarray of int, shape (n_blocks + 1,)
        Block ``I`` is states ``bounds[I]:bounds[I + 1]``.
    exits : ndarray, shape (n,)
        Each state's total rate (1/s) to states of other blocks, summed from the rates
        themselves (not the diagonal minus the row sum, which would cancel the strong
        internal rates against the diagonal and lose the weak exits).
    memory_limit : float
        Bytes the factors may take (estimated before factorising).
    check : callable, optional
        Called between factorisations (time limits).

    Raises
    ------
    MemoryError
        If the factors would not fit in ``memory_limit``.
    """

    def __init__(
        self,
        Q: sp.csr_array,
        bounds: NDArray[np.intp],
        exits: NDArray[np.float64],
        memory_limit: float,
        check: Callable[[], None] | None = None,
    ) -> None:
        sizes = np.diff(bounds)
        self.bounds = bounds
        self.lu_blocks = int((sizes > DENSE_BLOCK_MAX).sum())
        dense = np.flatnonzero(sizes <= DENSE_BLOCK_MAX)
        # Size classes [2^j, 2^(j+1)): padding wastes less than 4x the dense storage.
        classes = np.floor(np.log2(sizes[dense])).astype(np.intp)
        groups = [dense[classes == c] for c in np.unique(classes)]
        needed = sum(2 * len(g) * int(sizes[g].max()) ** 2 * 8 for g in groups)
        big = np.flatnonzero(sizes > DENSE_BLOCK_MAX)
        blocks = {int(i): _block(Q, bounds, int(i)) for i in big}
        # Both triangles of the profile, and the diagonal.
        needed += sum((2 * rcm_profile(M)[2] + M.shape[0]) * _ENTRY_BYTES for M in blocks.values())
        if needed > memory_limit:
            raise MemoryError(
                f"iad: block factors need about {needed:.3g} bytes, "
                f"more than memory_limit={memory_limit:.3g}"
            )
        self._dense: dict[int, tuple[NDArray[np.float64], NDArray[np.float64]]] = {}
        self._lu: dict[int, spla.SuperLU] = {}
        for group in groups:
            if check is not None:
                check()
            self._factor_dense(Q, exits, group)
        for i, M in blocks.items():
            if check is not None:
                check()
            # The columns of -Q_II^T are diagonally dominant: no pivoting needed.
            self._lu[i] = spla.splu(
                sp.csc_array(M.T), permc_spec="MMD_AT_PLUS_A", diag_pivot_thresh=0.0
            )

    def _factor_dense(
        self, Q: sp.csr_array, exit_rates: NDArray[np.float64], group: NDArray[np.intp]
    ) -> None:
        sizes = np.diff(self.bounds)[group]
        s = int(sizes.max())
        A = np.zeros((len(group), s, s))
        exits = np.zeros((len(group), s))
        for g, i in enumerate(group):
            M = _block(Q, self.bounds, int(i)).toarray()
            np.fill_diagonal(M, 0.0)
            A[g, : sizes[g], : sizes[g]] = -M
            exits[g, : sizes[g]] = exit_rates[self.bounds[i] : self.bounds[i + 1]]
        leave = np.ones((len(group), s))
        for k in range(s - 1, -1, -1):
            total = A[:, k, :k].sum(axis=1) + exits[:, k]
            # Padding states (beyond a block's size) have no rates at all.
            total[total == 0.0] = 1.0
            leave[:, k] = total
            if k == 0:
                break
            col = A[:, :k, k] / total[:, None]
            A[:, :k, :k] += col[:, :, None] * A[:, k, None, :k]
            exits[:, :k] += col * exits[:, k, None]
            A[:, :k, k] = col
            A[:, k, :k] /= total[:, None]
        for g, i in enumerate(group):
            m = int(sizes[g])
            # Negated, so that unit-triangular solves with it add non-negative terms.
            self._dense[int(i)] = (np.ascontiguousarray(-A[g, :m, :m]), leave[g, :m].copy())

    def solve(self, block: int, b: NDArray[np.float64]) -> NDArray[np.float64]:
        """``x`` with ``x (-Q_II) = b`` for block ``block``; ``b`` non-negative (1/s)."""
        dense = self._dense.get(block)
        if dense is None:
            return np.clip(self._lu[block].solve(b), 0.0, None)
        T, leave = dense
        y = la.solve_triangular(T, b, trans="T", lower=True, unit_diagonal=True, check_finite=False)
        return la.solve_triangular(
            T, y / leave, trans="T", lower=False, unit_diagonal=True, check_finite=False
        )


def _block(Q: sp.csr_array, bounds: NDArray[np.intp], i: int) -> sp.csr_array:
    """``-Q_II`` of block ``i`` (positive diagonal)."""
    lo, hi = int(bounds[i]), int(bounds[i + 1])
    return sp.csr_array(-Q[lo:hi, lo:hi])
