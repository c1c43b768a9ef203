"""JobStore on its own: the job database that the /srn/jobs routes and runner share."""

from __future__ import annotations

import threading

from app.job_store import JobStore


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
