"""The pooled, held-out scoring of validation runs (``benchmarks/validation_pool.py``).

References: the audit in issue #39 scored the six committed full runs the same way, by a
program of its own, and published the default model's ratios to each baseline; closed
forms on made-up rows with no noise.
"""

from __future__ import annotations

import importlib.util
import json
import math
from pathlib import Path
from typing import Any

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[2]
_spec = importlib.util.spec_from_file_location(
    "validation_pool", ROOT / "benchmarks" / "validation_pool.py"
)
assert _spec is not None and _spec.loader is not None
pool_module = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(pool_module)

SIX_RUNS = [
    ROOT / "docs" / "results" / f"validate_transfer_{name}.json"
    for name in ("full", "share_run1", "share_run2", "share_run3", "lag_run1", "lag_run2")
]


def _workload(
    times: dict[float, list[float]], models: dict[str, float], *, line: float = 400.0, c: int = 0
) -> dict[str, Any]:
    best = min(times, key=lambda r: float(np.mean(times[r])))
    return {
        "buffer_packets": 100,
        "delay_s": 0.01,
        "cpu_tasks": c,
        "io_tasks": 0,
        "batch_packets": 8,
        "line_rate_bps": line,
        "best_rate_bps": best,
        "noisy": False,
        "models": {name: {"rate_bps": rate} for name, rate in models.items()},
        "baselines": {"line_rate": {"rate_bps": line}, "half_line": {"rate_bps": line / 2}},
        "rates": [
            {"rate_bps": r, "times_s": t, "failed": 0, "in_grid": True} for r, t in times.items()
        ],
    }


def test_a_rule_at_the_true_best_scores_one_without_noise() -> None:
    # Times exactly convex in rate, the same in every pass: the held-out best is the true
    # best, so a rule there scores exactly 1 and any other rate exactly its time ratio.
    times = {100.0: [2.0] * 5, 200.0: [1.0] * 5, 300.0: [1.5] * 5, 400.0: [3.0] * 5}
    run = {"workloads": [_workload(times, {"timeslice": 200.0, "paper": 300.0})]}
    scored = pool_module.score([run], ["a"])
    ratios = scored["rows"][0]["ratios"]
    assert ratios["timeslice"][0] == 1.0
    assert ratios["paper"][0] == 1.5
    assert ratios["line_rate"][0] == 3.0
    # A rate between two measured ones: interpolated pass by pass (250 -> 1.25 s).
    row = pool_module.Row(run["workloads"][0])
    assert row.at(250.0) == pytest.approx([1.25] * 5)
    assert row.at(1e9) == pytest.approx([3.0] * 5)  # clamped to the measured range


def test_the_held_out_best_is_chosen_pass_by_pass() -> None:
    # Worked by hand.  Rate 100 takes 1.0, 1.0, 1.6 s in passes 0-2, rate 200 1.2, 1.2,
    # 1.0 s.  Pass 0 held out: on passes 1-2, 100 sums 2.6 and 200 2.2, so 200 is chosen,
    # 1.2 s; pass 1 likewise, 1.2 s; pass 2 held out: 100 (2.0 against 2.4), 1.6 s.  The
    # held-out best sums 4.0 s: a rule at 100 scores 3.6 / 4.0, one at 200 3.4 / 4.0
    # (in sample, 200 would be "the best" and score exactly 1).
    times = {100.0: [1.0, 1.0, 1.6], 200.0: [1.2, 1.2, 1.0]}
    w = _workload(times, {"timeslice": 100.0, "paper": 200.0}, line=200.0)
    ratios = pool_module.score([{"workloads": [w]}], ["a"])["rows"][0]["ratios"]
    assert ratios["timeslice"][0] == pytest.approx(0.9)
    assert ratios["paper"][0] == pytest.approx(0.85)


def test_a_rule_at_a_failed_rate_is_not_scored_and_one_pass_is_not_enough() -> None:
    times = {100.0: [2.0] * 3, 200.0: [1.0] * 3}
    w = _workload(times, {"timeslice": 200.0, "paper": 300.0}, line=300.0)
    w["rates"].append({"rate_bps": 300.0, "times_s": [0.5, 0.5], "failed": 1, "in_grid": True})
    scored = pool_module.score([{"workloads": [w]}], ["a"])
    ratios = scored["rows"][0]["ratios"]
    # Never the 200 neighbour's time (it would score 1): no score at all.
    assert "paper" not in ratios and "line_rate" not in ratios
    assert ratios["timeslice"][0] == 1.0
    one = _workload({100.0: [2.0], 200.0: [1.0]}, {"timeslice": 200.0})
    scored = pool_module.score([{"workloads": [one]}], ["a"])
    assert scored["rows"] == [] and scored["skipped"][0]["passes"] == 1


def test_a_repeat_run_as_the_model_is_the_ceiling_of_the_previous_run_bar() -> None:
    # Three made-up runs with noise-free times, the same in each: 100 takes 2 s, 200 1 s,
    # 300 1.5 s.  Their recorded bests differ (as noisy runs' do): 200, 300, 100.  Run 1,
    # the only one with both neighbours, is timed 2.0 s at run 2's best (100) and 1.0 s at
    # run 0's (200): the next run's best over the previous run's is 2.0 there.
    times = {100.0: [2.0] * 3, 200.0: [1.0] * 3, 300.0: [1.5] * 3}
    runs = []
    for best in (200.0, 300.0, 100.0):
        w = _workload(times, {"timeslice": 200.0})
        w["best_rate_bps"] = best
        runs.append({"workloads": [w]})
    names = ["a", "b", "c"]
    scored = pool_module.score(runs, names)
    by_run = {r["run"]: r["ratios"] for r in scored["rows"]}
    assert by_run[0]["next_run_best"][0] == 1.5 and "previous_run_best" not in by_run[0]
    assert by_run[2]["previous_run_best"][0] == 1.5 and "next_run_best" not in by_run[2]
    ceiling = pool_module.pool(scored, names)["next_over_previous_run_best"]
    assert ceiling["geometric_mean"] == pytest.approx(2.0) and ceiling["rows"] == 1


def test_the_runs_go_after_the_double_dash() -> None:
    import subprocess
    import sys

    script = ROOT / "benchmarks" / "validation_pool.py"
    done = subprocess.run(
        [sys.executable, str(script), "--", "--cpu-tasks", "0"], capture_output=True, text=True
    )
    assert done.returncode == 2
    assert "arguments after -- are for the runs that --repeat makes" in done.stderr


def test_the_held_out_best_has_no_winners_curse() -> None:
    # Two equally fast rates with independent noise: the in-sample best beats both in
    # expectation (its mean is the smaller of two), the held-out best does not.  Over many
    # made-up rows, a rule fixed on one of them scores 1 on a log scale within 3 standard
    # errors, where the in-sample best's ratio is below 1 by the expected minimum of two
    # means (0.56 sigma/sqrt(5) with sigma = 0.05: about 1.3 %).
    rng = np.random.default_rng(3)
    logs, in_sample = [], []
    for _ in range(400):
        a = list(1.0 + 0.05 * rng.standard_normal(5))
        b = list(1.0 + 0.05 * rng.standard_normal(5))
        w = _workload({100.0: a, 200.0: b}, {"timeslice": 100.0}, line=200.0)
        ratios = pool_module.score([{"workloads": [w]}], ["a"])["rows"][0]["ratios"]
        logs.append(math.log(ratios["timeslice"][0]))
        in_sample.append(math.log(np.mean(a) / min(np.mean(a), np.mean(b))))
    se = np.std(logs) / math.sqrt(len(logs))
    assert abs(np.mean(logs)) < 3 * se
    assert np.mean(in_sample) > 0.008


@pytest.mark.skipif(not all(p.exists() for p in SIX_RUNS), reason="the committed runs")
def test_the_committed_runs_score_as_the_audit_found() -> None:
    # Issue #39's audit, pooled over the six committed full runs (96 rows): the default
    # over the line rate 0.871, half line 0.856, share rule 0.780, three quarters of the
    # line 0.939, `paper` 1.002, `timeslice-no-slices` 1.020.  The audit printed three
    # decimals: tolerance half a unit in the last place, and a little for rounding.
    import json

    runs = [json.loads(p.read_text()) for p in SIX_RUNS]
    names = [p.stem for p in SIX_RUNS]
    # The audit scored the time-slice model, the default then.
    result = pool_module.pool(pool_module.score(runs, names), names, default="timeslice")
    over = result["default_over"]
    expected = {
        "line_rate": 0.871,
        "half_line": 0.856,
        "share_rule": 0.780,
        "three_quarter_line": 0.939,
        "paper": 1.002,
        "timeslice-no-slices": 1.020,
    }
    for name, value in expected.items():
        assert over[name]["geometric_mean"] == pytest.approx(value, abs=6e-4), name
        assert over[name]["rows"] == 96
    # The audit's interval for the line rate, resampling passes: [0.861, 0.883].
    low, high = over["line_rate"]["passes_95"]
    assert low == pytest.approx(0.861, abs=0.003) and high == pytest.approx(0.883, abs=0.003)


V3_RUNS = [ROOT / "docs" / "results" / f"validate_transfer_v3_run{i}.json" for i in range(1, 5)]


SEND_AUTO = ROOT / "docs" / "results" / "send_auto.json"


@pytest.mark.skipif(not all(p.exists() for p in [*V3_RUNS, SEND_AUTO]), reason="the committed runs")
def test_the_committed_runs_choose_the_shipped_default() -> None:
    # Issue #39 §2: the default is the simplest and cheapest model that no other is
    # resolvably better than.  On the committed validation runs of the version-3 data
    # mover the time-slice model's time over the paper's was 0.989 [0.970, 1.007] over
    # runs: alone, the rule picks `paper`.  On the product's path (send_auto.py, both
    # models in the same blocks) the paper's time over the time-slice model's was 1.192
    # [1.155, 1.231] out of the box and 1.075 [1.041, 1.111] calibrated: resolvably worse,
    # so the rule picks `timeslice`, which `send --rate auto` ships (transport.models).
    import json

    from transport import DEFAULT_RECEIVER_MODEL

    runs = [json.loads(p.read_text()) for p in V3_RUNS]
    names = [p.stem for p in V3_RUNS]
    send_auto = json.loads(SEND_AUTO.read_text())
    both = pool_module.pool(pool_module.score(runs, names), names, send_auto=send_auto)
    # The lab's runs alone: neither model resolvably worse, so the rule picks `paper`.
    lab = both["resolvably_worse_than"]
    assert pool_module.chosen_model(lab, ("paper", "timeslice")) == "paper"
    timeslice_over_paper = both["models_pairwise"]["timeslice"]["paper"]
    assert timeslice_over_paper["geometric_mean"] == pytest.approx(0.989, abs=6e-4)
    low, high = timeslice_over_paper["runs_95"]
    assert low < 1.0 < high
    # With the product's path: `paper` resolvably worse, so the rule picks the shipped one.
    assert both["product_path_worse"] == {"paper": ["timeslice"]}
    assert both["chosen_model"] == DEFAULT_RECEIVER_MODEL


def test_the_product_path_comparison_reads_both_directions() -> None:
    def run(default: str, ci: list[float]) -> dict[str, Any]:
        row = {"gmean": 1.0, "ci95": ci}
        other = "paper" if default == "timeslice" else "timeslice"
        return {"default_model": default, "tables": {"h": {f"auto / auto-{other}": row}}}

    worse = pool_module.product_path_worse
    assert worse(run("paper", [1.04, 1.11])) == {"paper": ["timeslice"]}
    assert worse(run("timeslice", [1.04, 1.11])) == {"timeslice": ["paper"]}
    assert worse(run("timeslice", [0.90, 0.97])) == {"paper": ["timeslice"]}
    assert worse(run("paper", [0.97, 1.02])) == {}


def test_the_rule_takes_the_cheapest_model_that_nothing_beats() -> None:
    rule = pool_module.chosen_model
    cheap_first = ("paper", "timeslice")
    assert rule({"paper": [], "timeslice": []}, cheap_first) == "paper"
    assert rule({"paper": ["timeslice"], "timeslice": []}, cheap_first) == "timeslice"
    # Beaten by an ablation that the product does not ship: still not chosen.
    assert rule({"paper": ["timeslice-x"], "timeslice": []}, cheap_first) == "timeslice"
    assert rule({"paper": ["timeslice"], "timeslice": ["paper"]}, cheap_first) is None
    # A model that the runs did not score is not chosen.
    assert rule({"timeslice": []}, cheap_first) == "timeslice"


def test_the_senders_hold_is_what_it_sent_over_what_it_was_asked_below_the_line() -> None:
    # Worked by hand: rates 100, 200 and 300 below a line of 400 held 1.0, 0.5 and 0.8 of
    # themselves; the line rate (held by the line, not the pacer) and a noisy row are
    # left out.  Median 0.8; percentiles by linear interpolation: p10 0.56, p90 0.96.
    times = {100.0: [2.0], 200.0: [1.0], 300.0: [1.5], 400.0: [3.0]}
    w = _workload(times, {"timeslice": 200.0})
    for r, held in zip(w["rates"], (1.0, 0.5, 0.8, 0.1), strict=True):
        r["achieved_rate_bps"] = {"n": 1, "mean": held * r["rate_bps"]}
    noisy = {**w, "noisy": True, "rates": [{**w["rates"][1], "rate_bps": 1.0}]}
    run = {"workloads": [w, noisy], "calibration": {"net": {"sender_max_rate_bps": {"mean": 9e8}}}}
    hold = pool_module.sender_hold([run, {"workloads": []}], ["a", "b"])
    assert list(hold) == ["a"]  # a run with nothing measured has no figure
    assert hold["a"]["rates"] == 3
    assert hold["a"]["median"] == pytest.approx(0.8)
    assert hold["a"]["p10"] == pytest.approx(0.56)
    assert hold["a"]["p90"] == pytest.approx(0.96)
    assert hold["a"]["unpaced_bps"] == 9e8


def test_the_committed_runs_show_which_sender_held_its_rates() -> None:
    # The pacer's fault the fresh runs of 2026-11-28 (9-11) had: paced rates got well under
    # themselves (median 0.57-0.64), where the runs before (5-8) and after the pacer's
    # catch-up (12-14) got 0.99-1.00 of them (docs/validation.md).
    runs = {
        n: json.loads((ROOT / "docs" / "results" / f"validate_transfer_v3_run{n}.json").read_text())
        for n in (5, 9, 10, 11, 12)
    }
    hold = pool_module.sender_hold(list(runs.values()), [str(n) for n in runs])
    assert hold["5"]["median"] > 0.98 and hold["12"]["median"] > 0.98
    assert all(hold[n]["median"] < 0.7 for n in ("9", "10", "11"))


def test_runs_made_before_the_default_changed_are_read_with_todays_names() -> None:
    # Runs 9-14 scored the default of their day as "timeslice" and today's model as
    # "timeslice-read-cost", with c = C, and "-read-cost-measured" with the measured c_C;
    # runs 15-25 called the c = C form "timeslice" and the measured one
    # "timeslice-measured-share".  Read, they name them as validate_transfer.py does now:
    # "timeslice" the calibrated form, "timeslice-processor-sharing" the other.  Runs 1-8
    # scored nothing that is today's and keep their names.
    before = {
        "workloads": [
            {"models": {n: {"rate_bps": float(i)} for i, n in enumerate(pool_module.RENAMED)}}
        ]
    }
    after = pool_module.today_names(before)["workloads"][0]["models"]
    assert after["timeslice"]["rate_bps"] == 3.0  # was timeslice-read-cost-measured
    assert after["timeslice-processor-sharing"]["rate_bps"] == 2.0  # timeslice-read-cost
    assert after["timeslice-processor-sharing-skip-wakeup"]["rate_bps"] == 0.0
    assert after["timeslice-skip-wakeup"]["rate_bps"] == 1.0  # its measured form
    sends = ("timeslice", "timeslice-measured-share", "timeslice-single-sends", "paper")
    run22 = {"workloads": [{"models": {n: {"rate_bps": float(i)} for i, n in enumerate(sends)}}]}
    after = pool_module.today_names(run22)["workloads"][0]["models"]
    assert {n: m["rate_bps"] for n, m in after.items()} == {
        "timeslice-processor-sharing": 0.0,
        "timeslice": 1.0,
        "timeslice-processor-sharing-single-sends": 2.0,
        "paper": 3.0,
    }
    today = {"workloads": [{"models": {"timeslice": {}, "timeslice-processor-sharing": {}}}]}
    assert pool_module.today_names(today) is today
    older = {"workloads": [{"models": {"timeslice": {}, "timeslice-measured-share": {}}}]}
    assert pool_module.today_names(older) is older
