"""Steady-state distribution of a CTMC: a cascade of solvers that does not give up early.

:func:`steady_state` takes a generator ``Q`` (rows sum to zero) and knows nothing about
nets.  ``method="auto"`` tries, in order, the routes that suit the chain and stops at the
first whose residual ``||pi Q||_1`` meets the target:

1. ``dense``: Grassmann-Taksar-Heyman elimination, up to a few hundred states.
2. ``direct``: GTH elimination in a reverse Cuthill-McKee order, when the band it
   leaves is narrow (queues, birth-death chains); subtraction-free, so it keeps the
   relative accuracy of tiny probabilities even with rates spanning 12 decades.
3. ``iad``: Koury-McAllister-Stewart iterative aggregation-disaggregation, when the
   rates show a nearly completely decomposable structure (a band of at least 3
   decades free of rates splits them into strong and weak, and the strong ones alone
   leave 2 to 300 blocks; see :func:`srn._aggregation.ncd_partition`).  Block masses
   come from GTH on the aggregated chain and block solves are subtraction-free, so it
   keeps relative accuracy where the residual-driven routes below meet their target
   with block masses off by percents.
4. ``gauss-seidel``: a few hundred Gauss-Seidel sweeps at most, before the LU route,
   given up as soon as their rate of convergence shows they would not settle in that
   many.  A sweep is subtraction-free, so where it converges fast (the courier
   protocol: 38 sweeps, 0.01 s, where LU took 12 s) it is accepted only once every
   probability has stopped moving in its 14th digit: relative, state by state.
5. ``sparse-lu``: SuperLU in an approximate minimum degree (AMD) ordering of
   ``A + A^T`` (SuperLU's own minimum-degree ordering where SuiteSparse's AMD library is
   not installed: same answer, about twice the factorisation time on grid-like chains),
   when the fill estimated before factorising (the envelope of the RCM order) fits the
   memory budget.  It is refined against each state's exit rate summed in extended
   precision, not the rounded diagonal, to which a nearly decomposable chain's answer is
   very sensitive (see :func:`_refined`); its note says when the refinement did not
   settle.
6. ``bicgstab-gs``: BiCGSTAB preconditioned by a Gauss-Seidel sweep (GMRES(50) after a
   breakdown, reported as ``gmres-gs``); stops early when the residual stagnates.
7. ``gmres-ilu``: GMRES(50) preconditioned by an incomplete LU whose fill is capped by
   the memory budget; it solves nearly decomposable and grid-like chains on which the
   sweep preconditioner stalls.
8. ``sor``: plain Gauss-Seidel/SOR sweeps on the singular system until the residual
   meets its target, the slow but robust last resort.

Each result reports the route taken, its iterations and residual, and every route tried
before it.  When none reaches the target, :class:`~srn.errors.ConvergenceError` lists
them with the best residual reached.  References: W. J. Stewart, *Introduction to the
Numerical Solution of Markov Chains* (Princeton, 1994), ch. 2-4 and 6; Grassmann, Taksar
and Heyman, Operations Research 33(5), 1985; Koury, McAllister and Stewart, SIAM J. Alg.
Disc. Meth. 5(2), 1984.
"""

from __future__ import annotations

import math
import numbers
import os
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

import numpy as np
import scipy.sparse as sp
import scipy.sparse.csgraph as csgraph
import scipy.sparse.linalg as spla
from numpy.typing import NDArray

from ._generator import DENSE_MAX, as_generator, rcm_profile
from ._ordering import OrderingUnavailable, amd_order
from .errors import ConvergenceError, LimitExceededError, NotErgodicError

if TYPE_CHECKING:
    from ._aggregation import NCDPartition

__all__ = ["SolveProgress", "SolverAttempt", "SteadyState", "steady_state"]

# Banded LU is exact and quick on the long, thin chains of queues.  ``auto`` uses it when
# the fill (states x bandwidth) and the work (states x bandwidth^2) of the reverse
# Cuthill-McKee order stay below these.
_DIRECT_FILL = 20_000_000
_DIRECT_FLOPS = 500_000_000
# The RCM order needs the symmetrised pattern of Q (twice its memory); beyond this many
# states ``auto`` skips both LU routes and goes straight to the iterative ones.
_ORDERED_MAX_STATES = 300_000
# From this many states Q^T is split for the iterative routes at once, and the
# irreducibility check is two compiled searches on Q and that transpose; the
# strong-components labelling runs only when they fail.
_COMPILED_CONNECTIVITY_FROM = 100_000
# Bytes per stored factor entry (value + row index) for the fill estimates.
_ENTRY_BYTES = 12
# Default memory budget for LU and ILU factors.
_MEMORY_LIMIT = 2_000_000_000
# Iterative routes stop when the residual has not halved over this many iterations
# (checked every _CHECK_EVERY iterations, at the cost of one product with Q^T).
_STALL_WINDOW = 150
_CHECK_EVERY = 10
# From this many states the bicgstab-gs route runs on several threads by default: each
# of its passes then takes milliseconds, against tens of microseconds per hand-off.
# More blocks weaken the block Gauss-Seidel preconditioner (Kanban N = 5: 57 iterations
# on one thread, 62 on two, 70 on three), so the default stops at a few threads.
_THREADED_FROM = 200_000
_THREADS_MAX = 4
# The gauss-seidel route tried before LU: at most this many sweeps (each one pass over
# Q^T), judged after _GS_JUDGE_AFTER of them; it settles when no probability moves by
# more than _GS_SETTLED relative to itself in a sweep, with the error left estimated
# from the observed rate of convergence.
_GS_SWEEPS = 300
_GS_JUDGE_AFTER = 20
_GS_SETTLED = 1e-14
# The two starts of the gauss-seidel route must settle this close, state by state.
_GS_AGREE = 1e-11
# Aggregation-disaggregation gives up when its iterates have not moved half as little
# over this many iterations (on an NCD chain each iteration cuts the error by about the
# coupling ratio, so a handful of iterations normally suffice).
_IAD_STALL = 30


@dataclass(frozen=True)
class SolverAttempt:
    """One route the steady-state cascade tried.

    Attributes
    ----------
    method : str
        Route name (see :func:`steady_state`).
    residual : float
        ``||pi Q||_1`` of the normalised vector it produced (``inf`` if none).
    iterations : int
        Iterations it ran (0 for direct routes).
    seconds : float
        Wall time it took.
    note : str
        Why it stopped short, when it did; for ``sparse-lu``, the ordering it used
        (AMD, or SuperLU's own where the AMD library is not installed).
    """

    method: str
    residual: float
    iterations: int = 0
    seconds: float = 0.0
    note: str = ""


@dataclass(frozen=True)
class SolveProgress:
    """A report from a running steady-state solve (see the ``progress`` argument).

    Attributes
    ----------
    method : str
        The route running (see :func:`steady_state`).
    iterations : int
        Iterations it has run so far (0 when it starts).
    residual : float
        ``||pi Q||_1`` of its current iterate, normalised, in 1/s: computed, or for
        ``bicgstab-gs`` estimated from the recurrence residual; ``nan`` when the
        route has none yet (direct routes, GMRES).
    target : float
        The residual the solve must reach (1/s).
    seconds : float
        Wall time since the solve started.
    """

    method: str
    iterations: int
    residual: float
    target: float
    seconds: float


@dataclass(frozen=True)
class SteadyState:
    """A steady-state distribution and how it was obtained.

    Attributes
    ----------
    probabilities : ndarray, shape (n_states,)
        The stationary distribution pi (non-negative, sums to 1).
    residual : float
        ``||pi Q||_1``, the 1-norm of the balance-equation residual (1/s).
    method : str
        The route that produced it: ``"dense"``, ``"direct"``, ``"iad"``,
        ``"gauss-seidel"``, ``"sparse-lu"``, ``"bicgstab-gs"``, ``"gmres-gs"``,
        ``"gmres-ilu"`` or ``"sor"``.
    iterations : int
        Iterations of that route (0 for direct routes).
    transient_states : int
        States outside the single closed class; they have probability zero.
    seconds : float
        Wall time of the whole solve.
    attempts : tuple of SolverAttempt
        Every route tried, the successful one last.
    """

    probabilities: NDArray[np.float64]
    residual: float
    method: str
    iterations: int = 0
    transient_states: int = 0
    seconds: float = 0.0
    attempts: tuple[SolverAttempt, ...] = ()


_ROUTES = (
    "dense",
    "direct",
    "iad",
    "gauss-seidel",
    "sparse-lu",
    "bicgstab-gs",
    "gmres-ilu",
    "sor",
)
_ITERATIVE = ("bicgstab-gs", "gmres-ilu", "sor")


def steady_state(
    Q: Any,
    *,
    method: str = "auto",
    tol: float = 1e-12,
    max_iterations: int = 5_000,
    time_limit: float | None = None,
    memory_limit: float = _MEMORY_LIMIT,
    progress: Callable[[SolveProgress], None] | None = None,
    workers: int | None = None,
) -> SteadyState:
    """Solve ``pi Q = 0``, ``sum(pi) = 1`` for an irreducible (or unichain) CTMC.

    Parameters
    ----------
    Q : sparse matrix or ndarray, shape (n, n)
        Generator matrix, rows summing to zero, rates in 1/s.
    method : str
        ``"auto"`` runs the cascade of the module notes; ``"iterative"`` runs only its
        iterative routes; any route name (``"dense"``, ``"direct"``, ``"iad"``,
        ``"gauss-seidel"``, ``"sparse-lu"``, ``"bicgstab-gs"``, ``"gmres-ilu"``,
        ``"sor"``) runs that route alone (``"iad"`` on a chain without NCD structure
        fails with the reason).
    tol : float
        Target 1-norm residual relative to the largest exit rate (dimensionless).  The
        dense and direct routes are accepted at ``1e-9`` relative whatever ``tol``
        (their error is rounding, not truncation).
    max_iterations : int
        Iteration cap of each iterative route.
    time_limit : float, optional
        Wall-clock seconds the whole solve may use.
    memory_limit : float
        Bytes the LU, ILU or ``iad`` block factors may take, estimated before
        factorising.
    progress : callable, optional
        Called with a :class:`SolveProgress` when each route starts and then every
        10 iterations of an iterative route, from the solving thread.  An exception
        it raises stops the solve and propagates (a way to cancel it).
    workers : int, optional
        Threads for the ``bicgstab-gs`` route.  With more than one, its preconditioner
        becomes block Gauss-Seidel over that many blocks of states, and every pass of
        the iteration runs block by block at once.  By default chains of at least
        200,000 states use the CPUs this process may run on, at most 4; smaller ones
        use one thread (the per-pass hand-off would cost more than it saves).

    Returns
    -------
    SteadyState

    Raises
    ------
    NotErgodicError
        If the chain has more than one closed class (for example two absorbing
        states); the error lists the classes.
    ConvergenceError
        If no route reached the target; it lists every route tried and the best
        residual reached.
    LimitExceededError
        If ``time_limit`` runs out (limit ``"solve_seconds"``).

    Examples
    --------
    >>> import numpy as np
    >>> Q = np.array([[-1.0, 1.0], [2.0, -2.0]])
    >>> steady_state(Q).probabilities.round(6)
    array([0.666667, 0.333333])
    """
    start = time.perf_counter()
    if method not in ("auto", "iterative", *_ROUTES):
        raise ValueError(f"unknown method {method!r}; use 'auto', 'iterative' or one of {_ROUTES}")
    if workers is not None and (
        isinstance(workers, bool) or not isinstance(workers, numbers.Integral) or workers < 1
    ):
        raise ValueError(f"workers must be a whole number of at least 1, got {workers!r}")
    Q = as_generator(Q)
    n = Q.shape[0]
    split = None
    if n >= _COMPILED_CONNECTIVITY_FROM:
        # Q^T split for the iterative routes; its pattern serves the irreducibility
        # check first (the pin is chosen later).
        from ._bicgstab import SplitSystem

        split = SplitSystem.from_generator(Q.indptr, Q.indices, Q.data, 0)
    recurrent = _single_closed_class(Q, split)
    if len(recurrent) == n:
        sub = Q
    else:
        sub, split = sp.csr_array(Q[recurrent][:, recurrent]), None
    m = sub.shape[0]
    if m == 1:
        x, attempts = np.ones(1), [SolverAttempt("dense", 0.0)]
    else:
        threads = _threads_for(m) if workers is None else workers
        cascade = _Cascade(
            sub, tol, max_iterations, time_limit, memory_limit, start, progress, split, threads
        )
        x, attempts = cascade.run(method)
    pi = np.zeros(n)
    pi[recurrent] = x
    residual = _residual_of(Q, pi)
    last = attempts[-1]
    return SteadyState(
        pi,
        residual,
        last.method,
        last.iterations,
        n - m,
        seconds=time.perf_counter() - start,
        attempts=tuple(attempts),
    )


def _threads_for(states: int) -> int:
    """Default ``workers`` of :func:`steady_state` for a chain of this many states."""
    if states < _THREADED_FROM:
        return 1
    try:
        cpus = len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        cpus = os.cpu_count() or 1
    return max(1, min(cpus, _cpu_quota(), _THREADS_MAX))


def _cpu_quota() -> int:
    """CPUs a cgroup v2 quota allows (``docker --cpus``), rounded up; large if none.

    The affinity mask still lists every core of the host in a container with a quota,
    and threads beyond the quota would only wait for each other.
    """
    try:
        with open("/sys/fs/cgroup/cpu.max") as limit:
            quota, period = limit.read().split()[:2]
        return max(1, math.ceil(int(quota) / int(period)))
    except (OSError, ValueError):  # no cgroup v2 file, or "max": no quota
        return _THREADS_MAX


def _residual_of(Q: sp.csr_array, pi: NDArray[np.float64]) -> float:
    # pi Q computed as Q^T pi through the CSR of Q: (Q.T @ pi) without a transposed copy.
    return float(np.abs(Q.T @ pi).sum())


def _single_closed_class(Q: sp.csr_array, split: Any = None) -> NDArray[np.intp]:
    """States of the only closed communicating class; NotErgodicError if there are more.

    ``split``, the :class:`srn._bicgstab.SplitSystem` of ``Q^T`` if built, lets two
    compiled searches (forward on ``Q``, backward on its transpose) settle the common
    irreducible case.
    """
    n = Q.shape[0]
    if n == 1:
        return np.arange(1)
    if split is not None:
        from ._connectivity import reaches_all

        none_ptr, none_idx = np.zeros(n + 1, dtype=np.int64), np.zeros(0, dtype=np.int32)
        forward = reaches_all(Q.indptr.astype(np.int64), Q.indices, none_ptr, none_idx)
        if forward and reaches_all(*split.lower[:2], *split.upper[:2]):
            return np.arange(n)
    # Strong components ignore self-loops, so the diagonal needs no removing.
    n_classes, labels = csgraph.connected_components(Q, directed=True, connection="strong")
    if n_classes == 1:
        return np.arange(n)
    coo = Q.tocoo()
    moving = (labels[coo.row] != labels[coo.col]) & (coo.data != 0)
    open_class = np.zeros(n_classes, dtype=bool)
    open_class[labels[coo.row[moving]]] = True
    closed = np.flatnonzero(~open_class)
    order = np.argsort(labels, kind="stable")
    bounds = np.searchsorted(labels[order], np.arange(n_classes + 1))
    classes = [order[bounds[c] : bounds[c + 1]] for c in closed]
    if len(classes) > 1:
        raise NotErgodicError(classes)
    return np.sort(classes[0])


class _Stopped(Exception):
    """An iterative route gave up; carries the reason and its last iterate, if any."""

    def __init__(self, note: str, x: NDArray[np.float64] | None = None, iterations: int = 0):
        super().__init__(note)
        self.x = x
        self.iterations = iterations


class _Cascade:
    """Runs the routes in order on an irreducible generator ``sub`` (CSR)."""

    def __init__(
        self,
        sub: sp.csr_array,
        tol: float,
        max_iterations: int,
        time_limit: float | None,
        memory_limit: float,
        start: float,
        progress: Callable[[SolveProgress], None] | None = None,
        split: Any = None,
        workers: int = 1,
    ) -> None:
        self.sub = sub
        self.progress = progress
        self.split = split
        self.m = sub.shape[0]
        self.diag = -sub.diagonal()
        self.scale = float(self.diag.max())
        self.target = tol * self.scale
        self.direct_target = max(self.target, 1e-9 * self.scale)
        self.max_iterations = max_iterations
        self.time_limit = time_limit
        self.memory_limit = memory_limit
        self.start = start
        self._At: sp.csr_array | None = None
        self.best: NDArray[np.float64] | None = None
        self.best_residual = math.inf
        self.route_name = ""
        # What a route that succeeded wants said about how (its attempt's note).
        self.route_note = ""
        self.workers = workers

    @property
    def At(self) -> sp.csr_array:
        """``Q^T`` in CSR (row i holds the rates into state i), built once."""
        if self._At is None:
            self._At = sp.csr_array(self.sub.T)
            self._At.sort_indices()
        return self._At

    def residual(self, x: NDArray[np.float64]) -> float:
        return _residual_of(self.sub, x)

    def report(self, method: str, iterations: int, residual: float = math.nan) -> None:
        """Tell the ``progress`` callback, if any, where the solve stands."""
        if self.progress is not None:
            seconds = time.perf_counter() - self.start
            self.progress(SolveProgress(method, iterations, residual, self.target, seconds))

    def check_time(self) -> None:
        if self.time_limit is not None:
            spent = time.perf_counter() - self.start
            if spent > self.time_limit:
                raise LimitExceededError(
                    "solve_seconds",
                    math.ceil(self.time_limit),
                    math.ceil(spent),
                    "steady_state",
                    hint="the time_limit argument of srn.steady_state",
                )

    # -- route selection ---------------------------------------------------------
    def plan(self, method: str) -> list[str]:
        if method == "iterative":
            return list(_ITERATIVE)
        if method != "auto":
            return [method]
        if self.m <= DENSE_MAX:
            return ["dense"]
        routes, lu = [], []
        if self.m <= _ORDERED_MAX_STATES:
            _, bandwidth, envelope = self.rcm()
            if self.m * bandwidth <= _DIRECT_FILL and self.m * bandwidth**2 <= _DIRECT_FLOPS:
                routes.append("direct")
            elif 2 * envelope * _ENTRY_BYTES <= self.memory_limit:
                lu.append("sparse-lu")
        # After the exact GTH routes, before the residual-driven ones: on an NCD chain
        # those meet their residual target with block masses off by percents.
        if not isinstance(self.partition(), str):
            routes.append("iad")
        # Sweeps cost a pass over Q^T each, against the LU's fill: a chain on which they
        # converge fast is solved in milliseconds, and one on which they do not costs
        # the LU route a few dozen passes.
        return routes + (["gauss-seidel"] if lu else []) + lu + list(_ITERATIVE)

    def run(self, method: str) -> tuple[NDArray[np.float64], list[SolverAttempt]]:
        attempts: list[SolverAttempt] = []
        for route in self.plan(method):
            self.check_time()
            began = time.perf_counter()
            iterations, note, x = 0, "", None
            self.route_name, self.route_note = route, ""
            self.report(route, 0)
            try:
                x, iterations = getattr(self, "_" + route.replace("-", "_"))()
                note = self.route_note
            except _Stopped as stop:
                note, x, iterations = str(stop), stop.x, stop.iterations
            except MemoryError:
                note = "out of memory"
            residual = math.inf
            if x is not None and _usable(x):
                x = np.clip(x, 0.0, None)
                x /= x.sum()
                residual = self.residual(x)
                if residual < self.best_residual:
                    self.best, self.best_residual = x, residual
            elif x is not None:
                note = note or "no usable vector (overflow)"
            attempts.append(
                SolverAttempt(
                    self.route_name, residual, iterations, time.perf_counter() - began, note
                )
            )
            accept = self.direct_target if route in ("dense", "direct", "sparse-lu") else None
            if x is not None and residual <= (accept or self.target):
                return x, attempts
        raise ConvergenceError(attempts, self.target)

    # -- orderings -----------------------------------------------------------------
    _rcm: tuple[NDArray[np.intp], int, int] | None = None

    def rcm(self) -> tuple[NDArray[np.intp], int, int]:
        """Reverse Cuthill-McKee order, its bandwidth and its envelope (lower profile)."""
        if self._rcm is None:
            self._rcm = rcm_profile(self.sub)
        return self._rcm

    # -- direct routes -------------------------------------------------------------
    def _dense(self) -> tuple[NDArray[np.float64], int]:
        return _grassmann_taksar_heyman(self.sub.toarray()), 0

    def _direct(self) -> tuple[NDArray[np.float64], int]:
        """GTH elimination in the banded reverse Cuthill-McKee order (no subtraction)."""
        from ._kernels import banded_gth

        order, width, _ = self.rcm()
        rank = np.empty_like(order)
        rank[order] = np.arange(self.m)
        coo = self.sub.tocoo()
        off = coo.row != coo.col
        r, c = rank[coo.row[off]], rank[coo.col[off]]
        band = np.zeros((self.m, 2 * width + 1))
        np.add.at(band, (r, width + c - r), coo.data[off])
        y = banded_gth(band, width)
        x = np.empty(self.m)
        x[order] = y
        return x, 0

    def _pinned_system(
        self, pin: int
    ) -> tuple[sp.csc_array, NDArray[np.float64], NDArray[np.bool_]]:
        """``B y = c``: the balance equations with state ``pin`` fixed at 1 and removed,
        and the mask of the states kept."""
        keep = np.ones(self.m, dtype=bool)
        keep[pin] = False
        rows = sp.csr_array(self.At[keep])
        B = sp.csc_array(rows[:, keep])
        c = -rows[:, [pin]].toarray().ravel()
        return B, c, keep

    def _pin(self) -> int:
        """The state to pin at 1: the most probable one found so far, else the slowest."""
        if self.best is not None:
            return int(np.argmax(self.best))
        return int(np.argmin(self.diag))

    def _solve_pinned(
        self,
        solve: Callable[[sp.csc_array, NDArray[np.float64], NDArray[np.bool_]], tuple[Any, int]],
    ) -> tuple[NDArray[np.float64], int]:
        """``solve(B, c, keep)`` on the pinned system, ``keep`` marking its states."""
        pin = self._pin()
        B, c, keep = self._pinned_system(pin)
        y, iterations = solve(B, c, keep)
        x = np.empty(self.m)
        x[keep] = y
        x[pin] = 1.0
        return x, iterations

    def exit_rates_wide(self) -> NDArray[np.longdouble]:
        """Each state's total exit rate, summed from its off-diagonal rates in extended
        precision (not read from the stored diagonal, which is rounded)."""
        wide = self.sub.astype(np.longdouble)
        return np.asarray(wide.sum(axis=1), dtype=np.longdouble).ravel() - wide.diagonal()

    def _sparse_lu(self) -> tuple[NDArray[np.float64], int]:
        def factor(
            B: sp.csc_array, c: NDArray[np.float64], keep: NDArray[np.bool_]
        ) -> tuple[Any, int]:
            # Columns of Q^T are diagonally dominant, and stay so under a symmetric
            # permutation: no pivoting needed, and none keeps the ordering's fill.
            exits = self.exit_rates_wide()[keep]
            order: NDArray[np.intp] | None
            try:
                order = amd_order(B)
            except OrderingUnavailable as why:
                order = None
                self.route_note = f"SuperLU's minimum-degree ordering ({why})"
                lu = spla.splu(B, permc_spec="MMD_AT_PLUS_A", diag_pivot_thresh=0.0)
            else:
                self.route_note = "AMD ordering"
                B, c, exits = sp.csc_array(B[order][:, order]), c[order], exits[order]
                lu = spla.splu(B, permc_spec="NATURAL", diag_pivot_thresh=0.0)
            y, unsettled = _refined(lu, B, c, exits)
            if unsettled:
                self.route_note += f"; {unsettled}"
            if order is not None:
                y[order] = y.copy()
            return y, 0

        return self._solve_pinned(factor)

    # -- aggregation-disaggregation ---------------------------------------------------
    _partition: NCDPartition | str | None = None

    def partition(self) -> NCDPartition | str:
        """The chain's NCD blocks (see :func:`srn._aggregation.ncd_partition`), or why none."""
        if self._partition is None:
            from ._aggregation import ncd_partition

            # The split's table holds the distinct rates of large chains: it spares a
            # pass over every entry in each "auto" solve (Kanban N = 6: 116 million).
            table = None if self.split is None else self.split.table
            self._partition = ncd_partition(self.sub, distinct_rates=table)
        return self._partition

    def _iad(self) -> tuple[NDArray[np.float64], int]:
        """Koury-McAllister-Stewart iterative aggregation-disaggregation.

        Each iteration: (a) aggregate, the coupling matrix ``C_IJ = sum_{i in I} phi_i
        sum_{j in J} q_ij`` of the iterate ``phi`` normalised within each block, solved
        by dense GTH (the couplings are the weak rates, so subtraction-free elimination
        is where the block masses get their accuracy); (b) disaggregate, ``z_i = xi_I
        phi_i``; (c) one block Gauss-Seidel sweep ``pi_I (-Q_II) = sum_{J != I} v_J Q_JI``
        with ``v`` the newest values, through the subtraction-free block factors of
        :class:`srn._aggregation.BlockSolver`.  The aggregated vector ``z`` is the
        iterate returned: its block masses come from GTH even where a block had to be
        solved by sparse LU.  Stops when ``z`` moves by at most ``tol`` in the 1-norm and
        its residual meets the target (Stewart 1994, ch. 6).
        """
        from ._aggregation import BlockSolver

        part = self.partition()
        if isinstance(part, str):
            raise _Stopped(f"iad: not nearly completely decomposable ({part})")
        order = np.argsort(part.labels, kind="stable")
        labels = part.labels[order]
        bounds = np.searchsorted(labels, np.arange(part.n_blocks + 1)).astype(np.intp)
        Q = sp.csr_array(self.sub[order][:, order])
        coo = Q.tocoo()
        cross = labels[coo.row] != labels[coo.col]
        off = sp.csr_array((coo.data[cross], (coo.row[cross], coo.col[cross])), shape=Q.shape)
        # Rows of ``inflow`` hold the rates into each state from other blocks, and
        # ``to_block[i, J]`` the rate from state i to block J (its own excluded).
        inflow = sp.csr_array(off.T)
        # Row slices per block, cut once: the sweep visits every block each iteration.
        inflows = [inflow[bounds[b] : bounds[b + 1]] for b in range(part.n_blocks)]
        indicator = sp.csr_array(
            (np.ones(self.m), (np.arange(self.m), labels)), shape=(self.m, part.n_blocks)
        )
        to_block = sp.csr_array(off @ indicator)
        # Each state's exits from its block: a sum of rates, never a difference.
        exits = np.asarray(to_block.sum(axis=1), dtype=np.float64).ravel()
        try:
            solver = BlockSolver(Q, bounds, exits, self.memory_limit, self.check_time)
        except MemoryError as err:
            raise _Stopped(str(err) or "iad: out of memory") from None
        tol = self.target / self.scale
        v = np.full(self.m, 1.0 / self.m)
        previous: NDArray[np.float64] | None = None
        best_change, since = math.inf, 0
        iterations = 0

        def unpermuted(y: NDArray[np.float64]) -> NDArray[np.float64]:
            x = np.empty(self.m)
            x[order] = y
            return x

        while True:
            self.check_time()
            mass = np.add.reduceat(v, bounds[:-1])
            phi = v / mass[labels]
            C = (indicator.T @ (to_block * phi[:, None])).toarray()
            xi = _grassmann_taksar_heyman(C)
            if not _usable(xi):
                # A block whose exits all sit on states of probability zero (underflow).
                raise _Stopped("iad: the aggregated chain fell apart", None, iterations)
            z = xi[labels] * phi
            z /= z.sum()
            residual = _residual_of(Q, z)
            change = math.inf if previous is None else float(np.abs(z - previous).sum())
            self.report("iad", iterations, residual)
            if change <= tol and residual <= self.target:
                return unpermuted(z), iterations
            if change < best_change / 2:
                best_change, since = change, iterations
            elif iterations - since > _IAD_STALL:
                raise _Stopped(
                    f"iad: the iterates stopped converging (change {best_change:.3g})",
                    unpermuted(z),
                    iterations,
                )
            if iterations >= self.max_iterations:
                raise _Stopped(
                    f"iad: max_iterations={self.max_iterations} reached",
                    unpermuted(z),
                    iterations,
                )
            # One block Gauss-Seidel sweep from z: blocks before I already hold their
            # new values, blocks after it still hold z.
            w = z.copy()
            for block in range(part.n_blocks):
                lo, hi = bounds[block], bounds[block + 1]
                b = inflows[block] @ w
                if b.sum() > 0.0:
                    x = solver.solve(block, b)
                    mass_of_x = float(x.sum())
                    if not (math.isfinite(mass_of_x) and mass_of_x > 0.0):
                        # Only a sparse LU block can do this: a block nested-NCD
                        # itself, too ill-conditioned for factors that subtract.
                        raise _Stopped(
                            f"iad: the solve of block {block} ({hi - lo} states) "
                            "lost all its mass (too ill-conditioned for its sparse LU)",
                            unpermuted(z),
                            iterations,
                        )
                    w[lo:hi] = x
            total = float(w.sum())
            if not (math.isfinite(total) and total > 0.0):
                raise _Stopped("iad: the block sweep overflowed", unpermuted(z), iterations)
            previous, v = z, w / total
            iterations += 1

    # -- iterative routes ----------------------------------------------------------
    def _monitor(self, label: str, window: int = _STALL_WINDOW) -> Callable[..., None]:
        """A callback that enforces the time and iteration limits and detects stagnation.

        Stagnation: the residual has not halved over ``window`` iterations.
        """
        state = {"count": 0, "best": math.inf, "since": 0}

        def watch(x: Any, residual: float | None = None) -> None:
            state["count"] += 1
            count = state["count"]
            self.check_time()
            if count > self.max_iterations:
                raise _Stopped(f"{label}: max_iterations={self.max_iterations} reached")
            if x is None and residual is None and count % _CHECK_EVERY == 0:
                self.report(label, int(count))
            if (x is not None or residual is not None) and count % _CHECK_EVERY == 0:
                # A residual the route estimated as it went saves a product with Q^T.
                r = self.residual_of_unnormalised(x) if residual is None else residual
                self.report(label, int(count), r)
                if r < state["best"] / 2:
                    state["best"], state["since"] = r, count
                elif count - state["since"] > window:
                    raise _Stopped(f"{label}: residual stagnated near {state['best']:.3g}")

        watch.state = state  # type: ignore[attr-defined]
        return watch

    def residual_of_unnormalised(self, x: NDArray[np.float64]) -> float:
        x = np.clip(np.asarray(x, dtype=float).ravel(), 0.0, None)
        total = float(x.sum())
        if not math.isfinite(total) or total <= 0:
            return math.inf
        return self.residual(x / total)

    def _bicgstab_gs(self) -> tuple[NDArray[np.float64], int]:
        """BiCGSTAB with a (block) Gauss-Seidel preconditioner; GMRES(50) after a breakdown.

        One state is pinned to 1 and its equation replaced by that identity, which
        makes the system nonsingular without deleting a row and column of ``Q^T``.
        The preconditioned products cost one pass over the matrix (see
        :mod:`srn._bicgstab`), and no transposed copy of ``Q`` is built.
        """
        from ._bicgstab import SplitSystem, bicgstab

        n = self.m
        fixed = self._pin()
        if self.split is not None:
            system = replace(self.split, fixed=fixed)
        else:
            system = SplitSystem.from_generator(
                self.sub.indptr, self.sub.indices, self.sub.data, fixed
            )
        b = np.zeros(n)
        b[fixed] = 1.0
        watch = self._monitor("bicgstab-gs")
        # BiCGSTAB's shadow residual is its first residual; b itself would be a unit
        # vector that the preconditioned iteration annihilates: start from uniform.
        x = np.ones(n)
        for attempt in range(2):
            # Stop at a tenth of the target (a hundredth on the retry): a margin for
            # the drift of the recurrence residual from the true one, checked below.
            x, _ = bicgstab(
                system,
                b,
                x,
                rtol=self.target / self.scale * 10.0**-attempt,
                residual_target=self.target * 10.0 ** -(attempt + 1),
                callback=watch,
                workers=self.workers,
            )
            if _usable(x) and self.residual_of_unnormalised(x) <= self.target:
                return x, watch.state["count"]  # type: ignore[attr-defined]
            if not _usable(x):
                x = np.ones(n)
        # GMRES cannot break down; it restarts from zero, because a BiCGSTAB breakdown
        # can leave x where the Krylov space is poor.
        A = spla.LinearOperator((n, n), matvec=system.matvec, dtype=np.float64)
        M = spla.LinearOperator((n, n), matvec=system.precondition, dtype=np.float64)
        gm = self._monitor("gmres-gs")
        self.route_name = "gmres-gs"
        x, _ = spla.gmres(
            A,
            b,
            x0=None,
            M=M,
            rtol=self.target / self.scale * 1e-2,
            atol=0.0,
            restart=50,
            callback=lambda _: gm(None),
            callback_type="pr_norm",
        )
        return x, watch.state["count"] + gm.state["count"]  # type: ignore[attr-defined]

    def _gmres_ilu(self) -> tuple[NDArray[np.float64], int]:
        # Fill cap: what the memory budget allows, at most 20 times the matrix.
        nnz = self.At.nnz
        fill_factor = min(20.0, self.memory_limit / max(1, nnz * _ENTRY_BYTES))
        if fill_factor < 1.0:
            raise _Stopped(
                "gmres-ilu: the ILU factors would not fit in "
                f"memory_limit={self.memory_limit:.3g} bytes"
            )
        count = {"n": 0}

        def solve(
            B: sp.csc_array, c: NDArray[np.float64], keep: NDArray[np.bool_]
        ) -> tuple[Any, int]:
            ilu = spla.spilu(
                B,
                drop_tol=1e-6,
                fill_factor=fill_factor,
                permc_spec="MMD_AT_PLUS_A",
                diag_pivot_thresh=0.0,
            )
            M = spla.LinearOperator(B.shape, matvec=ilu.solve, dtype=np.float64)
            watch = self._monitor("gmres-ilu")
            y, _ = spla.gmres(
                B,
                c,
                M=M,
                rtol=1e-15,
                atol=0.0,
                restart=50,
                callback=lambda _: watch(None),
                callback_type="pr_norm",
            )
            count["n"] = watch.state["count"]  # type: ignore[attr-defined]
            return y, count["n"]

        return self._solve_pinned(solve)

    def _gauss_seidel(self) -> tuple[NDArray[np.float64], int]:
        """Gauss-Seidel sweeps from two starts until both settle on one answer, or a refusal.

        Each sweep sets ``x_i = sum_j x_j q_ji / q_i``: sums and products of positive
        numbers only, so a tiny probability is computed to the same relative accuracy
        as a large one.  A run from one start settles when the largest relative change
        of a state in one sweep, times ``rho / (1 - rho)`` for the observed contraction
        ``rho`` per sweep (the error left by a linearly converging iteration), is at
        most ``_GS_SETTLED``; from ``_GS_JUDGE_AFTER`` sweeps on it stops as soon as
        that contraction says it would need more than ``_GS_SWEEPS`` sweeps.

        That estimate sees only the modes that still move.  On a metastable chain (two
        wells joined by a path of improbable states) the mass moves between the wells
        by less than ``_GS_SETTLED`` a sweep, and a single run "settles" with the wells'
        masses where its start put them.  So the sweeps run twice: from the uniform
        distribution, then with half the mass on the state the first run found least
        probable.  The answer stands only if both runs settle and agree to
        ``_GS_AGREE`` relative in every state; the route adds no guarantee beyond that.
        """
        first, sweeps = self._settle(np.full(self.m, 1.0 / self.m))
        # Half the mass on one state, half spread: a point mass alone can be swept away
        # (to zero everywhere) when none of its state's predecessors comes after it.
        skewed = np.full(self.m, 0.5 / self.m)
        skewed[int(np.argmin(np.where(first > 0.0, first, np.inf)))] += 0.5
        second, more = self._settle(skewed)
        both = (first > 0.0) | (second > 0.0)
        apart = float(
            np.max(
                np.abs(first[both] - second[both]) / np.maximum(first, second)[both],
                initial=0.0,
            )
        )
        if apart > _GS_AGREE:
            raise _Stopped(
                f"gauss-seidel: two starts settled {apart:.2g} apart (a metastable chain)",
                None,
                sweeps + more,
            )
        return first, sweeps + more

    def _settle(self, x: NDArray[np.float64]) -> tuple[NDArray[np.float64], int]:
        """Sweep ``x`` (a distribution, overwritten) until it settles; see above."""
        from ._kernels import sor_sweep

        At = self.At
        changes: list[float] = []
        previous = np.empty_like(x)
        while True:
            np.copyto(previous, x)
            sor_sweep(At.indptr, At.indices, At.data, self.diag, x, 1.0)
            total = float(x.sum())
            sweeps = len(changes) + 1
            if not (math.isfinite(total) and total > 0.0):
                raise _Stopped("gauss-seidel: the sweeps lost the distribution", None, sweeps)
            x /= total
            if sweeps % _CHECK_EVERY == 0:
                self.check_time()
                self.report("gauss-seidel", sweeps)
            # Underflowed states (probability 0 in double) carry no relative change.
            moved = x > 0.0
            change = float(np.max(np.abs(x[moved] - previous[moved]) / x[moved], initial=0.0))
            changes.append(change)
            window = min(10, sweeps - 1)
            before = changes[-1 - window]
            if window and before > 0.0:
                rho = (change / before) ** (1.0 / window)
            else:
                rho = 0.0 if change == 0.0 else 1.0
            if rho < 1.0 and change * rho / (1.0 - rho) <= _GS_SETTLED:
                return x, sweeps
            if sweeps >= _GS_JUDGE_AFTER:
                # Sweeps until the change would meet the acceptance bound at this rate.
                bound = _GS_SETTLED * (1.0 - rho) / rho if 0.0 < rho < 1.0 else 0.0
                needed = (
                    sweeps + math.log(bound / change) / math.log(rho)
                    if 0.0 < bound < change
                    else math.inf
                    if bound == 0.0
                    else sweeps
                )
                if needed > _GS_SWEEPS or sweeps >= _GS_SWEEPS:
                    # No iterate goes with the refusal: a stopped run is never accepted.
                    raise _Stopped(
                        f"gauss-seidel: {rho:.6g} contraction per sweep would need more "
                        f"than {_GS_SWEEPS} sweeps",
                        None,
                        sweeps,
                    )

    def _sor(self) -> tuple[NDArray[np.float64], int]:
        """Gauss-Seidel sweeps (SOR with omega = 1) on ``pi Q = 0``, normalised each sweep."""
        from ._kernels import sor_sweep

        At = self.At
        x = self.best.copy() if self.best is not None else np.full(self.m, 1.0 / self.m)
        # Sweeps converge linearly, often slowly: allow a long plateau before giving up.
        watch = self._monitor("sor", window=20 * _STALL_WINDOW)
        iterations = 0
        while True:
            sor_sweep(At.indptr, At.indices, At.data, self.diag, x, 1.0)
            x /= x.sum()
            iterations += 1
            if iterations % _CHECK_EVERY == 0 and self.residual(x) <= self.target:
                return x, iterations
            try:
                watch(x)
            except _Stopped as stop:
                raise _Stopped(str(stop), x, iterations) from None


def _grassmann_taksar_heyman(Q: NDArray[np.float64]) -> NDArray[np.float64]:
    """Stationary vector of a small irreducible generator by GTH elimination.

    States are censored out from the last: the rates of state k are redistributed to
    the states below it in proportion to where k goes next, and the normaliser is the
    *sum* of k's rates to them rather than ``-Q[k, k]``.  Every operation adds or
    multiplies positive numbers, so even probabilities many orders of magnitude below
    the largest keep full relative accuracy (Grassmann, Taksar and Heyman, Operations
    Research 33(5), 1985).  O(n^3), for the few hundred states the dense path takes.
    """
    A = np.array(Q, dtype=np.float64)
    np.fill_diagonal(A, 0.0)
    with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
        x = _gth_elimination(A.copy())
    if bool(np.isfinite(x).all()) and float(x.sum()) > 0.0:
        return x
    # Rates so far apart that the elimination overflows (1e160 beside 1e-160: a ratio
    # beyond the largest double).  Eliminate on the embedded jump chain instead, each
    # row divided by its exit rate q_i, so that every entry is at most 1; its
    # stationary vector nu gives pi_i ~ nu_i / q_i, formed in logarithms and scaled to
    # a largest entry of 1 (a probability below the smallest double becomes 0).
    # Where even the jump chain's ratios pass the largest double (a rate of 5e-324 beside
    # 0.5), in extended precision (x86's long double reaches 1e4932; elsewhere it is the
    # double again, and the caller finds no usable vector).
    for dtype in (np.float64, np.longdouble):
        wide = A.astype(dtype)
        exits = wide.sum(axis=1)
        with np.errstate(divide="ignore", over="ignore", invalid="ignore", under="ignore"):
            nu = _gth_elimination(wide / exits[:, None])
            log_pi = np.log(nu) - np.log(exits)
            log_pi -= np.max(log_pi)
            pi = np.exp(log_pi).astype(np.float64)
        if bool(np.isfinite(pi).all()) and float(pi.sum()) > 0.0:
            break
    return pi


def _gth_elimination(A: NDArray[Any]) -> NDArray[Any]:
    """GTH on the off-diagonal rates ``A`` (changed in place; any float dtype);
    unnormalised result."""
    n = A.shape[0]
    for k in range(n - 1, 0, -1):
        leave = A[k, :k].sum()
        A[:k, k] /= leave
        A[:k, :k] += np.outer(A[:k, k], A[k, :k])
    x = np.zeros(n, dtype=A.dtype)
    x[0] = 1.0
    for k in range(1, n):
        x[k] = x[:k] @ A[:k, k]
        if x[k] > _RESCALE_ABOVE:
            # A chain whose probabilities span more than the double range (a queue with
            # lambda / mu = 1e77): scale what is solved so far down, the smallest to 0.
            x[: k + 1] /= x[k]
    return x


#: Where the back substitution of GTH rescales its unnormalised vector.
_RESCALE_ABOVE = 1e150


def _usable(x: NDArray[np.float64]) -> bool:
    """Whether an unnormalised solution can be normalised (finite, with a finite sum)."""
    with np.errstate(over="ignore", invalid="ignore"):
        total = float(np.clip(x, 0.0, None).sum())
    return bool(np.isfinite(x).all()) and math.isfinite(total) and total > 0.0


# Iterative refinement of the LU route: it goes on while each step moves the states at
# most half as much as the step before (it is converging), up to _REFINE_STEPS steps, and
# has settled once a step moves no state by more than _REFINE_SETTLED of itself.
_REFINE_STEPS = 30
_REFINE_SETTLED = 1e-14


def _refined(
    lu: Any, B: sp.csc_array, c: NDArray[np.float64], exits: NDArray[np.longdouble]
) -> tuple[NDArray[np.float64], str]:
    """``B y = c`` solved with the factor ``lu`` and refined against exact diagonals.

    The residuals are computed in extended precision (x86's 80-bit long double; plain
    double where long double is no wider), with ``B``'s diagonal replaced by ``-exits``:
    each state's exit rate summed from its off-diagonal rates, as GTH elimination uses it.
    The stored diagonal is that sum rounded to double, and on a nearly decomposable chain
    the answer is that sensitive to it: on a double well with a barrier of 20
    (tests/srn/test_srn_hard_chains.py) the LU answer stayed 5e-6 to 1e-5 off the exact
    one however long it was refined against the stored diagonal, and reaches 1e-9 in one
    step against the exact one.

    Returns
    -------
    y : ndarray
        The refined solution.
    note : str
        ``""`` when the refinement settled; otherwise what it did.  Where the factor is
        too poor a preconditioner (nearly decomposable chains far from their blocks'
        order) the steps stop shrinking and the answer, although its residual is tiny,
        can be far off: the cascade's ``iad`` and ``direct`` routes come first on such
        chains.
    """
    wide_B = B.astype(np.longdouble)
    wide_B.setdiag(-exits)
    wide_c = c.astype(np.longdouble)
    y = lu.solve(c).astype(np.longdouble)
    previous = math.inf
    for steps in range(1, _REFINE_STEPS + 1):
        step = lu.solve(np.asarray(wide_c - wide_B @ y, dtype=np.float64))
        scale = np.abs(np.asarray(y, dtype=np.float64))
        moved = float(np.max(np.abs(step) / np.where(scale > 0, scale, np.inf), initial=0.0))
        if moved > previous:
            # Growing: keep the iterate before this step.
            return np.asarray(y, dtype=np.float64), (
                f"refinement did not settle: step {steps} would move a state by "
                f"{moved:.1g} of itself, the step before by {previous:.1g}"
            )
        y += step
        if moved <= _REFINE_SETTLED:
            return np.asarray(y, dtype=np.float64), ""
        if moved > previous / 2:
            return np.asarray(y, dtype=np.float64), (
                f"refinement did not settle: stalled at step {steps}, its last step "
                f"moving a state by {moved:.1g} of itself"
            )
        previous = moved
    return np.asarray(y, dtype=np.float64), (
        f"refinement did not settle in {_REFINE_STEPS} steps: the last moved a state by "
        f"{previous:.1g} of itself"
    )
