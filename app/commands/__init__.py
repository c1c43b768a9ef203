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
  :func:`~app.commands.local.run_local`: a child process with a rich spinner, that Ctrl-C
  and ``--timeout`` stop at once; a chain's size is capped by ``--max-states``.
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
import os
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

from app.version import __version__  # noqa: E402

from .common import (  # noqa: E402
    EXIT_INTERNAL,
    EXIT_INTERRUPTED,
    EXIT_OK,
    EXIT_PIPE,
    EXIT_USAGE,
    CliError,
)
from .curve import curve  # noqa: E402
from .host import probe  # noqa: E402
from .host_calibrate import calibrate  # noqa: E402
from .planning import sweep, what_if_command  # noqa: E402
from .profiles import profiles  # noqa: E402
from .rate import rate  # noqa: E402
from .serve import serve  # noqa: E402
from .solve import solve  # noqa: E402
from .srn_files import convert  # noqa: E402
from .transfer import receive, send  # noqa: E402

__all__ = ["BlastrateGroup", "main"]


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
            name = max(param.opts, key=len)
        else:
            name = param.human_readable_name
        if isinstance(error, click.MissingParameter):
            return f"{name}: required"
        return f"{name}: {error.message}"
    return error.format_message()


class BlastrateGroup(click.Group):
    """The main group: one-line errors and the exit statuses of :mod:`app.commands`.

    Ctrl-C exits 130 and a closed stdout (``| head``) exits quietly, whichever command
    runs; an unexpected exception is one line, never a traceback.
    """

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


@click.group(
    cls=BlastrateGroup,
    context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100},
    epilog="Exit status: 0 ok, 2 bad input (a fixed bound included), 3 no answer (the model, "
    "or a limit you can raise), 4 server unreachable, 5 server error, 1 internal error, "
    "130 interrupted, 141 stdout closed.",
)
@click.version_option(
    __version__, "-V", "--version", prog_name="blastrate", message="%(prog)s %(version)s"
)
def main() -> None:
    """Effective bottleneck rate of a data transfer into a busy host."""


main.add_command(rate)
main.add_command(curve)
main.add_command(solve)
main.add_command(serve)
main.add_command(convert)
main.add_command(profiles)
main.add_command(probe)
main.add_command(calibrate)
main.add_command(send)
main.add_command(receive)
main.add_command(sweep)
main.add_command(what_if_command)

# Started: from here Ctrl-C is a KeyboardInterrupt, which BlastrateGroup turns into
# "blastrate: interrupted" and status 130 after the command has cleaned up.
if _STARTING:
    signal.signal(signal.SIGINT, _PREVIOUS_SIGINT)
