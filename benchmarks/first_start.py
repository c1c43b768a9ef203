"""How long a new machine's first ``blastrate serve`` takes to be ready, and what its first
large solves cost, with no compiled kernels cached (cold) and then with them (warm).

    .venv/bin/python benchmarks/first_start.py [--runs 1] [--timeout 300] [--restarts 3]

Each run starts ``blastrate serve`` on 127.0.0.1 twice with one fresh ``NUMBA_CACHE_DIR``:
first empty (what a fresh clone or image has), then with what the first server compiled.
For each it prints the seconds from start to ``GET /readyz`` answering 200, and then the
status and wall time of a first ``POST /srn/solve`` of two nets the warm-up does not solve:

* a closed cyclic network of three stations and 620 tokens (193,131 states, under the
  default ``max_states`` of 200,000);
* Ciardo and Tilgner's Kanban net at N = 3 (58,400 states).

A 422 ``limit-exceeded`` on a cold server that becomes 200 on a warm one is a compile
charged to the client's time limit.  ``--restarts N`` then starts ``./scripts/serve`` (the
README's command) N times on the warm cache and prints the seconds to ``/readyz``.  The
1-minute load average is printed beside each figure: measure on a quiet machine.
"""

from __future__ import annotations

import argparse
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parent))

from service_latency import free_port
from srn_scale import kanban_arcs, kanban_places

BLASTRATE = shutil.which("blastrate", path=str(Path(sys.executable).parent)) or "blastrate"
SERVE_SCRIPT = Path(__file__).resolve().parent.parent / "scripts" / "serve"


def cyclic_net(tokens: int) -> dict[str, Any]:
    """Three stations in a ring, ``tokens`` jobs: C(tokens + 2, 2) states."""
    stations = ["s0", "s1", "s2"]
    return {
        "places": {s: (tokens if s == "s0" else 0) for s in stations},
        "transitions": [
            {
                "name": f"move{i}",
                "rate": rate,
                "inputs": {stations[i]: 1},
                "outputs": {stations[(i + 1) % 3]: 1},
            }
            for i, rate in enumerate((1.0, 1.3, 0.7))
        ],
    }


def kanban_net(n: int) -> dict[str, Any]:
    return {
        "places": kanban_places(n),
        "transitions": [
            {"name": name, "rate": rate, "inputs": i, "outputs": o}
            for name, rate, i, o in kanban_arcs()
        ],
    }


NETS = {"cyclic, 193,131 states": cyclic_net(620), "Kanban N = 3, 58,400 states": kanban_net(3)}


def one_server(
    cache_dir: str, timeout_s: float, script: bool = False, solves: bool = True
) -> dict[str, Any]:
    """Start a server with this kernel cache (by ``./scripts/serve`` if ``script``); time
    its readiness and, if ``solves``, its first large solves."""
    port = free_port()
    work = tempfile.mkdtemp(prefix="blastrate-first-start-")
    env = {
        **os.environ,
        "NUMBA_CACHE_DIR": cache_dir,
        "BLASTRATE_DATABASE_URL": f"sqlite:///{work}/blastrate.db",
    }
    load = os.getloadavg()[0]
    start = time.perf_counter()
    # The README's command (./scripts/serve: the venv's check, then blastrate serve), or
    # blastrate serve itself.
    command = [str(SERVE_SCRIPT)] if script else [BLASTRATE, "serve", "--host", "127.0.0.1"]
    proc = subprocess.Popen(
        [*command, "--port", str(port), "--log-level", "warning"],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    out: dict[str, Any] = {"load1_before": load}
    url = f"http://127.0.0.1:{port}"
    try:
        with httpx.Client(timeout=timeout_s) as client:
            deadline = start + timeout_s
            while True:  # bounded by the deadline
                try:
                    if client.get(f"{url}/readyz", timeout=2).status_code == 200:
                        break
                except httpx.HTTPError:
                    pass
                if time.perf_counter() > deadline or proc.poll() is not None:
                    out["ready_s"] = None
                    return out
                time.sleep(0.05)
            out["ready_s"] = time.perf_counter() - start
            for name, net in NETS.items() if solves else ():
                t0 = time.perf_counter()
                r = client.post(f"{url}/srn/solve", json={"net": net})
                out[name] = {
                    "status": r.status_code,
                    "wall_s": time.perf_counter() - t0,
                    "detail": None if r.status_code == 200 else r.json().get("detail"),
                }
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=10)
        shutil.rmtree(work, ignore_errors=True)
    out["load1_after"] = os.getloadavg()[0]
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=1)
    ap.add_argument("--timeout", type=float, default=300.0, help="per server (s)")
    ap.add_argument(
        "--restarts",
        type=int,
        default=0,
        help="after each run, this many warm restarts by ./scripts/serve (README's command)",
    )
    args = ap.parse_args()
    for run in range(args.runs):
        cache = tempfile.mkdtemp(prefix="blastrate-numba-cache-")
        try:
            for phase in ("cold", "warm"):
                r = one_server(cache, args.timeout)
                ready = r.get("ready_s")
                after = r.get("load1_after", float("nan"))
                print(
                    f"run {run + 1} {phase}: ready in "
                    f"{'never' if ready is None else f'{ready:.1f} s'} "
                    f"(load {r['load1_before']:.2f} before, {after:.2f} after)"
                )
                for name in NETS:
                    if name in r:
                        s = r[name]
                        print(
                            f"    first solve of {name}: {s['status']} in {s['wall_s']:.2f} s"
                            + (f" ({s['detail']})" if s["detail"] else "")
                        )
            for k in range(max(0, min(args.restarts, 20))):
                r = one_server(cache, args.timeout, script=True, solves=False)
                ready = r.get("ready_s")
                print(
                    f"run {run + 1} warm restart {k + 1} (./scripts/serve): ready in "
                    f"{'never' if ready is None else f'{ready:.2f} s'} "
                    f"(load {r['load1_before']:.2f} before, "
                    f"{r.get('load1_after', float('nan')):.2f} after)"
                )
        finally:
            shutil.rmtree(cache, ignore_errors=True)


if __name__ == "__main__":
    main()
