"""The interrupt service-time distribution against a Gillespie simulation.

The simulation is written from SPEC sections 1 and 2 alone: C CPU-bound tasks, I I/O
tasks moving processor -> disk at i * mu_io_cpu * min(1, m / n), each to a disk picked
uniformly, each disk FCFS at mu_disk.  Interrupts arrive as a Poisson process while the
closed network runs; at each arrival the state is copied and the interrupt is followed
on the copy (n = C + i + 1, completion at mu_net * min(1, m / n)) until it completes.
Arrivals are spaced 10 ms apart on average (about ten disk service times), so successive
samples are nearly independent.

Checks, with a fixed seed, at a false-alarm level of about 1e-4 each:
- the sample mean against the model's mean, within 4 standard errors;
- the empirical CDF at the model's p50, p90 and p99, within 4 binomial standard errors;
- the largest gap between the empirical and the model CDF, within the DKW bound
  sqrt(ln(2 / 1e-4) / (2 N)).
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from host import HostProfile, Workload, host_profile, interrupt_service_time

SX280 = host_profile("sx280-2007")
SLOW_DISK = SX280.replace(name="slow-disk", mu_disk=600.0, mu_io_cpu=3_000.0)


def simulate(w: Workload, p: HostProfile, samples: int, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    C, m, d = w.cpu_tasks, w.cores, w.disks
    uniforms = iter(rng.random(200 * samples + 10_000))

    def u() -> float:
        return next(uniforms)

    def step(i: int, q: list[int], extra: int) -> tuple[float, float, float]:
        n = C + i + extra
        move = i * p.mu_io_cpu * min(1.0, m / n) if i else 0.0
        busy = sum(1 for x in q if x)
        return move, busy * p.mu_disk, (p.mu_net * min(1.0, m / n) if extra else 0.0)

    def fire(i: int, q: list[int], move: float, disk: float) -> int:
        """One I/O event; returns the new i and updates q in place."""
        if u() * (move + disk) < move:
            q[int(u() * d)] += 1
            return i - 1
        busy = [k for k, x in enumerate(q) if x]
        q[busy[int(u() * len(busy))]] -= 1
        return i + 1

    i, q = w.io_tasks, [0] * d
    # Burn-in: 0.5 s of simulated time.
    t = 0.0
    while t < 0.5:
        move, disk, _ = step(i, q, 0)
        t += -math.log(1.0 - u()) / (move + disk)
        i = fire(i, q, move, disk)
    out = np.empty(samples)
    for s in range(samples):
        gap = -math.log(1.0 - u()) * 0.01
        while True:  # run the network until the next interrupt arrival
            move, disk, _ = step(i, q, 0)
            dt = -math.log(1.0 - u()) / (move + disk)
            if dt > gap:
                break  # memoryless: the state at the arrival is the current one
            gap -= dt
            i = fire(i, q, move, disk)
        ti, tq, elapsed = i, list(q), 0.0
        while True:  # the tagged interrupt on a copy of the state
            move, disk, kill = step(ti, tq, 1)
            total = move + disk + kill
            elapsed += -math.log(1.0 - u()) / total
            if u() * total < kill:
                break
            ti = fire(ti, tq, move, disk)
        out[s] = elapsed
    return out


@pytest.mark.parametrize(
    ("w", "p", "seed"),
    [
        (Workload(cpu_tasks=2, io_tasks=2, cores=1, disks=2), SX280, 11),
        (Workload(cpu_tasks=1, io_tasks=3, cores=2, disks=1), SLOW_DISK, 12),
    ],
)
def test_cdf_matches_simulation(w: Workload, p: HostProfile, seed: int) -> None:
    n = 3_000
    sample = np.sort(simulate(w, p, n, seed))
    r = interrupt_service_time(w, p)
    se = sample.std(ddof=1) / math.sqrt(n)
    assert abs(sample.mean() - r.mean_s) < 4 * se
    for level, q in r.quantiles_s.items():
        observed = np.searchsorted(sample, q, side="right") / n
        assert abs(observed - level) < 4 * math.sqrt(level * (1 - level) / n) + 1 / n
    model = r.cdf_at(sample)
    upper = np.arange(1, n + 1) / n
    gap = max(np.max(np.abs(upper - model)), np.max(np.abs(upper - 1 / n - model)))
    assert gap < math.sqrt(math.log(2 / 1e-4) / (2 * n))


def test_simulation_can_tell_a_wrong_model_apart() -> None:
    """The same checks reject the exponential approximation with the model's mean when
    the distribution is far from exponential (slow disks, many I/O tasks)."""
    w, p = Workload(cpu_tasks=0, io_tasks=6, cores=1, disks=1), SLOW_DISK
    n = 3_000
    sample = np.sort(simulate(w, p, n, 5))
    r = interrupt_service_time(w, p)
    exponential = 1 - np.exp(-sample / r.mean_s)
    model = r.cdf_at(sample)
    upper = np.arange(1, n + 1) / n
    bound = math.sqrt(math.log(2 / 1e-4) / (2 * n))
    assert np.max(np.abs(upper - model)) < bound
    assert np.max(np.abs(upper - exponential)) > bound
