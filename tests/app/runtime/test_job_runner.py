"""JobRunner on its own: how it stops when its database is slow to answer."""

from __future__ import annotations

import os
import sqlite3
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from app.runtime.job_runner import JobRunner
from app.runtime.job_store import JobStore


def eventually(condition: Callable[[], bool], timeout_s: float = 20.0) -> bool:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(0.05)
    return condition()


def test_close_during_a_database_wait_starts_nothing_and_requeues_the_claim(
    tmp_path: Path,
) -> None:
    # Another process (a second service, the CLI) holds SQLite's write lock while this
    # runner's dispatcher claims a job, so the claim waits.  close() used to give up on
    # the dispatcher after its wait, close the wake pipe and let the store be disposed
    # while the dispatcher, once the lock came free, claimed the job and started its
    # process after shutdown; the job then stayed "running" until a stale-job sweep.
    path = tmp_path / "jobs.sqlite3"
    store = JobStore(f"sqlite:///{path}")
    runner = JobRunner(store, {}, workers=1, poll_s=60.0)  # wakes only when notified
    runner.start()
    other = sqlite3.connect(path, isolation_level=None)
    try:
        other.execute("BEGIN IMMEDIATE")
        # Queued inside the other writer's transaction: the dispatcher cannot see the
        # job, let alone claim it, before that transaction ends.
        other.execute(
            "INSERT INTO srn_jobs (id, status, created_at, cancel_requested, request, "
            "progress) VALUES (?, 'queued', ?, 0, '{\"net\": {}}', '{}')",
            ("a" * 32, time.time()),
        )
        runner.notify()  # the dispatcher claims, and waits for the lock
        time.sleep(1.0)
        assert runner.close(timeout_s=1.0) is False  # still waiting: the caller keeps the store
        assert not runner.stopped
        runner.notify()  # harmless: the wake pipe is still open
    finally:
        other.execute("COMMIT")
        other.close()
    assert eventually(lambda: runner.stopped), "the dispatcher did not stop by itself"
    assert runner.pids() == {}
    record = store.get("a" * 32)
    assert record is not None and record.status == "queued"  # back for the next service
    runner.notify()  # after the pipe closed: a no-op, not a write to a reused descriptor
    store.close()


def test_close_of_an_idle_runner_stops_it_at_once(tmp_path: Path) -> None:
    store = JobStore(f"sqlite:///{tmp_path / 'jobs.sqlite3'}")
    runner = JobRunner(store, {}, workers=1, poll_s=60.0)
    runner.start()
    started = time.monotonic()
    assert runner.close(timeout_s=10.0) is True
    assert runner.stopped and time.monotonic() - started < 5.0
    store.close()


def test_a_second_close_leaves_other_files_alone(tmp_path: Path) -> None:
    store = JobStore(f"sqlite:///{tmp_path / 'jobs.sqlite3'}")
    runner = JobRunner(store, {}, workers=1, poll_s=60.0)
    runner.start()
    assert runner.close() is True
    # The wake pipe's descriptor numbers are free now, and the next files opened get them.
    others = [os.pipe() for _ in range(4)]
    try:
        assert runner.close() is True
        runner.notify()
        for read_end, write_end in others:
            os.write(write_end, b"x")  # EBADF here if close() or notify() touched them
            assert os.read(read_end, 1) == b"x"
        with pytest.raises(RuntimeError, match="cannot start again"):
            runner.start()
    finally:
        for pair in others:
            for fd in pair:
                os.close(fd)
        store.close()
