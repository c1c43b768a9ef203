"""``blastrate solve``: a net file solved locally (closed forms), its errors and limits."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from cli_support import cycle_net, invoke, queue_net, write_json

from app.commands.common import EXIT_MODEL, EXIT_OK, EXIT_USAGE


def test_solve_a_net_file(tmp_path: Path) -> None:
    request = {"net": queue_net(), "measures": {"probabilities": {"full": "#q == 3"}}}
    result = invoke("solve", str(write_json(tmp_path / "net.json", request)), "--json")
    assert result.exit_code == EXIT_OK, result.stderr
    body = json.loads(result.stdout)
    assert body["n_states"] == 4
    # M/M/1/3 with rho = 1/2: P(3) = (1 - rho) rho^3 / (1 - rho^4) = 1/15.
    assert body["steady_state"]["measures"]["probabilities"]["full"] == pytest.approx(1 / 15)
    result = invoke("solve", str(write_json(tmp_path / "bare.json", queue_net())))
    assert result.exit_code == EXIT_OK and "residual" in result.stdout


def test_solve_says_which_order_its_lu_route_used(tmp_path: Path) -> None:
    # 20,301 states: too wide a band for the banded route and too slow a chain for the
    # sweeps, so the sparse LU answers; the answer says in which fill-reducing order.
    path = write_json(tmp_path / "cycle.json", cycle_net(200))
    result = invoke("solve", str(path), "--json")
    assert result.exit_code == EXIT_OK, result.stderr
    steady = json.loads(result.stdout)["steady_state"]
    assert steady["method"] == "sparse-lu"
    assert steady["note"] == "AMD ordering" or "libamd not found" in steady["note"]
    text = invoke("solve", str(path))
    assert f"(sparse-lu, {steady['note']})" in text.stdout


def test_solve_reads_stdin() -> None:
    result = invoke("solve", "-", "--json", stdin=json.dumps(queue_net()))
    assert result.exit_code == EXIT_OK, result.stderr
    assert json.loads(result.stdout)["n_states"] == 4


def test_transient_from_the_command_line(tmp_path: Path) -> None:
    path = write_json(tmp_path / "net.json", queue_net())
    result = invoke("solve", str(path), "--analysis", "transient", "--times", "0,1", "--json")
    assert result.exit_code == EXIT_OK, result.stderr
    tokens = json.loads(result.stdout)["transient"]["measures"]["mean_tokens"]["q"]
    assert tokens[0] == 0.0  # the queue starts empty
    assert 0.0 < tokens[1] < 3.0


def test_solve_errors(tmp_path: Path) -> None:
    result = invoke("solve", str(tmp_path / "missing.json"))
    assert result.exit_code == EXIT_USAGE and "missing.json" in result.stderr
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    result = invoke("solve", str(bad))
    assert result.exit_code == EXIT_USAGE
    assert result.stderr.startswith(f"blastrate: error: {bad}: invalid JSON at line 1")
    split = write_json(
        tmp_path / "split.json",
        {
            "places": {"s": 1, "a": 0, "b": 0},
            "transitions": [
                {"name": "to_a", "rate": 1.0, "inputs": {"s": 1}, "outputs": {"a": 1}},
                {"name": "to_b", "rate": 1.0, "inputs": {"s": 1}, "outputs": {"b": 1}},
            ],
        },
    )
    result = invoke("solve", str(split))
    assert result.exit_code == EXIT_MODEL  # two absorbing states: no unique steady state
    assert "ergodic" in result.stderr


def test_max_states_error_names_the_option(tmp_path: Path) -> None:
    # 30 tokens on a 3-cycle: 31 * 32 / 2 = 496 markings.
    path = write_json(tmp_path / "cycle.json", cycle_net(30))
    result = invoke("solve", str(path), "--max-states", "100")
    assert result.exit_code == EXIT_MODEL
    line = result.stderr
    assert line.count("\n") == 1
    assert line.startswith("blastrate: error: --max-states: limit max_states=100 exceeded")
    assert line.rstrip().endswith("raise it with --max-states")
    result = invoke("solve", str(path), "--max-states", "496", "--json")
    assert result.exit_code == EXIT_OK, result.stderr
    assert json.loads(result.stdout)["n_states"] == 496


def test_other_limits_name_their_variable(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("BLASTRATE_MAX_EDGES", "10")
    path = write_json(tmp_path / "cycle.json", cycle_net(30))
    result = invoke("solve", str(path))
    assert result.exit_code == EXIT_MODEL
    assert result.stderr.startswith("blastrate: error: max_edges:")
    assert "raise it with the environment variable BLASTRATE_MAX_EDGES" in result.stderr


def test_timeout_stops_a_long_solve(tmp_path: Path) -> None:
    # 1,500 tokens: 1.1 million markings, far more than 0.5 s of work on any machine here.
    path = write_json(tmp_path / "cycle.json", cycle_net(1_500))
    result = invoke("solve", str(path), "--max-states", "2000000", "--timeout", "0.5")
    assert result.exit_code == EXIT_MODEL
    assert result.stderr == (
        f"blastrate: error: --timeout: solving {path} took more than 0.5 s; "
        "raise it with --timeout\n"
    )
