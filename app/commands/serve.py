"""``blastrate serve``: run the HTTP service under uvicorn."""

from __future__ import annotations

import os
import socket

import click

from .common import EXIT_USAGE, CliError

__all__ = ["LOG_LEVELS", "serve"]

LOG_LEVELS = ("debug", "info", "warning", "error")


@click.command(short_help="Run the HTTP service.")
@click.option("--host", default="127.0.0.1", show_default=True, help="Bind address.")
@click.option(
    "--port", type=click.IntRange(1, 65_535), default=8000, show_default=True, help="TCP port."
)
@click.option(
    "--workers",
    type=click.IntRange(min=1),
    default=1,
    show_default=True,
    help="Worker processes.",
)
@click.option(
    "--log-level",
    type=click.Choice(LOG_LEVELS),
    help="Default: BLASTRATE_LOG_LEVEL, or info.",
)
def serve(host: str, port: int, workers: int, log_level: str | None) -> None:
    """Run the HTTP service (limits come from BLASTRATE_* variables; Ctrl-C stops it).

    \b
    Example:
      blastrate serve --port 9000 --workers 2
    """
    _check_bind(host, port)
    import uvicorn

    from app.runtime.observability import logging_config
    from app.service.connections import BoundedHttpProtocol, raise_file_limit

    if log_level is not None:
        # The app reads its settings from the environment (in every uvicorn worker).
        os.environ["BLASTRATE_LOG_LEVEL"] = log_level
    level = os.environ.get("BLASTRATE_LOG_LEVEL", "info").lower()
    raise_file_limit()
    uvicorn.run(
        "app.main:app",
        host=host,
        port=port,
        workers=workers,
        log_config=logging_config(level if level in LOG_LEVELS else "info"),
        access_log=False,
        server_header=False,
        http=BoundedHttpProtocol,
    )


def _check_bind(host: str, port: int) -> None:
    """Refuse a port that cannot be bound as a usage error naming ``--port`` (uvicorn
    would log it and exit 3, the status of a model without an answer)."""
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    except socket.gaierror as exc:
        raise CliError(f"--host: cannot resolve {host!r}: {exc.strerror}", EXIT_USAGE) from None
    family, kind, proto, _, address = infos[0]
    with socket.socket(family, kind, proto) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as uvicorn binds
        try:
            probe.bind(address)
        except OSError as exc:
            raise CliError(
                f"--port: cannot bind {host}:{port}: {exc.strerror}", EXIT_USAGE
            ) from None
