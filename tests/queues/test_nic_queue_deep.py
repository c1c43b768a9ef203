"""Deep NIC buffers: the loss-only recursion rescaled by powers of two.

Reference: the stationary distribution of the fixed-batch M/M[N]/1/K chain from its cut
equations (``lam pi(n) = mu sum_{j=n+1}^{min(n+N, K)} pi(j) [j >= N]``, SPEC section 3)
in 40-digit arithmetic (mpmath), where nothing overflows.  The rescaling multiplies by
powers of two (exact) and the recursion is subtraction-free, so the loss must agree to
1e-12 relative at K in the thousands (seen: at most 5.6e-14; the log-domain recursion
it replaces in the search was off by up to 2.4e-11 on such rates).
"""

from __future__ import annotations

import mpmath
import numpy as np
import pytest

import queues
from queues._fixed import SCALE_BITS, forced_kernels


def exact_loss(lam: float, mu: float, K: int, N: int) -> float:
    with mpmath.workdps(40):
        ratio = mpmath.mpf(mu) / mpmath.mpf(lam)
        pi = {K: mpmath.mpf(1)}
        for n in range(K - 1, -1, -1):
            pi[n] = ratio * mpmath.fsum(pi[j] for j in range(max(n + 1, N), min(n + N, K) + 1))
        return float(1 / mpmath.fsum(pi.values()))


@pytest.mark.parametrize("compiled", [True, False])
@pytest.mark.parametrize(
    ("K", "N", "mu", "lam"),
    [
        (1_736, 6, 8e3, 3.007e4),  # 2 MB ring, just past capacity: rescaled many times
        (4_096, 32, 4e4, 9.867e5),
        (4_096, 1, 8e3, 7.9e3),  # M/M/1/K just below capacity
        (2_048, 64, 8e3, 4.12e5),
        (5_000, 3, 4e4, 2.976e5),
        (3_000, 6, 8e3, 1e2),  # far below capacity: the values underflow, the loss ~0
        # Where the log-domain distribution was off by 5.4e-12, 2.9e-12 and 2.4e-11
        # (mu = 20,800).
        (2_065, 12, 20_800.0, 0.368 * 12 * 20_800.0),
        (2_676, 6, 20_800.0, 0.5835 * 6 * 20_800.0),
        (1_603, 2, 20_800.0, 0.6428 * 2 * 20_800.0),
    ],
)
def test_deep_buffers_match_the_exact_chain(
    compiled: bool, K: int, N: int, mu: float, lam: float
) -> None:
    with forced_kernels(compiled):
        loss = float(queues.loss_probability(np.array([lam]), mu, K, N)[0])
    assert loss == pytest.approx(exact_loss(lam, mu, K, N), rel=1e-12, abs=1e-300)


def test_a_rate_in_the_linear_domain_is_never_rescaled() -> None:
    """Its values stay below exp(650) < 2**SCALE_BITS, so its answer is what the
    unscaled recursion gives (fixed_batch_distribution's pi(K), to rounding of the sum)."""
    assert 650 / np.log(2) < SCALE_BITS
    lam = np.linspace(1e3, 1e5, 50)
    full = queues.bulk_service_queue(lam, 8e3, 64, 6).loss_probability
    np.testing.assert_allclose(queues.loss_probability(lam, 8e3, 64, 6), full, rtol=1e-13)
