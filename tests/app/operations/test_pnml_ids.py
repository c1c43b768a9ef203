"""Answers for a PNML net are keyed by the file's own ids.

Before: ``p.AppointmentRequest`` came back as ``p_AppointmentRequest``, though ``.`` is
legal in a PNML id.  Now every result uses the file's ids; an id that is not an
identifier is renamed only inside the engine, and the answer's ``renamed`` says which
name its expressions use.  Checked through the HTTP service, a job and the command line.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

from click.testing import CliRunner

from app.commands import main

# A two-state cycle: rates 1 (request) and 3 (serve): P(Request) = 3/4, P(Done) = 1/4,
# throughput of each transition 3/4 (the closed form of a two-state CTMC).
PNML = """<?xml version="1.0"?>
<pnml><net id="n" type="http://www.pnml.org/version-2009/grammar/ptnet"><page id="g">
<place id="p.Request"><initialMarking><text>1</text></initialMarking></place>
<place id="p.Done"/>
<transition id="t-serve"><rate><value>1.0</value></rate></transition>
<transition id="t-back"><rate><value>3.0</value></rate></transition>
<arc id="a1" source="p.Request" target="t-serve"/><arc id="a2" source="t-serve" target="p.Done"/>
<arc id="a3" source="p.Done" target="t-back"/><arc id="a4" source="t-back" target="p.Request"/>
</page></net></pnml>"""
RENAMED = {"p.Request": "p_Request", "p.Done": "p_Done", "t-serve": "t_serve", "t-back": "t_back"}


def _check(result: dict[str, Any]) -> None:
    measures = result["steady_state"]["measures"]
    assert measures["mean_tokens"].keys() == {"p.Request", "p.Done"}
    assert abs(measures["mean_tokens"]["p.Request"] - 0.75) < 1e-9
    assert measures["throughput"].keys() == {"t-serve", "t-back"}
    assert abs(measures["throughput"]["t-serve"] - 0.75) < 1e-9
    assert result["renamed"] == RENAMED
    # Expressions use the engine's names, as `renamed` says.
    assert abs(measures["probabilities"]["waiting"] - 0.75) < 1e-9


BODY = {"pnml": PNML, "measures": {"probabilities": {"waiting": "#p_Request > 0"}}}


def test_the_service_keys_results_by_pnml_ids(client: Any) -> None:
    r = client.post("/srn/solve", json=BODY)
    assert r.status_code == 200, r.text
    _check(r.json())


def test_a_job_keys_results_by_pnml_ids(make_client: Any, tmp_path: Path) -> None:
    c = make_client(database_url=f"sqlite:///{tmp_path / 'jobs.db'}")
    r = c.post("/srn/jobs", json=BODY)
    assert r.status_code == 202, r.text
    deadline = time.monotonic() + 120
    while (body := c.get(r.headers["location"]).json())["status"] not in ("succeeded", "failed"):
        assert time.monotonic() < deadline
        time.sleep(0.05)
    assert body["status"] == "succeeded", body
    _check(body["result"])


def test_the_command_line_keys_results_by_pnml_ids(tmp_path: Path) -> None:
    path = tmp_path / "net.pnml"
    path.write_text(PNML)
    r = CliRunner().invoke(main, ["solve", str(path), "--json"])
    assert r.exit_code == 0, r.output
    result = json.loads(r.stdout)
    assert result["steady_state"]["measures"]["mean_tokens"].keys() == {"p.Request", "p.Done"}
    assert result["renamed"] == RENAMED
