"""Time to absorption (phase-type distributions) against closed forms.

References
----------
- Erlang-k with rate lam: CDF 1 - exp(-lam t) sum_{n<k} (lam t)^n / n!, mean k/lam,
  variance k/lam^2 (any probability text, e.g. Ross, *Introduction to Probability
  Models*, section 5.2.3).  Quantiles cross-checked with ``scipy.stats.gamma.ppf``.
- Hypoexponential with distinct rates lam_i: CDF 1 - sum_i C_i exp(-lam_i t), with
  C_i = prod_{j != i} lam_j / (lam_j - lam_i), mean sum 1/lam_i, variance
  sum 1/lam_i^2 (Ross, section 5.2.4).
- Birth-death first passage 0 -> K: h_n = 1/lam + (mu/lam) h_{n-1}, h_0 = 1/lam, mean
  sum_{n<K} h_n (Karlin & Taylor, *A First Course in Stochastic Processes*, ch. 4).

Tolerances: means and variances come from a dense LU solve, relative 1e-12; CDF values
come from a uniformised series truncated at 1e-12, absolute 1e-10.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
import scipy.linalg as la
from scipy import stats

from srn import (
    AbsorptionError,
    Net,
    compile_net,
    reachability_graph,
    time_to_absorption,
    timed,
)

CDF_TOL = 1e-10
MOMENT_RTOL = 1e-12


def erlang_net(k: int) -> Net:
    return Net({"left": k}, [timed("step", "lam", inputs={"left": 1})], parameters={"lam": 1.0})


def erlang_cdf(t, k, lam):
    t = np.asarray(t, dtype=float)
    return 1 - np.exp(-lam * t) * sum((lam * t) ** n / math.factorial(n) for n in range(k))


def hypoexponential_net(rates) -> Net:
    places = {f"s{i}": int(i == 0) for i in range(len(rates))} | {"done": 0}
    stages = [*places][1:]
    transitions = [
        timed(f"t{i}", rate, inputs={f"s{i}": 1}, outputs={stages[i]: 1})
        for i, rate in enumerate(rates)
    ]
    return Net(places, transitions)


def hypoexponential_cdf(t, rates):
    t = np.asarray(t, dtype=float)
    total = np.zeros_like(t)
    for i, li in enumerate(rates):
        c = math.prod(lj / (lj - li) for j, lj in enumerate(rates) if j != i)
        total += c * np.exp(-li * t)
    return 1 - total


@pytest.mark.parametrize(("k", "lam"), [(1, 3.0), (2, 0.5), (5, 2.0), (12, 40.0)])
def test_erlang(k, lam):
    graph = reachability_graph(erlang_net(k), {"lam": lam})
    Q = graph.generator()
    mean = k / lam
    times = np.linspace(0, 4 * mean, 23)
    result = time_to_absorption(Q, graph.initial_distribution, times=times)
    np.testing.assert_allclose(result.cdf, erlang_cdf(times, k, lam), atol=CDF_TOL, rtol=0)
    assert result.mean == pytest.approx(mean, rel=MOMENT_RTOL)
    assert result.variance == pytest.approx(k / lam**2, rel=MOMENT_RTOL)
    assert result.std == pytest.approx(math.sqrt(k) / lam, rel=MOMENT_RTOL)
    assert set(result.quantiles) == {0.5, 0.9, 0.99}
    for level, q in result.quantiles.items():
        assert erlang_cdf(q, k, lam) == pytest.approx(level, abs=1e-9)
        assert q == pytest.approx(stats.gamma.ppf(level, k, scale=1 / lam), rel=1e-8)
    assert result.quantile(0.25) == pytest.approx(stats.gamma.ppf(0.25, k, scale=1 / lam))
    assert result.atom == 0.0
    assert result.error_bound <= 1e-12


def test_hypoexponential_and_its_phase_type_pair():
    rates = [1.0, 2.5, 4.0, 0.7]
    graph = reachability_graph(hypoexponential_net(rates))
    times = [0.0, 0.1, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0]
    result = time_to_absorption(graph.generator(), graph.initial_distribution, times=times)
    np.testing.assert_allclose(result.cdf, hypoexponential_cdf(times, rates), atol=CDF_TOL)
    np.testing.assert_allclose(result.cdf_at(times), result.cdf, atol=1e-15)
    assert result.mean == pytest.approx(sum(1 / r for r in rates), rel=MOMENT_RTOL)
    assert result.variance == pytest.approx(sum(1 / r**2 for r in rates), rel=MOMENT_RTOL)
    for level, q in result.quantiles.items():
        assert hypoexponential_cdf([q], rates)[0] == pytest.approx(level, abs=1e-9)

    # (alpha, T): the stage-i state leaves at rate lam_i to stage i+1, written by hand.
    states = result.transient_states
    stage = [int(np.argmax(graph.markings[s][: len(rates)])) for s in states]
    assert sorted(stage) == list(range(len(rates)))
    T_hand = np.zeros((len(rates), len(rates)))
    for row, i in enumerate(stage):
        T_hand[row, row] = -rates[i]
        if i + 1 < len(rates):
            T_hand[row, stage.index(i + 1)] = rates[i]
    np.testing.assert_allclose(result.T.toarray(), T_hand, atol=1e-15)
    np.testing.assert_allclose(result.alpha, np.eye(len(rates))[stage.index(0)])
    # The pair reproduces the distribution: P(X > t) = alpha expm(T t) 1.
    for t in (0.3, 3.0):
        survival = result.alpha @ la.expm(T_hand * t) @ np.ones(len(rates))
        assert survival == pytest.approx(1 - hypoexponential_cdf([t], rates)[0], abs=1e-12)


def test_initial_distribution_carried_over_through_initial_markings():
    # The paper's vanishing initial marking: start in marking k with probability w_k, so
    # the time to absorption is a mixture of Erlang-1, -2 and -3 (plus an atom at 0).
    lam = 1.7
    weights = {0: 0.1, 1: 0.2, 2: 0.4, 3: 0.3}
    compiled = compile_net(erlang_net(3))
    graph = compiled.reachability_graph(
        {"lam": lam},
        initial_markings=[[k] for k in weights],
        initial_probabilities=list(weights.values()),
    )
    times = np.array([0.0, 0.2, 1.0, 3.0, 8.0])
    result = time_to_absorption(graph.generator(), graph.initial_distribution, times=times)
    mixture = sum(w * (erlang_cdf(times, k, lam) if k else 1.0) for k, w in weights.items())
    np.testing.assert_allclose(result.cdf, mixture, atol=CDF_TOL)
    assert result.atom == pytest.approx(0.1, rel=1e-15)
    assert result.alpha.sum() == pytest.approx(0.9, rel=1e-15)
    mean = sum(w * k / lam for k, w in weights.items())
    second = sum(w * k * (k + 1) / lam**2 for k, w in weights.items())
    assert result.mean == pytest.approx(mean, rel=MOMENT_RTOL)
    assert result.variance == pytest.approx(second - mean**2, rel=MOMENT_RTOL)
    # Levels below the atom are reached at time zero.
    assert result.quantile(0.05) == 0.0
    # The same structure is re-weighted without exploring again.
    other = graph.with_initial([0.0, 0.0, 0.0, 1.0])
    assert other.markings is graph.markings
    again = time_to_absorption(other.generator(), other.initial_distribution, times=times)
    np.testing.assert_allclose(again.cdf, erlang_cdf(times, 3, lam), atol=CDF_TOL)


def test_default_grid_reaches_the_999_quantile():
    graph = reachability_graph(erlang_net(3), {"lam": 2.0})
    result = time_to_absorption(graph.generator(), graph.initial_distribution, grid_points=41)
    assert len(result.times) == 41 and result.times[0] == 0.0
    assert result.times[-1] == pytest.approx(stats.gamma.ppf(0.999, 3, scale=0.5), rel=1e-8)
    assert result.cdf[-1] == pytest.approx(0.999, abs=1e-9)
    assert np.all(np.diff(result.cdf) >= 0)


@pytest.mark.parametrize(("lam", "mu", "K"), [(1.0, 2.0, 3), (2.0, 0.5, 4)])
def test_first_passage_time_with_an_explicit_absorbing_set(lam, mu, K):
    net = Net(
        {"q": 0},
        [
            timed("arrive", lam, outputs={"q": 1}, inhibitors={"q": K}),
            timed("serve", mu, inputs={"q": 1}),
        ],
    )
    graph = reachability_graph(net)
    full = graph.index({"q": K})
    h, mean = 1 / lam, 0.0
    for _ in range(K):
        mean += h
        h = 1 / lam + mu / lam * h
    by_index = time_to_absorption(graph.generator(), graph.initial_distribution, absorbing=[full])
    assert by_index.mean == pytest.approx(mean, rel=MOMENT_RTOL)
    mask = np.zeros(graph.n_states, dtype=bool)
    mask[full] = True
    by_mask = time_to_absorption(graph.generator(), graph.initial_distribution, absorbing=mask)
    assert by_mask.mean == pytest.approx(mean, rel=MOMENT_RTOL)


def test_no_absorbing_state_is_an_error():
    Q = np.array([[-1.0, 1.0], [2.0, -2.0]])
    with pytest.raises(AbsorptionError, match="no absorbing"):
        time_to_absorption(Q, [1.0, 0.0])


def test_uncertain_absorption_is_an_error():
    # From state 0 the chain may fall into the closed class {1, 2}, never absorbing in 3.
    Q = np.array(
        [
            [-2.0, 1.0, 0.0, 1.0],
            [0.0, -1.0, 1.0, 0.0],
            [0.0, 1.0, -1.0, 0.0],
            [0.0, 0.0, 0.0, 0.0],
        ]
    )
    with pytest.raises(AbsorptionError, match="not certain"):
        time_to_absorption(Q, [1.0, 0.0, 0.0, 0.0])
