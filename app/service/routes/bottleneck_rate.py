"""The effective bottleneck rate and the interrupt service time.

``GET /bottleneck-rate`` is on the critical path of transfer tools, so it is lean: one
validation of the whole query (unknown and repeated parameters refused), a cache lookup
on the normalised inputs, and on a miss the model computed once per key (concurrent
identical misses wait for the same computation), never on the event loop: paper-sized
chains in a bounded thread pool (about a millisecond), chains larger than
``inprocess_max_method_states`` in the worker pool.  Problems name only the fields the
request contained (:func:`app.schemas.problems.only_sent_fields`).
"""

from __future__ import annotations

from collections.abc import Awaitable, Mapping
from typing import Any

from fastapi import APIRouter, Request
from fastapi.exceptions import RequestValidationError
from starlette.responses import Response

from app.operations.whole_method import (
    HOST_FIELDS,
    queue_cells,
    queue_work,
    resolve_inputs,
    run_method,
    state_count,
    time_slice_work,
)
from app.schemas.bodies import (
    MAX_DELAY_S,
    MAX_LINE_RATE,
    MAX_PAYLOAD_BYTES,
    MIN_BIT_RATE,
    BottleneckQuery,
    BottleneckRateRequest,
    BottleneckRateResult,
    ServiceTimeRequest,
    ServiceTimeResult,
    query_parameters,
)
from app.schemas.problems import FieldProblem, ProblemError, only_sent_fields, translated_errors
from app.schemas.units import QuantityError, parse_bitrate, parse_duration, parse_size
from app.service.live import latest_probe, live_host_overrides, live_workload
from app.service.state import ServiceState, respond, service
from app.service.stored_profiles import fetch_profile, fetch_profile_entry
from datamover.advice import MAX_ADVICE_WORK
from host import HOST_PROFILES

from .access import check_token
from .common import (
    NOT_MODIFIED,
    problem_responses,
    sent_fields,
    strict_query,
    validated_query,
)

router = APIRouter()

# Library field -> query parameter of GET /bottleneck-rate.
_QUERY_FIELDS = {
    "tasks": "cpu_tasks",
    "name": "profile",
    "line_rate_bps": "line_rate",
    "packet_payload_bytes": "packet_payload",
    "file_size_bytes": "file_size",
    "propagation_delay_s": "propagation_delay",
    "loss": "profile",
    # lambda = B_send / (8 S_pkt) with B_send searched in (0, line rate].
    "arrival_rate": "line_rate",
    "send_rate_bps": "line_rate",
}
# API field -> the inputs that share the blame when it was not sent (a value from the
# profile, or a quantity derived from the inputs): see ProblemError.restricted_to.
_RELATED = {
    "coalesce_packets": ("buffer_packets",),
    "buffer_packets": ("coalesce_packets",),
    "line_rate": ("packet_payload",),
    "line_rate_bps": ("packet_payload_bytes",),
}
# Library field -> body field of the POST endpoints.
_BODY_FIELDS = {
    **{f: f"workload.{f}" for f in ("cpu_tasks", "io_tasks", "cores", "disks")},
    "tasks": "workload.cpu_tasks",
    **{f: f"host.{f}" for f in (*HOST_FIELDS, "profile")},
    "name": "host.profile",
    "file_size_bytes": "transfer.file_size_bytes",
    "propagation_delay_s": "transfer.propagation_delay_s",
    "loss": "host",
}


async def _answer(
    request: Request,
    state: ServiceState,
    function: str,
    inputs: dict[str, Any],
    options: dict[str, Any],
    aliases: Mapping[str, str],
    prefix: str,
    extra: dict[str, Any] | None = None,
    *,
    profile_named: bool = True,
) -> Response:
    # `extra` (the live probe) is part of the answer, so part of the key.
    key, entry = state.cached(
        function, [inputs, options] if extra is None else [inputs, options, extra]
    )
    # Only built-in profiles (read-only) named in the query and given workloads may be
    # answered from the raw query string later: a stored profile can change under the
    # same name, the host default with each `blastrate calibrate`, a live probe every
    # window.
    indexable = profile_named and extra is None and inputs["host"]["profile"] in HOST_PROFILES
    if entry is not None:
        if indexable:
            _index(request, state, key)
        return respond(request, entry, hit=True)
    limits = state.settings
    states = state_count(inputs)
    if states > limits.max_states:
        raise ProblemError(
            "limit-exceeded",
            f"the workload's chain has {states} states; max_states={limits.max_states}",
            [
                FieldProblem(
                    prefix + aliases.get(name, name),
                    "the state count grows like io_tasks^disks / (disks!)^2",
                    "max_states",
                    limits.max_states,
                    states,
                )
                for name in ("io_tasks", "disks")
            ],
        )
    heavy = False
    if "transfer" in inputs:
        cells = queue_cells(inputs, states, int(options.get("curve_points") or 200))
        if cells > limits.max_queue_cells:
            raise ProblemError(
                "limit-exceeded",
                f"the NIC queue needs {cells} cells per loss evaluation; "
                f"max_queue_cells={limits.max_queue_cells}",
                [
                    FieldProblem(
                        prefix + aliases.get(name, name),
                        "NIC buffer too large for this request",
                        "max_queue_cells",
                        limits.max_queue_cells,
                        cells,
                    )
                    for name in ("buffer_packets", "profile")
                ],
            )
        heavy = queue_work(inputs, states) > limits.inprocess_max_queue_work
        work = time_slice_work(inputs)
        if work > MAX_ADVICE_WORK:
            raise ProblemError(
                "limit-exceeded",
                f"the time-slice model's chain needs about {work:.3g} operations per rate "
                f"(K (7 (N + 1))^2); max_advice_work={MAX_ADVICE_WORK:g}",
                [
                    FieldProblem(
                        prefix + aliases.get(name, name),
                        "NIC buffer or batch too large for the time-slice model "
                        "(model=paper has no such limit)",
                        "max_advice_work",
                        MAX_ADVICE_WORK,
                        work,
                    )
                    for name in ("buffer_packets", "coalesce_packets", "profile")
                ],
            )
        # The time-slice search solves a chain per rate (a tenth of a second and more):
        # a worker process, where the wall-time limit can stop it.
        heavy = heavy or work > 0
    payload = {
        "function": function,
        "inputs": inputs,
        "options": options,
        "aliases": dict(aliases),
        "prefix": prefix,
    }

    def with_extra(body: dict[str, Any]) -> dict[str, Any]:
        return body if extra is None else {**body, **extra}

    async def in_pool() -> bytes:
        # Large chains: a worker process, where the wall-time limit can stop them and
        # the GIL is not shared with the event loop.
        body = await state.pool.run("method", payload, limits.solve_timeout_s, kind=function)
        return await state.encoded(with_extra(body))

    def compute() -> Awaitable[bytes]:
        if heavy or states > limits.inprocess_max_method_states:
            return in_pool()
        # Paper-sized chains take under a millisecond: a bounded thread, off the loop,
        # started at once (a future, not a task that would start on the next loop turn).
        return state.start_in_thread(function, lambda: with_extra(run_method(payload)))

    entry = await state.compute_once(key, compute)
    if indexable:
        _index(request, state, key)
    return respond(request, entry, hit=False)


def _index(request: Request, state: ServiceState, key: str) -> None:
    """File a GET's raw query string, with the cache key of its answer, in the index that
    the middleware answers from."""
    if request.method == "GET":
        # scope["path"], as the middleware looks it up (request.url would build a URL).
        state.query_index.put(request.scope["path"], request.scope["query_string"], key)


def _bounded(value: float, field: str, low: float, high: float, unit: str) -> float:
    """The bounds POST's schema puts on the same value, for a parsed query quantity."""
    if not low <= value <= high:
        raise QuantityError(field, f"must be between {low:g} and {high:g} {unit}, got {value:g}")
    return value


@router.get(
    "/bottleneck-rate",
    operation_id="get_bottleneck_rate",
    summary="The sending rate that minimises the transfer time (query string)",
    tags=["bottleneck"],
    response_model=BottleneckRateResult,
    response_model_exclude_none=True,
    responses={**NOT_MODIFIED, **problem_responses(401, 404, 422, 429, 503)},
    openapi_extra={"parameters": query_parameters(BottleneckQuery)},
)
async def get_bottleneck_rate(request: Request) -> Response:
    """The effective bottleneck rate for a workload, in milliseconds: the RBUDP sending
    rate in (0, line rate] that minimises the transfer time of the file into this host.

    Human forms are accepted for `file_size`, `propagation_delay`, `line_rate` and
    `packet_payload` (case matters: `B` is a byte, `b` a bit; see docs/conventions.md);
    the answer's `inputs` gives every value in SI units, the profile's included.  Unknown
    and repeated parameters are refused.  Send `If-None-Match` with a previous `ETag` to
    get 304."""
    # One pydantic validation of the whole query string instead of FastAPI's per-
    # parameter extraction (which cost more than the rest of the request handling).
    params = strict_query(request, BottleneckQuery)
    if params.get("workload") == "live":
        check_token(request)  # the live probe reveals the host's tasks
    sent = ["query." + name for name in params]
    with only_sent_fields(sent, _RELATED):
        # C and I are required unless the workload is the live probe's.
        missing = [
            {"type": "missing", "loc": ("query", f), "msg": "Field required", "input": None}
            for f in ("cpu_tasks", "io_tasks")
            if f not in params and params.get("workload") != "live"
        ]
        try:
            q = validated_query(BottleneckQuery, params)
        except RequestValidationError as exc:
            raise RequestValidationError([*missing, *exc.errors()]) from None
        if missing:
            raise RequestValidationError(missing)
        state = service(request)
        extra: dict[str, Any] | None = None
        nic: dict[str, Any] = {}
        workload: dict[str, Any]
        if q.workload == "live":
            probe = latest_probe(state, field="query.workload")
            workload = live_workload(probe, q.cpu_tasks, q.io_tasks, q.cores, q.disks)
            nic = live_host_overrides(probe)
            extra = {"workload_source": "live", "probe": probe.to_dict()}
        else:
            workload = {
                "cpu_tasks": q.cpu_tasks,
                "io_tasks": q.io_tasks,
                "cores": 1 if q.cores is None else q.cores,
                "disks": 1 if q.disks is None else q.disks,
            }
        with translated_errors(_QUERY_FIELDS, "query."):
            line_rate = packet_payload = None
            if q.line_rate is not None:
                line_rate = _bounded(
                    parse_bitrate(q.line_rate, "line_rate"),
                    "line_rate",
                    MIN_BIT_RATE,
                    MAX_LINE_RATE,
                    "bit/s",
                )
            if q.packet_payload is not None:
                packet_payload = parse_size(q.packet_payload, "packet_payload")
                _bounded(packet_payload, "packet_payload", 1, MAX_PAYLOAD_BYTES, "bytes")
            delay = _bounded(
                parse_duration(q.propagation_delay, "propagation_delay"),
                "propagation_delay",
                0.0,
                MAX_DELAY_S,
                "s",
            )
            profile, provenance = (
                await fetch_profile_entry(state, q.profile)
                if q.model == "timeslice"
                else (await fetch_profile(state, q.profile), None)
            )
            host = {
                "profile": profile,
                "mu_io_cpu": q.mu_io_cpu,
                "mu_disk": q.mu_disk,
                "mu_net": q.mu_net,
                "buffer_packets": q.buffer_packets,
                "coalesce_packets": q.coalesce_packets,
                "line_rate_bps": line_rate,
                "packet_payload_bytes": packet_payload,
            }
            # Values the live probe read from the NIC fill what the query leaves unset.
            host.update({k: v for k, v in nic.items() if host.get(k) is None})
            inputs = resolve_inputs(
                workload,
                host,
                {
                    "file_size_bytes": parse_size(q.file_size, "file_size"),
                    "propagation_delay_s": delay,
                },
                q.nic_service,
                q.model,
                provenance,
            ).to_dict()
        return await _answer(
            request,
            state,
            "bottleneck",
            inputs,
            {"curve_points": 200},
            _QUERY_FIELDS,
            "query.",
            extra,
            profile_named=q.profile is not None,
        )


@router.post(
    "/bottleneck-rate",
    operation_id="compute_bottleneck_rate",
    summary="The sending rate that minimises the transfer time (JSON body)",
    tags=["bottleneck"],
    response_model=BottleneckRateResult,
    response_model_exclude_none=True,
    responses=problem_responses(400, 415, 422, 429, 503),
)
async def post_bottleneck_rate(body: BottleneckRateRequest, request: Request) -> Response:
    """The same answer as `GET /bottleneck-rate` from `workload`, `host` and `transfer`
    objects in SI units, optionally with the curve T(B_send) and the interrupt
    service-time distribution."""
    with only_sent_fields(sent_fields(body), _RELATED):
        state = service(request)
        if body.curve_points > state.settings.max_curve_points:
            raise _too_many("body.curve_points", state.settings.max_curve_points, body.curve_points)
        if body.service_time_points > state.settings.max_curve_points:
            raise _too_many(
                "body.service_time_points",
                state.settings.max_curve_points,
                body.service_time_points,
            )
        with translated_errors(_BODY_FIELDS, "body."):
            host = body.host.model_dump()
            host["profile"], provenance = (
                await fetch_profile_entry(state, host["profile"])
                if body.model == "timeslice"
                else (await fetch_profile(state, host["profile"]), None)
            )
            inputs = resolve_inputs(
                body.workload.model_dump(),
                host,
                body.transfer.model_dump(),
                body.nic_service,
                body.model,
                provenance,
            ).to_dict()
        options = {
            # Not sent: the time-slice model draws 200 points or as many as its work
            # bound allows (transport.time_slice_curve_points), the paper's 200.
            "curve_points": body.curve_points if "curve_points" in body.model_fields_set else None,
            "include_curve": body.include_curve,
            "include_service_time": body.include_service_time,
            "service_time_points": body.service_time_points,
        }
        return await _answer(request, state, "bottleneck", inputs, options, _BODY_FIELDS, "body.")


def _too_many(field: str, allowed: int, actual: int) -> ProblemError:
    return ProblemError(
        "limit-exceeded",
        f"{field}={actual} exceeds max_curve_points={allowed}",
        [FieldProblem(field, "too many points", "max_curve_points", allowed, actual)],
    )


@router.post(
    "/workloads/service-time",
    operation_id="compute_service_time",
    summary="The interrupt service-time distribution of a workload",
    tags=["planning"],
    response_model=ServiceTimeResult,
    response_model_exclude_none=True,
    responses=problem_responses(400, 415, 422, 429, 503),
)
async def post_service_time(body: ServiceTimeRequest, request: Request) -> Response:
    """The time the host takes to service one network interrupt (the tagged-customer
    time to absorption of the paper's Fig. 1b): CDF, mean, variance, quantiles, the rate
    mu = 1/mean, the steady-state occupancy of processor and disks and, on request, the
    phase-type pair (alpha, T)."""
    with only_sent_fields(sent_fields(body), _RELATED):
        state = service(request)
        limits = state.settings
        if body.times_s is not None and len(body.times_s) > limits.max_time_points:
            raise ProblemError(
                "limit-exceeded",
                f"{len(body.times_s)} times given; max_time_points={limits.max_time_points}",
                [
                    FieldProblem(
                        "body.times_s",
                        "too many time points",
                        "max_time_points",
                        limits.max_time_points,
                        len(body.times_s),
                    )
                ],
            )
        if body.grid_points > limits.max_curve_points:
            raise _too_many("body.grid_points", limits.max_curve_points, body.grid_points)
        with translated_errors(_BODY_FIELDS, "body."):
            host = body.host.model_dump()
            host["profile"] = await fetch_profile(state, host["profile"])
            inputs = resolve_inputs(body.workload.model_dump(), host).to_dict()
        options = {
            "times_s": body.times_s,
            "grid_points": body.grid_points,
            "quantiles": body.quantiles,
            "include_phase_type": body.include_phase_type,
        }
        aliases = {**_BODY_FIELDS, "times": "times_s"}
        return await _answer(request, state, "service-time", inputs, options, aliases, "body.")
