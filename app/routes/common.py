"""OpenAPI documentation of the responses the routes share."""

from __future__ import annotations

from typing import Any

from ..problems import PROBLEM_TYPES
from ..schemas import Problem

__all__ = ["NOT_MODIFIED", "problem_responses"]

_DESCRIPTIONS = {
    404: "Not found (problem+json).",
    413: "Request body larger than `max_body_bytes` (problem+json).",
    415: "Request body is not JSON (problem+json).",
    422: "Invalid input, a model with no answer, or a limit reached; `errors` names the field "
    "and the limit (problem+json).",
    429: "Every solver worker is busy and the queue is full; see `Retry-After` (problem+json).",
    503: "Not ready yet, shutting down, a solver process failed on the server's side, or the "
    "job database is unreachable; retry after `Retry-After` seconds (problem+json).",
}

#: The 304 answer to a GET whose ``If-None-Match`` matches the result's ETag.
NOT_MODIFIED: dict[int | str, dict[str, Any]] = {
    304: {"description": "Not modified: the result still has the ETag in `If-None-Match`."}
}


def problem_responses(*statuses: int) -> dict[int | str, dict[str, Any]]:
    """``responses=`` entries for problem+json errors with these statuses (plus 413)."""
    out: dict[int | str, dict[str, Any]] = {}
    for status in sorted({413, *statuses}):
        out[status] = {"model": Problem, "description": _DESCRIPTIONS[status]}
    return out


assert {p.status for p in PROBLEM_TYPES.values()} >= set(_DESCRIPTIONS)
