"""Fixtures for the HTTP service tests: apps with small limits, clients, live servers."""

from __future__ import annotations

import socket
import threading
import time
import warnings
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import uvicorn

from app import Settings, create_app

# Starlette's TestClient on httpx warns (once, at import) that it prefers httpx2; it works.
with warnings.catch_warnings():
    warnings.filterwarnings("ignore", message=".*httpx2.*")
    from fastapi.testclient import TestClient

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
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = int(s.getsockname()[1])
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
