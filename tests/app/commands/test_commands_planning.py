"""``blastrate sweep`` / ``what-if`` (Click commands) and the ``--plot`` helper of curve."""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path
from typing import Any

import click
import defusedxml.ElementTree as SafeET
import pytest
from click.testing import CliRunner

from app.commands.curve import write_curve_plot
from app.commands.planning import sweep, what_if_command
from app.operations.whole_method import compute_bottleneck, resolve_inputs
from planning import evaluate_point

ARGS = [
    "--cpu-tasks",
    "0..2",
    "--io-tasks",
    "0,1",
    "--file-size",
    "500MB",
    "--propagation-delay",
    "100ms",
]


def test_sweep_json_is_one_call_per_point() -> None:
    r = CliRunner().invoke(sweep, [*ARGS, "--json"])
    assert r.exit_code == 0, r.output
    body = json.loads(r.output)
    assert body["points"] == 6
    for rec in body["records"]:
        assert rec == evaluate_point(
            {k: rec[k] for k in ("cpu_tasks", "io_tasks", "file_size", "propagation_delay")}
        )


def test_sweep_csv_output_file_and_plot(tmp_path: Path) -> None:
    out, plot = tmp_path / "s.csv", tmp_path / "s.svg"
    r = CliRunner().invoke(
        sweep, [*ARGS, "--output", str(out), "--plot", str(plot), "--workers", "1"]
    )
    assert r.exit_code == 0, r.output
    rows = list(csv.DictReader(io.StringIO(out.read_text())))
    assert len(rows) == 6
    assert "6 points" in r.output
    root = SafeET.fromstring(plot.read_bytes())
    text = " ".join(t.text or "" for t in root.iter("{http://www.w3.org/2000/svg}text"))
    assert "io_tasks = 1" in text


def test_sweep_errors_exit_2_with_one_line() -> None:
    r = CliRunner().invoke(sweep, [*ARGS[:-2], "--propagation-delay", "1..2"])
    assert r.exit_code == 2
    assert r.output.strip().startswith("blastrate: error: --delay:")
    # A limit an option raises: exit 3, named by that option (as rate's --max-states).
    r = CliRunner().invoke(sweep, [*ARGS, "--max-points", "5"])
    assert r.exit_code == 3 and r.output.startswith("blastrate: error: --max-points:")
    assert "max_points=5" in r.output
    # The local ceiling: a mistyped range cannot fill the memory.
    r = CliRunner().invoke(sweep, [*ARGS, "--max-points", "20000000"])
    assert r.exit_code == 2 and "--max-points" in r.output
    r = CliRunner().invoke(sweep, [*ARGS, "--plot", "x.gif"])
    assert r.exit_code == 2 and "plot:" in r.output
    # An unknown (or stored) profile: once, exit 2, not a row of '-' and exit 0.
    r = CliRunner().invoke(sweep, [*ARGS, "--profile", "nosuch"])
    assert r.exit_code == 2 and "--profile:" in r.output and "built-in" in r.output


def test_sweep_server_unreachable_exits_4(unused_port: int) -> None:
    r = CliRunner().invoke(sweep, [*ARGS, "--server", f"http://127.0.0.1:{unused_port}"])
    assert r.exit_code == 4 and "server:" in r.output


def test_what_if_json_and_table() -> None:
    args = [
        "--cpu-tasks",
        "2",
        "--io-tasks",
        "1",
        "--file-size",
        "500MB",
        "--propagation-delay",
        "100ms",
        "--max-buffer-packets",
        "128",
    ]
    r = CliRunner().invoke(what_if_command, [*args, "--json"])
    assert r.exit_code == 0, r.output
    body = json.loads(r.output)
    assert body["best_ring"]["commands"][1].startswith("ethtool -C eth0 rx-frames ")
    r = CliRunner().invoke(what_if_command, args)
    assert r.exit_code == 0 and "ethtool -G eth0 rx" in r.output and "one more core" in r.output
    r = CliRunner().invoke(what_if_command, [*args[:-2], "--max-buffer-packets", "8"])
    assert r.exit_code == 2 and "--max-buffer-packets:" in r.output


def test_curve_plot_helper_marks_the_optimum(tmp_path: Path) -> None:
    inputs = resolve_inputs(
        {"cpu_tasks": 2, "io_tasks": 1}, {}, {"file_size_bytes": 5e8, "propagation_delay_s": 0.1}
    ).to_dict()
    body: dict[str, Any] = compute_bottleneck(inputs, {"include_curve": True})
    path = tmp_path / "curve.svg"
    write_curve_plot(body, str(path))
    root = SafeET.fromstring(path.read_bytes())
    assert any(e.get("id") == "optimum" for e in root.iter())
    png = tmp_path / "curve.png"
    write_curve_plot(body, str(png))
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    with pytest.raises(click.BadParameter):
        write_curve_plot(body, str(tmp_path / "curve.gif"))


def test_piped_tables_are_plain_text_with_every_row() -> None:
    """Before: piped output was box-drawn and the sweep table stopped at 20 rows with
    "... 16 more"."""
    r = CliRunner().invoke(
        sweep, ["-C", "0..5", "-I", "0..5", "--file-size", "500MB", "--delay", "100ms"]
    )
    assert r.exit_code == 0, r.output
    assert not set(r.output) & set("─│┃━┏┓┗┛┡┩└┘┌┐├┤┼╇"), r.output[:400]
    rows = [line.split() for line in r.output.splitlines()]
    assert sum(len(row) == 5 and row[0].isdigit() for row in rows) == 36
    assert "more" not in r.output


@pytest.mark.parametrize("spec", ["0..100000", "0..1e300"])
def test_a_sweep_too_long_names_max_points_and_stays_short(spec: str) -> None:
    from cli_support import invoke

    r = invoke("sweep", "--cpu-tasks", spec, "-I", "0", "--file-size", "1MB", "--delay", "10ms")
    assert r.exit_code == 3
    assert r.stderr.startswith("blastrate: error: --max-points:")
    assert "raise it with --max-points" in r.stderr and len(r.stderr) < 200, r.stderr


def test_sweep_takes_the_model_as_rate_does_and_what_if_refuses_it() -> None:
    # `--model timeslice` on sweep: each record is `blastrate rate --model timeslice`'s
    # answer for the point (app.operations.whole_method, the same inputs), bit for bit.
    args = ["--cpu-tasks", "2", "--io-tasks", "0", "--file-size", "20MB", "--delay", "10ms"]
    r = CliRunner().invoke(sweep, [*args, "--model", "timeslice", "--json"])
    assert r.exit_code == 0, r.output
    (rec,) = json.loads(r.output)["records"]
    inputs = resolve_inputs(
        {"cpu_tasks": 2, "io_tasks": 0},
        {"profile": "sx280-2007"},
        {"file_size_bytes": 20_000_000, "propagation_delay_s": 0.01},
        model="timeslice",
    ).to_dict()
    ref = compute_bottleneck(inputs, {})
    assert rec["model"] == "timeslice"
    assert rec["effective_bottleneck_rate_bps"] == ref["effective_bottleneck_rate_bps"]
    assert rec["loss_probability"] == ref["loss_probability"]
    w = CliRunner().invoke(what_if_command, [*args, "--model", "timeslice"])
    assert w.exit_code == 2 and w.output.strip().startswith("blastrate: error: --model:")
    bad = CliRunner().invoke(sweep, [*args, "--model", "magic"])
    assert bad.exit_code == 2 and bad.output.strip().startswith("blastrate: error: --model:")


def test_a_servers_refusal_names_the_option_as_a_local_one_does(server_url: str) -> None:
    # POST /what-if names body.inputs.model; the command says --model, as without --server.
    args = ["--cpu-tasks", "2", "--io-tasks", "0", "--file-size", "20MB", "--delay", "10ms"]
    r = CliRunner().invoke(what_if_command, [*args, "--model", "timeslice", "--server", server_url])
    assert r.exit_code == 2
    assert r.output.strip().startswith("blastrate: error: --model: what-if ranks upgrades")


@pytest.mark.parametrize("command", ["rate", "curve", "sweep", "what-if"])
@pytest.mark.parametrize(
    ("leave_out", "name"),
    [(("--delay", "100ms"), "--delay"), (("--file-size", "500MB"), "--file-size")],
)
def test_a_missing_input_is_named_alike_by_every_command(
    command: str, leave_out: tuple[str, str], name: str
) -> None:
    # One vocabulary: a missing delay is `--delay` whichever command (it is also spelled
    # --propagation-delay), and a sweep missing an input for every point is bad input,
    # not a table of failed points with exit 0.
    from app.commands import main

    args = ["-C", "2", "-I", "1", "--file-size", "500MB", "--delay", "100ms"]
    at = args.index(leave_out[0])
    r = CliRunner().invoke(main, [command, *args[:at], *args[at + 2 :]])
    assert r.exit_code == 2, r.output
    assert r.output.strip().splitlines() == [f"blastrate: error: {name}: required"]
