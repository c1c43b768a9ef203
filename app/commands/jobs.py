"""``blastrate jobs submit|status|cancel|wait``: long SRN solves on a service, from the shell.

The commands talk to a running service's ``/srn/jobs`` (``--server``, by default the
local one that ``./scripts/serve`` starts); a service started with ``BLASTRATE_API_TOKEN``
gets the same variable's token from the environment.  ``submit`` takes the files that
``blastrate solve`` takes (JSON or PNML) and prints the job's id; ``wait`` polls until the
job ends and prints its answer as ``solve`` does.

Exit status: 0 ok (``wait``: the job succeeded), 2 bad input, 3 the job failed or was
cancelled or interrupted, 4 server unreachable or busy, 5 server error, 130 on Ctrl-C.
"""

from __future__ import annotations

import os
import time
from typing import Any

import click

from .common import EXIT_MODEL, EXIT_USAGE, CliError, json_option, json_text, write_output
from .remote import DEFAULT_SERVER_TIMEOUT_S, request
from .solve import read_net_request, solve_summary

__all__ = ["jobs"]

DEFAULT_SERVER = "http://127.0.0.1:8000"
_DONE = {"succeeded", "failed", "cancelled", "interrupted"}


def _headers() -> dict[str, str]:
    token = os.environ.get("BLASTRATE_API_TOKEN")
    return {"Authorization": f"Bearer {token}"} if token else {}


def _server_option(function: Any) -> Any:
    return click.option(
        "--server",
        default=DEFAULT_SERVER,
        show_default=True,
        metavar="URL",
        help="The blastrate service that runs the jobs.",
    )(function)


def _job_path(job_id: str) -> str:
    if not job_id or len(job_id) > 64 or not job_id.isalnum():
        raise CliError(f"JOB: {job_id[:64]!r} is not a job id (32 hexadecimal digits)", EXIT_USAGE)
    return f"/srn/jobs/{job_id}"


def _status_line(body: dict[str, Any]) -> str:
    progress = body.get("progress") or {}
    done = ", ".join(
        f"{k} {progress[k]}" for k in ("stage", "states", "edges", "iterations") if k in progress
    )
    return f"{body['id']} {body['status']}" + (f" ({done})" if done else "")


@click.group(short_help="Long SRN solves on a service: submit, status, cancel, wait.")
def jobs() -> None:
    """Queue long SRN solves on a blastrate service and follow them from the shell."""


@jobs.command("submit")
@click.argument("net", metavar="NET")
@click.option(
    "--analysis",
    type=click.Choice(["steady-state", "transient", "absorption"]),
    help="Override the file's analysis.",
)
@click.option("--times", metavar="T1,T2,...", help="Times (s) for transient or absorption.")
@_server_option
@json_option
def submit(net: str, analysis: str | None, times: str | None, server: str, as_json: bool) -> None:
    """Queue the solve of NET (as `blastrate solve` reads it) and print the job's id."""
    body = request(
        server,
        "POST",
        "/srn/jobs",
        DEFAULT_SERVER_TIMEOUT_S,
        json=read_net_request(net, analysis, times),
        headers=_headers(),
    )
    write_output(json_text(body) if as_json else f"{body['id']}\n", None)


@jobs.command("status")
@click.argument("job_id", metavar="JOB")
@_server_option
@json_option
def status(job_id: str, server: str, as_json: bool) -> None:
    """The status and progress of JOB."""
    body = request(server, "GET", _job_path(job_id), DEFAULT_SERVER_TIMEOUT_S, headers=_headers())
    write_output(json_text(body) if as_json else _status_line(body) + "\n", None)


@jobs.command("cancel")
@click.argument("job_id", metavar="JOB")
@_server_option
def cancel(job_id: str, server: str) -> None:
    """Cancel JOB (its worker process is killed if it runs)."""
    import httpx

    url = server.rstrip("/") + _job_path(job_id)
    try:
        response = httpx.delete(url, timeout=DEFAULT_SERVER_TIMEOUT_S, headers=_headers())
    except httpx.HTTPError as exc:
        raise CliError(f"--server: cannot reach server {server}: {exc}", 4) from None
    if response.status_code == 204:
        click.echo(f"{job_id} cancelled")
        return
    # Anything else is the job's record (it had ended) or a problem: read it as usual.
    body = request(server, "GET", _job_path(job_id), DEFAULT_SERVER_TIMEOUT_S, headers=_headers())
    click.echo(_status_line(body))


@jobs.command("wait")
@click.argument("job_id", metavar="JOB")
@_server_option
@click.option(
    "--timeout",
    type=click.FloatRange(min=0, min_open=True),
    default=3600.0,
    show_default=True,
    help="Longest wait for the job to end (s).",
)
@json_option
def wait(job_id: str, server: str, timeout: float, as_json: bool) -> None:
    """Wait for JOB to end and print its answer (as `blastrate solve` does)."""
    path = _job_path(job_id)
    deadline = time.monotonic() + timeout
    delay = 0.1
    while True:
        body = request(server, "GET", path, DEFAULT_SERVER_TIMEOUT_S, headers=_headers())
        if body["status"] in _DONE:
            break
        if time.monotonic() >= deadline:
            raise CliError(f"--timeout: {_status_line(body)} after {timeout:g} s", 4)
        # Polling backs off to a second: cheap for the service, prompt for the user.
        time.sleep(min(delay, max(deadline - time.monotonic(), 0.0)))
        delay = min(delay * 1.5, 1.0)
    if body["status"] != "succeeded":
        problem = body.get("problem") or {}
        reason = problem.get("detail") or body["status"]
        raise CliError(f"job {body['id']}: {body['status']}: {reason}", EXIT_MODEL)
    result = body["result"]
    write_output(json_text(result) if as_json else solve_summary(result), None)
