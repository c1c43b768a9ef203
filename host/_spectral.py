"""The interrupt service-time distribution of a reversible tagged chain, by spectra.

Detailed balance symmetrises the sub-generator T, so ``P(X > t) = sum_k c_k exp(lam_k t)``
with real ``lam_k`` from a symmetric eigen-decomposition: dense, tridiagonal for one
disk, or Lanczos for large multi-disk chains.  The CDF on any grid is then one
vectorised expression, and quantiles a few Newton steps.
"""

from __future__ import annotations

import math

import numpy as np
import scipy.linalg as la
import scipy.sparse as sp
from numpy.typing import NDArray

from srn import AbsorptionTime

from . import _shape
from ._shape import Shape

__all__ = [
    "SpectralDistribution",
    "SpectralSurvival",
    "Spectrum",
    "lanczos_solution",
    "spectral_quantiles",
    "spectral_solution",
]


class SpectralSurvival:
    """``P(X > t) = sum_k c_k exp(lam_k t)`` from the eigen-decomposition of T."""

    def __init__(self, lam: NDArray[np.float64], c: NDArray[np.float64]) -> None:
        self.lam = lam
        self.c = c

    def raw(self, t: NDArray[np.float64]) -> NDArray[np.float64]:
        return np.asarray(np.exp(np.multiply.outer(t, self.lam)) @ self.c)

    def __call__(self, t: NDArray[np.float64]) -> NDArray[np.float64]:
        t = np.asarray(t, dtype=float)
        # Nothing is absorbed at time 0 (the interrupt always needs service).
        return np.where(t == 0, 1.0, np.clip(self.raw(t), 0.0, 1.0))


class Spectrum:
    """The expansion ``P(X > t) = sum_k c_k exp(lam_k t)`` of a symmetrised T, computed
    when first called, with its a-posteriori error.

    It keeps what the eigen-decomposition needs -- S itself (dense), or its diagonal,
    off-diagonal and state order (tridiagonal) -- and the vectors of the expansion, so
    the bottleneck rate, which needs only the solved mean, never pays for it.  Plain
    arrays only (no closures, no compiled nets), so a result that holds one pickles.

    Parameters
    ----------
    left, right : ndarray
        ``alpha D^(-1/2)`` and ``D^(1/2) 1``.
    mean : float
        The mean solved with T (s): the expansion's mean is checked against it.
    dense : ndarray, optional
        S as a dense (nt, nt) matrix.
    tridiagonal : tuple of ndarray, optional
        ``(diagonal, off_diagonal, order)``: S in the states' order ``order``.
    computed : tuple, optional
        ``(survival, error)`` already found (Lanczos, which needs them to converge).
    """

    def __init__(
        self,
        left: NDArray[np.float64],
        right: NDArray[np.float64],
        mean: float,
        *,
        dense: NDArray[np.float64] | None = None,
        tridiagonal: tuple[NDArray[np.float64], NDArray[np.float64], NDArray[np.intp]]
        | None = None,
        computed: tuple[SpectralSurvival, float] | None = None,
    ) -> None:
        self.left, self.right, self.mean = left, right, mean
        self.dense, self.tridiagonal, self.computed = dense, tridiagonal, computed

    def __call__(self) -> tuple[SpectralSurvival, float]:
        """The survival function and its error bound (see :func:`spectral_solution`)."""
        if self.computed is not None:
            return self.computed
        if self.tridiagonal is not None:
            diagonal, off, order = self.tridiagonal
            lam, v_sorted = la.eigh_tridiagonal(diagonal, off, check_finite=False)
            V = np.empty_like(v_sorted)
            V[order] = v_sorted
        else:
            assert self.dense is not None
            lam, V = np.linalg.eigh(self.dense)
        c = (self.left @ V) * (self.right @ V)
        # A posteriori accuracy: the expansion must give S(0) = 1 and the solved mean.
        spectral_mean = float(c @ (-1.0 / lam))
        error = abs(float(c.sum()) - 1.0) + abs(spectral_mean - self.mean) / self.mean
        return SpectralSurvival(lam, c), error + 64 * float(np.finfo(float).eps)


class SpectralDistribution:
    """What :attr:`InterruptServiceTime.absorption` needs beyond the mean and variance
    of a spectral solution: the eigen-decomposition, the quantiles, the CDF on its grid
    and T as a sparse matrix.

    The bottleneck rate needs only the mean, so these are built on first access.
    """

    def __init__(
        self,
        shape: Shape,
        spectrum: Spectrum,
        mean: float,
        variance: float,
        grid: NDArray[np.float64] | None,
        levels: NDArray[np.float64],
        points: int,
        alpha: NDArray[np.float64],
        inner: NDArray[np.float64],
        out_rate: NDArray[np.float64],
    ) -> None:
        # The shape's index arrays, not the shape (which holds the compiled nets).
        self.csr = (shape.csr_order, shape.csr_indices, shape.csr_indptr)
        self.transient = shape.transient
        self.spectrum, self.mean, self.variance = spectrum, mean, variance
        self.grid, self.levels, self.points = grid, levels, points
        self.alpha, self.inner, self.out_rate = alpha, inner, out_rate

    def build(self) -> AbsorptionTime:
        """The full result: quantiles (safeguarded Newton), CDF on the grid, (alpha, T)."""
        survival, error = self.spectrum()
        # The default grid ends at the 99.9 % quantile, found with the others.
        found = spectral_quantiles(survival, np.append(self.levels, 0.999), self.mean)
        grid = np.linspace(0.0, found[-1], self.points) if self.grid is None else self.grid
        order, indices, indptr = self.csr
        nt = len(self.alpha)
        data = np.concatenate([self.inner, -self.out_rate])[order]
        T = sp.csr_array((data, indices, indptr), shape=(nt, nt))
        return AbsorptionTime(
            times=grid,
            cdf=1.0 - survival(grid),
            mean=self.mean,
            variance=self.variance,
            quantiles={float(lv): float(q) for lv, q in zip(self.levels, found[:-1], strict=True)},
            alpha=self.alpha,
            T=T,
            transient_states=self.transient,
            atom=0.0,
            error_bound=error,
            _survival=survival,
        )


def spectral_quantiles(
    survival: SpectralSurvival, levels: NDArray[np.float64], mean: float
) -> NDArray[np.float64]:
    """Times at which P(X <= t) reaches each level: safeguarded Newton, all levels at once.

    Newton runs on log P(X > t), which is close to linear in t beyond the bulk (the
    slowest mode dominates), starting from the exponential guess -mean ln(1 - level).
    The bracket starts at [0, mean / (1 - level)] (Markov's inequality); a step that
    leaves it is replaced by bisection.  Stops when the survival function is within
    1e-13 (relative) of its target or the step is below 1e-13 of the time.
    """
    target = 1.0 - levels
    log_target = np.log(target)
    lo = np.zeros_like(target)
    hi = mean / target
    x = np.minimum(-mean * log_target, hi)
    lam, c, c_lam = survival.lam, survival.c, survival.c * survival.lam
    for _ in range(100):
        e = np.exp(np.multiply.outer(x, lam))
        surv = e @ c
        f = surv - target
        lo = np.where(f > 0, x, lo)
        hi = np.where(f < 0, x, hi)
        with np.errstate(divide="ignore", invalid="ignore"):
            nxt = x - (np.log(surv) - log_target) * surv / (e @ c_lam)
        nxt = np.where((nxt > lo) & (nxt < hi), nxt, 0.5 * (lo + hi))
        done = (np.abs(f) <= 1e-13 * target) | (np.abs(nxt - x) <= 1e-13 * x)
        x = np.where(done, x, nxt)
        if done.all():
            break
    return x


def spectral_solution(
    shape: Shape,
    inner: NDArray[np.float64],
    out_rate: NDArray[np.float64],
    exit_rates: NDArray[np.float64],
    alpha: NDArray[np.float64],
    log_alpha: NDArray[np.float64],
    log_w: NDArray[np.float64],
) -> tuple[Spectrum, float, float, str] | None:
    """Mean and variance of (alpha, T), and its survival function through a symmetrised T.

    With D the detailed-balance weights, S = D^(1/2) T D^(-1/2) is symmetric (its
    off-diagonal entries are sqrt(r(i->j) r(j->i))), so S = V diag(lam) V' with
    orthogonal V and P(X > t) = sum_k (alpha D^(-1/2) v_k)(v_k' D^(1/2) 1) exp(lam_k t).
    Mean and variance come from solving with T itself, at once; the eigen-decomposition
    (the returned ``spectrum``) only when the distribution is asked for (the bottleneck
    rate needs the mean alone), and its error bound checks it against that solved mean.
    Large multi-disk chains use Lanczos (:func:`lanczos_solution`), computed here.
    """
    nt = len(alpha)
    rows, cols = shape.b_rows, shape.b_cols
    reverse = shape.balance_b.reverse
    assert reverse is not None
    sym = np.sqrt(inner * inner[reverse])
    with np.errstate(under="ignore"):
        left = np.exp(log_alpha - 0.5 * log_w)  # alpha D^(-1/2), from logs: no overflow
        right = np.exp(0.5 * log_w)  # D^(1/2) 1
    if nt > _shape.DENSE_MAX and not shape.tridiagonal:
        data = np.concatenate([sym, -out_rate])[shape.csr_order]
        S_sparse = sp.csr_array((data, shape.csr_indices, shape.csr_indptr), shape=(nt, nt))
        found = lanczos_solution(S_sparse, left, right, float(exit_rates.min()))
        if found is None:
            return None
        survival, mean, variance, method, error = found
        return Spectrum(left, right, mean, computed=(survival, error)), mean, variance, method
    if shape.tridiagonal:
        order = shape.order
        method = "spectral-tridiagonal"
        band = np.zeros((3, nt))  # -T in LAPACK band storage, states ordered by i
        band[0, 1:][shape.up_at] = -inner[shape.up]
        band[1] = out_rate[order]
        band[2, :-1][shape.down_at] = -inner[~shape.up]
        u = la.solve_banded((1, 1), band, np.ones(nt), check_finite=False)
        w = la.solve_banded((1, 1), band, u, check_finite=False)
        a = alpha[order]
        mean, second = float(a @ u), float(2.0 * a @ w)
        off = np.empty(nt - 1)
        off[shape.up_at] = sym[shape.up]
        spectrum = Spectrum(left, right, mean, tridiagonal=(-out_rate[order], off, order))
    else:
        flat = rows * nt + cols
        method = "spectral"
        minus_T = np.bincount(flat, weights=-inner, minlength=nt * nt).astype(float).reshape(nt, nt)
        minus_T.flat[:: nt + 1] = out_rate
        u = np.linalg.solve(minus_T, np.ones(nt))
        w = np.linalg.solve(minus_T, u)
        mean, second = float(alpha @ u), float(2.0 * alpha @ w)
        # astype: bincount returns int64 when there are no edges (I = 0), and the float
        # diagonal assigned next would then be truncated (41600/3 -> 13866).
        S = np.bincount(flat, weights=sym, minlength=nt * nt).astype(float).reshape(nt, nt)
        S.flat[:: nt + 1] = -out_rate
        spectrum = Spectrum(left, right, mean, dense=S)
    return spectrum, mean, second - mean * mean, method


def lanczos_solution(
    S: sp.csr_array, left: NDArray[np.float64], right: NDArray[np.float64], kill_min: float
) -> tuple[SpectralSurvival, float, float, str, float] | None:
    """``left' exp(S t) right`` for a large sparse symmetric S, by Lanczos.

    Lanczos from ``right`` gives S ~ Q H Q' with H tridiagonal, and
    ``left' exp(S t) right ~ |right| (Q' left)' U exp(theta t) U' e_1`` with
    H = U diag(theta) U': a sum of exponentials, the same form as the dense case.  Only
    the projections ``q_j . left`` are kept (no basis), so memory is O(n); finite
    precision Lanczos still converges for functions of S (Greenbaum 1989).  Every 8
    steps the survival on [0, ln(1e4) / kill_min] (beyond the 99.9 % quantile, since
    every state is left at rate >= kill_min), the mean and the second moment are
    compared with the previous check; 1e-13 agreement is convergence.  Returns None if
    that does not happen within the step budget (the caller then uses the engine).
    """
    n = S.shape[0]
    beta0 = float(np.linalg.norm(right))
    q = right / beta0
    q_prev = np.zeros(n)
    diag: list[float] = []
    off: list[float] = []
    proj: list[float] = []
    check_t = np.linspace(0.0, math.log(1e4) / kill_min, 65)
    previous: tuple[NDArray[np.float64], float, float] | None = None
    max_steps = min(3 * n, 3_000)
    beta = 0.0
    for k in range(max_steps):
        proj.append(float(q @ left))
        v = S @ q - beta * q_prev
        a_k = float(q @ v)
        v -= a_k * q
        diag.append(a_k)
        beta = float(np.linalg.norm(v))
        exhausted = beta <= 1e-14 * abs(a_k)
        if exhausted or (k + 1) % 8 == 0 or k + 1 == max_steps:
            theta, U = la.eigh_tridiagonal(np.array(diag), np.array(off), check_finite=False)
            c = beta0 * U[0] * (np.array(proj) @ U)
            survival = SpectralSurvival(theta, c)
            mean = float(c @ (-1.0 / theta))
            second = float(2.0 * (c @ theta**-2))
            current = (survival.raw(check_t), mean, second)
            if exhausted:
                return survival, mean, second - mean * mean, "spectral-lanczos", 1e-13
            if previous is not None:
                change = max(
                    float(np.max(np.abs(current[0] - previous[0]))),
                    abs(mean - previous[1]) / mean,
                    abs(second - previous[2]) / second,
                )
                if change <= 1e-13:
                    error = change + abs(float(c.sum()) - 1.0)
                    return survival, mean, second - mean * mean, "spectral-lanczos", error
            previous = current
        off.append(beta)
        q_prev, q = q, v / beta
    return None
