"""Does heavy work block the event loop?  ``/healthz`` latency while heavy requests run.

Run from the repository root::

    .venv/bin/python benchmarks/event_loop.py                 # 4 heavy clients, 10 s
    .venv/bin/python benchmarks/event_loop.py --clients 4 --seconds 5 --io-tasks 950

It starts ``uvicorn app.main:app`` (one worker, default settings) on a free loopback port,
waits for ``/readyz``, then for a bounded time runs, at once:

* ``--clients`` threads, each asking ``GET /bottleneck-rate`` with ``io_tasks`` heavy and
  a distinct file size every time (so nothing is served from the cache), one request at
  a time over its own keep-alive connection;
* one probe thread asking ``GET /healthz`` every 10 ms.

It prints the ``/healthz`` p50/p99/max latency and the heavy requests/s, first with no
heavy load (the baseline, same run) and then under load.  Target (issue #13): ``/healthz``
p99 under 50 ms while the heavy requests run.  Figures only: nothing is asserted.  Every
loop is bounded in count and time, and all traffic stays on 127.0.0.1.
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import platform
import statistics
import sys
import threading
import time
from pathlib import Path
from urllib.parse import urlencode

sys.path.insert(0, str(Path(__file__).resolve().parent))

from service_latency import free_port, start_server, wait_ready

_MAX_REQUESTS = 100_000  # hard bound on any loop below, whatever the time says


def probe(port: int, seconds: float, interval: float) -> list[float]:
    """``/healthz`` latencies (s) sampled every ``interval`` for ``seconds``."""
    out: list[float] = []
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    end = time.perf_counter() + seconds
    for _ in range(_MAX_REQUESTS):
        if time.perf_counter() >= end:
            break
        t0 = time.perf_counter()
        conn.request("GET", "/healthz")
        conn.getresponse().read()
        out.append(time.perf_counter() - t0)
        time.sleep(max(0.0, interval - (time.perf_counter() - t0)))
    conn.close()
    return out


def heavy_client(
    port: int, client: int, io_tasks: int, stop: threading.Event, done: list[int]
) -> None:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
    for k in range(_MAX_REQUESTS):
        if stop.is_set():
            break
        query = urlencode(
            {
                "cpu_tasks": 2,
                "io_tasks": io_tasks,
                "file_size": str(500_000_000 + 1_000 * client + k * 97),
                "propagation_delay": "100ms",
            }
        )
        conn.request("GET", "/bottleneck-rate?" + query)
        response = conn.getresponse()
        body = response.read()
        if response.status != 200:
            raise SystemExit(f"heavy request: {response.status} {body[:200]!r}")
        done[client] += 1
    conn.close()


def summary(latencies: list[float]) -> dict[str, float]:
    ordered = sorted(latencies)
    return {
        "n": len(ordered),
        "p50_ms": 1e3 * statistics.median(ordered),
        "p99_ms": 1e3 * ordered[min(len(ordered) - 1, int(0.99 * len(ordered)))],
        "max_ms": 1e3 * ordered[-1],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--clients", type=int, default=4, help="heavy clients (at most 16)")
    parser.add_argument("--seconds", type=float, default=10.0, help="load time (at most 60)")
    parser.add_argument("--io-tasks", type=int, default=950, help="I of the heavy workload")
    args = parser.parse_args()
    clients = max(1, min(args.clients, 16))
    seconds = max(1.0, min(args.seconds, 60.0))

    port = free_port()
    server = start_server(port, "warning")
    try:
        wait_ready(port, server)
        baseline = summary(probe(port, min(seconds, 3.0), 0.01))
        stop = threading.Event()
        done = [0] * clients
        threads = [
            threading.Thread(target=heavy_client, args=(port, c, args.io_tasks, stop, done))
            for c in range(clients)
        ]
        start = time.perf_counter()
        for t in threads:
            t.start()
        time.sleep(0.5)  # let the heavy requests start
        loaded = summary(probe(port, seconds, 0.01))
        stop.set()
        for t in threads:
            t.join(timeout=120)
        elapsed = time.perf_counter() - start
    finally:
        server.terminate()
        server.wait(timeout=30)

    heavy_rps = sum(done) / elapsed
    print(f"python {platform.python_version()}, {os.cpu_count()} cores, {platform.machine()}")
    print(
        f"uvicorn app.main:app, 1 worker; {clients} clients asking io_tasks={args.io_tasks} "
        f"for {seconds:g} s\n"
    )
    print(f"{'GET /healthz':<28}{'n':>7}{'p50 ms':>9}{'p99 ms':>9}{'max ms':>9}")
    for name, row in (("idle", baseline), ("under heavy load", loaded)):
        print(
            f"{name:<28}{row['n']:>7.0f}{row['p50_ms']:>9.2f}{row['p99_ms']:>9.2f}"
            f"{row['max_ms']:>9.2f}"
        )
    print(f"\nheavy requests: {sum(done)} in {elapsed:.1f} s = {heavy_rps:.1f} req/s")
    print(f"healthz p99 under load = {loaded['p99_ms']:.1f} ms (target < 50)")
    print(json.dumps({"idle": baseline, "loaded": loaded, "heavy_rps": heavy_rps}))


if __name__ == "__main__":
    main()
