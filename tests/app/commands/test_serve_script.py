"""The set-up scripts: ``./scripts/serve ARGS`` hands ARGS to ``blastrate serve``.

Sourcing ``scripts/_venv.sh`` once passed the caller's arguments on as the name of a pip
extra, so ``./scripts/serve --port 9000`` failed every time.  These tests run the real
script against the test environment itself (``VENV``), which is already installed, so
no package is downloaded.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

ROOT = Path(__file__).resolve().parents[3]
VENV = Path(sys.prefix)


def _installed() -> bool:
    """Whether the scripts would reuse this environment without running pip."""
    newest = max((ROOT / name).stat().st_mtime for name in ("pyproject.toml", "constraints.txt"))
    return any(stamp.stat().st_mtime >= newest for stamp in VENV.glob(".blastrate-installed*"))


pytestmark = pytest.mark.skipif(
    not _installed(),
    reason="this environment was not installed by scripts/_venv.sh since the last change "
    "of pyproject.toml or constraints.txt (run ./scripts/test)",
)


def _env() -> dict[str, str]:
    return {**os.environ, "VENV": str(VENV), "BLASTRATE_SOLVE_WORKERS": "1"}


def test_serve_arguments_reach_blastrate_not_pip() -> None:
    done = subprocess.run(
        [str(ROOT / "scripts" / "serve"), "--no-such-option"],
        capture_output=True,
        text=True,
        timeout=60,
        env=_env(),
    )
    assert done.returncode == 2
    assert done.stderr == "blastrate: error: --no-such-option: no such option\n"


def test_serve_on_the_port_given(unused_port: int) -> None:
    server = subprocess.Popen(
        [str(ROOT / "scripts" / "serve"), "--port", str(unused_port), "--log-level", "warning"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        env=_env(),
    )
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                response = httpx.get(f"http://127.0.0.1:{unused_port}/healthz", timeout=1)
                break
            except httpx.HTTPError:
                pass
            assert server.poll() is None, server.stderr.read() if server.stderr else ""
            assert time.monotonic() < deadline, "the service did not start"
            time.sleep(0.1)
        assert response.status_code == 200
    finally:
        server.send_signal(signal.SIGINT)  # what Ctrl-C does
        try:
            server.wait(timeout=20)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait()
    assert server.returncode == 0
