"""Discrete-event simulation of the NIC buffer against the exact solution.

The simulator below follows packets and interrupts in time (no Markov chain): it draws
inter-arrival and service times, counts dropped arrivals directly (so it also checks
PASTA, loss = P(n = K)) and integrates the occupancy over time.  Confidence intervals are
99 % batch-means intervals (20 batches, Student t with 19 degrees of freedom).  The seed
is fixed, so the outcome is deterministic; the whole file runs in well under 2 s.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pytest

from queues import bulk_service_queue

T_99_19DOF = 2.861  # Student t quantile, two-sided 99 %, 19 degrees of freedom
BATCHES = 20


def simulate(
    lam: float,
    K: int,
    a: int,
    b: int,
    service_times: np.ndarray,
    interarrivals: np.ndarray,
    warmup: int,
) -> tuple[np.ndarray, np.ndarray]:
    """Per-batch loss fraction and time-average occupancy of the [a, b] bulk queue."""
    n = 0  # packets in the buffer, batch in service included
    batch = 0  # size of the batch in service (0: idle)
    t = 0.0
    done = np.inf  # completion time of the running service
    next_service = 0
    arrivals = interarrivals.size - warmup
    per_batch = arrivals // BATCHES
    lost = np.zeros(BATCHES)
    area = np.zeros(BATCHES)
    span = np.zeros(BATCHES)
    for i, gap in enumerate(interarrivals):
        slot = (i - warmup) // per_batch if i >= warmup else -1
        if slot >= BATCHES:
            break
        arrival = t + gap
        while done <= arrival:
            if slot >= 0:
                area[slot] += n * (done - t)
                span[slot] += done - t
            t = done
            n -= batch
            if n >= a:
                batch = min(n, b)
                done = t + service_times[next_service]
                next_service += 1
            else:
                batch, done = 0, np.inf
        if slot >= 0:
            area[slot] += n * (arrival - t)
            span[slot] += arrival - t
        t = arrival
        if n == K:
            if slot >= 0:
                lost[slot] += 1
            continue
        n += 1
        if batch == 0 and n >= a:
            batch = min(n, b)
            done = t + service_times[next_service]
            next_service += 1
    return lost / per_batch, area / span


def check_in_interval(samples: np.ndarray, exact: float) -> None:
    mean = samples.mean()
    half = T_99_19DOF * samples.std(ddof=1) / np.sqrt(samples.size)
    assert abs(mean - exact) <= half, f"exact {exact} outside {mean} +- {half}"


ServiceDraw = Callable[[np.random.Generator, int], np.ndarray]


def exponential(mu: float) -> ServiceDraw:
    return lambda rng, size: rng.exponential(1.0 / mu, size)


def erlang2(mu: float) -> ServiceDraw:
    return lambda rng, size: rng.gamma(2.0, 1.0 / (2.0 * mu), size)


@pytest.mark.parametrize(
    ("lam", "K", "a", "b", "service", "seed"),
    [
        # Fixed batch, exponential service (the paper's model), light to overloaded.
        (2.0, 12, 3, 3, "exp", 11),
        (2.7, 12, 3, 3, "exp", 12),
        (4.5, 12, 3, 3, "exp", 13),
        # General rule with Erlang-2 service (phase-type solver).
        (2.5, 10, 2, 4, "erlang2", 14),
    ],
)
def test_simulation_confidence_intervals_cover_exact_values(
    lam: float, K: int, a: int, b: int, service: str, seed: int
) -> None:
    # Reference: the simulation above; the exact loss and mean occupancy must fall inside
    # the 99 % batch-means confidence intervals (100,000 arrivals after 2,000 warm-up).
    mu = 1.0
    rng = np.random.default_rng(seed)
    warmup, arrivals = 2_000, 100_000
    draw = exponential(mu) if service == "exp" else erlang2(mu)
    interarrivals = rng.exponential(1.0 / lam, warmup + arrivals)
    services = draw(rng, warmup + arrivals)
    loss, occupancy = simulate(lam, K, a, b, services, interarrivals, warmup)
    if service == "exp" and a == b:
        exact = bulk_service_queue(lam, mu, K, b)
    else:
        phase = (np.array([1.0, 0.0]), np.array([[-2 * mu, 2 * mu], [0.0, -2 * mu]]))
        exact = bulk_service_queue(lam, None, K, b, min_batch=a, phase_type=phase)
    assert 0.005 < exact.loss_probability[0] < 0.6  # the simulation sees enough losses
    check_in_interval(loss, float(exact.loss_probability[0]))
    check_in_interval(occupancy, float(exact.mean_occupancy[0]))
