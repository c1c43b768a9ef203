"""Local computations that can be stopped: a child process, a wall-time limit, a spinner.

A solve spends most of its time inside NumPy/SciPy calls, where Python does not look at
signals, so Ctrl-C on an in-process solve waited for the call to return (once 82 s).  Here
the work runs in a child process (forked when the process has no other thread, else
spawned); the parent only waits on a pipe, so Ctrl-C, the
``--timeout`` limit and a dead child are noticed within a tenth of a second, and the child
is killed (SIGKILL) so that no CPU keeps burning.  From the child's first progress
report, or once it has worked for :data:`SPINNER_AFTER_S`, the parent shows a rich
spinner with the elapsed time on stderr, when stderr is a terminal.
"""

from __future__ import annotations

import multiprocessing
import multiprocessing.connection
import signal
import sys
import threading
import time
import traceback
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

from .common import EXIT_INTERNAL, EXIT_MODEL, EXIT_USAGE, CliError, error_from_problem

if TYPE_CHECKING:
    from host.store import ProfileStoreError

__all__ = [
    "DEFAULT_LOCAL_TIMEOUT_S",
    "SPINNER_AFTER_S",
    "Reporter",
    "library_errors",
    "profile_database_error",
    "progress",
    "progress_text",
    "run_local",
    "start_method",
]

#: Wall time a local computation may take when ``--timeout`` is not given (s).
DEFAULT_LOCAL_TIMEOUT_S = 600.0

#: How often the parent looks at the pipe, the clock and the child (s).
_POLL_S = 0.1

#: How long a local computation runs before the spinner appears (s).
SPINNER_AFTER_S = 0.5

#: What a job calls to report its progress: a dict such as ``{"stage": "solving",
#: "states": 1200, "edges": 5000}`` (the keys of :func:`app.operations.srn_solve.solve_srn`'s hook).
Reporter = Callable[[dict[str, Any]], None]


def progress_text(label: str, info: Mapping[str, Any]) -> str:
    """The spinner's text for a progress report.

    Examples
    --------
    >>> progress_text("solving net.json", {"stage": "solving", "states": 1200, "edges": 5000})
    'solving net.json: solving, 1,200 states, 5,000 edges'
    """
    parts = [str(info["stage"])] if info.get("stage") else []
    for key, name in (("states", "states"), ("edges", "edges"), ("iterations", "iterations")):
        if isinstance(info.get(key), int):
            parts.append(f"{info[key]:,} {name}")
    if isinstance(info.get("residual"), float):
        parts.append(f"residual {info['residual']:.1e}")
    return f"{label}: {', '.join(parts)}" if parts else label


@contextmanager
def library_errors(aliases: Mapping[str, str] | None = None) -> Iterator[None]:
    """Library errors raised inside the block become one-line :class:`CliError`."""
    from app.schemas.problems import ProblemError, translated_errors

    try:
        with translated_errors(aliases):
            yield
    except ProblemError as problem:
        raise error_from_problem(problem.to_dict(""), local=True) from None
    except Exception as exc:
        # Only a block that opened the profile store can raise its error: the store (and
        # SQLAlchemy with it) is not imported here for a block that never reads it.
        store = sys.modules.get("host.store")
        if store is not None and isinstance(exc, store.ProfileStoreError):
            raise profile_database_error(exc) from None
        raise


def profile_database_error(exc: ProfileStoreError) -> CliError:
    """The one-line error for a :class:`host.store.ProfileStoreError`: it names
    ``BLASTRATE_DATABASE_URL`` and the URL in use (password hidden) and says why.

    A URL that cannot be used at all (not an SQLAlchemy URL, or a driver not installed)
    is bad input, exit 2; a database that cannot be opened or written, exit 1.
    """
    from host.store import DATABASE_URL_ENV, database_url

    url = _shown_url(database_url())
    why = f"{exc}" + (f" ({exc.detail})" if exc.detail else "")
    if exc.bad_url:
        return CliError(
            f"{DATABASE_URL_ENV}: cannot use {url!r}: {why}; give an SQLAlchemy URL such as "
            "sqlite:////absolute/path/blastrate.db or postgresql+psycopg://user@host/db",
            EXIT_USAGE,
        )
    return CliError(
        f"{DATABASE_URL_ENV}: {url!r}: {why}; point it at a database this user can "
        "write, or name a built-in profile with --profile",
        EXIT_INTERNAL,
    )


def _shown_url(url: str) -> str:
    """``url`` with any password replaced by ``***``."""
    from sqlalchemy.engine import make_url
    from sqlalchemy.exc import ArgumentError

    try:
        return make_url(url).render_as_string(hide_password=True)
    except ArgumentError:
        # Not a URL SQLAlchemy can read: hide whatever sits between ':' and '@'.
        head, at, tail = url.rpartition("@")
        if not at:
            return url
        scheme, sep, rest = head.partition("://")
        user = rest.split(":", 1)[0]
        return f"{scheme}{sep}{user}:***@{tail}" if ":" in rest else url


@contextmanager
def progress(label: str) -> Iterator[Callable[[str], None]]:
    """A transient spinner with the elapsed time on stderr (only on a terminal).

    Yields a function that replaces the label.
    """
    from rich.console import Console
    from rich.progress import Progress, SpinnerColumn, TextColumn, TimeElapsedColumn

    console = Console(stderr=True)
    bar = Progress(
        SpinnerColumn(),
        TextColumn("{task.description}"),
        TimeElapsedColumn(),
        console=console,
        transient=True,
        disable=not console.is_terminal,
    )
    with bar:
        task = bar.add_task(label, total=None)
        yield lambda text: bar.update(task, description=text)


def start_method() -> str:
    """How :func:`run_local` starts its child: ``"fork"`` when this process runs no other
    thread and the platform forks, else ``"spawn"``.

    A forked child starts in milliseconds, with what the parent has imported.  But a fork
    copies the locks other threads hold (SQLite's, the allocator's, logging's) without
    their owners, and a child that needs one waits forever: a test process with AnyIO's
    leftover threads once forked a child that hung in ``sqlite3.connect`` until the 600 s
    limit.  The ``blastrate`` CLI has no other thread when it forks (its spinner starts
    after), so users always get the quick start.
    """
    if threading.active_count() == 1 and "fork" in multiprocessing.get_all_start_methods():
        return "fork"
    return "spawn"


def _child_main(
    conn: multiprocessing.connection.Connection,
    job: Callable[[Any, Reporter], Any],
    payload: Any,
    aliases: Mapping[str, str],
) -> None:
    """Body of the child: run ``job(payload, report)``, send back the answer or the problem."""
    # Ctrl-C in a terminal signals the whole process group; the parent decides.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    from app.schemas.problems import FieldProblem, ProblemError, problem_from_exception

    def report(info: dict[str, Any]) -> None:
        conn.send(("progress", info))

    try:
        reply: tuple[str, Any] = ("ok", job(payload, report))
    except CliError as exc:  # the job's own one-line refusal, as the parent would say it
        reply = ("cli", (exc.message, exc.status))
    except MemoryError:
        reply = (
            "problem",
            ProblemError(
                "limit-exceeded",
                "the computation ran out of memory",
                [FieldProblem("body", "out of memory", "memory")],
            ).to_dict(""),
        )
    except Exception as exc:
        problem = problem_from_exception(exc, aliases)
        if problem is not None:
            reply = ("problem", problem.to_dict(""))
        else:
            reply = ("error", "".join(traceback.format_exception_only(exc)).strip())
    try:
        conn.send(reply)
    finally:
        conn.close()


def _wait(
    receiver: multiprocessing.connection.Connection,
    child: Any,
    started: float,
    timeout: float,
    label: str,
    show: Callable[[str], Any] | None,
    within: float | None,
) -> tuple[str, Any] | None:
    """The child's reply, passing its progress reports to ``show`` (or, without one,
    returning the first report); None if ``within`` seconds (from ``started``) pass
    first.

    Raises
    ------
    CliError
        Past ``timeout`` seconds from ``started``, naming ``--timeout``.
    """
    while True:
        elapsed = time.monotonic() - started
        left = timeout - elapsed
        if left <= 0:
            raise CliError(
                f"--timeout: {label} took more than {timeout:g} s; raise it with --timeout",
                EXIT_MODEL,
            )
        if within is not None and elapsed >= within:
            return None
        wait = min(_POLL_S, left) if within is None else min(_POLL_S, left, within - elapsed)
        if receiver.poll(wait):
            try:
                message = receiver.recv()
            except EOFError:
                child.join(timeout=1)
                message = ("died", child.exitcode)
            if message[0] == "progress" and show is not None:
                show(progress_text(label, message[1]))
            else:
                return message


def run_local(
    job: Callable[[Any, Reporter], Any],
    payload: Any,
    *,
    timeout: float,
    label: str,
    aliases: Mapping[str, str] | None = None,
    meanwhile: Callable[[], None] | None = None,
) -> Any:
    """Run ``job(payload)`` in a child process and return its answer.

    Parameters
    ----------
    job : callable
        ``job(payload, report)`` returning picklable data; it may call ``report`` with
        progress dicts (see :data:`Reporter`), shown on the spinner.  A module-level
        function: the child is spawned, and ``job`` and ``payload`` pickled, when this
        process runs other threads (see :func:`start_method`).
    payload : object
        Its argument.
    timeout : float
        Wall-time limit (s): past it the child is killed and the limit reported, naming
        ``--timeout``.
    label : str
        What the spinner says.
    aliases : dict, optional
        Library parameter name -> option field name, for errors.
    meanwhile : callable, optional
        Run here while the child works (checks that need not delay the answer); what it
        raises is raised, after the child is killed, ahead of the child's answer.

    Returns
    -------
    object
        What ``job`` returned.

    Raises
    ------
    CliError
        The problem the library reported (exit 2 or 3), the time limit (exit 3), or the
        child's unexpected failure (exit 1).
    KeyboardInterrupt
        On Ctrl-C, after the child is killed.
    """
    context: Any = multiprocessing.get_context(start_method())
    receiver, sender = context.Pipe(duplex=False)
    child = context.Process(
        target=_child_main,
        args=(sender, job, payload, dict(aliases or {})),
        name="blastrate-local",
        daemon=True,
    )
    started = time.monotonic()
    child.start()
    sender.close()
    reply: tuple[str, Any] | None = None
    try:
        if meanwhile is not None:
            meanwhile()
        # Most answers come before a spinner would be seen: it (and rich, a few tens
        # of ms to import) starts at the child's first progress report, or when it is
        # still at work after SPINNER_AFTER_S.
        reply = _wait(receiver, child, started, timeout, label, None, SPINNER_AFTER_S)
        if reply is None or reply[0] == "progress":
            text = label if reply is None else progress_text(label, reply[1])
            with progress(text) as show:
                reply = _wait(receiver, child, started, timeout, label, show, None)
    finally:
        if child.is_alive():
            child.kill()
        child.join(timeout=5)
        receiver.close()
    if reply is None:  # pragma: no cover - _wait returns a reply or raises without a limit
        raise CliError(f"{label}: internal error: no answer", EXIT_INTERNAL)
    kind, value = reply
    if kind == "ok":
        return value
    if kind == "cli":
        raise CliError(*value)
    if kind == "problem":
        raise error_from_problem(value, local=True)
    if kind == "died":
        code = child.exitcode
        why = f"killed by signal {-code}" if code is not None and code < 0 else f"exit {code}"
        raise CliError(f"{label}: the computation stopped unexpectedly ({why})", EXIT_INTERNAL)
    raise CliError(f"{label}: internal error: {value}", EXIT_INTERNAL)
