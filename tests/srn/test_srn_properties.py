"""Hypothesis invariants of the engine on random chains and random small nets.

- Steady state: non-negative, sums to 1, balances (pi Q = 0), and for birth-death
  chains equals the product-form closed form pi_n ~ prod_{i<n} b_i / d_{i+1}.
- Random conservative nets: the same, plus token conservation and the steady-state
  flow balance of every place (sum over transitions of throughput x token change = 0,
  immediate transitions included), or a NotErgodicError whose classes really are
  closed, or a reported vanishing loop.
- Transient: each distribution sums to 1 within the reported truncation bound.
- Time to absorption: CDF non-decreasing within [0, 1], mean equal to
  alpha (-T)^-1 1 solved here with numpy, quantiles consistent with the CDF.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from srn import (
    Net,
    NotErgodicError,
    VanishingLoopError,
    immediate,
    reachability_graph,
    steady_state,
    time_to_absorption,
    timed,
    transient,
)

rates = st.floats(min_value=0.05, max_value=20.0, allow_nan=False)
SETTINGS = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def nested_if(prefix: str, levels: range) -> str:
    """if(#q == i, prefix_i, ...) over the given levels; the innermost default is 0."""
    text = "0"
    for i in reversed(levels):
        text = f"if(#q == {i}, {prefix}{i}, {text})"
    return text


@SETTINGS
@given(st.data())
def test_birth_death_net_matches_product_form(data):
    n = data.draw(st.integers(1, 20), label="levels")
    births = data.draw(st.lists(rates, min_size=n, max_size=n), label="births")
    deaths = data.draw(st.lists(rates, min_size=n, max_size=n), label="deaths")
    params = {f"b{i}": b for i, b in enumerate(births)}
    params |= {f"d{i + 1}": d for i, d in enumerate(deaths)}
    net = Net(
        {"q": 0},
        [
            timed("up", nested_if("b", range(n)), outputs={"q": 1}, inhibitors={"q": n}),
            timed("down", nested_if("d", range(1, n + 1)), inputs={"q": 1}),
        ],
        parameters=params,
    )
    graph = reachability_graph(net)
    Q = graph.generator()
    result = steady_state(Q)
    pi = result.probabilities
    assert np.all(pi >= 0)
    assert pi.sum() == pytest.approx(1.0, abs=1e-12)
    assert np.abs(Q.T @ pi).sum() <= 1e-10 * max(births + deaths)
    weights = np.cumprod([1.0] + [b / d for b, d in zip(births, deaths, strict=True)])
    expected = weights / weights.sum()
    # The dense solver is GTH elimination (no subtractions), so even the smallest
    # probabilities are accurate to a few ulps per level: 1e-12 relative, no atol.
    np.testing.assert_allclose(pi, expected[graph.markings[:, 0]], rtol=1e-12, atol=0)


@st.composite
def conservative_nets(draw):
    """Small nets whose transitions move tokens between places (so they are bounded)."""
    n_places = draw(st.integers(2, 4))
    places = [f"p{i}" for i in range(n_places)]
    tokens = draw(st.lists(st.integers(0, 2), min_size=n_places, max_size=n_places))
    if sum(tokens) == 0:
        tokens[0] = 1
    transitions = []
    for j in range(draw(st.integers(1, 6))):
        src, dst = draw(st.lists(st.sampled_from(places), min_size=2, max_size=2, unique=True))
        k = draw(st.integers(1, 2))
        inhibitors = {}
        if draw(st.booleans()):
            inhibitors[draw(st.sampled_from(places))] = draw(st.integers(1, 3))
        inhibitors.pop(src, None)  # an inhibitor on the input place would disable it
        if draw(st.integers(0, 3)) == 0:
            transitions.append(
                immediate(
                    f"i{j}",
                    weight=draw(rates),
                    priority=draw(st.integers(1, 2)),
                    inputs={src: k},
                    outputs={dst: k},
                    inhibitors=inhibitors,
                )
            )
        else:
            rate = draw(st.sampled_from([draw(rates), f"{draw(rates)} * #{src}"]))
            transitions.append(
                timed(f"t{j}", rate, inputs={src: k}, outputs={dst: k}, inhibitors=inhibitors)
            )
    return Net(dict(zip(places, tokens, strict=True)), transitions)


@SETTINGS
@given(conservative_nets())
def test_random_net_invariants(net):
    try:
        graph = reachability_graph(net)
    except VanishingLoopError as exc:
        # Immediate transitions moving a token back and forth: reported, not looped on.
        event("vanishing loop")
        assert exc.markings
        return
    total = sum(p.tokens for p in net.places)
    assert np.all(graph.markings.sum(axis=1) == total)
    Q = graph.generator()
    np.testing.assert_allclose(Q.sum(axis=1), 0.0, atol=1e-12)
    try:
        result = steady_state(Q)
    except NotErgodicError as exc:
        event("not ergodic")
        assert len(exc.classes) >= 2
        dense = Q.toarray()
        for cls in exc.classes:
            outside = np.setdiff1d(np.arange(graph.n_states), cls)
            assert np.all(dense[np.ix_(cls, outside)] == 0), "a reported class is not closed"
        return
    event(f"solved, vanishing markings: {graph.n_vanishing > 0}")
    pi = result.probabilities
    assert np.all(pi >= 0)
    assert pi.sum() == pytest.approx(1.0, abs=1e-12)
    scale = max(1.0, float(np.abs(Q.diagonal()).max()))
    assert np.abs(Q.T @ pi).sum() <= 1e-10 * scale
    assert result.residual <= 1e-10 * scale
    # Flow balance of every place, immediate transitions included.
    flows = graph.throughput(pi)
    balance = np.zeros(len(net.places))
    index = {p.name: i for i, p in enumerate(net.places)}
    for t in net.transitions:
        for place, k in t.inputs.items():
            balance[index[place]] -= k * flows[t.name]
        for place, k in t.outputs.items():
            balance[index[place]] += k * flows[t.name]
    np.testing.assert_allclose(balance, 0.0, atol=1e-9 * scale)


def random_generator(draw, n, absorbing=False):
    Q = np.zeros((n, n))
    for i in range(n):
        for j in range(n):
            if i != j and draw(st.booleans()):
                Q[i, j] = draw(rates)
    if absorbing:
        Q[-1, :] = 0.0
        for i in range(n - 1):  # every transient state can leave directly
            Q[i, -1] = draw(rates)
    else:
        for i in range(n):  # a ring keeps the chain irreducible
            Q[i, (i + 1) % n] += 0.1
    np.fill_diagonal(Q, 0.0)
    np.fill_diagonal(Q, -Q.sum(axis=1))
    return Q


@SETTINGS
@given(st.data())
def test_transient_distributions_sum_to_one(data):
    n = data.draw(st.integers(2, 7))
    Q = random_generator(data.draw, n)
    p0 = np.asarray(data.draw(st.lists(rates, min_size=n, max_size=n)))
    p0 /= p0.sum()
    times = data.draw(st.lists(st.floats(0.0, 20.0), min_size=1, max_size=5))
    sol = transient(Q, times, p0)
    assert np.all(sol.probabilities >= 0)
    sums = sol.probabilities.sum(axis=1)
    # error_bound is the truncation of the Poisson series only.  Rounding adds at most
    # about (n + 2) unit roundoffs per uniformisation product (a product with a
    # stochastic matrix does not amplify earlier errors in the 1-norm) and one per term
    # of the weighted sum (Hypothesis found 1.2e-12 at t = 18.8).  The products number
    # at most the right truncation point of Poisson(q t) from Bernstein's tail bound at
    # tol = 1e-12, as srn.solvers documents it, for q = 1.02 max_i |Q_ii|.
    q_t = 1.02 * float(np.max(-np.diag(Q))) * np.asarray(sol.times)
    log_term = np.log(2.0 / 1e-12)
    products = q_t + log_term / 3 + np.sqrt((log_term / 3) ** 2 + 2 * q_t * log_term) + 2
    rounding = (products + 1.0) * (n + 3) * np.finfo(float).eps
    assert np.all(np.abs(sums - 1.0) <= sol.error_bound + rounding + 1e-14)


@SETTINGS
@given(st.data())
def test_absorption_cdf_is_a_distribution(data):
    n = data.draw(st.integers(2, 7))
    Q = random_generator(data.draw, n, absorbing=True)
    alpha = np.asarray(data.draw(st.lists(rates, min_size=n - 1, max_size=n - 1)))
    p0 = np.append(alpha / alpha.sum(), 0.0)
    result = time_to_absorption(Q, p0, grid_points=31)
    assert np.all((result.cdf >= 0) & (result.cdf <= 1))
    assert np.all(np.diff(result.cdf) >= -1e-12)
    T = Q[:-1, :-1]
    u = np.linalg.solve(-T, np.ones(n - 1))
    assert result.mean == pytest.approx(p0[:-1] @ u, rel=1e-9)
    assert result.variance == pytest.approx(
        2 * p0[:-1] @ np.linalg.solve(-T, u) - (p0[:-1] @ u) ** 2, rel=1e-7, abs=1e-12
    )
    levels = sorted(result.quantiles)
    qs = [result.quantiles[level] for level in levels]
    assert qs == sorted(qs)
    np.testing.assert_allclose(result.cdf_at(qs), levels, atol=1e-9)


@SETTINGS
@given(st.data())
def test_block_gauss_seidel_bicgstab_matches_gth_for_any_number_of_threads(data):
    # Reference: GTH elimination (the dense route) on the same generator.  The
    # bicgstab-gs route on 1 to 5 threads (block Gauss-Seidel over as many blocks; more
    # threads than states leaves one state per block) must meet the residual target of
    # 1e-12 times the largest exit rate and agree to 1e-9 absolute per state,
    # with its own route, not the GMRES it falls back to after a breakdown.
    n = data.draw(st.integers(2, 24), label="states")
    Q = random_generator(data.draw, n)
    workers = data.draw(st.integers(1, 5), label="workers")
    reference = steady_state(Q, method="dense").probabilities
    result = steady_state(Q, method="bicgstab-gs", workers=workers)
    # No fallback: a GMRES rescue would hide a wrong block splitting.
    assert [a.method for a in result.attempts] == ["bicgstab-gs"]
    assert result.residual <= 1e-12 * float(-Q.diagonal().min())
    np.testing.assert_allclose(result.probabilities, reference, rtol=0, atol=1e-9)


@SETTINGS
@given(st.data())
def test_iad_matches_gth_on_random_nearly_decomposable_chains(data):
    # Random NCD chains: 2-6 blocks of 1-8 states, each a random generator (rates 0.05
    # to 20 plus a ring), block I coupled to block I + 1 and to random others at rates
    # log-uniform in [1e-8, 1e-5] (over 3 decades below the weakest internal rate, so
    # the partition must find exactly these blocks), states randomly permuted.
    # Reference: dense GTH on the same generator; iad must agree to 1e-6 relative on
    # every state above 1e-12 and 1e-10 absolute.
    sizes = [data.draw(st.integers(2, 8), label="first block")]
    sizes += data.draw(st.lists(st.integers(1, 8), min_size=1, max_size=5), label="blocks")
    starts = np.cumsum([0, *sizes])
    n = int(starts[-1])
    Q = np.zeros((n, n))
    for b, size in enumerate(sizes):
        if size > 1:
            block = random_generator(data.draw, size)
            np.fill_diagonal(block, 0.0)
            Q[starts[b] : starts[b + 1], starts[b] : starts[b + 1]] = block
    weak = st.floats(-8.0, -5.0).map(lambda e: 10.0**e)
    for b in range(len(sizes)):
        nxt = (b + 1) % len(sizes)
        Q[starts[b + 1] - 1, starts[nxt]] = data.draw(weak, label="ring coupling")
    extra = data.draw(st.lists(st.tuples(st.integers(0, n - 1), st.integers(0, n - 1))))
    for i, j in extra:
        if np.searchsorted(starts, i, "right") != np.searchsorted(starts, j, "right"):
            Q[i, j] = data.draw(weak, label="extra coupling")
    perm = np.asarray(data.draw(st.permutations(range(n)), label="order"))
    Q = Q[perm][:, perm]
    np.fill_diagonal(Q, -Q.sum(axis=1))
    reference = steady_state(Q, method="dense").probabilities
    result = steady_state(Q, method="iad")
    assert result.method == "iad"
    np.testing.assert_allclose(result.probabilities, reference, rtol=0, atol=1e-10)
    big = reference > 1e-12
    np.testing.assert_allclose(result.probabilities[big], reference[big], rtol=1e-6)
