"""``blastrate convert`` (Click, run with CliRunner) and ``blastrate solve`` on PNML files."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from cli_support import invoke
from click.testing import CliRunner

import srn
from app.commands import main
from app.commands.common import EXIT_OK, EXIT_USAGE
from app.commands.srn_files import convert, load_net_request


def run(argv: list[str]) -> int:
    """``blastrate argv...`` in this process; its exit status (output to capsys)."""
    return main.main(argv, standalone_mode=False)


DATA = Path(__file__).parents[2] / "srn" / "data"


def test_pnml_to_json_to_pnml(tmp_path: Path) -> None:
    runner = CliRunner()
    as_json = tmp_path / "cluster.json"
    result = runner.invoke(convert, [str(DATA / "storm-workflow_cluster.pnml"), str(as_json)])
    assert result.exit_code == 0, result.output
    net = json.loads(as_json.read_text())
    assert net == srn.read_pnml((DATA / "storm-workflow_cluster.pnml").read_bytes()).to_dict()
    back = tmp_path / "cluster.pnml"
    result = runner.invoke(convert, [str(as_json), str(back), "--dialect", "storm"])
    assert result.exit_code == 0, result.output
    assert srn.read_pnml(back.read_bytes()).to_dict() == net
    # Without an extension on OUT, the other format is written; '-' is stdout.
    result = runner.invoke(convert, [str(as_json), "-"])
    assert result.exit_code == 0 and result.output.lstrip().startswith("<?xml")


def test_convert_refuses_what_pnml_cannot_hold(tmp_path: Path) -> None:
    src = tmp_path / "q.json"
    src.write_text(
        json.dumps(
            {
                "places": {"q": 1},
                "transitions": [{"name": "t", "rate": "2 * #q", "inputs": {"q": 1}}],
            }
        )
    )
    result = CliRunner().invoke(convert, [str(src), str(tmp_path / "q.pnml")])
    assert result.exit_code == EXIT_USAGE
    assert "transitions.t.rate" in result.output and "expression" in result.output


def test_convert_reports_bad_pnml_with_its_line(tmp_path: Path) -> None:
    src = tmp_path / "bad.pnml"
    src.write_text(
        '<pnml><net id="n">\n<place id="p"><capacity><value>4</value></capacity>'
        "</place></net></pnml>"
    )
    result = CliRunner().invoke(convert, [str(src), str(tmp_path / "out.json")])
    assert result.exit_code == EXIT_USAGE
    assert "bad.pnml" in result.output and "<capacity> at line 2" in result.output


def test_loader_gives_the_solve_request() -> None:
    request = load_net_request(str(DATA / "pipe-ClassicGSPN.xml"))
    assert set(request) == {"net"} and len(request["net"]["places"]) == 3


def test_solve_reads_pnml_like_json(capsys: Any, tmp_path: Path) -> None:
    """`blastrate solve MODEL.pnml` prints the same answer as for the JSON form of the net."""
    status = run(["solve", str(DATA / "pipe-gspn1.xml"), "--json"])
    from_pnml, err = capsys.readouterr()
    assert status == EXIT_OK, err
    as_json = tmp_path / "gspn1.json"
    as_json.write_text(json.dumps(srn.read_pnml((DATA / "pipe-gspn1.xml").read_bytes()).to_dict()))
    assert run(["solve", str(as_json), "--json"]) == EXIT_OK
    from_json, _ = capsys.readouterr()
    assert json.loads(from_pnml) == json.loads(from_json)
    assert json.loads(from_pnml)["n_states"] == 3


@pytest.mark.parametrize("suffix", [".pnml", ".xml"])
def test_solve_reports_bad_pnml(capsys: Any, tmp_path: Path, suffix: str) -> None:
    bad = tmp_path / f"bad{suffix}"
    bad.write_text('<?xml version="1.0"?><!DOCTYPE x [<!ENTITY a "b">]><pnml/>')
    assert run(["solve", str(bad)]) == EXIT_USAGE
    _, err = capsys.readouterr()
    assert "forbidden XML construct" in err


def test_convert_through_the_main_command(capsys: Any, tmp_path: Path) -> None:
    out = tmp_path / "classic.json"
    assert run(["convert", str(DATA / "pipe-ClassicGSPN.xml"), str(out)]) == EXIT_OK
    assert json.loads(out.read_text())["places"] == {"P0": 2, "P1": 0, "P2": 0}
    bad = tmp_path / "expr.json"
    bad.write_text(
        json.dumps({"places": {"q": 1}, "transitions": [{"name": "t", "guard": "#q>0"}]})
    )
    assert run(["convert", str(bad), str(tmp_path / "x.pnml")]) == EXIT_USAGE
    assert "guard" in capsys.readouterr().err


def test_convert_never_replaces_a_file_without_force(tmp_path: Path) -> None:
    """Before: convert overwrote OUT silently."""
    out = tmp_path / "net.json"
    out.write_text("keep me")
    src = str(DATA / "storm-workflow_cluster.pnml")
    result = CliRunner().invoke(convert, [src, str(out)])
    assert result.exit_code == 2 and "--force" in result.output
    assert out.read_text() == "keep me"
    assert CliRunner().invoke(convert, [src, str(out), "--force"]).exit_code == 0
    assert out.read_text() != "keep me"


def test_solve_on_a_net_without_a_steady_state_says_what_to_ask_instead(tmp_path: Path) -> None:
    net = tmp_path / "two_ends.json"
    net.write_text(
        '{"places": {"a": 1, "b": 0, "c": 0}, "transitions": ['
        '{"name": "ab", "rate": 1.0, "inputs": {"a": 1}, "outputs": {"b": 1}},'
        '{"name": "ac", "rate": 2.0, "inputs": {"a": 1}, "outputs": {"c": 1}}]}'
    )
    r = invoke("solve", str(net))
    assert r.exit_code == 3
    assert "--analysis transient" in r.stderr and "--analysis absorption" in r.stderr
