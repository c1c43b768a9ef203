"""Sweeps on a real Dask cluster: a ``dask scheduler`` and a ``dask worker`` started as
processes of their own, used from the CLI and from the service.

Before: ``blastrate sweep --cluster tcp://...`` ended with "internal error: ValueError:
No clients found", and ``POST /sweeps`` on a service with ``BLASTRATE_SWEEP_CLUSTER``
answered 500.  The client is made with ``set_as_default=False``, and ``as_completed()``
then looked for a default one; the in-process ``LocalCluster`` tests passed only because
their client happened to be the default.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from cli_support import blastrate

from conftest import free_port, live_server

DASK = Path(sys.executable).parent / "dask"
SWEEP = ["--cpu-tasks", "0..2", "--io-tasks", "0,1", "--file-size", "500MB"]


@pytest.fixture(scope="module")
def scheduler() -> Iterator[str]:
    if not DASK.exists():
        pytest.skip(f"{DASK} is not installed")
    port = free_port()
    address = f"tcp://127.0.0.1:{port}"
    env = {**os.environ, "DASK_DISTRIBUTED__WORKER__DAEMON": "False"}
    common = {"env": env, "stdout": subprocess.DEVNULL, "stderr": subprocess.DEVNULL}
    processes = [
        subprocess.Popen(
            [str(DASK), "scheduler", "--host", "127.0.0.1", "--port", str(port), "--no-dashboard"],
            start_new_session=True,
            **common,  # type: ignore[arg-type]
        )
    ]
    try:
        from distributed import Client

        processes.append(
            subprocess.Popen(
                [
                    str(DASK),
                    "worker",
                    address,
                    "--nworkers",
                    "1",
                    "--nthreads",
                    "1",
                    "--no-dashboard",
                ],
                start_new_session=True,
                **common,  # type: ignore[arg-type]
            )
        )
        # Ready when the scheduler knows the worker: waited on, not slept for.
        with Client(address, timeout=60, set_as_default=False) as client:
            client.wait_for_workers(1, timeout=120)
        yield address
    finally:
        for p in reversed(processes):
            if p.poll() is None:
                os.killpg(p.pid, signal.SIGTERM)
        for p in processes:
            try:
                p.wait(30)
            except subprocess.TimeoutExpired:
                os.killpg(p.pid, signal.SIGKILL)
                p.wait(10)


def test_the_cli_sweeps_on_a_separate_scheduler_and_worker(scheduler: str) -> None:
    done = subprocess.run(
        [
            *blastrate(),
            "sweep",
            *SWEEP,
            "--propagation-delay",
            "100ms",
            "--cluster",
            scheduler,
            "--json",
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    body = json.loads(done.stdout)
    assert body["ran_on"] == "dask" and body["points"] == 6 and body["failed"] == 0


def test_the_service_sweeps_on_a_separate_scheduler_and_worker(scheduler: str) -> None:
    env = {"BLASTRATE_SWEEP_CLUSTER": scheduler, "BLASTRATE_SWEEP_INLINE_POINTS": "0"}
    with live_server(env) as (base, _):
        r = httpx.post(
            base + "/sweeps",
            json={
                "inputs": {
                    "cpu_tasks": "0..2",
                    "io_tasks": [0, 1],
                    "file_size": "500MB",
                    "propagation_delay": "100ms",
                }
            },
            timeout=300,
        )
    assert r.status_code == 200, r.text[:500]
    assert r.json()["ran_on"] == "dask" and r.json()["points"] == 6
