"""What every ``blastrate`` command shares: exit statuses, one-line errors, output formats.

A command reports failure by raising :class:`CliError` with the exit status; the main
group (:class:`BlastrateGroup`) prints it as one line ``blastrate: error: <field>:
<reason>`` on stderr.  Library and service errors become :class:`CliError` through
:func:`error_from_problem`, which names the option the user typed rather than the API
field, and, for a limit, how to raise it.

Output goes through :func:`write_output`: to stdout, or to the file of ``-o/--output``
whose suffix picks the format (:func:`resolve_format`).
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import click

if TYPE_CHECKING:
    from rich.console import Console
    from rich.table import Table

__all__ = [
    "EXIT_INTERNAL",
    "EXIT_INTERRUPTED",
    "EXIT_MODEL",
    "EXIT_OK",
    "EXIT_PIPE",
    "EXIT_SERVER",
    "EXIT_UNREACHABLE",
    "EXIT_USAGE",
    "FINITE",
    "LIMIT_OPTIONS",
    "OPTION_OF",
    "CliError",
    "error_from_problem",
    "json_option",
    "json_text",
    "limit_hint",
    "model_option",
    "print_table",
    "resolve_format",
    "seconds_text",
    "si_text",
    "stdout_console",
    "stdout_is_terminal",
    "write_output",
]

EXIT_OK = 0
EXIT_INTERNAL = 1
EXIT_USAGE = 2
EXIT_MODEL = 3
EXIT_UNREACHABLE = 4
EXIT_SERVER = 5
#: 128 + SIGINT, as a shell reports a program stopped by Ctrl-C.
EXIT_INTERRUPTED = 130
#: 128 + SIGPIPE, as a shell reports ``yes | head``: the reader went away.
EXIT_PIPE = 141

#: Library / API field -> the option that sets it, for one-line errors.
OPTION_OF = {
    "cpu_tasks": "--cpu-tasks",
    "io_tasks": "--io-tasks",
    "tasks": "--cpu-tasks/--io-tasks",
    "cores": "--cores",
    "disks": "--disks",
    "profile": "--profile",
    "name": "--profile",
    "mu_io_cpu": "--mu-io-cpu",
    "mu_disk": "--mu-disk",
    "mu_net": "--mu-net",
    "buffer_packets": "--buffer-packets",
    "coalesce_packets": "--coalesce-packets",
    "line_rate": "--line-rate",
    "line_rate_bps": "--line-rate",
    "packet_payload": "--packet-payload",
    "packet_payload_bytes": "--packet-payload",
    "file_size": "--file-size",
    "file_size_bytes": "--file-size",
    "propagation_delay": "--delay",
    "propagation_delay_s": "--delay",
    "nic_service": "--nic-service",
    "model": "--model",
    "curve_points": "--points",
    "loss": "the host (no sending rate completes)",
}

#: Limit name (as in problem+json ``errors[].limit``) -> the option that raises it on a
#: local computation.  Other limits are raised with their ``BLASTRATE_*`` variable.
LIMIT_OPTIONS = {
    "max_states": "--max-states",
    "solve_timeout_s": "--timeout",
    "solve_seconds": "--timeout",
}


class FiniteFloat(click.ParamType):
    """A float option that refuses NaN and infinities (Python's ``float`` takes ``nan``,
    which no bound catches with the right reason and JSON cannot carry to a server)."""

    name = "float"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        number = click.FLOAT.convert(value, param, ctx)
        if not math.isfinite(number):
            self.fail(f"must be a finite number, got {value!r}", param, ctx)
        return number


#: The parameter type of every float option.
FINITE = FiniteFloat()


class CliError(click.ClickException):
    """A failure to report on one line, with its exit status.

    Parameters
    ----------
    message : str
        ``<field>: <reason>``, without the ``blastrate: error:`` prefix.
    status : int
        Exit status (one of the ``EXIT_*`` constants).
    """

    def __init__(self, message: str, status: int) -> None:
        super().__init__(message)
        self.exit_code = status  # type: ignore[misc]  # Click's default, set per error

    @property
    def status(self) -> int:
        """The exit status."""
        return self.exit_code

    def show(self, file: Any = None) -> None:
        click.echo(f"blastrate: error: {self.format_message()}", file=file, err=True)


def limit_hint(limit: str | None, *, local: bool, raise_with: str | None = None) -> str:
    """How to raise ``limit``: the option on a local run, the setting on a server.

    Parameters
    ----------
    limit : str or None
        Name of the limit reached, e.g. ``"max_states"``.
    local : bool
        True when the computation ran in this process (an option can raise it).
    raise_with : str, optional
        The server's setting, from its problem body.

    Returns
    -------
    str
        A clause such as ``"raise it with --max-states"``, or ``""`` for a fixed limit.
    """
    from app.schemas.problems import limit_setting

    if not limit:
        return ""
    if local and limit in LIMIT_OPTIONS:
        return f"raise it with {LIMIT_OPTIONS[limit]}"
    setting = raise_with or limit_setting(limit)
    if setting is None:
        return ""
    if local:
        return f"raise it with the environment variable {setting}"
    return f"the server's limit; raise {setting} where it runs"


def error_from_problem(
    body: Mapping[str, Any], status: int | None = None, *, local: bool = True
) -> CliError:
    """The one-line error for a problem+json body (from the library or a server).

    Parameters
    ----------
    body : dict
        The problem body.
    status : int, optional
        The HTTP status it came with (None for a local computation).
    local : bool
        Whether the problem arose in this process (see :func:`limit_hint`).
    """
    from app.schemas.problems import PROBLEM_TYPES

    slug = str(body.get("type", "")).rsplit("/", 1)[-1]
    kind = PROBLEM_TYPES.get(slug)
    exit_status = kind.cli_exit if kind else (EXIT_SERVER if (status or 0) >= 500 else EXIT_USAGE)
    if status is not None and status >= 500:
        exit_status = EXIT_SERVER if slug != "not-ready" else EXIT_UNREACHABLE
    errors = body.get("errors") or []
    if not errors:
        return CliError(str(body.get("detail") or body.get("title") or "error"), exit_status)
    first = errors[0]
    reason = str(first.get("reason") or body.get("detail") or "")
    limit = first.get("limit")
    hint = limit_hint(limit, local=local, raise_with=first.get("raise_with")) if limit else ""
    if hint:
        # A limit on the work that an option or a setting raises: name that.
        option = LIMIT_OPTIONS.get(limit, limit) if local else limit
        detail = str(body.get("detail") or reason)
        return CliError(f"{option}: {detail}; {hint}", exit_status)
    if limit:
        # A fixed bound of an input (the model's domain, or the server's schema: maximum,
        # minimum): bad input, named by its option, whichever side found it.
        exit_status = EXIT_USAGE
    where = str(first.get("field", ""))
    name = where.split(".", 1)[-1] if where.startswith(("query.", "body.", "path.")) else where
    leaf = name.rsplit(".", 1)[-1]
    return CliError(f"{OPTION_OF.get(leaf, name)}: {reason}", exit_status)


# -- output --------------------------------------------------------------------------------

F = TypeVar("F", bound=Callable[..., Any])


def json_option(function: F) -> F:
    """The ``--json`` flag every command takes: print the full JSON answer."""
    return click.option("--json", "as_json", is_flag=True, help="Print the full JSON answer.")(
        function
    )


def model_option(help_text: str) -> Callable[[F], F]:
    """``--model paper|timeslice``, the receiver model, with the same name, values and
    default on every command (the service's ``model``: :data:`transport.RECEIVER_MODELS`,
    default :data:`transport.DEFAULT_RECEIVER_MODEL`)."""
    from transport.models import DEFAULT_RECEIVER_MODEL, RECEIVER_MODELS

    return click.option(
        "--model",
        type=click.Choice(list(RECEIVER_MODELS)),
        default=DEFAULT_RECEIVER_MODEL,
        show_default=True,
        help=help_text,
    )


def stdout_console() -> Console:
    """A rich console on stdout for tables: the terminal's width on a terminal; when
    piped, as wide as the table needs, so no cell is cut short (rich assumes 80
    columns otherwise, and truncates names with an ellipsis)."""
    import sys

    from rich.console import Console

    return Console() if sys.stdout.isatty() else Console(width=10_000)


def print_table(table: Table, console: Console | None = None) -> None:
    """Print a table: box-drawn on a terminal; plain text when piped (columns separated
    by spaces, no box characters, every cell whole), for ``grep``, ``awk`` and files."""
    import sys

    console = console or stdout_console()
    if not sys.stdout.isatty():
        table.box = None
        table.show_edge = False
        table.pad_edge = False
    console.print(table)


def stdout_is_terminal() -> bool:
    """Whether stdout is a terminal (a table there may be shortened, with a note)."""
    import sys

    return sys.stdout.isatty()


def si_text(value: float, unit: str) -> str:
    """``value`` with an SI prefix, e.g. ``si_text(8.5e8, "bit/s") == "850 Mbit/s"``."""
    for factor, prefix in ((1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k")):
        if abs(value) >= factor:
            return f"{value / factor:.4g} {prefix}{unit}"
    return f"{value:.4g} {unit}"


def seconds_text(value: float) -> str:
    """A duration in s, ms or us, e.g. ``seconds_text(0.1) == "100 ms"``."""
    if value >= 1:
        return f"{value:.4g} s"
    if value >= 1e-3:
        return f"{value * 1e3:.4g} ms"
    return f"{value * 1e6:.4g} us"


def json_text(document: Any) -> str:
    """``document`` as indented JSON text."""
    return json.dumps(document, indent=2)


_SUFFIX_FORMATS = {".csv": "csv", ".json": "json", ".txt": "table"}
# Never text, whatever --format says: writing CSV into curve.png helps nobody.
_IMAGE_SUFFIXES = {".png", ".svg", ".pdf", ".jpg", ".jpeg", ".gif", ".webp", ".eps"}


def resolve_format(
    fmt: str | None, as_json: bool, output: str | None, formats: Iterable[str]
) -> str:
    """The output format from ``--format``, ``--json`` and the suffix of ``-o FILE``.

    Parameters
    ----------
    fmt : str or None
        ``--format`` as given.
    as_json : bool
        ``--json`` as given (the same as ``--format json``).
    output : str or None
        ``-o/--output`` as given; its suffix picks the format when none is named.
    formats : iterable of str
        Formats the command can write; the first is the default on a terminal.

    Raises
    ------
    CliError
        For a suffix no table format writes (say ``.png``: figures go to ``--plot``), or
        options that disagree.
    """
    allowed = list(formats)
    if as_json:
        if fmt not in (None, "json"):
            raise CliError(f"--json: conflicts with --format {fmt}", EXIT_USAGE)
        fmt = "json"
    if output is None or output == "-":
        return fmt or allowed[0]
    suffix = Path(output).suffix.lower()
    if suffix in _IMAGE_SUFFIXES:
        raise CliError(
            f"--output: cannot write {suffix}: --output writes tables (.csv, .json or "
            ".txt); draw a figure with --plot FILE.svg or FILE.png",
            EXIT_USAGE,
        )
    inferred = _SUFFIX_FORMATS.get(suffix)
    if inferred is None or inferred not in allowed:
        known = ", ".join(s for s, f in _SUFFIX_FORMATS.items() if f in allowed)
        if fmt is None:
            raise CliError(
                f"--output: cannot write {suffix or 'a file without a suffix'}; "
                f"use one of {known}, or name the format with --format",
                EXIT_USAGE,
            )
        return fmt
    if fmt is not None and fmt != inferred:
        raise CliError(
            f"--output: the suffix {suffix} says {inferred}, but --format says {fmt}", EXIT_USAGE
        )
    return inferred


def write_output(text: str, output: str | None, *, what: str = "") -> None:
    """Print ``text`` on stdout, or write it to ``output`` (``-`` is stdout).

    Parameters
    ----------
    text : str
        The document.
    output : str or None
        File path from ``-o/--output``.
    what : str
        What was written, for the one-line note on stderr (e.g. ``"25 points"``).
    """
    if not text.endswith("\n"):
        text += "\n"
    if output is None or output == "-":
        click.echo(text, nl=False)
        return
    try:
        Path(output).write_text(text, encoding="utf-8")
    except OSError as exc:
        raise CliError(
            f"--output: cannot write {output}: {exc.strerror or exc}", EXIT_USAGE
        ) from None
    click.echo(f"wrote {what + ' to ' if what else ''}{output}", err=True)
