"""Long SRN solves over HTTP: /srn/jobs, persisted in SQLite through SQLAlchemy."""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from app import Settings, create_app
from conftest import TEST_SETTINGS

QUEUE = {
    "places": {"q": 0},
    "transitions": [
        {"name": "arrive", "rate": 1.0, "outputs": {"q": 1}, "inhibitors": {"q": 5}},
        {"name": "serve", "rate": 2.0, "inputs": {"q": 1}},
    ],
}


def three_queues(k: int) -> dict[str, Any]:
    """Three independent M/M/1/k queues: (k+1)^3 states; k = 60 gives 226,981 states, whose
    iterative steady-state solve takes seconds (long enough to cancel or time out)."""
    transitions = []
    for i in range(3):
        transitions.append(
            {"name": f"a{i}", "rate": 1.0, "outputs": {f"q{i}": 1}, "inhibitors": {f"q{i}": k}}
        )
        transitions.append({"name": f"s{i}", "rate": 1.5, "inputs": {f"q{i}": 1}})
    return {"places": {f"q{i}": 0 for i in range(3)}, "transitions": transitions}


@pytest.fixture
def job_app(store_url: str) -> Iterator[Callable[..., TestClient]]:
    """Clients on apps sharing one fresh job database (closed after), on each backend
    (the root conftest's ``store_url``)."""
    clients: list[TestClient] = []
    url = store_url

    def make(**overrides: Any) -> TestClient:
        settings = {**TEST_SETTINGS, "database_url": url, "max_states": 300_000, **overrides}
        client = TestClient(create_app(Settings(**settings)))
        client.__enter__()
        clients.append(client)
        return client

    yield make
    for client in clients:
        client.__exit__(None, None, None)


def wait(client: TestClient, location: str, until: Callable[[dict[str, Any]], bool]) -> Any:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        body = client.get(location).json()
        if until(body):
            return body
        time.sleep(0.05)
    raise AssertionError(f"job never reached the state: {body}")


def done(body: dict[str, Any]) -> bool:
    return body["status"] not in ("queued", "running")


def runner_pids(client: TestClient) -> dict[str, int]:
    jobs = client.app.state.service.extras["jobs"]  # type: ignore[attr-defined]
    return dict(jobs.runner().pids())


def pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # A zombie still answers kill(0); its state in /proc says it is dead.
    try:
        return Path(f"/proc/{pid}/stat").read_text().split()[2] != "Z"
    except OSError:
        return False


def test_job_gives_the_solve_result_with_progress(job_app: Any) -> None:
    client = job_app()
    request = {"net": QUEUE, "measures": {"probabilities": {"full": "#q == 5"}}}
    r = client.post("/srn/jobs", json=request)
    assert r.status_code == 202, r.text
    location = r.headers["location"]
    assert location == f"/srn/jobs/{r.json()['id']}"
    assert r.json()["status"] == "queued"
    body = wait(client, location, done)
    assert body["status"] == "succeeded", body
    direct = client.post("/srn/solve", json=request).json()
    result = body["result"]
    assert result.pop("solved_in") == "worker-pool"
    direct.pop("solved_in")
    assert result == direct
    progress = body["progress"]
    assert progress["states"] == 6 and progress["iterations"] == 0
    assert progress["residual"] == direct["steady_state"]["residual"]
    assert body["finished_at"] >= body["started_at"] >= body["created_at"]


def test_restart_keeps_finished_and_queued_jobs(job_app: Any) -> None:
    """A finished job survives a restart; a job that was running when the service stopped
    is marked interrupted (with a problem saying so); a job still queued runs after it."""
    first = job_app(job_workers=1)
    quick = first.post("/srn/jobs", json={"net": QUEUE}).headers["location"]
    wait(first, quick, done)
    slow = first.post("/srn/jobs", json={"net": three_queues(60)}).headers["location"]
    wait(first, slow, lambda b: b["status"] == "running")
    waiting = first.post("/srn/jobs", json={"net": QUEUE}).headers["location"]
    assert first.get(waiting).json()["status"] == "queued"
    pids = runner_pids(first)
    first.__exit__(None, None, None)  # the service stops
    assert not any(pid_alive(p) for p in pids.values())

    second = job_app(job_workers=1)
    assert second.get(quick).json()["status"] == "succeeded"
    assert second.get(quick).json()["result"]["n_states"] == 6
    interrupted = second.get(slow).json()
    assert interrupted["status"] == "interrupted"
    assert "stopped while the job ran" in interrupted["problem"]["detail"]
    assert wait(second, waiting, done)["status"] == "succeeded"


def test_delete_kills_a_running_job(job_app: Any) -> None:
    client = job_app()
    location = client.post("/srn/jobs", json={"net": three_queues(60)}).headers["location"]
    # Past exploration (whose reports give the counts so far), the graph's counts.
    running = wait(client, location, lambda b: b["progress"].get("stage") == "solving")
    assert running["progress"]["states"] == 61**3
    (pid,) = runner_pids(client).values()
    assert pid_alive(pid)
    r = client.delete(location)
    assert r.status_code == 200, r.text
    assert r.json()["status"] == "cancelled" and r.json()["cancel_requested"]
    assert not pid_alive(pid)
    # A finished job is forgotten by a second DELETE.
    assert client.delete(location).status_code == 204
    assert client.get(location).status_code == 404


def test_delete_cancels_a_queued_job(job_app: Any) -> None:
    client = job_app(job_workers=1)
    slow = client.post("/srn/jobs", json={"net": three_queues(60)}).headers["location"]
    queued = client.post("/srn/jobs", json={"net": QUEUE}).headers["location"]
    r = client.delete(queued)
    assert r.status_code == 200 and r.json()["status"] == "cancelled"
    assert r.json()["started_at"] is None
    client.delete(slow)


def test_wall_time_limit_is_named(job_app: Any) -> None:
    client = job_app(job_timeout_s=1.0)
    location = client.post("/srn/jobs", json={"net": three_queues(60)}).headers["location"]
    body = wait(client, location, done)
    assert body["status"] == "failed"
    error = body["problem"]["errors"][0]
    # The iterative solver stops itself at the same budget; otherwise the process is killed.
    assert error["limit"] in ("job_timeout_s", "solve_seconds")


def test_queue_limit_is_named(job_app: Any, problem_of: Any) -> None:
    client = job_app(max_queued_jobs=1)
    location = client.post("/srn/jobs", json={"net": three_queues(60)}).headers["location"]
    body = problem_of(client.post("/srn/jobs", json={"net": QUEUE}), 429)
    assert body["errors"][0]["limit"] == "max_queued_jobs"
    assert body["errors"][0]["allowed"] == 1
    client.delete(location)


def test_result_size_limit_is_named(job_app: Any) -> None:
    client = job_app(max_job_result_bytes=1024)
    big = {"net": QUEUE | {"places": {"q": 0}}, "include_distribution": True}
    big["net"]["transitions"] = [
        {"name": "arrive", "rate": 1.0, "outputs": {"q": 1}, "inhibitors": {"q": 200}},
        {"name": "serve", "rate": 2.0, "inputs": {"q": 1}},
    ]
    location = client.post("/srn/jobs", json=big).headers["location"]
    body = wait(client, location, done)
    assert body["status"] == "failed"
    assert body["problem"]["errors"][0]["limit"] == "max_job_result_bytes"


def test_model_errors_fail_the_job_with_the_field(job_app: Any, problem_of: Any) -> None:
    client = job_app()
    # Found when the net is compiled: refused at submission.
    bad = {"net": {"places": {"q": 0}, "transitions": [{"name": "t", "rate": "#nowhere"}]}}
    refused = problem_of(client.post("/srn/jobs", json=bad), 422)
    assert refused["errors"][0]["field"].startswith("body.net.transitions")
    # Found only while exploring (the rate turns negative at q = 2): the job fails.
    late = {
        "net": {
            "places": {"q": 0},
            "transitions": [
                {"name": "arrive", "rate": 1.0, "outputs": {"q": 1}, "inhibitors": {"q": 3}},
                {"name": "serve", "rate": "1 - #q", "inputs": {"q": 1}},
            ],
        }
    }
    location = client.post("/srn/jobs", json=late).headers["location"]
    body = wait(client, location, done)
    assert body["status"] == "failed"
    assert body["problem"]["errors"][0]["field"].startswith("body.net.transitions")
    assert body["problem"]["instance"] == location


def test_bad_pnml_is_refused_at_submission(job_app: Any, problem_of: Any) -> None:
    client = job_app()
    body = problem_of(client.post("/srn/jobs", json={"pnml": "<pnml><net"}), 422)
    assert body["errors"][0]["field"] == "body.pnml"


def test_unknown_jobs_are_404(job_app: Any, problem_of: Any) -> None:
    client = job_app()
    problem_of(client.get("/srn/jobs/" + "0" * 32), 404)
    problem_of(client.get("/srn/jobs/not-an-id"), 404)
    problem_of(client.delete("/srn/jobs/" + "f" * 32), 404)


def test_unreachable_database_is_503(tmp_path: Path, problem_of: Any) -> None:
    settings = {**TEST_SETTINGS, "database_url": f"sqlite:///{tmp_path}/missing/dir/jobs.db"}
    with TestClient(create_app(Settings(**settings))) as client:
        body = problem_of(client.post("/srn/jobs", json={"net": QUEUE}), 503)
        assert body["type"] == "/problems/storage-unavailable"
        # The problem type is shared with the profile database; the detail says which.
        assert body["detail"].startswith("the job database is unavailable")
        assert client.get("/healthz").status_code == 200


def test_finished_jobs_expire_after_the_retention_time(job_app: Any) -> None:
    client = job_app(job_retention_s=0.5)
    location = client.post("/srn/jobs", json={"net": QUEUE}).headers["location"]
    wait(client, location, done)
    time.sleep(0.6)
    store = client.app.state.service.extras["jobs"].runner().store  # type: ignore[attr-defined]
    assert store.purge(0.5) == 1  # what the dispatcher does once a minute
    assert client.get(location).status_code == 404


def test_jobs_of_a_crashed_owner_are_marked_interrupted(tmp_path: Path) -> None:
    """A process that dies without closing (kill -9) leaves its job 'running'; once its
    heartbeat is stale_after_s old, a live runner marks it interrupted."""
    from app.runtime.job_runner import JobRunner
    from app.runtime.job_store import JobStore

    store = JobStore(f"sqlite:///{tmp_path / 'jobs.sqlite3'}")
    job = store.create({"net": QUEUE}, max_active=10)
    assert store.claim("another-host:1234:dead") is not None  # its owner then dies
    assert store.get(job.id).status == "running"  # type: ignore[union-attr]
    runner = JobRunner(store, {}, stale_after_s=0.6, poll_s=0.05)
    runner.start()
    try:
        deadline = time.monotonic() + 10
        while store.get(job.id).status == "running":  # type: ignore[union-attr]
            assert time.monotonic() < deadline
            time.sleep(0.05)
    finally:
        runner.close()
    record = store.get(job.id)
    assert record is not None and record.status == "interrupted"
    assert "restart or crash" in record.problem["detail"]  # type: ignore[index]
    store.close()


def test_a_running_solve_reports_its_iterations(job_app: Any) -> None:
    """While the steady-state solver runs, the job shows its route, iterations and the
    current residual (reported by the engine every 10 iterations), not only the states."""
    client = job_app()
    location = client.post("/srn/jobs", json={"net": three_queues(60)}).headers["location"]
    solving = wait(
        client,
        location,
        lambda b: b["status"] == "running" and (b["progress"].get("iterations") or 0) > 0,
    )
    progress = solving["progress"]
    assert progress["stage"] == "solving"
    assert progress["states"] == 61**3
    assert isinstance(progress["method"], str) and progress["method"]
    assert progress["iterations"] % 10 == 0
    assert progress["residual"] is None or progress["residual"] > 0
    assert client.delete(location).status_code == 200


@pytest.mark.parametrize(
    "body",
    [
        # A rate naming a place the net does not have.
        {"net": {**QUEUE, "transitions": [{**QUEUE["transitions"][0], "rate": "#b"}]}},
        # A call outside the expression whitelist.
        {"net": {**QUEUE, "transitions": [{**QUEUE["transitions"][0], "rate": "__import__(1)"}]}},
        # A transient analysis without times.
        {"net": QUEUE, "analysis": "transient"},
    ],
    ids=["unknown-place", "not-whitelisted", "transient-without-times"],
)
def test_a_body_solve_would_refuse_is_refused_at_once(job_app: Any, body: Any) -> None:
    """What /srn/solve refuses before solving is a 422 at submission, with the same
    problem, not a job that is queued and fails later."""
    client = job_app()
    r = client.post("/srn/jobs", json=body)
    assert r.status_code == 422, r.text
    direct = client.post("/srn/solve", json=body)
    assert direct.status_code == 422
    assert r.json()["type"] == direct.json()["type"]
    assert r.json()["errors"] == direct.json()["errors"]


def test_exploration_reports_its_counts_as_it_goes(monkeypatch: Any) -> None:
    # What a job shows while it explores: the engine's reports (made as often as possible
    # here) as stage "exploring" with the states and edges found so far, never going back,
    # the last with the whole graph's counts (the reference: the result's own).
    from app.operations.srn_solve import SolveBudget, solve_srn
    from srn.progress import ExplorationReporter

    monkeypatch.setattr(ExplorationReporter, "EVERY", 0.0)
    budget = SolveBudget(
        max_states=1_000_000,
        max_edges=10_000_000,
        max_transitions=100,
        max_places=100,
        max_expression_length=1_000,
        max_time_points=10,
        max_distribution_states=0,
        max_vanishing=1_000_000,
    )
    reports: list[dict[str, Any]] = []
    result = solve_srn({"net": three_queues(24)}, budget, progress=reports.append)
    exploring = [r for r in reports if r["stage"] == "exploring" and "states" in r]
    assert len(exploring) >= 2
    states = [r["states"] for r in exploring]
    assert states == sorted(states)
    assert (exploring[-1]["states"], exploring[-1]["edges"]) == (
        result["n_states"],
        result["n_edges"],
    )
    assert result["n_states"] == 25**3
