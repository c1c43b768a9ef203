"""Reward structures with rate and impulse parts, in steady state and accumulated over time.

A :class:`Reward` earns ``rate`` per second while the net sits in a marking (an
expression of the marking) and ``impulse[t]`` each time transition ``t`` fires.  Both
measures below are linear in the state distribution, which is why one function serves
the steady state, a transient distribution and an integrated one:

* :func:`reward_rate` -- the expected rate at which reward is earned, ``E[rate] + sum_t
  impulse_t * throughput_t``; under the steady state this is the long-run reward per second.
* :func:`accumulated_reward` -- the expected reward earned over ``[0, t]``, the same
  functional applied to the integrated distribution ``L(t) = int_0^t p(s) ds`` of
  :func:`cumulative_transient` (expected time in each state, and through the throughput of
  ``L(t)``, the expected number of firings of each transition).

Impulses of immediate transitions are credited through the engine's throughput of
immediate transitions, i.e. the timed flow that passes through them while vanishing
markings are eliminated.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import scipy.sparse as sp
from numpy.typing import ArrayLike, NDArray
from scipy import special

from .errors import LimitExceededError, NetDefinitionError, SRNError
from .reachability import ReachabilityGraph

__all__ = [
    "AccumulatedReward",
    "CumulativeSolution",
    "Reward",
    "accumulated_reward",
    "cumulative_transient",
    "reward_rate",
]


@dataclass(frozen=True)
class Reward:
    """A reward with a rate part and impulse parts.

    Attributes
    ----------
    rate : float, str or None
        Reward earned per second in a marking (an expression such as ``"#busy > 0"``),
        or None for no rate part.
    impulse : dict of str to float
        Reward earned each time the named transition fires (timed or immediate).

    Examples
    --------
    >>> Reward.from_json({"rate": "#up", "impulse": {"repair": -50.0}}).impulse
    {'repair': -50.0}
    >>> Reward.from_json("2 * #queue").rate
    '2 * #queue'
    """

    rate: float | str | None = None
    impulse: Mapping[str, float] = field(default_factory=dict)

    @classmethod
    def from_json(cls, value: Any, *, field: str = "reward") -> Reward:
        """Read the JSON form: an expression, a number, or ``{"rate": ..., "impulse": {...}}``.

        Parameters
        ----------
        value : str, float or dict
            The reward as posted.
        field : str
            Dotted location used in error messages.

        Raises
        ------
        NetDefinitionError
            If the object has other keys, or an impulse is not a finite number.
        """
        if isinstance(value, bool):
            raise NetDefinitionError("a reward must be an expression or an object", field=field)
        if isinstance(value, int | float | str):
            return cls(rate=value)
        if not isinstance(value, Mapping):
            raise NetDefinitionError("a reward must be an expression or an object", field=field)
        unknown = set(value) - {"rate", "impulse"}
        if unknown:
            raise NetDefinitionError(
                f"unknown reward field(s) {sorted(unknown)}; expected 'rate' and 'impulse'",
                field=field,
            )
        rate = value.get("rate")
        if rate is not None and (isinstance(rate, bool) or not isinstance(rate, int | float | str)):
            raise NetDefinitionError(
                "the rate part must be a number or an expression", field=f"{field}.rate"
            )
        impulses = value.get("impulse") or {}
        if not isinstance(impulses, Mapping):
            raise NetDefinitionError(
                "'impulse' must map transition names to rewards per firing",
                field=f"{field}.impulse",
            )
        checked: dict[str, float] = {}
        for name, amount in impulses.items():
            if (
                isinstance(amount, bool)
                or not isinstance(amount, int | float)
                or not math.isfinite(amount)
            ):
                raise NetDefinitionError(
                    f"the impulse of {name!r} must be a finite number, got {amount!r}",
                    field=f"{field}.impulse.{name}",
                )
            checked[str(name)] = float(amount)
        return cls(rate=rate, impulse=checked)

    def to_json(self) -> Any:
        """The JSON form read by :meth:`from_json` (a bare expression when impulse-free)."""
        if not self.impulse:
            return 0.0 if self.rate is None else self.rate
        out: dict[str, Any] = {"impulse": dict(self.impulse)}
        if self.rate is not None:
            out["rate"] = self.rate
        return out

    def check(self, graph: ReachabilityGraph, *, field: str = "reward") -> None:
        """Raise :class:`NetDefinitionError` if an impulse names a transition not in the net."""
        names = set(graph.net.transition_names)
        for name in self.impulse:
            if name not in names:
                raise NetDefinitionError(
                    f"impulse reward for unknown transition {name!r}",
                    field=f"{field}.impulse.{name}",
                )


def _as_reward(reward: Reward | float | str) -> Reward:
    return reward if isinstance(reward, Reward) else Reward(rate=reward)


def reward_rate(
    graph: ReachabilityGraph, reward: Reward | float | str, probabilities: ArrayLike
) -> Any:
    """Expected rate (reward per second) at which ``reward`` is earned.

    ``E[rate] + sum_t impulse_t * throughput_t`` under ``probabilities``.  The measure is
    linear in the distribution, so an integrated distribution (seconds spent in each
    state, from :func:`cumulative_transient`) gives the reward accumulated over the
    interval instead.

    Parameters
    ----------
    graph : ReachabilityGraph
        The net's reachability graph.
    reward : Reward, float or str
        The reward (a bare expression is a pure rate reward).
    probabilities : array, shape (n_states,) or (k, n_states)
        A distribution (steady state, transient) or a stack of them.

    Returns
    -------
    float or ndarray of shape (k,)
        Reward per second (or accumulated reward, for an integrated distribution).

    Raises
    ------
    NetDefinitionError
        If an impulse names a transition the net does not have.

    Examples
    --------
    A machine fails at rate 1/s and is repaired at rate 3/s; each repair costs 2:
    the up-fraction is 3/4 and repairs happen 3/4 times a second.

    >>> from srn import Net, timed, reachability_graph, steady_state
    >>> net = Net({"up": 1, "down": 0}, [
    ...     timed("fail", 1.0, inputs={"up": 1}, outputs={"down": 1}),
    ...     timed("repair", 3.0, inputs={"down": 1}, outputs={"up": 1})])
    >>> g = reachability_graph(net)
    >>> pi = steady_state(g.generator()).probabilities
    >>> round(float(reward_rate(g, Reward("#up", {"repair": -2.0}), pi)), 12)
    -0.75
    """
    r = _as_reward(reward)
    r.check(graph)
    pi = np.asarray(probabilities, dtype=float)
    value: Any = np.zeros(pi.shape[:-1]) if pi.ndim > 1 else 0.0
    if r.rate is not None:
        value = value + graph.expected_reward(r.rate, pi)
    if r.impulse:
        flows = graph.throughput(pi)
        for name, amount in r.impulse.items():
            value = value + amount * np.asarray(flows[name])
    return value if pi.ndim > 1 else float(value)


@dataclass(frozen=True)
class CumulativeSolution:
    """Expected time spent in each state over ``[0, t]``, for a list of times.

    Attributes
    ----------
    times : ndarray, shape (k,)
        Times in seconds.
    integrals : ndarray, shape (k, n_states)
        ``integrals[i, s]`` is the expected number of seconds spent in state ``s`` during
        ``[0, times[i]]``; each row sums to ``times[i]`` up to ``error_bound[i]``.
    error_bound : ndarray, shape (k,)
        Bound on the 1-norm error of each row (seconds) from truncating the series.
    steps : int
        Matrix-vector products used.
    """

    times: NDArray[np.float64]
    integrals: NDArray[np.float64]
    error_bound: NDArray[np.float64]
    steps: int


def _cumulative_weights(
    qt: float, q: float, tol_s: float, max_steps: int
) -> tuple[NDArray[np.float64], float]:
    """Weights ``P(N > k) / q`` of ``L(t) = sum_k v_k P(N > k) / q``, N ~ Poisson(qt).

    Also returns the dropped tail (seconds), a bound on the 1-norm error of ``L(t)``.

    The series is cut at the first K whose dropped tail ``sum_{k > K} P(N > k) / q``,
    computed directly (not as ``t`` minus the kept part, which would cancel), is at most
    ``tol_s`` seconds.
    """
    spread = math.sqrt(qt) + 1.0
    right = math.ceil(qt + 4.0 * spread + 10.0)
    while True:
        if right > max_steps:
            raise LimitExceededError("max_steps", max_steps, right, "uniformization products")
        tail_k = np.arange(right + 1, right + 1 + math.ceil(20.0 * spread + 50.0), dtype=float)
        dropped = float(special.pdtrc(tail_k, qt).sum()) / q
        if dropped <= tol_s:
            break
        right = math.ceil(right + 2.0 * spread + 10.0)
    k = np.arange(right + 1, dtype=float)
    return np.asarray(special.pdtrc(k, qt) / q), dropped


def cumulative_transient(
    Q: Any,
    times: ArrayLike,
    initial: ArrayLike,
    *,
    tol: float = 1e-12,
    max_steps: int = 2_000_000,
) -> CumulativeSolution:
    """Expected time in each state over ``[0, t]``: ``L(t) = int_0^t p0 exp(Q s) ds``.

    Uniformisation in its cumulative form: with ``P = I + Q/q`` and ``v_k = p0 P^k``,
    ``L(t) = (1/q) sum_k v_k P(N_qt > k)`` where ``N_qt`` is Poisson with mean ``q t``,
    because ``int_0^t e^{-qs} (qs)^k / k! ds = P(N_qt > k) / q``.  Every weight is
    positive, so there is no cancellation.

    Parameters
    ----------
    Q : sparse matrix or ndarray, shape (n, n)
        Generator, rates in 1/s.
    times : array of float
        Interval ends in seconds (each interval starts at 0).
    initial : array, shape (n,)
        Distribution at time 0.
    tol : float
        Truncation error allowed per time point, relative to the interval length.
    max_steps : int
        Matrix-vector products allowed.

    Returns
    -------
    CumulativeSolution

    Raises
    ------
    LimitExceededError
        If the series needs more than ``max_steps`` products.

    Examples
    --------
    A two-state chain leaving state 0 at rate 2: ``int_0^t e^{-2s} ds = (1 - e^{-2t})/2``.

    >>> import numpy as np
    >>> Q = np.array([[-2.0, 2.0], [0.0, 0.0]])
    >>> L = cumulative_transient(Q, [1.0], [1.0, 0.0]).integrals[0]
    >>> bool(abs(L[0] - (1 - np.exp(-2.0)) / 2) < 1e-12)
    True
    """
    Q = sp.csr_array(Q, dtype=float)
    n = Q.shape[0]
    if Q.ndim != 2 or Q.shape[1] != n or n == 0:
        raise SRNError(f"the generator must be a non-empty square matrix, got shape {Q.shape}")
    t = np.atleast_1d(np.asarray(times, dtype=float))
    if t.ndim != 1 or not np.all(np.isfinite(t)) or np.any(t < 0):
        raise SRNError("times must be a 1-D list of finite, non-negative seconds")
    p0 = np.asarray(initial, dtype=float)
    if p0.shape != (n,) or not np.all(np.isfinite(p0)) or np.any(p0 < 0):
        raise SRNError(f"the initial distribution needs {n} non-negative entries")
    if abs(p0.sum() - 1.0) > 1e-9:
        raise SRNError("the initial distribution must sum to 1")
    q = float(np.max(-Q.diagonal()))
    if q == 0.0:
        return CumulativeSolution(t, np.outer(t, p0), np.zeros(len(t)), 0)
    q *= 1.02  # as in transient(): keeps P's diagonal positive
    windows = [
        _cumulative_weights(q * ti, q, tol * ti, max_steps) if ti > 0 else (np.zeros(1), 0.0)
        for ti in t
    ]
    weights = [w for w, _ in windows]
    right = max(len(w) for w in weights) - 1
    W = np.zeros((len(t), right + 1))
    for i, w in enumerate(weights):
        W[i, : len(w)] = w
    Pt = (sp.identity(n, format="csr") + Q / q).T.tocsr()
    out = np.zeros((len(t), n))
    v = p0.copy()
    for k in range(right + 1):
        out += np.outer(W[:, k], v)
        if k < right:
            v = Pt @ v
    bound = np.array([dropped for _, dropped in windows])
    return CumulativeSolution(t, out, bound, right)


@dataclass(frozen=True)
class AccumulatedReward:
    """Expected reward earned over ``[0, t]``.

    Attributes
    ----------
    times : ndarray, shape (k,)
        Interval ends in seconds.
    values : ndarray, shape (k,)
        Expected accumulated reward (rate part integrated, plus impulse times the expected
        number of firings).
    error_bound : ndarray, shape (k,)
        Bound on the error of the integrated distribution (seconds, 1-norm); multiply by
        the largest absolute reward rate for a bound on ``values``.
    """

    times: NDArray[np.float64]
    values: NDArray[np.float64]
    error_bound: NDArray[np.float64]


def accumulated_reward(
    graph: ReachabilityGraph,
    reward: Reward | float | str,
    times: ArrayLike,
    *,
    initial: ArrayLike | None = None,
    tol: float = 1e-12,
) -> AccumulatedReward:
    """Expected reward earned over ``[0, t]`` for each of ``times``.

    Parameters
    ----------
    graph : ReachabilityGraph
        The net's reachability graph.
    reward : Reward, float or str
        The reward.
    times : array of float
        Interval ends in seconds.
    initial : array, shape (n_states,), optional
        Distribution at time 0; the graph's initial distribution by default.
    tol : float
        Truncation error allowed, relative to each interval length.

    Returns
    -------
    AccumulatedReward
    """
    r = _as_reward(reward)
    r.check(graph)
    p0 = graph.initial_distribution if initial is None else initial
    cumulative = cumulative_transient(graph.generator(), times, p0, tol=tol)
    values = np.atleast_1d(reward_rate(graph, r, cumulative.integrals))
    return AccumulatedReward(cumulative.times, np.asarray(values), cumulative.error_bound)
