"""Queueing models built as SRNs, checked against closed forms and mean value analysis.

References
----------
- M/M/1/K and M/M/c/K stationary distributions: Gross, Shortle, Thompson & Harris,
  *Fundamentals of Queueing Theory*, 4th ed., sections 2.5 and 2.6.
- Erlang B recursion B(k) = a B(k-1) / (k + a B(k-1)) and Erlang C
  C = c B / (c - a (1 - B)): the same book, section 2.6, and Jagerman (1974).
- Exact mean value analysis of closed product-form networks: Reiser & Lavenberg,
  "Mean-value analysis of closed multichain queuing networks", JACM 27(2), 1980.

Each reference is computed in the test from its formula; nothing is hard-coded.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from srn import Net, compile_net, immediate, reachability_graph, steady_state, timed

# Steady-state solves of these chains are exact up to rounding: relative 1e-10 leaves
# room for LAPACK/SuperLU rounding on a few hundred states, and nothing more.
RTOL = 1e-10


def mmck_net(K: int | str = "K") -> Net:
    """M/M/c/K: Poisson(lam) arrivals blocked at K, c exponential(mu) servers."""
    return Net(
        {"q": 0},
        [
            timed("arrive", "lam", outputs={"q": 1}, inhibitors={"q": K}),
            timed("serve", "min(#q, c) * mu", inputs={"q": 1}),
        ],
        parameters={"lam": 1.0, "mu": 1.0, "c": 1.0, "K": 5.0},
    )


def by_count(graph, probabilities):
    """Probabilities indexed by the number in system (states come in BFS order)."""
    counts = graph.markings[:, graph.place_names.index("q")]
    out = np.zeros(counts.max() + 1)
    out[counts] = probabilities
    return out


def mm1k_closed_form(lam: float, mu: float, K: int) -> np.ndarray:
    rho = lam / mu
    if math.isclose(rho, 1.0):
        return np.full(K + 1, 1.0 / (K + 1))
    n = np.arange(K + 1)
    return (1 - rho) * rho**n / (1 - rho ** (K + 1))


def mmck_closed_form(lam: float, mu: float, c: int, K: int) -> np.ndarray:
    a = lam / mu
    terms = [
        a**n / math.factorial(n) if n < c else a**n / (math.factorial(c) * c ** (n - c))
        for n in range(K + 1)
    ]
    p = np.array(terms)
    return p / p.sum()


def erlang_b(c: int, a: float) -> float:
    b = 1.0
    for k in range(1, c + 1):
        b = a * b / (k + a * b)
    return b


@pytest.mark.parametrize(
    ("lam", "mu", "K"),
    [(1.0, 2.0, 1), (1.0, 2.0, 10), (3.0, 2.0, 7), (2.5, 2.5, 12), (0.1, 5.0, 30)],
)
def test_mm1k_distribution_mean_and_throughput(lam, mu, K):
    graph = reachability_graph(mmck_net(), {"lam": lam, "mu": mu, "c": 1, "K": K})
    assert graph.n_states == K + 1
    result = steady_state(graph.generator())
    pi = result.probabilities
    expected = mm1k_closed_form(lam, mu, K)
    np.testing.assert_allclose(by_count(graph, pi), expected, rtol=RTOL, atol=1e-15)
    assert result.residual < 1e-12

    rho = lam / mu
    if math.isclose(rho, 1.0):
        mean = K / 2
    else:
        # Gross & Harris eq. (2.44): L = rho/(1-rho) - (K+1) rho^(K+1) / (1-rho^(K+1)).
        mean = rho / (1 - rho) - (K + 1) * rho ** (K + 1) / (1 - rho ** (K + 1))
    assert graph.mean_tokens(pi)["q"] == pytest.approx(mean, rel=RTOL)
    assert graph.expected_reward("#q", pi) == pytest.approx(mean, rel=RTOL)
    assert graph.probability("#q == K", pi) == pytest.approx(expected[K], rel=RTOL)

    flows = graph.throughput(pi)
    # Accepted arrivals lam (1 - p_K) equal departures mu (1 - p_0).
    assert flows["arrive"] == pytest.approx(lam * (1 - expected[K]), rel=RTOL)
    assert flows["serve"] == pytest.approx(mu * (1 - expected[0]), rel=RTOL)


@pytest.mark.parametrize(("lam", "mu", "c", "K"), [(3.0, 1.0, 2, 6), (5.0, 0.7, 4, 20)])
def test_mmck_distribution_against_closed_form(lam, mu, c, K):
    graph = reachability_graph(mmck_net(), {"lam": lam, "mu": mu, "c": c, "K": K})
    pi = steady_state(graph.generator()).probabilities
    expected = mmck_closed_form(lam, mu, c, K)
    np.testing.assert_allclose(by_count(graph, pi), expected, rtol=RTOL, atol=1e-15)
    n = np.arange(K + 1)
    busy = np.minimum(n, c) @ expected
    flows = graph.throughput(pi)
    assert flows["serve"] == pytest.approx(mu * busy, rel=RTOL)
    assert flows["arrive"] == pytest.approx(lam * (1 - expected[K]), rel=RTOL)
    # Little's law on the whole system: L = X W, here checked as L = sum n p_n.
    assert graph.mean_tokens(pi)["q"] == pytest.approx(n @ expected, rel=RTOL)


@pytest.mark.parametrize(("c", "a"), [(1, 0.5), (3, 2.0), (10, 7.5), (25, 30.0)])
def test_loss_system_blocking_is_erlang_b(c, a):
    # M/M/c/c: the blocking probability is Erlang's B formula.
    graph = reachability_graph(mmck_net(), {"lam": a, "mu": 1.0, "c": c, "K": c})
    pi = steady_state(graph.generator()).probabilities
    assert graph.probability("#q == c", pi) == pytest.approx(erlang_b(c, a), rel=RTOL)


@pytest.mark.parametrize(("c", "a"), [(2, 1.0), (8, 4.0)])
def test_delay_probability_is_erlang_c(c, a):
    # With rho = a/c = 0.5 and K = c + 60 the truncated tail is below 0.5**61 ~ 4e-19,
    # so P(n >= c) equals Erlang's C formula of the infinite M/M/c to rounding.
    K = c + 60
    graph = reachability_graph(mmck_net(), {"lam": a, "mu": 1.0, "c": c, "K": K})
    pi = steady_state(graph.generator()).probabilities
    b = erlang_b(c, a)
    erlang_c = c * b / (c - a * (1 - b))
    assert graph.probability("#q >= c", pi) == pytest.approx(erlang_c, rel=1e-10)


def test_one_compiled_net_is_resolved_for_new_rates_and_new_structure():
    compiled = compile_net(mmck_net())
    assert compiled.structural_parameters == frozenset({"K"})
    first = compiled.reachability_graph({"lam": 1.0, "mu": 2.0, "K": 6})
    again = compiled.reachability_graph({"lam": 3.0, "mu": 2.0, "K": 6})
    # A new rate reuses the explored state space; only the rates change.
    assert again.markings is first.markings
    for graph, lam in ((first, 1.0), (again, 3.0)):
        pi = steady_state(graph.generator()).probabilities
        np.testing.assert_allclose(by_count(graph, pi), mm1k_closed_form(lam, 2.0, 6), rtol=RTOL)
    # A new buffer size is a new structure: it is explored again.
    bigger = compiled.reachability_graph({"lam": 1.0, "mu": 2.0, "K": 9})
    assert bigger.n_states == 10
    pi = steady_state(bigger.generator()).probabilities
    np.testing.assert_allclose(by_count(bigger, pi), mm1k_closed_form(1.0, 2.0, 9), rtol=RTOL)


# -- closed product-form network vs mean value analysis ---------------------------------


def closed_network(customers: int) -> Net:
    """Delay station -> PS station 1 -> (p) FCFS station 2 -> delay, (1-p) -> delay.

    Station 1 is single-server processor sharing and station 2 single-server FCFS, both
    exponential, so the network has product form (BCMP).  The routing after station 1 is
    a vanishing place resolved by two immediate transitions with weights p and 1 - p.
    """
    return Net(
        {"think": customers, "q1": 0, "routed": 0, "q2": 0},
        [
            timed("wake", "z * #think", inputs={"think": 1}, outputs={"q1": 1}),
            timed("serve1", "mu1", inputs={"q1": 1}, outputs={"routed": 1}),
            immediate("to2", weight="p", inputs={"routed": 1}, outputs={"q2": 1}),
            immediate("back", weight="1 - p", inputs={"routed": 1}, outputs={"think": 1}),
            timed("serve2", "mu2", inputs={"q2": 1}, outputs={"think": 1}),
        ],
        parameters={"z": 0.5, "mu1": 2.0, "mu2": 1.5, "p": 0.4},
    )


def mean_value_analysis(customers, z, mu1, mu2, p):
    """Exact MVA; returns throughput at the delay station and mean queue lengths."""
    demand_delay, demand1, demand2 = 1 / z, 1 / mu1, p / mu2  # visit ratios 1, 1, p
    q1 = q2 = 0.0
    for n in range(1, customers + 1):
        r1 = demand1 * (1 + q1)  # arrival theorem: an arrival sees the n-1 network
        r2 = demand2 * (1 + q2)
        x = n / (demand_delay + r1 + r2)
        q1, q2 = x * r1, x * r2
    return x, x * demand_delay, q1, q2


@pytest.mark.parametrize("customers", [1, 2, 5, 12])
def test_closed_network_matches_mean_value_analysis(customers):
    net = closed_network(customers)
    graph = reachability_graph(net)
    # Tangible states: compositions of N customers over 3 stations ("routed" vanishes).
    assert graph.n_states == math.comb(customers + 2, 2)
    assert graph.n_vanishing > 0
    pi = steady_state(graph.generator()).probabilities
    x, q_think, q1, q2 = mean_value_analysis(customers, **net.parameters)

    flows = graph.throughput(pi)
    tokens = graph.mean_tokens(pi)
    assert flows["wake"] == pytest.approx(x, rel=RTOL)
    assert flows["serve1"] == pytest.approx(x, rel=RTOL)
    assert flows["serve2"] == pytest.approx(0.4 * x, rel=RTOL)
    # Immediate transitions are credited with the flow that passes through them.
    assert flows["to2"] == pytest.approx(0.4 * x, rel=RTOL)
    assert flows["back"] == pytest.approx(0.6 * x, rel=RTOL)
    assert tokens["think"] == pytest.approx(q_think, rel=RTOL)
    assert tokens["q1"] == pytest.approx(q1, rel=RTOL)
    assert tokens["q2"] == pytest.approx(q2, rel=RTOL)
    assert tokens["routed"] == 0.0
