"""The receive buffer drained by a server that the CPU scheduler takes away: a bulk-service
queue whose service rate is modulated by a Markov environment (a server with vacations).

The paper's M/M[N]/1/K queue serves at the average rate a processor-sharing CPU leaves
the receiver.  A real scheduler does not share that finely: it runs the receiver for a
time slice, then each competing task for a slice of its own, while datagrams keep
arriving.  A buffer that holds more than the average drain can need still overflows when
it cannot hold a whole vacation's worth of arrivals.  This module solves that queue
exactly, as a finite CTMC on (environment phase, datagrams in the buffer):

* datagrams arrive as a Poisson stream of rate ``lambda`` (1/s); an arrival that finds
  ``K`` datagrams is lost;
* the environment is an irreducible CTMC on ``M`` phases with generator ``E`` (1/s); in
  phase ``j`` the receiver completes wake-ups at rate ``mu_j`` (1/s, 0 while it is away)
  and each wake-up takes ``min(n, N)`` datagrams (the receiver drains up to N per
  wake-up, as ``blastrate receive`` does);
* the environment may move differently while the buffer is empty (the receiver asleep:
  ``idle_environment``), and a wake-up that takes fewer than N datagrams may cost less
  than a full one (``fixed_cost_fraction``);
* two schedulers for ``c`` competing CPU-bound tasks: the rotation
  (:func:`time_slice_environment`) alternates the receiver's slice (Erlang, mean ``s``)
  with a vacation of ``c`` slices (Erlang, mean ``c * s``) whatever the receiver's load;
  the lag account (:func:`lag_environment`) sends the receiver away for ``c`` slices only
  once it has run a slice beyond its share.  Backlogged, both give it the CPU a fraction
  ``1 / (1 + c)`` of the time, as under processor sharing, but in slices.

Two measures:

* :func:`modulated_loss` -- the stationary loss probability ``P(n = K)`` (PASTA);
* :func:`blast_loss` -- the expected number of datagrams a blast of ``n`` datagrams loses
  when it starts on an empty buffer: RBUDP's rounds are finite, the buffer absorbs the
  start of each, and a short resend round may lose nothing although the stationary loss
  is high.  It is ``lambda * (p_K * T + D)`` with ``T = n / lambda`` and
  ``D = int_0^inf (P(n_t = K) - p_K) dt`` from the Poisson equation ``Q h = p_K 1 - f``
  (exact as ``T`` grows; :func:`blast_loss_exact` integrates the transient directly).

References
----------
Neuts, *Matrix-Geometric Solutions in Stochastic Models* (1981), ch. 6 (queues in a
Markovian environment); Kemeny and Snell, *Finite Markov Chains* (1960), §4.3
(fundamental matrix and the deviation of a transient from its limit).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, NamedTuple

import numpy as np
from numpy.typing import ArrayLike, NDArray
from scipy.linalg import solve_banded

from ._validation import positive_integer, positive_scalar
from .errors import QueueParameterError

if TYPE_CHECKING:
    import scipy.sparse as sp

__all__ = [
    "MAX_MODULATED_STATES",
    "ModulatedQueue",
    "blast_loss",
    "blast_loss_exact",
    "blast_loss_terms",
    "lag_environment",
    "modulated_loss",
    "time_slice_environment",
]

#: Largest chain (phases x (K + 1)) the solver builds; its banded LU costs about the
#: states times the band's width squared.
MAX_MODULATED_STATES = 400_000


def _float_array(value: ArrayLike, name: str) -> NDArray[np.float64]:
    """``value`` as a float array, or a :class:`QueueParameterError` naming ``name``."""
    try:
        return np.asarray(value, dtype=np.float64)
    except (TypeError, ValueError):
        raise QueueParameterError(name, "must be an array of numbers") from None


def _generator(matrix: ArrayLike, name: str, size: int | None = None) -> NDArray[np.float64]:
    """``matrix`` as a float generator: square, finite, off-diagonal >= 0, rows summing to 0."""
    env = _float_array(matrix, name)
    if env.ndim != 2 or env.shape[0] != env.shape[1] or env.shape[0] < 1:
        raise QueueParameterError(name, "must be a square matrix")
    if size is not None and env.shape[0] != size:
        raise QueueParameterError(name, f"must have one row per phase ({size})")
    if not np.all(np.isfinite(env)):
        raise QueueParameterError(name, "rates must be finite")
    off = env - np.diag(np.diag(env))
    if np.any(off < 0) or not np.allclose(
        env.sum(axis=1), 0.0, atol=1e-9 * max(1.0, np.abs(env).max())
    ):
        raise QueueParameterError(name, "must be a generator: off-diagonal >= 0, rows summing to 0")
    return env


@dataclass(frozen=True)
class ModulatedQueue:
    """A bulk-service queue in a Markov environment, ready to solve at many arrival rates.

    Parameters
    ----------
    environment : ndarray, shape (M, M)
        Generator of the environment (1/s): rows sum to 0, off-diagonal >= 0, irreducible.
    service_rates : ndarray, shape (M,)
        Wake-up completion rate in each phase (1/s), >= 0, not all 0.
    buffer_packets : int
        K, datagrams the buffer holds (>= 1).
    batch : int
        N, most datagrams a wake-up takes (>= 1).
    idle_holds : bool, default False
        The environment leaves a serving phase (``service_rates > 0``) only while the
        buffer holds something: the receiver's slice runs down only while it works.  An
        idle receiver sleeps, and a scheduler that keeps a sleeper's lag (CFS, EEVDF) gives
        it the CPU back when it wakes; its competitors use the time meanwhile, and it is
        not sent away for their slices.  Off, the environment runs regardless (a server
        with vacations independent of the queue).
    backlogged_rates : ndarray, shape (M,), optional
        Wake-up completion rate in each phase while a full batch already waits (levels
        >= N), 1/s.  A receiver that finds more than it takes goes on without sleeping,
        so it does not pay for being put to sleep and woken; below N it drains the
        buffer and sleeps.  Positive exactly where ``service_rates`` is.  Default:
        ``service_rates`` at every level.
    idle_environment : ndarray, shape (M, M), optional
        Generator of the environment while the buffer is empty (the receiver asleep), 1/s;
        ``environment`` governs the other levels.  A scheduler that tracks a task's lag
        moves differently while the task sleeps (:func:`lag_environment`).  Exclusive
        with ``idle_holds``, which is the special case of serving phases held still.
        Default: ``environment``.
    fixed_cost_fraction : float, default 1
        f, the part of a full wake-up's time (one that takes N datagrams) that does not
        depend on how many datagrams it takes: a wake-up that takes n < N costs
        ``f + (1 - f) n / N`` of a full one, so it completes at ``service_rates / (f +
        (1 - f) n / N)``.  1 (the paper's M/M[N]/1/K): every wake-up takes as long.
    start : ndarray, shape (M,), optional
        The environment's phase distribution when a blast starts on an empty buffer, after
        a long idle spell.  Default: as :meth:`empty_start` describes.
    """

    environment: NDArray[np.float64]
    service_rates: NDArray[np.float64]
    buffer_packets: int
    batch: int
    idle_holds: bool = False
    backlogged_rates: NDArray[np.float64] | None = None
    idle_environment: NDArray[np.float64] | None = None
    fixed_cost_fraction: float = 1.0
    start: NDArray[np.float64] | None = None

    def __post_init__(self) -> None:
        env = _generator(self.environment, "environment")
        rates = np.asarray(self.service_rates, dtype=np.float64)
        if rates.shape != (env.shape[0],):
            raise QueueParameterError(
                "service_rates", f"must have one rate per phase ({env.shape[0]})"
            )
        if not np.all(np.isfinite(rates)):
            raise QueueParameterError("service_rates", "rates must be finite")
        if np.any(rates < 0) or not np.any(rates > 0):
            raise QueueParameterError("service_rates", "must be >= 0 and not all 0")
        K = positive_integer(self.buffer_packets, "buffer_packets")
        N = positive_integer(self.batch, "batch")
        if env.shape[0] * (K + 1) > MAX_MODULATED_STATES:
            raise QueueParameterError(
                "buffer_packets",
                f"{env.shape[0]} phases x {K + 1} levels exceed the limit "
                f"max_modulated_states={MAX_MODULATED_STATES}",
            )
        if self.backlogged_rates is None:
            backlogged = rates
        else:
            backlogged = np.asarray(self.backlogged_rates, dtype=np.float64)
            if backlogged.shape != rates.shape or not np.all(np.isfinite(backlogged)):
                raise QueueParameterError(
                    "backlogged_rates", f"must have one finite rate per phase ({rates.size})"
                )
            if np.any(backlogged < 0) or np.any((backlogged > 0) != (rates > 0)):
                raise QueueParameterError(
                    "backlogged_rates", "must be > 0 exactly where service_rates is, else 0"
                )
        idle = None
        if self.idle_environment is not None:
            if self.idle_holds:
                raise QueueParameterError(
                    "idle_environment", "give idle_environment or idle_holds, not both"
                )
            idle = _generator(self.idle_environment, "idle_environment", env.shape[0])
        f = self.fixed_cost_fraction
        if isinstance(f, bool) or not isinstance(f, int | float | np.floating | np.integer):
            f = np.nan  # a bool, string, array or None is no fraction
        f = float(f)
        if not (np.isfinite(f) and 0.0 <= f <= 1.0):
            raise QueueParameterError(
                "fixed_cost_fraction",
                f"must be a number in [0, 1], got {self.fixed_cost_fraction!r}"[:200],
            )
        start = None
        if self.start is not None:
            start = _float_array(self.start, "start")
            if (
                start.shape != rates.shape
                or not np.all(np.isfinite(start))
                or np.any(start < 0)
                or abs(start.sum() - 1.0) > 1e-9
            ):
                raise QueueParameterError(
                    "start",
                    f"must be a probability vector (summing to 1 within 1e-9) with one entry "
                    f"per phase ({rates.size})",
                )
            start = start / start.sum()
        object.__setattr__(self, "idle_environment", idle)
        object.__setattr__(self, "fixed_cost_fraction", f)
        object.__setattr__(self, "start", start)
        object.__setattr__(self, "environment", env)
        object.__setattr__(self, "service_rates", rates)
        object.__setattr__(self, "backlogged_rates", backlogged)
        object.__setattr__(self, "buffer_packets", K)
        object.__setattr__(self, "batch", N)
        object.__setattr__(self, "idle_holds", bool(self.idle_holds))

    @property
    def phases(self) -> int:
        """M, the number of environment phases."""
        return int(self.environment.shape[0])

    def phase_distribution(self) -> NDArray[np.float64]:
        """The environment's stationary distribution (the share of time in each phase)."""
        env = self.environment
        m = env.shape[0]
        a = env.T.copy()
        a[m - 1, :] = 1.0  # normalisation in place of one balance equation (M is small)
        b = np.zeros(m)
        b[m - 1] = 1.0
        pi = np.clip(np.linalg.solve(a, b), 0.0, None)
        return pi / pi.sum()

    def mean_capacity(self) -> float:
        """Long-run datagrams per second the receiver can take when always backlogged."""
        assert self.backlogged_rates is not None  # filled in by __post_init__
        return float(self.phase_distribution() @ self.backlogged_rates) * self.batch

    def generator(self, arrival_rate: float) -> sp.csc_matrix:
        """The CTMC generator (1/s), states ordered level-major: ``n * M + j``.

        Level-major keeps the matrix banded (bandwidth about ``M * (N + 1)``), so the
        banded LU of the solves below fills in only inside the band.
        """
        # scipy.sparse (about 0.1 s to import) only where a sparse matrix is asked for: the
        # solves below take the entries straight into banded storage.
        import scipy.sparse as sp

        entries = self._entries(positive_scalar(arrival_rate, "arrival_rate"))
        return sp.csc_matrix(
            (entries.vals, (entries.rows, entries.cols)), shape=(entries.size, entries.size)
        )

    def _entries(self, lam: float) -> _Entries:
        """The generator's nonzero entries (duplicates to be summed), from index arrays.

        The solves below take them straight into LAPACK's banded storage: through sparse
        matrices (Kronecker products, then transposes and slices), the bookkeeping cost
        most of a time-slice answer, one generator per rate.
        """
        K, N, M = self.buffer_packets, self.batch, self.phases
        assert self.backlogged_rates is not None  # filled in by __post_init__
        levels = np.arange(K + 1)
        # The environment's moves: every level moves by E, except that an empty buffer
        # moves by the idle environment where there is one.
        idle = self.idle_environment
        if self.idle_holds:
            # At level 0 the serving phases hold still; every other level moves as usual.
            idle = self.environment * (self.service_rates <= 0)[:, None]
        env_rows, env_cols = np.nonzero(self.environment)
        env_vals = self.environment[env_rows, env_cols]
        first = 0 if idle is None else 1
        moving = levels[first:, None] * M
        rows = [(moving + env_rows).ravel()]
        cols = [(moving + env_cols).ravel()]
        vals = [np.broadcast_to(env_vals, moving.shape[:1] + env_vals.shape).ravel()]
        if idle is not None:
            idle_rows, idle_cols = np.nonzero(idle)
            rows.append(idle_rows)
            cols.append(idle_cols)
            vals.append(idle[idle_rows, idle_cols])
        phase = np.arange(M)
        # Arrivals: level n to n + 1 below K, in every phase.
        below = levels[:-1, None] * M + phase
        rows.append(below.ravel())
        cols.append((below + M).ravel())
        vals.append(np.full(below.size, lam))
        # A wake-up at level n >= 1 takes min(n, N) datagrams: at backlogged_rates from
        # level N, below it at service_rates, where taking n < N datagrams costs
        # f + (1 - f) n / N of a full wake-up.
        busy = levels[1:]
        f = self.fixed_cost_fraction
        partial_speed = 1.0 / (f + (1.0 - f) * busy / N)
        serve = np.where(
            (busy >= N)[:, None],
            self.backlogged_rates[None, :],
            partial_speed[:, None] * self.service_rates[None, :],
        )
        source = busy[:, None] * M + phase
        rows.append(source.ravel())
        cols.append(((busy - np.minimum(busy, N))[:, None] * M + phase).ravel())
        vals.append(serve.ravel())
        # Each state's outflow on the diagonal (the environment's is already in E).
        out = np.zeros((K + 1, M))
        out[:-1] += lam
        out[1:] += serve
        size = (K + 1) * M
        rows.append(np.arange(size))
        cols.append(np.arange(size))
        vals.append(-out.ravel())
        r, c, v = np.concatenate(rows), np.concatenate(cols), np.concatenate(vals)
        nonzero = v != 0.0  # a zero would only widen the band
        return _Entries(r[nonzero], c[nonzero], v[nonzero], size)

    def anchor(self, arrival_rate: float) -> int:
        """A likely state to anchor the stationary solve: empty below capacity, else full.

        The empty anchor is in a serving phase whenever the environment may hold still at
        level 0 (``idle_holds`` or an ``idle_environment``): only service empties the
        buffer, so an empty buffer in a phase that does not serve may be unreachable (the
        lag account's vacations), and anchoring there would solve for the wrong chain.
        Among the serving phases, the likeliest start.
        """
        if arrival_rate < self.mean_capacity():
            serving = np.flatnonzero(self.service_rates > 0)
            if self.start is not None and self.start[serving].sum() > 0:
                return int(serving[np.argmax(self.start[serving])])
            held = self.idle_holds or self.idle_environment is not None
            return int(serving[0]) if held else 0
        return int(self.full_states()[0])

    def full_states(self) -> NDArray[np.intp]:
        """Indices of the states with a full buffer (one per phase)."""
        return self.buffer_packets * self.phases + np.arange(self.phases)

    def empty_start(self) -> NDArray[np.float64]:
        """The start of a blast: empty buffer, the environment in ``start`` where given
        (the lag account: a full account, after a long idle spell); else with
        ``idle_holds`` in one of the serving phases (the others have run out while the
        receiver slept), each alike; else in its stationary phase."""
        x = np.zeros(self.phases * (self.buffer_packets + 1))
        if self.start is not None:
            x[: self.phases] = self.start
        elif self.idle_holds:
            serving = (self.service_rates > 0).astype(float)
            x[: self.phases] = serving / serving.sum()
        else:
            x[: self.phases] = self.phase_distribution()
        return x


def _scheduler_inputs(
    competitors: float, slice_s: float, service_rate: float, stages: int
) -> tuple[float, float, float, int]:
    """The checked inputs of a scheduler environment: c, s, mu and the stages."""
    c = float(competitors)
    if not (np.isfinite(c) and c >= 0):
        raise QueueParameterError("competitors", f"must be a finite number >= 0, got {c}")
    return (
        c,
        positive_scalar(slice_s, "slice_s"),
        positive_scalar(service_rate, "service_rate"),
        positive_integer(stages, "stages"),
    )


def time_slice_environment(
    competitors: float,
    slice_s: float,
    service_rate: float,
    *,
    stages: int = 3,
) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    """The scheduler as an environment: the receiver's slice, then ``c`` others' slices.

    Parameters
    ----------
    competitors : float
        c, CPU-bound tasks competing for the receiver's CPU (>= 0; a fraction is the
        average over several CPUs). 0 gives a receiver that is never away.
    slice_s : float
        s, the scheduler's time slice (s), > 0: how long a task runs before the next.
    service_rate : float
        Wake-up completion rate while the receiver runs (1/s), > 0.
    stages : int, default 3
        Erlang stages of the slice and of the vacation: both are nearly constant, and an
        exponential one would give vacations a tail no scheduler has (3 stages: a
        coefficient of variation of 0.58, and a chain small enough to solve at every
        rate of a search).

    Returns
    -------
    environment : ndarray
        Generator: ``stages`` phases of the receiver's slice (rate ``stages / s`` each),
        then ``stages`` phases of the vacation (mean ``c * s``).
    service_rates : ndarray
        ``service_rate`` in the receiver's phases, 0 in the vacation's.
    """
    c, s, mu, k = _scheduler_inputs(competitors, slice_s, service_rate, stages)
    if c == 0:
        return np.zeros((1, 1)), np.array([mu])
    off_stages = k
    on_rate = k / s
    off_rate = off_stages / (c * s)  # mean vacation c * s over all its stages
    M = k + off_stages
    rates = np.full(M, off_rate)
    rates[:k] = on_rate
    env = np.zeros((M, M))
    idx = np.arange(M)
    env[idx, (idx + 1) % M] = rates  # a cycle: slice stages, then vacation stages
    env[idx, idx] = -rates
    service = np.zeros(M)
    service[:k] = mu
    return env, service


def lag_environment(
    competitors: float,
    slice_s: float,
    service_rate: float,
    *,
    stages: int = 3,
) -> tuple[NDArray[np.float64], NDArray[np.float64], NDArray[np.float64], NDArray[np.float64]]:
    """The scheduler as a lag account: the receiver waits for the others only once it is ahead.

    A fair scheduler (CFS, EEVDF) tracks each task's *lag*: the CPU time its share
    ``1 / (1 + c)`` entitled it to, minus what it got.  A task with non-negative lag is
    eligible and runs as soon as it wakes; one that has run a whole slice ``s`` beyond its
    entitlement waits while the ``c`` others run theirs.  Traced on this kernel
    (``benchmarks/slice_trace.py --rate``), a receiver that needs less than its share is
    woken in microseconds and is almost never preempted; one that needs more gets slices
    and vacations of ``c * s`` (:func:`time_slice_environment`).  This environment holds
    both regimes as a fluid account of the lag, in ``stages`` steps:

    * while the receiver runs, its credit runs down: one step per ``s / stages`` of
      running (a full account lasts one slice);
    * when it is spent, the receiver waits a vacation of ``c`` slices (``stages``
      Erlang stages of mean ``c * s``), after which the account is full again (the
      others' ``c`` slices entitle it to ``c * s / (1 + c)``, a slice's overdraft);
    * while it sleeps, its credit comes back at the rate its share accrues: one step per
      ``c * s / stages``.  (EEVDF keeps a sleeper's lag and burns its debt off while it
      sleeps; the fluid account is the same on the average.)

    A backlogged receiver alternates a slice with a vacation of ``c`` slices, exactly as
    in :func:`time_slice_environment`, and gets the share ``1 / (1 + c)``.

    Parameters
    ----------
    competitors : float
        c, CPU-bound tasks competing for the receiver's CPU (>= 0). 0: never away.
    slice_s : float
        s, the scheduler's time slice (s), > 0.
    service_rate : float
        Wake-up completion rate while the receiver runs (1/s), > 0.
    stages : int, default 3
        Steps of the account and Erlang stages of the vacation.

    Returns
    -------
    environment : ndarray
        Generator while the receiver has datagrams (1/s): ``stages`` credit phases (phase
        0 a full account), then ``stages`` vacation phases.
    idle_environment : ndarray
        Generator while the buffer is empty: the credit phases step back up to phase 0.
    service_rates : ndarray
        ``service_rate`` in the credit phases, 0 in the vacation's.
    start : ndarray
        A full account (phase 0): where a blast after a long idle spell starts.
    """
    c, s, mu, k = _scheduler_inputs(competitors, slice_s, service_rate, stages)
    if c == 0:
        return np.zeros((1, 1)), np.zeros((1, 1)), np.array([mu]), np.ones(1)
    M = 2 * k
    idx = np.arange(M)
    busy = np.zeros((M, M))
    forward = np.r_[np.full(k, k / s), np.full(k, k / (c * s))]
    busy[idx, (idx + 1) % M] = forward  # credit steps, vacation stages, back to full
    busy[idx, idx] = -forward
    idle = np.zeros((M, M))
    back = np.arange(1, k)
    idle[back, back - 1] = k / (c * s)  # a sleeper's account fills back up
    idle[back, back] = -k / (c * s)
    vac = np.arange(k, M)
    idle[vac, :] = busy[vac, :]  # a vacation runs out whether or not datagrams wait
    service = np.r_[np.full(k, mu), np.zeros(k)]
    start = np.zeros(M)
    start[0] = 1.0
    return busy, idle, service, start


class _Entries(NamedTuple):
    """A square matrix's nonzero entries (duplicates to be summed) and its order."""

    rows: NDArray[np.intp]
    cols: NDArray[np.intp]
    vals: NDArray[np.float64]
    size: int

    def without(self, state: int) -> _Entries:
        """The matrix with row and column ``state`` removed (later indices move up)."""
        keep = (self.rows != state) & (self.cols != state)
        rows, cols = self.rows[keep], self.cols[keep]
        return _Entries(
            rows - (rows > state), cols - (cols > state), self.vals[keep], self.size - 1
        )

    def transposed(self) -> _Entries:
        return _Entries(self.cols, self.rows, self.vals, self.size)


def _banded_solve(a: _Entries, b: NDArray[np.float64]) -> NDArray[np.float64]:
    """Solve ``a x = b`` for a banded ``a`` with LAPACK's banded LU (gbsv)."""
    offsets = a.cols - a.rows
    lower = int(max(0, -offsets.min())) if offsets.size else 0
    upper = int(max(0, offsets.max())) if offsets.size else 0
    ab = np.zeros((lower + upper + 1, a.size))
    np.add.at(ab, (upper - offsets, a.cols), a.vals)
    return solve_banded((lower, upper), ab, b, check_finite=False)


def _stationary(q: _Entries, anchor: int = 0) -> NDArray[np.float64]:
    """pi with pi Q = 0, sum pi = 1, for an irreducible generator (given by its entries).

    Fixes ``pi[anchor] = 1`` and solves the other balance equations, which stay banded
    in the level-major order (a normalisation row would not).  The anchor should be a
    likely state, so that no other is 1e300 times likelier.
    """
    n = q.size
    if n == 1:
        return np.ones(1)
    # The balance equations Q^T pi = 0 without the anchor's: the anchor's row of Q moves
    # to the right-hand side.
    from_anchor = (q.rows == anchor) & (q.cols != anchor)
    b = np.zeros(n)
    np.add.at(b, q.cols[from_anchor], -q.vals[from_anchor])
    rest = _banded_solve(q.transposed().without(anchor), np.delete(b, anchor))
    pi = np.empty(n)
    pi[anchor] = 1.0
    pi[np.arange(n) != anchor] = np.clip(rest, 0.0, None)
    total = pi.sum()
    if not np.isfinite(total):
        raise QueueParameterError("arrival_rate", "the chain is too stiff to solve in float64")
    return pi / total


def _check_rates(arrival_rates: ArrayLike) -> NDArray[np.float64]:
    lam = np.atleast_1d(np.asarray(arrival_rates, dtype=np.float64))
    if lam.ndim != 1 or lam.size == 0 or not np.all(np.isfinite(lam)) or np.any(lam <= 0):
        raise QueueParameterError("arrival_rates", "must be finite and > 0 (1/s)")
    return lam


def modulated_loss(queue: ModulatedQueue, arrival_rates: ArrayLike) -> NDArray[np.float64]:
    """Stationary loss probability ``P(n = K)`` at each arrival rate (dimensionless).

    Parameters
    ----------
    queue : ModulatedQueue
    arrival_rates : array_like
        lambda, datagrams per second, > 0.

    Returns
    -------
    ndarray
        One probability per rate.
    """
    lam = _check_rates(arrival_rates)
    full = queue.full_states()
    return np.array([_stationary(queue._entries(x), queue.anchor(x))[full].sum() for x in lam])


def blast_loss(
    queue: ModulatedQueue, arrival_rates: ArrayLike, packets: ArrayLike
) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    """Expected datagrams lost by a blast that starts on an empty buffer.

    Parameters
    ----------
    queue : ModulatedQueue
    arrival_rates : array_like
        lambda, the blast's datagram rate (1/s), > 0, shape (R,).
    packets : array_like
        Datagrams in the blast, >= 0; shape (R,) or (R, B) for B blast sizes per rate.

    Returns
    -------
    lost : ndarray
        Expected datagrams lost, shape of ``packets`` broadcast to (R, ...): the
        asymptote ``lambda * (p_K * T + D)``, clipped to [0, packets].
    stationary : ndarray, shape (R,)
        The stationary loss probability p_K at each rate.
    """
    lam = _check_rates(arrival_rates)
    n = np.asarray(packets, dtype=np.float64)
    if n.ndim == 1:
        n = n[:, None]
    if n.shape[0] != lam.size or np.any(n < 0) or not np.all(np.isfinite(n)):
        raise QueueParameterError("packets", "must be finite, >= 0, one row per arrival rate")
    p_k, deviation, _ = blast_loss_terms(queue, lam)
    lost = lam[:, None] * (p_k[:, None] * (n / lam[:, None]) + deviation[:, None])
    lost = np.clip(lost, 0.0, n)
    return (lost[:, 0] if np.ndim(packets) == 1 else lost), p_k


def blast_loss_terms(
    queue: ModulatedQueue, arrival_rates: ArrayLike
) -> tuple[NDArray[np.float64], NDArray[np.float64], NDArray[np.float64]]:
    """The numbers per rate from which every blast's loss follows.

    Parameters
    ----------
    queue : ModulatedQueue
    arrival_rates : array_like
        lambda (1/s), > 0.

    Returns
    -------
    stationary : ndarray
        p_K, the stationary loss probability.
    deviation_s : ndarray
        D = int_0^inf (P(n_t = K) - p_K) dt from an empty buffer (s): a blast of n
        datagrams loses about ``clip(p_K n + lambda D, 0, n)``.
    mean_level : ndarray
        Stationary mean number of datagrams in the buffer: what a long blast leaves for
        the receiver to drain after its last datagram.
    """
    lam = _check_rates(arrival_rates)
    full = queue.full_states()
    start = queue.empty_start()
    p_k = np.empty(lam.size)
    deviation = np.empty(lam.size)
    mean_level = np.empty(lam.size)
    levels = np.repeat(np.arange(queue.buffer_packets + 1), queue.phases)
    for i, x in enumerate(lam):  # one banded factorisation per rate, never per state
        q = queue._entries(float(x))
        pi = _stationary(q, queue.anchor(x))
        p_k[i] = pi[full].sum()
        deviation[i] = _deviation(q, pi, full, p_k[i], start)
        mean_level[i] = pi @ levels
    return p_k, deviation, mean_level


def _deviation(
    q: _Entries,
    pi: NDArray[np.float64],
    full: NDArray[np.intp],
    p_k: float,
    start: NDArray[np.float64],
) -> float:
    """``int_0^inf (P_start(n_t = K) - p_K) dt`` (s) from the Poisson equation."""
    size = q.size
    g = np.full(size, p_k)
    g[full] -= 1.0
    # Q h = g has solutions h + const (pi g = 0): fix h at the likeliest state and drop
    # its equation, which the others imply.  h(x) - h(fixed) is then the mean of
    # int (1{full} - p_K) dt until the chain reaches the fixed state, small from every
    # likely state.  Fixed at a full buffer instead (rarely reached below capacity), h
    # held hitting times of order 1/p_K, and start @ h - pi @ h cancelled them: the
    # system was singular to working precision at K = 128, I = 1, C = 2, 50 ms.
    fixed = int(np.argmax(pi))
    h = np.zeros(size)
    h[np.arange(size) != fixed] = _banded_solve(q.without(fixed), np.delete(g, fixed))
    return float(start @ h - pi @ h)


def blast_loss_exact(queue: ModulatedQueue, arrival_rate: float, packets: float) -> float:
    """Expected datagrams a blast loses, from the transient itself (a second method).

    ``lambda * int_0^T P(n_t = K) dt`` with ``T = packets / lambda``, by the
    matrix exponential of the generator augmented with an accumulator of the full-buffer
    time (scipy's ``expm_multiply``).  Costs grow with ``T`` times the largest rate:
    for tests and short blasts.
    """
    lam = positive_scalar(arrival_rate, "arrival_rate")
    n = float(packets)
    if not (np.isfinite(n) and n >= 0):
        raise QueueParameterError("packets", f"must be finite and >= 0, got {packets}")
    q = queue.generator(lam)
    size = q.shape[0]
    f = np.zeros(size)
    f[queue.full_states()] = 1.0
    # d/dt [x, a] = [x Q, x f]: the row vector's last entry accumulates P(full) dt.
    import scipy.sparse as sp
    from scipy.sparse.linalg import expm_multiply

    aug = sp.bmat([[q, sp.csc_matrix(f[:, None])], [None, sp.csc_matrix((1, 1))]])
    x0 = np.append(queue.empty_start(), 0.0)
    xt = expm_multiply(sp.csc_matrix(aug).T, x0, start=0.0, stop=n / lam, num=2, endpoint=True)[-1]
    return float(lam * xt[-1])
