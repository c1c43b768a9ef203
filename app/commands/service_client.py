"""What the ``probe`` and ``profiles`` commands share: one-line errors with the CLI's
exit statuses, and requests to a running service (``--server URL``).

The statuses are the CLI's (see :mod:`app.commands`): 2 bad input, 4 server unreachable,
5 server error, 1 internal error.
"""

from __future__ import annotations

import json
import sys
from typing import Any

import click

__all__ = [
    "EXIT_INTERNAL",
    "EXIT_SERVER",
    "EXIT_UNREACHABLE",
    "EXIT_USAGE",
    "CommandError",
    "call_service",
    "print_json",
]

EXIT_INTERNAL = 1
EXIT_USAGE = 2
EXIT_UNREACHABLE = 4
EXIT_SERVER = 5


class CommandError(click.ClickException):
    """A failure shown as one line ``blastrate: error: <field>: <reason>`` on stderr."""

    def __init__(self, message: str, status: int = EXIT_USAGE) -> None:
        super().__init__(message)
        # Click declares exit_code on the class; each error sets its own status.
        setattr(self, "exit_code", status)  # noqa: B010

    def show(self, file: Any = None) -> None:
        click.echo(f"blastrate: error: {self.message}", file=file or sys.stderr)


def print_json(body: Any) -> None:
    """Indented JSON on stdout."""
    click.echo(json.dumps(body, indent=2, allow_nan=False))


def call_service(
    server: str, method: str, path: str, *, timeout: float = 30.0, **kwargs: Any
) -> tuple[int, Any]:
    """One request to a running service: (status, JSON body or None).

    Raises
    ------
    CommandError
        Exit 4 when the server cannot be reached or times out; 5 for a 5xx answer or one
        that is not JSON; for a 4xx problem, exit 2 with the problem's first field and
        reason.
    """
    import httpx

    url = server.rstrip("/") + path
    try:
        response = httpx.request(method, url, timeout=timeout, **kwargs)
    except httpx.TimeoutException:
        raise CommandError(
            f"--server: {server} did not answer within {timeout:g} s", EXIT_UNREACHABLE
        ) from None
    except httpx.InvalidURL as exc:
        raise CommandError(f"--server: {exc}", EXIT_USAGE) from None
    except httpx.HTTPError as exc:
        raise CommandError(f"--server: cannot reach {server}: {exc}", EXIT_UNREACHABLE) from None
    if response.status_code == 204:
        return 204, None
    try:
        body = response.json()
    except ValueError:
        raise CommandError(
            f"--server: {server} answered {response.status_code} without JSON", EXIT_SERVER
        ) from None
    if response.status_code >= 500:
        detail = body.get("detail", "") if isinstance(body, dict) else ""
        retry = response.headers.get("Retry-After")
        after = f"; retry after {retry} s" if retry else ""
        raise CommandError(
            f"--server: {server} answered {response.status_code}: {detail}{after}", EXIT_SERVER
        )
    if response.status_code >= 400:
        errors = body.get("errors") if isinstance(body, dict) else None
        if errors:
            first = errors[0]
            raise CommandError(f"{first.get('field')}: {first.get('reason')}", EXIT_USAGE)
        detail = body.get("detail", "") if isinstance(body, dict) else ""
        raise CommandError(f"--server: {response.status_code} {detail}", EXIT_USAGE)
    return response.status_code, body
