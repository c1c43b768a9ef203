"""Capacity-planning endpoints: the NIC queue, the transfer-time curve, general SRNs."""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Callable
from typing import Any

from fastapi import APIRouter, Request
from starlette.responses import Response

from app.operations.nic import (
    nic_queue_cells,
    nic_queue_cost,
    solve_nic_queue,
    transfer_time_curve,
    transfer_time_work,
)
from app.operations.srn_solve import (
    SolveTooLarge,
    estimate_srn_solve,
    solve_budget,
    solve_srn,
)
from app.runtime.guard import WorkInterrupted, run_guarded
from app.schemas.bodies import (
    NicQueueRequest,
    NicQueueResult,
    SrnSolveRequest,
    SrnSolveResult,
    TransferTimeRequest,
    TransferTimeResult,
)
from app.schemas.problems import FieldProblem, ProblemError, only_sent_fields
from app.service.state import ServiceState, respond, service

from .common import problem_responses, sent_fields

router = APIRouter(tags=["planning"])

log = logging.getLogger("blastrate.solve")

# The bottleneck search scans 256 rates plus the plotting grid in one loss call.
_SEARCH_SCAN = 256


def over_limit(field: str, limit: str, allowed: float, actual: float, what: str) -> ProblemError:
    """A ``limit-exceeded`` problem naming the field and the limit."""
    return ProblemError(
        "limit-exceeded",
        f"{what}: {actual:g} exceeds {limit}={allowed:g}",
        [FieldProblem(field, what, limit, allowed, actual)],
    )


@router.post(
    "/queues/nic",
    operation_id="solve_nic_queue",
    summary="Solve the NIC buffer queue over a list of rates",
    response_model=NicQueueResult,
    responses=problem_responses(400, 415, 422, 429),
)
async def post_nic_queue(body: NicQueueRequest, request: Request) -> Response:
    """Loss probability, throughput, occupancy and busy probability of the NIC's
    M/M[N]/1/K bulk-service queue (or the general rule [a, b], or phase-type service),
    one entry per rate."""
    state = service(request)
    limits = state.settings
    payload = body.model_dump(mode="json")
    rate_field = "send_rates_bps" if body.send_rates_bps is not None else "arrival_rates_pps"
    n_rates = len(payload[rate_field])
    if n_rates > limits.max_rates:
        raise over_limit(f"body.{rate_field}", "max_rates", limits.max_rates, n_rates, "rates")
    if body.buffer_packets > limits.max_buffer_packets:
        raise over_limit(
            "body.buffer_packets",
            "max_buffer_packets",
            limits.max_buffer_packets,
            body.buffer_packets,
            "NIC buffer",
        )
    cells = nic_queue_cells(payload)
    if cells > limits.max_queue_cells:
        raise over_limit(
            f"body.{rate_field}", "max_queue_cells", limits.max_queue_cells, cells, "queue cells"
        )
    key, entry = state.cached("nic", payload)
    if entry is not None:
        return respond(request, entry, True)

    async def compute() -> bytes:
        if nic_queue_cost(payload) > limits.inprocess_max_queue_work:
            result = await state.pool.run(
                "nic-queue", {"request": payload}, limits.solve_timeout_s, kind="nic"
            )
            return await state.encoded(result)
        return await _in_process_or_pool(
            state, "nic", lambda: solve_nic_queue(payload), "nic-queue", {"request": payload}
        )

    with only_sent_fields(sent_fields(body)):
        entry = await state.compute_once(key, compute)
    return respond(request, entry, False)


@router.post(
    "/transfer-time",
    operation_id="compute_transfer_time",
    summary="RBUDP transfer time over sending rates, for a loss model",
    response_model=TransferTimeResult,
    responses=problem_responses(400, 415, 422),
)
async def post_transfer_time(body: TransferTimeRequest, request: Request) -> Response:
    """The curve T(B_send) with its three terms and the rounds, for a constant loss, a
    table of losses or the paper's NIC queue, and optionally the effective bottleneck rate
    (the rate in (0, line rate] that minimises T)."""
    state = service(request)
    limits = state.settings
    payload = body.model_dump(mode="json")
    if body.send_rates_bps is not None and len(body.send_rates_bps) > limits.max_rates:
        raise over_limit(
            "body.send_rates_bps", "max_rates", limits.max_rates, len(body.send_rates_bps), "rates"
        )
    if body.curve_points > limits.max_curve_points:
        raise over_limit(
            "body.curve_points",
            "max_curve_points",
            limits.max_curve_points,
            body.curve_points,
            "curve points",
        )
    model = payload["loss_model"]
    if model["kind"] == "table" and len(model["loss"]) > limits.max_rates:
        raise over_limit(
            "body.loss_model.loss", "max_rates", limits.max_rates, len(model["loss"]), "rates"
        )
    if model["kind"] == "nic-queue":
        k = int(model["buffer_packets"])
        if k > limits.max_buffer_packets:
            raise over_limit(
                "body.loss_model.buffer_packets",
                "max_buffer_packets",
                limits.max_buffer_packets,
                k,
                "NIC buffer",
            )
        rates = max(len(body.send_rates_bps or ()), _SEARCH_SCAN + body.curve_points)
        if rates * (k + 1) > limits.max_queue_cells:
            raise over_limit(
                "body.loss_model.buffer_packets",
                "max_queue_cells",
                limits.max_queue_cells,
                rates * (k + 1),
                "queue cells per loss evaluation",
            )
    key, entry = state.cached("transfer", payload)
    if entry is not None:
        return respond(request, entry, True)

    async def compute() -> bytes:
        if transfer_time_work(payload) > limits.inprocess_max_queue_work:
            result = await state.pool.run(
                "transfer-time", {"request": payload}, limits.solve_timeout_s, kind="transfer"
            )
            return await state.encoded(result)
        return await _in_process_or_pool(
            state,
            "transfer",
            lambda: transfer_time_curve(payload),
            "transfer-time",
            {"request": payload},
        )

    with only_sent_fields(sent_fields(body)):
        entry = await state.compute_once(key, compute)
    return respond(request, entry, False)


@router.post(
    "/srn/solve",
    operation_id="solve_srn",
    summary="Solve a general stochastic reward net",
    response_model=SrnSolveResult,
    responses=problem_responses(400, 415, 422, 429, 503),
)
async def post_srn_solve(body: SrnSolveRequest, request: Request) -> Response:
    """Generate the tangible reachability graph of a posted SRN and solve its CTMC in
    steady state, in transient at given times, or to absorption (time-to-absorption CDF,
    mean, variance, quantiles).  Reports the state count and the residual or error bound.

    Small chains are solved in the request's process; larger ones in a worker process
    that is killed when the solve exceeds `solve_timeout_s` or `solve_memory_bytes`."""
    state = service(request)
    limits = state.settings
    payload = body.model_dump(mode="json")
    key, entry = state.cached("srn", payload)
    if entry is not None:
        return respond(request, entry, True)
    full = solve_budget(limits, limits.solve_timeout_s)
    small = dataclasses.replace(
        full,
        max_states=min(limits.inprocess_max_states, limits.max_states),
        max_edges=min(50 * limits.inprocess_max_states, limits.max_edges),
        max_vanishing=min(50 * limits.inprocess_max_states, limits.max_vanishing),
        max_work=limits.inprocess_max_work,
        in_process=True,
    )

    def in_process() -> dict[str, Any]:
        result = solve_srn(payload, small)
        result["solved_in"] = "process"
        return result

    async def compute() -> bytes:
        body = await _solve_in_process(state, payload, small.max_states, in_process)
        if body is not None:
            return body
        result = await state.pool.run(
            "srn-solve",
            {"request": payload, "budget": dataclasses.asdict(full)},
            limits.solve_timeout_s,
            kind="srn",
        )
        result["solved_in"] = "worker-pool"
        return await state.encoded(result)

    # Not restricted to the fields sent: a missing `times` or `absorbing` is named as
    # such, and every other field names a part of the posted net.
    entry = await state.compute_once(key, compute)
    return respond(request, entry, False)


def _shutting_down(state: ServiceState) -> ProblemError:
    return ProblemError(
        "service-unavailable",
        "the server is shutting down; the solve was stopped",
        headers={"Retry-After": str(state.settings.solver_retry_after_s)},
    )


async def _guarded_in_thread(
    state: ServiceState, kind: str, compute: Callable[[], Any]
) -> bytes | None:
    """Run ``compute`` in a thread of the server process, bounded; None if it overran.

    The bounds are ``inprocess_max_seconds`` of wall time and ``inprocess_max_memory_bytes``
    of growth of the server's memory; work that reaches one is interrupted (and the caller
    moves it to the pool).  At shutdown the work is interrupted and answered with a 503.
    """
    limits = state.settings
    if state.shutting_down:
        raise _shutting_down(state)

    def bounded() -> Any:
        return run_guarded(compute, limits.inprocess_max_seconds, limits.inprocess_max_memory_bytes)

    try:
        return await state.in_thread(kind, bounded)
    except WorkInterrupted as exc:
        if exc.reason == "cancelled":
            raise _shutting_down(state) from None
        state.metrics.moved_to_pool.labels(kind, exc.reason).inc()
        log.warning(
            "in-process solve overran its bound; moved to the worker pool",
            extra={"kind": kind, "bound": exc.reason, "elapsed_s": round(exc.elapsed_s, 3)},
        )
        return None


async def _in_process_or_pool(
    state: ServiceState,
    kind: str,
    compute: Callable[[], Any],
    job: str,
    job_payload: dict[str, Any],
) -> bytes:
    """Compute in the server process, or in the pool if that overran its bounds."""
    body = await _guarded_in_thread(state, kind, compute)
    if body is None:
        result = await state.pool.run(job, job_payload, state.settings.solve_timeout_s, kind=kind)
        body = await state.encoded(result)
    return body


async def _solve_in_process(
    state: ServiceState,
    payload: dict[str, Any],
    max_states: int,
    solve: Callable[[], dict[str, Any]],
) -> bytes | None:
    """Solve in the server process if the estimate allows it; None means "use the pool".

    The estimate is made before any work starts; the run itself is bounded
    (:func:`_guarded_in_thread`).
    """
    estimate = estimate_srn_solve(payload, max_states, state.settings.inprocess_max_work)
    if not estimate.in_process:
        state.metrics.moved_to_pool.labels("srn", "estimate").inc()
        return None
    try:
        return await _guarded_in_thread(state, "srn", solve)
    except SolveTooLarge:
        state.metrics.moved_to_pool.labels("srn", "size").inc()
        return None
