"""Chains whose rates span more than the double range (issue #36: rates 1e160 and 1e-160
overflowed the dense elimination and answered 500).

Reference: the stationary vector of the same off-diagonal rates solved by ``mpmath`` at
1,000 significant digits (its own LU solver, the exit rates summed exactly), compared with
a relative tolerance of 1e-9 on every probability above 1e-290 (below that a double loses
digits as a subnormal or is 0), and the two-state closed form pi_0 = b / (a + b).
"""

from __future__ import annotations

import mpmath
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from srn import steady_state


def _reference(Q: np.ndarray) -> list[mpmath.mpf]:
    n = Q.shape[0]
    with mpmath.workdps(1000):
        A = mpmath.matrix(n, n)
        for i in range(n):
            for j in range(n):
                if i != j:
                    A[i, j] = mpmath.mpf(Q[j, i])  # pi Q = 0  <=>  Q^T pi^T = 0
        for i in range(n):
            # The exit rate exactly, from the off-diagonal rates (the double diagonal is
            # their rounded sum: 1e170 + 1e-170 is 1e170 there, and it would be the
            # reference's chain that differs).
            A[i, i] = -mpmath.fsum(mpmath.mpf(Q[i, j]) for j in range(n) if j != i)
        for j in range(n):
            A[n - 1, j] = mpmath.mpf(1)  # replace one equation by sum(pi) = 1
        b = mpmath.matrix([0] * (n - 1) + [1])
        return list(mpmath.lu_solve(A, b))


@pytest.mark.parametrize("exponent", [150, 160, 200, 300])
def test_two_states_far_apart_are_solved_not_refused(exponent: int) -> None:
    a, b = 10.0**exponent, 10.0**-exponent
    Q = np.array([[-a, a], [b, -b]])
    pi = steady_state(Q).probabilities
    with mpmath.workdps(50):
        expected = mpmath.mpf(b) / (mpmath.mpf(a) + mpmath.mpf(b))
    assert pi[1] == pytest.approx(1.0, rel=1e-15)
    if expected > mpmath.mpf("1e-290"):
        assert pi[0] == pytest.approx(float(expected), rel=1e-9)
    else:
        assert 0.0 <= pi[0] < 1e-280


@settings(max_examples=30, deadline=None)
@given(
    n=st.integers(min_value=2, max_value=6),
    exponents=st.lists(st.integers(min_value=-170, max_value=170), min_size=36, max_size=36),
    extra=st.lists(st.booleans(), min_size=36, max_size=36),
)
def test_a_small_chain_with_rates_across_340_decades_matches_1000_digits(
    n: int, exponents: list[int], extra: list[bool]
) -> None:
    Q = np.zeros((n, n))
    for i in range(n):  # a ring keeps it irreducible; random extra edges on top
        Q[i, (i + 1) % n] = 10.0 ** exponents[i]
    for k, (i, j) in enumerate((i, j) for i in range(n) for j in range(n) if i != j):
        if extra[k % 36] and Q[i, j] == 0:
            Q[i, j] = 10.0 ** exponents[(k + 7) % 36]
    np.fill_diagonal(Q, -Q.sum(axis=1))
    pi = steady_state(Q).probabilities
    ref = _reference(Q)
    assert np.all(np.isfinite(pi)) and pi.sum() == pytest.approx(1.0, rel=1e-12)
    for got, want in zip(pi, ref, strict=True):
        if want > mpmath.mpf("1e-290"):
            assert got == pytest.approx(float(want), rel=1e-9)
        else:
            assert got < 1e-280
