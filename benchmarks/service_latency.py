"""Latency and throughput of the HTTP service on loopback.

Run from the repository root::

    .venv/bin/python benchmarks/service_latency.py            # 2,000 requests per phase
    .venv/bin/python benchmarks/service_latency.py -n 500     # quicker

It starts ``uvicorn app.main:app`` (one worker, default settings, JSON access logs to
/dev/null, ``OPENBLAS_NUM_THREADS=1`` and ``OMP_NUM_THREADS=1`` unless set, as
``scripts/_venv.sh`` exports them) on a free loopback port, waits for ``/readyz``, then
measures in the same run, over one keep-alive connection, one request at a time:

* ``GET /healthz``: the floor (HTTP stack, middleware, logging, metrics);
* ``GET /bottleneck-rate`` uncached: every request a distinct workload (C, I, m) of paper
  size (I <= 3), with distinct file sizes and delays, so the whole method runs each time;
* ``GET /bottleneck-rate`` cached: one workload, repeated (served from the result cache).

``--model`` names the receiver model in every query; by default none is named, so the
service answers with its default (the time-slice model since issue #39), as for a user.

The three phases run in alternating blocks (``--block`` requests each, 50 by default:
healthz, uncached, cached, healthz, ...), so that a change in the machine's load during
the run (these machines are shared) weighs on the three alike and the ratios stay fair;
within a block the requests are back to back, as in a sequential run.  It prints p50,
p99 and mean latency and requests/s for each, the ratios against ``/healthz``, and the
model's share of an uncached request (the mean of the service's own solve-time histogram).
Targets (issue #6): uncached p50 within 3x of the ``/healthz`` p50; cached throughput at
least 80 % of the ``/healthz`` throughput.  Figures only: nothing is asserted.
The client is the standard library's ``http.client`` (cheaper per request than httpx, so
the figures are the server's); client and server share the machine's cores.
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import platform
import socket
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

ROOT = Path(__file__).resolve().parents[1]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def start_server(
    port: int, log_level: str, settings: dict[str, str] | None = None, root: Path = ROOT
) -> subprocess.Popen[bytes]:
    """``uvicorn app.main:app`` from the source tree ``root`` on 127.0.0.1:``port``, with
    ``settings`` (``BLASTRATE_*`` variables) added to this process's environment."""
    env = {
        **os.environ,
        "PYTHONPATH": str(root),
        "BLASTRATE_LOG_LEVEL": log_level,
        **(settings or {}),
    }
    # As scripts/_venv.sh does for the service: one BLAS thread per process (the matrices
    # are small, and BLAS threads would contend with the client for the cores).
    env.setdefault("OPENBLAS_NUM_THREADS", "1")
    env.setdefault("OMP_NUM_THREADS", "1")
    return subprocess.Popen(
        [
            sys.executable,
            "-m",
            "uvicorn",
            "app.main:app",
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
            "--log-level",
            "warning",
            "--no-access-log",
        ],
        cwd=root,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )


def wait_ready(port: int, server: subprocess.Popen[bytes], timeout: float = 120.0) -> float:
    start = time.perf_counter()
    while time.perf_counter() - start < timeout:
        if server.poll() is not None:
            raise SystemExit(f"the server exited with status {server.returncode}")
        try:
            conn = http.client.HTTPConnection("127.0.0.1", port, timeout=2)
            conn.request("GET", "/readyz")
            if conn.getresponse().status == 200:
                conn.close()
                return time.perf_counter() - start
            conn.close()
        except OSError:
            pass
        time.sleep(0.05)
    raise SystemExit("the server did not become ready")


def measure(conn: http.client.HTTPConnection, paths: list[str]) -> dict[str, float]:
    """Send the requests one after another; latency of each, and requests/s overall."""
    return summarise(*timed_requests(conn, paths))


def timed_requests(conn: http.client.HTTPConnection, paths: list[str]) -> tuple[list[float], float]:
    """The latency (s) of each request, sent one after another, and the elapsed time (s)."""
    latencies = []
    start = time.perf_counter()
    for path in paths:
        t0 = time.perf_counter()
        conn.request("GET", path)
        response = conn.getresponse()
        body = response.read()
        latencies.append(time.perf_counter() - t0)
        if response.status != 200:
            raise SystemExit(f"{path}: {response.status} {body[:200]!r}")
    return latencies, time.perf_counter() - start


def summarise(latencies: list[float], elapsed: float) -> dict[str, float]:
    """p50, p99 and mean (ms) of ``latencies`` (s), and requests/s over ``elapsed`` (s)."""
    latencies = sorted(latencies)
    return {
        "p50_ms": 1e3 * statistics.median(latencies),
        "p99_ms": 1e3 * latencies[min(len(latencies) - 1, int(0.99 * len(latencies)))],
        "mean_ms": 1e3 * statistics.fmean(latencies),
        "rps": len(latencies) / elapsed,
    }


_SOLVE_SERIES = 'blastrate_solve_duration_seconds_{}{{kind="bottleneck",where="{}"}}'
# In the service's threads (the paper's model) or in a worker process (the time-slice model).
_SOLVE_PLACES = ("process", "worker-pool")


def solve_totals(conn: http.client.HTTPConnection) -> tuple[float, float]:
    """The service's own tally of bottleneck computations: (seconds, count), from its
    Prometheus solve-time histogram (the model alone, timed in the thread or around the
    worker process's answer), summed over where they ran."""
    conn.request("GET", "/metrics")
    text = conn.getresponse().read().decode()
    values = {}
    for line in text.splitlines():
        name, _, value = line.rpartition(" ")
        values[name] = value
    places = [p for p in _SOLVE_PLACES if _SOLVE_SERIES.format("count", p) in values]
    if not places:
        raise SystemExit(
            f"/metrics has no {_SOLVE_SERIES.format('count', '*')}: the model's share cannot "
            "be told"
        )
    return (
        sum(float(values[_SOLVE_SERIES.format("sum", p)]) for p in places),
        sum(float(values[_SOLVE_SERIES.format("count", p)]) for p in places),
    )


def bottleneck_path(
    cpu: int, io: int, size: int, delay_ms: float, cores: int = 1, model: str | None = None
) -> str:
    query: dict[str, Any] = {
        "cpu_tasks": cpu,
        "io_tasks": io,
        "cores": cores,
        "file_size": str(size),
        "propagation_delay": f"{delay_ms}ms",
    }
    if model is not None:
        query["model"] = model
    return "/bottleneck-rate?" + urlencode(query)


def distinct_workload(k: int, model: str | None = None) -> str:
    """Request k of the uncached phase: a workload no other request has.

    Paper-sized shapes (I = 0..3 I/O-bound tasks, one disk, so the nets compiled at
    start-up are reused, as in service), but every (C, I, m) triple is different, so
    neither the result cache nor any per-workload intermediate result can be reused; the
    file size and delay vary too.
    """
    cpu, io, cores = 1 + k % 100, (k // 100) % 4, 1 + k // 400
    return bottleneck_path(cpu, io, 500_000_000 + 1_000 * k, 50.0 + k % 100, cores, model)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("-n", "--requests", type=int, default=2_000, help="per phase")
    parser.add_argument(
        "--block", type=int, default=50, help="requests per block of each phase (default 50)"
    )
    parser.add_argument(
        "--log-level",
        default="info",
        choices=("debug", "info", "warning"),
        help="server log level (info: one JSON access line per request, as deployed)",
    )
    parser.add_argument(
        "--compare-unpinned",
        action="store_true",
        help="also run a second server with BLASTRATE_COMPUTE_ON_LOOP_CPU=false, its blocks "
        "alternating with the first's (app.runtime.colocation)",
    )
    parser.add_argument(
        "--model",
        choices=("paper", "timeslice"),
        default=None,
        help="name this receiver model in every query (default: none named, the service's "
        "default, as a user who names none gets it)",
    )
    args = parser.parse_args()
    n = args.requests

    variants = {"default": {}}
    if args.compare_unpinned:
        variants["unpinned"] = {"BLASTRATE_COMPUTE_ON_LOOP_CPU": "false"}
    servers: dict[str, tuple[int, subprocess.Popen[bytes]]] = {}
    results: dict[str, dict[str, Any]] = {}
    try:
        for name, settings in variants.items():
            port = free_port()
            servers[name] = (port, start_server(port, args.log_level, settings))
        ready_s = {name: wait_ready(port, server) for name, (port, server) in servers.items()}
        runs = {name: Run(port, args.model) for name, (port, _) in servers.items()}
        for start in range(0, n, args.block):
            # Blocks alternate between the servers too, so both see the same load.
            for run in runs.values():
                run.block(start, min(args.block, n - start))
        results = {name: run.finish() for name, run in runs.items()}
    finally:
        for _, server in servers.values():
            server.terminate()
        for _, server in servers.values():
            server.wait(timeout=30)

    print(f"python {platform.python_version()}, {os.cpu_count()} cores, {platform.machine()}")
    print(
        f"uvicorn app.main:app, 1 worker, log level {args.log_level}; ready after "
        + ", ".join(f"{s:.2f} s" for s in ready_s.values())
    )
    print(
        f"{n} sequential requests per phase over one keep-alive connection, "
        f"phases alternating in blocks of {args.block}"
    )
    for name, result in results.items():
        report(name, result, len(results) > 1)
    print(json.dumps(results))


class Run:
    """The three phases against one server, block by block."""

    def __init__(self, port: int, model: str | None = None) -> None:
        self.model = model
        self.conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
        # Warm the connection and the interpreter's paths (not measured).
        measure(self.conn, ["/healthz"] * 200)
        measure(
            self.conn,
            [bottleneck_path(2, 1, 400_000_000 + k, 50.0, model=model) for k in range(50)],
        )
        # Distinct workloads: the paper's grid, each with its own file size and delay, so
        # no two requests share a cache key.
        self.cached_path = bottleneck_path(2, 1, 500_000_000, 100.0, model=model)
        measure(self.conn, [self.cached_path])  # fill the cache entry
        self.solve_before = solve_totals(self.conn)
        self.phases: dict[str, tuple[list[float], float]] = {
            name: ([], 0.0) for name in ("healthz", "uncached", "cached")
        }

    def block(self, start: int, size: int) -> None:
        for name, paths in (
            ("healthz", ["/healthz"] * size),
            ("uncached", [distinct_workload(k, self.model) for k in range(start, start + size)]),
            ("cached", [self.cached_path] * size),
        ):
            latencies, elapsed = timed_requests(self.conn, paths)
            self.phases[name] = (self.phases[name][0] + latencies, self.phases[name][1] + elapsed)

    def finish(self) -> dict[str, Any]:
        solve_after = solve_totals(self.conn)
        self.conn.close()
        health, uncached, cached = (summarise(*self.phases[k]) for k in self.phases)
        solves = solve_after[1] - self.solve_before[1]
        if solves < 1:
            raise SystemExit("no uncached computation was counted by the service's metrics")
        return {
            "healthz": health,
            "uncached": uncached,
            "cached": cached,
            "uncached_p50_ratio": uncached["p50_ms"] / health["p50_ms"],
            "cached_rps_ratio": cached["rps"] / health["rps"],
            "model_mean_ms": 1e3 * (solve_after[0] - self.solve_before[0]) / solves,
            "solves": solves,
        }


def report(name: str, result: dict[str, Any], named: bool) -> None:
    """Print one server's table, ratios and model share."""
    if named:
        pinned = "compute_on_loop_cpu=true" if name == "default" else "compute_on_loop_cpu=false"
        print(f"\n[{name}: {pinned}]")
    print(f"\n{'endpoint':<34}{'p50 ms':>9}{'p99 ms':>9}{'mean ms':>9}{'req/s':>9}")
    for label, key in (
        ("GET /healthz", "healthz"),
        ("GET /bottleneck-rate (uncached)", "uncached"),
        ("GET /bottleneck-rate (cached)", "cached"),
    ):
        row = result[key]
        print(
            f"{label:<34}{row['p50_ms']:>9.3f}{row['p99_ms']:>9.3f}{row['mean_ms']:>9.3f}"
            f"{row['rps']:>9.0f}"
        )
    model_ms = result["model_mean_ms"]
    print()
    print(f"uncached p50 / healthz p50      = {result['uncached_p50_ratio']:.2f}  (target <= 3)")
    print(f"cached req/s / healthz req/s    = {result['cached_rps_ratio']:.2f}  (target >= 0.80)")
    print(
        f"the model alone, mean of the {result['solves']:.0f} uncached computations (the "
        f"service's solve histogram): {model_ms:.3f} ms; the rest of an uncached request "
        f"(HTTP, validation, cache, the thread hop) is about "
        f"{result['uncached']['mean_ms'] - model_ms:.3f} ms"
    )


if __name__ == "__main__":
    main()
