"""Scale benchmark of the SRN engine on Ciardo and Tilgner's Kanban net, against Storm.

Run from the repository root::

    .venv/bin/python benchmarks/srn_scale.py [--max-n 5] [--storm-max-n 4]
        [--storm-env default|plain|both] [--timeout 1800] [--json out.json]

``pip install -e '.[bench]'`` installs stormpy; without it only our engine runs.

The Kanban net (G. Ciardo and M. Tilgner, ICASE report 96-35, 1996; the rates are the
ones quoted in issue #2) has 4 cells of 4 places each, N kanbans per cell.  For every N
it builds the net, generates the tangible reachability graph, assembles the generator,
solves for the steady state and computes the throughput of ``in1`` -- once with this
project's engine and, when ``stormpy`` is installed (the ``bench`` extra), once with
Storm: the same net built with ``stormpy.gspn``, exported to JANI, built as a sparse CTMC
and model checked for ``LRA=? [kan1 > 0]`` (``in1`` has rate 1, so its throughput is
the long-run probability that it is enabled).

Every measurement runs in a fresh Python process, so that the peak resident memory
(``VmHWM``) belongs to one tool at one N.  Times are wall-clock seconds measured inside
that process and exclude the interpreter start and the imports (shown separately as
``import s``); ``total s`` is everything from building the net to having the answer,
including Numba's first call for our solver and Storm's JANI translation.  ``cpu s`` is
the CPU time of all the process's threads over the same span: above ``total s`` when a
tool computes on several threads (our solver does on chains of 200,000 states or more).

Checks (a row is flagged with ``!`` and the exit status is 1 when one fails):

* the tangible state counts against the published 160, 4,600, 58,400, 454,475,
  2,546,432, 11,261,376 and 41,644,800 (issue #2; Ciardo and Tilgner);
* the transition counts against Storm's in the same run, for N = 1..3 against the
  PRISM Kanban case study's 616, 28,120 and 446,400, and for N = 7 (where Storm cannot
  run here: 60.8 GB in QComp 2018) against QComp's 450,455,040;
* the residual ||pi Q||_1 <= 1e-10 (issue #2's target);
* the throughput of ``in1`` at N = 1 against the published 0.0925846346333826 (quoted in
  issue #2), absolute tolerance 1e-9.

The difference between our answer and Storm's is printed, not asserted: Storm's answers
carry its solver's own precision.  ``--storm-env`` picks Storm's settings: ``default`` is
what ``stormpy.model_checking`` uses when given no environment (soundness forced; its
times match issue #2's Storm figures); ``plain`` is a bare ``stormpy.Environment()``,
Storm's built-in defaults without soundness (several times faster at N = 4 and 5, and off
from the 6th digit at N = 1); ``both`` runs the two.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import platform
import resource
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

REDO = (0.36, 0.42, 0.39, 0.33)  # redo_i rates, cells 1..4
OK = (0.84, 0.98, 0.91, 0.77)  # ok_i rates
PUBLISHED_STATES = {
    1: 160,
    2: 4_600,
    3: 58_400,
    4: 454_475,
    5: 2_546_432,
    6: 11_261_376,
    7: 41_644_800,
}
# Storm's peak memory at N = 6 measured ~17 GB; it is skipped when less is available.
STORM_MEMORY_GB = {6: 17.0, 7: 61.0}  # N = 7: 60.8 GB in QComp 2018
# N = 7 as Storm built it in QComp 2018 (issue #24): the check where no Storm row can run.
PUBLISHED_TRANSITIONS = {7: 450_455_040}
PRISM_TRANSITIONS = {1: 616, 2: 28_120, 3: 446_400}
PUBLISHED_IN1_N1 = 0.0925846346333826
IN1_TOLERANCE = 1e-9
RESIDUAL_TARGET = 1e-10


def kanban_arcs() -> list[tuple[str, float, dict[str, int], dict[str, int]]]:
    """(name, rate, inputs, outputs) of the 16 transitions, shared by both tools."""
    arcs = [("in1", 1.0, {"kan1": 1}, {"m1": 1})]
    for i in range(1, 5):
        arcs += [
            (f"redo{i}", REDO[i - 1], {f"m{i}": 1}, {f"back{i}": 1}),
            (f"ok{i}", OK[i - 1], {f"m{i}": 1}, {f"out{i}": 1}),
            (f"back{i}", 0.3, {f"back{i}": 1}, {f"m{i}": 1}),
        ]
    arcs += [
        ("synch1_23", 0.4, {"out1": 1, "kan2": 1, "kan3": 1}, {"kan1": 1, "m2": 1, "m3": 1}),
        ("synch23_4", 0.5, {"out2": 1, "out3": 1, "kan4": 1}, {"kan2": 1, "kan3": 1, "m4": 1}),
        ("out4", 0.9, {"out4": 1}, {"kan4": 1}),
    ]
    return arcs


def kanban_places(n: int) -> dict[str, int]:
    """Initial marking: N kanbans in every cell, everything else empty."""
    places: dict[str, int] = {}
    for i in range(1, 5):
        places |= {f"kan{i}": n, f"m{i}": 0, f"back{i}": 0, f"out{i}": 0}
    return places


# -- measurements, each run in its own process ----------------------------------------


def _memory_mb(field: str) -> float:
    """VmHWM (peak) or VmRSS (current) of this process in MB; ru_maxrss if no /proc."""
    try:
        with open("/proc/self/status") as status:
            for line in status:
                if line.startswith(field + ":"):
                    return int(line.split()[1]) / 1024
    except OSError:
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def _cpu_s() -> float:
    """User plus system CPU seconds of this process so far, all its threads included."""
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def measure_ours(n: int) -> dict[str, Any]:
    start = time.perf_counter()
    from srn import Limits, Net, reachability_graph, steady_state, timed

    imported = time.perf_counter()
    import_rss = _memory_mb("VmRSS")
    begin, cpu_begin = time.perf_counter(), _cpu_s()
    net = Net(
        kanban_places(n),
        [timed(name, rate, inputs=i, outputs=o) for name, rate, i, o in kanban_arcs()],
    )
    # N = 6 has 11.3 million states and 116 million edges, N = 7 41.6 million and 450
    # million: above the defaults.
    graph = reachability_graph(net, limits=Limits(max_states=50_000_000, max_edges=600_000_000))
    generated = time.perf_counter()
    Q = graph.generator()
    assembled = time.perf_counter()
    result = steady_state(Q)
    solved = time.perf_counter()
    in1 = float(graph.throughput(result.probabilities)["in1"])
    end, cpu_end = time.perf_counter(), _cpu_s()
    return {
        "states": graph.n_states,
        "transitions": graph.n_edges,
        "uptime_load": os.getloadavg(),
        "import_s": imported - start,
        "build_s": generated - begin,
        "generator_s": assembled - generated,
        "steady_state_s": solved - assembled,
        "solve_s": end - assembled,
        "total_s": end - begin,
        "cpu_s": cpu_end - cpu_begin,
        "import_mb": import_rss,
        "peak_mb": _memory_mb("VmHWM"),
        "residual": result.residual,
        "method": result.method,
        "iterations": result.iterations,
        "in1": in1,
    }


def measure_storm(n: int, env: str) -> dict[str, Any]:
    start = time.perf_counter()
    import stormpy
    import stormpy.gspn

    imported = time.perf_counter()
    import_rss = _memory_mb("VmRSS")
    begin, cpu_begin = time.perf_counter(), _cpu_s()
    builder = stormpy.gspn.GspnBuilder()
    builder.set_gspn_name(f"kanban{n}")
    place = {
        name: builder.add_place(capacity=None, initial_tokens=tokens, name=name)
        for name, tokens in kanban_places(n).items()
    }
    for name, rate, inputs, outputs in kanban_arcs():
        # JANI puts places and transitions in one namespace; back_i is both.
        t = builder.add_timed_transition(0, rate, name=f"t_{name}")
        for p, k in inputs.items():
            builder.add_input_arc(place[p], t, k)
        for p, k in outputs.items():
            builder.add_output_arc(t, place[p], k)
    jani, _ = stormpy.gspn.build_jani_model(builder.build_gspn())
    prop = stormpy.parse_properties("LRA=? [kan1 > 0]", jani)[0]
    model = stormpy.build_model(jani, [prop])
    built = time.perf_counter()
    environment = stormpy.Environment() if env == "plain" else stormpy.environments.default(model)
    checked = stormpy.model_checking(model, prop, only_initial_states=True, environment=environment)
    lra = checked.get_value(model.initial_states[0])
    end, cpu_end = time.perf_counter(), _cpu_s()
    rate_in1 = next(rate for name, rate, _, _ in kanban_arcs() if name == "in1")
    return {
        "states": model.nr_states,
        "transitions": model.nr_transitions,
        "import_s": imported - start,
        "build_s": built - begin,
        "solve_s": end - built,
        "total_s": end - begin,
        "cpu_s": cpu_end - cpu_begin,
        "import_mb": import_rss,
        "peak_mb": _memory_mb("VmHWM"),
        "in1": rate_in1 * float(lra),
        "storm_version": getattr(stormpy, "__version__", "?"),
        "model_type": str(model.model_type),
    }


def available_gb() -> float:
    """MemAvailable from /proc/meminfo in GB (inf when unknown)."""
    try:
        with open("/proc/meminfo") as meminfo:
            for line in meminfo:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) / 1024**2
    except OSError:
        pass
    return float("inf")


def run_child(tool: str, n: int, timeout: float, storm_env: str) -> dict[str, Any]:
    """Run one measurement in a fresh interpreter; errors come back as {'error': ...}."""
    need = STORM_MEMORY_GB.get(n, 0.0) if tool == "storm" else 0.0
    if available_gb() < need:
        return {
            "error": f"skipped: needs about {need:g} GB, {available_gb():.1f} GB available",
            "load1": os.getloadavg()[0],
        }
    cmd = [sys.executable, __file__, "--child", tool, "--n", str(n), "--storm-env", storm_env]
    load = os.getloadavg()[0]
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, check=False)
    except subprocess.TimeoutExpired:
        return {"error": f"timed out after {timeout:g} s", "load1": load}
    lines = proc.stdout.strip().splitlines()
    if proc.returncode != 0 or not lines:
        tail = (proc.stderr.strip().splitlines() or [f"exit status {proc.returncode}"])[-1]
        return {"error": f"exit {proc.returncode}: {tail}", "load1": load}
    out: dict[str, Any] = json.loads(lines[-1])
    out["load1"] = load
    return out


# -- report -----------------------------------------------------------------------------


def check_ours(n: int, r: dict[str, Any], storms: list[dict[str, Any]]) -> list[str]:
    """Failed checks of one of our measurements (see the module docstring)."""
    problems = []
    if r["states"] != PUBLISHED_STATES.get(n, r["states"]):
        problems.append(f"states {r['states']:,} != published {PUBLISHED_STATES[n]:,}")
    if n in PRISM_TRANSITIONS and r["transitions"] != PRISM_TRANSITIONS[n]:
        problems.append(f"transitions {r['transitions']:,} != PRISM {PRISM_TRANSITIONS[n]:,}")
    if n in PUBLISHED_TRANSITIONS and r["transitions"] != PUBLISHED_TRANSITIONS[n]:
        problems.append(
            f"transitions {r['transitions']:,} != published {PUBLISHED_TRANSITIONS[n]:,}"
        )
    for storm in storms[:1]:
        if r["transitions"] != storm["transitions"]:
            problems.append(f"transitions {r['transitions']:,} != Storm {storm['transitions']:,}")
        if r["states"] != storm["states"]:
            problems.append(f"states {r['states']:,} != Storm {storm['states']:,}")
    if not r["residual"] <= RESIDUAL_TARGET:
        problems.append(f"residual {r['residual']:.2e} > {RESIDUAL_TARGET:g}")
    if n == 1 and abs(r["in1"] - PUBLISHED_IN1_N1) > IN1_TOLERANCE:
        problems.append(f"in1 {r['in1']:.16g} != published {PUBLISHED_IN1_N1} (tol 1e-9)")
    return problems


def print_row(n: int, tool: str, r: dict[str, Any] | None) -> bool:
    """Print one measurement; False if it failed."""
    if r is None:
        return True
    if "error" in r:
        print(f"{n:>2} {tool:<13} {r['error']}", flush=True)
        return False
    gen = r["build_s"] + r.get("generator_s", 0.0)
    residual = f"{r['residual']:9.1e}" if "residual" in r else f"{'-':>9}"
    print(
        f"{n:>2} {tool:<13} {r['states']:>10,} {r['transitions']:>12,} "
        f"{r['import_s']:>9.2f} {gen:>8.2f} {r['solve_s']:>8.2f} "
        f"{r['total_s']:>8.2f} {r['cpu_s']:>7.2f} {r['peak_mb']:>8.0f} {residual} "
        f"{r['in1']:>19.16f} {r['load1']:>5.2f}",
        flush=True,
    )
    return True


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--max-n", type=int, default=5, help="largest N (default 5)")
    parser.add_argument("--min-n", type=int, default=1, help="smallest N (default 1)")
    parser.add_argument(
        "--storm",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="also run Storm (default: when stormpy is importable)",
    )
    parser.add_argument(
        "--ours",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="run this project's engine (default; --no-ours times Storm alone)",
    )
    parser.add_argument("--storm-max-n", type=int, default=None, help="largest N for Storm")
    parser.add_argument(
        "--storm-env",
        choices=("default", "plain", "both"),
        default="default",
        help="Storm solver settings: 'default' is stormpy's default environment for the "
        "model (what stormpy.model_checking uses when given none: soundness "
        "forced), 'plain' a bare stormpy.Environment() (Storm's built-in defaults, "
        "soundness not forced), 'both' runs the two",
    )
    parser.add_argument(
        "--timeout", type=float, default=1800.0, help="seconds per measurement (1800)"
    )
    parser.add_argument("--json", type=Path, default=None, help="also write the rows here")
    parser.add_argument("--child", choices=("ours", "storm"), help=argparse.SUPPRESS)
    parser.add_argument("--n", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args()

    if args.child:
        if args.child == "ours":
            out = measure_ours(args.n)
        else:
            out = measure_storm(args.n, args.storm_env)
        print(json.dumps(out))
        return 0

    if not 1 <= args.min_n <= args.max_n:
        parser.error("need 1 <= --min-n <= --max-n")
    storm_available = importlib.util.find_spec("stormpy") is not None
    run_storm = storm_available if args.storm is None else args.storm
    if run_storm and not storm_available:
        parser.error("--storm given but stormpy is not importable (pip install -e '.[bench]')")
    storm_max = args.max_n if args.storm_max_n is None else args.storm_max_n

    print(
        f"Kanban net (Ciardo & Tilgner), N = {args.min_n}..{args.max_n}; "
        f"Python {platform.python_version()}, {os.cpu_count()} CPUs, "
        f"load average {os.getloadavg()[0]:.2f} at start"
    )
    if not run_storm:
        print(
            "Storm: not run ("
            + ("--no-storm" if storm_available else "stormpy is not installed; ")
            + ("" if storm_available else "pip install -e '.[bench]' to compare")
            + ")"
        )
    envs = ["default", "plain"] if args.storm_env == "both" else [args.storm_env]
    if run_storm:
        print(f"Storm: stormpy, environment {' and '.join(envs)}, N <= {storm_max}")
    print("Each row is a fresh process; times in s exclude imports; memory is peak RSS.\n")

    header = (
        f"{'N':>2} {'tool':<13} {'states':>10} {'transitions':>12} {'import s':>9} "
        f"{'gen s':>8} {'solve s':>8} {'total s':>8} {'cpu s':>7} {'peak MB':>8} "
        f"{'residual':>9} "
        f"{'in1 throughput':>19} {'load':>5}"
    )
    print(header)
    print("-" * len(header))
    rows = []
    failed = False
    for n in range(args.min_n, args.max_n + 1):
        ours = run_child("ours", n, args.timeout, "default") if args.ours else None
        failed |= not print_row(n, "ours", ours)
        storms: dict[str, dict[str, Any]] = {}
        for env in envs if run_storm and n <= storm_max else []:
            storms[env] = run_child("storm", n, args.timeout, env)
            failed |= not print_row(n, f"storm-{env}", storms[env])
        row: dict[str, Any] = {"n": n, "ours": ours, "storm": storms}
        if ours is not None and "error" not in ours:
            done = {env: r for env, r in storms.items() if "error" not in r}
            row["problems"] = problems = check_ours(n, ours, list(done.values()))
            for p in problems:
                print(f"   ! {p}")
            failed |= bool(problems)
            for env, storm in done.items():
                diff = ours["in1"] - storm["in1"]
                row[env] = cmp = {
                    "in1_difference": diff,
                    "time_ratio": ours["total_s"] / storm["total_s"],
                    "memory_ratio": ours["peak_mb"] / storm["peak_mb"],
                }
                print(
                    f"   ours/storm-{env}: time {cmp['time_ratio']:.3f}, peak memory "
                    f"{cmp['memory_ratio']:.3f}; in1 ours - Storm = {diff:+.3e} "
                    f"(relative {diff / storm['in1']:+.1e})"
                )
        rows.append(row)

    print(
        "\ngen s: ours = net + reachability graph + generator; Storm = GSPN + JANI + "
        "sparse CTMC.\nsolve s: ours = steady state + throughput; Storm = LRA model check.\n"
        "cpu s: CPU time of all the process's threads over total s (above total s: threads)."
    )
    if args.json:
        args.json.write_text(json.dumps({"storm_envs": envs, "rows": rows}, indent=2))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
