"""Helpers for the command-line tests: an in-process runner, the installed program, nets."""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path
from typing import Any

from click.testing import CliRunner, Result

from app.commands import main

#: A workload and transfer every rate/curve test uses (the README's example).
RATE = ["-C", "2", "-I", "1", "--file-size", "500MB", "--delay", "100ms"]


def invoke(*argv: str, stdin: str | None = None) -> Result:
    """Run ``blastrate argv...`` in this process; stdout and stderr kept apart."""
    return CliRunner().invoke(main, list(argv), input=stdin, catch_exceptions=False)


def blastrate() -> list[str]:
    """The command that runs the installed ``blastrate`` in a child process."""
    exe = shutil.which("blastrate", path=str(Path(sys.executable).parent))
    return [exe] if exe else [sys.executable, "-m", "app.commands"]


def queue_net() -> dict[str, Any]:
    """M/M/1/3 with arrival rate 1/s and service rate 2/s, as an SRN."""
    return {
        "places": {"q": 0},
        "transitions": [
            {"name": "arrive", "rate": 1.0, "outputs": {"q": 1}, "inhibitors": {"q": 3}},
            {"name": "serve", "rate": 2.0, "inputs": {"q": 1}},
        ],
    }


def cycle_net(tokens: int) -> dict[str, Any]:
    """Three places in a cycle holding ``tokens``: (tokens+1)(tokens+2)/2 states."""
    return {
        "places": {"a": tokens, "b": 0, "c": 0},
        "transitions": [
            {"name": "ab", "rate": 1.0, "inputs": {"a": 1}, "outputs": {"b": 1}},
            {"name": "bc", "rate": 2.0, "inputs": {"b": 1}, "outputs": {"c": 1}},
            {"name": "ca", "rate": 3.0, "inputs": {"c": 1}, "outputs": {"a": 1}},
        ],
    }


def write_json(path: Path, document: Any) -> Path:
    path.write_text(json.dumps(document))
    return path
