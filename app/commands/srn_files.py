"""``blastrate convert``: nets between JSON and PNML, and the net loader ``solve`` uses.

The commands are plain Click commands; the main group registers them
(``main.add_command(convert)``).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click

from app.operations.net_files import NetFileError, net_format, read_net_request, write_net

from .common import EXIT_USAGE, CliError

__all__ = ["convert", "load_net_request"]


def load_net_request(path: str) -> dict[str, Any]:
    """The ``POST /srn/solve`` body in a JSON or PNML file, for the ``solve`` command.

    Raises
    ------
    click.UsageError
        With a one-line message naming the file (and, for PNML, the element and line).
    """
    try:
        return read_net_request(path)
    except NetFileError as exc:
        raise click.UsageError(str(exc)) from None


@click.command("convert")
@click.argument("source", metavar="IN")
@click.argument("target", metavar="OUT")
@click.option(
    "--to",
    "to",
    type=click.Choice(["json", "pnml"]),
    default=None,
    help="Output format (default: from OUT's extension, else the other format than IN's).",
)
@click.option(
    "--dialect",
    type=click.Choice(["pipe", "storm"]),
    default="pipe",
    show_default=True,
    help="PNML spelling of inhibitor arcs: 'inhibitor' (PIPE) or 'inhibition' (Storm).",
)
@click.option("--force", is_flag=True, help="Replace OUT if it exists.")
def convert(source: str, target: str, to: str | None, dialect: str, force: bool) -> None:
    """Convert a net between JSON and PNML (IN and OUT may be '-').

    JSON is the engine's net (or a POST /srn/solve body, whose net is taken); PNML is the
    GSPN dialect of PIPE and Storm, or the ISO/IEC 15909-2 place/transition core.  Nets
    with rate expressions or guards cannot be written as PNML.
    """
    if target != "-" and not force and Path(target).exists():
        raise CliError(f"OUT: {target!r} exists; --force replaces it", EXIT_USAGE)
    try:
        request = read_net_request(source)
        in_fmt = "json" if source == "-" else net_format(source)
        if to is not None:
            out_fmt = to
        elif target != "-" and target.lower().endswith((".pnml", ".xml", ".json")):
            out_fmt = net_format(target)
        else:
            out_fmt = "pnml" if in_fmt == "json" else "json"
        write_net(request["net"], target, "pnml" if out_fmt == "pnml" else "json", dialect=dialect)  # type: ignore[arg-type]
    except NetFileError as exc:
        raise CliError(str(exc), EXIT_USAGE) from None
    if target != "-":
        click.echo(f"wrote {out_fmt.upper()} to {target}", err=True)
