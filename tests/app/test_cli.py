"""The ``blastrate`` command line: main(argv) in-process, and a subprocess smoke test."""

from __future__ import annotations

import csv
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import httpx
import pytest

import transport
from app.cli import EXIT_MODEL, EXIT_OK, EXIT_UNREACHABLE, EXIT_USAGE, main
from host import Workload

RATE = ["-C", "2", "-I", "1", "--file-size", "500MB", "--delay", "100ms"]


def run(capsys: Any, *argv: str) -> tuple[int, str, str]:
    status = main(list(argv))
    out, err = capsys.readouterr()
    return status, out, err


def test_rate_prints_a_summary(capsys: Any) -> None:
    status, out, err = run(capsys, "rate", *RATE)
    assert status == EXIT_OK, err
    assert "effective bottleneck rate" in out
    assert "limited by the end system" in out


def test_rate_json_is_the_library_answer(capsys: Any) -> None:
    status, out, _ = run(capsys, "rate", *RATE, "--json")
    assert status == EXIT_OK
    body = json.loads(out)
    expected = transport.workload_bottleneck_rate(
        Workload(2, 1), file_size_bytes=500_000_000, propagation_delay_s=0.1
    )
    assert body["effective_bottleneck_rate_bps"] == expected.bottleneck.rate_bps
    assert body["inputs"]["transfer"] == {
        "file_size_bytes": 500_000_000,
        "propagation_delay_s": 0.1,
    }


@pytest.mark.parametrize(
    ("extra", "option"),
    [
        (["--file-size", "lots"], "--file-size"),
        (["--line-rate", "1gbps"], "--line-rate"),  # case matters: refused, not guessed
        (["--coalesce-packets", "999"], "--coalesce-packets"),
        (["--profile", "nope"], "--profile"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(capsys: Any, extra: list[str], option: str) -> None:
    status, out, err = run(capsys, "rate", *RATE, *extra)
    assert status == EXIT_USAGE
    assert out == ""
    assert err.count("\n") == 1 and err.startswith(f"blastrate: error: {option}:")


def test_usage_errors_exit_2(capsys: Any) -> None:
    assert run(capsys, "rate", "-C", "2")[0] == EXIT_USAGE
    assert run(capsys)[0] == EXIT_USAGE
    assert run(capsys, "frobnicate")[0] == EXIT_USAGE


def test_unreachable_server_exits_4(capsys: Any, unused_port: int) -> None:
    url = f"http://127.0.0.1:{unused_port}"
    status, _, err = run(capsys, "rate", *RATE, "--server", url, "--timeout", "2")
    assert status == EXIT_UNREACHABLE
    assert "cannot reach server" in err


@pytest.mark.parametrize("suffix", [".csv", ".json"])
def test_curve_is_saved(capsys: Any, tmp_path: Path, suffix: str) -> None:
    target = tmp_path / f"curve{suffix}"
    status, _, err = run(capsys, "curve", *RATE, "--points", "25", "--output", str(target))
    assert status == EXIT_OK, err
    if suffix == ".csv":
        rows = list(csv.DictReader(target.open()))
        assert len(rows) == 25
        assert float(rows[-1]["send_rate_bps"]) == 1e9
    else:
        body = json.loads(target.read_text())
        assert len(body["curve"]) == 25
        times = [p["transfer_time_s"] for p in body["curve"]]
        assert min(times) >= body["transfer_time_s"] - 1e-12


def test_curve_prints_a_table(capsys: Any) -> None:
    status, out, _ = run(capsys, "curve", *RATE, "--points", "5")
    assert status == EXIT_OK
    assert len(out.strip().splitlines()) == 1 + 5 + 1  # header, points, best


def queue_file(tmp_path: Path, **extra: Any) -> Path:
    net = {
        "places": {"q": 0},
        "transitions": [
            {"name": "arrive", "rate": 1.0, "outputs": {"q": 1}, "inhibitors": {"q": 3}},
            {"name": "serve", "rate": 2.0, "inputs": {"q": 1}},
        ],
    }
    path = tmp_path / "net.json"
    path.write_text(json.dumps({"net": net, **extra}))
    return path


def test_solve_a_net_file(capsys: Any, tmp_path: Path) -> None:
    request = {"measures": {"probabilities": {"full": "#q == 3"}}}
    status, out, err = run(capsys, "solve", str(queue_file(tmp_path, **request)), "--json")
    assert status == EXIT_OK, err
    body = json.loads(out)
    assert body["n_states"] == 4
    # M/M/1/3 with rho = 1/2: P(3) = (1 - rho) rho^3 / (1 - rho^4) = 1/15.
    assert body["steady_state"]["measures"]["probabilities"]["full"] == pytest.approx(1 / 15)
    status, out, _ = run(capsys, "solve", str(queue_file(tmp_path)))
    assert status == EXIT_OK and "residual" in out


def test_solve_errors(capsys: Any, tmp_path: Path) -> None:
    status, _, err = run(capsys, "solve", str(tmp_path / "missing.json"))
    assert status == EXIT_USAGE and "missing.json" in err
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    assert run(capsys, "solve", str(bad))[0] == EXIT_USAGE
    split = tmp_path / "split.json"
    split.write_text(
        json.dumps(
            {
                "places": {"s": 1, "a": 0, "b": 0},
                "transitions": [
                    {"name": "to_a", "rate": 1.0, "inputs": {"s": 1}, "outputs": {"a": 1}},
                    {"name": "to_b", "rate": 1.0, "inputs": {"s": 1}, "outputs": {"b": 1}},
                ],
            }
        )
    )
    status, _, err = run(capsys, "solve", str(split))
    assert status == EXIT_MODEL  # two absorbing states: no unique steady state
    assert "ergodic" in err


def test_profiles(capsys: Any) -> None:
    status, out, _ = run(capsys, "profiles")
    assert status == EXIT_OK and out.startswith("sx280-2007 (default)")


def _blastrate() -> list[str]:
    exe = shutil.which("blastrate", path=str(Path(sys.executable).parent))
    return [exe] if exe else [sys.executable, "-m", "app.cli"]


def test_serve_and_ask_it_from_another_process(capsys: Any, unused_port: int) -> None:
    port = unused_port
    url = f"http://127.0.0.1:{port}"
    env = {**os.environ, "BLASTRATE_SOLVE_WORKERS": "1"}
    server = subprocess.Popen(
        [*_blastrate(), "serve", "--port", str(port), "--log-level", "warning"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        env=env,
    )
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                if httpx.get(f"{url}/readyz", timeout=1).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            assert server.poll() is None, server.stderr.read() if server.stderr else ""
            assert time.monotonic() < deadline, "the server did not become ready"
            time.sleep(0.1)
        remote = subprocess.run(
            [*_blastrate(), "rate", *RATE, "--server", url, "--json"],
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert remote.returncode == EXIT_OK, remote.stderr
        status, local, _ = run(capsys, "rate", *RATE, "--json")
        assert status == EXIT_OK
        assert json.loads(remote.stdout) == json.loads(local)
        bad = subprocess.run(
            [*_blastrate(), "rate", *RATE, "--server", url, "--profile", "nope"],
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert bad.returncode == EXIT_USAGE
        assert bad.stderr.startswith("blastrate: error: --profile:")
    finally:
        server.terminate()
        server.wait(timeout=20)
