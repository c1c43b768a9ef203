"""Transient and time-to-absorption solution of a CTMC generator.

The functions take a generator ``Q`` (rows sum to zero, as returned by
:meth:`ReachabilityGraph.generator`) and know nothing about nets, so they serve any
CTMC.  Each result reports how it was computed and how accurate it is.  The steady
state has its own module, :mod:`srn.stationary`.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import scipy.linalg as la
import scipy.sparse as sp
import scipy.sparse.csgraph as csgraph
import scipy.sparse.linalg as spla
from numpy.typing import ArrayLike, NDArray

from ._generator import DENSE_MAX, as_generator
from .errors import AbsorptionError, LimitExceededError, SRNError

__all__ = [
    "AbsorptionTime",
    "TransientSolution",
    "time_to_absorption",
    "transient",
]

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
    from scipy import special  # here: a quick answer that never needs it does not load it

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
    Q = as_generator(Q)
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
    from scipy import optimize  # here: SciPy's optimisers take a tenth of a second to load

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
    Q = as_generator(Q)
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
        if m <= DENSE_MAX:
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
