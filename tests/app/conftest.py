"""Fixtures for the HTTP service tests: apps with small limits, clients, live servers
(in a thread, or as a real uvicorn process: :func:`live_server`)."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import warnings
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
import numpy as np
import pytest
import uvicorn

from app import Settings, create_app

# Starlette's TestClient on httpx warns (once, at import) that it prefers httpx2; it works.
with warnings.catch_warnings():
    warnings.filterwarnings("ignore", message=".*httpx2.*")
    from fastapi.testclient import TestClient


@pytest.fixture(scope="session", autouse=True)
def compiled_kernels() -> None:
    """Compile the project's Numba kernels once, in this process and one thread, before
    any service test runs (in a whole run the first tests handed out, the suite's longest
    (``@pytest.mark.long``), include service tests, so this comes before almost any other).

    On a fresh machine Numba's disk cache is empty, and tests that run the service
    compute in several threads and worker processes at once; two of them compiling the
    same cached kernel at the same moment can fail ("no compiled object yet") or leave
    a cache entry that another process then cannot read.  Afterwards every thread and
    worker only loads what is already compiled.  The calls are the ones the service's
    paths make: the whole method (both NIC service models), the NIC queue's three
    rules, and a small net through steady state, transient analysis and time to
    absorption.
    """
    import queues
    import srn
    from app.service.warmup import compile_default_nets

    compile_default_nets()
    rates = np.array([1.0e4, 3.0e4])
    queues.bulk_service_queue(rates, 20_800.0, 64, 6)
    queues.bulk_service_queue(rates, 20_800.0, 64, 6, min_batch=1)
    alpha, T = np.array([1.0, 0.0]), np.array([[-3.0e4, 3.0e4], [0.0, -3.0e4]])
    queues.bulk_service_queue(rates, None, 64, 6, phase_type=(alpha, T))
    net = srn.Net(
        {"q": 0},
        [
            srn.timed("arrive", "lam", outputs={"q": 1}, inhibitors={"q": 10}),
            srn.timed("serve", "mu", inputs={"q": 1}),
        ],
        parameters={"lam": 1.0, "mu": 2.0},
    )
    graph = srn.reachability_graph(net)
    Q = graph.generator()
    srn.steady_state(Q)
    srn.transient(Q, [0.5, 1.0], graph.initial_distribution)
    # The tagged-customer method on the same chain: the state q = 0 made absorbing.
    srn.time_to_absorption(Q, np.eye(Q.shape[0])[-1], absorbing=[0])


#: Limits small enough for the tests to reach them cheaply.
TEST_SETTINGS: dict[str, Any] = {
    "warm_up": False,
    "log_level": "warning",
    "solve_workers": 1,
    "max_body_bytes": 20_000,
    "max_states": 5_000,
    "max_expression_length": 200,
    "inprocess_max_states": 50,
    "probe_enabled": False,
    "database_url": "sqlite://",  # jobs in memory, never in the user's data directory
}


@pytest.fixture
def make_client() -> Iterator[Callable[..., TestClient]]:
    """Build clients on apps with :data:`TEST_SETTINGS` plus overrides; closed after."""
    clients: list[TestClient] = []

    def make(**overrides: Any) -> TestClient:
        client = TestClient(create_app(Settings(**{**TEST_SETTINGS, **overrides})))
        client.__enter__()
        clients.append(client)
        return client

    yield make
    for client in clients:
        client.__exit__(None, None, None)


@pytest.fixture(scope="module")
def client() -> Iterator[TestClient]:
    """A client on an app with the test limits (one per test module)."""
    with TestClient(create_app(Settings(**TEST_SETTINGS))) as c:
        yield c


def free_port() -> int:
    """A TCP port on the loopback interface that nothing listens on right now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def explosive_net(n: int) -> dict[str, Any]:
    """n immediate transitions enabled together behind one timed one: 2^n vanishing markings.

    The tangible chain is a single marking (all tokens in ``done*``) whose only timed
    transition leads back to itself through the vanishing ones.
    """
    places = {f"ready{i}": 1 for i in range(n)} | {f"done{i}": 0 for i in range(n)}
    transitions: list[dict[str, Any]] = [
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
            "rate": 1.0,
            "inputs": {f"done{i}": 1 for i in range(n)},
            "outputs": {f"ready{i}": 1 for i in range(n)},
        }
    )
    return {"places": places, "transitions": transitions}


# A two-state chain flipping at 1e6/s, asked for its distribution at t = 1e6 s: 1e12
# uniformisation steps, so the engine falls back on a matrix exponential that runs for
# minutes.  The in-process budget sends it to the worker pool, where the limit stops it.
ENDLESS = {
    "net": {
        "places": {"a": 1, "b": 0},
        "transitions": [
            {"name": "ab", "rate": 1e6, "inputs": {"a": 1}, "outputs": {"b": 1}},
            {"name": "ba", "rate": 1e6, "inputs": {"b": 1}, "outputs": {"a": 1}},
        ],
    },
    "analysis": "transient",
    "times": [1e6],
}


def check_problem(response: Any, status: int) -> dict[str, Any]:
    """Assert that ``response`` is a problem+json with ``status`` and return its body."""
    assert response.status_code == status, response.text
    assert response.headers["content-type"].startswith("application/problem+json")
    body: dict[str, Any] = response.json()
    for member in ("type", "title", "status", "detail", "instance", "errors"):
        assert member in body, member
    assert body["status"] == status
    assert body["type"].startswith("/problems/")
    assert body["request_id"] == response.headers["x-request-id"]
    return body


@pytest.fixture
def problem_of() -> Callable[[Any, int], dict[str, Any]]:
    """:func:`check_problem`, as a fixture."""
    return check_problem


@pytest.fixture
def unused_port() -> int:
    """A loopback TCP port that nothing listens on right now."""
    return free_port()


@pytest.fixture
def server_url(tmp_path: Path) -> Iterator[str]:
    """A service (probe on, 0.2 s windows, its own SQLite file) on a loopback port, run
    by uvicorn in a thread, for the commands' ``--server`` mode; stopped after."""
    port = free_port()
    app = create_app(
        Settings(
            warm_up=False,
            log_level="warning",
            solve_workers=1,
            probe_enabled=True,
            probe_interval_s=0.2,
            database_url=f"sqlite:///{tmp_path / 'server.db'}",
        )
    )
    server = uvicorn.Server(
        uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning", lifespan="on")
    )
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 30
    while not server.started:
        assert thread.is_alive() and time.monotonic() < deadline, "server did not start"
        time.sleep(0.05)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(timeout=30)


#: The repository (uvicorn runs from here).
ROOT = Path(__file__).resolve().parents[2]


@contextmanager
def live_server(env: dict[str, str], workers: int = 1) -> Iterator[tuple[str, subprocess.Popen]]:
    """``uvicorn app.main:app`` on 127.0.0.1, ready, killed at the end if still running.

    A free port can be taken by another process between :func:`free_port` and uvicorn's
    bind (the suite starts many servers on four workers; a start once ended with uvicorn's
    startup-failure status, 3).  A server that could not bind is started again on another
    port, up to three times; any other early exit fails with what the server said.
    """
    base_env = {k: v for k, v in os.environ.items() if not k.startswith("BLASTRATE_")}
    base_env.pop("PROMETHEUS_MULTIPROC_DIR", None)
    full_env = {
        **base_env,
        # The session's test database (the root conftest.py), never the user's.
        "BLASTRATE_DATABASE_URL": os.environ["BLASTRATE_DATABASE_URL"],
        "BLASTRATE_WARM_UP": "false",
        "BLASTRATE_LOG_LEVEL": "warning",
        "BLASTRATE_SOLVE_WORKERS": "1",
        **env,
    }
    for attempt in range(3):
        port = free_port()
        command = [sys.executable, "-m", "uvicorn", "app.main:app", "--host", "127.0.0.1"]
        command += ["--port", str(port), "--workers", str(workers), "--log-level", "warning"]
        # The server's stderr, open as long as it runs (closed in the finally below).
        said = tempfile.TemporaryFile()  # noqa: SIM115
        server = subprocess.Popen(
            command,
            cwd=ROOT,
            env=full_env,
            stdout=subprocess.DEVNULL,
            stderr=said,
            start_new_session=True,  # so that the test can end the whole group if it must
        )
        base = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + 60
        while server.poll() is None:
            try:
                if httpx.get(base + "/readyz", timeout=2).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            if time.monotonic() >= deadline:
                server.kill()
                server.wait(10)
                raise AssertionError("the server did not become ready in 60 s")
            time.sleep(0.1)
        if server.poll() is None:
            break
        said.seek(0)
        text = said.read().decode(errors="replace")
        said.close()
        if "address already in use" not in text.lower() or attempt == 2:
            raise AssertionError(f"the server exited during start-up: {text[-2000:]}")
    try:
        yield base, server
    finally:
        if server.poll() is None:
            server.send_signal(signal.SIGTERM)
            try:
                server.wait(15)
            except subprocess.TimeoutExpired:
                os.killpg(server.pid, signal.SIGKILL)
                server.wait(10)
        said.close()
