"""The time-slice model of a receiving host (transport.timeslice) against closed forms
and a second, explicit play-out of the rounds.

References:
* Without loss, an RBUDP transfer is one blast and one feedback: T = 8 S n / B + 2 T_prop,
  plus the drain of the few datagrams queued when the blast ends (microseconds here;
  rtol 1e-5).
* The vectorised play-out of the rounds against a plain loop over rounds at one rate
  (a second implementation; rtol 1e-12), for both schedulers.
* c = max(0, (C + 1) / m - 1): the receiver and C tasks spread over m CPUs.
* The measured competitors (``effective_competitors``): linear interpolation through
  (0, 0), (1, c_1), (2, c_2), ... by hand (rtol 1e-12); two workloads that the tables map
  to the same c give the same chain (a second route; numpy's default rtol 1e-7).
* The curve beside an answer (``time_slice_with_curve``): the same rates scored by
  ``time_slice_bottleneck_rate(rates_bps=...)`` (exact), beside the search's own answer.
"""

from __future__ import annotations

import numpy as np
import pytest

from host import Workload, host_profile
from queues.modulated import (
    ModulatedQueue,
    blast_loss_terms,
    lag_environment,
    time_slice_environment,
)
from transport import TransportParameterError
from transport.timeslice import (
    competitors_per_core,
    scheduled_competitors,
    time_slice_bottleneck_rate,
    time_slice_curve_points,
    time_slice_terms,
    time_slice_with_curve,
)

PROFILE = host_profile("sx280-2007").replace(
    mu_net=30_000.0, buffer_packets=400, coalesce_packets=8, line_rate_bps=8e8
)


@pytest.mark.parametrize(
    ("C", "m", "c"), [(0, 1, 0.0), (2, 1, 2.0), (1, 2, 0.0), (3, 2, 1.0), (4, 4, 0.25)]
)
def test_competitors_per_core(C: int, m: int, c: float) -> None:
    assert competitors_per_core(C, m) == pytest.approx(c)


@pytest.mark.parametrize(
    ("c", "measured", "expected"),
    [
        (2.0, (), 2.0),  # nothing measured: processor sharing's c
        (0.0, (0.8, 1.5), 0.0),  # alone stays alone
        (1.0, (0.8, 1.5), 0.8),  # a measured point
        (2.0, (0.8, 1.5), 1.5),
        (0.5, (0.8, 1.5), 0.4),  # on the line through (0, 0) and (1, 0.8)
        (1.5, (0.8, 1.5), 1.15),  # halfway from (1, 0.8) to (2, 1.5)
        (4.0, (0.8, 1.5), 3.0),  # beyond the last: c * c_n / n = 4 * 1.5 / 2
    ],
)
def test_scheduled_competitors_interpolate_the_measured_ones(
    c: float, measured: tuple[float, ...], expected: float
) -> None:
    assert scheduled_competitors(c, measured) == pytest.approx(expected, rel=1e-12)


def test_measured_competitors_are_the_chain_of_that_many_competitors() -> None:
    # A second route to the same chain: three busy tasks measured as 2.1 competitors give
    # the model of a workload whose c is 2.1 by another table, and 2.1 competitors lose
    # less than the nominal 3 at every rate (a larger share drains faster).
    kw = {"file_size_bytes": 2_000_000, "propagation_delay_s": 0.01, "time_slice_s": 3e-3}
    rates = np.array([100e6, 200e6, 300e6])
    small = PROFILE.replace(buffer_packets=92)
    three = time_slice_bottleneck_rate(
        Workload(cpu_tasks=3, io_tasks=0),
        small,
        rates_bps=rates,
        effective_competitors=(1.0, 1.6, 2.1),
        **kw,
    )
    two = time_slice_bottleneck_rate(
        Workload(cpu_tasks=2, io_tasks=0),
        small,
        rates_bps=rates,
        effective_competitors=(0.5, 2.1),
        **kw,
    )
    assert three.competitors == two.competitors == pytest.approx(2.1)
    np.testing.assert_allclose(three.curve.first_round_loss, two.curve.first_round_loss)
    np.testing.assert_allclose(three.curve.transfer_time_s, two.curve.transfer_time_s)
    nominal = time_slice_bottleneck_rate(
        Workload(cpu_tasks=3, io_tasks=0), small, rates_bps=rates, **kw
    )
    assert nominal.competitors == 3.0
    assert np.all(three.curve.first_round_loss < nominal.curve.first_round_loss)
    with pytest.raises(TransportParameterError) as err:
        time_slice_bottleneck_rate(
            Workload(cpu_tasks=3, io_tasks=0),
            small,
            rates_bps=rates,
            effective_competitors=(1.0, 0.0),
            **kw,
        )
    assert err.value.parameter == "effective_competitors"


def test_a_lossless_transfer_is_one_blast_and_one_feedback() -> None:
    size, delay = 5_000_000, 0.02
    rates = np.array([50e6, 100e6])
    r = time_slice_bottleneck_rate(
        Workload(cpu_tasks=0, io_tasks=0),
        PROFILE,
        file_size_bytes=size,
        propagation_delay_s=delay,
        rates_bps=rates,
    )
    packets = -(-size // PROFILE.packet_payload_bytes)
    expected = packets * 8 * PROFILE.packet_payload_bytes / rates + 2 * delay
    np.testing.assert_allclose(r.curve.transfer_time_s, expected, rtol=1e-5)
    assert np.all(r.curve.transfer_time_s >= expected)
    assert np.all(r.curve.rounds == 1) and np.all(r.curve.first_round_loss < 1e-200)


@pytest.mark.parametrize(("scheduler", "wakeup"), [("rotation", 0.0), ("lag", 1.5e-5)])
def test_rounds_match_an_explicit_loop(scheduler: str, wakeup: float) -> None:
    size, delay, slice_s, settle = 20_000_000, 0.01, 3e-3, 0.002
    rate = 600e6
    w = Workload(cpu_tasks=2, io_tasks=0)
    r = time_slice_bottleneck_rate(
        w,
        PROFILE,
        file_size_bytes=size,
        propagation_delay_s=delay,
        time_slice_s=slice_s,
        settle_s=settle,
        rates_bps=np.array([rate]),
        scheduler=scheduler,
        wakeup_s=wakeup,
        sleep_s=wakeup,  # the backlogged receiver skips it: the speed-up is in the loop
    )
    # The same play-out, written as a loop over rounds from the queue's own terms.
    S = PROFILE.packet_payload_bytes
    lam = rate / (8 * S)
    mu = r.service_rate_per_s
    fast = 1.0 / (1.0 - wakeup * mu)
    lag: dict[str, object] = {}
    if scheduler == "rotation":
        env, service = time_slice_environment(2.0, slice_s, mu)
    else:
        env, idle, service, start = lag_environment(2.0, slice_s, mu)
        lag = {"idle_environment": idle, "fixed_cost_fraction": wakeup * mu, "start": start}
    q = ModulatedQueue(
        env,
        service,
        PROFILE.buffer_packets,
        PROFILE.coalesce_packets,
        backlogged_rates=service * fast,
        **lag,  # type: ignore[arg-type]
    )
    p_k, dev, backlog = (x[0] for x in blast_loss_terms(q, [lam]))
    n, t, rounds = float(-(-size // S)), 0.0, 0
    while n >= 0.5:
        lost = min(max(p_k * n + lam * dev, 0.0), n)
        t += n * 8 * S / rate + 2 * delay + min(backlog, n - lost) / q.mean_capacity()
        t += settle if lost >= 0.5 else 0.0
        n, rounds = lost, rounds + 1
    assert r.curve.rounds[0] == rounds > 1
    assert r.curve.transfer_time_s[0] == pytest.approx(t, rel=1e-12)


def test_busier_receivers_take_longer_and_a_small_buffer_loses_earlier() -> None:
    # The best rate need not fall with C (the rounds are whole numbers, so the curve has
    # several local minima), but the best time cannot improve, nor the loss onset rise.
    kw = {"file_size_bytes": 20_000_000, "propagation_delay_s": 0.1, "time_slice_s": 3e-3}
    runs = [
        time_slice_bottleneck_rate(Workload(cpu_tasks=c, io_tasks=0), PROFILE, **kw)
        for c in range(4)
    ]
    times = [r.transfer_time_s for r in runs]
    assert times == sorted(times) and times[3] > 1.5 * times[0]
    onsets = [r.loss_onset_bps or np.inf for r in runs]
    assert onsets == sorted(onsets, reverse=True)
    big = time_slice_bottleneck_rate(Workload(cpu_tasks=2, io_tasks=0), PROFILE, **kw)
    small = time_slice_bottleneck_rate(
        Workload(cpu_tasks=2, io_tasks=0), PROFILE.replace(buffer_packets=60), **kw
    )
    assert small.loss_onset_bps is not None and big.loss_onset_bps is not None
    assert small.loss_onset_bps < big.loss_onset_bps


def test_wakeup_preemption_loses_less_with_a_small_buffer() -> None:
    kw = {"file_size_bytes": 20_000_000, "propagation_delay_s": 0.01, "time_slice_s": 3e-3}
    rates = np.array([100e6, 200e6])
    small = PROFILE.replace(buffer_packets=60)
    w = Workload(cpu_tasks=2, io_tasks=0)
    rotation = {"rates_bps": rates, "scheduler": "rotation", **kw}
    independent = time_slice_bottleneck_rate(w, small, **rotation)
    held = time_slice_bottleneck_rate(w, small, wakeup_preemption=True, **rotation)
    assert np.all(held.curve.first_round_loss < independent.curve.first_round_loss)
    # The lag account goes further: a receiver under its share is not sent away at all.
    lag = time_slice_bottleneck_rate(w, small, rates_bps=rates, **kw)
    assert np.all(lag.curve.first_round_loss < held.curve.first_round_loss)
    assert lag.inputs["scheduler"] == "lag"


def test_kernel_work_lowers_the_rate() -> None:
    kw = {"file_size_bytes": 20_000_000, "propagation_delay_s": 0.1}
    w = Workload(cpu_tasks=1, io_tasks=0)
    without = time_slice_bottleneck_rate(w, PROFILE, **kw)
    with_kernel = time_slice_bottleneck_rate(w, PROFILE, kernel_s_per_datagram=5e-6, **kw)
    assert with_kernel.rate_bps < without.rate_bps


def test_bad_arguments_name_themselves() -> None:
    w = Workload(cpu_tasks=1, io_tasks=0)
    with pytest.raises(TransportParameterError) as err:
        time_slice_bottleneck_rate(w, PROFILE, file_size_bytes=0, propagation_delay_s=0.1)
    assert err.value.parameter == "file_size_bytes"
    with pytest.raises(TransportParameterError) as err:
        time_slice_bottleneck_rate(
            w, PROFILE, file_size_bytes=10, propagation_delay_s=0.1, kernel_s_per_datagram=-1
        )
    assert err.value.parameter == "kernel_s_per_datagram"
    kw = {"file_size_bytes": 10, "propagation_delay_s": 0.1}
    with pytest.raises(TransportParameterError) as err:
        time_slice_bottleneck_rate(w, PROFILE, scheduler="eevdf", **kw)
    assert err.value.parameter == "scheduler"
    with pytest.raises(TransportParameterError) as err:
        time_slice_bottleneck_rate(w, PROFILE, wakeup_preemption=True, **kw)
    assert err.value.parameter == "wakeup_preemption"


def test_a_skipped_wakeup_with_single_datagrams_is_a_faster_receiver() -> None:
    # N = 1: every wake-up with work waiting is backlogged, so skipping the sleep's cost
    # w is exactly a receiver whose wake-up takes 1/mu - w (I = 0: mu = mu_net).
    one = PROFILE.replace(coalesce_packets=1, buffer_packets=60)
    wakeup = 0.4 / one.mu_net
    kw = {
        "file_size_bytes": 5_000_000,
        "propagation_delay_s": 0.01,
        "time_slice_s": 3e-3,
        "rates_bps": np.array([150e6, 300e6, 450e6]),
    }
    w = Workload(cpu_tasks=2, io_tasks=0)
    skipped = time_slice_bottleneck_rate(w, one, wakeup_s=wakeup, sleep_s=wakeup, **kw)
    faster = time_slice_bottleneck_rate(
        w, one.replace(mu_net=1.0 / (1.0 / one.mu_net - wakeup)), **kw
    )
    np.testing.assert_allclose(
        skipped.curve.first_round_loss, faster.curve.first_round_loss, rtol=1e-12
    )
    np.testing.assert_allclose(
        skipped.curve.transfer_time_s, faster.curve.transfer_time_s, rtol=1e-12
    )


def test_a_skipped_wakeup_raises_the_rate_of_a_busy_receiver() -> None:
    kw = {"file_size_bytes": 20_000_000, "propagation_delay_s": 0.01, "time_slice_s": 3e-3}
    w = Workload(cpu_tasks=2, io_tasks=0)
    slow = PROFILE.replace(mu_net=8_000.0)  # about 250 Mbit/s with two competitors
    wakeup = 0.5 / slow.mu_net
    sleeps = time_slice_bottleneck_rate(w, slow, **kw)
    skips = time_slice_bottleneck_rate(w, slow, wakeup_s=wakeup, sleep_s=wakeup, **kw)
    assert skips.rate_bps > 1.2 * sleeps.rate_bps
    assert skips.inputs["wakeup_s"] == wakeup


@pytest.mark.parametrize("sleep_fraction", [0.0, 0.5, 1.0])
def test_a_backlogged_receiver_drains_as_its_skipped_sleep_says(sleep_fraction: float) -> None:
    # Far above capacity the buffer stays backlogged, so the drain after the blast is the
    # backlogged receiver's mean capacity: its share 1 / (1 + c) of N datagrams per
    # wake-up at the backlogged wake-up rate 1 / (1 / mu - sleep_s) (closed form; the lag
    # account's share, tests/queues/test_modulated.py).  c = 2, N = 8, mu = 30,000/s,
    # kernel cost 0: rtol 1e-9.
    wakeup = 0.9 / PROFILE.mu_net
    sleep = sleep_fraction * wakeup
    kw = {"time_slice_s": 3e-3, "wakeup_s": wakeup, "rates_bps": np.array([8e8])}
    w = Workload(cpu_tasks=2, io_tasks=0)
    terms = time_slice_terms(w, PROFILE, sleep_s=sleep, **kw)
    backlogged_rate = 1.0 / (1.0 / PROFILE.mu_net - sleep)
    assert terms.drain_per_s[0] == pytest.approx(backlogged_rate * 8 / 3, rel=1e-9)
    assert terms.inputs["sleep_s"] == sleep
    # Left out, a backlogged receiver pays its whole wake-up: the terms of sleep_s = 0.
    if sleep_fraction == 0.0:
        default = time_slice_terms(w, PROFILE, **kw)
        np.testing.assert_array_equal(default.drain_per_s, terms.drain_per_s)
        np.testing.assert_array_equal(default.shift, terms.shift)


@pytest.mark.parametrize(
    ("costs", "named"),
    [
        *(({"wakeup_s": w}, "wakeup_s") for w in (-1e-6, 1.0 / PROFILE.mu_net, float("nan"))),
        # The sleep a backlogged receiver skips is a part of the wake-up's cost.
        *(({"wakeup_s": 1e-5, "sleep_s": s}, "sleep_s") for s in (-1e-7, 2e-5, float("nan"))),
    ],
)
def test_a_wakeup_cost_beyond_the_wakeup_is_refused(costs: dict[str, float], named: str) -> None:
    with pytest.raises(TransportParameterError) as err:
        time_slice_bottleneck_rate(
            Workload(cpu_tasks=1, io_tasks=0),
            PROFILE,
            file_size_bytes=10,
            propagation_delay_s=0.1,
            **costs,
        )
    assert err.value.parameter == named


def test_near_constant_slices_lose_less_below_capacity_and_the_same_above() -> None:
    # The kernel's slices are nearly constant (benchmarks/slice_trace.py: CV 0.00-0.12 at
    # C = 2, 3).  Fewer Erlang stages make them more variable, which carries a large
    # buffer to K below the mean drain; far above it the mean drain decides alone.
    kw = {"file_size_bytes": 20_000_000, "propagation_delay_s": 0.1, "time_slice_s": 4e-3}
    big = PROFILE.replace(buffer_packets=1_500, mu_net=14_000.0)
    w = Workload(cpu_tasks=3, io_tasks=0)
    rates = np.array([0.7, 0.85, 2.0]) * 14_000 * 8 * 8 * big.packet_payload_bytes / 4
    kw["scheduler"] = "rotation"
    loose = time_slice_bottleneck_rate(w, big, rates_bps=rates, **kw).curve
    tight = time_slice_bottleneck_rate(w, big, rates_bps=rates, slice_stages=12, **kw).curve
    assert np.all(tight.stationary_loss[:2] < 0.5 * loose.stationary_loss[:2])
    np.testing.assert_allclose(tight.stationary_loss[2], loose.stationary_loss[2], rtol=0.02)
    # The stages reach the queue: its stationary loss built by hand with 12 stages.
    lam = rates[1] / (8.0 * big.packet_payload_bytes)
    env, service = time_slice_environment(3.0, 4e-3, 14_000.0, stages=12)
    queue = ModulatedQueue(env, service, 1_500, 8)
    p_k = blast_loss_terms(queue, np.array([lam]))[0][0]
    assert tight.stationary_loss[1] == pytest.approx(p_k, rel=1e-9)
    with pytest.raises(TransportParameterError) as err:
        time_slice_bottleneck_rate(w, big, rates_bps=rates, slice_stages=0, **kw)
    assert err.value.parameter == "slice_stages"


def test_time_slice_costs_read_a_calibration_and_fall_back_to_the_defaults() -> None:
    # The keys blastrate calibrate and validate_transfer.py store; anything not a positive
    # finite number is the default, and a wake-up may not cost its whole time 1/mu_net.
    from transport import DEFAULT_TIME_SLICE_S, TimeSliceCosts, time_slice_costs

    profile = host_profile("sx280-2007")  # mu_net 41,600/s: a wake-up lasts 24 us
    assert time_slice_costs(None, profile) == TimeSliceCosts(DEFAULT_TIME_SLICE_S, 0.0, 0.0)
    given = {
        "time_slice_s": 0.004,
        "kernel_s_per_datagram": 9e-6,
        "wakeup_s": 1e-5,
        "effective_competitors": [0.9, 1.5, 2.2],
    }
    stored = {**given, "competitors_cost": "per_read"}
    # The scheduler is not calibrated: the default, whatever the provenance says.
    assert time_slice_costs(stored, profile).to_dict() == {
        **given,
        "scheduler": "lag",
        "send_sizes": None,
    }
    # c_C solved under another receiver cost (a calibration stored before 2026-11-29, or
    # none named) is too large for today's model: dropped, the rest kept.
    for cost in (None, "skip_wakeup", 1):
        older = {**given, "competitors_cost": cost} if cost is not None else given
        assert time_slice_costs(older, profile).to_dict() == {
            **given,
            "effective_competitors": [],
            "scheduler": "lag",
            "send_sizes": None,
        }
    bad = {
        "time_slice_s": -1,
        "kernel_s_per_datagram": True,
        "wakeup_s": 1e-3,
        "effective_competitors": [1.0, -2.0],
    }
    assert time_slice_costs(bad, profile) == TimeSliceCosts()
    assert time_slice_costs({"time_slice_s": 10**400}, profile) == TimeSliceCosts()
    # A stored provenance is free-form: a table that is not a short list of numbers in
    # [0.001, 1000] is no table (never a 500, never a request that fails on every call).
    for table in (
        "1,2",
        [[1.0, 2.0]],
        [10**400],
        [1e308],
        [1e-320],
        [float("nan")],
        [True],
        [1.0, None],
        [1.0] * 2000,
    ):
        got = time_slice_costs(
            {"effective_competitors": table, "competitors_cost": "per_read"}, profile
        )
        assert got == TimeSliceCosts(), table
    assert time_slice_costs({"time_slice_s": float("inf")}, profile).time_slice_s == (
        DEFAULT_TIME_SLICE_S
    )


def test_a_transfer_that_never_completes_is_refused_not_an_infinite_time() -> None:
    # SPEC section 4: never report a transfer that never finishes as a number.  A
    # receiver of 10 wake-ups/s with a one-datagram buffer loses nearly every datagram at
    # every rate, and the rounds' play-out is still losing after its last round.
    from transport import NoCompletingRateError

    slow = host_profile("sx280-2007").replace(mu_net=10.0, buffer_packets=1, coalesce_packets=1)
    with pytest.raises(NoCompletingRateError) as caught:
        time_slice_bottleneck_rate(
            Workload(cpu_tasks=2, io_tasks=1),
            slow,
            file_size_bytes=20_000_000,
            propagation_delay_s=0.01,
        )
    assert caught.value.parameter == "loss"
    assert not caught.value.curve.completes.any() and caught.value.curve.send_rate_bps.size == 49


@pytest.mark.parametrize("cpu_tasks", [0, 3])
def test_the_curve_beside_an_answer_is_the_model_on_an_even_grid(cpu_tasks: int) -> None:
    workload = Workload(cpu_tasks=cpu_tasks, io_tasks=1)
    size, delay = 200_000_000, 0.05
    result, curve = time_slice_with_curve(
        workload, PROFILE, file_size_bytes=size, propagation_delay_s=delay, curve_points=20
    )
    grid = np.linspace(PROFILE.line_rate_bps / 20, PROFILE.line_rate_bps, 20)
    np.testing.assert_array_equal(curve.send_rate_bps, grid)
    alone = time_slice_bottleneck_rate(
        workload, PROFILE, file_size_bytes=size, propagation_delay_s=delay, rates_bps=grid
    )
    np.testing.assert_array_equal(curve.total_s, alone.curve.transfer_time_s)
    np.testing.assert_array_equal(curve.loss, alone.curve.first_round_loss)
    assert curve.completes.all()
    # The answer is the search's, curve or not.
    search = time_slice_bottleneck_rate(
        workload, PROFILE, file_size_bytes=size, propagation_delay_s=delay
    )
    assert (result.rate_bps, result.transfer_time_s, result.first_round_loss) == (
        search.rate_bps,
        search.transfer_time_s,
        search.first_round_loss,
    )
    np.testing.assert_array_equal(result.curve.rate_bps, search.curve.rate_bps)


def test_a_curve_has_as_many_points_as_the_work_bound_allows() -> None:
    # Closed form: MAX_TIME_SLICE_CURVE_WORK // max(K (7 (N + 1))^2, 2e5).
    small = host_profile("sx280-2007")  # K = 64, N = 6: 2e5 a point, 2,000 points
    large = small.replace(buffer_packets=1736)  # 4,167,336 a point: 95 points
    assert time_slice_curve_points(small) == 200
    assert time_slice_curve_points(small, 2000) == 2000
    assert time_slice_curve_points(large) == 95
    assert time_slice_curve_points(large, 95) == 95
    with pytest.raises(TransportParameterError, match="at most 95 points") as info:
        time_slice_curve_points(large, 96)
    assert info.value.parameter == "curve_points"


def _answer(**changes: object) -> tuple[float, float, float]:
    keywords: dict[str, object] = {
        "file_size_bytes": 50_000_000,
        "propagation_delay_s": 0.01,
        "time_slice_s": 2e-3,
        "kernel_s_per_datagram": 2e-6,
        "wakeup_s": 1e-5,
        "scheduler": "lag",
        "effective_competitors": (0.9, 1.7),
        "slice_stages": 3,
        "settle_s": 0.02,
    }
    keywords.update(changes)
    workload = keywords.pop("workload", Workload(cpu_tasks=2, io_tasks=1))
    profile = keywords.pop("profile", PROFILE)
    r = time_slice_bottleneck_rate(workload, profile, **keywords)  # type: ignore[arg-type]
    return r.rate_bps, r.transfer_time_s, r.first_round_loss


@pytest.mark.parametrize(
    "change",
    [
        {},
        {"file_size_bytes": 70_000_000},
        {"propagation_delay_s": 0.05},
        {"time_slice_s": 3e-3},
        {"kernel_s_per_datagram": 4e-6},
        {"wakeup_s": 2e-5},
        {"scheduler": "rotation", "wakeup_s": 0.0},
        {"effective_competitors": [0.9, 1.8]},
        {"slice_stages": 2},
        {"workload": Workload(cpu_tasks=3, io_tasks=1)},
        {"profile": PROFILE.replace(buffer_packets=300)},
        {"profile": PROFILE.replace(name="other")},
    ],
)
def test_solved_terms_are_reused_only_for_the_same_inputs(change: dict[str, object]) -> None:
    """The process keeps the terms it solved (transport.timeslice._SOLVED): a sweep over
    file sizes solves each workload once.  Reference: the same answer with nothing kept
    (exact); an answer after another input's terms were kept must be its own."""
    from transport import timeslice

    timeslice._SOLVED._solved.clear()
    fresh = _answer(**change)
    timeslice._SOLVED._solved.clear()
    _answer()  # the base's terms kept
    assert _answer(**change) == fresh  # never the base's terms for another input
    assert _answer(**change) == fresh  # its own, kept
