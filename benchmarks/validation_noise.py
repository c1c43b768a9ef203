"""How reproducible is what ``validate_transfer.py`` scores?  Another run as the model.

The validation's bars (the model's loss curve within 3 points of the measured one below
2x the onset; the predicted rate within 10 % of the measured onset; the time ratio at
most 1.10 at 10 ms and 1.05 at 100 ms) assume that the measurement itself repeats to
better than that.  This script tests the assumption with runs already made: each run's
*measurements* serve as the "model" of every other run of the same grid, and are scored
by the same rules.  A model cannot be expected to agree with a run better than the same
machine's own repeat of it does; where this oracle misses a bar as often as the model,
the bar lies below the measurement's noise.

Per ordered pair (scored run A, oracle run B), per workload (K, delay, C, I) in both:

* **loss**: B's mean first-round loss, linearly interpolated in rate, at each of A's
  rates below 2x A's onset that lie within B's measured range (rates outside it are
  left out and counted, never extrapolated); the largest gap in points;
* **onset**: B's measured onset against A's, within 10 % (or both "no loss up to the
  line", counted as agreeing only when A's line is no higher than B's);
* **time**: B's best measured rate as the prediction, its time in A interpolated from A's
  measured mean times (A never ran at exactly that rate), over A's best time; the bar of
  A's delay.

Beside each, the model's own figure in run A (as ``validate_transfer.py`` scored it).
Nothing is measured here and no machine state matters: run it anywhere::

    .venv/bin/python benchmarks/validation_noise.py docs/validate_transfer_lag_run1.json \\
        docs/validate_transfer_lag_run2.json [more runs ...] [--json out.json]
"""

from __future__ import annotations

import argparse
import itertools
import json
import statistics
from pathlib import Path
from typing import Any

import numpy as np

LOSS_BAR = 0.03
ONSET_BAR = 0.10


def _time_bar(delay_s: float) -> float:
    return 1.05 if delay_s >= 0.1 else 1.10


def _key(w: dict[str, Any]) -> tuple[int, float, int, int]:
    return (w["buffer_packets"], w["delay_s"], w["cpu_tasks"], w["io_tasks"])


def _curve(w: dict[str, Any], field: str) -> tuple[np.ndarray, np.ndarray]:
    """(rates, mean of ``field``) over the workload's measured rates, sorted by rate."""
    pts = sorted((r["rate_bps"], r[field]["mean"]) for r in w["rates"] if r[field].get("n", 0) > 0)
    return np.array([p[0] for p in pts]), np.array([p[1] for p in pts])


def score_pair(a: dict[str, Any], b: dict[str, Any]) -> dict[str, Any]:
    """Run ``b``'s measurements scored as the model of run ``a``'s, one workload."""
    onset_a, onset_b = a["loss_onset_bps"], b["loss_onset_bps"]
    rate_b, loss_b = _curve(b, "first_round_loss")
    below = [
        r
        for r in a["rates"]
        if r["first_round_loss"].get("n", 0) > 0
        and (onset_a is None or r["rate_bps"] < 2 * onset_a)
    ]
    inside = [r for r in below if rate_b[0] <= r["rate_bps"] <= rate_b[-1]]
    gaps = [
        abs(r["first_round_loss"]["mean"] - float(np.interp(r["rate_bps"], rate_b, loss_b)))
        for r in inside
    ]
    model_gap = max(
        (abs(r["first_round_loss"]["mean"] - r["model_loss"]) for r in below), default=0.0
    )
    if onset_a is None:
        onset_ok = onset_b is None and a["line_rate_bps"] <= b["line_rate_bps"]
    else:
        onset_ok = onset_b is not None and abs(onset_b - onset_a) <= ONSET_BAR * onset_a
    pred = a["predicted_rate_bps"]
    if onset_a is None:
        model_onset_ok = pred >= 0.9 * a["line_rate_bps"]
    else:
        model_onset_ok = abs(pred - onset_a) <= ONSET_BAR * onset_a
    rate_a, time_a = _curve(a, "time_s")
    oracle_rate = min(b["best_rate_bps"], a["line_rate_bps"])
    oracle_ratio = float(np.interp(oracle_rate, rate_a, time_a)) / a["best_time_s"]
    bar = _time_bar(a["delay_s"])
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
        "oracle_onset_ok": onset_ok,
        "model_onset_ok": model_onset_ok,
        "oracle_rate_bps": oracle_rate,
        "oracle_time_ratio": oracle_ratio,
        "model_time_ratio": a["time_ratio"],
        "time_bar": bar,
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
        pairs.append({"scored": name_a, "oracle": name_b, **_totals(rows), "rows": rows})
    return {"runs": list(runs), "pairs": pairs}


def _totals(rows: list[dict[str, Any]]) -> dict[str, Any]:
    def within(key: str, bar: float | str) -> int:
        return sum(
            1
            for r in rows
            if r[key] is not None and r[key] <= (r[bar] if isinstance(bar, str) else bar)
        )

    return {
        "workloads": len(rows),
        "oracle_loss_within": within("oracle_loss_gap", LOSS_BAR),
        "model_loss_within": within("model_loss_gap", LOSS_BAR),
        "oracle_worst_loss_gap": max(
            (r["oracle_loss_gap"] for r in rows if r["oracle_loss_gap"] is not None), default=None
        ),
        "model_worst_loss_gap": max((r["model_loss_gap"] for r in rows), default=None),
        "oracle_onset_within": sum(r["oracle_onset_ok"] for r in rows),
        "model_onset_within": sum(r["model_onset_ok"] for r in rows),
        "oracle_time_within": within("oracle_time_ratio", "time_bar"),
        "model_time_within": within("model_time_ratio", "time_bar"),
        "oracle_worst_time_ratio": max((r["oracle_time_ratio"] for r in rows), default=None),
        "model_worst_time_ratio": max(
            (r["model_time_ratio"] for r in rows if r["model_time_ratio"] is not None),
            default=None,
        ),
    }


def _label(path: str) -> str:
    return Path(path).stem.removeprefix("validate_transfer_")


def _pct(x: float | None) -> str:
    return "-" if x is None else f"{100 * x:.1f}"


def _ratio(x: float | None) -> str:
    return "-" if x is None else f"{x:.3f}"


def report(result: dict[str, Any]) -> None:
    """One line per ordered pair: oracle against model, within-bar counts and worst cases."""
    print(
        f"{'scored':>14} {'oracle':>14} {'n':>3} | loss<=3pt orc/mod  worst orc/mod | "
        "onset orc/mod | time orc/mod  worst orc/mod"
    )
    for p in result["pairs"]:
        print(
            f"{_label(p['scored']):>14} {_label(p['oracle']):>14} {p['workloads']:>3} | "
            f"{p['oracle_loss_within']:>6}/{p['model_loss_within']:<6} "
            f"{_pct(p['oracle_worst_loss_gap']):>6}/{_pct(p['model_worst_loss_gap']):<6} | "
            f"{p['oracle_onset_within']:>5}/{p['model_onset_within']:<5} | "
            f"{p['oracle_time_within']:>4}/{p['model_time_within']:<4} "
            f"{_ratio(p['oracle_worst_time_ratio']):>6}/{_ratio(p['model_worst_time_ratio'])}"
        )
    pairs = result["pairs"]
    n = sum(p["workloads"] for p in pairs)
    for what in ("loss", "onset", "time"):
        orc = sum(p[f"oracle_{what}_within"] for p in pairs)
        mod = sum(p[f"model_{what}_within"] for p in pairs)
        print(f"# {what}: within the bar, oracle {orc}/{n}, model {mod}/{n} (all pairs)")
    every = sum(
        p["oracle_loss_within"]
        == p["oracle_onset_within"]
        == p["oracle_time_within"]
        == p["workloads"]
        for p in pairs
    )
    print(f"# pairs in which the oracle meets every bar in every workload: {every}/{len(pairs)}")
    med = statistics.median(
        p["oracle_worst_loss_gap"] for p in pairs if p["oracle_worst_loss_gap"] is not None
    )
    print(f"# median over pairs of the oracle's worst loss gap: {100 * med:.1f} points")


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
        n = own["workloads"]
        if not (
            own["oracle_loss_within"]
            == own["oracle_onset_within"]
            == own["oracle_time_within"]
            == n
            and own["oracle_worst_loss_gap"] == 0.0
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
