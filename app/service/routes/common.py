"""OpenAPI documentation of the responses the routes share."""

from __future__ import annotations

import difflib
from collections import Counter
from typing import Any, TypeVar

from fastapi import Request
from fastapi.exceptions import RequestValidationError
from pydantic import BaseModel, ValidationError

from app.schemas.bodies import Problem
from app.schemas.problems import PROBLEM_TYPES, FieldProblem, ProblemError

__all__ = [
    "NOT_MODIFIED",
    "problem_responses",
    "sent_fields",
    "strict_query",
    "validated_query",
]

Model = TypeVar("Model", bound=BaseModel)

# At most this many unknown or repeated names are listed (the query can be long).
_MAX_LISTED = 10

_DESCRIPTIONS = {
    400: "Request body is not valid JSON (problem+json).",
    404: "Not found (problem+json).",
    413: "Request body larger than `max_body_bytes` (problem+json).",
    401: "The service requires its API token for this route: `Authorization: Bearer TOKEN` "
    "(problem+json).",
    409: "A built-in profile cannot be changed (problem+json).",
    415: "Request body is not JSON (problem+json).",
    422: "Invalid input, a model with no answer, or a limit reached; `errors` names the field "
    "and the limit (problem+json).",
    429: "Every solver worker is busy and the queue is full; see `Retry-After` (problem+json).",
    503: "Not ready yet, shutting down, a solver process failed on the server's side, no live "
    "probe window, or a database (jobs, profiles) is unreachable; see `Retry-After` "
    "(problem+json).",
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


def strict_query(request: Request, model: type[BaseModel]) -> dict[str, str]:
    """The query parameters of ``request``, each one a field of ``model``, each once.

    A misspelt parameter (``linerate=10Gbps``, or the answer's own ``line_rate_bps``) would
    otherwise be ignored and the default answered with 200; a repeated one would be
    ambiguous.  Both are refused, like the unknown fields of a POST body.

    Raises
    ------
    ProblemError
        ``validation-error`` (422) naming each unknown parameter, with the closest valid
        name, and each repeated one.
    """
    items = request.query_params.multi_items()
    allowed = model.model_fields
    counts = Counter(name for name, _ in items)
    errors: list[FieldProblem] = []
    for name, count in counts.items():
        shown = name[:64]
        if name not in allowed:
            close = difflib.get_close_matches(name, allowed, n=1, cutoff=0.6)
            hint = f"; did you mean {close[0]!r}?" if close else ""
            errors.append(FieldProblem(f"query.{shown}", f"unknown parameter{hint}"))
        elif count > 1:
            errors.append(FieldProblem(f"query.{shown}", f"given {count} times; give it once"))
    if errors:
        listed = ", ".join(e.field for e in errors[:_MAX_LISTED])
        raise ProblemError(
            "validation-error",
            f"unknown or repeated query parameter(s): {listed}; accepted: " + ", ".join(allowed),
            errors[:_MAX_LISTED],
        )
    return dict(items)


def validated_query(model: type[Model], params: dict[str, str]) -> Model:
    """``model`` validated from the query ``params``, with FastAPI's error locations."""
    try:
        return model.model_validate(params)
    except ValidationError as exc:
        raise RequestValidationError(
            [{**e, "loc": ("query", *e["loc"])} for e in exc.errors(include_url=False)]
        ) from None


def sent_fields(model: BaseModel, prefix: str = "body") -> list[str]:
    """Dotted locations of the fields the client set in a request body.

    Nested models are followed; lists, dicts and plain values are leaves.  Defaults that
    the client left out are not included.

    Examples
    --------
    >>> from app.schemas.bodies import BottleneckRateRequest
    >>> body = BottleneckRateRequest.model_validate({
    ...     "workload": {"cpu_tasks": 1, "io_tasks": 0},
    ...     "transfer": {"file_size_bytes": 10, "propagation_delay_s": 0.1}})
    >>> sent_fields(body)
    ['body.transfer.file_size_bytes', 'body.transfer.propagation_delay_s', \
'body.workload.cpu_tasks', 'body.workload.io_tasks']
    """
    out: list[str] = []
    for name in sorted(model.model_fields_set):
        value = getattr(model, name)
        where = f"{prefix}.{name}"
        if isinstance(value, BaseModel):
            out.extend(sent_fields(value, where) or [where])
        else:
            out.append(where)
    return out
