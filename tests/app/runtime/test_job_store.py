"""JobStore on its own: the job database that the /srn/jobs routes and runner share."""

from __future__ import annotations

import threading
from collections.abc import Iterator

import pytest

from app.runtime.job_store import JobStore, QueueFull


def test_in_memory_store_takes_the_request_and_runner_threads_at_once() -> None:
    # Request threads create and read jobs while the runner claims them and beats its
    # heart.  The CI fuzz run once got 503 "OperationalError" from POST /srn/jobs here:
    # the in-memory database's one connection was lent to both threads at once.
    store = JobStore("sqlite://")
    errors: list[BaseException] = []
    created: list[str] = []

    def requests() -> None:
        try:
            for i in range(150):
                job = store.create({"i": i}, max_active=10**6)
                created.append(job.id)
                assert store.get(job.id) is not None
        except BaseException as exc:  # reported by the main thread
            errors.append(exc)

    def runner() -> None:
        try:
            for _ in range(300):
                job = store.claim("runner")
                if job is not None:
                    store.heartbeat(job.id, {"stage": "solving"})
                    store.finish(job.id, "succeeded", result={"ok": True})
        except BaseException as exc:  # reported by the main thread
            errors.append(exc)

    threads = [threading.Thread(target=f) for f in (requests, requests, runner, runner)]
    try:
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert errors == []
        assert len(created) == 300
        statuses = {store.get(job_id).status for job_id in created}  # type: ignore[union-attr]
        assert statuses <= {"queued", "succeeded"}
    finally:
        store.close()


@pytest.fixture
def file_store(store_url: str) -> Iterator[JobStore]:
    """A fresh job database on each backend (the root conftest's ``store_url``)."""
    store = JobStore(store_url)
    yield store
    store.close()


def test_the_queue_bound_holds_under_concurrent_submissions(file_store: JobStore) -> None:
    # Count-then-insert in one transaction: on a file database the count used to run
    # outside the transaction, and 16 threads against a bound of 5 queued up to 16.
    accepted: list[str] = []
    refused: list[int] = []
    start = threading.Barrier(16)

    def submit() -> None:
        start.wait()
        try:
            accepted.append(file_store.create({}, max_active=5).id)
        except QueueFull as full:
            refused.append(full.active)

    threads = [threading.Thread(target=submit) for _ in range(16)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert (len(accepted), len(refused)) == (5, 11)
    assert set(refused) == {5}
    assert file_store.count_queued() == 5


def test_a_released_job_is_queued_again_or_cancelled(file_store: JobStore) -> None:
    first = file_store.create({"n": 1}, max_active=10)
    second = file_store.create({"n": 2}, max_active=10)
    assert file_store.claim("me").id == first.id  # type: ignore[union-attr]
    assert not file_store.release(first.id, "someone else")
    assert file_store.release(first.id, "me")
    again = file_store.get(first.id)
    assert again is not None
    assert (again.status, again.started_at, again.progress) == ("queued", None, {"stage": "queued"})
    # The oldest queued job is still first in line.
    assert file_store.claim("me").id == first.id  # type: ignore[union-attr]
    assert file_store.claim("me").id == second.id  # type: ignore[union-attr]
    file_store.cancel(second.id)
    assert file_store.release(second.id, "me")
    assert file_store.get(second.id).status == "cancelled"  # type: ignore[union-attr]
