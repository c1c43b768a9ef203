"""What one pathological ``POST /srn/solve`` costs a running server: time, status, memory.

The net is small (about 4 KB of JSON) but explosive: 20 immediate transitions that are
enabled together, so one timed firing leads into 2^20 vanishing markings before the next
tangible one.  The script starts ``uvicorn app.main:app`` on loopback from a source tree
(``--root``, default this checkout; point it at an older checkout to compare), waits for
``/readyz``, posts the net once, samples the resident memory of the server and of every
process below it (the solver workers) every 20 ms, then sends SIGTERM and times the exit.

Run::

    .venv/bin/python benchmarks/srn_solve_guard.py                 # this tree
    .venv/bin/python benchmarks/srn_solve_guard.py --root ../older-checkout
    # let the estimate admit it, to see the in-process bounds at work:
    .venv/bin/python benchmarks/srn_solve_guard.py --env BLASTRATE_INPROCESS_MAX_WORK=1e30

Everything is bounded: the request by ``--request-timeout`` (client side), the shutdown by
``--exit-timeout`` (then SIGKILL).  Only 127.0.0.1 is contacted.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parent))

from service_latency import free_port, start_server, wait_ready

PAGE = os.sysconf("SC_PAGE_SIZE")


def explosive_net(n: int = 20) -> dict[str, object]:
    """n concurrent immediate transitions behind one timed transition (2^n vanishing)."""
    places = {f"ready{i}": 1 for i in range(n)} | {f"done{i}": 0 for i in range(n)}
    transitions: list[dict[str, object]] = [
        {
            "name": f"fire{i}",
            "kind": "immediate",
            "inputs": {f"ready{i}": 1},
            "outputs": {f"done{i}": 1},
        }
        for i in range(n)
    ]
    transitions.append(
        {
            "name": "reset",
            "kind": "timed",
            "rate": "1.0",
            "inputs": {f"done{i}": 1 for i in range(n)},
            "outputs": {f"ready{i}": 1 for i in range(n)},
        }
    )
    return {"places": places, "transitions": transitions}


def _children() -> dict[int, list[int]]:
    out: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                ppid = int(f.read().rsplit(")", 1)[1].split()[1])
        except (OSError, IndexError, ValueError):
            continue
        out.setdefault(ppid, []).append(int(entry))
    return out


def _rss(pid: int) -> int:
    try:
        with open(f"/proc/{pid}/statm") as f:
            return int(f.read().split()[1]) * PAGE
    except (OSError, IndexError, ValueError):
        return 0


class MemorySampler(threading.Thread):
    """Peak RSS of a process and of the sum over it and its descendants."""

    def __init__(self, pid: int, period: float = 0.02) -> None:
        super().__init__(daemon=True)
        self.pid, self.period = pid, period
        self.peak_server = self.peak_total = 0
        self.stop = threading.Event()

    def run(self) -> None:
        while not self.stop.is_set():
            tree, todo = [], [self.pid]
            kids = _children()
            while todo:
                pid = todo.pop()
                tree.append(pid)
                todo.extend(kids.get(pid, ()))
            server = _rss(self.pid)
            self.peak_server = max(self.peak_server, server)
            self.peak_total = max(self.peak_total, sum(_rss(p) for p in tree))
            time.sleep(self.period)


def main() -> int:
    here = Path(__file__).resolve().parents[1]
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--root", type=Path, default=here, help="source tree to serve")
    parser.add_argument("--immediate", type=int, default=20, help="concurrent immediate ones")
    parser.add_argument("--request-timeout", type=float, default=150.0)
    parser.add_argument("--exit-timeout", type=float, default=60.0)
    parser.add_argument(
        "--env",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="a setting for the server, e.g. BLASTRATE_INPROCESS_MAX_WORK=1e30 (repeatable)",
    )
    args = parser.parse_args()

    port = free_port()
    server = start_server(
        port, "warning", dict(item.split("=", 1) for item in args.env), root=args.root
    )
    base = f"http://127.0.0.1:{port}"
    body = {"net": explosive_net(args.immediate)}
    result: dict[str, object] = {
        "root": str(args.root),
        "settings": " ".join(args.env) or "defaults",
        "body_bytes": len(json.dumps(body)),
    }
    try:
        wait_ready(port, server, timeout=90.0)
        sampler = MemorySampler(server.pid)
        result["idle_server_rss_MB"] = round(_rss(server.pid) / 1e6, 1)
        sampler.start()
        start = time.perf_counter()
        try:
            r = httpx.post(base + "/srn/solve", json=body, timeout=args.request_timeout)
            result["status"] = r.status_code
            if r.headers.get("content-type", "").startswith("application/problem+json"):
                problem = r.json()
                result["problem"] = problem.get("type")
                result["limits"] = [e.get("limit") for e in problem.get("errors", [])]
                if "retry-after" in r.headers:
                    result["retry_after"] = r.headers["retry-after"]
            else:
                result["solved_in"] = r.json().get("solved_in")
        except httpx.TimeoutException:
            result["status"] = f"no answer within {args.request_timeout:g} s"
        result["request_wall_s"] = round(time.perf_counter() - start, 2)
        time.sleep(0.3)
        result["server_rss_after_MB"] = round(_rss(server.pid) / 1e6, 1)
        stop = time.perf_counter()
        server.send_signal(signal.SIGTERM)
        try:
            server.wait(args.exit_timeout)
            result["sigterm_exit_s"] = round(time.perf_counter() - stop, 2)
        except subprocess.TimeoutExpired:
            result["sigterm_exit_s"] = f"still running after {args.exit_timeout:g} s (killed)"
        sampler.stop.set()
        sampler.join()
        result["peak_server_rss_MB"] = round(sampler.peak_server / 1e6, 1)
        result["peak_server_plus_workers_rss_MB"] = round(sampler.peak_total / 1e6, 1)
    finally:
        if server.poll() is None:
            server.kill()
            server.wait(10)
    for key, value in result.items():
        print(f"{key:34s} {value}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
