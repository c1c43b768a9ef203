"""Long SRN solves: ``POST /srn/jobs``, ``GET`` and ``DELETE /srn/jobs/{id}``.

A job is the body of ``POST /srn/solve`` run in the background: the POST answers 202 at
once with ``Location: /srn/jobs/{id}``; the GET shows status and progress, then the same
result body as ``POST /srn/solve``; DELETE stops it (its process is killed) or, once it is
over, forgets it.  Jobs live in the job database, so a restart loses none.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import re
import threading
from datetime import UTC, datetime
from typing import Any

import anyio.to_thread
import sqlalchemy.exc
from fastapi import APIRouter, Depends, Request
from starlette.responses import Response

import srn
from app.operations.pnml_input import with_net
from app.operations.srn_solve import SolveBudget, check_srn_request, solve_budget
from app.runtime.job_runner import JobRunner
from app.runtime.job_store import ACTIVE, JobRecord, JobStore, QueueFull, default_database_url
from app.schemas.bodies import SrnJob, SrnSolveRequest
from app.schemas.problems import FieldProblem, ProblemError
from app.service.state import encode, service
from app.settings import Settings

from .access import require_token
from .common import problem_responses

__all__ = ["JobService", "router"]

router = APIRouter(tags=["planning"], dependencies=[Depends(require_token)])
log = logging.getLogger("blastrate.jobs")

_ID = re.compile(r"^[0-9a-f]{32}$")


class JobService:
    """The job store and runner of one app, opened on first use (or at start-up when a
    database is configured or already exists)."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self._runner: JobRunner | None = None
        self._lock = threading.Lock()

    def runner(self) -> JobRunner:
        """The started runner (blocking: opens the database on first call)."""
        with self._lock:
            if self._runner is None:
                s = self.settings
                store = JobStore(s.database_url or default_database_url())
                # The same limits as /srn/solve and the command line.
                budget = dataclasses.asdict(solve_budget(s, s.job_timeout_s))
                runner = JobRunner(
                    store,
                    budget,
                    workers=s.job_workers,
                    timeout_s=s.job_timeout_s,
                    max_result_bytes=s.max_job_result_bytes,
                    retention_s=s.job_retention_s,
                )
                runner.start()
                self._runner = runner
            return self._runner

    def start_if_configured(self) -> None:
        """Open the database now if one is configured, so queued jobs resume at start-up."""
        if self.settings.database_url:
            try:
                self.runner()
            except sqlalchemy.exc.SQLAlchemyError:
                # The service still starts; the job routes answer 503 until it is back.
                log.exception("the job database is unavailable")

    def close(self) -> None:
        """Stop the runner (running jobs are killed and marked interrupted)."""
        with self._lock:
            if self._runner is not None:
                if self._runner.close():
                    self._runner.store.close()
                # else its dispatcher still uses the store; it stops by itself.
                self._runner = None


def _jobs(request: Request) -> JobService:
    jobs: JobService = service(request).extras["jobs"]
    return jobs


def _time(t: float | None) -> str | None:
    return None if t is None else datetime.fromtimestamp(t, UTC).isoformat()


def _body(record: JobRecord) -> dict[str, Any]:
    progress = dict(record.progress)
    # While active, the stage is what the solve reported last; once over, the outcome.
    progress["stage"] = (
        progress.get("stage", record.status) if record.status in ACTIVE else record.status
    )
    return {
        "id": record.id,
        "status": record.status,
        "created_at": _time(record.created_at),
        "started_at": _time(record.started_at),
        "finished_at": _time(record.finished_at),
        "cancel_requested": record.cancel_requested,
        "progress": progress,
        "result": record.result,
        "problem": record.problem,
    }


def _json(body: Any, status: int = 200, headers: dict[str, str] | None = None) -> Response:
    return Response(
        encode(body), status_code=status, media_type="application/json", headers=headers
    )


async def _store_call(request: Request, call: Any, *args: Any) -> Any:
    """Run a blocking store call in a thread; a database failure is a 503."""
    try:
        return await anyio.to_thread.run_sync(call, *args)
    except sqlalchemy.exc.SQLAlchemyError as exc:
        raise ProblemError(
            "storage-unavailable",
            f"the job database is unavailable: {type(exc).__name__}",
            [FieldProblem("database_url", "database unavailable")],
            headers={"Retry-After": "5"},
        ) from exc


def _not_found(job_id: str) -> ProblemError:
    return ProblemError(
        "not-found", f"no job {job_id[:64]!r}", [FieldProblem("path.job_id", "unknown job")]
    )


@router.post(
    "/srn/jobs",
    operation_id="submit_srn_job",
    summary="Queue a long SRN solve",
    status_code=202,
    response_model=SrnJob,
    responses={
        202: {
            "description": "Queued; `Location` is the job's URL.",
            "headers": {"Location": {"schema": {"type": "string"}}},
        },
        **problem_responses(400, 401, 415, 422, 429, 503),
    },
)
async def post_srn_job(body: SrnSolveRequest, request: Request) -> Response:
    """Queue the body of `POST /srn/solve` as a background job and answer 202 at once.

    The job runs in its own worker process (at most `job_workers` per service process,
    `job_timeout_s` of wall time each); `GET /srn/jobs/{id}` follows it.  At most
    `max_queued_jobs` jobs may be queued or running (429 beyond)."""
    jobs = _jobs(request)
    settings = jobs.settings
    payload = body.model_dump(mode="json")
    limits = srn.PnmlLimits(
        max_bytes=settings.max_body_bytes, max_elements=settings.max_pnml_elements
    )
    # The net is read (PNML) and compiled now, so a bad body is a 422 rather than a
    # failed job.  The job keeps the body as sent: a PNML net is read again there, so
    # that its answer is keyed by the file's own ids.
    checked, _ = await anyio.to_thread.run_sync(with_net, payload, limits)
    runner: JobRunner = await _store_call(request, jobs.runner)
    await anyio.to_thread.run_sync(check_srn_request, dict(checked), SolveBudget(**runner.budget))
    try:
        record = await _store_call(request, runner.store.create, payload, settings.max_queued_jobs)
    except QueueFull as exc:
        raise ProblemError(
            "too-many-requests",
            f"{exc.active} jobs are queued or running; max_queued_jobs={settings.max_queued_jobs}",
            [
                FieldProblem(
                    "body",
                    "job queue full",
                    "max_queued_jobs",
                    settings.max_queued_jobs,
                    exc.active,
                )
            ],
            headers={"Retry-After": "10"},
        ) from None
    runner.notify()
    location = f"/srn/jobs/{record.id}"
    return _json(_body(record), 202, {"Location": location})


async def _record(request: Request, job_id: str) -> tuple[JobRunner, JobRecord]:
    if not _ID.match(job_id):
        raise _not_found(job_id)
    runner: JobRunner = await _store_call(request, _jobs(request).runner)
    record = await _store_call(request, runner.store.get, job_id)
    if record is None:
        raise _not_found(job_id)
    return runner, record


@router.get(
    "/srn/jobs/{job_id}",
    operation_id="get_srn_job",
    summary="Status, progress and result of a job",
    response_model=SrnJob,
    responses=problem_responses(401, 404, 503),
)
async def get_srn_job(job_id: str, request: Request) -> Response:
    """The job's status and progress (states explored, solver iterations and residual as
    they become known); once `succeeded`, `result` is the `POST /srn/solve` body, and once
    `failed` or `interrupted`, `problem` says why."""
    _, record = await _record(request, job_id)
    return _json(_body(record))


@router.delete(
    "/srn/jobs/{job_id}",
    operation_id="cancel_srn_job",
    summary="Cancel a job, or forget a finished one",
    response_model=SrnJob,
    responses={
        204: {"description": "The finished job was deleted."},
        **problem_responses(401, 404, 503),
    },
)
async def delete_srn_job(job_id: str, request: Request) -> Response:
    """A queued or running job is cancelled: its worker process is killed, and the answer
    (200) shows it `cancelled`.  A job that is over is deleted (204)."""
    runner, record = await _record(request, job_id)
    if record.status not in ACTIVE:
        await _store_call(request, runner.store.delete, job_id)
        return Response(status_code=204)
    record = await _store_call(request, runner.store.cancel, job_id)
    runner.notify()
    # The dispatcher (here or in another service process) kills the process within a
    # poll or a heartbeat; wait that long so the answer says what happened.
    for _ in range(50):
        if record is None or record.status not in ACTIVE:
            break
        await asyncio.sleep(0.1)
        record = await _store_call(request, runner.store.get, job_id)
    if record is None:
        return Response(status_code=204)
    return _json(_body(record))
