"""The child process of a local computation (:func:`app.commands.local.run_local`):
checks made meanwhile in the parent, refusals made in the child, and the spinner that
waits for a reason to appear."""

from __future__ import annotations

import multiprocessing
import threading
import time
from typing import Any

import pytest

from app.commands import local
from app.commands.common import EXIT_MODEL, EXIT_USAGE, CliError

# The jobs are module-level functions: a process with other threads (as a test worker
# often is) spawns the child, which unpickles the job by name.


def forever(payload: Any, report: local.Reporter) -> None:
    time.sleep(600)


def refuse_in_the_child(payload: Any, report: local.Reporter) -> None:
    raise CliError(f"--max-states: {payload} states", EXIT_MODEL)


def add_one(payload: int, report: local.Reporter) -> int:
    return payload + 1


def report_then_answer(payload: Any, report: local.Reporter) -> str:
    report({"stage": "solving", "states": 12})
    return "done"


#: A lock another thread of the parent holds while the child runs.
HELD = threading.Lock()


def take_the_held_lock(payload: Any, report: local.Reporter) -> str:
    with HELD:
        return "taken"


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
    with pytest.raises(CliError) as caught:
        local.run_local(refuse_in_the_child, 7, timeout=60, label="working")
    assert (caught.value.message, caught.value.status) == ("--max-states: 7 states", EXIT_MODEL)


def test_a_quick_answer_starts_no_spinner(monkeypatch: pytest.MonkeyPatch) -> None:
    shown: list[str] = []
    monkeypatch.setattr(local, "progress", lambda label: shown.append(label))
    assert local.run_local(add_one, 41, timeout=60, label="working") == 42
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

    monkeypatch.setattr(local, "progress", Recorder)
    assert local.run_local(report_then_answer, None, timeout=60, label="net.json") == "done"
    assert texts[0] == "net.json: solving, 12 states"


def test_a_lock_held_by_another_thread_does_not_reach_the_child() -> None:
    """A forked child would inherit HELD locked, with no thread to release it, and wait
    until the limit (the CI hang in ``sqlite3.connect``); with another thread alive the
    child is spawned and takes a fresh lock."""
    taken = threading.Event()
    release = threading.Event()

    def hold() -> None:
        with HELD:
            taken.set()
            release.wait(120)

    holder = threading.Thread(target=hold, daemon=True)
    holder.start()
    try:
        assert taken.wait(60)
        assert local.start_method() == "spawn"
        assert local.run_local(take_the_held_lock, None, timeout=60, label="working") == "taken"
    finally:
        release.set()
        holder.join(60)
