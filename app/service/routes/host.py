"""``GET /host``: what the live probe found on the host that runs the service."""

from __future__ import annotations

from datetime import UTC, datetime

from fastapi import APIRouter, Depends, Query, Request
from fastapi.responses import JSONResponse

from app.schemas.bodies import HostProbeResult
from app.service.live import latest_probe
from app.service.state import service

from .access import require_token
from .common import problem_responses

router = APIRouter(dependencies=[Depends(require_token)])


@router.get(
    "/host",
    operation_id="probe_host",
    summary="The live workload and NIC of this host",
    tags=["host"],
    response_model=HostProbeResult,
    responses=problem_responses(401, 404, 503),
)
async def get_host(
    request: Request,
    tasks: bool = Query(
        default=False, description="Include the CPU- and I/O-bound tasks with their evidence."
    ),
) -> JSONResponse:
    """The latest completed window of the live probe: C and I from the tasks' scheduler
    statistics, m from the CPU affinity and cgroup quota, d from `/sys/block`, and the
    NIC's line rate, MTU, payload, ring size K and coalescing N.  Every value carries its
    `source`; a value that could not be read carries `unread` (the reason) and the named
    default used instead.  Answered from memory: the probe runs in the background."""
    probe = latest_probe(service(request), field="query.tasks" if tasks else "host")
    body = probe.to_dict(tasks=tasks)
    body["age_s"] = round(max(0.0, (datetime.now(UTC) - probe.taken_at).total_seconds()), 3)
    return JSONResponse(body, headers={"Cache-Control": "no-store"})
