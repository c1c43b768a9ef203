"""``POST /sweeps``: the effective bottleneck rate over the product of ranges of inputs."""

from __future__ import annotations

import asyncio
import threading
from typing import Any

import anyio.to_thread
from fastapi import APIRouter, Request
from pydantic import BaseModel
from starlette.responses import Response

from app.operations.capacity import (
    check_point_limits,
    parse_inputs,
    planning_problem,
    product_size,
    time_slice_points_work,
)
from app.runtime.colocation import on_process_cpus
from app.schemas.capacity import SweepRequest, SweepResult
from app.schemas.problems import FieldProblem, ProblemError
from app.schemas.units import QuantityError
from app.service.state import encode, service
from app.settings import Settings
from planning import PlanningError, run_sweep

from .common import problem_responses

router = APIRouter(tags=["planning"])

_LIMITS = {
    "max_points": "sweep_max_points",
    "timeout_s": "sweep_timeout_s",
}
_PREFIX = "body.inputs."


def _unavailable(detail: str) -> ProblemError:
    return ProblemError(
        "not-ready",
        detail,
        [FieldProblem("sweep_cluster", detail)],
        status=503,
        title="The sweep's workers are unavailable",
        headers={"Retry-After": "30"},
    )


def _slots(request: Request) -> threading.BoundedSemaphore:
    """The app's sweep slots (``max_concurrent_sweeps``), made on first use."""
    state = service(request)
    slots = state.extras.get("sweep_slots")
    if slots is None:
        slots = state.extras.setdefault(
            "sweep_slots", threading.BoundedSemaphore(state.settings.max_concurrent_sweeps)
        )
    return slots


def _busy(settings: Settings) -> ProblemError:
    return ProblemError(
        "too-many-requests",
        f"{settings.max_concurrent_sweeps} sweeps are running (max_concurrent_sweeps); retry later",
        [FieldProblem("max_concurrent_sweeps", "reached")],
        headers={"Retry-After": "5"},
    )


async def _until_disconnected(request: Request, cancel: threading.Event) -> None:
    # The body has been read, so the next ASGI message is the client's disconnect.
    while True:
        message = await request.receive()
        if message["type"] == "http.disconnect":
            cancel.set()
            return


def _inline(settings: Settings, base: dict[str, Any], axes: dict[str, list[Any]]) -> bool:
    """Whether a sweep runs in the service's threads: small in points and, for the
    time-slice model, in work (seconds of it would hold a thread the routes share)."""
    return (
        product_size(axes) <= settings.sweep_inline_points
        and time_slice_points_work(base, axes) <= settings.planning_max_time_slice_work
    )


def _run(
    settings: Settings,
    base: dict[str, Any],
    axes: dict[str, list[Any]],
    cancel: threading.Event | None = None,
) -> Any:
    """Run the sweep where the settings say: inline, on the Dask cluster or a pool."""
    options: dict[str, Any] = {
        "max_points": settings.sweep_max_points,
        "timeout_s": settings.sweep_timeout_s,
        "cancel": cancel,
    }
    if _inline(settings, base, axes):
        return run_sweep(base, axes, inline=True, **options)
    if settings.sweep_cluster:
        return run_sweep(
            base,
            axes,
            cluster=settings.sweep_cluster,
            connect_timeout_s=settings.sweep_connect_timeout_s,
            **options,
        )
    return run_sweep(base, axes, workers=settings.sweep_workers, **options)


@router.post(
    "/sweeps",
    operation_id="run_sweep",
    summary="The effective bottleneck rate over ranges of inputs",
    response_model=SweepResult,
    responses={
        **problem_responses(400, 415, 422, 429, 503),
        200: {
            "description": "The records (JSON), or one CSV row per point with `format=csv`.",
            "content": {"text/csv": {"schema": {"type": "string"}}},
        },
    },
)
async def post_sweep(body: SweepRequest, request: Request) -> Response:
    """Evaluate the product of the inputs' values, each input a value, a list (`1,2,4`) or
    a range (`0..20`, `100MB..1GB:100MB`), and return one record per point: its inputs,
    named and valued as `GET /bottleneck-rate` takes them (SI units), beside
    `effective_bottleneck_rate_bps`, `transfer_time_s`, `loss_probability` and
    `interrupt_service_rate_per_s`.  A point without an answer carries `error`.

    Up to `sweep_inline_points` points run in the service's threads; larger sweeps on a
    local process pool (`sweep_workers`) or the Dask cluster at `sweep_cluster`.  At most
    `sweep_max_points` points and `sweep_timeout_s` seconds."""
    state = service(request)
    settings = state.settings
    specs = BaseModel.model_dump(body.inputs, exclude_none=True)
    try:
        base, axes = parse_inputs(specs, max_points=settings.sweep_max_points)
        n = product_size(axes)
        if n > settings.sweep_max_points:
            sizes = " x ".join(f"{len(v)} {k}" for k, v in axes.items())
            raise PlanningError(
                "points",
                f"{sizes} = {n} points, more than max_points={settings.sweep_max_points}",
                limit="max_points",
                maximum=settings.sweep_max_points,
                reached=n,
            )
        check_point_limits(
            base,
            axes,
            max_buffer_packets=settings.planning_max_buffer_packets,
            max_states=settings.max_states,
        )
        pooled = not _inline(settings, base, axes)
        slots = _slots(request)
        if pooled and not slots.acquire(blocking=False):
            raise _busy(settings)
        cancel = threading.Event()
        # A client that leaves cancels its sweep: nobody would read the answer.
        watcher = asyncio.ensure_future(_until_disconnected(request, cancel))
        try:
            # The pool's processes inherit the starting thread's CPUs: every CPU of the
            # process, not the event loop's one (app.runtime.colocation).
            result = await anyio.to_thread.run_sync(
                on_process_cpus, state.loop_cpu, lambda: _run(settings, base, axes, cancel)
            )
        finally:
            watcher.cancel()
            if pooled:
                slots.release()
    except (PlanningError, QuantityError) as exc:
        if isinstance(exc, PlanningError) and exc.field == "cluster":
            raise _unavailable(str(exc)) from None
        raise planning_problem(exc, _PREFIX, _LIMITS) from None
    except RuntimeError as exc:  # a worker process died: the server's fault, not the client's
        raise _unavailable(f"the sweep's workers failed: {exc}") from None
    if body.format == "csv":
        return Response(result.to_csv(), media_type="text/csv")
    return Response(encode(result.to_dict()), media_type="application/json")
