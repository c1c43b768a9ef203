"""``blastrate --help`` and ``--version`` start at once: they import no command.

Before: ``blastrate --version`` took 1.6 s of CPU before it printed, because ``import
app.commands`` pulled in the planning, transport and host stacks.  The time itself is
measured by ``benchmarks/cli_start.py``; here the cause is pinned: what is imported.
"""

from __future__ import annotations

import json
import subprocess
import sys

import click
import pytest
from cli_support import blastrate

from app.commands import COMMANDS, main

HEAVY = ("numpy", "scipy", "srn", "host", "queues", "transport", "datamover", "planning")


@pytest.mark.parametrize("argv", [["--version"], ["--help"], []])
def test_help_and_version_import_no_model(argv: list[str]) -> None:
    script = (
        "import json, sys\n"
        "from app.commands import main\n"
        f"status = main({argv!r}, standalone_mode=False)\n"
        f"heavy = {HEAVY!r}\n"
        "loaded = sorted(m for m in sys.modules if m.split('.')[0] in heavy)\n"
        "sys.stderr.write(json.dumps(loaded))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=120
    )
    loaded = json.loads(done.stderr.strip().splitlines()[-1])
    assert loaded == [], loaded


def test_every_command_is_listed_with_its_own_short_help() -> None:
    ctx = click.Context(main)
    for name, (_, _, text) in COMMANDS.items():
        command = main.get_command(ctx, name)
        assert command is not None and command.get_short_help_str(1000) == text, name


def test_help_lists_every_command() -> None:
    out = subprocess.run([*blastrate(), "--help"], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0
    for name in COMMANDS:
        assert f"\n  {name} " in out.stdout, name
