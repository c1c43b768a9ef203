"""Every NIC solver at extreme ratios lam / mu: an answer, and the right one (issue #13).

``bulk_service_queue([4.6e11], 1e-6, 243, 243, min_batch=1)`` raised SuperLU's "Factor is
exactly singular" (a 500 from ``POST /queues/nic``).  When arrivals outpace service by
many orders of magnitude the buffer is full except for the instants after each service,
the server never idles and the batch sequence obeys ``s' = clip(K - s, a, b)``, whose
long-run mean is ``m = clip(K / 2, a, b)``; hence the closed form (derived in
``queues._general.saturated_limit``)::

    1 - loss = throughput / lam = mu * m / lam        (relative corrections ~ K mu / lam)

For the paper's fixed batch (a = b = N) that is ``1 - loss = mu N / lam``.
The limit is checked two ways: against the closed form at ratios where it is
used, and, independently, against the sparse LU solve (which does not use it) at
lam / mu = 1e8 (below the switch), where the two must agree to ~K * 1e-8 relative.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import queues


def mean_limit_batch(K: int, a: int, b: int) -> float:
    return float(np.clip(K / 2, a, b))


def test_the_issue_case_has_the_closed_form_answer() -> None:
    lam, mu, K = 4.6e11, 1e-6, 243
    sol = queues.bulk_service_queue([lam], mu, K, K, min_batch=1)
    served = mu * mean_limit_batch(K, 1, K)  # mu * 121.5 packets/s
    # Tolerance 1e-9: the limit's own error is ~K mu / lam = 5e-16.
    assert sol.throughput_pps[0] == pytest.approx(served, rel=1e-9)
    assert 1.0 - sol.loss_probability[0] == pytest.approx(served / lam, rel=1e-6)
    assert sol.occupancy_distribution[0].sum() == pytest.approx(1.0, abs=1e-12)


@pytest.mark.parametrize(("K", "a", "b"), [(243, 1, 243), (64, 2, 6), (10, 3, 7), (9, 5, 8)])
def test_the_limit_agrees_with_the_lu_solve_below_the_switch(K: int, a: int, b: int) -> None:
    # Independent check of the limit formula: the sparse LU (no limit involved) at
    # lam / mu = 1e8, where the limit's relative error is about K / 1e8.
    mu, ratio = 1.0, 1e8
    sol = queues.bulk_service_queue([mu * ratio], mu, K, b, min_batch=a)
    assert sol.method == "reduced-sparse-lu"
    m = mean_limit_batch(K, a, b)
    assert sol.throughput_pps[0] == pytest.approx(mu * m, rel=5 * K / ratio)
    assert sol.mean_batch[0] == pytest.approx(m, rel=5 * K / ratio)


def test_fixed_batch_far_above_saturation_keeps_its_digits() -> None:
    # 1 - loss = mu N / lam = 1.3e-16: lam * (1 - P(K)) would give 0 or a few ulps.
    lam, mu, K, N = 4.6e11, 1e-6, 64, 6
    sol = queues.bulk_service_queue([lam], mu, K, N)
    assert sol.throughput_pps[0] == pytest.approx(mu * N, rel=1e-9)


RULES = st.integers(min_value=1, max_value=200).flatmap(
    lambda K: st.integers(min_value=1, max_value=K).flatmap(
        lambda b: st.tuples(st.just(K), st.integers(min_value=1, max_value=b), st.just(b))
    )
)
SERVICE = st.sampled_from(["exponential", "phase-type"])
RULE_KIND = st.sampled_from(["fixed", "general"])


def _solve(lam: float, K: int, a: int, b: int, kind: str, service: str) -> tuple[object, float]:
    """Solve with one of the solvers; returns the solution and the mean service rate."""
    mu = 2.0
    min_batch = None if kind == "fixed" else a
    if service == "exponential":
        return queues.bulk_service_queue([lam], mu, K, b, min_batch=min_batch), mu
    # Two phases in series, rates 4 and 4: mean 1/2 s, so the same mean rate 2/s.
    alpha = np.array([1.0, 0.0])
    T = np.array([[-4.0, 4.0], [0.0, -4.0]])
    sol = queues.bulk_service_queue([lam], None, K, b, min_batch=min_batch, phase_type=(alpha, T))
    return sol, mu


@settings(max_examples=150, deadline=None, derandomize=True)
@given(
    rule=RULES,
    log_ratio=st.floats(min_value=-300, max_value=300),
    kind=RULE_KIND,
    service=SERVICE,
)
def test_every_solver_answers_at_any_ratio(
    rule: tuple[int, int, int], log_ratio: float, kind: str, service: str
) -> None:
    K, a, b = rule
    if kind == "fixed":
        a = b
    lam = 2.0 * 10.0**log_ratio
    sol, mu = _solve(lam, K, a, b, kind, service)
    dist = sol.occupancy_distribution[0]  # type: ignore[attr-defined]
    loss = sol.loss_probability[0]  # type: ignore[attr-defined]
    throughput = sol.throughput_pps[0]  # type: ignore[attr-defined]
    assert np.all(np.isfinite(dist)) and np.all(dist >= 0.0)
    assert dist.sum() == pytest.approx(1.0, abs=1e-9)
    assert 0.0 <= loss <= 1.0
    assert 0.0 <= throughput <= lam * (1 + 1e-12)
    # Flow balance, in either regime.
    served = sol.interrupt_rate[0] * sol.mean_batch[0]  # type: ignore[attr-defined]
    assert throughput == pytest.approx(served, rel=1e-6, abs=1e-300)
    if lam / mu > 1e10 * K:
        # Far above saturation: the closed form (module docstring).
        m = mean_limit_batch(K, a, b)
        assert throughput == pytest.approx(mu * m, rel=1e-6)
