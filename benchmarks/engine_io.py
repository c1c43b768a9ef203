"""Costs of the engine's I/O features against a baseline measured in the same run.

    OPENBLAS_NUM_THREADS=1 .venv/bin/python benchmarks/engine_io.py

* accumulated rewards: ``cumulative_transient`` against ``transient`` on the same chain and
  times (same number of sparse products, one more dense update per product);
* PNML: ``read_pnml`` of Storm's IBM319 (177 kB, 253 places) against ``Net.from_dict`` of
  the same net's JSON (``json.loads`` included);
* jobs: wall time from ``POST /srn/jobs`` to a ``succeeded`` GET against ``POST /srn/solve``
  for the same small net (loopback TestClient, SQLite in a temporary directory).

Bounded: a few repetitions each; prints medians.
"""

from __future__ import annotations

import json
import statistics
import sys
import tempfile
import time
import warnings
from pathlib import Path

import numpy as np

import srn

ROOT = Path(__file__).resolve().parents[1]


def median_s(fn, repeat: int = 5) -> float:
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def rewards() -> None:
    k = 40
    places = {f"q{i}": 0 for i in range(2)}
    transitions = []
    for i in range(2):
        transitions.append(srn.timed(f"a{i}", 1.0, outputs={f"q{i}": 1}, inhibitors={f"q{i}": k}))
        transitions.append(srn.timed(f"s{i}", 1.5, inputs={f"q{i}": 1}))
    g = srn.reachability_graph(srn.Net(places, transitions))
    Q = g.generator()
    times = np.array([1.0, 5.0, 20.0])
    base = median_s(lambda: srn.transient(Q, times, g.initial_distribution))
    cum = median_s(lambda: srn.cumulative_transient(Q, times, g.initial_distribution))
    print(
        f"accumulated rewards ({g.n_states} states, t up to 20 s): transient {base * 1e3:.1f} ms, "
        f"cumulative {cum * 1e3:.1f} ms, ratio {cum / base:.2f}"
    )


def pnml() -> None:
    data = (ROOT / "tests" / "srn" / "data" / "storm-IBM319.pnml").read_bytes()
    as_json = json.dumps(srn.read_pnml(data).to_dict())
    base = median_s(lambda: srn.Net.from_dict(json.loads(as_json)))
    read = median_s(lambda: srn.read_pnml(data))
    print(
        f"PNML IBM319 ({len(data) / 1e3:.0f} kB): read_pnml {read * 1e3:.1f} ms, JSON "
        f"{base * 1e3:.2f} ms ({len(as_json) / 1e3:.0f} kB), ratio {read / base:.1f}"
    )


def jobs() -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        from fastapi.testclient import TestClient

    from app import Settings, create_app

    net = {
        "places": {"q": 0},
        "transitions": [
            {"name": "a", "rate": 1.0, "outputs": {"q": 1}, "inhibitors": {"q": 20}},
            {"name": "s", "rate": 2.0, "inputs": {"q": 1}},
        ],
    }
    with tempfile.TemporaryDirectory() as tmp:
        settings = Settings(
            warm_up=False, log_level="error", database_url=f"sqlite:///{tmp}/jobs.sqlite3"
        )
        with TestClient(create_app(settings)) as client:
            client.post("/srn/jobs", json={"net": net})  # opens the database, warms up
            time.sleep(1.0)

            def via_job() -> None:
                location = client.post("/srn/jobs", json={"net": net}).headers["location"]
                deadline = time.monotonic() + 30
                while client.get(location).json()["status"] != "succeeded":
                    if time.monotonic() > deadline:
                        raise RuntimeError("job did not finish")
                    time.sleep(0.01)

            n = [0]

            def direct() -> None:
                n[0] += 1  # a new rate each time, so the cache never answers
                fresh = json.loads(json.dumps(net))
                fresh["transitions"][0]["rate"] = 1.0 + 1e-9 * n[0]
                r = client.post("/srn/solve", json={"net": fresh})
                assert r.status_code == 200, r.text

            job = median_s(via_job)
            solve = median_s(direct)
    print(
        f"jobs: POST /srn/jobs -> succeeded {job * 1e3:.0f} ms, POST /srn/solve "
        f"{solve * 1e3:.1f} ms, ratio {job / solve:.0f}"
    )


def main() -> int:
    rewards()
    pnml()
    jobs()
    return 0


if __name__ == "__main__":
    sys.exit(main())
