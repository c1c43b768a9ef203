"""How reproducible is what ``validate_transfer.py`` scores?  Another run as the model.

The validation's bars (the model's loss curve within 3 points of the measured one below
2x the onset; the predicted rate within 10 % of the measured onset; the time ratio at
most 1.10 at 10 ms and 1.05 at 100 ms) assume that the measurement itself repeats to
better than that.  This script tests the assumption with runs already made: each run's
*measurements* serve as the "model" of every other run of the validation (the same
command; the grids differ, as they follow each run's line rate and prediction), and are
scored by the same rules.  Where this oracle misses a bar, the bar lies below the
measurement's own noise.  The oracle is a pessimistic stand-in for a perfect model: its
5-transfer means carry their own sampling noise, so a model that knew the truth would
face about 1/sqrt(2) of the oracle's.

Per ordered pair (scored run A, oracle run B), per workload (K, delay, C, I) in both:

* **loss**: B's mean first-round loss, linearly interpolated in rate, at each of A's
  rates below 2x A's onset that lie within B's measured range (rates outside it are
  left out and counted, never extrapolated); the largest gap in points;
* **onset**: B "predicts" its own onset, or its line rate where it lost nothing; scored
  by ``report()``'s rule (within 10 % of A's onset, or at least 0.9x A's line where A
  lost nothing);
* **time**: B's best measured rate as the prediction, its time in A interpolated from A's
  measured mean times (A never ran at exactly that rate), over A's best time; the bar of
  A's delay.

A criterion is "not comparable" (left out, for the model too) where B's line stopped
below where A's answer lies: no loss point of A inside B's range; B's line under 0.9x
A's onset (or A's line); B's line under A's best rate.  Totals are given over all pairs
and over the pairs whose runs had the same line rate.

Beside each, the model's own figure in run A (as ``validate_transfer.py`` scored it).
Nothing is measured here and no machine state matters: run it anywhere::

    .venv/bin/python benchmarks/validation_noise.py docs/results/validate_transfer_lag_run1.json \\
        docs/results/validate_transfer_lag_run2.json [more runs ...] [--json out.json]
"""

from __future__ import annotations

import argparse
import itertools
import json
import statistics
import sys
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

# The validation's own bars, so that the oracle is scored exactly as a model is.
from validate_transfer import LOSS_BAR, loss_scored_rates, onset_ok, time_bar


def _key(w: dict[str, Any]) -> tuple[int, float, int, int]:
    return (w["buffer_packets"], w["delay_s"], w["cpu_tasks"], w["io_tasks"])


def _curve(w: dict[str, Any], field: str) -> tuple[np.ndarray, np.ndarray]:
    """(rates, mean of ``field``) over the workload's measured rates, sorted by rate."""
    pts = sorted((r["rate_bps"], r[field]["mean"]) for r in w["rates"] if r[field].get("n", 0) > 0)
    return np.array([p[0] for p in pts]), np.array([p[1] for p in pts])


def score_pair(a: dict[str, Any], b: dict[str, Any]) -> dict[str, Any]:
    """Run ``b``'s measurements scored as the model of run ``a``'s, one workload.

    Each criterion is None ("not comparable") where ``b`` could not have answered it,
    because its line stopped below where ``a``'s answer lies; the model is scored on the
    same rows too, so the two counts compare like with like.
    """
    onset_a, onset_b = a["loss_onset_bps"], b["loss_onset_bps"]
    line_a, line_b = a["line_rate_bps"], b["line_rate_bps"]
    rate_b, loss_b = _curve(b, "first_round_loss")
    below = loss_scored_rates(a)
    inside = [r for r in below if rate_b[0] <= r["rate_bps"] <= rate_b[-1]]
    gaps = [
        abs(r["first_round_loss"]["mean"] - float(np.interp(r["rate_bps"], rate_b, loss_b)))
        for r in inside
    ]
    model_gap = max(
        (abs(r["first_round_loss"]["mean"] - r["model_loss"]) for r in below), default=0.0
    )
    model_gap_inside = max(
        (abs(r["first_round_loss"]["mean"] - r["model_loss"]) for r in inside), default=None
    )
    # b "predicts" its own onset, or its line where it lost nothing; it can speak to a's
    # onset (or to a's "nothing up to the line") only if its line reached that far.
    oracle_pred = onset_b if onset_b is not None else line_b
    onset_comparable = line_b >= 0.9 * (onset_a if onset_a is not None else line_a)
    model_onset_ok = onset_ok(a["predicted_rate_bps"], a)
    # b's best rate can stand for a's only if b's line reached a's best rate.
    rate_a, time_a = _curve(a, "time_s")
    time_comparable = line_b >= a["best_rate_bps"]
    oracle_rate = min(b["best_rate_bps"], line_a)
    oracle_ratio = float(np.interp(oracle_rate, rate_a, time_a)) / a["best_time_s"]
    return {
        "workload": {
            "buffer_packets": a["buffer_packets"],
            "delay_s": a["delay_s"],
            "cpu_tasks": a["cpu_tasks"],
            "io_tasks": a["io_tasks"],
        },
        "oracle_loss_gap": max(gaps) if gaps else None,
        "oracle_loss_points_scored": len(inside),
        "oracle_loss_points_outside": len(below) - len(inside),
        "model_loss_gap": model_gap,
        "model_loss_gap_where_oracle_scored": model_gap_inside,
        "oracle_onset_ok": onset_ok(oracle_pred, a) if onset_comparable else None,
        "model_onset_ok": model_onset_ok,
        "oracle_rate_bps": oracle_rate,
        "oracle_time_ratio": oracle_ratio if time_comparable else None,
        "model_time_ratio": a["time_ratio"],
        "time_bar": time_bar(a["delay_s"]),
        "noisy": bool(a.get("noisy") or b.get("noisy")),
    }


def compare(runs: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """Every ordered pair of runs, every workload both ran; with totals per pair."""
    pairs = []
    for (name_a, run_a), (name_b, run_b) in itertools.permutations(runs.items(), 2):
        by_key = {_key(w): w for w in run_b["workloads"]}
        rows = [
            score_pair(w, by_key[_key(w)])
            for w in run_a["workloads"]
            if _key(w) in by_key and w["best_time_s"] and by_key[_key(w)]["best_rate_bps"]
        ]
        rows = [r for r in rows if not r["noisy"]]
        same_line = run_a["config"]["line_rate_bps"] == run_b["config"]["line_rate_bps"]
        pairs.append(
            {
                "scored": name_a,
                "oracle": name_b,
                "same_line_rate": same_line,
                **_totals(rows),
                "rows": rows,
            }
        )
    return {"runs": list(runs), "pairs": pairs}


def _totals(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """Per criterion: rows where the oracle could answer, how many of those it and the
    model got within the bar, and the worst cases."""
    loss = [r for r in rows if r["oracle_loss_gap"] is not None]
    onset = [r for r in rows if r["oracle_onset_ok"] is not None]
    time = [r for r in rows if r["oracle_time_ratio"] is not None]
    model_time = [r["model_time_ratio"] for r in time if r["model_time_ratio"] is not None]
    return {
        "workloads": len(rows),
        "loss_scored": len(loss),
        "oracle_loss_within": sum(r["oracle_loss_gap"] <= LOSS_BAR for r in loss),
        "model_loss_within": sum(r["model_loss_gap_where_oracle_scored"] <= LOSS_BAR for r in loss),
        "oracle_worst_loss_gap": max((r["oracle_loss_gap"] for r in loss), default=None),
        "model_worst_loss_gap": max(
            (r["model_loss_gap_where_oracle_scored"] for r in loss), default=None
        ),
        "onset_scored": len(onset),
        "oracle_onset_within": sum(bool(r["oracle_onset_ok"]) for r in onset),
        "model_onset_within": sum(r["model_onset_ok"] for r in onset),
        "time_scored": len(time),
        "oracle_time_within": sum(r["oracle_time_ratio"] <= r["time_bar"] for r in time),
        "model_time_within": sum(
            r["model_time_ratio"] is not None and r["model_time_ratio"] <= r["time_bar"]
            for r in time
        ),
        "oracle_worst_time_ratio": max((r["oracle_time_ratio"] for r in time), default=None),
        "model_worst_time_ratio": max(model_time, default=None),
        "oracle_meets_every_bar": bool(rows)
        and len(loss) == len(onset) == len(time) == len(rows)
        and all(r["oracle_loss_gap"] <= LOSS_BAR for r in loss)
        and all(r["oracle_onset_ok"] for r in onset)
        and all(r["oracle_time_ratio"] <= r["time_bar"] for r in time),
    }


def _label(path: str) -> str:
    return Path(path).stem.removeprefix("validate_transfer_")


def _pct(x: float | None) -> str:
    return "-" if x is None else f"{100 * x:.1f}"


def _ratio(x: float | None) -> str:
    return "-" if x is None else f"{x:.3f}"


def _counts(pairs: list[dict[str, Any]], what: str) -> str:
    scored = sum(p[f"{what}_scored"] for p in pairs)
    orc = sum(p[f"oracle_{what}_within"] for p in pairs)
    mod = sum(p[f"model_{what}_within"] for p in pairs)
    return f"oracle {orc}/{scored}, model {mod}/{scored}"


def report(result: dict[str, Any]) -> None:
    """One line per ordered pair: oracle against model, within-bar counts (of the rows the
    oracle could answer) and worst cases; then totals over all pairs and over the pairs
    whose runs had the same line rate."""
    print(
        f"{'scored':>14} {'oracle':>14} {'n':>3} | loss<=3pt orc/mod/of  worst orc/mod | "
        "onset orc/mod/of | time orc/mod/of  worst orc/mod"
    )
    for p in result["pairs"]:
        print(
            f"{_label(p['scored']):>14} {_label(p['oracle']):>14} {p['workloads']:>3} | "
            f"{p['oracle_loss_within']:>5}/{p['model_loss_within']}/{p['loss_scored']:<4} "
            f"{_pct(p['oracle_worst_loss_gap']):>6}/{_pct(p['model_worst_loss_gap']):<6} | "
            f"{p['oracle_onset_within']:>5}/{p['model_onset_within']}/{p['onset_scored']:<5} | "
            f"{p['oracle_time_within']:>4}/{p['model_time_within']}/{p['time_scored']:<4} "
            f"{_ratio(p['oracle_worst_time_ratio']):>6}/{_ratio(p['model_worst_time_ratio'])}"
            + ("  same line" if p["same_line_rate"] else "")
        )
    for label, pairs in (
        ("all pairs", result["pairs"]),
        ("pairs with the same line rate", [p for p in result["pairs"] if p["same_line_rate"]]),
    ):
        if not pairs:
            continue
        print(f"# {label} ({len(pairs)}): within the bar, of the rows the oracle could answer:")
        for what in ("loss", "onset", "time"):
            print(f"#   {what}: {_counts(pairs, what)}")
        every = sum(p["oracle_meets_every_bar"] for p in pairs)
        print(f"#   pairs in which the oracle meets every bar in every workload: {every}")
        gaps = [p["oracle_worst_loss_gap"] for p in pairs if p["oracle_worst_loss_gap"] is not None]
        if gaps:
            print(
                f"#   median over pairs of the oracle's worst loss gap: "
                f"{100 * statistics.median(gaps):.1f} points"
            )


def main() -> None:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("runs", nargs="+", help="validate_transfer.py --json outputs (two or more)")
    ap.add_argument("--json", default=None, help="write the comparison here")
    args = ap.parse_args()
    if len(args.runs) < 2:
        ap.error("give at least two runs")
    runs = {path: json.loads(Path(path).read_text()) for path in args.runs}
    # The scoring's own check: a run as its own oracle must meet every bar exactly (gap 0,
    # onsets equal, time ratio 1), or the misses below would be the scoring's.
    for path, run in runs.items():
        own = compare({path: run, f"{path} (again)": run})["pairs"][0]
        if own["workloads"] and not (
            own["oracle_meets_every_bar"]
            and own["oracle_worst_loss_gap"] in (0.0, None)
            and abs(own["oracle_worst_time_ratio"] - 1.0) < 1e-12
        ):
            raise SystemExit(f"self-check failed: {path} scored against itself misses a bar")
    print(f"# self-check: each of the {len(runs)} runs, scored against itself, meets every bar")
    result = compare(runs)
    report(result)
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=1))


if __name__ == "__main__":
    main()
