"""Liveness, readiness and metrics."""

from __future__ import annotations

import anyio.to_thread
from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse
from prometheus_client.exposition import choose_encoder
from starlette.responses import Response

from app.schemas.bodies import Health, Readiness
from app.schemas.problems import ProblemError
from app.service.state import service
from app.version import __version__

from .common import problem_responses

router = APIRouter(tags=["health"])

_HEALTH = b'{"status":"ok","version":"' + __version__.encode() + b'"}'


@router.get(
    "/healthz",
    operation_id="get_health",
    summary="Liveness: the process answers",
    response_model=Health,
    responses=problem_responses(),
)
async def get_health() -> Response:
    """Always 200 while the process serves requests."""
    return Response(_HEALTH, media_type="application/json")


@router.get(
    "/readyz",
    operation_id="get_readiness",
    summary="Readiness: default nets compiled, solver pool started",
    response_model=Readiness,
    responses=problem_responses(503),
)
async def get_readiness(request: Request) -> Response:
    """200 once the lifespan has warmed the default answers (and compiled the kernels, when
    they were not cached); 503 before."""
    state = service(request)
    if not state.ready:
        detail = "the default answers are still warming up"
        if state.warm_up_error:
            detail = f"start-up failed: {state.warm_up_error}"
        if state.shutting_down:
            detail = "the server is shutting down"
        raise ProblemError("not-ready", detail, headers={"Retry-After": "1"})
    return JSONResponse(
        {
            "status": "ready",
            "compiled_nets": state.compiled_nets,
            "solve_workers": state.pool.size,
        }
    )


@router.get(
    "/metrics",
    operation_id="get_metrics",
    summary="Prometheus metrics",
    response_class=Response,
    responses={
        200: {
            "description": "Metrics in the Prometheus text format.",
            "content": {
                "text/plain": {"schema": {"type": "string"}},
                "application/openmetrics-text": {"schema": {"type": "string"}},
            },
        },
        **problem_responses(),
    },
)
async def get_metrics(request: Request) -> Response:
    """Request and solve-time histograms, cache and pool gauges, process metrics.

    Under ``uvicorn --workers N`` the figures are the sums over the server's workers,
    whichever worker answers (process metrics are then left out)."""
    state = service(request)
    state.metrics.cache_entries.set(len(state.cache))
    # The text format by default; OpenMetrics when the scraper asks for it.
    encoder, content_type = choose_encoder(request.headers.get("accept", ""))
    registry = state.metrics.exposition_registry()
    # Under several workers this reads every worker's file: off the event loop.
    body = await anyio.to_thread.run_sync(encoder, registry)
    return Response(body, headers={"Content-Type": content_type})
