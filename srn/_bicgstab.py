"""BiCGSTAB with a Gauss-Seidel preconditioner, applied at the cost of one matrix pass.

The large-chain route of :func:`srn.steady_state` solves ``A x = e_f``, where ``A`` is
``Q^T`` with row ``f`` (the pinned state) replaced by the identity row.  Splitting
``A = L + D + U`` (strictly lower, diagonal, strictly upper), the Gauss-Seidel
preconditioner is ``M = D + L``, and right preconditioning needs ``phat = M^-1 p`` and
``v = A phat`` at every half-step.  Since ``A = M + U``, ``v = p + U phat``
(S. C. Eisenstat, SIAM J. Sci. Stat. Comput. 2(1), 1981): the forward solve reads only
``L`` and the product only ``U``, so each half-step reads the matrix once instead of
twice.  ``L`` and ``U`` are stored apart, as CSR arrays built straight from the CSR of
``Q`` (no transposed copy of the whole generator is kept), and the vector updates of
BiCGSTAB are fused into the same compiled loops, which also compute the dot products
the iteration needs.

On several threads the rows are cut into consecutive blocks, and ``M`` keeps only the
entries of ``L`` inside each block (block Gauss-Seidel).  The same identity holds with
``N = A - M`` (``U`` plus the entries of ``L`` left out): ``v = p + N phat``.  Each block's
forward solve needs only its own rows, so the blocks sweep at once; the products, which
read every block's ``phat``, follow after a barrier.

The iteration is van der Vorst's BiCGSTAB (SIAM J. Sci. Stat. Comput. 13(2), 1992) with
the breakdown tests of SciPy's ``scipy.sparse.linalg.bicgstab``, so it takes the same
steps that solver takes with the same ``M``; only rounding differs.  The sums are added
in block order, so a given number of threads gives the same result bit for bit.
Compiled by Numba, imported lazily like the other kernels.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor, wait
from dataclasses import dataclass
from typing import Any

import numpy as np
from numba import njit
from numpy.typing import NDArray

__all__ = ["SplitSystem", "bicgstab"]

# Most distinct off-diagonal rates stored as 2-byte codes.
_CODES = 65_535
# SciPy's breakdown thresholds for rho and omega (inherited from the Fortran original).
_BREAKDOWN = float(np.finfo(np.float64).eps) ** 2


@njit(cache=True, nogil=True)
def _split_transpose(
    indptr: NDArray[np.int32],
    indices: NDArray[np.int32],
    data: NDArray[np.float64],
    entries: NDArray[Any],
) -> tuple[
    NDArray[np.int64],
    NDArray[np.int32],
    NDArray[Any],
    NDArray[np.float64],
    NDArray[np.int64],
    NDArray[np.int32],
    NDArray[Any],
]:
    """``Q^T = L + D + U`` from the CSR of ``Q``: CSR of ``L``, ``diag(D)``, CSR of ``U``.

    Row ``j`` of ``L`` holds ``Q[i, j]`` for ``i < j`` (rates into ``j`` from earlier
    states), row ``j`` of ``U`` those for ``i > j``; columns come out sorted because
    ``Q`` is read row by row.  Duplicate entries of ``Q`` stay separate (they add up in
    every product).  The parts store ``entries`` (``data`` itself, or its dictionary
    codes) in place of the values; the diagonal is taken from ``data``.
    """
    n = indptr.shape[0] - 1
    lower_ptr = np.zeros(n + 1, dtype=np.int64)
    upper_ptr = np.zeros(n + 1, dtype=np.int64)
    diag = np.zeros(n)
    for i in range(n):
        for k in range(indptr[i], indptr[i + 1]):
            j = indices[k]
            if j > i:
                lower_ptr[j + 1] += 1
            elif j < i:
                upper_ptr[j + 1] += 1
            else:
                diag[i] += data[k]
    for j in range(n):
        lower_ptr[j + 1] += lower_ptr[j]
        upper_ptr[j + 1] += upper_ptr[j]
    lower_idx = np.empty(lower_ptr[n], dtype=np.int32)
    lower_val = np.empty(lower_ptr[n], dtype=entries.dtype)
    upper_idx = np.empty(upper_ptr[n], dtype=np.int32)
    upper_val = np.empty(upper_ptr[n], dtype=entries.dtype)
    lower_at = lower_ptr[:-1].copy()
    upper_at = upper_ptr[:-1].copy()
    for i in range(n):
        for k in range(indptr[i], indptr[i + 1]):
            j = indices[k]
            if j > i:
                at = lower_at[j]
                lower_idx[at] = i
                lower_val[at] = entries[k]
                lower_at[j] = at + 1
            elif j < i:
                at = upper_at[j]
                upper_idx[at] = i
                upper_val[at] = entries[k]
                upper_at[j] = at + 1
    return lower_ptr, lower_idx, lower_val, diag, upper_ptr, upper_idx, upper_val


@njit(cache=True, nogil=True)
def _dictionary(
    indptr: NDArray[np.int32], indices: NDArray[np.int32], data: NDArray[np.float64]
) -> tuple[bool, NDArray[np.uint16], NDArray[np.float64]]:
    """Codes of the off-diagonal values of a CSR matrix in a table of its distinct values.

    A chain's rates come from a few transitions, so its off-diagonal entries take few
    distinct values: a 2-byte code replaces each 8-byte value and the products read
    a third less memory, with the same values exactly (the table holds them).
    Returns ``(False, ...)`` when there are more than 65,535 distinct values.
    """
    size = 1 << 17
    keys = np.zeros(size, dtype=np.uint64)
    slot_code = np.full(size, -1, dtype=np.int64)
    table = np.empty(_CODES, dtype=np.float64)
    codes = np.zeros(data.shape[0], dtype=np.uint16)
    bits = data.view(np.uint64)
    distinct = 0
    n = indptr.shape[0] - 1
    for i in range(n):
        for k in range(indptr[i], indptr[i + 1]):
            if indices[k] == i:
                continue
            key = bits[k]
            z = key + np.uint64(0x9E3779B97F4A7C15)
            z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
            z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
            slot = np.int64((z ^ (z >> np.uint64(31))) & np.uint64(size - 1))
            while slot_code[slot] >= 0 and keys[slot] != key:
                slot = (slot + 1) & (size - 1)
            if slot_code[slot] < 0:
                if distinct == _CODES:
                    return False, codes, table
                keys[slot] = key
                slot_code[slot] = distinct
                table[distinct] = data[k]
                distinct += 1
            codes[k] = slot_code[slot]
    return True, codes, table[:distinct].copy()


@njit(inline="always")
def _value(entries: NDArray[Any], table: NDArray[np.float64] | None, k: int) -> float:
    """Entry ``k``: the stored value, or the table's value for the stored code."""
    if table is None:
        return entries[k]
    return table[entries[k]]


@njit(cache=True, nogil=True)
def _sweep(
    lower_ptr: NDArray[np.int64],
    lower_idx: NDArray[np.int32],
    lower_val: NDArray[Any],
    diag: NDArray[np.float64],
    fixed: int,
    p: NDArray[np.float64],
    phat: NDArray[np.float64],
    v: NDArray[np.float64],
    r: NDArray[np.float64],
    beta: float,
    omega: float,
    alpha: float,
    table: NDArray[np.float64] | None,
    lo: int,
    hi: int,
) -> float:
    """Rows ``lo..hi-1`` of ``phat = M^-1 p``, ``M`` the block's ``D + L``.

    Only the entries of ``L`` in columns ``>= lo`` belong to the block's forward solve;
    the earlier ones (another block's unknowns) are left to :func:`_product`.  Before
    the solve reaches row ``i``, ``p[i]`` is updated in place: with ``beta`` not 0 to
    the new search direction ``r + beta (p - omega v)``, with ``alpha`` not 0 (and
    ``p`` being ``r``) to ``r - alpha v``; the old ``v`` is overwritten only later, and
    fusing these updates saves passes over the vectors.  Returns the squared 2-norm of
    the block of the updated ``p``.
    """
    total = 0.0
    for i in range(lo, hi):
        s = p[i]
        if beta != 0.0:
            s = r[i] + beta * (s - omega * v[i])
            p[i] = s
        elif alpha != 0.0:
            s -= alpha * v[i]
            p[i] = s
        total += s * s
        if i != fixed:
            k = lower_ptr[i]
            end = lower_ptr[i + 1]
            # Columns are sorted: another block's entries come first.
            while k < end and lower_idx[k] < lo:
                k += 1
            while k < end:
                s -= _value(lower_val, table, k) * phat[lower_idx[k]]
                k += 1
            s /= diag[i]
        phat[i] = s
    return total


@njit(cache=True, nogil=True)
def _product(
    lower_ptr: NDArray[np.int64],
    lower_idx: NDArray[np.int32],
    lower_val: NDArray[Any],
    upper_ptr: NDArray[np.int64],
    upper_idx: NDArray[np.int32],
    upper_val: NDArray[Any],
    fixed: int,
    p: NDArray[np.float64],
    phat: NDArray[np.float64],
    v: NDArray[np.float64],
    w: NDArray[np.float64],
    table: NDArray[np.float64] | None,
    lo: int,
    hi: int,
) -> tuple[float, float]:
    """Rows ``lo..hi-1`` of ``v = A phat = p + N phat``; returns their ``(w . v, v . v)``.

    ``N = A - M`` is ``U`` plus the entries of ``L`` that :func:`_sweep` left out
    (columns before ``lo``).  Reads ``phat`` of every block: run after all sweeps.
    """
    wv = 0.0
    vv = 0.0
    for i in range(lo, hi):
        s = p[i]
        if i != fixed:
            if lo > 0:
                for k in range(lower_ptr[i], lower_ptr[i + 1]):
                    j = lower_idx[k]
                    if j >= lo:
                        break
                    s += _value(lower_val, table, k) * phat[j]
            for k in range(upper_ptr[i], upper_ptr[i + 1]):
                s += _value(upper_val, table, k) * phat[upper_idx[k]]
        v[i] = s
        wv += w[i] * s
        vv += s * s
    return wv, vv


@njit(cache=True, nogil=True)
def _apply(
    lower_ptr: NDArray[np.int64],
    lower_idx: NDArray[np.int32],
    lower_val: NDArray[Any],
    diag: NDArray[np.float64],
    upper_ptr: NDArray[np.int64],
    upper_idx: NDArray[np.int32],
    upper_val: NDArray[Any],
    fixed: int,
    x: NDArray[np.float64],
    table: NDArray[np.float64] | None,
) -> NDArray[np.float64]:
    """``A x``: ``(L + D + U) x`` with row ``fixed`` giving ``x[fixed]``."""
    n = x.shape[0]
    y = np.empty(n)
    for i in range(n):
        if i == fixed:
            y[i] = x[i]
            continue
        s = diag[i] * x[i]
        for k in range(lower_ptr[i], lower_ptr[i + 1]):
            s += _value(lower_val, table, k) * x[lower_idx[k]]
        for k in range(upper_ptr[i], upper_ptr[i + 1]):
            s += _value(upper_val, table, k) * x[upper_idx[k]]
        y[i] = s
    return y


@njit(cache=True, nogil=True)
def _full_step(
    x: NDArray[np.float64],
    r: NDArray[np.float64],
    phat: NDArray[np.float64],
    shat: NDArray[np.float64],
    t: NDArray[np.float64],
    rtilde: NDArray[np.float64],
    alpha: float,
    omega: float,
    lo: int,
    hi: int,
) -> tuple[float, float, float, float, float]:
    """Rows ``lo..hi-1`` of ``x += alpha phat + omega shat`` and ``r -= omega t``.

    Returns the block's ``|r|_2^2``, ``rtilde . r``, ``sum |r_i|``, ``sum r_i`` and
    ``sum x_i``.
    """
    rr = 0.0
    rho = 0.0
    r_abs = 0.0
    r_sum = 0.0
    x_sum = 0.0
    for i in range(lo, hi):
        xi = x[i] + alpha * phat[i] + omega * shat[i]
        x[i] = xi
        x_sum += xi
        s = r[i] - omega * t[i]
        r[i] = s
        rr += s * s
        rho += rtilde[i] * s
        r_abs += abs(s)
        r_sum += s
    return rr, rho, r_abs, r_sum, x_sum


@dataclass(frozen=True)
class SplitSystem:
    """``Q^T`` split into strictly lower, diagonal and strictly upper parts, pinned at one state.

    The system matrix ``A`` is ``Q^T`` with row ``fixed`` replaced by the identity row, which
    makes it nonsingular for an irreducible generator.

    Attributes
    ----------
    lower, upper : tuple of (indptr, indices, entries)
        CSR arrays of the strictly lower and strictly upper parts of ``Q^T``; the
        entries are the rates (1/s), or their codes in ``table``.
    diag : ndarray
        Diagonal of ``Q^T`` (minus the exit rates, 1/s).
    fixed : int
        The pinned state.
    table : ndarray or None
        The distinct off-diagonal rates (1/s) when the entries are codes.
    """

    lower: tuple[NDArray[np.int64], NDArray[np.int32], NDArray[Any]]
    diag: NDArray[np.float64]
    upper: tuple[NDArray[np.int64], NDArray[np.int32], NDArray[Any]]
    fixed: int
    table: NDArray[np.float64] | None = None

    @classmethod
    def from_generator(
        cls,
        indptr: NDArray[np.int32],
        indices: NDArray[np.int32],
        data: NDArray[np.float64],
        fixed: int,
    ) -> SplitSystem:
        """Split the transpose of the generator whose CSR arrays are given.

        The rates are stored as 2-byte codes when there are at most 65,535 distinct
        off-diagonal values, else as themselves.
        """
        indptr = np.ascontiguousarray(indptr)
        indices = np.ascontiguousarray(indices, dtype=np.int32)
        data = np.ascontiguousarray(data, dtype=np.float64)
        coded, codes, table = _dictionary(indptr, indices, data)
        entries = codes if coded else data
        lp, li, lv, diag, up, ui, uv = _split_transpose(indptr, indices, data, entries)
        return cls((lp, li, lv), diag, (up, ui, uv), fixed, table if coded else None)

    def sweep(
        self,
        rows: tuple[int, int],
        p: NDArray[np.float64],
        phat: NDArray[np.float64],
        v: NDArray[np.float64],
        r: NDArray[np.float64],
        beta: float = 0.0,
        omega: float = 0.0,
        alpha: float = 0.0,
    ) -> float:
        """Rows ``rows`` of ``phat = M^-1 p``, ``M`` the block's ``D + L``; returns ``|p|^2``.

        ``p`` is first updated in place: to ``r + beta (p - omega v)`` when ``beta`` is
        not 0 (BiCGSTAB's next search direction), else to ``p - alpha v``.  The squared
        2-norm returned is the block's, after the update.
        """
        lp, li, lv = self.lower
        return float(
            _sweep(
                lp, li, lv, self.diag, self.fixed, p, phat, v, r, beta, omega, alpha,
                self.table, rows[0], rows[1],
            )
        )  # fmt: skip

    def product(
        self,
        rows: tuple[int, int],
        p: NDArray[np.float64],
        phat: NDArray[np.float64],
        v: NDArray[np.float64],
        w: NDArray[np.float64],
    ) -> tuple[float, float]:
        """Rows ``rows`` of ``v = A phat``, given ``phat = M^-1 p``; returns ``(w.v, v.v)``.

        Call it once every block's :meth:`sweep` is done: it reads all of ``phat``.
        """
        lp, li, lv = self.lower
        up, ui, uv = self.upper
        wv, vv = _product(
            lp, li, lv, up, ui, uv, self.fixed, p, phat, v, w, self.table, rows[0], rows[1]
        )
        return float(wv), float(vv)

    def blocks(self, count: int) -> list[tuple[int, int]]:
        """Split the rows into ``count`` consecutive blocks of about equal work.

        The work of a row is its stored entries plus a few vector operations; the
        blocks' forward solves are independent (block Gauss-Seidel), so they can run
        at once.
        """
        n = len(self.diag)
        count = max(1, min(count, n))
        work = self.lower[0] + self.upper[0] + 4 * np.arange(n + 1, dtype=np.int64)
        cuts = np.searchsorted(work, work[-1] * np.arange(1, count) / count)
        edges = [0, *(int(c) for c in cuts), n]
        return [(lo, hi) for lo, hi in itertools.pairwise(edges) if hi > lo]

    def matvec(self, x: NDArray[np.float64]) -> NDArray[np.float64]:
        """``A x``."""
        lp, li, lv = self.lower
        up, ui, uv = self.upper
        x = np.ascontiguousarray(x, dtype=np.float64)
        y: NDArray[np.float64] = _apply(
            lp, li, lv, self.diag, up, ui, uv, self.fixed, x, self.table
        )
        return y

    def precondition(self, r: NDArray[np.float64]) -> NDArray[np.float64]:
        """``M^-1 r`` with ``M = D + L`` (one forward Gauss-Seidel sweep)."""
        out = np.empty(len(r))
        rhs = np.ascontiguousarray(r, dtype=float)
        # The whole range as one block, with no update of the right-hand side (which the
        # sweep then only reads; it stands in for the unused v and r too).
        self.sweep((0, len(r)), rhs, out, rhs, rhs)
        return out


class _Crew:
    """Runs a function over the row blocks at once, the calling thread taking the first.

    The kernels release the GIL, so plain threads run them in parallel; each call
    returns when every block is done (the barrier between the phases of an iteration).
    """

    def __init__(self, blocks: list[tuple[int, int]]) -> None:
        self.blocks = blocks
        self.pool = (
            ThreadPoolExecutor(len(blocks) - 1, thread_name_prefix="srn-bicgstab")
            if len(blocks) > 1
            else None
        )

    def run(self, fn: Callable[..., Any], *args: Any) -> list[Any]:
        """``[fn(rows, *args) for rows in blocks]``, the blocks run concurrently."""
        if self.pool is None:
            return [fn(self.blocks[0], *args)]
        futures = [self.pool.submit(fn, rows, *args) for rows in self.blocks[1:]]
        try:
            first = fn(self.blocks[0], *args)
        finally:
            # Even when the first block fails, the others finish before anyone reuses
            # the vectors they write.
            wait(futures)
        return [first, *(future.result() for future in futures)]

    def close(self) -> None:
        """Stop the threads (after the work already handed to them)."""
        if self.pool is not None:
            self.pool.shutdown()


def _full_step_rows(
    rows: tuple[int, int],
    x: NDArray[np.float64],
    r: NDArray[np.float64],
    phat: NDArray[np.float64],
    shat: NDArray[np.float64],
    t: NDArray[np.float64],
    rtilde: NDArray[np.float64],
    alpha: float,
    omega: float,
) -> tuple[float, float, float, float, float]:
    """:func:`_full_step` over the rows of one block."""
    rr, rho, r_abs, r_sum, x_sum = _full_step(
        x, r, phat, shat, t, rtilde, alpha, omega, rows[0], rows[1]
    )
    return rr, rho, r_abs, r_sum, x_sum


def bicgstab(
    system: SplitSystem,
    b: NDArray[np.float64],
    x0: NDArray[np.float64],
    *,
    rtol: float,
    callback: Callable[[NDArray[np.float64], float], None],
    residual_target: float = 0.0,
    maxiter: int | None = None,
    workers: int = 1,
) -> tuple[NDArray[np.float64], int]:
    """Right-preconditioned BiCGSTAB on ``A x = b`` with a (block) Gauss-Seidel ``M``.

    Parameters
    ----------
    system : SplitSystem
        The matrix ``A`` and its splitting.
    b, x0 : ndarray
        Right-hand side and starting vector.
    rtol : float
        Stop when ``||b - A x||_2 < rtol ||b||_2`` (the recurrence residual, as SciPy).
    callback : callable
        Called after each iteration with the iterate and the estimate of its
        normalised balance residual (1/s, see ``residual_target``); may raise to stop.
    residual_target : float
        Also stop when the balance residual of the normalised iterate,
        ``||x Q||_1 / sum(x)`` (1/s), is estimated to be at most this (0: never).  The
        estimate comes from the recurrence residual ``r`` at no extra pass: off row
        ``fixed``, ``(Q^T x)_i = -r_i``, and since the rows of ``Q`` sum to zero,
        ``(Q^T x)_fixed = sum of the other r_i``.  The pinned unknown makes ``x``
        large (``x_fixed = 1``, ``sum(x) = 1 / pi_fixed``), so on large chains this
        test is met long before the ``rtol`` one, which measures ``r`` unnormalised.
    maxiter : int, optional
        Iteration cap (default ``10 n``, as SciPy).
    workers : int
        Threads.  With 1, ``M = D + L`` (Gauss-Seidel).  With more, the rows are cut
        into that many blocks of equal work and ``M`` keeps only the entries of ``L``
        inside each block (block Gauss-Seidel), so the blocks' forward solves, and
        every other pass, run at once.  The preconditioner is a little weaker, but the
        cut entries are few when most transitions join nearby states, as they do in
        the breadth-first order of a reachability graph.

    Returns
    -------
    x : ndarray
        The last iterate.
    info : int
        0 on convergence, ``maxiter`` when the cap was reached, -10 on a ``rho``
        breakdown and -11 on an ``omega`` breakdown (SciPy's codes).
    """
    n = len(b)
    x = np.array(x0, dtype=np.float64)
    bnorm = float(np.linalg.norm(b))
    if bnorm == 0.0:
        return np.zeros(n), 0
    crew = _Crew(system.blocks(workers))
    try:
        return _iterate(system, b, x, rtol * bnorm, callback, residual_target, maxiter, crew)
    finally:
        crew.close()


def _iterate(
    system: SplitSystem,
    b: NDArray[np.float64],
    x: NDArray[np.float64],
    atol: float,
    callback: Callable[[NDArray[np.float64], float], None],
    residual_target: float,
    maxiter: int | None,
    crew: _Crew,
) -> tuple[NDArray[np.float64], int]:
    """The iteration of :func:`bicgstab`, each pass run block by block by ``crew``."""
    n = len(b)
    r = b - system.matvec(x) if x.any() else b.astype(np.float64)
    rtilde = r.copy()
    p = np.empty(n)
    v = np.empty(n)
    phat = np.empty(n)
    shat = np.empty(n)
    t = np.empty(n)
    rnorm = float(np.linalg.norm(r))
    rho = float(rtilde @ r)
    rho_prev = alpha = omega = 0.0
    f = system.fixed
    for iteration in range(10 * n if maxiter is None else maxiter):
        if rnorm < atol:
            return x, 0
        if abs(rho) < _BREAKDOWN:
            return x, -10
        beta = 0.0
        if iteration > 0:
            if abs(omega) < _BREAKDOWN:
                return x, -11
            beta = (rho / rho_prev) * (alpha / omega)
        if beta == 0.0:
            p[:] = r
        crew.run(system.sweep, p, phat, v, r, beta, omega)
        rv = sum(wv for wv, _ in crew.run(system.product, p, phat, v, rtilde))
        if rv == 0.0:
            return x, -11
        alpha = rho / rv
        # r -= alpha v, fused into the sweep that starts the second half-step.
        snorm = math.sqrt(sum(crew.run(system.sweep, r, shat, v, r, 0.0, 0.0, alpha)))
        if snorm < atol:
            x += alpha * phat
            return x, 0
        products = crew.run(system.product, r, shat, t, r)
        ts = sum(part[0] for part in products)
        tt = sum(part[1] for part in products)
        if tt == 0.0:
            x += alpha * phat
            return x, -11
        omega = ts / tt
        parts = crew.run(_full_step_rows, x, r, phat, shat, t, rtilde, alpha, omega)
        rr, rho_next, r_abs, r_sum, x_sum = (sum(column) for column in zip(*parts, strict=True))
        rnorm = math.sqrt(rr)
        rho_prev, rho = rho, rho_next
        balance = (r_abs - abs(r[f])) + abs(r_sum - r[f])
        callback(x, balance / x_sum if x_sum > 0.0 else math.inf)
        if x_sum > 0.0 and balance <= residual_target * x_sum:
            return x, 0
    return x, 10 * n if maxiter is None else maxiter
