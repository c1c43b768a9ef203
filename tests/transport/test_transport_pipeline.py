"""The composed pipeline (issue #5): workload -> interrupt service -> NIC loss -> rate.

References, independent of the pipeline's own composition:

* the interrupt service time of SPEC sections 1-2 built here by hand as a small CTMC
  (one disk, one core: the number i of I/O tasks at the processor is the whole state),
  then composed with ``queues`` and ``transport`` directly;
* with I = 0 the service time is exponential with rate ``mu_net * min(1, m / (C + 1))``
  (SPEC section 2), a closed form: the phase-type NIC must then give the exponential
  NIC's answer, through a different queue algorithm (level censoring vs cut recursion);
* the shapes the paper reports for its experiment (Fig. 3 and Section IV: 1 Gbps,
  500 MB, 100 ms, C = 1..4, I = 0..3): the rate falls with load, faster with C than
  with I, and is below the line rate whenever C > 1; at 10 Gbps the end system is the
  bottleneck whatever the workload.
"""

from __future__ import annotations

import json
from functools import cache

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import queues
import transport
import transport.pipeline
from host import Workload, WorkloadError, host_profile, interrupt_service_time
from transport import (
    PipelineResult,
    TransportParameterError,
    effective_bottleneck_rate,
    workload_bottleneck_rate,
)

SIZE = 500_000_000  # bytes: the paper's file
DELAY = 0.1  # s: the paper's one-way propagation delay
PROFILE = "sx280-2007"
SERVICES = ("exponential", "phase-type")
# SPEC "Units": the sx280-2007 profile in SI units.
MU_IO_CPU, MU_DISK, MU_NET = 4600.0, 1010.0, 41600.0
K, N, LINE, PKT = 64, 6, 1e9, 1468


@cache
def run(c: int, i: int, service: str = "exponential", profile: str = PROFILE) -> PipelineResult:
    """The pipeline on the paper's transfer (cached: the grid is shared by several tests)."""
    return workload_bottleneck_rate(
        Workload(cpu_tasks=c, io_tasks=i),
        profile,
        file_size_bytes=SIZE,
        propagation_delay_s=DELAY,
        nic_service=service,
    )


def grid(service: str) -> np.ndarray:
    """Effective bottleneck rates (bit/s) over the paper's grid: [C - 1, I], C 1..4, I 0..3."""
    return np.array(
        [[run(c, i, service).bottleneck.rate_bps for i in range(4)] for c in (1, 2, 3, 4)]
    )


def tagged_customer(c: int, i_tasks: int) -> tuple[np.ndarray, np.ndarray]:
    """(alpha, T) of the interrupt service time, one core and one disk, built by hand.

    State: i, the I/O tasks at the processor (0..I); the other I - i are at the disk
    (FCFS, one server).  Fig. 1a (SPEC section 1): i -> i - 1 at i * mu_io_cpu / (C + i),
    i -> i + 1 at mu_disk when the disk is busy; its steady state is the distribution an
    arriving interrupt sees (PASTA).  Fig. 1b (section 2): the same moves with
    n = C + i + 1 sharing the processor, and completion at mu_net / (C + i + 1).
    """
    states = np.arange(i_tasks + 1)

    def generator(extra: int) -> np.ndarray:
        share = 1.0 / np.maximum(c + states + extra, 1)
        Q = np.zeros((states.size, states.size))
        Q[states[1:], states[1:] - 1] = states[1:] * MU_IO_CPU * np.minimum(1.0, share[1:])
        Q[states[:-1], states[:-1] + 1] = MU_DISK
        return Q

    Q = generator(0)
    A = (Q - np.diag(Q.sum(axis=1))).T
    A[-1] = 1.0
    rhs = np.zeros(states.size)
    rhs[-1] = 1.0
    alpha = np.linalg.solve(A, rhs)
    Qt = generator(1)
    completion = MU_NET / (c + states + 1)
    T = Qt - np.diag(Qt.sum(axis=1) + completion)
    return alpha, T


def composed_by_hand(c: int, i: int, service: str) -> tuple[float, transport.BottleneckRate]:
    """Stages 2-3 called directly on the hand-built stage 1: (mu, bottleneck)."""
    alpha, T = tagged_customer(c, i)
    mean = float(alpha @ np.linalg.solve(-T, np.ones(alpha.size)))
    mu = 1.0 / mean
    bits = 8.0 * PKT
    if service == "exponential":

        def loss(r: np.ndarray) -> np.ndarray:
            return queues.loss_probability(r / bits, mu, K, N)
    else:

        def loss(r: np.ndarray) -> np.ndarray:
            return queues.bulk_service_queue(
                r / bits, None, K, N, phase_type=(alpha, T)
            ).loss_probability

    best = effective_bottleneck_rate(
        loss, line_rate_bps=LINE, file_size_bytes=SIZE, propagation_delay_s=DELAY
    )
    return mu, best


# -- the paper's experiment ---------------------------------------------------------


@pytest.mark.parametrize("service", SERVICES)
def test_paper_grid_rate_falls_with_load(service: str) -> None:
    rates = grid(service)
    res = run(1, 0, service).bottleneck.resolution_bps
    # Non-increasing in C (down the rows) and in I (along the columns), to the search's
    # 0.1 Mbps resolution; and it does fall overall.
    assert np.all(np.diff(rates, axis=0) <= res), rates
    assert np.all(np.diff(rates, axis=1) <= res), rates
    assert rates[-1, -1] < rates[0, 0] - 100e6
    for r in (run(c, i, service).bottleneck for c in (1, 2, 3, 4) for i in range(4)):
        assert 0 < r.rate_bps <= LINE
        assert 0 <= r.loss < 1 and np.isfinite(r.transfer_time_s)


@pytest.mark.parametrize("service", SERVICES)
def test_paper_grid_falls_faster_with_cpu_than_io_tasks(service: str) -> None:
    # Section IV: "The drop in the bottleneck rate is sharper with increasing number of
    # CPU-bound tasks than increasing I/O-bound tasks."  Cell by cell: one more CPU-bound
    # task costs at least as much rate as one more I/O-bound task ...
    rates = grid(service)
    res = run(1, 0, service).bottleneck.resolution_bps
    drop_c = rates[:-1, :-1] - rates[1:, :-1]
    drop_i = rates[:-1, :-1] - rates[:-1, 1:]
    assert np.all(drop_c >= drop_i - res), (drop_c, drop_i)
    # ... and across the grid, three more CPU-bound tasks cost far more than three more
    # I/O-bound ones.
    assert rates[0, 0] - rates[3, 0] > 2 * (rates[0, 0] - rates[0, 3])


@pytest.mark.parametrize("service", SERVICES)
def test_paper_grid_below_line_rate_when_more_than_one_cpu_task(service: str) -> None:
    # Section IV: "For all cases in which the number of CPU-bound tasks is greater than
    # one, the effective bottleneck rate is lesser than the line rate of 1 Gbps."
    for c in (2, 3, 4):
        for i in range(4):
            best = run(c, i, service).bottleneck
            assert best.limited_by == "end-system"
            assert best.rate_bps < LINE - best.resolution_bps
    # One CPU-bound task alone: mu = 20,800/s, enough for the line rate (SPEC section 2).
    assert run(1, 0, service).bottleneck.limited_by == "line-rate"


@pytest.mark.parametrize("service", SERVICES)
def test_ten_gigabit_line_is_end_system_limited_for_every_workload(service: str) -> None:
    # Section IV: "In a system setup of a line rate of 10 Gbps, the receiving end-system
    # would be a bottleneck irrespective of the workload."  Even C = 1, I = 0 serves at
    # most N * mu = 6 * 20,800 packets/s = 1.47 Gbps.
    host = host_profile(PROFILE).replace(line_rate_bps=10e9)
    for c, i in ((1, 0), (4, 3)):
        r = workload_bottleneck_rate(
            Workload(cpu_tasks=c, io_tasks=i),
            host,
            file_size_bytes=SIZE,
            propagation_delay_s=DELAY,
            nic_service=service,
        )
        assert r.profile.line_rate_bps == 10e9
        assert r.bottleneck.limited_by == "end-system"
        assert r.bottleneck.rate_bps < 1.5e9


@pytest.mark.parametrize("service", SERVICES)
def test_very_fast_host_gives_the_line_rate(service: str) -> None:
    # Every host rate 10^4 times the sx280-2007's: the heaviest paper workload then
    # serves interrupts far faster than 1 Gbps of packets arrive, so nothing is lost
    # that matters and the line rate (the top of the search interval) wins.
    base = host_profile(PROFILE)
    fast = base.replace(
        mu_io_cpu=base.mu_io_cpu * 1e4, mu_disk=base.mu_disk * 1e4, mu_net=base.mu_net * 1e4
    )
    r = workload_bottleneck_rate(
        Workload(cpu_tasks=4, io_tasks=3),
        fast,
        file_size_bytes=SIZE,
        propagation_delay_s=DELAY,
        nic_service=service,
    )
    assert r.bottleneck.rate_bps == LINE
    assert r.bottleneck.limited_by == "line-rate"
    assert r.bottleneck.rounds <= 2


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(c=st.integers(0, 6), i=st.integers(0, 4), more_cpu=st.booleans())
def test_rate_does_not_rise_with_load(c: int, i: int, more_cpu: bool) -> None:
    # One more task of either kind never raises the rate (to the 0.1 Mbps resolution):
    # the interrupt service time only gets longer (srn's property), the loss curve only
    # higher, so T only higher at every rate.
    before = run(c, i).bottleneck
    after = run(c + more_cpu, i + (not more_cpu)).bottleneck
    assert after.rate_bps <= before.rate_bps + before.resolution_bps
    assert after.transfer_time_s >= before.transfer_time_s * (1 - 1e-12)


# -- the composition itself ---------------------------------------------------------


@pytest.mark.parametrize("service", SERVICES)
@pytest.mark.parametrize(("c", "i"), [(1, 0), (2, 1), (3, 3), (4, 2)])
def test_matches_stages_composed_independently(c: int, i: int, service: str) -> None:
    # Reference: stage 1 built by hand (tagged_customer), stages 2-3 called directly.
    # Tolerances: mu 1e-10 relative (two linear solves of <= 4 states); the rate within
    # the search's 0.1 Mbps resolution (a deterministic search on loss curves that agree
    # to ~1e-12); T 1e-9 relative.
    r = run(c, i, service)
    mu, best = composed_by_hand(c, i, service)
    assert r.service.rate_per_s == pytest.approx(mu, rel=1e-10)
    assert r.service.mean_s == pytest.approx(1 / mu, rel=1e-10)
    assert abs(r.bottleneck.rate_bps - best.rate_bps) <= best.resolution_bps
    assert r.bottleneck.transfer_time_s == pytest.approx(best.transfer_time_s, rel=1e-9)
    assert r.bottleneck.limited_by == best.limited_by


@pytest.mark.parametrize("service", SERVICES)
def test_intermediate_results_are_the_stages_outputs(service: str) -> None:
    # The result carries each stage's own output: stage 1 as srn computes it, stage 2 at
    # the chosen rate with lambda = B_send / (8 * S_pkt), stage 3's loss equal to it.
    r = run(3, 2, service)
    direct = interrupt_service_time(Workload(cpu_tasks=3, io_tasks=2), PROFILE)
    assert r.service.mean_s == direct.mean_s
    assert r.service.rate_per_s == direct.rate_per_s
    assert r.workload == Workload(cpu_tasks=3, io_tasks=2)
    assert r.profile == host_profile(PROFILE)
    assert r.nic_service == service
    q = r.queue_at_rate
    lam = r.bottleneck.rate_bps / (8 * PKT)
    assert q.arrival_rate[0] == pytest.approx(lam, rel=1e-15)
    assert (q.capacity, q.batch) == (K, N)
    assert q.loss_probability[0] == pytest.approx(r.bottleneck.loss, rel=1e-12)
    assert q.throughput_bps[0] == pytest.approx(r.bottleneck.rate_bps * (1 - r.bottleneck.loss))
    if service == "exponential":
        ref = queues.bulk_service_queue(lam, direct.rate_per_s, K, N)
    else:
        ref = queues.bulk_service_queue(lam, None, K, N, phase_type=direct.phase_type())
    np.testing.assert_allclose(q.occupancy_distribution, ref.occupancy_distribution, atol=1e-15)
    # The plotted curve is T at the loss stage 2 gives on the curve's rates.
    curve = r.bottleneck.curve
    assert curve.send_rate_bps.size == 200 and curve.send_rate_bps[-1] == LINE
    t = transport.transfer_time(curve.send_rate_bps, curve.loss, SIZE, DELAY)
    np.testing.assert_allclose(curve.total_s, t.total_s, rtol=1e-12)


@pytest.mark.parametrize(("c", "m"), [(1, 1), (2, 1), (4, 1), (3, 2), (4, 8)])
def test_no_io_tasks_phase_type_equals_exponential(c: int, m: int) -> None:
    # With I = 0 the interrupt service is exponential with rate mu_net * min(1, m/(C+1))
    # (SPEC section 2): one phase, so the phase-type NIC is the exponential NIC, solved
    # by another algorithm.  Both must reproduce the closed-form mu composed by hand.
    w = Workload(cpu_tasks=c, io_tasks=0, cores=m)
    mu = MU_NET * min(1.0, m / (c + 1))
    loss = lambda r: queues.loss_probability(r / (8 * PKT), mu, K, N)  # noqa: E731
    ref = effective_bottleneck_rate(
        loss, line_rate_bps=LINE, file_size_bytes=SIZE, propagation_delay_s=DELAY
    )
    for service in SERVICES:
        r = workload_bottleneck_rate(
            w, PROFILE, file_size_bytes=SIZE, propagation_delay_s=DELAY, nic_service=service
        )
        assert r.service.rate_per_s == pytest.approx(mu, rel=1e-12)
        assert r.service.phase_type()[0].size == 1
        assert abs(r.bottleneck.rate_bps - ref.rate_bps) <= ref.resolution_bps
        assert r.bottleneck.transfer_time_s == pytest.approx(ref.transfer_time_s, rel=1e-9)
        assert r.bottleneck.loss == pytest.approx(ref.loss, rel=1e-9, abs=1e-300)


def test_phase_type_and_exponential_differ_but_agree_in_shape() -> None:
    # With I/O tasks the service time is no longer exponential (squared coefficient of
    # variation != 1), so the two NIC models give different loss curves; both are sane
    # and within a modest distance of each other on the paper's grid.
    r_exp, r_ph = run(4, 3, "exponential"), run(4, 3, "phase-type")
    scv = r_ph.service.variance_s2 / r_ph.service.mean_s**2
    assert abs(scv - 1) > 1e-3
    assert r_exp.service is not r_ph.service
    assert r_exp.service.rate_per_s == r_ph.service.rate_per_s
    assert r_exp.queue_at_rate.method == "cut-recursion"
    assert r_ph.queue_at_rate.method == "level-censoring"
    ratio = grid("phase-type") / grid("exponential")
    assert np.all((ratio > 0.8) & (ratio < 1.25)), ratio


def test_to_dict_is_json_without_infinity() -> None:
    r = run(2, 1, "phase-type")
    d = r.to_dict()
    text = json.dumps(d, allow_nan=False)
    assert json.loads(text)["effective_bottleneck_rate_bps"] == r.bottleneck.rate_bps
    assert d["limited_by"] == r.bottleneck.limited_by == "end-system"
    assert d["interrupt_service_rate_per_s"] == r.service.rate_per_s
    assert d["loss_probability"] == r.bottleneck.loss
    assert d["transfer_time_s"] == r.bottleneck.transfer_time_s
    assert d["nic_service"] == "phase-type"
    assert d["workload"]["cpu_tasks"] == 2
    assert len(d["nic_queue"]["occupancy_distribution"]) == K + 1
    assert len(d["bottleneck"]["curve"]["send_rate_bps"]) == 200


def test_service_time_grid_and_curve_points_are_passed_on() -> None:
    times = np.linspace(0.0, 1e-3, 11)
    r = workload_bottleneck_rate(
        Workload(cpu_tasks=2, io_tasks=2),
        file_size_bytes=SIZE,
        propagation_delay_s=DELAY,
        curve_points=50,
        service_time_grid=times,
    )
    np.testing.assert_array_equal(r.service.absorption.times, times)
    assert r.bottleneck.curve.send_rate_bps.size == 50
    # Same workload, same answer: the CDF grid changes nothing, and the plotting grid
    # (part of the search's first scan) moves the rate by less than the search's
    # resolution, T by less than the change over one resolution step (T ~ 1 / rate).
    ref = run(2, 2).bottleneck
    assert abs(r.bottleneck.rate_bps - ref.rate_bps) <= ref.resolution_bps
    assert r.bottleneck.transfer_time_s == pytest.approx(
        ref.transfer_time_s, rel=ref.resolution_bps / ref.rate_bps
    )
    assert r.service.mean_s == run(2, 2).service.mean_s


# -- errors -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("kwargs", "parameter"),
    [
        ({"nic_service": "gamma"}, "nic_service"),
        ({"nic_service": None}, "nic_service"),
        ({"file_size_bytes": 0}, "file_size_bytes"),
        ({"file_size_bytes": 1.5}, "file_size_bytes"),
        ({"propagation_delay_s": 0.0}, "propagation_delay_s"),
        ({"propagation_delay_s": float("nan")}, "propagation_delay_s"),
        ({"curve_points": 1}, "curve_points"),
    ],
)
def test_transfer_errors_name_the_parameter_before_any_solve(
    kwargs: dict, parameter: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    def must_not_run(*args: object, **kw: object) -> None:
        raise AssertionError("stage 1 ran before the arguments were checked")

    monkeypatch.setattr(transport.pipeline, "interrupt_service_time", must_not_run)
    args = {"file_size_bytes": SIZE, "propagation_delay_s": DELAY} | kwargs
    with pytest.raises(TransportParameterError) as err:
        workload_bottleneck_rate(Workload(cpu_tasks=1, io_tasks=0), PROFILE, **args)
    assert err.value.parameter == parameter
    assert parameter in str(err.value)


def test_unknown_profile_is_a_workload_error_naming_the_field() -> None:
    with pytest.raises(WorkloadError) as err:
        workload_bottleneck_rate(
            Workload(cpu_tasks=1, io_tasks=0),
            "no-such-host",
            file_size_bytes=SIZE,
            propagation_delay_s=DELAY,
        )
    assert err.value.field == "profile"


def test_a_workload_that_is_not_a_workload_is_rejected() -> None:
    with pytest.raises(WorkloadError) as err:
        workload_bottleneck_rate(
            {"cpu_tasks": 1, "io_tasks": 0},  # type: ignore[arg-type]
            file_size_bytes=SIZE,
            propagation_delay_s=DELAY,
        )
    assert err.value.field == "workload"


def test_impossible_nic_is_rejected_with_the_field_name() -> None:
    # A buffer smaller than the coalescing batch cannot hold one batch.  Either the
    # profile rejects it (WorkloadError.field) or the queue does
    # (queues.QueueParameterError.parameter); the error names the field either way.
    with pytest.raises((WorkloadError, queues.QueueParameterError)) as err:
        host = host_profile(PROFILE).replace(buffer_packets=4, coalesce_packets=6)
        workload_bottleneck_rate(
            Workload(cpu_tasks=1, io_tasks=0), host, file_size_bytes=SIZE, propagation_delay_s=DELAY
        )
    name = getattr(err.value, "field", None) or getattr(err.value, "parameter", None)
    assert name in {"buffer_packets", "coalesce_packets", "capacity"}


def test_queue_at_rate_is_solved_on_first_access() -> None:
    # The rate and the loss there do not need the full queue solution (GET
    # /bottleneck-rate never asks for it); it is solved when read, then kept.
    r = workload_bottleneck_rate(
        Workload(cpu_tasks=2, io_tasks=1), PROFILE, file_size_bytes=SIZE, propagation_delay_s=DELAY
    )
    assert "queue_at_rate" not in vars(r)
    q = r.queue_at_rate
    assert r.queue_at_rate is q
    assert q.loss_probability[0] == pytest.approx(r.bottleneck.loss, rel=1e-12)


# -- the paper's answer alone (transport.paper_bottleneck_rate) ---------------------------


@pytest.mark.parametrize(
    "w",
    [
        Workload(1, 0),
        Workload(2, 1),
        Workload(4, 3),
        Workload(3, 7, cores=2, disks=3),
        Workload(2, 40, cores=4, disks=2),  # beyond the direct elimination: the engine's
    ],
)
@pytest.mark.parametrize(("size", "delay"), [(SIZE, DELAY), (30_000_000, 0.01)])
def test_the_paper_answer_alone_is_the_pipelines_bit_for_bit(
    w: Workload, size: int, delay: float
) -> None:
    """Reference: workload_bottleneck_rate with the exponential NIC (the whole
    distribution and the queue object): mu and every field of the answer, to the bit."""
    whole = workload_bottleneck_rate(w, PROFILE, file_size_bytes=size, propagation_delay_s=delay)
    mu, best = transport.paper_bottleneck_rate(
        w, PROFILE, file_size_bytes=size, propagation_delay_s=delay
    )
    assert mu == whole.service.rate_per_s
    assert best.to_dict() == whole.bottleneck.to_dict()


@pytest.mark.parametrize(
    ("kwargs", "parameter"),
    [
        ({"file_size_bytes": 0, "propagation_delay_s": DELAY}, "file_size_bytes"),
        ({"file_size_bytes": SIZE, "propagation_delay_s": -1.0}, "propagation_delay_s"),
        (
            {"file_size_bytes": SIZE, "propagation_delay_s": DELAY, "curve_points": 1},
            "curve_points",
        ),
    ],
)
def test_the_paper_answer_alone_names_bad_arguments_as_the_pipeline(
    kwargs: dict[str, float], parameter: str
) -> None:
    for function in (workload_bottleneck_rate, transport.paper_bottleneck_rate):
        with pytest.raises(TransportParameterError) as caught:
            function(Workload(2, 1), PROFILE, **kwargs)  # type: ignore[operator]
        assert caught.value.parameter == parameter


def test_the_paper_answer_alone_refuses_an_unknown_profile_by_field() -> None:
    with pytest.raises(WorkloadError) as caught:
        transport.paper_bottleneck_rate(
            Workload(2, 1), "no-such-host", file_size_bytes=SIZE, propagation_delay_s=DELAY
        )
    assert caught.value.field == "profile"
