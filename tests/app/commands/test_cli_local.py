"""The child process of a local computation (:func:`app.commands.local.run_local`):
checks made meanwhile in the parent, refusals made in the child, and the spinner that
waits for a reason to appear."""

from __future__ import annotations

import multiprocessing
import time
from typing import Any

import pytest

from app.commands import local
from app.commands.common import EXIT_MODEL, EXIT_USAGE, CliError


def forever(payload: Any, report: local.Reporter) -> None:
    time.sleep(600)


def test_a_check_made_meanwhile_wins_and_the_child_is_stopped() -> None:
    def refuse() -> None:
        raise CliError("--delay: too long", EXIT_USAGE)

    started = time.monotonic()
    with pytest.raises(CliError) as caught:
        local.run_local(forever, None, timeout=300, label="working", meanwhile=refuse)
    assert caught.value.message == "--delay: too long" and caught.value.status == EXIT_USAGE
    assert time.monotonic() - started < 60
    assert multiprocessing.active_children() == []


def test_a_refusal_in_the_child_is_the_same_one_line_error() -> None:
    def refuse(payload: Any, report: local.Reporter) -> None:
        raise CliError(f"--max-states: {payload} states", EXIT_MODEL)

    with pytest.raises(CliError) as caught:
        local.run_local(refuse, 7, timeout=60, label="working")
    assert (caught.value.message, caught.value.status) == ("--max-states: 7 states", EXIT_MODEL)


def test_a_quick_answer_starts_no_spinner(monkeypatch: pytest.MonkeyPatch) -> None:
    shown: list[str] = []
    monkeypatch.setattr(local, "progress", lambda label: shown.append(label))
    assert local.run_local(lambda p, r: p + 1, 41, timeout=60, label="working") == 42
    assert shown == []


def test_a_progress_report_starts_the_spinner_at_once(monkeypatch: pytest.MonkeyPatch) -> None:
    """A job that reports progress shows it from its first report, however quick."""
    texts: list[str] = []

    class Recorder:
        def __init__(self, label: str) -> None:
            texts.append(label)

        def __enter__(self) -> Any:
            return texts.append

        def __exit__(self, *exc: object) -> None:
            return None

    def job(payload: Any, report: local.Reporter) -> str:
        report({"stage": "solving", "states": 12})
        return "done"

    monkeypatch.setattr(local, "progress", Recorder)
    assert local.run_local(job, None, timeout=60, label="net.json") == "done"
    assert texts[0] == "net.json: solving, 12 states"
