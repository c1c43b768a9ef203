"""The end-system model against closed forms (SPEC sections 1-2).

References
----------
- C = 1, I = 0, m = 1: the interrupt shares one core with one task, so its service is
  exponential with rate mu_net / 2 and the mean is 2 / 41600 s for sx280-2007 (SPEC
  section 2, "Check"); mu = 20800 /s.
- I = 0: nothing ever changes while the interrupt is present, so the service time is
  exponential with rate r = mu_net * min(1, m / (C + 1)): CDF 1 - exp(-r t), mean 1/r,
  variance 1/r^2, p-quantile -ln(1 - p) / r.
- One disk: the I/O tasks at the processor form a birth-death chain on i = 0..I, with
  i -> i - 1 at lambda_i = i * mu_io_cpu * min(1, m / (C + i)) and i -> i + 1 at mu_disk
  while a task is at the disk, so pi(i) ~ prod_{j <= i} mu_disk / lambda_j (detailed
  balance; Kleinrock, *Queueing Systems* I, section 3.1).
- d disks, each visit picking one uniformly, all FCFS at mu_disk: a closed BCMP network
  (Baskett, Chandy, Muntz & Palacios, JACM 1975) with visit ratios 1 (processor) and
  1/d (each disk), so pi(i, q_1..q_d) ~ prod_{j <= i} 1/lambda_j * (d mu_disk)^-(I - i):
  the marginal of i carries the C(I - i + d - 1, d - 1) compositions of the disk tasks,
  and given k tasks at the disks a given disk is idle with probability (d-1)/(k+d-1),
  so E[busy disks | k] = d k / (k + d - 1).
- State counts: partitions of k <= I into at most d parts, enumerated here by brute
  force; for d = 2 the closed form floor((I + 2)^2 / 4).

Tolerances: the model's dense and tridiagonal paths are exact up to rounding, so
relative 1e-12 for means, variances and probabilities, 1e-11 for quantiles (Newton
stopped at 1e-13 of the survival function).
"""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest

from host import (
    HostProfile,
    Workload,
    end_system_nets,
    end_system_state_count,
    host_profile,
    interrupt_service_time,
)
from srn import reachability_graph

SX280 = host_profile("sx280-2007")
OTHER = HostProfile(
    name="test-host",
    mu_io_cpu=2_500.0,
    mu_disk=3_300.0,
    mu_net=12_000.0,
    buffer_packets=128,
    coalesce_packets=8,
    line_rate_bps=1e10,
    packet_payload_bytes=8_972,
)
RTOL = 1e-12


def test_one_cpu_task_halves_the_interrupt_rate() -> None:
    r = interrupt_service_time(Workload(cpu_tasks=1, io_tasks=0, cores=1))
    assert r.mean_s == pytest.approx(1 / (41_600 / 2), rel=1e-14)
    assert r.rate_per_s == pytest.approx(20_800.0, rel=1e-14)
    assert r.n_states == 1
    assert r.n_transient_states == 1


@pytest.mark.parametrize(
    ("cpu", "cores"),
    [(0, 1), (1, 1), (4, 1), (3, 2), (7, 4), (2, 8), (255, 256), (1000, 256), (999, 3)],
)
@pytest.mark.parametrize("profile", [SX280, OTHER])
def test_no_io_tasks_is_exponential(cpu: int, cores: int, profile: HostProfile) -> None:
    rate = profile.mu_net * min(1.0, cores / (cpu + 1))
    r = interrupt_service_time(Workload(cpu_tasks=cpu, io_tasks=0, cores=cores), profile)
    assert r.mean_s == pytest.approx(1 / rate, rel=RTOL)
    assert r.rate_per_s == pytest.approx(rate, rel=RTOL)
    assert r.variance_s2 == pytest.approx(1 / rate**2, rel=RTOL)
    np.testing.assert_allclose(r.cdf, 1 - np.exp(-rate * r.times_s), rtol=0, atol=1e-13)
    for level, q in r.quantiles_s.items():
        assert q == pytest.approx(-math.log(1 - level) / rate, rel=1e-11)
    # The default grid ends at the 99.9 % quantile.
    assert r.times_s[0] == 0.0
    assert r.times_s[-1] == pytest.approx(-math.log(1e-3) / rate, rel=1e-11)
    alpha, T = r.phase_type()
    np.testing.assert_allclose(alpha, [1.0])
    np.testing.assert_allclose(T.toarray(), [[-rate]], rtol=RTOL)


def birth_death_marginal(cpu: int, io: int, cores: int, p: HostProfile) -> np.ndarray:
    """pi(i) for one disk, from detailed balance."""
    lam = [i * p.mu_io_cpu * min(1.0, cores / (cpu + i)) for i in range(1, io + 1)]
    weights = np.cumprod([1.0] + [p.mu_disk / x for x in lam])
    return weights / weights.sum()


def product_form_marginal(cpu: int, io: int, cores: int, disks: int, p: HostProfile):
    """pi(i) for d disks from the BCMP product form, computed in logs."""
    logs = []
    for i in range(io + 1):
        k = io - i
        log_w = -sum(
            math.log(j * p.mu_io_cpu * min(1.0, cores / (cpu + j))) for j in range(1, i + 1)
        )
        log_w += -k * math.log(disks * p.mu_disk) + math.log(math.comb(k + disks - 1, disks - 1))
        logs.append(log_w)
    logs = np.array(logs)
    w = np.exp(logs - logs.max())
    return w / w.sum()


@pytest.mark.parametrize(
    ("cpu", "io", "cores"),
    [
        (1, 1, 1),
        (2, 3, 1),
        (4, 3, 1),
        (0, 5, 2),
        (3, 6, 4),
        (10, 40, 8),
        (0, 200, 1),
        (500, 500, 256),
    ],
)
@pytest.mark.parametrize("profile", [SX280, OTHER])
def test_one_disk_occupancy_is_the_birth_death_solution(cpu, io, cores, profile) -> None:
    w = Workload(cpu_tasks=cpu, io_tasks=io, cores=cores)
    r = interrupt_service_time(w, profile)
    pi = birth_death_marginal(cpu, io, cores, profile)
    occ = r.occupancy
    np.testing.assert_allclose(occ.io_at_processor_distribution, pi, rtol=1e-10, atol=1e-300)
    i = np.arange(io + 1)
    assert occ.io_tasks_at_processor == pytest.approx(pi @ i, rel=RTOL)
    assert occ.io_tasks_at_disks == pytest.approx(io - pi @ i, rel=RTOL)
    assert occ.cpu_tasks_at_processor == cpu
    assert occ.processor_utilisation == pytest.approx(
        pi @ np.minimum(cpu + i, cores) / cores, rel=RTOL
    )
    assert occ.disk_utilisation == pytest.approx(1 - pi[-1], rel=RTOL)
    assert occ.io_throughput_per_s == pytest.approx(profile.mu_disk * (1 - pi[-1]), rel=RTOL)
    assert r.n_states == io + 1
    assert r.steady_state_residual < 1e-9 * profile.mu_io_cpu * max(io, 1)


@pytest.mark.parametrize(
    ("cpu", "io", "cores", "disks"),
    [(1, 2, 1, 2), (2, 3, 1, 3), (0, 6, 2, 4), (3, 5, 1, 16), (2, 9, 2, 3), (0, 14, 4, 16)],
)
def test_many_disks_occupancy_is_the_product_form(cpu, io, cores, disks) -> None:
    r = interrupt_service_time(Workload(cpu, io, cores, disks))
    pi = product_form_marginal(cpu, io, cores, disks, SX280)
    occ = r.occupancy
    np.testing.assert_allclose(occ.io_at_processor_distribution, pi, rtol=1e-10, atol=1e-300)
    k = io - np.arange(io + 1)
    busy = np.where(k > 0, disks * k / np.maximum(k + disks - 1, 1), 0.0)
    assert occ.disk_utilisation == pytest.approx(pi @ busy / disks, rel=1e-10)
    assert occ.io_throughput_per_s == pytest.approx(SX280.mu_disk * (pi @ busy), rel=1e-10)


def partitions_brute_force(total: int, parts: int) -> int:
    """Multisets of `parts` queue lengths (zeros allowed) summing to `total`."""
    return sum(
        1
        for q in itertools.combinations_with_replacement(range(total + 1), parts)
        if sum(q) == total
    )


@pytest.mark.parametrize(("io", "disks"), [(0, 1), (3, 1), (4, 2), (7, 3), (6, 5), (5, 16)])
def test_state_count_is_the_partition_count(io: int, disks: int) -> None:
    expected = sum(partitions_brute_force(k, disks) for k in range(io + 1))
    w = Workload(cpu_tasks=1, io_tasks=io, disks=disks)
    assert end_system_state_count(w) == expected
    steady, tagged = end_system_nets(w)
    assert reachability_graph(steady).n_states == expected
    # The tagged net reaches every configuration plus the absorbing marking A.
    assert reachability_graph(tagged).n_states == expected + 1
    r = interrupt_service_time(w)
    assert r.n_states == expected
    assert r.n_transient_states == expected


@pytest.mark.parametrize("io", [0, 1, 10, 99, 1000])
def test_state_count_closed_forms(io: int) -> None:
    assert end_system_state_count(Workload(0, io, disks=1)) == io + 1
    assert end_system_state_count(Workload(0, io, disks=2)) == (io + 2) ** 2 // 4
    # C and m never change the marking space: they are parameters of the rates.
    assert end_system_state_count(Workload(1000 - io, io, cores=256, disks=2)) == (io + 2) ** 2 // 4


def test_paper_grid_values_are_ordered_like_the_paper() -> None:
    """Fig. 3's shape: the rate falls with load, faster with C than with I."""
    rate = {
        (c, i): interrupt_service_time(Workload(c, i)).rate_per_s
        for c in range(1, 5)
        for i in range(4)
    }
    for c in range(1, 5):
        for i in range(4):
            if c < 4:
                assert rate[c + 1, i] < rate[c, i]
            if i < 3:
                assert rate[c, i + 1] < rate[c, i]
    # Adding a CPU-bound task costs more than adding an I/O-bound one.
    assert rate[2, 1] < rate[1, 2]
    assert rate[4, 0] == pytest.approx(41_600 / 5, rel=RTOL)
