"""The application factory: :func:`create_app` builds one configured ASGI app."""

from __future__ import annotations

import asyncio
import contextlib
import gc
import logging
import math
import threading
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any

import anyio.to_thread
from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.openapi.utils import get_openapi
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.responses import Response

from app.runtime.native_threads import limit_native_threads
from app.runtime.observability import Metrics, configure_logging
from app.runtime.pool import SolvePool
from app.runtime.shutdown import BoundedShutdown
from app.schemas.bodies import BOOLEAN_MARK
from app.schemas.problems import (
    MEDIA_TYPE,
    PROBLEM_TYPES,
    FieldProblem,
    ProblemError,
    problem_bytes,
    problem_from_exception,
    status_phrase,
)
from app.settings import Settings
from app.version import __version__
from host.store import ProfileStore, ProfileStoreError

from .cache import QueryIndex, ResultCache
from .docs import install_docs
from .middleware import ServiceMiddleware
from .multiprocess_metrics import mark_worker_dead, metrics_directory
from .routes import health, page, planning, plots, problem_types, sweeps, what_if
from .routes.jobs import JobService
from .state import ServiceState
from .stored_profiles import storage_problem

__all__ = ["create_app"]

log = logging.getLogger("blastrate.app")

DESCRIPTION = """\
Predicts the **effective bottleneck rate** of a data transfer into a busy receiving host:
the RBUDP sending rate that minimises the transfer time, given the host's workload
(stochastic reward nets), its NIC buffer (an M/M[N]/1/K bulk-service queue) and the link.

* Units are SI: rates in events/s, bit rates in bit/s, sizes in bytes, times in s.  Query
  strings also take human forms (`500MB`, `1Gbps`, `100ms`; 1 MB = 10^6 B).
* Every error is an RFC 9457 `application/problem+json` body whose `errors` list names
  the field and, when a limit was reached, the limit.  `GET /problems/{slug}` explains
  each problem type.
* Results are deterministic and cached; they carry a strong `ETag`, and a GET with a
  matching `If-None-Match` gets `304 Not Modified`.
* Every response carries `X-Request-ID` (the client's, if it sent a plain one).
"""

TAGS = [
    {"name": "bottleneck", "description": "The whole method, for transfer tools."},
    {"name": "planning", "description": "Building blocks, for capacity planners."},
    {"name": "plots", "description": "Figures as SVG or PNG, for planners."},
    {"name": "profiles", "description": "Named host profiles: built-in and stored."},
    {"name": "host", "description": "The live probe of the host running the service."},
    {"name": "health", "description": "Liveness, readiness, metrics."},
    {"name": "problems", "description": "Documentation of the problem types."},
]


def _problem_response(problem: ProblemError, request: Request) -> Response:
    return Response(
        problem_bytes(problem, request.url.path),
        status_code=problem.status,
        media_type=MEDIA_TYPE,
        headers=problem.headers,
    )


def _location(loc: tuple[Any, ...] | list[Any]) -> str:
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            out += ("." if out else "") + str(part)
    return out or "body"


# pydantic constraint -> the name of the limit reported
_CONSTRAINTS = {
    "le": "maximum",
    "lt": "exclusive_maximum",
    "ge": "minimum",
    "gt": "exclusive_minimum",
    "max_length": "max_length",
    "min_length": "min_length",
}


def _number_or_none(text: str) -> float | None:
    """The number a query value spells, or None (too long, or not a number)."""
    if len(text) > 64:
        return None
    try:
        return float(text)
    except ValueError:
        return None


def _validation_problem(exc: RequestValidationError) -> ProblemError:
    errors: list[FieldProblem] = []
    for error in exc.errors():
        if error.get("type") == "json_invalid":
            loc = error.get("loc", ())
            where = f" at character {loc[1]}" if len(loc) > 1 else ""
            why = (error.get("ctx") or {}).get("error", "JSON decode error")
            errors.append(FieldProblem("body", f"invalid JSON{where}: {why}"))
            continue
        limit = allowed = actual = None
        ctx = error.get("ctx") or {}
        for key, name in _CONSTRAINTS.items():
            if key in ctx and isinstance(ctx[key], int | float):
                limit, allowed = name, float(ctx[key])
                value = error.get("input")
                if key.endswith("length") and hasattr(value, "__len__"):
                    actual = float(len(value))
                elif isinstance(value, int | float) and not isinstance(value, bool):
                    # An integer of 400 digits has no float: the bound is reason enough
                    # (it crashed this handler into a 500, found by test_fuzz_numbers).
                    try:
                        actual = float(value)
                    except OverflowError:
                        actual = math.inf if value > 0 else -math.inf
                elif isinstance(value, str) and not key.endswith("length"):
                    # A query string's number arrives as text; pydantic has parsed it.
                    actual = _number_or_none(value)
                break
        reason = str(error.get("msg"))
        value = error.get("input")
        if isinstance(value, str) and value.endswith(BOOLEAN_MARK):
            reason = "Input should be a number, not true or false"
        if actual is not None and math.isnan(actual):
            # NaN fails every bound, so pydantic reports the first: not the reason.
            reason, limit, allowed, actual = "Input should be a number, not NaN", None, None, None
        errors.append(FieldProblem(_location(error.get("loc", ())), reason, limit, allowed, actual))
    # The detail names the first five; ``errors`` lists them all (it said "7 invalid
    # field(s)" and named 5 without saying so).
    fields = ", ".join(e.field for e in errors[:5])
    if len(errors) > 5:
        fields += f" and {len(errors) - 5} more (see errors)"
    if any(e.get("type") == "json_invalid" for e in exc.errors()):
        # Not a schema mismatch: the body is not JSON at all (400, not 422).
        return ProblemError("malformed-json", "the request body is not valid JSON", errors)
    return ProblemError(
        "validation-error",
        f"{len(errors)} invalid field(s): {fields}" if errors else "invalid request",
        errors,
    )


def _is_json(content_type: str | None) -> bool:
    if not content_type:
        return True  # FastAPI reads a body without a content type as JSON
    media = content_type.split(";", 1)[0].strip().lower()
    return media == "application/json" or media.endswith("+json")


def _allowed_methods(request: Request) -> set[str]:
    route = request.scope.get("route")
    table: dict[str, set[str]] = request.app.state.allowed_methods
    return table.get(getattr(route, "path", ""), set())


def _install_error_handlers(app: FastAPI) -> None:
    async def on_problem(request: Request, exc: Exception) -> Response:
        assert isinstance(exc, ProblemError)
        return _problem_response(exc, request)

    async def on_validation(request: Request, exc: Exception) -> Response:
        assert isinstance(exc, RequestValidationError)
        if request.method in ("POST", "PUT", "PATCH") and not _is_json(
            request.headers.get("content-type")
        ):
            sent = request.headers.get("content-type", "")
            # A PNML file posted as it is: say where it goes.
            pnml_hint = (
                '; a PNML document travels inside JSON, as the string member "pnml"'
                if "xml" in sent.lower()
                else ""
            )
            problem = ProblemError(
                "unsupported-media-type",
                f"request bodies must be JSON; got Content-Type {sent[:80]!r}{pnml_hint}",
                [FieldProblem("header.content-type", "must be application/json")],
            )
        else:
            problem = _validation_problem(exc)
        return _problem_response(problem, request)

    async def on_http(request: Request, exc: Exception) -> Response:
        assert isinstance(exc, StarletteHTTPException)
        if isinstance(exc.__cause__, ProblemError):
            # FastAPI wraps errors raised while reading the body (our 413) in a 400.
            return _problem_response(exc.__cause__, request)
        if exc.status_code == 400 and exc.__cause__ is not None:
            # A body FastAPI could not even decode (e.g. not UTF-8): invalid JSON to us.
            problem = ProblemError(
                "malformed-json",
                "the request body could not be read as JSON",
                [FieldProblem("body", f"unreadable body: {type(exc.__cause__).__name__}")],
            )
            return _problem_response(problem, request)
        slug = {404: "not-found", 405: "method-not-allowed", 413: "body-too-large"}.get(
            exc.status_code, "http-error"
        )
        detail = exc.detail if isinstance(exc.detail, str) else status_phrase(exc.status_code)
        headers = dict(exc.headers or {})
        if exc.status_code == 404:
            detail = f"no resource at {request.url.path[:200]!r}"
        elif exc.status_code == 405:
            detail = f"{request.method} is not allowed on {request.url.path[:200]!r}"
            # Starlette names only the first route that matched the path; list them all.
            headers["Allow"] = ", ".join(sorted(_allowed_methods(request)))
        problem = ProblemError(
            slug,
            detail,
            status=exc.status_code,
            title=PROBLEM_TYPES[slug].title
            if slug != "http-error"
            else status_phrase(exc.status_code),
            headers=headers,
        )
        return _problem_response(problem, request)

    async def on_library_error(request: Request, exc: Exception) -> Response:
        problem = problem_from_exception(exc)
        if problem is None:
            raise exc
        return _problem_response(problem, request)

    app.add_exception_handler(ProblemError, on_problem)
    app.add_exception_handler(RequestValidationError, on_validation)
    app.add_exception_handler(StarletteHTTPException, on_http)
    app.add_exception_handler(ValueError, on_library_error)

    async def on_storage_error(request: Request, exc: Exception) -> Response:
        assert isinstance(exc, ProfileStoreError)
        log.error("profile database: %s", exc)
        return _problem_response(storage_problem(exc), request)

    app.add_exception_handler(ProfileStoreError, on_storage_error)


_VALIDATION_DESCRIPTION = "Invalid path or query parameter; `errors` names it (problem+json)."


def _openapi(app: FastAPI) -> Callable[[], dict[str, Any]]:
    """Generate the schema once, with problem bodies as application/problem+json."""

    def build() -> dict[str, Any]:
        if app.openapi_schema is not None:
            return app.openapi_schema
        schema = get_openapi(
            title=app.title,
            version=app.version,
            description=app.description,
            routes=app.routes,
            tags=app.openapi_tags,
        )
        for path in schema.get("paths", {}).values():
            for operation in path.values():
                for status, response in operation.get("responses", {}).items():
                    content = response.get("content")
                    if status[0] in "45" and content and "application/json" in content:
                        media = content.pop("application/json")
                        # FastAPI's own 422 (routes with parameters) is ours too.
                        if media.get("schema", {}).get("$ref", "").endswith("/HTTPValidationError"):
                            media["schema"] = {"$ref": "#/components/schemas/Problem"}
                            response["description"] = _VALIDATION_DESCRIPTION
                        content[MEDIA_TYPE] = media
        components = schema.get("components", {}).get("schemas", {})
        for unused in ("HTTPValidationError", "ValidationError"):
            components.pop(unused, None)
        app.openapi_schema = schema
        return schema

    return build


async def _warm_up(state: ServiceState, warm: Callable[[Callable[[int], None]], int]) -> None:
    started = threading.Event()
    failed: list[BaseException] = []

    def start_pool() -> None:
        try:
            state.pool.start()
        except BaseException as exc:
            failed.append(exc)
            raise
        finally:
            started.set()

    def ready(nets: int) -> None:
        # Called by the warm-up (a worker thread) once the default answers are warm:
        # readiness waits for the solver pool too, and never follows a failed one.
        started.wait()
        if failed:
            return
        state.compiled_nets = nets
        state.ready = True
        log.info("ready", extra={"compiled_nets": nets})

    try:
        # The pool's processes start (mostly a wait on their spawn) while this process
        # warms up: readiness waits for both, not for one after the other.
        async with anyio.create_task_group() as group:
            group.start_soon(anyio.to_thread.run_sync, start_pool)
            nets = await anyio.to_thread.run_sync(warm, ready)
        # What exists now (modules, compiled kernels and nets, the app) lives as long as
        # the process.  Left to the cyclic collector, its ~250,000 objects made every
        # full collection a 110 ms pause of all threads, the event loop's included (the
        # largest /healthz latency under load).  Frozen, they are never scanned again.
        gc.freeze()
        if not state.ready:
            ready(nets)
        log.info(
            "warm-up done",
            extra={"compiled_nets": nets, "frozen_objects": gc.get_freeze_count()},
        )
    except Exception as exc:  # readiness stays false and says why
        state.ready = False
        state.warm_up_error = f"{type(exc).__name__}: {exc}"
        log.exception("warm-up failed")


def create_app(settings: Settings | None = None) -> FastAPI:
    """Build the blastrate ASGI application.

    Parameters
    ----------
    settings : Settings, optional
        Limits and tuning; read from ``BLASTRATE_*`` environment variables when omitted.

    Returns
    -------
    FastAPI
        The app.  Its lifespan starts the solver pool and compiles the default nets in
        the background (``GET /readyz`` turns 200 when done) and stops the pool on exit.

    Examples
    --------
    >>> from fastapi.testclient import TestClient
    >>> with TestClient(create_app(Settings(warm_up=False))) as client:  # doctest: +SKIP
    ...     client.get("/healthz").json()["status"]
    'ok'
    """
    settings = settings or Settings()
    configure_logging(settings.log_level, settings.log_json)
    limit_native_threads(settings.blas_threads)
    metrics_dir = metrics_directory(settings.metrics_multiprocess, settings.metrics_dir)
    metrics = Metrics(metrics_dir)
    pool = SolvePool(
        settings.solve_workers,
        settings.solve_queue,
        metrics,
        memory_bytes=settings.solve_memory_bytes,
        recycle_bytes=settings.worker_recycle_bytes,
        retry_after_s=settings.solver_retry_after_s,
        blas_threads=settings.blas_threads,
    )
    cache = ResultCache(settings.cache_entries, settings.cache_bytes)
    state = ServiceState(
        settings=settings,
        metrics=metrics,
        cache=cache,
        pool=pool,
        query_index=QueryIndex({"/bottleneck-rate": "bottleneck"}, settings.cache_entries, cache),
    )
    state.extras["profiles"] = ProfileStore(settings.database_url)

    def stop_serving() -> None:
        state.ready = False
        state.shutting_down = True

    shutdown = BoundedShutdown(pool, settings.shutdown_timeout_s, on_begin=stop_serving)
    jobs = JobService(settings)
    state.extras["jobs"] = jobs

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        from .live import start_probe, stop_probe
        from .warmup import compile_default_nets

        task: asyncio.Task[None] | None = None
        state.open_compute_threads()
        shutdown.install()
        await anyio.to_thread.run_sync(jobs.start_if_configured)
        if settings.warm_up:
            # Said at once: uvicorn prints "running" before the service is ready.
            log.info("warming up: /readyz answers 503 until the default answers are warm")
            task = asyncio.create_task(_warm_up(state, compile_default_nets))

            # The probe starts once warm-up is over: both need the cores at start-up.
            # Then the pin, which threads started later inherit (the probe's must not).
            def background(_: object) -> None:
                start_probe(state)
                state.pin_to_loop_cpu()

            task.add_done_callback(background)
        else:
            state.ready = True
            start_probe(state)
            state.pin_to_loop_cpu()
        try:
            yield
        finally:
            if task is not None and not task.done():
                # Compiling runs in a thread that cannot be stopped; wait within the bound.
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(asyncio.shield(task), settings.shutdown_timeout_s)
            await anyio.to_thread.run_sync(state.pool.close)
            state.close_compute_threads()  # on the loop, which submits the work
            await anyio.to_thread.run_sync(lambda: stop_probe(state))
            await anyio.to_thread.run_sync(jobs.close)
            mark_worker_dead(metrics_dir)
            shutdown.uninstall()

    app = FastAPI(
        title="blastrate",
        version=__version__,
        description=DESCRIPTION,
        openapi_tags=TAGS,
        lifespan=lifespan,
        redirect_slashes=False,
        docs_url=None,
        redoc_url=None,
    )
    app.state.service = state
    install_docs(app)
    _install_error_handlers(app)
    from .routes import bottleneck_rate, host, profiles
    from .routes import jobs as job_routes

    allowed: dict[str, set[str]] = {}
    for router in (
        bottleneck_rate.router,
        profiles.router,
        host.router,
        planning.router,
        job_routes.router,
        sweeps.router,
        what_if.router,
        plots.router,
        page.router,
        health.router,
        problem_types.router,
    ):
        app.include_router(router)
        for route in router.routes:
            methods = set(getattr(route, "methods", None) or ())
            allowed.setdefault(getattr(route, "path", ""), set()).update(methods)
    app.state.allowed_methods = allowed
    app.add_middleware(
        ServiceMiddleware,
        metrics=metrics,
        max_body_bytes=settings.max_body_bytes,
        query_index=state.query_index,
    )
    app.openapi = _openapi(app)  # type: ignore[method-assign]
    return app
