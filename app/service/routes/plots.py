"""``GET /plots/...``: the paper's figures and sweeps as SVG (or PNG), from a query string.

Each plot takes the query of ``GET /bottleneck-rate`` (human units allowed) plus
``format=svg|png``; the grid and sweep plots also take ranges (``cpu_tasks=0..8``).
Rendering runs in a worker thread, never on the event loop; the points behind one plot
are bounded by ``plot_max_points``; rendered plots are cached (``plot_cache_entries``)
and carry a strong ETag.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from typing import Any

import anyio.to_thread
from fastapi import APIRouter, Request
from starlette.responses import Response

from app.operations.capacity import (
    PlotCache,
    check_point_limits,
    parse_inputs,
    planning_problem,
    product_size,
)
from app.schemas.bodies import BottleneckQuery, query_parameters
from app.schemas.problems import FieldProblem, ProblemError
from app.schemas.units import QuantityError
from app.service.cache import etag_matches
from app.service.state import ServiceState, service
from planning import INPUT_FIELDS, PlanningError, resolve_point, run_sweep
from planning.plots import (
    PLOT_FORMATS,
    loss_figure,
    render,
    service_time_figure,
    sweep_figure,
    transfer_time_figure,
)
from planning.points import PointCurve, point_curve, point_objects

from .common import NOT_MODIFIED, problem_responses

router = APIRouter(tags=["plots"])

_CONTROL = ("format", "x", "series", "y")
_IMAGE: dict[int | str, dict[str, Any]] = {
    200: {
        "description": "The plot.",
        "content": {"image/svg+xml": {"schema": {"type": "string"}}, "image/png": {}},
    }
}
_FORMAT_PARAMETER = {
    "name": "format",
    "in": "query",
    "required": False,
    "schema": {"type": "string", "enum": ["svg", "png"], "default": "svg"},
    "description": "svg (image/svg+xml) or png (image/png).",
}
_SAME_QUERY = [*query_parameters(BottleneckQuery), _FORMAT_PARAMETER]
_RANGE_QUERY = [
    {
        **p,
        "schema": {"anyOf": [p["schema"], {"type": "string"}]},
        "description": p.get("description", "") + " A list `1,2,4` or a range `0..8` sweeps it.",
    }
    for p in query_parameters(BottleneckQuery)
]


def _plot_cache(state: ServiceState) -> PlotCache:
    cache = state.extras.get("plot_cache")
    if cache is None:
        cache = state.extras["plot_cache"] = PlotCache(state.settings.plot_cache_entries)
    return cache


def _query(request: Request) -> tuple[dict[str, str], str]:
    params = dict(request.query_params)
    fmt = params.get("format", "svg")
    if fmt not in PLOT_FORMATS:
        raise ProblemError(
            "invalid-parameter",
            f"query.format: must be svg or png, got {fmt[:20]!r}",
            [FieldProblem("query.format", "must be svg or png")],
        )
    return params, fmt


async def _plot(
    request: Request,
    draw: Callable[[dict[str, Any], dict[str, list[Any]], dict[str, str]], Any],
    *,
    single: bool,
    defaults: dict[str, str] | None = None,
    widen: Callable[[str, str], str] | None = None,
) -> Response:
    state = service(request)
    settings = state.settings
    params, fmt = _query(request)
    given = {k: v for k, v in params.items() if k not in _CONTROL}
    if widen is not None:
        # An axis given as one value (the query of GET /bottleneck-rate) becomes the
        # default range that includes it, not a plot of one point.
        given = {k: widen(k, v) if k in (defaults or {}) else v for k, v in given.items()}
    specs = {**(defaults or {}), **given}
    # Unknown parameters are ignored, as GET /bottleneck-rate ignores them.
    specs = {k: v for k, v in specs.items() if k in INPUT_FIELDS}
    key = f"{request.url.path}?{sorted(params.items())}&{sorted(specs.items())}"
    cache = _plot_cache(state)
    cached = cache.get(key)
    if cached is None:
        try:
            base, axes = parse_inputs(specs, max_points=settings.plot_max_points, single=single)
            n = product_size(axes)
            if n > settings.plot_max_points:
                raise PlanningError(
                    "points",
                    f"{n} points, more than plot_max_points={settings.plot_max_points}",
                    limit="plot_max_points",
                    maximum=settings.plot_max_points,
                    reached=n,
                )
            check_point_limits(
                base,
                axes,
                max_buffer_packets=settings.planning_max_buffer_packets,
                max_states=settings.max_states,
                max_time_slice_work=settings.planning_max_time_slice_work,
            )

            def work() -> bytes:
                return render(draw(base, axes, params), fmt)  # type: ignore[arg-type]

            content = await anyio.to_thread.run_sync(work)
        except (PlanningError, QuantityError) as exc:
            raise planning_problem(exc, "query.") from None
        cached = (content, PLOT_FORMATS[fmt])
        cache.put(key, cached)
    content, media_type = cached
    etag = '"' + hashlib.sha256(content).hexdigest()[:32] + '"'
    headers = {"ETag": etag, "Cache-Control": "no-cache"}
    if etag_matches(request.headers.get("if-none-match"), etag):
        return Response(status_code=304, headers=headers)
    return Response(content, media_type=media_type, headers=headers)


def _curve(base: dict[str, Any]) -> PointCurve:
    return point_curve(resolve_point(base))


def _transfer_time_figure(base: dict[str, Any], _axes: Any, _params: Any) -> Any:
    drawn = _curve(base)
    title = f"Transfer time against sending rate ({_MODEL_TITLES[drawn.model]})"
    return transfer_time_figure(drawn, title=title)


def _loss_figure(base: dict[str, Any], _axes: Any, _params: Any) -> Any:
    drawn = _curve(base)
    first_blast = drawn.model == "timeslice"
    title = ("First blast's loss" if first_blast else "NIC loss") + (
        f" against sending rate ({_MODEL_TITLES[drawn.model]})"
    )
    label = "first blast's loss" if first_blast else "stationary NIC loss"
    return loss_figure(drawn, title=title, label=label)


#: How a figure's title names the receiver model that drew it.
_MODEL_TITLES = {"paper": "paper's model", "timeslice": "time-slice model"}


@router.get(
    "/plots/transfer-time",
    operation_id="plot_transfer_time",
    summary="Transfer time against sending rate, the optimum marked (the paper's Fig. 4)",
    responses={**_IMAGE, **NOT_MODIFIED, **problem_responses(422)},
    openapi_extra={"parameters": _SAME_QUERY},
)
async def plot_transfer_time(request: Request) -> Response:
    """The curve T(B_send) for the inputs of `GET /bottleneck-rate` (same query, same
    `model`), with the effective bottleneck rate marked by a star (SVG element id
    `optimum`)."""
    return await _plot(request, _transfer_time_figure, single=True)


@router.get(
    "/plots/loss",
    operation_id="plot_loss",
    summary="Loss against sending rate: the NIC's (paper) or the first blast's (timeslice)",
    responses={**_IMAGE, **NOT_MODIFIED, **problem_responses(422)},
    openapi_extra={"parameters": _SAME_QUERY},
)
async def plot_loss(request: Request) -> Response:
    """The loss that decides the answer along the curve, the optimum marked (same query
    as `GET /bottleneck-rate`): the NIC queue's stationary loss with `model=paper`, the
    first blast's with `model=timeslice`."""
    return await _plot(request, _loss_figure, single=True)


def _service_figure(base: dict[str, Any], _axes: Any, _params: Any) -> Any:
    resolved = resolve_point(base)
    workload, host = point_objects(resolved)
    # The SRN engine and its compiled kernels: loaded by the warm-up, after readiness.
    from host import interrupt_service_time

    return service_time_figure(interrupt_service_time(workload, host))


@router.get(
    "/plots/service-time-cdf",
    operation_id="plot_service_time_cdf",
    summary="CDF of the interrupt service time",
    responses={**_IMAGE, **NOT_MODIFIED, **problem_responses(422)},
    openapi_extra={"parameters": _SAME_QUERY},
)
async def plot_service_time_cdf(request: Request) -> Response:
    """The distribution of the time the host takes to service one interrupt, with its
    mean and p50/p90/p99 (same query as `GET /bottleneck-rate`; `file_size` and
    `propagation_delay` are not needed)."""
    return await _plot(
        request,
        _service_figure,
        single=True,
        defaults={"file_size": "1", "propagation_delay": "1"},
    )


def _sweep_figure(
    x_default: str | None, series_default: str | None
) -> Callable[[dict[str, Any], dict[str, list[Any]], dict[str, str]], Any]:
    def draw(base: dict[str, Any], axes: dict[str, list[Any]], params: dict[str, str]) -> Any:
        names = list(axes)
        x = params.get("x") or x_default or (names[0] if names else None)
        if x is None:
            raise PlanningError("x", "give a range for one input (e.g. cpu_tasks=0..8)")
        series = params.get("series") or series_default
        if series is None:
            rest = [n for n in names if n != x]
            series = rest[0] if rest else None
        y = params.get("y", "effective_bottleneck_rate_bps")
        result = run_sweep(base, axes, inline=True)
        return sweep_figure(result.records, x, series=series, y=y)

    return draw


@router.get(
    "/plots/bottleneck-rate-grid",
    operation_id="plot_bottleneck_rate_grid",
    summary="Effective bottleneck rate against C, one line per I (the paper's Fig. 3 with "
    "model=paper)",
    responses={**_IMAGE, **NOT_MODIFIED, **problem_responses(422)},
    openapi_extra={"parameters": [*_RANGE_QUERY, _FORMAT_PARAMETER]},
)
async def plot_bottleneck_rate_grid(request: Request) -> Response:
    """The effective bottleneck rate for `cpu_tasks` (default `0..8`) on the horizontal
    axis and one line per `io_tasks` (default `0,1,2,4`), the other inputs as in
    `GET /bottleneck-rate`.  At most `plot_max_points` points."""
    return await _plot(
        request,
        _sweep_figure("cpu_tasks", "io_tasks"),
        single=False,
        defaults={"cpu_tasks": "0..8", "io_tasks": "0,1,2,4"},
        widen=_grid_around,
    )


def _grid_around(name: str, value: str) -> str:
    """``cpu_tasks=2`` -> ``0..8`` (or up to the value); ``io_tasks=3`` -> ``0,1,2,3,4``:
    a grid that contains the point asked about.  Lists and ranges are kept."""
    text = value.strip()
    # A plain count only (ASCII digits, a few of them); anything else is the axis
    # parser's to read or refuse, naming the field (issue #36: "²" and 10,000 nines).
    if not (text.isascii() and text.isdigit() and len(text) <= 6):
        return value
    n = int(text)
    if name == "cpu_tasks":
        return f"0..{max(8, n)}"
    return ",".join(str(v) for v in sorted({0, 1, 2, 4, n}))


@router.get(
    "/plots/sweep",
    operation_id="plot_sweep",
    summary="Any sweep: a result against one input, one line per value of another",
    responses={**_IMAGE, **NOT_MODIFIED, **problem_responses(422)},
    openapi_extra={
        "parameters": [
            *_RANGE_QUERY,
            _FORMAT_PARAMETER,
            {
                "name": "x",
                "in": "query",
                "required": False,
                "schema": {"type": "string"},
                "description": "Input on the horizontal axis (default: the first range).",
            },
            {
                "name": "series",
                "in": "query",
                "required": False,
                "schema": {"type": "string"},
                "description": "Input with one line per value (default: the second range).",
            },
            {
                "name": "y",
                "in": "query",
                "required": False,
                "schema": {"type": "string", "default": "effective_bottleneck_rate_bps"},
                "description": "Result plotted: effective_bottleneck_rate_bps, "
                "transfer_time_s, loss_probability or interrupt_service_rate_per_s.",
            },
        ]
    },
)
async def plot_sweep(request: Request) -> Response:
    """Sweep up to two inputs given as ranges or lists (e.g. `io_tasks=0..10&cores=1,2`)
    and plot `y` against `x`.  At most `plot_max_points` points."""
    return await _plot(request, _sweep_figure(None, None), single=False)
