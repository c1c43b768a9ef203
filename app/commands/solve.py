"""``blastrate solve``: a general stochastic reward net from a file, as ``POST /srn/solve``.

The file is a ``POST /srn/solve`` body or a bare net in JSON, or a PNML net
(:func:`app.operations.net_files.read_net_request`).
"""

from __future__ import annotations

import dataclasses
from typing import Any

import click

from .common import EXIT_USAGE, CliError, json_option, json_text, write_output
from .local import DEFAULT_LOCAL_TIMEOUT_S, Reporter, run_local
from .method import max_states_option, refuse_remote_max_states, timeout_option
from .remote import DEFAULT_SERVER_TIMEOUT_S, request, server_option

__all__ = ["read_net_request", "solve", "solve_summary"]


def read_net_request(path: str, analysis: str | None, times: str | None) -> dict[str, Any]:
    """The ``POST /srn/solve`` body for the file ``path`` (``-`` for stdin).

    Parameters
    ----------
    path : str
        The net: JSON (a request or a bare net) or PNML (``.pnml``, ``.xml``, or text
        starting with ``<``).
    analysis : str or None
        ``--analysis``, overriding the file's.
    times : str or None
        ``--times``: comma-separated seconds, overriding the file's.
    """
    from app.operations.net_files import NetFileError
    from app.operations.net_files import read_net_request as read_file

    try:
        request_body = read_file(path, keep_pnml=True)
    except NetFileError as exc:
        raise CliError(str(exc), EXIT_USAGE) from None
    if analysis:
        request_body["analysis"] = analysis
    if times:
        try:
            request_body["times"] = [float(t) for t in times.split(",") if t.strip()]
        except ValueError:
            raise CliError("--times: expected comma-separated seconds", EXIT_USAGE) from None
    return request_body


def _measure_lines(measures: dict[str, Any]) -> list[str]:
    lines = []
    for group, label in (
        ("rewards", "reward"),
        ("accumulated_rewards", "accumulated reward over [0, t]"),
        ("probabilities", "probability"),
        ("mean_tokens", "mean tokens"),
        ("throughput", "throughput"),
    ):
        for name, value in (measures.get(group) or {}).items():
            lines.append(f"  {label} {name} = {value}")
    return lines


def solve_summary(body: dict[str, Any]) -> str:
    """The ``/srn/solve`` answer as text: sizes, residual or error bound, measures."""
    lines = [
        f"states {body['n_states']}, edges {body['n_edges']}, vanishing {body['n_vanishing']}, "
        f"dead {body['n_dead_states']} ({body['analysis']}, solved in {body['solved_in']})"
    ]
    if body.get("steady_state"):
        ss = body["steady_state"]
        how = ", ".join(filter(None, (ss["method"], ss.get("note"))))
        lines.append(f"residual ||pi Q||_1 = {ss['residual']:.3e} ({how})")
        lines.extend(_measure_lines(ss["measures"]))
    if body.get("transient"):
        tr = body["transient"]
        bound = max((b for b in tr["error_bound"] if b is not None), default=0.0)
        lines.append(f"times {tr['times']} ({tr['method']}, error bound {bound:.1e})")
        lines.extend(_measure_lines(tr["measures"]))
    if body.get("absorption"):
        ab = body["absorption"]
        lines.append(
            f"time to absorption: mean {ab['mean_s']:.6g} s, variance {ab['variance_s2']:.6g} s^2"
        )
        for q in ab["quantiles"]:
            lines.append(f"  p{q['level'] * 100:g} = {q['seconds']:.6g} s")
    return "\n".join(lines)


def _solve_job(payload: dict[str, Any], report: Reporter) -> dict[str, Any]:
    from app.operations.srn_solve import SolveBudget, solve_srn

    budget = SolveBudget(**payload["budget"])
    return {**solve_srn(payload["request"], budget, progress=report), "solved_in": "process"}


@click.command(short_help="Solve a general SRN from a JSON or PNML file.")
@click.argument("net", metavar="NET")
@click.option(
    "--analysis",
    type=click.Choice(["steady-state", "transient", "absorption"]),
    help="Override the file's analysis.",
)
@click.option("--times", metavar="T1,T2,...", help="Times (s) for transient or absorption.")
@json_option
@server_option
@timeout_option
@max_states_option
def solve(
    net: str,
    analysis: str | None,
    times: str | None,
    as_json: bool,
    server: str | None,
    timeout: float | None,
    max_states: int | None,
) -> None:
    """Solve a general SRN: NET is a POST /srn/solve body or a bare net in JSON, or a
    PNML net (.pnml, .xml) as PIPE and Storm write it ('-' reads stdin).

    A local solve runs in a child process: Ctrl-C stops it at once, and so does the
    --timeout limit.

    \b
    Example:
      blastrate solve net.json --max-states 500000 --timeout 120
    """
    from pydantic import ValidationError

    from app.schemas.bodies import SrnSolveRequest

    refuse_remote_max_states(max_states, server)
    raw = read_net_request(net, analysis, times)
    if server:
        body = request(server, "POST", "/srn/solve", timeout or DEFAULT_SERVER_TIMEOUT_S, json=raw)
    else:
        from app.operations.net_files import MAX_FILE_BYTES
        from app.operations.srn_solve import solve_budget
        from app.settings import Settings

        try:
            validated = SrnSolveRequest.model_validate(raw).model_dump(mode="json")
        except ValidationError as exc:
            first = exc.errors()[0]
            where = ".".join(str(p) for p in first["loc"])
            raise CliError(f"{net}: {where}: {first['msg']}", EXIT_USAGE) from None
        s = Settings()
        limit_s = timeout or DEFAULT_LOCAL_TIMEOUT_S
        # The service's limits (BLASTRATE_* settings), --max-states and --timeout aside.
        budget = dataclasses.asdict(
            dataclasses.replace(
                solve_budget(s, limit_s),
                max_states=max_states or s.max_states,
                max_pnml_bytes=MAX_FILE_BYTES,
            )
        )
        try:
            body = run_local(
                _solve_job,
                {"request": validated, "budget": budget},
                timeout=limit_s,
                label=f"solving {net}",
            )
        except CliError as exc:
            if "not ergodic" not in exc.message:
                raise
            # The options that ask for what such a net does have.
            hint = "; try --analysis transient --times 1,10,100 or --analysis absorption"
            raise CliError(exc.message + hint, exc.exit_code) from None
    write_output(json_text(body) if as_json else solve_summary(body), None)
