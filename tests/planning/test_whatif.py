"""What-if: each change is the method's own answer, the ranking, the best (K, N), and
elasticities against closed forms."""

from __future__ import annotations

import math
import struct
from typing import Any

import pytest

from planning import PlanningError, evaluate_point, resolve_point
from planning.whatif import COALESCE_CANDIDATES, elasticities, what_if

POINT = {"cpu_tasks": 2, "io_tasks": 1, "file_size": 500_000_000, "propagation_delay": 0.1}
# What-if ranks with the paper's model unless told otherwise: its references name it.
PAPER_POINT = {**POINT, "model": "paper"}


@pytest.fixture(scope="module")
def answer() -> Any:
    return what_if(POINT, max_buffer_packets=256, interface="enp3s0")


def _bits(x: float) -> bytes:
    return struct.pack("<d", x)


def test_every_change_is_the_method_evaluated_at_the_changed_point(answer: Any) -> None:
    # Reference: evaluate_point (transport.workload_bottleneck_rate) on the changed
    # inputs; the what-if path shares the end-system solve and runs the queue in threads,
    # and must still give the same bits.
    base = resolve_point(PAPER_POINT)
    assert answer.baseline == evaluate_point(base) and answer.baseline["model"] == "paper"
    for change in answer.changes:
        ref = evaluate_point({**base, change["parameter"]: change["after"]})
        assert _bits(change["effective_bottleneck_rate_bps"]) == _bits(
            ref["effective_bottleneck_rate_bps"]
        )
        assert _bits(change["transfer_time_s"]) == _bits(ref["transfer_time_s"])
        saved = answer.baseline["transfer_time_s"] - ref["transfer_time_s"]
        if change["note"] and change["note"].startswith("no change"):
            # Within the rate search's resolution (0.1 Mbit/s of the baseline's rate).
            limit = (
                answer.baseline["transfer_time_s"]
                * 1e5
                / answer.baseline["effective_bottleneck_rate_bps"]
            )
            assert change["time_saved_s"] == 0.0 and abs(saved) <= limit
        else:
            assert change["time_saved_s"] == saved


def test_noise_reads_as_no_change_and_surprises_are_explained(answer: Any) -> None:
    """Before: "+1.661e-09 s" saved by a faster line, a larger ring lowering the rate yet
    saving time, and a negative elasticity to mu_disk, all without a word."""
    by_id = {c["change"]: c for c in answer.changes}
    line = next(c for c in answer.changes if c["parameter"] == "line_rate")
    assert line["time_saved_s"] == 0.0 and line["note"].startswith("no change")
    rings = [c for c in answer.changes if c["parameter"] == "buffer_packets"]
    for ring in rings:
        if ring["rate_gain_bps"] < 0 < ring["time_saved_s"]:
            assert "loses less" in ring["note"]
    assert any(c["note"] and "loses less" in c["note"] for c in rings), by_id.keys()
    e = {x["parameter"]: x for x in answer.elasticities}
    assert e["mu_disk"]["rate_elasticity"] < 0 and "I/O-bound" in e["mu_disk"]["note"]
    assert e["mu_net"]["note"] is None  # an unsurprising sign needs no word
    assert e["line_rate"]["rate_elasticity"] == 0.0


def test_the_changes_a_person_could_make(answer: Any) -> None:
    ids = {c["change"] for c in answer.changes}
    assert {
        "one-more-core",
        "mu-net-x1.5",
        "mu-net-x2",
        "ring-x2",
        "ring-x4",
        "one-cpu-task-fewer",
        "faster-line",
    } <= ids
    assert {f"coalesce-{n}" for n in COALESCE_CANDIDATES if n != 6} <= ids
    after = {c["change"]: c["after"] for c in answer.changes}
    assert (after["ring-x2"], after["ring-x4"]) == (128, 256)
    assert after["faster-line"] == 2.5e9 and after["mu-net-x1.5"] == 41600 * 1.5
    saved = [c["time_saved_s"] for c in answer.changes]
    assert saved == sorted(saved, reverse=True)  # most time saved first


def test_ring_is_capped_at_the_nics_maximum() -> None:
    w = what_if(POINT, max_buffer_packets=100)
    rings = [c for c in w.changes if c["parameter"] == "buffer_packets"]
    assert [c["after"] for c in rings] == [100]  # x2 capped; x4 would be the same ring
    assert w.best_ring["buffer_packets"] <= 100


def test_best_ring_is_the_grid_minimum_with_ethtool_commands(answer: Any) -> None:
    ring = answer.best_ring
    base = resolve_point(PAPER_POINT)
    grid = [(k, n) for k in (64, 128, 256) for n in sorted({*COALESCE_CANDIDATES, 6}) if n <= k]
    assert ring["grid"] == len(grid)
    times = {
        kn: evaluate_point({**base, "buffer_packets": kn[0], "coalesce_packets": kn[1]})[
            "transfer_time_s"
        ]
        for kn in grid
    }
    best = min(times, key=lambda kn: (times[kn], kn))
    assert (ring["buffer_packets"], ring["coalesce_packets"]) == best
    assert ring["transfer_time_s"] == times[best]
    assert ring["commands"] == [
        f"ethtool -G enp3s0 rx {best[0]}",
        f"ethtool -C enp3s0 rx-frames {best[1]}",
    ]


def test_line_rate_limited_host_has_elasticity_one_to_the_line_and_zero_to_mu_net() -> None:
    # C = I = 0: the interrupt path serves 41600 * 6 packets/s, about 2.9 Gbit/s, far
    # above a 1 Gbit/s line, so the optimum is the line rate at 1 Gbps +- 5%: rate =
    # line rate exactly, d ln(rate) / d ln(line) = 1 and a faster interrupt path changes
    # nothing (elasticity 0).
    point = {**POINT, "cpu_tasks": 0, "io_tasks": 0}
    assert evaluate_point(point)["limited_by"] == "line-rate"
    e = {x["parameter"]: x for x in elasticities(point, parameters=("line_rate", "mu_net"))}
    assert e["line_rate"]["rate_elasticity"] == pytest.approx(1.0, abs=1e-12)
    assert e["mu_net"]["rate_elasticity"] == 0.0


@pytest.mark.parametrize(("cpu_tasks", "delay"), [(3, 0.1), (5, 0.01)])
def test_end_system_limited_elasticities_obey_eulers_identity(cpu_tasks: int, delay: float) -> None:
    # Closed form (homogeneity): with I = 0 the interrupt rate is
    # mu = mu_net * min(1, m / (C + 1)), proportional to mu_net, and the NIC loss depends
    # on B / mu only.  T = T_prop a(l) + (S / B) g(l), so scaling mu_net and the line rate
    # by s and T_prop by 1 / s scales T by 1 / s and the optimum B* by s.  Euler's
    # theorem for this degree-1 homogeneity gives
    #     e(mu_net) + e(line_rate) - e(propagation_delay) = 1
    # for the elasticities of B*.  Each central difference is off by the search
    # resolution, 0.1 Mbit/s over B* ~ 500-750 Mbit/s and a log step 2 ln 1.05 ~ 0.098,
    # i.e. ~2e-3; 5e-3 bounds the sum of three.
    point = {
        "cpu_tasks": cpu_tasks,
        "io_tasks": 0,
        "file_size": 500_000_000,
        "propagation_delay": delay,
        "model": "paper",  # the homogeneity above is the paper's model's
    }
    assert evaluate_point(point)["limited_by"] == "end-system"
    e = {
        x["parameter"]: x
        for x in elasticities(point, parameters=("mu_net", "line_rate", "propagation_delay"))
    }
    assert e["mu_net"]["low"] == pytest.approx(41600 / 1.05)
    assert e["mu_net"]["high"] == pytest.approx(41600 * 1.05)
    total = (
        e["mu_net"]["rate_elasticity"]
        + e["line_rate"]["rate_elasticity"]
        - e["propagation_delay"]["rate_elasticity"]
    )
    assert total == pytest.approx(1.0, abs=5e-3)
    # The line does not bind, so the rate barely depends on it.
    assert abs(e["line_rate"]["rate_elasticity"]) < 2e-3


def test_integer_parameters_step_by_at_least_one_and_one_sided_at_n_1() -> None:
    point = {**POINT, "coalesce_packets": 1}
    e = {
        x["parameter"]: x
        for x in elasticities(point, parameters=("coalesce_packets", "buffer_packets"))
    }
    assert (e["coalesce_packets"]["low"], e["coalesce_packets"]["high"]) == (1, 2)
    assert e["coalesce_packets"]["method"] == "forward"
    assert (e["buffer_packets"]["low"], e["buffer_packets"]["high"]) == (61, 67)
    r1 = evaluate_point(point)["effective_bottleneck_rate_bps"]
    r2 = evaluate_point({**point, "coalesce_packets": 2})["effective_bottleneck_rate_bps"]
    assert e["coalesce_packets"]["rate_elasticity"] == pytest.approx(
        (math.log(r2) - math.log(r1)) / math.log(2), rel=1e-12
    )


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({"interface": "eth0; rm -rf /"}, "interface"),
        ({"max_buffer_packets": 10}, "max_buffer_packets"),
        ({"step": 2.0}, "step"),
    ],
)
def test_bad_options_are_named(kwargs: dict[str, Any], field: str) -> None:
    with pytest.raises(PlanningError) as info:
        what_if(POINT, **kwargs)
    assert info.value.field == field
