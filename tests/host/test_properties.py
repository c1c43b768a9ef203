"""Hypothesis invariants of the interrupt service time over random workloads and hosts.

- Monotonicity: the mean service time never decreases when a CPU-bound or an I/O-bound
  task is added, and never increases when a core is added (more tasks can only take
  processor share from the interrupt; more cores can only give it).
- The distribution is a distribution: the CDF on the grid is non-decreasing within
  [0, 1] and starts at 0; the variance is positive.
- Quantiles agree with the CDF itself: P(X <= q_p) = p, checked with the survival
  function and with the engine's own root finder on it (``AbsorptionTime.quantile``).
- The occupancy adds up: I/O tasks at the processor plus at the disks is I, the
  marginal of i sums to 1, utilisations lie in [0, 1].

Tolerances: relative 1e-10 on the monotone comparisons (the model is exact to rounding),
absolute 1e-10 on probabilities.
"""

from __future__ import annotations

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from rate_strategies import log_uniform

from host import HostProfile, Workload, interrupt_service_time

SETTINGS = settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@st.composite
def hosts(draw: st.DrawFn) -> HostProfile:
    return HostProfile(
        name="random-host",
        mu_io_cpu=draw(log_uniform(50.0, 1e5)),
        mu_disk=draw(log_uniform(50.0, 1e5)),
        mu_net=draw(log_uniform(1e3, 1e6)),
        buffer_packets=64,
        coalesce_packets=6,
        line_rate_bps=1e9,
        packet_payload_bytes=1468,
    )


@st.composite
def workloads(draw: st.DrawFn) -> Workload:
    return Workload(
        cpu_tasks=draw(st.integers(0, 6)),
        io_tasks=draw(st.integers(0, 5)),
        cores=draw(st.integers(1, 4)),
        disks=draw(st.integers(1, 3)),
    )


def mean(w: Workload, host: HostProfile) -> float:
    return interrupt_service_time(w, host).mean_s


@SETTINGS
@given(w=workloads(), host=hosts())
def test_mean_grows_with_load_and_falls_with_cores(w: Workload, host: HostProfile) -> None:
    base = mean(w, host)
    more_cpu = Workload(w.cpu_tasks + 1, w.io_tasks, w.cores, w.disks)
    more_io = Workload(w.cpu_tasks, w.io_tasks + 1, w.cores, w.disks)
    more_cores = Workload(w.cpu_tasks, w.io_tasks, w.cores + 1, w.disks)
    assert mean(more_cpu, host) >= base * (1 - 1e-10)
    assert mean(more_io, host) >= base * (1 - 1e-10)
    assert mean(more_cores, host) <= base * (1 + 1e-10)
    # No load beyond the interrupt and at least as many cores as tasks: 1 / mu_net.
    assert base >= (1 - 1e-10) / host.mu_net


@SETTINGS
@given(w=workloads(), host=hosts())
def test_distribution_and_quantiles_are_consistent(w: Workload, host: HostProfile) -> None:
    levels = (0.05, 0.5, 0.9, 0.99, 0.999)
    r = interrupt_service_time(w, host, quantiles=levels, grid_points=51)
    cdf = r.cdf
    assert cdf[0] == 0.0
    assert np.all(np.diff(cdf) >= -1e-12)
    assert np.all((cdf >= 0) & (cdf <= 1))
    assert r.variance_s2 > 0
    assert abs(r.rate_per_s * r.mean_s - 1) < 1e-15
    qs = [r.quantiles_s[level] for level in levels]
    assert qs == sorted(qs)
    for level, q in zip(levels, qs, strict=True):
        assert abs(r.cdf_at([q])[0] - level) < 1e-10
        assert abs(r.absorption.quantile(level) - q) <= 1e-9 * q
    # The grid's last point is the 99.9 % quantile.
    assert abs(r.times_s[-1] - r.quantiles_s[0.999]) <= 1e-12 * r.times_s[-1]


@SETTINGS
@given(w=workloads(), host=hosts())
def test_occupancy_adds_up(w: Workload, host: HostProfile) -> None:
    occ = interrupt_service_time(w, host).occupancy
    assert abs(occ.io_tasks_at_processor + occ.io_tasks_at_disks - w.io_tasks) < 1e-9
    assert abs(sum(occ.io_at_processor_distribution) - 1) < 1e-12
    assert len(occ.io_at_processor_distribution) == w.io_tasks + 1
    assert 0 <= occ.processor_utilisation <= 1 + 1e-12
    assert 0 <= occ.disk_utilisation <= 1 + 1e-12
    assert occ.cpu_tasks_at_processor == w.cpu_tasks
    # The CPU-bound tasks never leave, so at least min(C, m) cores are always busy.
    floor = min(w.cpu_tasks, w.cores) / w.cores
    assert occ.processor_utilisation >= floor * (1 - 1e-12)
    if w.io_tasks == 0:
        assert abs(occ.processor_utilisation - floor) < 1e-12
