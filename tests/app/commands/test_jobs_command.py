"""``blastrate jobs submit|status|cancel|wait`` through the real executable, against a
real server process (before: there was /srn/jobs but no command for it)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from cli_support import blastrate, cycle_net, write_json

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from conftest import ENDLESS, live_server

TOKEN = "jobs-cli-token-0123456789"


def _run(*argv: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*blastrate(), "jobs", *argv],
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, **(env or {})},
    )


def test_submit_status_wait_and_cancel(tmp_path: Path) -> None:
    env = {"BLASTRATE_API_TOKEN": TOKEN, "BLASTRATE_JOB_WORKERS": "1"}
    with live_server(env) as (base, _):
        token = {"BLASTRATE_API_TOKEN": TOKEN}
        net = write_json(tmp_path / "cycle.json", cycle_net(3))
        # Without the token the service refuses, and the command says so (exit 2).
        refused = _run("submit", str(net), "--server", base)
        assert refused.returncode == 2 and "BLASTRATE_API_TOKEN" in refused.stderr, refused.stderr
        done = _run("submit", str(net), "--server", base, env=token)
        assert done.returncode == 0, done.stderr
        job = done.stdout.strip()
        assert len(job) == 32
        waited = _run("wait", job, "--server", base, "--json", env=token)
        assert waited.returncode == 0, waited.stderr
        result = json.loads(waited.stdout)
        assert result["n_states"] == 10 and result["steady_state"]["residual"] < 1e-9
        status = _run("status", job, "--server", base, env=token)
        assert status.returncode == 0 and f"{job} succeeded" in status.stdout
        # A long one, cancelled: wait then reports it (exit 3).
        endless = write_json(tmp_path / "endless.json", ENDLESS)
        long_job = _run("submit", str(endless), "--server", base, env=token).stdout.strip()
        cancelled = _run("cancel", long_job, "--server", base, env=token)
        assert cancelled.returncode == 0, cancelled.stderr
        waited = _run("wait", long_job, "--server", base, "--timeout", "60", env=token)
        assert waited.returncode == 3 and "cancelled" in waited.stderr, waited.stderr
        bad = _run("status", "../etc", "--server", base, env=token)
        assert bad.returncode == 2 and "JOB" in bad.stderr
