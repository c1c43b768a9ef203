"""What one running app holds: settings, cache, metrics, the solver pool, readiness."""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from fastapi import Request
from starlette.responses import Response

from .cache import CachedBody, QueryIndex, ResultCache, cache_key, etag_matches
from .observability import Metrics
from .pool import SolvePool
from .settings import Settings

__all__ = ["ServiceState", "encode", "respond", "service"]


@dataclass
class ServiceState:
    """Everything the routes share, created by :func:`app.factory.create_app`."""

    settings: Settings
    metrics: Metrics
    cache: ResultCache
    pool: SolvePool
    query_index: QueryIndex
    ready: bool = False
    compiled_nets: int = 0
    warm_up_error: str | None = None
    shutting_down: bool = False
    extras: dict[str, Any] = field(default_factory=dict)

    def cached(self, kind: str, inputs: Any) -> tuple[str, CachedBody | None]:
        """The cache key of ``inputs`` and the cached body, if any (counted in metrics)."""
        key = cache_key(kind, inputs)
        entry = self.cache.get(key)
        self.metrics.cache_lookups.labels(kind, "hit" if entry else "miss").inc()
        return key, entry

    def store(self, key: str, body: dict[str, Any]) -> CachedBody:
        """Encode and cache a result body."""
        entry = self.cache.put(key, encode(body))
        self.metrics.cache_entries.set(len(self.cache))
        return entry

    def timed(self, kind: str, where: str, compute: Callable[[], Any]) -> Any:
        """Run ``compute`` and record its duration in the solve histogram."""
        start = time.perf_counter()
        try:
            return compute()
        finally:
            self.metrics.solves.labels(kind, where).observe(time.perf_counter() - start)


def service(request: Request) -> ServiceState:
    """The app's :class:`ServiceState`."""
    state: ServiceState = request.app.state.service
    return state


def encode(body: Any) -> bytes:
    """Compact JSON; NaN and infinities are refused (the API never sends them)."""
    return json.dumps(body, separators=(",", ":"), allow_nan=False).encode()


def respond(request: Request, entry: CachedBody, hit: bool) -> Response:
    """The response for a (possibly cached) result: 200 with an ETag, or 304 on GET."""
    headers = {"ETag": entry.etag, "Cache-Control": "no-cache", "X-Cache": "hit" if hit else "miss"}
    if request.method == "GET" and etag_matches(request.headers.get("if-none-match"), entry.etag):
        return Response(status_code=304, headers=headers)
    return Response(entry.body, media_type="application/json", headers=headers)
