"""Every chain of up to 200,000 states in the test data and the benchmarks, end to end.

Run from the repository root::

    .venv/bin/python benchmarks/srn_small_chains.py [--only NAME] [--json out.json]

Issue #24 asks for each of them in under 2 s.  The chains:

* every model file in ``tests/srn/data`` (PIPE's and Storm's examples, the courier
  protocol of 11,700 states among them);
* Ciardo and Tilgner's Kanban net at N = 1, 2, 3 (160, 4,600, 58,400 states;
  ``benchmarks/srn_scale.py``'s net);
* ``benchmarks/first_start.py``'s three-station ring with 620 tokens (193,131 states);
* ``benchmarks/iad_ncd.py``'s nearly completely decomposable chain (1,200 states);
* ``tests/srn/test_srn_large_chains.py``'s 300 x 300 tandem (90,601 states).

Each chain runs in a fresh Python process, so the kernels' first call (loaded from
Numba's on-disk cache) is counted; the imports are done before the clock starts.
``total s`` runs from reading or building the net to having the steady state (wall
clock), or, for a chain with several closed classes (IBM319), the time to absorption
from the initial marking; ``solve s`` is the solve alone, by the cascade
(``method="auto"``).  Where the cascade settled on ``gauss-seidel``, ``lu s`` is the
same process solving again with the ``sparse-lu`` route forced, the route it took there
before the sweeps came first, and ``rel diff`` the largest relative difference between
the two answers, state by state.  For the ring, ``exact rel`` is the largest relative
error against its product form, state by state.  A row over 2 s is flagged ``!`` and the exit status
is 1.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT / "tests" / "srn" / "data"
LIMIT_S = 2.0
PNML_SUFFIXES = (".xml", ".pnml")


def chain_names() -> list[str]:
    files = sorted(p.name for p in DATA.iterdir() if p.suffix in PNML_SUFFIXES)
    return [*files, "kanban-1", "kanban-2", "kanban-3", "ring-620", "ncd-1200", "tandem-300"]


def _builder(name: str) -> Callable[[], tuple[Any, Any]]:
    """A function that builds the chain's generator and initial distribution (None for
    a bare generator) the way its test or benchmark does; everything it needs is
    imported here, before the clock starts."""
    sys.path.insert(0, str(ROOT))
    sys.path.insert(0, str(ROOT / "benchmarks"))
    sys.path.insert(0, str(ROOT / "tests" / "srn"))
    from first_start import cyclic_net
    from iad_ncd import ncd_chain
    from srn_scale import kanban_arcs, kanban_places
    from test_srn_large_chains import tandem

    from srn import Net, Transition, reachability_graph, read_pnml, timed

    def graph_of(net: Any) -> tuple[Any, Any]:
        graph = reachability_graph(net)
        return graph.generator(), graph.initial_distribution

    if name.endswith(PNML_SUFFIXES):
        return lambda: graph_of(read_pnml((DATA / name).read_bytes()))
    if name.startswith("kanban-"):
        n = int(name.split("-")[1])
        arcs = kanban_arcs()
        return lambda: graph_of(
            Net(kanban_places(n), [timed(t, r, inputs=i, outputs=o) for t, r, i, o in arcs])
        )
    if name == "ring-620":
        spec = cyclic_net(620)
        return lambda: graph_of(Net(spec["places"], [Transition(**t) for t in spec["transitions"]]))
    if name == "ncd-1200":
        return lambda: (ncd_chain(30, 40, 1_200, 1), None)
    if name == "tandem-300":
        return lambda: graph_of(tandem(300))
    raise SystemExit(f"unknown chain {name!r}; known: {', '.join(chain_names())}")


def _ring_product_form() -> Any:
    """The ring's exact steady state, state by state in the engine's order: a closed ring
    of single-server exponential stations has Gordon and Newell's product form (1967),
    pi(n) ~ prod_i (1 / mu_i)^n_i, computed in logarithms (it spans 168 decades)."""
    import numpy as np
    from first_start import cyclic_net

    from srn import Net, Transition, reachability_graph

    spec = cyclic_net(620)
    graph = reachability_graph(Net(spec["places"], [Transition(**t) for t in spec["transitions"]]))
    counts = np.asarray(graph.markings, dtype=float)
    log_weight = np.zeros(len(counts))
    for t in spec["transitions"]:
        (station,) = t["inputs"]
        log_weight -= counts[:, graph.place_names.index(station)] * np.log(t["rate"])
    exact = np.exp(log_weight - log_weight.max())
    return exact / exact.sum()


def measure(name: str) -> dict[str, Any]:
    """Time one chain in this (fresh) process."""
    import numpy as np

    from srn import NotErgodicError, steady_state, time_to_absorption

    build = _builder(name)
    start = time.perf_counter()
    Q, initial = build()
    built = time.perf_counter()
    try:
        auto = steady_state(Q)
    except NotErgodicError:
        # Several closed classes (IBM319's deadlocks): the question is when it ends.
        absorbed = time_to_absorption(Q, initial)
        done = time.perf_counter()
        return {
            "chain": name,
            "states": int(Q.shape[0]),
            "nonzeros": int(Q.nnz),
            "route": "absorption",
            "build_s": built - start,
            "solve_s": done - built,
            "total_s": done - start,
            "mean_s": float(absorbed.mean),
        }
    done = time.perf_counter()
    row: dict[str, Any] = {
        "chain": name,
        "states": int(Q.shape[0]),
        "nonzeros": int(Q.nnz),
        "route": auto.method,
        "routes_tried": [a.method for a in auto.attempts],
        "build_s": built - start,
        "solve_s": done - built,
        "total_s": done - start,
        "residual": auto.residual,
        "note": auto.attempts[-1].note,
    }
    if name == "ring-620":
        exact = _ring_product_form()
        row["exact_rel"] = float(np.max(np.abs(auto.probabilities - exact) / exact))
    if auto.method == "gauss-seidel":
        began = time.perf_counter()
        lu = steady_state(Q, method="sparse-lu")
        row["lu_s"] = time.perf_counter() - began
        p, q = auto.probabilities, lu.probabilities
        both = (p > 0) | (q > 0)
        row["rel_diff"] = float(np.max(np.abs(p[both] - q[both]) / np.maximum(p, q)[both]))
    return row


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--only",
        action="append",
        choices=chain_names(),
        metavar="NAME",
        help=f"a chain (repeatable): {', '.join(chain_names())}",
    )
    parser.add_argument("--json", type=Path, help="write the rows here")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(measure(args.child)))
        return 0
    rows, failed = [], False
    header = (
        f"{'chain':<28}{'states':>9}{'nnz':>10}  {'route':<13}{'build s':>8}"
        f"{'solve s':>9}{'total s':>9}{'lu s':>8}{'rel diff':>10}{'exact rel':>11}"
    )
    print(header)
    for name in args.only or chain_names():
        out = subprocess.run(
            [sys.executable, __file__, "--child", name],
            capture_output=True,
            text=True,
            check=True,
            timeout=600,
        )
        row = json.loads(out.stdout.splitlines()[-1])
        rows.append(row)
        over = row["total_s"] > LIMIT_S
        failed |= over
        lu = f"{row['lu_s']:8.2f}" if "lu_s" in row else f"{'-':>8}"
        diff = f"{row['rel_diff']:10.1e}" if "rel_diff" in row else f"{'-':>10}"
        exact = f"{row['exact_rel']:11.1e}" if "exact_rel" in row else f"{'-':>11}"
        print(
            f"{name:<28}{row['states']:>9,}{row['nonzeros']:>10,}  {row['route']:<13}"
            f"{row['build_s']:8.2f}{row['solve_s']:9.3f}{row['total_s']:9.2f}{lu}{diff}{exact}"
            + ("  !" if over else "")
        )
    if args.json:
        args.json.write_text(json.dumps(rows, indent=2) + "\n")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
