"""The ``blastrate`` command line (Click), one module per command family.

Commands::

    blastrate rate  -C 2 -I 1 --file-size 500MB --delay 100ms   # effective bottleneck rate
    blastrate curve -C 2 -I 1 --file-size 500MB --delay 100ms -o curve.csv
    blastrate solve net.json --max-states 500000 --timeout 120  # a general SRN (or .pnml)
    blastrate convert net.pnml net.json                          # nets between JSON and PNML
    blastrate serve --host 127.0.0.1 --port 8000 --workers 1     # the HTTP service
    blastrate profiles list|show|put|delete                      # host profiles
    blastrate probe --json                                       # this host's workload, NIC
    blastrate calibrate --name myhost                            # measure this host's rates
    blastrate receive --port 9000 --output DIR                   # RBUDP receiver
    blastrate send FILE --to HOST:9000 --rate auto               # RBUDP sender
    blastrate sweep --io-tasks 0..20 --cores 1,2,4 --plot s.svg  # capacity planning
    blastrate what-if -C 2 -I 1 --file-size 500MB --delay 100ms  # ranked upgrades

Conventions every command follows (the helpers live in :mod:`app.commands.common`,
:mod:`app.commands.remote` and :mod:`app.commands.local`):

- ``--json`` prints the full JSON answer; where a table makes sense, ``--format
  csv|json|table`` and ``-o FILE`` too, the format inferred from the file's suffix
  (:func:`~app.commands.common.resolve_format`), an unknown suffix refused.
- ``--server URL`` asks a running service instead of computing here
  (:func:`~app.commands.remote.request`).
- Anything that may take more than a second runs through
  :func:`~app.commands.local.run_local`: a child process that Ctrl-C and ``--timeout``
  stop at once, with a rich spinner past half a second or from its first progress report;
  a chain's size is capped by ``--max-states``.
- Failures raise :class:`~app.commands.common.CliError` (message ``<field>: <reason>``,
  naming the option, and for a limit how to raise it); the group prints it as one line
  ``blastrate: error: ...`` on stderr.  Exit status:

  ====  ========================================================================
  0     success
  1     unexpected internal error
  2     usage error or invalid input (a bad option, an unreadable file, a value,
        a value past a fixed bound of the model such as ``--cores 999``)
  3     the model has no answer (the transfer never completes, a chain that is
        not ergodic, a limit that an option or a setting raises)
  4     the server is unreachable, timed out or busy
  5     the server answered with an unexpected error
  130   interrupted (Ctrl-C)
  141   the reader of stdout went away (``blastrate curve ... | head``); quiet
  ====  ========================================================================

Adding a command
----------------
Write a module ``app/commands/<topic>.py`` that defines a Click command or group (say
``host``) using the helpers above, with no side effect at import, and register it below
with one line, ``main.add_command(host)``.  Import the heavy libraries inside the
command's function, so that ``blastrate --help`` stays fast.  Test it with
``click.testing.CliRunner().invoke(main, [...])`` (or on the command object).
"""

from __future__ import annotations

import errno
import importlib
import os
import re
import signal
import sys
import threading
from collections.abc import Sequence
from types import FrameType
from typing import Any


def _interrupted_while_starting(signum: int, frame: FrameType | None) -> None:
    # Ctrl-C while the commands are still being imported: nothing to clean up yet, and a
    # traceback from the middle of an import would only confuse.
    sys.stderr.write("blastrate: interrupted\n")
    os._exit(130)


# Only while this package's body runs (the imports below); restored at its end.
_STARTING = threading.current_thread() is threading.main_thread()
_PREVIOUS_SIGINT = signal.signal(signal.SIGINT, _interrupted_while_starting) if _STARTING else None

import click  # noqa: E402

from .common import (  # noqa: E402
    EXIT_INTERNAL,
    EXIT_INTERRUPTED,
    EXIT_OK,
    EXIT_PIPE,
    EXIT_USAGE,
    CliError,
)

#: Each command: its module, its object, and the short help ``blastrate --help`` shows.
#: A command's module is imported only when that command runs (or its own --help is
#: asked for), so that ``blastrate --help`` and ``--version`` start at once instead of
#: loading the model, transport and host stacks (1.6 s of CPU).  tests/app/commands
#: checks that each short help here is the command's own.
COMMANDS: dict[str, tuple[str, str, str]] = {
    "calibrate": (
        ".host_calibrate",
        "calibrate",
        "Measure mu_net, mu_io_cpu, mu_disk, K, the scheduler's time slice, the receive "
        "path's cost per wake-up and the kernel's part of the receiver's core (k, c_C) on "
        "this host, store them as profile NAME and make it this host's default (unless "
        "--no-default).",
    ),
    "convert": (
        ".srn_files",
        "convert",
        "Convert a net between JSON and PNML (IN and OUT may be '-').",
    ),
    "curve": (".curve", "curve", "The transfer-time curve T(B_send) as a table, CSV or JSON."),
    "jobs": (".jobs", "jobs", "Long SRN solves on a service: submit, status, cancel, wait."),
    "probe": (
        ".host",
        "probe",
        "Probe this host's workload (C, I, m, d) and NIC (line rate, payload, K, N).",
    ),
    "profiles": (
        ".profiles",
        "profiles",
        "Host profiles: the built-in ones (read-only) and the stored ones.",
    ),
    "rate": (".rate", "rate", "Effective bottleneck rate of a workload."),
    "receive": (
        ".transfer",
        "receive",
        "Receive files sent with `blastrate send` into OUTPUT, until stopped.",
    ),
    "send": (".transfer", "send", "Send FILE to a `blastrate receive` with RBUDP."),
    "serve": (".serve", "serve", "Run the HTTP service."),
    "solve": (".solve", "solve", "Solve a general SRN from a JSON or PNML file."),
    "sweep": (
        ".planning",
        "sweep",
        "Evaluate the effective bottleneck rate over the product of ranges of inputs.",
    ),
    "what-if": (
        ".planning",
        "what_if_command",
        "Rank the single upgrades of a host by the transfer time they save.",
    ),
}

__all__ = ["COMMANDS", "BlastrateGroup", "main"]


def _silence_stdout() -> None:
    """Point stdout at /dev/null, so the final flush at exit does not fail again."""
    try:
        fd = sys.stdout.fileno()
    except (AttributeError, OSError, ValueError):  # not a real file (CliRunner)
        return
    devnull = os.open(os.devnull, os.O_WRONLY)
    try:
        os.dup2(devnull, fd)
    finally:
        os.close(devnull)


def _usage_line(error: click.UsageError) -> str:
    """A Click usage error as ``<option>: <reason>``."""
    if isinstance(error, click.NoSuchOption):
        message = f"{error.option_name}: no such option"
        if error.possibilities:
            message += f" (did you mean {', '.join(sorted(error.possibilities))}?)"
        return message
    if isinstance(error, click.BadParameter) and error.param is not None:
        param = error.param
        if isinstance(param, click.Option):
            # The first long spelling declared: one name per option in every command's
            # errors (`--delay`, also spelled `--propagation-delay`; `--cpu-tasks`, not -C).
            name = next((opt for opt in param.opts if opt.startswith("--")), param.opts[0])
        else:
            name = param.human_readable_name
        if isinstance(error, click.MissingParameter):
            return f"{name}: required"
        return f"{name}: {error.message}"
    extra = _EXTRA_ARGUMENTS.match(error.format_message())
    if extra is not None:
        # Most often a value and its unit typed apart (--file-size 500 MB).
        return (
            f"unexpected argument(s) {extra.group(1)}: a value and its unit are one word "
            "(500MB, 100ms, 10Gbps)"
        )
    return error.format_message()


#: Click's message for words that no option or argument takes.
_EXTRA_ARGUMENTS = re.compile(r"Got unexpected extra arguments? \((.*)\)$")


def _shortened(text: str, limit: int) -> str:
    """``text`` cut at a word to at most ``limit`` characters, with "..." if cut."""
    if len(text) <= limit:
        return text
    return text[: max(limit - 3, 1)].rsplit(" ", 1)[0].rstrip(",;:") + "..."


#: Set by :func:`_interrupt` when a Ctrl-C reaches the started command.
_INTERRUPTED = threading.Event()


def _interrupt(signum: int, frame: FrameType | None) -> None:
    """Python's own Ctrl-C handler, which also remembers that it ran.

    Some compiled code turns the KeyboardInterrupt it is handed into an error of its own
    with no ``__cause__``: pydantic-core, interrupted while it builds a model's validator,
    raises ``SchemaError`` whose text only names the KeyboardInterrupt.  The flag lets
    :func:`_caused_by_interrupt` read that as the user's Ctrl-C, not a defect.
    """
    _INTERRUPTED.set()
    signal.default_int_handler(signum, frame)


def _caused_by_interrupt(exc: BaseException) -> bool:
    """Whether a Ctrl-C lies behind ``exc``: one arrived while the command ran (see
    :func:`_interrupt`), or ``exc`` was raised from a KeyboardInterrupt.  A compiled
    extension whose initialisation a KeyboardInterrupt broke reports ``ImportError:
    initialization failed`` raised from it (pybind11 does, e.g. matplotlib's)."""
    if _INTERRUPTED.is_set():
        return True
    seen: set[int] = set()
    cause: BaseException | None = exc
    while cause is not None and id(cause) not in seen:
        if isinstance(cause, KeyboardInterrupt):
            return True
        seen.add(id(cause))
        cause = cause.__cause__ or cause.__context__
    return False


class BlastrateGroup(click.Group):
    """The main group: one-line errors and the exit statuses of :mod:`app.commands`.

    Ctrl-C exits 130 and a closed stdout (``| head``) exits quietly, whichever command
    runs; an unexpected exception is one line, never a traceback.
    """

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted({*super().list_commands(ctx), *COMMANDS})

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        if cmd_name in COMMANDS and cmd_name not in self.commands:
            module, name, _ = COMMANDS[cmd_name]
            command = getattr(importlib.import_module(module, __package__), name)
            self.add_command(command, cmd_name)
        return super().get_command(ctx, cmd_name)

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        # From the table: listing the commands must not import them.
        rows = []
        for name in self.list_commands(ctx):
            known = COMMANDS.get(name)
            text = known[2] if known else self.commands[name].get_short_help_str()
            rows.append((name, text))
        if rows:
            limit = formatter.width - 6 - max(len(name) for name, _ in rows)
            with formatter.section("Commands"):
                formatter.write_dl([(name, _shortened(text, limit)) for name, text in rows])

    def invoke(self, ctx: click.Context) -> Any:
        try:
            result = super().invoke(ctx)
            sys.stdout.flush()  # a closed pipe shows here, not in the interpreter's exit
            return result
        except (click.exceptions.Exit, click.ClickException, click.Abort):
            raise
        except KeyboardInterrupt:
            click.echo("blastrate: interrupted", err=True)
            raise click.exceptions.Exit(EXIT_INTERRUPTED) from None
        except OSError as exc:
            if exc.errno != errno.EPIPE:
                return self._internal(exc)
            _silence_stdout()
            raise click.exceptions.Exit(EXIT_PIPE) from None
        except Exception as exc:  # one line, never a traceback, for a shell user
            if _caused_by_interrupt(exc):
                click.echo("blastrate: interrupted", err=True)
                raise click.exceptions.Exit(EXIT_INTERRUPTED) from None
            return self._internal(exc)

    @staticmethod
    def _internal(exc: BaseException) -> None:
        click.echo(f"blastrate: internal error: {type(exc).__name__}: {exc}", err=True)
        raise click.exceptions.Exit(EXIT_INTERNAL) from None

    def main(  # type: ignore[override]
        self,
        args: Sequence[str] | None = None,
        prog_name: str | None = None,
        complete_var: str | None = None,
        standalone_mode: bool = True,
        **extra: Any,
    ) -> int:
        """Run the command line; exit with its status (or return it when
        ``standalone_mode`` is False)."""
        _INTERRUPTED.clear()  # a Ctrl-C that an earlier in-process run took is not this one's
        try:
            result = super().main(
                args, prog_name or "blastrate", complete_var, standalone_mode=False, **extra
            )
            status = result if isinstance(result, int) else EXIT_OK
        except click.exceptions.NoArgsIsHelpError as exc:
            exc.show()
            status = EXIT_USAGE
        except CliError as exc:
            exc.show()
            status = exc.exit_code
        except click.UsageError as exc:
            click.echo(f"blastrate: error: {_usage_line(exc)}", err=True)
            status = EXIT_USAGE
        except click.ClickException as exc:
            click.echo(f"blastrate: error: {exc.format_message()}", err=True)
            status = exc.exit_code
        except click.Abort:  # Ctrl-C while Click itself was busy (parsing, prompting)
            click.echo("blastrate: interrupted", err=True)
            status = EXIT_INTERRUPTED
        if standalone_mode:
            sys.exit(status)
        return status


def _print_version(context: click.Context, _: click.Parameter, value: bool) -> None:
    """``--version``: the installed version, read only when asked (the package metadata
    costs a command some 30 ms to load)."""
    if not value or context.resilient_parsing:
        return
    from app.version import __version__

    click.echo(f"blastrate {__version__}")
    context.exit()


@click.group(
    cls=BlastrateGroup,
    context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100},
    epilog="Exit status: 0 ok, 2 bad input (a fixed bound included), 3 no answer (the model, "
    "or a limit you can raise), 4 server unreachable, 5 server error, 1 internal error, "
    "130 interrupted, 141 stdout closed.",
)
@click.option(
    "-V",
    "--version",
    is_flag=True,
    expose_value=False,
    is_eager=True,
    callback=_print_version,
    help="Show the version and exit.",
)
def main() -> None:
    """Effective bottleneck rate of a data transfer into a busy host."""


# Started: from here Ctrl-C is a KeyboardInterrupt, which BlastrateGroup turns into
# "blastrate: interrupted" and status 130 after the command has cleaned up.
# A parent that ignores SIGINT (nohup, a background job) is still obeyed.
if _STARTING:
    signal.signal(
        signal.SIGINT,
        _interrupt if _PREVIOUS_SIGINT is signal.default_int_handler else _PREVIOUS_SIGINT,
    )
