"""The service's one ASGI middleware: request id, body-size limit, access log, metrics.

It also answers repeated ``GET /bottleneck-rate`` requests from the query index: a query
string seen before maps straight to its cached body, so a transfer tool asking again
skips routing and parameter validation altogether (the body is the one the route made).

It is a plain ASGI callable (not Starlette's ``BaseHTTPMiddleware``), so it costs a few
microseconds per request: the millisecond budget of ``GET /bottleneck-rate`` is spent on
the model, not on plumbing.  It is also the catch-all for unexpected exceptions: they are
logged with the request id and answered with a problem+json 500, never a bare traceback.
"""

from __future__ import annotations

import logging
import re
import time
import uuid
from typing import Any

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from app.runtime.observability import Metrics
from app.runtime.pool import CLIENT
from app.schemas.problems import MEDIA_TYPE, REQUEST_ID, FieldProblem, ProblemError, problem_bytes

from .cache import QueryIndex, etag_matches

__all__ = ["ServiceMiddleware"]

access_log = logging.getLogger("blastrate.access")
error_log = logging.getLogger("blastrate.error")

# A client-supplied X-Request-ID is echoed only if it is short and plain (no log injection).
_REQUEST_ID = re.compile(rb"^[A-Za-z0-9._:@/+=-]{1,128}$")


def body_too_large(limit: int, actual: int | None) -> ProblemError:
    """The 413 problem for a body over ``limit`` bytes."""
    return ProblemError(
        "body-too-large",
        f"the request body exceeds max_body_bytes={limit} bytes",
        [FieldProblem("body", "too large", "max_body_bytes", float(limit), actual)],
    )


class ServiceMiddleware:
    """Wrap the app: request ids, the body-size limit, one JSON access line and metrics.

    Parameters
    ----------
    app : ASGI app
        The FastAPI application.
    metrics : Metrics
        Where request durations are recorded.
    max_body_bytes : int
        Larger bodies get 413 before the route reads them (by ``Content-Length``) or as
        soon as the streamed body passes the limit.
    """

    def __init__(
        self,
        app: ASGIApp,
        *,
        metrics: Metrics,
        max_body_bytes: int,
        query_index: QueryIndex | None = None,
    ) -> None:
        self.app = app
        self.metrics = metrics
        self.max_body_bytes = max_body_bytes
        self.query_index = query_index

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        start = time.perf_counter()
        request_id: str | None = None
        declared_length = -1
        for name, value in scope["headers"]:
            if name == b"x-request-id":
                if _REQUEST_ID.match(value):
                    request_id = value.decode("ascii")
            elif name == b"content-length":
                # bytes.isdigit is ASCII only; the length keeps int() from a 4,300-digit
                # refusal (a 500), and no body is longer than 19 digits of bytes.
                declared_length = int(value) if value.isdigit() and len(value) <= 19 else -1
        if request_id is None:
            request_id = uuid.uuid4().hex
        token = REQUEST_ID.set(request_id)
        # Whose work this is, for the solver pool's fair share (by address, not port).
        peer: Any = scope.get("client")
        client_token = CLIENT.set(str(peer[0]) if peer else "")
        id_header = (b"x-request-id", request_id.encode("ascii"))
        status = 500
        started = False

        async def send_with_id(message: Message) -> None:
            nonlocal status, started
            if message["type"] == "http.response.start":
                status = message["status"]
                started = True
                message["headers"] = [*message.get("headers", ()), id_header]
            await send(message)

        limit = self.max_body_bytes
        received = 0

        async def receive_limited() -> Message:
            nonlocal received
            message = await receive()
            if message["type"] == "http.request":
                received += len(message.get("body", b""))
                if received > limit:
                    raise body_too_large(limit, received)
            return message

        try:
            if declared_length > limit:
                await _send_problem(
                    send_with_id, body_too_large(limit, declared_length), scope["path"]
                )
            elif not await self._answer_from_index(scope, send_with_id):
                await self.app(scope, receive_limited, send_with_id)
        except Exception as exc:
            error_log.exception(
                "unhandled error", extra={"path": scope["path"], "error": type(exc).__name__}
            )
            if not started:
                await _send_problem(
                    send_with_id,
                    ProblemError(
                        "internal-error",
                        f"unexpected {type(exc).__name__}; reported with request id {request_id}",
                    ),
                    scope["path"],
                )
        finally:
            elapsed = time.perf_counter() - start
            route = scope.get("route")
            template = (
                getattr(route, "path", None)
                or scope.get("blastrate.route")
                or _template_of_endpoint(scope)
            )
            self.metrics.requests.labels(scope["method"], template, str(status)).observe(elapsed)
            if access_log.isEnabledFor(logging.INFO):
                access_log.info(
                    "request",
                    extra={
                        "method": scope["method"],
                        "path": scope["path"],
                        "route": template,
                        "status": status,
                        "duration_ms": round(elapsed * 1e3, 3),
                        "client": _client(scope),
                    },
                )
            REQUEST_ID.reset(token)
            CLIENT.reset(client_token)

    async def _answer_from_index(self, scope: Scope, send: Send) -> bool:
        """Answer a repeated GET from the query index; False if it is not there."""
        index = self.query_index
        if index is None or scope["method"] != "GET" or scope["path"] not in index.paths:
            return False
        entry = index.get(scope["path"], scope["query_string"])
        if entry is None:
            return False
        scope["blastrate.route"] = scope["path"]
        self.metrics.cache_lookups.labels(index.paths[scope["path"]], "hit").inc()
        headers = [
            (b"etag", entry.etag.encode()),
            (b"cache-control", b"no-cache"),
            (b"x-cache", b"hit"),
        ]
        if_none_match = None
        for name, value in scope["headers"]:
            if name == b"if-none-match":
                if_none_match = value.decode("latin-1")
        if etag_matches(if_none_match, entry.etag):
            await send({"type": "http.response.start", "status": 304, "headers": headers})
            await send({"type": "http.response.body", "body": b""})
            return True
        headers += [
            (b"content-type", b"application/json"),
            (b"content-length", str(len(entry.body)).encode()),
        ]
        await send({"type": "http.response.start", "status": 200, "headers": headers})
        await send({"type": "http.response.body", "body": entry.body})
        return True


def _template_of_endpoint(scope: Scope) -> str:
    """The path template of the app's route that served ``scope``, else ``"unmatched"``.

    Starlette's own routes (FastAPI's ``/openapi.json``) record their endpoint but not
    themselves, so the route is found by its endpoint.  Mounts (static files) and unknown
    paths stay ``"unmatched"``: a label taken from the raw path would give every new path
    its own time series.
    """
    endpoint = scope.get("endpoint")
    app = scope.get("app")
    if endpoint is not None and app is not None:
        for candidate in getattr(app, "routes", ()):
            if getattr(candidate, "endpoint", None) is endpoint:
                return str(candidate.path)
    return "unmatched"


def _client(scope: Scope) -> str | None:
    client: Any = scope.get("client")
    return f"{client[0]}:{client[1]}" if client else None


async def _send_problem(send: Send, problem: ProblemError, path: str) -> None:
    body = problem_bytes(problem, path)
    headers = [
        (b"content-type", MEDIA_TYPE.encode()),
        (b"content-length", str(len(body)).encode()),
    ]
    if problem.status == 413:
        # The unread remainder of the body is not drained: close the connection.
        headers.append((b"connection", b"close"))
    await send({"type": "http.response.start", "status": problem.status, "headers": headers})
    await send({"type": "http.response.body", "body": body})
