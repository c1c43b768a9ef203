"""What the live probe costs, and how fast the service answers from it.

Run from the repository root::

    .venv/bin/python benchmarks/live_probe.py           # 300 requests per phase
    .venv/bin/python benchmarks/live_probe.py -n 100    # quicker

1. The probe in this process: one ``probe_host`` window of 2 s with 20 state samples;
   prints the tasks examined, the CPU time the probe itself used (``time.process_time``)
   and its share of the window, and the time of one full snapshot of every task.
2. The service: starts ``uvicorn app.main:app`` on a free loopback port (probe enabled,
   2 s windows, a temporary SQLite profile database), waits for ``/readyz`` and the first
   window, stores a profile ``bench-lab`` (the built-in's values), then over one
   keep-alive connection measures, one request at a time, p50/p99 latency of
   ``GET /healthz`` (the floor), ``GET /bottleneck-rate`` with a given workload and the
   built-in profile (repeated: the raw-query index answers), the same with the stored
   profile (repeated: resolved through the store each time, then the result cache), and
   ``workload=live`` (repeated: the latest window, cached per window).  Ratios are
   against ``/healthz`` in the same run.  Figures only: nothing is asserted.
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from urllib.parse import urlencode

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from service_latency import free_port, start_server  # noqa: E402


def probe_cost() -> None:
    from host.probe import probe_host, snapshot_tasks

    cpu0, wall0 = time.process_time(), time.perf_counter()
    probe = probe_host(interval_s=2.0, samples=20)
    cpu, wall = time.process_time() - cpu0, time.perf_counter() - wall0
    t0 = time.perf_counter()
    for _ in range(5):
        tasks = snapshot_tasks()
    snap_ms = (time.perf_counter() - t0) / 5 * 1e3
    print("probe window (this process)")
    print(
        f"  tasks examined {len(probe.tasks)} (+{probe.excluded_tasks} left out), "
        f"C={probe.cpu_tasks.value} I={probe.io_tasks.value} m={probe.cores.value} "
        f"d={probe.disks.value}"
    )
    print(
        f"  window {wall:.3f} s, probe CPU {cpu * 1e3:.1f} ms"
        f" = {100 * cpu / wall:.2f} % of one core"
    )
    print(f"  one full snapshot of {len(tasks)} tasks: {snap_ms:.2f} ms")


def measure(conn: http.client.HTTPConnection, path: str, n: int) -> dict[str, float]:
    latencies = []
    for _ in range(n):
        t0 = time.perf_counter()
        conn.request("GET", path)
        response = conn.getresponse()
        body = response.read()
        latencies.append(time.perf_counter() - t0)
        if response.status != 200:
            raise SystemExit(f"{path}: {response.status} {body[:300]!r}")
    latencies.sort()
    return {
        "p50_ms": 1e3 * statistics.median(latencies),
        "p99_ms": 1e3 * latencies[min(n - 1, int(0.99 * n))],
    }


def service_latency(n: int) -> None:
    port = free_port()
    folder = tempfile.mkdtemp(prefix="blastrate-bench-")
    server = start_server(
        port,
        "warning",
        {
            "BLASTRATE_DATABASE_URL": f"sqlite:///{folder}/bench.db",
            "BLASTRATE_PROBE_ENABLED": "true",
            "BLASTRATE_PROBE_INTERVAL_S": "2",
        },
    )
    try:
        deadline = time.monotonic() + 120
        conn = None
        while time.monotonic() < deadline:
            if server.poll() is not None:
                raise SystemExit(f"the server exited with status {server.returncode}")
            try:
                conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
                conn.request("GET", "/host")
                response = conn.getresponse()
                response.read()
                conn.request("GET", "/readyz")
                ready = conn.getresponse()
                ready.read()
                if response.status == 200 and ready.status == 200:
                    break
            except OSError:
                pass
            time.sleep(0.1)
        else:
            raise SystemExit("the server did not become ready")
        assert conn is not None
        values = {
            "mu_io_cpu": 4600.0,
            "mu_disk": 1010.0,
            "mu_net": 41600.0,
            "buffer_packets": 64,
            "coalesce_packets": 6,
            "line_rate_bps": 1e9,
            "packet_payload_bytes": 1468,
        }
        conn.request(
            "PUT",
            "/profiles/bench-lab",
            body=json.dumps(values),
            headers={"Content-Type": "application/json"},
        )
        put = conn.getresponse()
        put.read()
        transfer = {"file_size": "500MB", "propagation_delay": "100ms"}
        given = {**transfer, "cpu_tasks": 2, "io_tasks": 1}
        phases = {
            "GET /healthz": "/healthz",
            "given, built-in profile": "/bottleneck-rate?" + urlencode(given),
            "given, stored profile": "/bottleneck-rate?"
            + urlencode({**given, "profile": "bench-lab"}),
            "workload=live": "/bottleneck-rate?" + urlencode({**transfer, "workload": "live"}),
        }
        results = {name: measure(conn, path, n) for name, path in phases.items()}
        floor = results["GET /healthz"]["p50_ms"]
        print(f"service on loopback, {n} requests per phase, one keep-alive connection")
        for name, r in results.items():
            print(
                f"  {name:26} p50 {r['p50_ms']:7.3f} ms  p99 {r['p99_ms']:7.3f} ms  "
                f"p50/healthz {r['p50_ms'] / floor:5.2f}"
            )
    finally:
        server.terminate()
        server.wait(timeout=30)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("-n", type=int, default=300, help="requests per phase")
    args = parser.parse_args()
    print(f"host: {os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.2f}")
    probe_cost()
    service_latency(args.n)


if __name__ == "__main__":
    main()
