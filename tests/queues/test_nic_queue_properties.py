"""Hypothesis properties of the NIC queue measures."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from queues import bulk_service_queue, loss_probability
from queues._fixed import LINEAR_DOMAIN_LIMIT

# Loads lam / (N mu) from 1e-3 to 1e3 and buffer sizes up to a few hundred keep every
# example fast while covering both the linear and the log-domain recursion.
loads = st.floats(min_value=1e-3, max_value=1e3, allow_nan=False, allow_infinity=False)
MU = 20_800.0
# Rounding slack for "monotone" comparisons: the exact values are strictly ordered, the
# computed ones carry a relative error of ~1e-13 (K up to 400).
REL = 1e-9


@st.composite
def queue_sizes(draw: st.DrawFn) -> tuple[int, int]:
    N = draw(st.integers(min_value=1, max_value=40))
    K = draw(st.integers(min_value=N, max_value=400))
    return K, N


@settings(max_examples=60, deadline=None)
@given(sizes=queue_sizes(), rates=st.lists(loads, min_size=2, max_size=30))
def test_loss_rises_with_arrival_rate(sizes: tuple[int, int], rates: list[float]) -> None:
    K, N = sizes
    lam = np.sort(np.asarray(rates)) * N * MU
    loss = loss_probability(lam, MU, K, N)
    assert np.all(loss[1:] >= loss[:-1] * (1 - REL))


@settings(max_examples=60, deadline=None)
@given(sizes=queue_sizes(), load=loads, extra=st.integers(min_value=1, max_value=50))
def test_loss_falls_as_buffer_grows(sizes: tuple[int, int], load: float, extra: int) -> None:
    K, N = sizes
    lam = load * N * MU
    small = float(loss_probability(lam, MU, K, N))
    large = float(loss_probability(lam, MU, K + extra, N))
    assert large <= small * (1 + REL)


@settings(max_examples=60, deadline=None)
@given(sizes=queue_sizes(), rates=st.lists(loads, min_size=1, max_size=20))
def test_probabilities_are_valid_and_sum_to_one(sizes: tuple[int, int], rates: list[float]) -> None:
    K, N = sizes
    lam = np.asarray(rates) * N * MU
    sol = bulk_service_queue(lam, MU, K, N, packet_bytes=1468)
    dist = sol.occupancy_distribution
    assert np.all(np.isfinite(dist))
    assert np.all((dist >= 0) & (dist <= 1))
    np.testing.assert_allclose(dist.sum(axis=1), 1.0, rtol=1e-12)
    for p in (sol.loss_probability, sol.busy_probability):
        assert np.all((p >= 0) & (p <= 1))
    assert np.all((sol.mean_occupancy >= 0) & (sol.mean_occupancy <= K))
    assert np.all(sol.throughput_pps <= lam * (1 + 1e-15))
    assert np.all(sol.throughput_pps <= N * MU * (1 + 1e-12))  # the server's capacity


@settings(max_examples=40, deadline=None)
@given(
    K=st.integers(min_value=1, max_value=30),
    data=st.data(),
    rates=st.lists(loads, min_size=1, max_size=5),
    erlang=st.booleans(),
)
def test_general_rule_probabilities_are_valid(
    K: int, data: st.DataObject, rates: list[float], erlang: bool
) -> None:
    b = data.draw(st.integers(min_value=1, max_value=K))
    a = data.draw(st.integers(min_value=1, max_value=b))
    lam = np.asarray(rates) * b * MU
    if erlang:
        phase = (np.array([1.0, 0.0]), np.array([[-2 * MU, 2 * MU], [0.0, -2 * MU]]))
        sol = bulk_service_queue(lam, None, K, b, min_batch=a, phase_type=phase)
    else:
        sol = bulk_service_queue(lam, MU, K, b, min_batch=a)
    dist = sol.occupancy_distribution
    assert np.all((dist >= 0) & (dist <= 1))
    np.testing.assert_allclose(dist.sum(axis=1), 1.0, rtol=1e-12)
    assert np.all((sol.loss_probability >= 0) & (sol.loss_probability <= 1))
    assert np.all((sol.busy_probability >= 0) & (sol.busy_probability <= 1))
    np.testing.assert_allclose(
        sol.throughput_pps, sol.interrupt_rate * sol.mean_batch, rtol=1e-9, atol=1e-9
    )


# Loads far enough from 1 that pi(n) / pi(K) leaves the double range for large K, so one
# call mixes linear-domain and log-domain rates.
wide_loads = st.floats(min_value=1e-6, max_value=1e6, allow_nan=False, allow_infinity=False)


@settings(max_examples=80, deadline=None)
@given(
    N=st.integers(min_value=1, max_value=12),
    extra=st.integers(min_value=0, max_value=3_000),
    rates=st.lists(wide_loads, min_size=1, max_size=40),
)
def test_loss_fast_path_equals_full_distribution(N: int, extra: int, rates: list[float]) -> None:
    """``loss_probability`` keeps only the last block of the recursion and its running
    total, rescaled by powers of two where values would overflow; ``bulk_service_queue``
    builds the whole distribution, in the log domain for those rates.  Same recursion,
    other summation order: 1e-12 relative where both stay linear (the recursion's error
    grows at most linearly with K, about 1e-13 at K = 3,000).  Where the distribution
    takes the log domain its own error is larger: against the chain in 40-digit
    arithmetic (test_nic_queue_deep.py) it was off by up to 2.4e-11 (K = 1,603, N = 2),
    where the rescaled loss was off by 2.7e-15 (at most 5.6e-14 in those draws); there
    1e-10, a bound on the reference, not on the loss."""
    K = N + extra
    lam = np.asarray(rates) * N * MU
    fast = loss_probability(lam, MU, K, N)
    full = bulk_service_queue(lam, MU, K, N).loss_probability
    log_ratio = np.log(MU) - np.log(lam)
    grow = K * np.maximum(log_ratio + np.log(N), 0.0) + np.log(K + 1)
    shrink = (K + 1) * np.maximum(-log_ratio, 0.0)
    linear = (grow < LINEAR_DOMAIN_LIMIT) & (shrink < LINEAR_DOMAIN_LIMIT)
    np.testing.assert_allclose(fast[linear], full[linear], rtol=1e-12, atol=0)
    np.testing.assert_allclose(fast[~linear], full[~linear], rtol=1e-10, atol=0)
