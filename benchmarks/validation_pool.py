"""The model judged as this machine allows: held-out scores pooled over validation runs.

Per-row bars on five transfers are noise here (``validation_noise.py``: a repeat run,
used as the model, meets them in none of 30 pairs).  This script scores the runs of
``validate_transfer.py`` so that noise averages out and the winner's curse is gone:

* **held out.**  In each workload, every rate was timed once per pass, the rates of a
  pass in a shuffled order.  Hold out pass i, choose the best grid rate on the other
  passes, and time both a rule and that best on pass i.  A rule's held-out ratio in the
  workload is the sum of its held-out times over the sum of the best's (a rule that knew
  the true best rate scores about 1, not below it as an in-sample best does).  A rule
  whose rate was not measured gets each pass's time interpolated linearly in rate
  between the neighbouring measured rates (clamped to the measured range).
* **rules.**  Every model the run scored (the model ``send --rate auto`` ships,
  :data:`transport.DEFAULT_RECEIVER_MODEL`, is scored against the rest), the baselines
  (line rate, three quarters and half of it, the share rule), the previous and the next
  run's best rate for the same workload, and the **repeat-run oracle**: each other run's
  best rate, the noise ceiling (its ratios averaged on a log scale over the other runs).
  The next run's best over the previous run's is the ceiling of the bar "the default
  beats the previous run's best": what a repeat of the measurement, used as the model,
  scores against it.
* **pooled.**  Geometric means over the rows (workload x run), per run and over all
  runs; the default over each other rule is the geometric mean of the rows' time ratios.
  95 % intervals: resampling passes within rows, and resampling whole runs with the
  passes inside them (both 4,000 resamples; percentile intervals).
* **per workload**, the default over the oracle pooled over runs, its interval
  resampling runs: the misses that stand above the noise.
* **the sender's hold**, per run: the first blast's achieved rate over the paced rate
  asked for, below the line (:func:`sender_hold`).  A diagnostic: where it is well
  under 1 the sender, not the receiver, sets the rate, and no receiver model can win.
* **the default's choice** (issue #39 §2): of the product's models, simplest and
  cheapest first (:data:`transport.RECEIVER_MODELS`), the first that is resolvably worse
  than no other scored model (its interval over runs of its time over that model's
  wholly above 1), here or, with ``--send-auto JSON``, on the product's path.

Runs made before the default changed on 2026-11-29 are read with their models named as
today's (:func:`today_names`): ``timeslice`` is the default model as a calibrated host
runs it (its measured c_C), which runs before 2026-11-29 12:00 UTC called
``timeslice-measured-share`` (and earlier ``timeslice-read-cost-measured``).
Rows a run marked ``noisy`` (its run queue above the workload's own) are left out.
Scoring measures nothing::

    .venv/bin/python benchmarks/validation_pool.py docs/results/validate_transfer_v3_run*.json \\
        --send-auto docs/results/send_auto.json --json docs/results/validation_pool.json

``--repeat R --prefix P -- [validate_transfer.py arguments]`` first makes R full runs
back to back (as root, nothing else running), written to ``P1.json`` .. ``PR.json``, and
pools them with any runs given.
"""

from __future__ import annotations

import argparse
import json
import math
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from transport.models import DEFAULT_RECEIVER_MODEL, RECEIVER_MODELS

#: The model ``send --rate auto`` ships with, the key in a run's ``models`` that is scored
#: against the rest.
DEFAULT = DEFAULT_RECEIVER_MODEL
#: Rules that are not a model's: how a row's rate is found for them.
BASELINES = ("line_rate", "three_quarter_line", "half_line", "share_rule")
RESAMPLES = 4000


#: The models of a run made before 2026-11-29, when the default's backlogged receiver
#: stopped skipping its per-wake-up cost, named as today's runs name them: such a run has
#: a ``timeslice-read-cost`` (the default now) and calls the default then ``timeslice``.
RENAMED = {
    "timeslice": "timeslice-skip-wakeup",
    "timeslice-measured-share": "timeslice-skip-wakeup-measured",
    "timeslice-read-cost": "timeslice",
    "timeslice-read-cost-measured": "timeslice-measured-share",
}


def calibrated_name(name: str) -> str:
    """A model of a run made before 2026-11-29 12:00 UTC, named as today's runs name it.

    Such a run called the default with c = C ``timeslice`` and the default with the
    measured c_C (what a calibrated host runs) ``timeslice-measured-share``; today's runs
    call the calibrated form ``timeslice`` and the other ``timeslice-processor-sharing``,
    and build every ablation on the calibrated form.  An old ablation with c = C gains
    ``-processor-sharing``; one with the measured c_C loses ``-measured``.

    Examples
    --------
    >>> [calibrated_name(n) for n in ("timeslice", "timeslice-measured-share", "paper")]
    ['timeslice-processor-sharing', 'timeslice', 'paper']
    >>> calibrated_name("timeslice-single-sends")
    'timeslice-processor-sharing-single-sends'
    >>> calibrated_name("timeslice-skip-wakeup-measured")
    'timeslice-skip-wakeup'
    """
    if name == "timeslice-measured-share":
        return "timeslice"
    if name.endswith("-measured"):
        return name.removesuffix("-measured")
    if name == "timeslice" or name.startswith("timeslice-"):
        return "timeslice-processor-sharing" + name.removeprefix("timeslice")
    return name


def today_names(run: dict[str, Any]) -> dict[str, Any]:
    """``run`` with its models named as today's runs name them.

    A run without ``timeslice-processor-sharing`` was made before the default column
    became the calibrated form: its names are first made those of 2026-11-29 (a run
    with ``timeslice-read-cost``: :data:`RENAMED`), then those of today
    (:func:`calibrated_name`).  A run whose ``timeslice`` was not today's model even so
    (runs 1-8: no read-cost, skip-wakeup or single-sends form) keeps its names: its
    ``timeslice`` was the default of its day, and it scored nothing that is today's.
    """
    models = [w["models"] for w in run["workloads"]]
    if any("timeslice-processor-sharing" in m for m in models):
        return run
    first = RENAMED if any("timeslice-read-cost" in m for m in models) else {}
    names = {first.get(n, n) for m in models for n in m}
    if not names & {"timeslice-skip-wakeup", "timeslice-single-sends"}:
        return run
    rename = {n: calibrated_name(first.get(n, n)) for m in models for n in m}
    workloads = [
        {**w, "models": {rename.get(n, n): m for n, m in w["models"].items()}}
        for w in run["workloads"]
    ]
    return {**run, "workloads": workloads}


def _key(w: dict[str, Any]) -> tuple[int, float, int, int, int]:
    return (w["buffer_packets"], w["delay_s"], w["cpu_tasks"], w["io_tasks"], w["batch_packets"])


class Row:
    """One workload of one run: per-pass times at every measured rate.

    Attributes
    ----------
    rates : ndarray, shape (R,)
        Measured rates (bit/s), sorted.
    times : ndarray, shape (R, P)
        Transfer time (s) of each rate in each of the P passes that every rate completed.
    grid : ndarray of bool, shape (R,)
        Rates of the grids, among which the best is chosen.
    """

    def __init__(self, w: dict[str, Any]) -> None:
        # A rate with a failed transfer is left out of the interpolation (its passes no
        # longer line up: only successful times are recorded); a rule at exactly that
        # rate is not scored in this row (:meth:`failed_at`), never given a neighbour's.
        rows = sorted(
            (r for r in w["rates"] if r["times_s"] and not r["failed"]),
            key=lambda r: r["rate_bps"],
        )
        self.failed = np.array(
            sorted(r["rate_bps"] for r in w["rates"] if r["failed"] or not r["times_s"])
        )
        self.passes = min((len(r["times_s"]) for r in rows), default=0)
        self.rates = np.array([r["rate_bps"] for r in rows])
        self.times = np.array([r["times_s"][: self.passes] for r in rows])
        self.grid = np.array([bool(r["in_grid"]) for r in rows])
        self.line = float(w["line_rate_bps"])

    def failed_at(self, rate: float) -> bool:
        """Whether ``rate`` is a measured rate whose transfers did not all succeed."""
        return bool(np.any(np.isclose(self.failed, rate, rtol=1e-6, atol=0.0)))

    def at(self, rate: float) -> np.ndarray:
        """Per-pass times (s) at ``rate``, interpolated between measured rates."""
        rate = min(max(rate, self.rates[0]), self.rates[-1])
        j = int(np.searchsorted(self.rates, rate))
        if j < len(self.rates) and math.isclose(self.rates[j], rate, rel_tol=1e-6):
            return self.times[j]
        lo, hi = j - 1, j
        f = (rate - self.rates[lo]) / (self.rates[hi] - self.rates[lo])
        return self.times[lo] + f * (self.times[hi] - self.times[lo])

    def held_out_best(self) -> np.ndarray:
        """Per pass i, the time on pass i of the grid rate fastest on the other passes
        (s); shape (P,)."""
        grid = self.times[self.grid]  # (G, P)
        others = grid.sum(axis=1, keepdims=True) - grid
        best = np.argmin(others, axis=0)  # the grid row chosen with pass i held out
        return grid[best, np.arange(self.passes)]


def rule_rates(w: dict[str, Any], row: Row) -> dict[str, float]:
    """The rate (bit/s) of every model and baseline a run scored in workload ``w``."""
    rates = {name: float(m["rate_bps"]) for name, m in w["models"].items()}
    rates.update({name: float(b["rate_bps"]) for name, b in w["baselines"].items()})
    rates["three_quarter_line"] = 0.75 * row.line
    return rates


def held_out_ratios(row: Row, rates: dict[str, float], order: np.ndarray) -> dict[str, np.ndarray]:
    """Each rule's held-out ratio over resamples ``order`` of the passes (shape (B, P)):
    the held-out pairs (the rule's time on pass i, the time of the best chosen without
    it) are what is resampled; shape (B,)."""
    best = row.held_out_best()[order].sum(axis=1)
    return {
        name: row.at(rate)[order].sum(axis=1) / best
        for name, rate in rates.items()
        if not row.failed_at(rate)
    }


def score(runs: list[dict[str, Any]], names: list[str], seed: int = 7) -> dict[str, Any]:
    """Held-out ratios of every rule in every non-noisy row, with their resamples."""
    rng = np.random.default_rng(seed)
    table: list[dict[str, Any]] = []
    skipped: list[dict[str, Any]] = []
    index = [{_key(w): w for w in run["workloads"] if not w.get("noisy")} for run in runs]
    for r in range(len(runs)):
        for key, w in index[r].items():
            if not w.get("best_rate_bps"):
                continue
            row = Row(w)
            if row.passes < 2 or not row.grid.any():
                # One pass cannot choose a best without it (nor a row without a grid).
                skipped.append({"run": names[r], "key": key, "passes": row.passes})
                continue
            rates = rule_rates(w, row)
            others = [
                float(index[s][key]["best_rate_bps"])
                for s in range(len(runs))
                if s != r and key in index[s] and index[s][key].get("best_rate_bps")
            ]
            for name, s in (("previous_run_best", r - 1), ("next_run_best", r + 1)):
                if 0 <= s < len(runs) and key in index[s] and index[s][key].get("best_rate_bps"):
                    rates[name] = float(index[s][key]["best_rate_bps"])
            order = np.vstack(
                [np.arange(row.passes), rng.integers(0, row.passes, (RESAMPLES, row.passes))]
            )
            ratios = held_out_ratios(row, rates, order)
            oracle = [
                ratio
                for rate in others
                if (ratio := held_out_ratios(row, {"o": rate}, order).get("o")) is not None
            ]
            if oracle:
                ratios["oracle"] = np.exp(np.mean(np.log(oracle), axis=0))
            table.append(
                {
                    "run": r,
                    "run_name": names[r],
                    "key": key,
                    "ratios": ratios,
                    "models": sorted(w["models"]),
                }
            )
    return {"rows": table, "skipped": skipped}


def sender_hold(runs: list[dict[str, Any]], names: list[str]) -> dict[str, dict[str, Any]]:
    """How near each run's sender came to the rates it was asked for: the first blast's
    achieved rate over the paced rate, per measured rate of every non-noisy row, below
    the line (the line rate is held by the line, not the pacer).  A model is judged on
    rates the sender actually sends: where it holds well under 1, asking for more pays
    whatever the receiver does (runs 9-11 of 2026-11-28, before the pacer caught up in
    one call).  Median and the 10th and 90th percentiles, and the unpaced sender's rate
    from the run's calibration (bit/s)."""
    out: dict[str, dict[str, Any]] = {}
    for run, name in zip(runs, names, strict=True):
        held = [
            r["achieved_rate_bps"]["mean"] / r["rate_bps"]
            for w in run["workloads"]
            if not w.get("noisy")
            for r in w["rates"]
            if r["rate_bps"] < 0.999 * w["line_rate_bps"]
            and isinstance(r.get("achieved_rate_bps"), dict)
            and r["achieved_rate_bps"].get("n")
        ]
        if not held:
            continue
        p10, median, p90 = np.percentile(held, [10, 50, 90])
        unpaced = run.get("calibration", {}).get("net", {}).get("sender_max_rate_bps", {})
        out[name] = {
            "rates": len(held),
            "median": float(median),
            "p10": float(p10),
            "p90": float(p90),
            "unpaced_bps": unpaced.get("mean"),
        }
    return out


def _interval(samples: np.ndarray) -> list[float]:
    return [float(np.quantile(samples, 0.025)), float(np.quantile(samples, 0.975))]


def _pooled(
    rows: list[dict[str, Any]], value: Any, rng: np.random.Generator
) -> dict[str, Any] | None:
    """Geometric mean over ``rows`` of ``value(row)`` (an array over resamples, [0] the
    point), with intervals over passes and over runs (runs resampled, passes inside)."""
    logs = [(r["run"], np.log(v)) for r in rows if (v := value(r)) is not None]
    if not logs:
        return None
    by_run = np.array([run for run, _ in logs])
    values = np.array([v for _, v in logs])  # (rows, 1 + RESAMPLES)
    point = float(np.exp(values[:, 0].mean()))
    passes = np.exp(values[:, 1:].mean(axis=0))
    present = sorted(set(by_run.tolist()))
    members = {run: np.flatnonzero(by_run == run) for run in present}
    draws = np.empty(RESAMPLES)
    picks = rng.integers(0, len(present), (RESAMPLES, len(present)))
    for b in range(RESAMPLES):
        idx = np.concatenate([members[present[p]] for p in picks[b]])
        draws[b] = values[idx, 1 + b].mean()
    return {
        "geometric_mean": point,
        "passes_95": _interval(passes),
        "runs_95": _interval(np.exp(draws)) if len(present) > 1 else None,
        "rows": len(logs),
        "runs": len(present),
    }


def chosen_model(worse: dict[str, list[str]], candidates: tuple[str, ...]) -> str | None:
    """Issue #39's rule for the default: the first of ``candidates`` (simplest and
    cheapest first) that is resolvably worse than no other model; None if every one is.

    Examples
    --------
    >>> chosen_model({"paper": ["timeslice"], "timeslice": []}, ("paper", "timeslice"))
    'timeslice'
    >>> chosen_model({"paper": [], "timeslice": []}, ("paper", "timeslice"))
    'paper'
    """
    for name in candidates:
        if name in worse and not worse[name]:
            return name
    return None


def product_path_worse(send_auto: dict[str, Any]) -> dict[str, list[str]]:
    """The models that ``send_auto.py`` found resolvably worse on the product's path.

    In each host of a ``send_auto.py --json`` run, ``auto / auto-M`` is the default
    model's time over model M's, block by block in the same cells, with a 95 % interval
    resampling blocks: an interval wholly above 1 makes the default resolvably worse than
    M, wholly below 1 makes M resolvably worse than the default.
    """
    default = send_auto.get("default_model", "timeslice")  # runs before the field: timeslice
    worse: dict[str, set[str]] = {}
    for host, rows in send_auto.get("tables", {}).items():
        if host == "advice_cost":
            continue
        for name, row in rows.items():
            if not name.startswith("auto / auto-") or not row.get("ci95"):
                continue
            other = name.removeprefix("auto / auto-")
            low, high = row["ci95"]
            if low > 1.0:
                worse.setdefault(default, set()).add(other)
            elif high < 1.0:
                worse.setdefault(other, set()).add(default)
    return {k: sorted(v) for k, v in worse.items()}


def pool(
    scored: dict[str, Any],
    names: list[str],
    seed: int = 11,
    default: str = DEFAULT,
    send_auto: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """Pooled figures: each rule's held-out ratio, and ``default`` over each rule; per
    run and per workload; the model that issue #39's rule chooses among the product's
    models (:data:`transport.RECEIVER_MODELS`), from these runs and, if given, a
    ``send_auto.py`` run's comparison of the models on the product's path
    (:func:`product_path_worse`)."""
    rng = np.random.default_rng(seed)
    rows = scored["rows"]
    rules = sorted({name for r in rows for name in r["ratios"]})

    def ratio_of(name: str) -> Any:
        return lambda r: r["ratios"].get(name)

    def over(name: str, base: str = default) -> Any:
        def f(r: dict[str, Any]) -> np.ndarray | None:
            if base not in r["ratios"] or name not in r["ratios"]:
                return None
            return np.asarray(r["ratios"][base] / r["ratios"][name])

        return f

    # Models every run scored, each over each other: a model is resolvably worse than
    # another where the interval over runs of its ratio to it lies wholly above 1.
    models = sorted(
        set.intersection(*[set(r["models"]) & set(r["ratios"]) for r in rows]) if rows else set()
    )
    pairwise = {a: {b: _pooled(rows, over(b, a), rng) for b in models if b != a} for a in models}
    worse = {
        a: sorted(
            b for b, fig in against.items() if fig and fig["runs_95"] and fig["runs_95"][0] > 1.0
        )
        for a, against in pairwise.items()
    }

    out: dict[str, Any] = {
        "runs": names,
        "skipped_rows": scored.get("skipped", []),
        "held_out": {n: _pooled(rows, ratio_of(n), rng) for n in rules},
        "default": default,
        "default_over": {n: _pooled(rows, over(n), rng) for n in rules if n != default},
        "per_run": {
            names[i]: {
                n: _pooled([r for r in rows if r["run"] == i], over(n), rng)
                for n in ("oracle", *BASELINES)
            }
            for i in range(len(names))
        },
    }
    # The noise ceiling of the bar "the default beats the previous run's best": a
    # repeat run used as the model (the next run's best rate) against the previous run's.
    # A model as good as a repeat of the measurement scores what this scores.
    out["next_over_previous_run_best"] = _pooled(
        rows, over("previous_run_best", "next_run_best"), rng
    )
    out["models_pairwise"] = pairwise
    out["resolvably_worse_than"] = worse
    product = product_path_worse(send_auto) if send_auto else {}
    merged = {m: sorted({*worse.get(m, []), *product.get(m, [])}) for m in worse}
    out["product_path_worse"] = product
    out["chosen_model"] = chosen_model(merged, RECEIVER_MODELS)
    workloads = []
    for key in sorted({r["key"] for r in rows}):
        mine = [r for r in rows if r["key"] == key]
        figure = _pooled(mine, over("oracle"), rng)
        if figure is None:
            continue
        k, delay, c, i, n = key
        workloads.append(
            {
                "buffer_packets": k,
                "delay_s": delay,
                "cpu_tasks": c,
                "io_tasks": i,
                "batch_packets": n,
                **figure,
            }
        )
    out["per_workload_default_over_oracle"] = workloads
    return out


def _fmt(fig: dict[str, Any] | None) -> str:
    if fig is None:
        return "-"
    p, r = fig["passes_95"], fig["runs_95"]
    runs = f" / [{r[0]:.3f}, {r[1]:.3f}]" if r else ""
    return f"{fig['geometric_mean']:.3f}  [{p[0]:.3f}, {p[1]:.3f}]{runs}"


def report(result: dict[str, Any]) -> None:
    print(f"runs: {', '.join(result['runs'])}")
    print(f"\nthe default ({result['default']}) over each rule, geometric mean  [passes] / [runs]:")
    for name, fig in result["default_over"].items():
        print(f"  {name:28s} {_fmt(fig)}")
    ceiling = result.get("next_over_previous_run_best")
    print(
        "\nthe noise ceiling of that bar: the next run's best rate (a repeat run as the "
        f"model) over the previous run's\n  {'next_run_best / previous_run_best':28s} "
        f"{_fmt(ceiling)}"
    )
    print("\neach rule's held-out ratio to the best (1 = as good as the held-out best):")
    for name, fig in result["held_out"].items():
        print(f"  {name:28s} {_fmt(fig)}")
    print("\nmodels every run scored, and those each is resolvably worse than (over runs):")
    for name, worse in result["resolvably_worse_than"].items():
        print(f"  {name:28s} {', '.join(worse) or 'none'}")
    for name, worse in result.get("product_path_worse", {}).items():
        print(f"  on the product's path (send_auto.py): {name} resolvably worse than {worse}")
    chosen = result["chosen_model"]
    print(
        f"  the default by issue #39's rule (the first of {', '.join(RECEIVER_MODELS)} "
        f"resolvably worse than none): {chosen}"
        + ("" if chosen == result["default"] else f"; the shipped default is {result['default']}")
    )
    for skip in result["skipped_rows"]:
        print(f"  not scored: {skip['run']} {skip['key']}: {skip['passes']} pass(es)")
    hold = result.get("sender_hold", {})
    if hold:
        print("\nthe sender's hold on paced rates below the line (first blast achieved / asked):")
        for name, h in hold.items():
            unpaced = h["unpaced_bps"]
            print(
                f"  {name:28s} median {h['median']:.3f}  [p10 {h['p10']:.3f}, p90 "
                f"{h['p90']:.3f}] over {h['rates']} rates"
                + (f"; unpaced {unpaced / 1e6:.0f} Mbit/s" if unpaced else "")
            )
    print("\nper workload, default over oracle (K, delay ms, C, I):")
    for w in result["per_workload_default_over_oracle"]:
        flag = ""
        r = w["runs_95"]
        if r and r[0] > 1.10:
            flag = "  <- above 1.10 beyond the noise"
        print(
            f"  {w['buffer_packets']:5d} {w['delay_s'] * 1e3:4.0f} {w['cpu_tasks']} "
            f"{w['io_tasks']}  {_fmt(w)}{flag}"
        )


def main() -> None:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("runs", nargs="*", help="validate_transfer.py --json outputs, in run order")
    ap.add_argument("--json", default=None, help="write the pooled figures here")
    ap.add_argument(
        "--send-auto",
        default=None,
        help="a send_auto.py --json run whose comparison of the models on the product's "
        "path joins the choice of the default",
    )
    ap.add_argument(
        "--repeat",
        type=int,
        default=0,
        help="first make this many full runs back to back (as root, on a quiet machine), "
        "each validate_transfer.py with the arguments after --, writing PREFIX<i>.json",
    )
    ap.add_argument("--prefix", default=None, help="path prefix of the runs --repeat makes")
    # What follows "--" is validate_transfer.py's (argparse would take it as runs).
    argv = sys.argv[1:]
    cut = argv.index("--") if "--" in argv else len(argv)
    args = ap.parse_args(argv[:cut])
    extra = argv[cut + 1 :]
    paths = list(args.runs)
    if args.repeat:
        if not args.prefix or not 1 <= args.repeat <= 20:
            ap.error("--repeat takes 1..20 runs and needs --prefix")
        script = Path(__file__).with_name("validate_transfer.py")
        for i in range(1, args.repeat + 1):
            out = f"{args.prefix}{i}.json"
            print(f"# run {i} of {args.repeat}: {out}", flush=True)
            subprocess.run([sys.executable, str(script), *extra, "--json", out], check=True)
            paths.append(out)
    elif extra:
        ap.error("arguments after -- are for the runs that --repeat makes")
    if not paths:
        ap.error("give runs to pool, or --repeat")
    runs = [today_names(json.loads(Path(p).read_text())) for p in paths]
    names = [Path(p).stem for p in paths]
    send_auto = json.loads(Path(args.send_auto).read_text()) if args.send_auto else None
    result = pool(score(runs, names), names, send_auto=send_auto)
    result["sender_hold"] = sender_hold(runs, names)
    report(result)
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=1) + "\n")


if __name__ == "__main__":
    main()
