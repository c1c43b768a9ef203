"""Asking a running blastrate service (``--server URL``) instead of computing locally."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

import click

from .common import EXIT_SERVER, EXIT_UNREACHABLE, EXIT_USAGE, CliError, error_from_problem

__all__ = ["DEFAULT_SERVER_TIMEOUT_S", "request", "server_option"]

#: How long to wait for a server's answer when ``--timeout`` is not given (s).
DEFAULT_SERVER_TIMEOUT_S = 30.0

F = TypeVar("F", bound=Callable[..., Any])


def server_option(function: F) -> F:
    """The ``--server URL`` option: ask this service instead of computing locally."""
    return click.option(
        "--server",
        metavar="URL",
        help="Ask this blastrate service (e.g. http://127.0.0.1:8000) instead of computing here.",
    )(function)


def request(server: str, method: str, path: str, timeout: float, **kwargs: Any) -> dict[str, Any]:
    """One request to ``server``; the JSON answer, or a :class:`CliError`.

    Parameters
    ----------
    server : str
        Base URL of the service.
    method, path : str
        HTTP method and path, e.g. ``"POST"``, ``"/srn/solve"``.
    timeout : float
        Seconds to wait for the answer.
    **kwargs
        Passed to :func:`httpx.request` (``json=``, ``params=``).

    Raises
    ------
    CliError
        Exit 4 if the server cannot be reached, times out or is busy; the problem's own
        status (2, 3) for bad input or a model without an answer; 5 for a server fault.
    """
    import httpx

    url = server.rstrip("/") + path
    try:
        response = httpx.request(method, url, timeout=timeout, **kwargs)
    except httpx.TimeoutException:
        raise CliError(
            f"--server: {server} did not answer within {timeout:g} s; raise it with --timeout",
            EXIT_UNREACHABLE,
        ) from None
    except httpx.InvalidURL as exc:
        raise CliError(f"--server: {exc}", 2) from None
    except httpx.HTTPError as exc:
        raise CliError(f"--server: cannot reach server {server}: {exc}", EXIT_UNREACHABLE) from None
    try:
        body = response.json()
    except ValueError:
        raise CliError(
            f"--server: {server} answered {response.status_code} without JSON", EXIT_SERVER
        ) from None
    if response.status_code >= 400:
        if response.status_code == 401:
            raise CliError(
                f"--server: {server} needs its API token for this: set BLASTRATE_API_TOKEN "
                "(sent as Authorization: Bearer)",
                EXIT_USAGE,
            )
        if response.status_code == 429:
            retry = response.headers.get("Retry-After")
            detail = str(body.get("detail", "server busy")) if isinstance(body, dict) else ""
            after = f"; retry after {retry} s" if retry else ""
            raise CliError(f"--server: {detail}{after}", EXIT_UNREACHABLE)
        if not isinstance(body, dict):
            raise CliError(f"--server: {server} answered {response.status_code}", EXIT_SERVER)
        raise error_from_problem(body, response.status_code, local=False)
    if not isinstance(body, dict):
        raise CliError(f"--server: {server} answered an unexpected document", EXIT_SERVER)
    return body
