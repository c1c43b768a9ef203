"""The interrupt service rate by direct elimination (:mod:`host.service_rate`).

References:

* the exact chains in 50-digit arithmetic (``exact_moments`` of ``test_small_chain``):
  the SRN engine's own states and edge rates, solved by dense LU in mpmath, with no
  use of this module's state enumeration or eliminations.  Both eliminations here are
  subtraction-free (each pivot a sum of rates), so E[S] must agree to 1e-13 relative
  however far apart the rates (the engine's compiled solve is held to the same bound);
* closed forms (SPEC section 2): with no I/O-bound task the interrupt shares the ``m``
  cores with the C CPU-bound tasks, ``mu = mu_net * min(1, m / (C + 1))``, to the two
  roundings of ``1 / E[S]``;
* :func:`host.interrupt_service_time`, which reports this E[S] for chains of up to
  ``DIRECT_MAX_STATES`` states (so bit for bit) and hands larger ones back.
"""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from rate_strategies import log_uniform
from test_small_chain import exact_moments

from host import (
    HostProfile,
    Workload,
    WorkloadError,
    end_system_state_count,
    host_profile,
    interrupt_service_rate,
    interrupt_service_time,
)
from host.service_rate import DIRECT_MAX_STATES

SX280 = host_profile("sx280-2007")


# 60 fixed draws (150 random ones took 14 s of the suite, each against 50-digit chains);
# derandomized as the small-chain accuracy test is: CI must not find a new one at random.
@settings(max_examples=60, deadline=None, derandomize=True)
@given(
    cpu=st.integers(0, 12),
    io=st.integers(0, 8),
    cores=st.integers(1, 4),
    disks=st.integers(1, 4),
    mu_io_cpu=log_uniform(1e-3, 1e9),
    mu_disk=log_uniform(1e-3, 1e9),
    mu_net=log_uniform(1e-3, 1e9),
)
def test_the_mean_is_the_exact_chains_to_1e13(
    cpu: int, io: int, cores: int, disks: int, mu_io_cpu: float, mu_disk: float, mu_net: float
) -> None:
    w = Workload(cpu, io, cores=cores, disks=disks)
    p = SX280.replace(mu_io_cpu=mu_io_cpu, mu_disk=mu_disk, mu_net=mu_net)
    mean, _ = exact_moments(w, p)
    assert 1.0 / interrupt_service_rate(w, p) == pytest.approx(mean, rel=1e-13)


@pytest.mark.parametrize("cpu", [0, 1, 2, 5, 40])
@pytest.mark.parametrize("cores", [1, 2, 8])
def test_without_io_tasks_the_interrupt_gets_its_share_of_the_cores(cpu: int, cores: int) -> None:
    rate = interrupt_service_rate(Workload(cpu, 0, cores=cores), SX280)
    # 1 / E[S] with E[S] = 1 / (mu_net * share): two roundings, so to 2 ulps.
    assert rate == pytest.approx(SX280.mu_net * min(1.0, cores / (cpu + 1)), rel=5e-16)


@pytest.mark.parametrize(
    "w",
    [
        Workload(2, 1),
        Workload(4, 3),
        Workload(0, 3, cores=2),
        Workload(3, 7, cores=2, disks=3),
        Workload(1, 10, disks=16),
        Workload(2, 40, cores=4, disks=2),  # 441 states: the engine's
    ],
)
def test_interrupt_service_time_reports_the_same_rate_bit_for_bit(w: Workload) -> None:
    assert interrupt_service_rate(w, SX280) == interrupt_service_time(w, SX280).rate_per_s


def test_a_chain_beyond_the_direct_size_goes_to_the_engine() -> None:
    w = Workload(2, 40, cores=4, disks=2)
    assert end_system_state_count(w) > DIRECT_MAX_STATES
    assert interrupt_service_rate(w, "sx280-2007") == interrupt_service_time(w).rate_per_s


def test_a_profile_name_or_object_gives_the_same_rate() -> None:
    w = Workload(2, 2)
    assert interrupt_service_rate(w) == interrupt_service_rate(w, SX280)
    assert round(1e6 / interrupt_service_rate(w), 3) == 87.383  # the docstring's value


@pytest.mark.parametrize(
    ("workload", "profile", "field"),
    [
        ("2,1", SX280, "workload"),
        (Workload(2, 1), "no-such-host", "profile"),
        (Workload(2, 1), object(), "profile"),
    ],
)
def test_bad_arguments_name_their_field(
    workload: object, profile: HostProfile | str, field: str
) -> None:
    with pytest.raises(WorkloadError) as caught:
        interrupt_service_rate(workload, profile)  # type: ignore[arg-type]
    assert caught.value.field == field
