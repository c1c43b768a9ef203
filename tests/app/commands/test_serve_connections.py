"""``blastrate serve`` against slow clients: half-sent requests are dropped after
``read_timeout_s``, one address cannot hold more than ``max_connections_per_client``,
and the service keeps answering others meanwhile.

Before: 20,000 idle, partial HTTP requests used up the process's file limit and
``/healthz`` failed for 35 s; nothing ever closed a connection that had not finished
its first request.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from cli_support import blastrate

from conftest import free_port

READ_TIMEOUT_S = 2.0
PER_CLIENT = 50


@pytest.fixture(scope="module")
def server() -> Iterator[tuple[int, subprocess.Popen[bytes]]]:
    port = free_port()
    env = {
        **{k: v for k, v in os.environ.items() if not k.startswith("BLASTRATE_")},
        "BLASTRATE_DATABASE_URL": os.environ["BLASTRATE_DATABASE_URL"],
        "BLASTRATE_WARM_UP": "false",
        "BLASTRATE_SOLVE_WORKERS": "1",
        "BLASTRATE_READ_TIMEOUT_S": str(READ_TIMEOUT_S),
        "BLASTRATE_MAX_CONNECTIONS_PER_CLIENT": str(PER_CLIENT),
    }
    process = subprocess.Popen(
        [*blastrate(), "serve", "--port", str(port), "--log-level", "warning"],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 120
        while True:
            try:
                if httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=2).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            assert process.poll() is None
            assert time.monotonic() < deadline, "the service did not start"
            time.sleep(0.1)
        yield port, process
    finally:
        process.send_signal(signal.SIGINT)
        try:
            process.wait(30)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def _partial(port: int, source: str = "127.0.0.1") -> socket.socket:
    s = socket.socket()
    s.bind((source, 0))
    s.connect(("127.0.0.1", port))
    s.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\n")  # never the final blank line
    return s


def _closed_by_peer(s: socket.socket, timeout_s: float) -> bool:
    s.settimeout(timeout_s)
    try:
        return s.recv(1) == b""
    except ConnectionResetError:
        return True
    except TimeoutError:
        return False


def test_a_half_sent_request_is_dropped_after_the_read_timeout(server) -> None:
    port, _ = server
    s = _partial(port)
    try:
        start = time.monotonic()
        assert _closed_by_peer(s, 60.0)
        # Not before the bound (a slow client is not cut short), and not much after.
        assert time.monotonic() - start >= READ_TIMEOUT_S * 0.9
    finally:
        s.close()


def test_one_address_cannot_hold_every_connection(server) -> None:
    port, process = server
    held = [_partial(port) for _ in range(PER_CLIENT)]
    extra: list[socket.socket] = []
    try:
        # Beyond the cap a connection from the same address is closed at once ...
        for _ in range(20):
            extra.append(_partial(port))
        assert all(_closed_by_peer(s, 30.0) for s in extra)
        # ... while another client (another loopback address) is answered.
        with httpx.Client(transport=httpx.HTTPTransport(local_address="127.0.0.2")) as c:
            assert c.get(f"http://127.0.0.1:{port}/healthz", timeout=30).status_code == 200
        # The descriptors held stay bounded by the cap.
        fds = len(list(Path(f"/proc/{process.pid}/fd").iterdir()))
        assert fds < PER_CLIENT + 200
    finally:
        for s in held + extra:
            s.close()


def test_a_port_in_use_is_a_usage_error_naming_the_option() -> None:
    """One line naming --port and exit 2 (uvicorn logged it as JSON and exited 3, the
    status of a model without an answer)."""
    from click.testing import CliRunner

    from app.commands.serve import serve

    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen(1)
        port = taken.getsockname()[1]
        result = CliRunner().invoke(serve, ["--host", "127.0.0.1", "--port", str(port)])
    assert result.exit_code == 2
    assert f"--port: cannot bind 127.0.0.1:{port}: Address already in use" in result.output
