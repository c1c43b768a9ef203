"""The optional API token that guards every route that writes or reveals the host.

With ``BLASTRATE_API_TOKEN`` set, ``PUT``/``DELETE /profiles/{name}``, the ``/srn/jobs``
routes, ``/host`` and ``workload=live`` require ``Authorization: Bearer TOKEN``; without
it they answer 401 with ``WWW-Authenticate: Bearer``.  The model's read-only routes stay
open.  Without the setting nothing is guarded (a service on a private port).
"""

from __future__ import annotations

import hmac
from typing import Annotated

from fastapi import Depends, Request
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer

from app.schemas.problems import FieldProblem, ProblemError
from app.service.state import service

__all__ = ["check_token", "require_token"]

_BEARER = HTTPBearer(
    auto_error=False,
    scheme_name="apiToken",
    description="The service's `BLASTRATE_API_TOKEN`, when it has one.",
)


def check_token(request: Request) -> None:
    """Raise a 401 problem unless the service has no token or the request carries it
    (``Authorization: Bearer TOKEN``)."""
    token = service(request).settings.api_token
    if token is None:
        return
    scheme, _, given = request.headers.get("authorization", "").partition(" ")
    sent = scheme.lower() == "bearer" and bool(given.strip())
    # compare_digest: the time taken does not tell how much of a guess was right.
    if sent and hmac.compare_digest(given.strip().encode(), token.get_secret_value().encode()):
        return
    raise ProblemError(
        "unauthorized",
        "the API token does not match"
        if sent
        else "this route needs the service's API token: send Authorization: Bearer TOKEN",
        [FieldProblem("header.authorization", "wrong token" if sent else "missing")],
        headers={"WWW-Authenticate": 'Bearer realm="blastrate"'},
    )


async def require_token(
    request: Request, _: Annotated[HTTPAuthorizationCredentials | None, Depends(_BEARER)]
) -> None:
    """The route dependency form of :func:`check_token` (and its OpenAPI security)."""
    check_token(request)
