"""Steady-state, transient and time-to-absorption solution of a CTMC generator.

The functions take a generator ``Q`` (rows sum to zero, as returned by
:meth:`ReachabilityGraph.generator`) and know nothing about nets, so they serve any
CTMC.  Each result reports how it was computed and how accurate it is.
"""

from __future__ import annotations

import math
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import scipy.linalg as la
import scipy.sparse as sp
import scipy.sparse.csgraph as csgraph
import scipy.sparse.linalg as spla
from numpy.typing import ArrayLike, NDArray
from scipy import optimize, special

from .errors import AbsorptionError, LimitExceededError, NotErgodicError, SRNError

__all__ = [
    "AbsorptionTime",
    "SteadyState",
    "TransientSolution",
    "steady_state",
    "time_to_absorption",
    "transient",
]

# Below this many states dense GTH elimination beats sparse machinery on overhead.
_DENSE_MAX = 300
# Banded LU is exact and quick on the long, thin chains of queues, but on nets with many
# concurrent components no ordering keeps the band narrow (Kanban N=3 would not finish).
# ``auto`` uses it when the fill (states x bandwidth) and the work (states x bandwidth^2)
# of the reverse Cuthill-McKee order stay below these; the Gauss-Seidel-preconditioned
# Krylov solver takes the rest.
_DIRECT_FILL = 20_000_000
_DIRECT_FLOPS = 500_000_000
# The ordering itself needs the symmetrised pattern of Q (twice its memory); beyond this
# many states ``auto`` does not try it: the band would have to be under ~15 for the LU to
# qualify, and the iterative solver handles such chains well.
_BANDED_MAX_STATES = 200_000


def _as_generator(Q: Any) -> sp.csr_array:
    if isinstance(Q, np.ndarray):
        Q = sp.csr_array(Q)
    if not sp.issparse(Q):
        raise TypeError("Q must be a SciPy sparse matrix or a NumPy array")
    Q = sp.csr_array(Q, dtype=float)
    if Q.shape[0] != Q.shape[1] or Q.shape[0] == 0:
        raise SRNError(f"the generator must be a non-empty square matrix, got shape {Q.shape}")
    return Q


def _closed_classes(Q: sp.csr_array) -> tuple[list[NDArray[np.intp]], NDArray[np.intp]]:
    """Closed communicating classes of the chain, and the class label of every state."""
    adjacency = Q.copy()
    adjacency.setdiag(0)
    adjacency.eliminate_zeros()
    n_classes, labels = csgraph.connected_components(adjacency, directed=True, connection="strong")
    if n_classes == 1:
        return [np.arange(Q.shape[0])], labels
    coo = adjacency.tocoo()
    leaving = labels[coo.row] != labels[coo.col]
    open_class = np.zeros(n_classes, dtype=bool)
    open_class[labels[coo.row[leaving]]] = True
    closed = np.flatnonzero(~open_class)
    order = np.argsort(labels, kind="stable")
    bounds = np.searchsorted(labels[order], np.arange(n_classes + 1))
    classes = [order[bounds[c] : bounds[c + 1]] for c in closed]
    return classes, labels


@dataclass(frozen=True)
class SteadyState:
    """A steady-state distribution and how it was obtained.

    Attributes
    ----------
    probabilities : ndarray, shape (n_states,)
        The stationary distribution pi (non-negative, sums to 1).
    residual : float
        ``||pi Q||_1``, the 1-norm of the balance-equation residual.
    method : str
        ``"dense"``, ``"direct"`` (sparse LU), ``"bicgstab-gs"`` or ``"gmres-gs"``
        (Krylov solvers with a Gauss-Seidel preconditioner).
    iterations : int
        Iterations of the iterative solver (0 for direct methods).
    transient_states : int
        States outside the single closed class; they have probability zero.
    seconds : float
        Wall time of the solve.
    """

    probabilities: NDArray[np.float64]
    residual: float
    method: str
    iterations: int = 0
    transient_states: int = 0
    seconds: float = 0.0


def steady_state(
    Q: Any,
    *,
    method: str = "auto",
    tol: float = 1e-12,
    max_iterations: int = 5_000,
    time_limit: float | None = None,
) -> SteadyState:
    """Solve ``pi Q = 0``, ``sum(pi) = 1`` for an irreducible (or unichain) CTMC.

    Parameters
    ----------
    Q : sparse matrix or ndarray, shape (n, n)
        Generator matrix, rows summing to zero, rates in 1/s.
    method : {"auto", "dense", "direct", "iterative"}
        ``auto`` picks dense GTH elimination up to 300 states, then (up to 200,000
        states) banded sparse LU in a reverse Cuthill-McKee order when its band is
        narrow (queues, birth-death chains), and otherwise Gauss-Seidel-preconditioned
        BiCGSTAB (GMRES if it breaks down).
    tol : float
        Target 1-norm residual relative to the largest rate, for the iterative solver.
        The iterative solver bounds the absolute error of every probability through
        the residual; only the dense and direct solvers also keep the relative accuracy
        of probabilities far below ``tol``.
    max_iterations : int
        Iteration cap for the iterative solver.
    time_limit : float, optional
        Wall-clock seconds the iterative solver may use.

    Returns
    -------
    SteadyState

    Raises
    ------
    NotErgodicError
        If the chain has more than one closed class (for example two absorbing
        states); the error lists the classes.
    LimitExceededError
        If the iterative solver runs out of iterations or time.

    Examples
    --------
    >>> import numpy as np
    >>> Q = np.array([[-1.0, 1.0], [2.0, -2.0]])
    >>> steady_state(Q).probabilities.round(6)
    array([0.666667, 0.333333])
    """
    start = time.perf_counter()
    Q = _as_generator(Q)
    n = Q.shape[0]
    classes, _ = _closed_classes(Q) if n > 1 else ([np.arange(1)], None)
    if len(classes) > 1:
        raise NotErgodicError(classes)
    recurrent = classes[0]
    sub = Q if len(recurrent) == n else Q[recurrent][:, recurrent]
    m = sub.shape[0]
    order: NDArray[np.intp] | None = None
    if method == "direct" or (method == "auto" and _DENSE_MAX < m <= _BANDED_MAX_STATES):
        order, bandwidth = _banded_order(sub)
        if method == "auto":
            banded_cheap = m * bandwidth <= _DIRECT_FILL and m * bandwidth**2 <= _DIRECT_FLOPS
            method = "direct" if banded_cheap else "iterative"
    elif method == "auto":
        method = "dense" if m <= _DENSE_MAX else "iterative"
    iterations = 0
    if m == 1:
        x = np.ones(1)
    elif method == "dense":
        x = _grassmann_taksar_heyman(sub.toarray())
    elif method == "direct":
        x = _banded_direct(sub, order if order is not None else np.arange(m))
        if not _usable(x):
            # The state eliminated last had a probability below the double range, so
            # its pivot overflowed; eliminating from the other end of the band ends on
            # the other extreme of the chain.
            x = _banded_direct(sub, (order if order is not None else np.arange(m))[::-1])
        if not _usable(x):
            x, iterations, method = _preconditioned_krylov(
                sub, tol, max_iterations, time_limit, start
            )
    elif method == "iterative":
        x, iterations, method = _preconditioned_krylov(sub, tol, max_iterations, time_limit, start)
    else:
        raise ValueError(f"unknown method {method!r}")
    x = np.clip(x, 0.0, None)
    x /= x.sum()
    pi = np.zeros(n)
    pi[recurrent] = x
    residual = float(np.abs(Q.T @ pi).sum())
    return SteadyState(pi, residual, method, iterations, n - m, seconds=time.perf_counter() - start)


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
    n = A.shape[0]
    for k in range(n - 1, 0, -1):
        leave = A[k, :k].sum()
        A[:k, k] /= leave
        A[:k, :k] += np.outer(A[:k, k], A[k, :k])
    x = np.zeros(n)
    x[0] = 1.0
    for k in range(1, n):
        x[k] = x[:k] @ A[:k, k]
    return x


def _usable(x: NDArray[np.float64]) -> bool:
    """Whether an unnormalised solution can be normalised (finite, with a finite sum)."""
    with np.errstate(over="ignore", invalid="ignore"):
        total = float(np.clip(x, 0.0, None).sum())
    return bool(np.isfinite(x).all()) and math.isfinite(total) and total > 0.0


def _banded_order(sub: sp.csr_array) -> tuple[NDArray[np.intp], int]:
    """A reverse Cuthill-McKee order of the states, and the bandwidth it leaves."""
    pattern = sp.csr_array(abs(sub) + abs(sub.T))
    order = csgraph.reverse_cuthill_mckee(pattern, symmetric_mode=True).astype(np.intp)
    rank = np.empty_like(order)
    rank[order] = np.arange(len(order))
    coo = sub.tocoo()
    return order, int(np.abs(rank[coo.row] - rank[coo.col]).max(initial=0))


def _banded_direct(sub: sp.csr_array, order: NDArray[np.intp]) -> NDArray[np.float64]:
    """Sparse LU of the balance equations in a banded order, without pivoting.

    The last balance equation is replaced by the normalisation, a dense row that comes
    last and so fills nothing.  No state is pinned, so probabilities spanning hundreds
    of orders of magnitude (a long M/M/1/K tail) neither overflow nor lose accuracy.
    The columns of ``Q^T`` are diagonally dominant, so Gaussian elimination on the
    diagonal is stable and keeps the fill inside the band.
    """
    m = sub.shape[0]
    At = sp.csr_array(sub[order][:, order].T)
    A = sp.vstack([At[:-1], sp.csr_array(np.ones((1, m)))], format="csc")
    lu = spla.splu(A, permc_spec="NATURAL", diag_pivot_thresh=0.0)
    b = np.zeros(m)
    b[-1] = 1.0
    x = np.empty(m)
    x[order] = lu.solve(b)
    return x


def _preconditioned_krylov(
    sub: sp.csr_array,
    tol: float,
    max_iterations: int,
    time_limit: float | None,
    start: float,
) -> tuple[NDArray[np.float64], int, str]:
    """BiCGSTAB on the balance equations with a Gauss-Seidel preconditioner.

    One state is pinned to 1 and its equation replaced by that identity, which makes
    the system nonsingular without deleting a row and column of ``Q^T``.  The
    preconditioner is a forward sweep of ``(D + L)``, compiled with Numba.  BiCGSTAB can
    break down; GMRES(50) with the same preconditioner then takes over.
    """
    from ._kernels import lower_solve

    At = sp.csr_array(sub.T)
    n = At.shape[0]
    fixed = 0
    diag = -sub.diagonal()
    scale = float(diag.max())
    b = np.zeros(n)
    b[fixed] = 1.0

    def matvec(x: NDArray[np.float64]) -> NDArray[np.float64]:
        y = At @ x
        y[fixed] = x[fixed]
        return np.asarray(y)

    def precondition(r: NDArray[np.float64]) -> NDArray[np.float64]:
        r = np.ascontiguousarray(r, dtype=np.float64).ravel()
        return np.asarray(lower_solve(At.indptr, At.indices, At.data, -diag, r, fixed, 1.0))

    A = spla.LinearOperator((n, n), matvec=matvec, dtype=np.float64)
    M = spla.LinearOperator((n, n), matvec=precondition, dtype=np.float64)
    count = 0

    def callback(_: Any) -> None:
        nonlocal count
        count += 1
        if time_limit is not None and time.perf_counter() - start > time_limit:
            raise LimitExceededError(
                "solve_seconds", math.ceil(time_limit), math.ceil(time.perf_counter() - start)
            )
        if count > max_iterations:
            raise LimitExceededError("max_iterations", max_iterations, count, "steady_state")

    # BiCGSTAB's shadow residual is its first residual; b itself would be a unit vector
    # that the preconditioned iteration annihilates, so start from the uniform vector.
    x = np.ones(n)
    method = "bicgstab-gs"
    residual = math.inf
    for attempt in range(4):
        if attempt < 2:
            x, _ = spla.bicgstab(
                A, b, x0=x, M=M, rtol=tol * 10.0**-attempt, atol=0.0, callback=callback
            )
        else:
            # GMRES cannot break down; it restarts from zero the first time, because a
            # BiCGSTAB breakdown can leave x where the Krylov space is poor.
            method = "gmres-gs"
            x, _ = spla.gmres(
                A,
                b,
                x0=None if attempt == 2 else x,
                M=M,
                rtol=tol * 1e-2,
                atol=0.0,
                restart=50,
                callback=callback,
                callback_type="pr_norm",
            )
        x = np.clip(x, 0.0, None)
        if _usable(x):
            residual = float(np.abs(At @ (x / x.sum())).sum())
            if residual <= tol * scale:
                return x, count, method
        else:
            x = np.ones(n)
    raise SRNError(
        f"the steady-state solver stalled at residual {residual:.3g} after {count} "
        f"iterations (target {tol * scale:.3g}); the chain may be nearly decomposable",
        field="method",
    )


# -- transient ------------------------------------------------------------------


def _poisson_window(qt: float, eps: float) -> tuple[int, int, NDArray[np.float64], float]:
    """Left/right truncation points of Poisson(qt), the weights in between, and the lost mass.

    The points come from Bernstein's tail bounds for the Poisson law,
    ``P(N >= qt + x) <= exp(-x^2 / (2 (qt + x/3)))`` and ``P(N <= qt - x) <= exp(-x^2 / (2 qt))``,
    each set to ``eps / 2``; the mass actually lost is then computed exactly.  Closed forms
    and ufuncs only: this runs once per time point, so it must cost microseconds.
    """
    if qt == 0:
        return 0, 0, np.ones(1), 0.0
    log_term = math.log(2.0 / eps)
    upper = log_term / 3.0 + math.sqrt((log_term / 3.0) ** 2 + 2.0 * qt * log_term)
    right = math.ceil(qt + upper) + 1
    left = max(0, math.floor(qt - math.sqrt(2.0 * qt * log_term))) if qt > 25 else 0
    k = np.arange(left, right + 1, dtype=np.float64)
    weights = np.exp(special.xlogy(k, qt) - qt - special.gammaln(k + 1.0))
    lost = float(special.pdtrc(right, qt) + (special.pdtr(left - 1, qt) if left else 0.0))
    return left, right, weights, lost


def _initial_vector(initial: ArrayLike, n: int) -> NDArray[np.float64]:
    p0 = np.asarray(initial, dtype=float)
    if p0.shape != (n,):
        raise SRNError(f"the initial distribution needs {n} entries, got shape {p0.shape}")
    if not np.all(np.isfinite(p0)) or np.any(p0 < 0) or abs(p0.sum() - 1) > 1e-9:
        raise SRNError("the initial distribution must be non-negative and sum to 1")
    return p0


def _times(times: ArrayLike) -> NDArray[np.float64]:
    t = np.atleast_1d(np.asarray(times, dtype=float))
    if t.ndim != 1 or not np.all(np.isfinite(t)) or np.any(t < 0):
        raise SRNError("times must be a 1-D list of finite, non-negative seconds")
    return t


@dataclass(frozen=True)
class TransientSolution:
    """State probabilities at a list of times.

    Attributes
    ----------
    times : ndarray, shape (k,)
        Times in seconds.
    probabilities : ndarray, shape (k, n_states)
        ``probabilities[i]`` is the distribution at ``times[i]``.
    error_bound : ndarray, shape (k,)
        Bound on the 1-norm error from truncating the Poisson series (uniformisation),
        or the tolerance requested from ``expm_multiply``.
    method : str
        ``"uniformization"`` or ``"expm"``.
    """

    times: NDArray[np.float64]
    probabilities: NDArray[np.float64]
    error_bound: NDArray[np.float64]
    method: str


def transient(
    Q: Any,
    times: ArrayLike,
    initial: ArrayLike,
    *,
    method: str = "auto",
    tol: float = 1e-12,
    max_steps: int = 2_000_000,
) -> TransientSolution:
    """Distribution of the CTMC at each of ``times``, from an initial distribution.

    Parameters
    ----------
    Q : sparse matrix or ndarray, shape (n, n)
        Generator, rates in 1/s.
    times : array of float
        Times in seconds (any order; each is solved from time 0).
    initial : array, shape (n,)
        Initial distribution (for example ``graph.initial_distribution``).
    method : {"auto", "uniformization", "expm"}
        Uniformisation (Jensen's method) with Fox-Glynn-style truncation, or
        :func:`scipy.sparse.linalg.expm_multiply`.  ``auto`` uses uniformisation
        unless ``q * max(times)`` would need more than ``max_steps`` products.
    tol : float
        Poisson truncation mass allowed per time point.
    max_steps : int
        Matrix-vector products uniformisation may use.

    Returns
    -------
    TransientSolution
    """
    Q = _as_generator(Q)
    n = Q.shape[0]
    t = _times(times)
    p0 = _initial_vector(initial, n)
    q = float(np.max(-Q.diagonal())) if n else 0.0
    if method == "auto":
        method = "uniformization" if q * t.max(initial=0) < max_steps else "expm"
    if method == "expm":
        out = np.empty((len(t), n))
        for i, ti in enumerate(t):
            out[i] = spla.expm_multiply(Q.T * ti, p0)
        out = np.clip(out, 0.0, None)
        return TransientSolution(t, out, np.full(len(t), tol), "expm")
    if method != "uniformization":
        raise ValueError(f"unknown method {method!r}")
    if q == 0:
        return TransientSolution(t, np.tile(p0, (len(t), 1)), np.zeros(len(t)), method)
    q *= 1.02  # a little above the largest exit rate keeps P's diagonal positive
    Pt = (sp.identity(n, format="csr") + Q / q).T.tocsr()
    windows = [_poisson_window(q * ti, tol) for ti in t]
    right = max(w[1] for w in windows)
    if right > max_steps:
        raise LimitExceededError("max_steps", max_steps, right, "uniformization products")
    out = np.zeros((len(t), n))
    v = p0.copy()
    for k in range(right + 1):
        for i, (left, r, weights, _) in enumerate(windows):
            if left <= k <= r:
                out[i] += weights[k - left] * v
        if k < right:
            v = Pt @ v
    bound = np.array([w[3] for w in windows])
    return TransientSolution(t, out, bound, "uniformization")


# -- time to absorption ------------------------------------------------------------


def _reaching(adjacency: sp.csr_array, targets: NDArray[np.intp]) -> NDArray[np.bool_]:
    """Mask of states from which some target state can be reached (targets included)."""
    n = adjacency.shape[0]
    if len(targets) == 0:
        return np.zeros(n, dtype=bool)
    # Reverse edges plus a virtual node n pointing at every target; one BFS from it.
    coo = adjacency.tocoo()
    rows = np.concatenate([coo.col, np.full(len(targets), n)])
    cols = np.concatenate([coo.row, targets])
    rev = sp.csr_array((np.ones(len(rows)), (rows, cols)), shape=(n + 1, n + 1))
    order = csgraph.breadth_first_order(rev, n, directed=True, return_predecessors=False)
    mask = np.zeros(n + 1, dtype=bool)
    mask[order] = True
    return mask[:n]


@dataclass(frozen=True)
class AbsorptionTime:
    """Distribution of the time to absorption (a phase-type distribution).

    Attributes
    ----------
    times : ndarray
        Time grid in seconds.
    cdf : ndarray
        ``P(time to absorption <= t)`` at each grid time.
    mean, variance : float
        Mean (s) and variance (s^2).
    quantiles : dict of float to float
        Quantile level -> time in seconds.
    alpha : ndarray, shape (m,)
        Initial probabilities of the transient states (may sum to less than 1; the
        rest, ``atom``, starts absorbed).
    T : scipy.sparse.csr_array, shape (m, m)
        Sub-generator over the transient states (1/s).
    transient_states : ndarray of int
        Indices, in the source CTMC, of the rows/columns of ``T``.
    atom : float
        Probability of starting in an absorbing state (time zero).
    error_bound : float
        Bound on the absolute error of each CDF value from series truncation.
    """

    times: NDArray[np.float64]
    cdf: NDArray[np.float64]
    mean: float
    variance: float
    quantiles: dict[float, float]
    alpha: NDArray[np.float64]
    T: sp.csr_array
    transient_states: NDArray[np.intp]
    atom: float
    error_bound: float
    _survival: Any = field(repr=False, compare=False, default=None)

    def survival(self, t: ArrayLike) -> NDArray[np.float64]:
        """``P(time to absorption > t)`` at arbitrary times (seconds)."""
        return np.asarray(self._survival(_times(t)))

    def cdf_at(self, t: ArrayLike) -> NDArray[np.float64]:
        """``P(time to absorption <= t)`` at arbitrary times (seconds)."""
        return 1.0 - self.survival(t)

    def quantile(self, level: float) -> float:
        """The time (s) by which absorption has happened with probability ``level``."""
        return _quantile(self._survival, level, self.mean, self.atom)

    @property
    def std(self) -> float:
        """Standard deviation (s)."""
        return math.sqrt(max(self.variance, 0.0))


class _SurvivalSeries:
    """``alpha exp(T t) 1`` for any t, from the uniformised powers ``alpha P^k 1``.

    The scalar sequence is computed once, lazily extended, and every time point reuses
    it, so a CDF on a dense grid and root-finding for quantiles cost one pass.
    """

    def __init__(self, alpha: NDArray[np.float64], T: sp.csr_array, tol: float) -> None:
        self.tol = tol
        diag = -T.diagonal()
        self.q = float(diag.max()) * 1.02 if len(diag) else 1.0
        m = T.shape[0]
        self.Pt = (sp.identity(m, format="csr") + T / self.q).T.tocsr()
        self.v = alpha.copy()
        self.sums = [float(alpha.sum())]
        self.max_terms = 5_000_000

    def _extend(self, k: int) -> None:
        if k > self.max_terms:
            raise LimitExceededError("max_steps", self.max_terms, k, "uniformization products")
        while len(self.sums) <= k:
            self.v = self.Pt @ self.v
            self.sums.append(float(self.v.sum()))

    def __call__(self, t: NDArray[np.float64]) -> NDArray[np.float64]:
        out = np.empty(len(t))
        for i, ti in enumerate(t):
            left, right, weights, _ = _poisson_window(self.q * ti, self.tol)
            self._extend(right)
            out[i] = float(weights @ np.asarray(self.sums[left : right + 1]))
        return np.clip(out, 0.0, 1.0)


def _quantile(survival: Any, level: float, mean: float, atom: float) -> float:
    if not 0 < level < 1:
        raise SRNError(f"quantile level must lie in (0, 1), got {level}")
    if level <= atom:
        return 0.0
    target = 1.0 - level
    hi = max(mean, 1e-300)
    while survival(np.array([hi]))[0] > target:
        hi *= 2
    lo = 0.0
    return float(
        optimize.brentq(
            lambda x: survival(np.array([x]))[0] - target, lo, hi, xtol=1e-14 * hi, rtol=1e-12
        )
    )


def time_to_absorption(
    Q: Any,
    initial: ArrayLike,
    *,
    absorbing: ArrayLike | None = None,
    times: ArrayLike | None = None,
    quantiles: Sequence[float] = (0.5, 0.9, 0.99),
    grid_points: int = 101,
    tol: float = 1e-12,
) -> AbsorptionTime:
    """Distribution of the time until the chain enters an absorbing set.

    This is the tagged-customer method: make the customer's departure absorbing, start
    from the distribution seen at its arrival, and the time to absorption is its
    response time, a phase-type distribution ``(alpha, T)``.

    Parameters
    ----------
    Q : sparse matrix or ndarray, shape (n, n)
        Generator, rates in 1/s.
    initial : array, shape (n,)
        Initial distribution.
    absorbing : array of int or bool mask, optional
        The absorbing set; by default the states with no outgoing rate.
    times : array of float, optional
        Time grid (s) for the CDF; by default ``grid_points`` points from 0 to the
        99.9 % quantile.
    quantiles : sequence of float
        Levels to report.
    grid_points : int
        Size of the default grid.
    tol : float
        Truncation error allowed in each CDF value.

    Returns
    -------
    AbsorptionTime

    Raises
    ------
    AbsorptionError
        If there is no absorbing state, or some state reachable from the initial
        distribution cannot reach the absorbing set (the mean would be infinite).

    Examples
    --------
    Erlang-2 with rate 3: mean 2/3, variance 2/9.

    >>> import numpy as np
    >>> Q = np.array([[-3.0, 3.0, 0.0], [0.0, -3.0, 3.0], [0.0, 0.0, 0.0]])
    >>> r = time_to_absorption(Q, [1.0, 0.0, 0.0])
    >>> round(r.mean, 12), round(r.variance, 12)
    (0.666666666667, 0.222222222222)
    """
    Q = _as_generator(Q)
    n = Q.shape[0]
    p0 = _initial_vector(initial, n)
    if absorbing is None:
        absorbing_mask = np.asarray(Q.diagonal() == 0)
    else:
        a = np.asarray(absorbing)
        if a.dtype == bool:
            if a.shape != (n,):
                raise SRNError(f"absorbing mask needs {n} entries")
            absorbing_mask = a.copy()
        else:
            absorbing_mask = np.zeros(n, dtype=bool)
            if a.size and (a.min() < 0 or a.max() >= n):
                raise SRNError("absorbing state index out of range")
            absorbing_mask[a.astype(np.intp)] = True
    if not absorbing_mask.any():
        raise AbsorptionError("the chain has no absorbing state")
    adjacency = Q.copy()
    adjacency.setdiag(0)
    adjacency.eliminate_zeros()
    can_absorb = _reaching(adjacency, np.flatnonzero(absorbing_mask))
    reachable = _reachable_from(adjacency, np.flatnonzero(p0 > 0))
    stuck = reachable & ~can_absorb
    if np.any(stuck):
        raise AbsorptionError(
            f"absorption is not certain: {int(stuck.sum())} reachable state(s) cannot reach "
            f"the absorbing set (first: state {int(np.flatnonzero(stuck)[0])})"
        )
    keep = np.flatnonzero(~absorbing_mask & reachable)
    T = sp.csr_array(Q[keep][:, keep])
    alpha = p0[keep]
    atom = float(p0[absorbing_mask].sum())
    m = len(keep)
    if m == 0:
        mean = variance = 0.0
    else:
        ones = np.ones(m)
        if m <= _DENSE_MAX:
            lu = la.lu_factor(-T.toarray(), check_finite=False)
            u = la.lu_solve(lu, ones, check_finite=False)
            w = la.lu_solve(lu, u, check_finite=False)
        else:
            splu = spla.splu(sp.csc_array(-T))
            u = splu.solve(ones)
            w = splu.solve(u)
        mean = float(alpha @ u)
        variance = float(2.0 * alpha @ w - mean * mean)
    survival = _SurvivalSeries(alpha, T, tol) if m else (lambda t: np.zeros(len(t)))
    levels = {float(level): _quantile(survival, float(level), mean, atom) for level in quantiles}
    if times is None:
        t_max = _quantile(survival, 0.999, mean, atom) if m else 0.0
        grid = np.linspace(0.0, t_max, grid_points)
    else:
        grid = _times(times)
    cdf = 1.0 - survival(grid)
    return AbsorptionTime(
        times=grid,
        cdf=cdf,
        mean=mean,
        variance=variance,
        quantiles=levels,
        alpha=alpha,
        T=T,
        transient_states=keep,
        atom=atom,
        error_bound=tol,
        _survival=survival,
    )


def _reachable_from(adjacency: sp.csr_array, sources: NDArray[np.intp]) -> NDArray[np.bool_]:
    n = adjacency.shape[0]
    coo = adjacency.tocoo()
    rows = np.concatenate([coo.row, np.full(len(sources), n)])
    cols = np.concatenate([coo.col, sources])
    fwd = sp.csr_array((np.ones(len(rows)), (rows, cols)), shape=(n + 1, n + 1))
    order = csgraph.breadth_first_order(fwd, n, directed=True, return_predecessors=False)
    mask = np.zeros(n + 1, dtype=bool)
    mask[order] = True
    return mask[:n]
