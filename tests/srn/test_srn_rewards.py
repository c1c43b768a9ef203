"""Rate and impulse rewards, in steady state and accumulated over [0, t].

Every expected value is derived by hand in the test's docstring from the CTMC of the net;
the tolerances are those of the solvers (GTH steady state ~1e-15 relative, uniformisation
truncation 1e-12 relative to t).
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import srn
from srn import Net, Reward, immediate, timed


def _machine(lam: float, mu: float) -> srn.ReachabilityGraph:
    return srn.reachability_graph(
        Net(
            {"up": 1, "down": 0},
            [
                timed("fail", lam, inputs={"up": 1}, outputs={"down": 1}),
                timed("repair", mu, inputs={"down": 1}, outputs={"up": 1}),
            ],
        )
    )


def test_two_state_machine_steady_state_rate_plus_impulse() -> None:
    """Up/down machine, failure rate lam, repair rate mu, repair cost c, revenue 1/s when up.

    Derivation: the CTMC has two states; balance lam P(up) = mu P(down) gives
    P(up) = mu / (lam + mu).  Repairs fire at rate mu P(down) = lam mu / (lam + mu).
    Reward rate = P(up) - c * lam mu / (lam + mu) = mu (1 - c lam) / (lam + mu).
    With lam = 0.5, mu = 2, c = 3: 2 * (1 - 1.5) / 2.5 = -0.4.
    """
    lam, mu, c = 0.5, 2.0, 3.0
    g = _machine(lam, mu)
    pi = srn.steady_state(g.generator()).probabilities
    value = srn.reward_rate(g, Reward("#up", {"repair": -c}), pi)
    assert value == pytest.approx(mu * (1 - c * lam) / (lam + mu), rel=1e-13)
    assert value == pytest.approx(-0.4, rel=1e-13)
    # Impulse only: repairs per second.
    assert srn.reward_rate(g, Reward(impulse={"repair": 1.0}), pi) == pytest.approx(
        lam * mu / (lam + mu), rel=1e-13
    )


def test_two_state_machine_accumulated_reward() -> None:
    """Accumulated reward over [0, t] from 'up', for the machine above.

    Derivation: with s = lam + mu, P(down, u) = lam/s (1 - e^{-s u}) from up, so
    D(t) = int_0^t P(down) = lam/s t - lam/s^2 (1 - e^{-s t}) and U(t) = t - D(t).
    Expected repairs in [0, t] = mu D(t) and failures = lam U(t) (each transition fires
    at its rate while enabled).  Reward {rate: #up, impulse: {repair: -c, fail: f}}
    accumulates U(t) - c mu D(t) + f lam U(t).
    """
    lam, mu, c, f = 0.5, 2.0, 3.0, 0.25
    s = lam + mu
    g = _machine(lam, mu)
    times = np.array([0.0, 0.1, 1.0, 7.5, 40.0])
    D = lam / s * times - lam / s**2 * (1 - np.exp(-s * times))
    U = times - D
    result = srn.accumulated_reward(g, Reward("#up", {"repair": -c, "fail": f}), times)
    expected = U - c * mu * D + f * lam * U
    np.testing.assert_allclose(result.values, expected, rtol=1e-11, atol=1e-14)
    assert np.all(result.error_bound <= 1e-12 * np.maximum(times, 1e-300) + 1e-300)
    firings = srn.accumulated_reward(g, Reward(impulse={"repair": 1.0}), times).values
    np.testing.assert_allclose(firings, mu * D, rtol=1e-11, atol=1e-14)


def _router(lam: float, mu: float, w_good: float, w_bad: float) -> srn.ReachabilityGraph:
    return srn.reachability_graph(
        Net(
            {"idle": 1, "choice": 0, "resting": 0},
            [
                timed("work", lam, inputs={"idle": 1}, outputs={"choice": 1}),
                immediate("good", weight=w_good, inputs={"choice": 1}, outputs={"resting": 1}),
                immediate("bad", weight=w_bad, inputs={"choice": 1}, outputs={"idle": 1}),
                timed("wake", mu, inputs={"resting": 1}, outputs={"idle": 1}),
            ],
        )
    )


def test_impulse_on_immediate_transitions() -> None:
    """Impulses on immediate transitions, credited with the flow through the vanishing marking.

    Derivation: 'work' (rate lam) moves idle to a vanishing 'choice', resolved by 'good'
    (weight 3, to resting) or 'bad' (weight 1, back to idle).  Tangible states: idle and
    resting.  idle leaves for resting at rate lam p with p = 3/4; resting returns at mu.
    P(idle) = mu / (mu + lam p).  good fires at lam p P(idle), bad at lam (1-p) P(idle).
    Reward {impulse: {good: 10, bad: -5}} = lam P(idle) (10 p - 5 (1 - p)).
    With lam = 2, mu = 1: P(idle) = 1 / 2.5 = 0.4; value = 0.8 * (7.5 - 1.25) = 5.
    """
    g = _router(2.0, 1.0, 3.0, 1.0)
    assert g.n_states == 2
    pi = srn.steady_state(g.generator()).probabilities
    value = srn.reward_rate(g, Reward(impulse={"good": 10.0, "bad": -5.0}), pi)
    assert value == pytest.approx(5.0, rel=1e-13)


def test_impulse_on_immediate_transitions_accumulated() -> None:
    """Accumulated impulses on immediates: expected firings of 'bad' over [0, t].

    Derivation: from idle, with a = lam p (to resting) and s = a + mu, the time spent idle
    is I(t) = mu/s t + a/s^2 (1 - e^{-s t}) (two-state chain, starting in idle).  'bad'
    fires at rate lam (1 - p) while idle, so E[#bad in [0, t]] = lam (1 - p) I(t).
    """
    lam, mu, p = 2.0, 1.0, 0.75
    a = lam * p
    s = a + mu
    g = _router(lam, mu, 3.0, 1.0)
    times = np.array([0.5, 2.0, 10.0])
    idle_time = mu / s * times + a / s**2 * (1 - np.exp(-s * times))
    result = srn.accumulated_reward(g, Reward(impulse={"bad": 1.0}), times)
    np.testing.assert_allclose(result.values, lam * (1 - p) * idle_time, rtol=1e-11)


def test_cumulative_transient_matches_quadrature_of_expm() -> None:
    """L(t) against an independent integral: for generator Q, the augmented matrix
    [[Q, I], [0, 0]] has exponential [[e^{Qt}, int_0^t e^{Qs} ds], [0, I]] (Van Loan, IEEE
    TAC 23(3), 1978), computed here densely with scipy.linalg.expm."""
    import scipy.linalg as la

    rng = np.random.default_rng(7)
    n = 6
    Q = rng.uniform(0, 3, (n, n))
    np.fill_diagonal(Q, 0)
    np.fill_diagonal(Q, -Q.sum(axis=1))
    p0 = rng.dirichlet(np.ones(n))
    t = 2.5
    big = np.zeros((2 * n, 2 * n))
    big[:n, :n] = Q
    big[:n, n:] = np.eye(n)
    integral = la.expm(big * t)[:n, n:]
    sol = srn.cumulative_transient(Q, [t], p0)
    np.testing.assert_allclose(sol.integrals[0], p0 @ integral, rtol=1e-11, atol=1e-13)
    assert sol.integrals[0].sum() == pytest.approx(t, rel=1e-12)


def test_unknown_transition_and_bad_impulse_are_named() -> None:
    g = _machine(1.0, 1.0)
    with pytest.raises(srn.NetDefinitionError) as err:
        srn.reward_rate(g, Reward(impulse={"nope": 1.0}), [0.5, 0.5])
    assert err.value.field == "reward.impulse.nope"
    with pytest.raises(srn.NetDefinitionError) as err:
        Reward.from_json({"impulse": {"fail": math.inf}}, field="measures.rewards.x")
    assert err.value.field == "measures.rewards.x.impulse.fail"
    with pytest.raises(srn.NetDefinitionError) as err:
        Reward.from_json({"rate": "#up", "bonus": 1}, field="measures.rewards.x")
    assert err.value.field == "measures.rewards.x"
    assert Reward.from_json(Reward("#up", {"fail": 2.0}).to_json()) == Reward("#up", {"fail": 2.0})


@settings(max_examples=30, deadline=None)
@given(
    lam=st.floats(0.1, 10.0),
    mu=st.floats(0.1, 10.0),
    capacity=st.integers(1, 6),
    gain=st.floats(-5.0, 5.0),
    cost=st.floats(-5.0, 5.0),
    t=st.floats(0.01, 20.0),
)
def test_stationary_start_accumulates_linearly(
    lam: float, mu: float, capacity: int, gain: float, cost: float, t: float
) -> None:
    """Invariant: started from the steady state pi, the chain stays in pi, so the expected
    reward over [0, t] is exactly t times the steady-state reward rate (rate and impulse
    parts alike), for any M/M/1/K queue and any reward."""
    g = srn.reachability_graph(
        Net(
            {"q": 0},
            [
                timed("arrive", lam, outputs={"q": 1}, inhibitors={"q": capacity}),
                timed("serve", mu, inputs={"q": 1}),
            ],
        )
    )
    pi = srn.steady_state(g.generator()).probabilities
    reward = Reward(f"{gain} * #q", {"serve": cost, "arrive": 1.0})
    rate = srn.reward_rate(g, reward, pi)
    acc = srn.accumulated_reward(g, reward, [t], initial=pi)
    scale = abs(gain) * capacity + (abs(cost) * mu + lam)
    assert acc.values[0] == pytest.approx(t * rate, rel=1e-9, abs=1e-9 * t * scale)
