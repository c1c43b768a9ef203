"""``blastrate probe``: this host's probe as JSON, and a service's latest window."""

from __future__ import annotations

import json
import time

from click.testing import CliRunner

from app.commands.host import probe


def test_probe_json_has_every_value_with_its_source() -> None:
    result = CliRunner().invoke(probe, ["--interval", "300ms", "--json", "--tasks"])
    assert result.exit_code == 0, result.output
    body = json.loads(result.output)
    for name in ("cpu_tasks", "io_tasks", "cores", "disks"):
        assert isinstance(body["workload"][name]["value"], int)
        assert body["workload"][name]["source"]
    assert set(body["nic"]) >= {"interface", "buffer_packets", "coalesce_packets"}
    assert body["window_s"] >= 0.3
    assert isinstance(body["tasks"], list)


def test_probe_table() -> None:
    result = CliRunner().invoke(probe, ["--interval", "0.2"])
    assert result.exit_code == 0, result.output
    assert "cpu_tasks" in result.output and "coalesce_packets" in result.output


def test_bad_options_exit_2() -> None:
    bad = CliRunner().invoke(probe, ["--interval", "soon"])
    assert bad.exit_code == 2 and bad.output.startswith("blastrate: error: --interval:")
    nic = CliRunner().invoke(probe, ["--interval", "0.1", "--interface", "nosuchif0"])
    assert nic.exit_code == 2 and "--interface:" in nic.output
    long = CliRunner().invoke(probe, ["--interval", "2h"])
    assert long.exit_code == 2 and "--interval:" in long.output


def test_probe_of_a_server(server_url: str) -> None:
    deadline = time.monotonic() + 20
    while True:
        result = CliRunner().invoke(probe, ["--server", server_url, "--json"])
        if result.exit_code == 0 or time.monotonic() > deadline:
            break
        time.sleep(0.1)  # the first 0.2 s window is not done yet (exit 5, 503)
    assert result.exit_code == 0, result.output
    assert json.loads(result.output)["window_s"] > 0
