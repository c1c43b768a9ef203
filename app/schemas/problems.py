"""RFC 9457 problem details: every error the service returns, in one format.

A problem body always has ``type``, ``title``, ``status``, ``detail`` and ``instance``,
plus ``request_id`` and an ``errors`` list in which each entry names the offending
``field`` and, when a limit was reached, the ``limit``, the value ``allowed``, the
``actual`` value or count, and ``raise_with``: the setting (``BLASTRATE_MAX_STATES``) that
raises it, or null for a limit fixed by the model.  Library exceptions (``srn``,
``queues``, ``transport``) are translated here, so the libraries never know about HTTP.

Problem types are relative URIs ``/problems/<slug>``; ``GET /problems/{slug}`` describes
each one.
"""

from __future__ import annotations

import contextvars
import dataclasses
import json
import math
from collections.abc import Collection, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from http import HTTPStatus
from typing import Any

import queues
import srn
import transport
from host import WorkloadError  # light: the packages load their parts on first use

from .units import QuantityError

__all__ = [
    "MEDIA_TYPE",
    "PROBLEM_TYPES",
    "REQUEST_ID",
    "FieldProblem",
    "ProblemError",
    "ProblemType",
    "limit_setting",
    "only_sent_fields",
    "problem_body",
    "problem_bytes",
    "problem_from_exception",
    "status_phrase",
    "translated_errors",
]

#: The request id of the request being served (set by the service middleware).
REQUEST_ID: contextvars.ContextVar[str | None] = contextvars.ContextVar("request_id", default=None)

MEDIA_TYPE = "application/problem+json"


@dataclass(frozen=True)
class ProblemType:
    """One kind of problem: its slug (in ``/problems/<slug>``), HTTP status and meaning."""

    slug: str
    status: int
    title: str
    description: str
    cli_exit: int


def _by_slug(*types: ProblemType) -> dict[str, ProblemType]:
    # A repeated slug would silently replace the first entry's title and meaning.
    table = {p.slug: p for p in types}
    if len(table) != len(types):
        raise ValueError("two problem types share a slug")
    return table


PROBLEM_TYPES: dict[str, ProblemType] = _by_slug(
    ProblemType(
        "validation-error",
        422,
        "The request does not match the API schema",
        "A parameter or body field is missing, has the wrong type or is out of the "
        "documented range. Each entry of `errors` names the field.",
        2,
    ),
    ProblemType(
        "invalid-parameter",
        422,
        "A parameter is outside what the model accepts",
        "The request is well-formed, but a value is out of the model's domain (for "
        "example a NIC buffer smaller than the coalescing batch, or an unknown unit).",
        2,
    ),
    ProblemType(
        "invalid-model",
        422,
        "The stochastic reward net is not valid",
        "A place, transition, arc or expression of the posted net is malformed, names "
        "an unknown symbol, or gives an invalid value at a reachable marking.",
        2,
    ),
    ProblemType(
        "unsolvable-model",
        422,
        "The model has no answer of the requested kind",
        "For example a chain that is not ergodic (no unique steady state), absorption "
        "that is not certain, or a loop of vanishing markings.",
        3,
    ),
    ProblemType(
        "never-completes",
        422,
        "The transfer never completes",
        "The loss probability is 1 or more at every sending rate: no rate lets the "
        "transfer finish.",
        3,
    ),
    ProblemType(
        "limit-exceeded",
        422,
        "A service limit was reached",
        "The model or the request needs more than a configured limit allows: states, "
        "expression length, solve wall time, rates per request... The `errors` entry "
        "names the limit, the value allowed, the actual value and, in `raise_with`, "
        "the setting that raises it.",
        3,
    ),
    ProblemType(
        "malformed-json",
        400,
        "The request body is not valid JSON",
        "The body could not be parsed as JSON (a syntax error, or bytes that are not "
        "UTF-8); the `errors` entry gives the position when known.",
        2,
    ),
    ProblemType(
        "body-too-large",
        413,
        "The request body is too large",
        "The body exceeds the `max_body_bytes` limit.",
        2,
    ),
    ProblemType(
        "unsupported-media-type",
        415,
        "Unsupported media type",
        "Request bodies must be JSON, sent with `Content-Type: application/json`.",
        2,
    ),
    ProblemType(
        "not-found",
        404,
        "Not found",
        "No such resource: an unknown path or an unknown profile name.",
        2,
    ),
    ProblemType(
        "method-not-allowed",
        405,
        "Method not allowed",
        "The path exists but not with this method; the `Allow` header lists those it accepts.",
        2,
    ),
    ProblemType(
        "too-many-requests",
        429,
        "Too many large solves are waiting",
        "Every solver worker is busy and the wait queue is full, or `max_concurrent_sweeps` "
        "sweeps are running; retry after the number of seconds in `Retry-After`.",
        4,
    ),
    ProblemType(
        "storage-unavailable",
        503,
        "A database of the service is unavailable",
        "The job database or the database of stored host profiles could not be read "
        "or written (`detail` says which); retry after `Retry-After` seconds.",
        5,
    ),
    ProblemType(
        "not-ready",
        503,
        "The service is still starting",
        "The default nets are being compiled; `GET /readyz` turns 200 when they are.",
        4,
    ),
    ProblemType(
        "solver-not-converged",
        500,
        "No steady-state solver converged",
        "The model is valid, but no route of the steady-state cascade (direct and "
        "iterative) reached the residual target within its time and memory budgets.  The "
        "`detail` lists every route tried and the best residual reached.  This is a "
        "limitation of the server's solver, not an error in the request.",
        1,
    ),
    ProblemType(
        "service-unavailable",
        503,
        "The server could not finish the solve",
        "A fault on the server's side, not in the request: a solver process died (killed "
        "by the operating system, for instance), or the server is shutting down.  The "
        "same request may succeed; retry after the number of seconds in `Retry-After`.",
        5,
    ),
    ProblemType(
        "profile-read-only",
        409,
        "Built-in profiles cannot be changed",
        "The built-in host profiles (the paper's figures) are read-only; store your "
        "values under another name.",
        2,
    ),
    ProblemType(
        "probe-disabled",
        404,
        "The live probe is disabled",
        "This service does not probe its host (setting `probe_enabled` is false), so it "
        "has no live workload to report or compute from.",
        2,
    ),
    ProblemType(
        "probe-unavailable",
        503,
        "No live probe of this host",
        "The live probe has not finished its first sampling window yet (retry after "
        "`Retry-After` seconds), or it failed.",
        4,
    ),
    ProblemType(
        "unauthorized",
        401,
        "Authentication required",
        "This route writes or reveals the host, and the service was started with "
        "`BLASTRATE_API_TOKEN`: send `Authorization: Bearer TOKEN`.",
        2,
    ),
    ProblemType(
        "internal-error",
        500,
        "Internal error",
        "An unexpected failure, logged with the request id. Please report it.",
        1,
    ),
    ProblemType(
        "http-error",
        400,
        "Bad request",
        "A request the HTTP layer could not accept.",
        2,
    ),
)


def limit_setting(limit: str | None) -> str | None:
    """The environment variable that raises ``limit``, or None for a fixed limit.

    Examples
    --------
    >>> limit_setting("max_states")
    'BLASTRATE_MAX_STATES'
    >>> limit_setting("max_tasks") is None
    True
    """
    from app.settings import Settings

    if limit is None or limit not in Settings.model_fields:
        return None
    return "BLASTRATE_" + limit.upper()


@dataclass(frozen=True)
class FieldProblem:
    """What is wrong with one field.

    Attributes
    ----------
    field : str
        Dotted location, e.g. ``"query.cpu_tasks"`` or ``"body.net.transitions.t1.rate"``.
    reason : str
        Human-readable reason.
    limit : str or None
        Name of the limit reached (a setting such as ``"max_states"``), if any.
    allowed, actual : float or None
        The limit's value and the value or count the request reached.
    """

    field: str
    reason: str
    limit: str | None = None
    allowed: float | None = None
    actual: float | None = None

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"field": self.field, "reason": self.reason}
        if self.limit is not None:
            out["limit"] = self.limit
            out["allowed"] = _json_number(self.allowed)
            out["actual"] = _json_number(self.actual)
            out["raise_with"] = limit_setting(self.limit)
        return out


def _json_number(value: float | None) -> float | int | None:
    if value is None or not math.isfinite(value):
        return None
    return int(value) if float(value).is_integer() else float(value)


class ProblemError(Exception):
    """An error to be answered with a problem+json body.

    Parameters
    ----------
    slug : str
        Key of :data:`PROBLEM_TYPES`.
    detail : str
        Explanation of this occurrence.
    errors : iterable of FieldProblem
        The fields at fault.
    status : int, optional
        Overrides the problem type's status (used for plain HTTP errors).
    title : str, optional
        Overrides the problem type's title.
    headers : dict, optional
        Extra response headers (``Allow``, ``Retry-After``).
    """

    def __init__(
        self,
        slug: str,
        detail: str,
        errors: Iterable[FieldProblem] = (),
        *,
        status: int | None = None,
        title: str | None = None,
        headers: Mapping[str, str] | None = None,
    ) -> None:
        super().__init__(detail)
        kind = PROBLEM_TYPES[slug]
        self.slug = slug
        self.detail = detail
        self.errors = list(errors)
        self.status = status if status is not None else kind.status
        self.title = title if title is not None else kind.title
        self.headers = dict(headers or {})

    def to_dict(self, instance: str) -> dict[str, Any]:
        """The problem+json body for a request to ``instance`` (the request path)."""
        return problem_body(
            self.slug,
            self.detail,
            instance,
            errors=self.errors,
            status=self.status,
            title=self.title,
        )

    def restricted_to(
        self, sent: Collection[str], related: Mapping[str, Sequence[str]] | None = None
    ) -> ProblemError:
        """This problem with only the entries that name a field the client sent.

        A library failure is reported under the library's own parameter name, mapped to
        the API's; when the mapping leads to a field the request did not contain (an
        internal quantity such as the arrival rate, or a profile value the client never
        overrode), the entry is dropped rather than blame a field the client never saw.
        The reasons stay in ``detail``.

        Parameters
        ----------
        sent : collection of str
            Dotted locations present in the request (``query.line_rate``,
            ``body.host.buffer_packets``); an entry naming a location inside one of them,
            or one that contains one of them, is kept.
        related : dict of str to list of str, optional
            Last component of a field -> the inputs that share the blame (for example
            ``coalesce_packets`` -> ``buffer_packets``: a batch larger than the buffer is
            as much the buffer's fault).  An entry about a field not sent is moved to
            those of its related fields that were sent, with the same reason.
        """
        if all(_is_sent(e.field, sent) for e in self.errors):
            return self
        kept: list[FieldProblem] = []
        detail = self.detail
        for entry in self.errors:
            if _is_sent(entry.field, sent):
                kept.append(entry)
                continue
            head, _, last = entry.field.rpartition(".")
            moved = [
                dataclasses.replace(entry, field=f"{head}.{other}" if head else other)
                for other in (related or {}).get(last, ())
            ]
            kept.extend(e for e in moved if _is_sent(e.field, sent) and e not in kept)
            detail = detail.replace(entry.field + ": ", "")
        problem = ProblemError(
            self.slug, detail, kept, status=self.status, title=self.title, headers=self.headers
        )
        return problem

    @classmethod
    def from_dict(cls, body: Mapping[str, Any]) -> ProblemError:
        """Rebuild a problem from :meth:`to_dict` output (e.g. sent back by a worker)."""
        slug = str(body["type"]).rsplit("/", 1)[-1]
        errors = [
            FieldProblem(**{k: v for k, v in e.items() if k != "raise_with"})
            for e in body.get("errors", [])
        ]
        return cls(
            slug if slug in PROBLEM_TYPES else "internal-error",
            str(body.get("detail", "")),
            errors,
            status=int(body["status"]),
            title=str(body.get("title", "")),
        )


def problem_body(
    slug: str,
    detail: str,
    instance: str,
    *,
    errors: Sequence[FieldProblem] = (),
    status: int | None = None,
    title: str | None = None,
) -> dict[str, Any]:
    """The JSON object of a problem response."""
    kind = PROBLEM_TYPES[slug]
    return {
        "type": f"/problems/{slug}",
        "title": title or kind.title,
        "status": status or kind.status,
        "detail": detail,
        "instance": instance,
        "request_id": REQUEST_ID.get(),
        "errors": [e.to_dict() for e in errors],
    }


def problem_bytes(problem: ProblemError, instance: str) -> bytes:
    """The encoded body of ``problem`` (compact JSON)."""
    return json.dumps(problem.to_dict(instance), separators=(",", ":")).encode()


# -- library exceptions --------------------------------------------------------------------

_SRN_UNSOLVABLE = (srn.NotErgodicError, srn.AbsorptionError, srn.VanishingLoopError)


def problem_from_exception(
    exc: BaseException,
    aliases: Mapping[str, str] | None = None,
    prefix: str = "",
) -> ProblemError | None:
    """Translate a library exception into a problem, or None if it is not one of ours.

    Parameters
    ----------
    exc : Exception
        Raised by ``srn``, ``queues``, ``transport`` or the unit parser.
    aliases : dict, optional
        Library parameter name -> the API's field name (e.g. ``"capacity"`` ->
        ``"buffer_packets"``); the name is looked up by its first dotted component.
    prefix : str
        Prepended to the field, e.g. ``"body."`` or ``"query."``.
    """
    names = aliases or {}

    def where(name: str | None, default: str) -> str:
        raw = name or default
        head, dot, rest = raw.partition(".")
        mapped = names.get(raw, names.get(head, head) + dot + rest)
        return prefix + mapped

    if isinstance(exc, ProblemError):
        return exc
    if isinstance(exc, QuantityError):
        return ProblemError(
            "invalid-parameter", str(exc), [FieldProblem(where(exc.field, "value"), exc.reason)]
        )

    def reason(error: ValueError, parameter: str) -> str:
        # The libraries prefix their messages with their own parameter name.
        text = str(error)
        return text[len(parameter) + 1 :].strip() if text.startswith(parameter + ":") else text

    if isinstance(exc, transport.NoCompletingRateError):
        return ProblemError(
            "never-completes", str(exc), [FieldProblem(where(exc.parameter, "loss"), str(exc))]
        )
    if isinstance(exc, transport.TransportParameterError | queues.QueueParameterError):
        field_name = where(exc.parameter, "value")
        why = reason(exc, exc.parameter)
        return ProblemError(
            "invalid-parameter", f"{field_name}: {why}", [FieldProblem(field_name, why)]
        )
    if isinstance(exc, WorkloadError):
        field_name = where(getattr(exc, "field", None), "workload")
        limit = getattr(exc, "limit", None)
        entry = FieldProblem(
            field_name,
            str(exc),
            limit,
            getattr(exc, "maximum", None) if limit else None,
            getattr(exc, "reached", None) if limit else None,
        )
        return ProblemError("limit-exceeded" if limit else "invalid-parameter", str(exc), [entry])
    if isinstance(exc, srn.LimitExceededError):
        # Without the engine's library hint (srn.Limits(...)): the problem names the
        # service's own setting in `raise_with`.
        return ProblemError(
            "limit-exceeded",
            exc.summary,
            [
                FieldProblem(
                    where(None, "net"),
                    exc.summary,
                    exc.limit,
                    float(exc.maximum),
                    float(exc.reached),
                )
            ],
        )
    if isinstance(exc, srn.ConvergenceError):
        # A valid chain the cascade could not solve: the server's limitation (5xx).
        return ProblemError(
            "solver-not-converged", str(exc), [FieldProblem(where(exc.field, "net"), str(exc))]
        )
    if isinstance(exc, _SRN_UNSOLVABLE):
        return ProblemError(
            "unsolvable-model", str(exc), [FieldProblem(where(exc.field, "net"), str(exc))]
        )
    if isinstance(exc, srn.SRNError):
        return ProblemError(
            "invalid-model", str(exc), [FieldProblem(where(exc.field, "net"), str(exc))]
        )
    return None


@contextmanager
def translated_errors(aliases: Mapping[str, str] | None = None, prefix: str = "") -> Iterator[None]:
    """Turn library exceptions raised inside the block into :class:`ProblemError`.

    Examples
    --------
    >>> with translated_errors({"capacity": "buffer_packets"}, "body."):  # doctest: +SKIP
    ...     queues.bulk_service_queue(...)
    """
    try:
        yield
    except (ValueError, ProblemError) as exc:
        problem = problem_from_exception(exc, aliases, prefix)
        if problem is None:
            raise
        raise problem from exc


def _is_sent(field: str, sent: Collection[str]) -> bool:
    if field in sent:
        return True
    return any(
        field.startswith((s + ".", s + "[")) or s.startswith((field + ".", field + "["))
        for s in sent
    )


@contextmanager
def only_sent_fields(
    sent: Collection[str], related: Mapping[str, Sequence[str]] | None = None
) -> Iterator[None]:
    """Restrict the problems raised inside the block to the fields the client sent.

    See :meth:`ProblemError.restricted_to`.
    """
    try:
        yield
    except ProblemError as exc:
        restricted = exc.restricted_to(sent, related)
        if restricted is exc:
            raise
        raise restricted from exc


def status_phrase(status: int) -> str:
    """The reason phrase of an HTTP status ("Not Found")."""
    try:
        return HTTPStatus(status).phrase
    except ValueError:
        return "Error"
