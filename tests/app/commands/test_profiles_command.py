"""``blastrate profiles``: locally on the store, and against a running service."""

from __future__ import annotations

import json
import socket
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from app.commands.profiles import profiles


@pytest.fixture
def cli(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Any:
    monkeypatch.setenv("BLASTRATE_DATABASE_URL", f"sqlite:///{tmp_path / 'cli.db'}")

    def invoke(*args: str, stdin: str | None = None) -> Any:
        return CliRunner().invoke(profiles, list(args), input=stdin)

    return invoke


def test_put_show_list_delete_locally(cli: Any, tmp_path: Path) -> None:
    put = cli("put", "lab", "--base", "sx280-2007", "--mu-net", "83200", "--line-rate", "10Gbps")
    assert put.exit_code == 0, put.output
    assert put.output.strip() == "created profile lab"
    shown = json.loads(cli("show", "lab", "--json").output)
    assert (shown["mu_net"], shown["line_rate_bps"], shown["mu_disk"]) == (83_200.0, 1e10, 1010.0)
    assert shown["built_in"] is False
    spec = tmp_path / "lab.json"
    values = {k: v for k, v in shown.items() if k not in ("name", "built_in", "updated_at")}
    spec.write_text(json.dumps({**values, "mu_disk": 1500.0, "provenance": {"by": "test"}}))
    again = cli("put", "lab", "--from-json", str(spec), "--json")
    assert json.loads(again.output)["created"] is False
    assert json.loads(again.output)["profile"]["provenance"] == {"by": "test"}
    listed = json.loads(cli("list", "--json").output)
    assert [p["name"] for p in listed] == ["sx280-2007", "lab"]
    assert "lab" in cli("list").output
    assert cli("delete", "lab").exit_code == 0
    gone = cli("show", "lab")
    assert gone.exit_code == 2
    assert "blastrate: error: NAME:" in gone.output


def test_from_stdin(cli: Any) -> None:
    body = {
        "mu_io_cpu": 1.0,
        "mu_disk": 2.0,
        "mu_net": 3.0,
        "buffer_packets": 8,
        "coalesce_packets": 2,
        "line_rate_bps": 1e9,
        "packet_payload_bytes": 1468,
    }
    assert cli("put", "tiny", "--from-json", "-", stdin=json.dumps(body)).exit_code == 0
    assert json.loads(cli("show", "tiny", "--json").output)["mu_net"] == 3.0


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["put", "x", "--mu-net", "1"], "--mu-io-cpu, --mu-disk"),
        (["put", "x", "--base", "sx280-2007", "--line-rate", "fast"], "--line-rate:"),
        (["put", "x", "--base", "sx280-2007", "--coalesce-packets", "65"], "coalesce_packets"),
        (["put", "sx280-2007", "--base", "sx280-2007"], "NAME: "),
        (["delete", "sx280-2007"], "NAME: "),
        (["delete", "nothing-here"], "NAME: no stored profile"),
        (["put", "x", "--from-json", "/no/such/file.json"], "--from-json: cannot read"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(cli: Any, args: list[str], message: str) -> None:
    result = cli(*args)
    assert result.exit_code == 2, result.output
    assert result.output.startswith("blastrate: error: ")
    assert message in result.output
    assert len(result.output.strip().splitlines()) == 1


def test_against_a_server(cli: Any, server_url: str) -> None:
    put = cli("put", "remote-1", "--base", "sx280-2007", "--mu-disk", "999", "--server", server_url)
    assert put.exit_code == 0, put.output
    assert put.output.strip() == "created profile remote-1"
    shown = json.loads(cli("show", "remote-1", "--json", "--server", server_url).output)
    assert shown["mu_disk"] == 999.0
    # The local store is another database: the server's profile is not there.
    assert cli("show", "remote-1").exit_code == 2
    refused = cli("delete", "sx280-2007", "--server", server_url)
    assert refused.exit_code == 2 and "path.name" in refused.output
    assert cli("delete", "remote-1", "--server", server_url).exit_code == 0
    assert cli("show", "remote-1", "--server", server_url).exit_code == 2


def test_unreachable_server_exits_4(cli: Any) -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    result = cli("list", "--server", f"http://127.0.0.1:{port}")
    assert result.exit_code == 4
    assert result.output.startswith("blastrate: error: --server:")


def test_profiles_alone_lists_and_a_piped_table_is_whole(cli: Any) -> None:
    # README: `blastrate profiles` lists the profiles (it printed usage, exit 2).  Piped
    # (CliRunner's stdout is not a terminal) rich assumed 80 columns and cut names short.
    name = "a-lab-receiver-with-a-long-descriptive-name"
    assert cli("put", name, "--base", "sx280-2007", "--mu-net", "83200").exit_code == 0
    listed = cli()
    assert listed.exit_code == 0, listed.output
    assert name in listed.output and "built-in" in listed.output
    assert "…" not in listed.output
    assert cli("list").output == listed.output


def test_errors_name_what_was_typed() -> None:
    """Before: bare fields (profile:, name:) on some commands, options on others; and
    what-if lost the reason after the first colon."""
    from cli_support import invoke

    r = invoke("profiles", "show", "no-such-profile")
    assert r.exit_code == 2 and r.stderr.startswith("blastrate: error: NAME: unknown host profile")
    r = invoke(
        "what-if",
        "-C",
        "1",
        "-I",
        "0",
        "--file-size",
        "1MB",
        "--delay",
        "1ms",
        "--profile",
        "no-such-profile",
    )
    assert r.exit_code == 2
    assert r.stderr.startswith("blastrate: error: --profile: unknown host profile 'no-such")


def test_default_is_shown_set_marked_and_cleared(cli: Any) -> None:
    # There was no way but `calibrate` to set the host default, and no command showed it.
    assert cli("default").output.strip() == "sx280-2007 (built-in; no default set)"
    assert cli("put", "lab", "--base", "sx280-2007", "--mu-net", "20000").exit_code == 0
    assert cli("default", "lab").output.strip() == "lab"
    assert json.loads(cli("default", "--json").output) == {"default": "lab", "set": True}
    listed = json.loads(cli("list", "--json").output)
    assert [p["name"] for p in listed if p.get("default")] == ["lab"]
    assert "stored, default" in cli("list").output
    unknown = cli("default", "nope")
    assert unknown.exit_code == 2 and "NAME: unknown host profile" in unknown.output
    both = cli("default", "lab", "--clear")
    assert both.exit_code == 2 and "--clear" in both.output
    assert cli("default", "--clear").output.strip().startswith("sx280-2007")
    listed = json.loads(cli("list", "--json").output)
    assert [p["name"] for p in listed if p.get("default")] == ["sx280-2007"]


@pytest.mark.parametrize(
    ("url", "status", "reason"),
    [
        # Two slashes: SQLAlchemy reads "blastrate.db" as a host, not a file.
        ("sqlite://blastrate.db", 2, "Invalid SQLite URL"),
        # "postgres://" is not a dialect SQLAlchemy knows (it wants "postgresql").
        ("postgres://user:hunter2@db.example/blastrate", 2, "postgres"),
        ("sqlite:////nonexistent-dir/for/sure/p.db", 1, "unable to open database file"),
    ],
)
def test_an_unusable_database_url_is_named_with_why(
    monkeypatch: pytest.MonkeyPatch, url: str, status: int, reason: str
) -> None:
    # Found by a newcomer's trial: these were "profile database: profile database
    # unavailable: ArgumentError", exit 1 ("internal error"), naming neither the setting
    # nor the URL.  A URL that cannot be used at all is bad input (2); a database that
    # cannot be opened stays 1.  A password is never printed.
    monkeypatch.setenv("BLASTRATE_DATABASE_URL", url)
    result = CliRunner().invoke(profiles, ["default"])
    assert result.exit_code == status, result.output
    assert "BLASTRATE_DATABASE_URL" in result.output and reason in result.output
    assert "hunter2" not in result.output
