"""``POST /what-if``: which single upgrade of a host saves the most transfer time."""

from __future__ import annotations

from typing import Any

import anyio.to_thread
from fastapi import APIRouter, Request
from pydantic import BaseModel
from starlette.responses import Response

from app.operations.capacity import check_point_limits, parse_inputs, planning_problem
from app.schemas.capacity import WhatIfRequest, WhatIfResult
from app.schemas.problems import FieldProblem, ProblemError
from app.schemas.units import QuantityError
from app.service.state import encode, respond, service
from planning import PlanningError
from planning.whatif import what_if

from .common import problem_responses

router = APIRouter(tags=["planning"])


@router.post(
    "/what-if",
    operation_id="what_if",
    summary="Rank the single upgrades of a host by the transfer time they save",
    response_model=WhatIfResult,
    responses=problem_responses(400, 415, 422),
)
async def post_what_if(body: WhatIfRequest, request: Request) -> Response:
    """For each single change a person could make (one more core, a faster interrupt
    path mu_net x1.5 and x2, a larger ring K x2 and x4 up to `max_buffer_packets`, another
    coalescing N, one CPU-bound task fewer, a faster line), the effective bottleneck rate
    and the transfer time, ranked by the time saved.  Also the best (K, N) with the
    `ethtool` commands that set them, and the elasticities d ln(rate) / d ln(parameter)
    by central differences with a 5% step."""
    state = service(request)
    settings = state.settings
    if body.max_buffer_packets > settings.planning_max_buffer_packets:
        raise ProblemError(
            "limit-exceeded",
            f"max_buffer_packets={body.max_buffer_packets} is above "
            f"planning_max_buffer_packets={settings.planning_max_buffer_packets}",
            [
                FieldProblem(
                    "body.max_buffer_packets",
                    "the ring grid would cost too much",
                    "planning_max_buffer_packets",
                    settings.planning_max_buffer_packets,
                    body.max_buffer_packets,
                )
            ],
        )
    specs = BaseModel.model_dump(body.inputs, exclude_none=True)
    try:
        base, _ = parse_inputs(specs, max_points=1, single=True)
        check_point_limits(
            base,
            {},
            max_buffer_packets=settings.planning_max_buffer_packets,
            max_states=settings.max_states,
        )
    except (PlanningError, QuantityError) as exc:
        raise planning_problem(exc, "body.inputs.") from None
    payload: dict[str, Any] = {
        "point": base,
        "max_buffer_packets": body.max_buffer_packets,
        "interface": body.interface,
    }
    key, entry = state.cached("what-if", payload)
    hit = entry is not None
    if entry is None:
        try:
            result = await anyio.to_thread.run_sync(
                lambda: what_if(
                    base, max_buffer_packets=body.max_buffer_packets, interface=body.interface
                )
            )
        except PlanningError as exc:
            prefix = (
                "body." if exc.field in ("max_buffer_packets", "interface") else ("body.inputs.")
            )
            raise planning_problem(exc, prefix) from None
        entry = state.store(key, encode(result.to_dict()))
    return respond(request, entry, hit)
