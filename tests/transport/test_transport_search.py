"""The effective-bottleneck-rate search (SPEC section 4) on synthetic loss curves.

The NIC queue module is developed separately, so the loss curves are written here: the
M/M/1/K closed form (loss rising smoothly with the rate), steps, and a steep power law
on a tiny file (a pronounced sawtooth from ceil(N_resend)).  References are brute-force
scans of the public ``transfer_time`` on dense grids.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from transport import (
    BottleneckRate,
    NoCompletingRateError,
    TransportParameterError,
    effective_bottleneck_rate,
    transfer_time,
)

PKT = 1468


def mm1k_loss(mu: float, K: int) -> Callable[[np.ndarray], np.ndarray]:
    """M/M/1/K blocking probability at sending rate B (bit/s), vectorised.

    lambda = B / (8 * 1468) packets/s, rho = lambda / mu,
    loss = (1 - rho) rho^K / (1 - rho^(K+1)); for rho > 1 the same value is computed as
    (1 - q) / (1 - q^(K+1)) with q = 1/rho (no overflow), and 1 / (K + 1) at rho = 1.
    """

    def loss(rate_bps: np.ndarray) -> np.ndarray:
        rho = rate_bps / (8 * PKT) / mu
        out = np.full(rho.shape, 1.0 / (K + 1))
        below = rho < 1 - 1e-9
        above = rho > 1 + 1e-9
        r = rho[below]
        out[below] = (1 - r) * r**K / (1 - r ** (K + 1))
        q = 1 / rho[above]
        out[above] = (1 - q) / (1 - q ** (K + 1))
        return out

    return loss


def dense_optimum(
    loss: Callable[[np.ndarray], np.ndarray],
    line_rate: float,
    size: int,
    delay: float,
    points: int = 20_000,
) -> tuple[float, float]:
    """Brute force: (rate, T) minimising T over line_rate * k / points, k = 1..points."""
    rates = line_rate * np.arange(1, points + 1) / points
    t = transfer_time(rates, loss(rates), size, delay)
    total = np.where(t.completes, t.total_s, np.inf)
    j = int(np.argmin(total))
    return float(rates[j]), float(total[j])


def assert_global_minimum(best: BottleneckRate, rate_d: float, total_d: float) -> None:
    """The search is at least as good as the dense grid, within the 0.1 Mbps tolerance.

    Either the two rates agree to the resolution, or the search's T is no worse than the
    dense grid's T by more than T changes across one resolution step at that rate
    (T ~ 1/B there, so dT ~ T * dB / B; factor 2 for the loss-dependent part).
    """
    res = best.resolution_bps
    assert abs(best.rate_bps - rate_d) <= res or best.transfer_time_s <= total_d * (
        1 + 2 * res / rate_d
    ), (best.rate_bps, best.transfer_time_s, rate_d, total_d)


# --- limits ---------------------------------------------------------------------------


def test_zero_loss_everywhere_gives_the_line_rate() -> None:
    best = effective_bottleneck_rate(
        lambda r: np.zeros_like(r),
        line_rate_bps=1e9,
        file_size_bytes=500_000_000,
        propagation_delay_s=0.1,
    )
    assert best.rate_bps == 1e9
    assert best.limited_by == "line-rate"
    assert best.rounds == 1 and best.n_resend == 0.0 and best.loss == 0.0
    # T = T_prop + S/B + S/(8 S_pkt B) + T_prop with S = 510,899,200 B, B = 1.25e8 B/s
    S, B = 510_899_200, 1.25e8
    assert best.transfer_time_s == pytest.approx(0.1 + S / B + S / (8 * PKT * B) + 0.1)


def test_very_fast_host_is_line_rate_limited() -> None:
    # mu = 10x the packet rate of the line: the loss is ~1e-64 at 1 Gbps.
    best = effective_bottleneck_rate(
        mm1k_loss(851_500.0, 64),
        line_rate_bps=1e9,
        file_size_bytes=500_000_000,
        propagation_delay_s=0.1,
    )
    assert best.rate_bps == 1e9
    assert best.limited_by == "line-rate"


def test_busy_host_is_end_system_limited_like_the_paper() -> None:
    # A host that serves 70,000 packets/s (822 Mbps at 1468 B) on a 1 Gbps line.
    loss = mm1k_loss(70_000.0, 64)
    best = effective_bottleneck_rate(
        loss, line_rate_bps=1e9, file_size_bytes=500_000_000, propagation_delay_s=0.1
    )
    assert best.limited_by == "end-system"
    assert 700e6 < best.rate_bps < 900e6
    rate_d, total_d = dense_optimum(loss, 1e9, 500_000_000, 0.1)
    assert_global_minimum(best, rate_d, total_d)
    # The reported figures are those of the formula at the reported rate.
    t = transfer_time(best.rate_bps, best.loss, 500_000_000, 0.1)
    assert best.transfer_time_s == float(t.total_s)
    assert best.rounds == int(t.rounds)
    assert best.loss == float(loss(np.array([best.rate_bps]))[0])
    assert best.first_blast_s + best.resend_s + best.feedback_s == pytest.approx(
        best.transfer_time_s, rel=1e-15
    )


# --- discontinuities ------------------------------------------------------------------


def test_minimum_at_a_step_of_the_loss_is_approached_from_the_left() -> None:
    # No loss up to 612.3456 Mbps, 30% above: T falls with the rate up to the step, then
    # jumps up (N_resend ~ 10.6).  The infimum is at the step, attained from the left.
    step = 612.3456e6
    best = effective_bottleneck_rate(
        lambda r: np.where(r > step, 0.3, 0.0),
        line_rate_bps=1e9,
        file_size_bytes=500_000_000,
        propagation_delay_s=0.1,
    )
    assert step - best.resolution_bps <= best.rate_bps <= step
    assert best.loss == 0.0 and best.rounds == 1
    assert best.limited_by == "end-system"


def test_minimum_at_the_edge_of_the_never_completes_region() -> None:
    edge = 777.7e6
    best = effective_bottleneck_rate(
        lambda r: np.where(r > edge, 1.0, 1e-4),
        line_rate_bps=1e9,
        file_size_bytes=500_000_000,
        propagation_delay_s=0.1,
    )
    assert edge - best.resolution_bps <= best.rate_bps <= edge
    assert best.loss == 1e-4
    assert best.curve.completes.any() and not best.curve.completes.all()
    json.dumps(best.to_dict(), allow_nan=False)


def test_optimum_below_the_first_scanned_rate() -> None:
    # The loss jumps to 99.9% above 0.1 Mbps on a 1 Gbps line: the optimum is in the first
    # cell (0, 3.9 Mbps] of the coarse grid, which has no scanned left end.
    best = effective_bottleneck_rate(
        lambda r: np.where(r > 1e5, 0.999, 0.0),
        line_rate_bps=1e9,
        file_size_bytes=10_000_000,
        propagation_delay_s=0.1,
    )
    assert best.rate_bps <= 1e5
    assert best.loss == 0.0


def sawtooth_loss(line_rate: float, c: float, p: float) -> Callable[[np.ndarray], np.ndarray]:
    return lambda r: c * (r / line_rate) ** p


@settings(max_examples=60, deadline=None)
@given(
    log_line_rate=st.floats(5.0, 9.0),
    packets=st.integers(2, 40),
    log_delay=st.floats(-7.0, -3.0),
    c=st.floats(0.1, 1.2),
    p=st.floats(0.3, 3.0),
)
def test_sawtooth_of_a_small_file_global_minimum(
    log_line_rate: float, packets: int, log_delay: float, c: float, p: float
) -> None:
    # A file of a few packets and a short delay: each integer crossing of N_resend adds a
    # visible tooth (one packet's time is a sizeable part of T), so T is a sawtooth whose
    # lowest point sits right before a jump.
    line_rate, delay, size = 10.0**log_line_rate, 10.0**log_delay, PKT * packets - 100
    loss = sawtooth_loss(line_rate, c, p)
    best = effective_bottleneck_rate(
        loss, line_rate_bps=line_rate, file_size_bytes=size, propagation_delay_s=delay
    )
    rate_d, total_d = dense_optimum(loss, line_rate, size, delay)
    assert_global_minimum(best, rate_d, total_d)
    assert 0.0 < best.rate_bps <= line_rate


# --- properties on M/M/1/K curves ------------------------------------------------------

HOSTS = {
    "log_line_rate": st.floats(7.0, 10.5),
    "capacity_ratio_log10": st.floats(-1.5, 0.7),  # mu relative to the line's packet rate
    "K": st.integers(1, 200),
    "log_size": st.floats(4.0, 10.0),
    "log_delay": st.floats(-3.0, -0.3),
}


@settings(max_examples=80, deadline=None)
@given(**HOSTS)
def test_returned_rate_minimises_T_over_a_dense_grid(
    log_line_rate: float, capacity_ratio_log10: float, K: int, log_size: float, log_delay: float
) -> None:
    line_rate = 10.0**log_line_rate
    mu = line_rate / (8 * PKT) * 10.0**capacity_ratio_log10
    size, delay = int(10.0**log_size), 10.0**log_delay
    loss = mm1k_loss(mu, K)
    best = effective_bottleneck_rate(
        loss, line_rate_bps=line_rate, file_size_bytes=size, propagation_delay_s=delay
    )
    assert 0.0 < best.rate_bps <= line_rate
    assert math.isfinite(best.transfer_time_s)
    assert best.limited_by == (
        "line-rate" if line_rate - best.rate_bps <= best.resolution_bps else "end-system"
    )
    # No plotted point is better than the reported optimum (the curve is part of the scan).
    assert best.transfer_time_s <= float(np.min(best.curve.total_s))
    rate_d, total_d = dense_optimum(loss, line_rate, size, delay)
    assert_global_minimum(best, rate_d, total_d)


@settings(max_examples=60, deadline=None)
@given(
    log_line_rate=st.floats(8.0, 10.5),
    slow_ratio_log10=st.floats(-1.0, 0.7),
    speedup_log10=st.floats(0.01, 1.0),
    K=st.integers(4, 200),
    bdp_multiple_log10=st.floats(0.0, 2.5),
    log_delay=HOSTS["log_delay"],
)
def test_a_slower_host_never_gets_a_shorter_transfer(
    log_line_rate: float,
    slow_ratio_log10: float,
    speedup_log10: float,
    K: int,
    bdp_multiple_log10: float,
    log_delay: float,
) -> None:
    # The usual regime, the paper's included (500 MB is 40 bandwidth-delay
    # products at 1 Gbps and 100 ms): line rates from 100 Mbps, files of at least 10 MB
    # and one bandwidth-delay product, a buffer of a few packets or more, hosts serving at
    # least 10% of the line's packet rate.
    line_rate = 10.0**log_line_rate
    delay = 10.0**log_delay
    mu_slow = line_rate / (8 * PKT) * 10.0**slow_ratio_log10
    mu_fast = mu_slow * 10.0**speedup_log10
    kwargs = {
        "line_rate_bps": line_rate,
        "file_size_bytes": int(max(1e7, line_rate / 8 * delay * 10.0**bdp_multiple_log10)),
        "propagation_delay_s": delay,
    }
    fast = effective_bottleneck_rate(mm1k_loss(mu_fast, K), **kwargs)  # type: ignore[arg-type]
    slow = effective_bottleneck_rate(mm1k_loss(mu_slow, K), **kwargs)  # type: ignore[arg-type]
    # The rate itself is not asserted: Hypothesis found a counterexample in this regime
    # (a slower host's optimum 80.04 Mbit/s against the faster host's 79.62 Mbit/s), since
    # a jump of ceil(N_resend) can move the optimum either way.  The time is a theorem: T
    # rises with the loss at every rate, so a slower host's best transfer time is never
    # shorter.
    assert slow.transfer_time_s >= fast.transfer_time_s


def test_tiny_files_are_not_monotone_in_host_speed() -> None:
    # Not a search error but the model: for a file of 7 packets on a 1 ms path one packet's
    # time is a large part of T, so T is a sawtooth that falls within each tooth (fixed
    # ceil(N_resend)) and the optimum sits at the top end of some tooth.  Which tooth wins
    # moves with mu, and here the slower host's best tooth (N_resend just below 2) lies
    # above the faster host's (just below 1).  Brute force over 100,000 rates agrees.
    kwargs = {"line_rate_bps": 1e7, "file_size_bytes": 10_000, "propagation_delay_s": 0.001}
    fast = effective_bottleneck_rate(mm1k_loss(150.0, 19), **kwargs)  # type: ignore[arg-type]
    slow = effective_bottleneck_rate(mm1k_loss(120.0, 19), **kwargs)  # type: ignore[arg-type]
    assert (fast.rounds, slow.rounds) == (2, 3)
    assert slow.rate_bps > fast.rate_bps + 0.2e6
    for best, mu in ((fast, 150.0), (slow, 120.0)):
        rate_d, total_d = dense_optimum(mm1k_loss(mu, 19), 1e7, 10_000, 0.001, points=100_000)
        assert abs(best.rate_bps - rate_d) <= 1e3  # the resolution on a 10 Mbps line
        assert_global_minimum(best, rate_d, total_d)


def test_slower_hosts_give_decreasing_rates_paper_setting() -> None:
    rates = [
        effective_bottleneck_rate(
            mm1k_loss(mu, 64),
            line_rate_bps=1e9,
            file_size_bytes=500_000_000,
            propagation_delay_s=0.1,
        ).rate_bps
        for mu in (120_000.0, 90_000.0, 80_000.0, 60_000.0, 40_000.0, 20_000.0)
    ]
    assert rates == sorted(rates, reverse=True)
    assert rates[0] == 1e9 and rates[-1] < 300e6


# --- reproducibility, cost, curve ------------------------------------------------------


def test_search_is_deterministic_and_modest() -> None:
    calls: list[int] = []
    base = mm1k_loss(80_000.0, 64)

    def counted(r: np.ndarray) -> np.ndarray:
        calls.append(r.size)
        return base(r)

    kwargs = {"line_rate_bps": 1e9, "file_size_bytes": 500_000_000, "propagation_delay_s": 0.1}
    first = effective_bottleneck_rate(counted, **kwargs)  # type: ignore[arg-type]
    n_calls = len(calls)
    second = effective_bottleneck_rate(counted, **kwargs)  # type: ignore[arg-type]
    assert first.to_dict() == second.to_dict()
    assert first.loss_evaluations == sum(calls[:n_calls])
    assert n_calls <= 10
    assert first.loss_evaluations <= 2_000
    assert first.resolution_bps == 1e5  # 0.1 Mbps


def test_resolution_is_relative_on_slow_links() -> None:
    best = effective_bottleneck_rate(
        mm1k_loss(50.0, 16), line_rate_bps=1e6, file_size_bytes=1_000_000, propagation_delay_s=0.01
    )
    assert best.resolution_bps == pytest.approx(100.0)  # 1e-4 of 1 Mbps
    rate_d, total_d = dense_optimum(mm1k_loss(50.0, 16), 1e6, 1_000_000, 0.01)
    assert_global_minimum(best, rate_d, total_d)


def test_curve_for_plotting() -> None:
    loss = mm1k_loss(70_000.0, 64)
    best = effective_bottleneck_rate(
        loss,
        line_rate_bps=1e9,
        file_size_bytes=500_000_000,
        propagation_delay_s=0.1,
        curve_points=50,
    )
    c = best.curve
    np.testing.assert_allclose(c.send_rate_bps, 1e9 * np.arange(1, 51) / 50, rtol=1e-15)
    assert c.send_rate_bps[-1] == 1e9
    t = transfer_time(c.send_rate_bps, loss(c.send_rate_bps), 500_000_000, 0.1)
    np.testing.assert_array_equal(c.total_s, t.total_s)
    np.testing.assert_array_equal(c.loss, t.loss)
    assert c.completes.all()
    d = best.to_dict()
    assert len(d["curve"]["total_s"]) == 50
    json.dumps(d, allow_nan=False)
    with pytest.raises(ValueError):
        c.total_s[0] = 0.0


def test_constant_scalar_loss_is_accepted() -> None:
    best = effective_bottleneck_rate(
        lambda r: 0.01, line_rate_bps=1e9, file_size_bytes=500_000_000, propagation_delay_s=0.1
    )
    # A constant loss: T ~ 1/B, so the line rate wins.
    assert best.rate_bps == 1e9 and best.limited_by == "line-rate"
    assert best.loss == 0.01


# --- never completes and invalid input -------------------------------------------------


def test_no_rate_completes_is_reported_plainly() -> None:
    with pytest.raises(NoCompletingRateError) as info:
        effective_bottleneck_rate(
            lambda r: np.ones_like(r),
            line_rate_bps=1e9,
            file_size_bytes=500_000_000,
            propagation_delay_s=0.1,
        )
    err = info.value
    assert err.parameter == "loss" and isinstance(err, ValueError)
    assert not err.curve.completes.any()
    d = err.curve.to_dict()
    assert all(v is None for v in d["total_s"])
    json.dumps(d, allow_nan=False)


@pytest.mark.parametrize(
    ("kwargs", "parameter"),
    [
        ({"line_rate_bps": 0.0}, "line_rate_bps"),
        ({"line_rate_bps": -1.0}, "line_rate_bps"),
        ({"line_rate_bps": math.nan}, "line_rate_bps"),
        ({"line_rate_bps": math.inf}, "line_rate_bps"),
        ({"file_size_bytes": 0}, "file_size_bytes"),
        ({"file_size_bytes": math.nan}, "file_size_bytes"),
        ({"propagation_delay_s": 0.0}, "propagation_delay_s"),
        ({"propagation_delay_s": math.nan}, "propagation_delay_s"),
        ({"packet_payload_bytes": -1468}, "packet_payload_bytes"),
        ({"header_bytes": -32}, "header_bytes"),
        ({"curve_points": 1}, "curve_points"),
        ({"curve_points": 2.5}, "curve_points"),
        ({"loss": "not callable"}, "loss"),
        ({"loss": lambda r: r[:-1] * 0}, "loss"),  # wrong shape: not vectorised
        ({"loss": lambda r: np.full_like(r, math.nan)}, "loss"),
        ({"loss": lambda r: -np.ones_like(r)}, "loss"),
        ({"loss": lambda r: ["a"] * r.size}, "loss"),
    ],
)
def test_invalid_search_inputs_name_the_parameter(
    kwargs: dict[str, object], parameter: str
) -> None:
    args: dict[str, object] = {
        "loss": mm1k_loss(70_000.0, 64),
        "line_rate_bps": 1e9,
        "file_size_bytes": 500_000_000,
        "propagation_delay_s": 0.1,
    }
    args.update(kwargs)
    loss = args.pop("loss")
    with pytest.raises(TransportParameterError) as info:
        effective_bottleneck_rate(loss, **args)  # type: ignore[arg-type]
    assert info.value.parameter == parameter
    assert str(info.value).startswith(f"{parameter}: ")


# --- the bookkeeping against a plain rendering of the documented algorithm ------------


def reference_search(
    loss: Callable[[np.ndarray], np.ndarray], line_rate: float, size: int, delay: float
) -> tuple[float, int]:
    """The branch-and-bound of the module docstring, written plainly: every pass
    recomputes every cell's bound and re-sorts all points; (best rate, rates evaluated).

    The search keeps its bounds and origins incrementally and evaluates the bounds of new
    cells with the new points; the decisions (and so the answer) must be the same.
    """
    res = max(min(1e5, 1e-4 * line_rate), 1e-9 * line_rate)
    scan = np.union1d(line_rate * (np.arange(1, 257) / 256), line_rate * (np.arange(1, 201) / 200))
    rates = np.concatenate(([0.0], scan))
    losses = np.concatenate(([0.0], loss(scan)))
    t = transfer_time(scan, losses[1:], size, delay)
    totals = np.concatenate(([np.inf], np.where(t.completes, t.total_s, np.inf)))
    rounds = np.concatenate(([1.0], np.where(t.completes, t.rounds, np.inf)))
    evaluations = scan.size
    while True:
        low = transfer_time(rates[1:], np.minimum(losses[:-1], losses[1:]), size, delay)
        low_t = np.where(low.completes, low.total_s, np.inf)
        at_min = np.isfinite(totals)
        at_min &= totals <= np.concatenate(([np.inf], totals[:-1]))
        at_min &= totals <= np.concatenate((totals[1:], [np.inf]))
        worth = (rounds[:-1] != rounds[1:]) | at_min[:-1] | at_min[1:]
        alive = np.flatnonzero((low_t <= totals.min()) & (np.diff(rates) > res) & worth)
        if alive.size > 64:
            alive = np.sort(alive[np.lexsort((alive, low_t[alive]))[:64]])
        if alive.size == 0:
            break
        width = rates[alive + 1] - rates[alive]
        new = (rates[alive][:, None] + width[:, None] * (np.arange(1, 8) / 8)).ravel()
        new_loss = loss(new)
        t = transfer_time(new, new_loss, size, delay)
        evaluations += new.size
        rates = np.concatenate((rates, new))
        order = np.argsort(rates, kind="stable")
        rates = rates[order]
        losses = np.concatenate((losses, new_loss))[order]
        totals = np.concatenate((totals, np.where(t.completes, t.total_s, np.inf)))[order]
        rounds = np.concatenate((rounds, np.where(t.completes, t.rounds, np.inf)))[order]
    return float(rates[int(np.argmin(totals))]), evaluations


@settings(max_examples=40, deadline=None)
@given(
    mu=st.floats(20_000.0, 200_000.0),
    k=st.integers(8, 128),
    size=st.sampled_from([2_000, 50_000, 500_000_000, 10_000_000_000]),
    delay=st.floats(1e-4, 0.5),
    line_rate=st.sampled_from([1e8, 1e9, 1e10]),
)
def test_search_agrees_with_the_plain_algorithm(
    mu: float, k: int, size: int, delay: float, line_rate: float
) -> None:
    loss = mm1k_loss(mu, k)
    best = effective_bottleneck_rate(
        loss, line_rate_bps=line_rate, file_size_bytes=size, propagation_delay_s=delay
    )
    assert (best.rate_bps, best.loss_evaluations) == reference_search(loss, line_rate, size, delay)
    # The terms reported at the optimum are the formula's there, exactly.
    t = transfer_time(best.rate_bps, best.loss, size, delay)
    assert best.transfer_time_s == float(t.total_s)
    assert (best.first_blast_s, best.resend_s, best.feedback_s) == (
        float(t.first_blast_s),
        float(t.resend_s),
        float(t.feedback_s),
    )
    assert (best.n_resend, best.rounds) == (float(t.n_resend), int(t.rounds))
