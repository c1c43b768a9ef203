"""``blastrate sweep`` and ``blastrate what-if``, and the ``--plot`` helper of ``curve``.

Click commands (registered in the ``main`` group by ``app.commands``).  Inputs are named
as in ``GET /bottleneck-rate`` (``--io-tasks``, ``--file-size``...) and take human units;
a sweep input takes a list ``1,2,4`` or a range ``0..20`` / ``100MB..1GB:100MB``.

Exit status: 0 ok, 2 bad input, 3 the model has no answer, 4 server or cluster
unreachable, 5 server error, 1 internal error, 130 on Ctrl-C.  Errors are one line
``blastrate: error: <field>: <reason>`` on stderr.
"""

from __future__ import annotations

import contextlib
import json
import signal
import sys
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn

import click

from app.operations.capacity import parse_inputs
from app.schemas.units import QuantityError, parse_duration
from planning import DEFAULT_MAX_POINTS, PlanningError, run_sweep
from planning.whatif import DEFAULT_MAX_BUFFER_PACKETS, what_if

from .common import FINITE, OPTION_OF, print_table, stdout_console, stdout_is_terminal

if TYPE_CHECKING:
    import httpx

# Matplotlib (planning.plots, 0.7 s) is imported only to draw a --plot, and httpx only to
# ask a --server: the commands answer without either.

__all__ = ["sweep", "what_if_command"]

# Option name -> input name, in the order of GET /bottleneck-rate.
_INPUT_OPTIONS = {
    "cpu_tasks": "C, CPU-bound tasks",
    "io_tasks": "I, I/O-bound tasks",
    "cores": "m, cores (default 1)",
    "disks": "d, disks (default 1)",
    "profile": "host profile (default sx280-2007)",
    "mu_io_cpu": "override (1/s)",
    "mu_disk": "override (1/s)",
    "mu_net": "override (1/s)",
    "buffer_packets": "NIC ring K (packets)",
    "coalesce_packets": "coalescing batch N (packets)",
    "line_rate": "line rate (e.g. 10Gbps)",
    "packet_payload": "S_pkt (bytes)",
    "file_size": "file size (e.g. 500MB)",
    "propagation_delay": "one-way delay (e.g. 100ms)",
    "nic_service": "exponential or phase-type",
    "model": "receiver model: timeslice (the default) or paper; what-if ranks with paper",
}
# Inputs that take names, not numbers: a list a,b sweeps them, a range does not apply.
_NAMED_INPUTS = ("profile", "nic_service", "model")


class _Exit(Exception):
    def __init__(self, message: str, status: int) -> None:
        super().__init__(message)
        self.status = status


def _fail(message: str, status: int) -> NoReturn:
    raise _Exit(message, status)


@contextlib.contextmanager
def _interrupt_cancels() -> Iterator[threading.Event]:
    """Within the block, Ctrl-C sets the event that :func:`planning.run_sweep` checks (at
    least every quarter second), instead of raising KeyboardInterrupt wherever the main
    thread is.  Raised inside the process pool's own locking (``concurrent.futures``),
    it left a future's lock held, and the exit then waited on the pool for ever."""
    cancel = threading.Event()
    if threading.current_thread() is not threading.main_thread():
        yield cancel
        return
    previous = signal.signal(signal.SIGINT, lambda *_: cancel.set())
    try:
        yield cancel
    except PlanningError as exc:
        if exc.field == "cancelled" and cancel.is_set():
            raise KeyboardInterrupt from None
        raise
    finally:
        signal.signal(signal.SIGINT, previous)


def _run(body: Callable[[], None]) -> None:
    """Run a command body with the CLI's exit conventions."""
    try:
        body()
    except _Exit as exc:
        click.echo(f"blastrate: error: {exc}", err=True)
        sys.exit(exc.status)
    except (PlanningError, QuantityError) as exc:
        status = 4 if getattr(exc, "field", "") == "cluster" else 2
        if isinstance(exc, PlanningError) and exc.field == "loss":
            status = 3
        # Named as the option that sets it (--delay, not propagation_delay).
        field = _OPTION_NAMES.get(exc.field, OPTION_OF.get(exc.field, exc.field))
        reason = exc.reason
        limit = getattr(exc, "limit", None)
        if limit in _RAISED_BY:
            # A limit an option raises: named by that option, exit 3 (as rate's).
            field, status = _RAISED_BY[limit], 3
            reason += f"; raise it with {field}"
        click.echo(f"blastrate: error: {field}: {reason}", err=True)
        sys.exit(status)
    except KeyboardInterrupt:
        click.echo("blastrate: interrupted", err=True)
        sys.exit(130)


# The command line's one vocabulary: the same names as `rate` and `curve` (and iperf3's
# habit of short options for what is typed most).
_OPTION_DECLS = {
    "cpu_tasks": ("-C", "--cpu-tasks"),
    "io_tasks": ("-I", "--io-tasks"),
    "propagation_delay": ("--delay", "--propagation-delay"),
}
_OPTION_NAMES = {
    "propagation_delay": "--delay",
    "max_points": "--max-points",
    "max_buffer_packets": "--max-buffer-packets",
}
# The limits that an option of these commands raises.
_RAISED_BY = {"max_points": "--max-points", "timeout_s": "--timeout"}
#: Most points a local sweep may have: its records are held in memory (about 1 KB each),
#: so a mistyped range cannot fill the machine's memory.
MAX_LOCAL_POINTS = 1_000_000


def _input_options(help_suffix: str, named_suffix: str = "") -> Callable[[Any], Any]:
    def decorate(f: Any) -> Any:
        for name, text in reversed(_INPUT_OPTIONS.items()):
            decls = _OPTION_DECLS.get(name, ("--" + name.replace("_", "-"),))
            suffix = named_suffix if name in _NAMED_INPUTS else help_suffix
            f = click.option(*decls, name, default=None, help=f"{text}{suffix}")(f)
        return f

    return decorate


def _delay_tokens(spec: str) -> list[str]:
    """The quantities of a value, list (``a,b``) or range (``a..b:step``)."""
    return [t for part in spec.split(",") for piece in part.split("..") for t in piece.split(":")]


def _specs(kwargs: dict[str, Any]) -> dict[str, Any]:
    specs = {name: kwargs.pop(name) for name in _INPUT_OPTIONS if kwargs.get(name) is not None}
    delay = specs.get("propagation_delay")
    if isinstance(delay, str):
        # A bare number is ambiguous on the command line (ms or s?): a unit is required.
        for token in _delay_tokens(delay):
            if token.strip():
                try:
                    parse_duration(token, "--delay", unit_required=True)
                except QuantityError as exc:
                    if "bare number" in exc.reason:
                        _fail(f"--delay: {exc.reason}", 2)
    return specs


def _post(server: str, path: str, payload: dict[str, Any], timeout: float) -> httpx.Response:
    import httpx

    try:
        response = httpx.post(server.rstrip("/") + path, json=payload, timeout=timeout)
    except httpx.HTTPError as exc:
        _fail(f"server: cannot reach {server}: {exc}", 4)
    if response.status_code >= 500:
        _fail(f"server: {response.status_code} {_problem(response)}", 5)
    if response.status_code >= 400:
        _fail(_problem(response), 3 if "never-completes" in response.text else 2)
    return response


def _problem(response: httpx.Response) -> str:
    try:
        body = response.json()
    except ValueError:
        return response.text[:200]
    errors = body.get("errors") or []
    if errors:
        # Named as the option that sets it, as a local error is (body.inputs.model: --model).
        field = str(errors[0]["field"])
        leaf = field.rsplit(".", 1)[-1]
        return f"{_OPTION_NAMES.get(leaf, OPTION_OF.get(leaf, field))}: {errors[0]['reason']}"
    return str(body.get("detail", body))


def _plot_format(path: str) -> str:
    suffix = Path(path).suffix.lower().lstrip(".")
    if suffix not in ("svg", "png"):
        _fail(f"plot: the file must end in .svg or .png, got {path!r}", 2)
    return suffix


def _mbps(bps: float | None) -> str:
    return "-" if bps is None else f"{bps / 1e6:.1f}"


@click.command("sweep")
@_input_options("; a value, a list 1,2,4 or a range 0..20 / a..b:step", "; a name or a list a,b")
@click.option("--json", "as_json", is_flag=True, help="Print the records as JSON.")
@click.option("--csv", "as_csv", is_flag=True, help="Print the records as CSV.")
@click.option("--output", "-o", type=click.Path(dir_okay=False), help="Write JSON/CSV here.")
@click.option("--plot", type=click.Path(dir_okay=False), help="Draw the sweep (.svg or .png).")
@click.option("--x", "plot_x", default=None, help="Plot: input on the x axis (default: first).")
@click.option("--series", default=None, help="Plot: one line per value of this input.")
@click.option(
    "--y",
    default="effective_bottleneck_rate_bps",
    show_default=True,
    help="Plot: the result drawn.",
)
@click.option(
    "--cluster",
    envvar="BLASTRATE_SWEEP_CLUSTER",
    default=None,
    help="Dask scheduler tcp://HOST:8786 (default: a local process pool).",
)
@click.option(
    "--workers",
    type=click.IntRange(1, 256),
    default=None,
    help="Local worker processes (default: the CPUs available).",
)
@click.option(
    "--max-points",
    type=click.IntRange(1, MAX_LOCAL_POINTS),
    default=DEFAULT_MAX_POINTS,
    show_default=True,
    help=f"Refuse sweeps with more points (at most {MAX_LOCAL_POINTS:,}).",
)
@click.option("--server", default=None, help="Ask a running service (POST /sweeps).")
@click.option(
    "--timeout", type=FINITE, default=3600.0, show_default=True, help="Seconds before giving up."
)
def sweep(**kwargs: Any) -> None:
    """Evaluate the effective bottleneck rate over the product of ranges of inputs.

    \b
    Example:
      blastrate sweep --cpu-tasks 2 --io-tasks 0..20 --cores 1,2,4,8 \\
        --buffer-packets 64,512,4096 --file-size 500MB --propagation-delay 100ms --csv
    """
    _run(lambda: _sweep(**kwargs))


def _sweep(
    *,
    as_json: bool,
    as_csv: bool,
    output: str | None,
    plot: str | None,
    plot_x: str | None,
    series: str | None,
    y: str,
    cluster: str | None,
    workers: int | None,
    max_points: int,
    server: str | None,
    timeout: float,
    **inputs: Any,
) -> None:
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TimeRemainingColumn
    from rich.table import Table

    specs = _specs(inputs)
    fmt = _plot_format(plot) if plot else None
    if as_json and as_csv:
        _fail("format: choose --json or --csv, not both", 2)
    base, axes = parse_inputs(specs, max_points=max_points)
    if server:
        response = _post(server, "/sweeps", {"inputs": specs, "format": "json"}, timeout)
        result: dict[str, Any] = response.json()
        records = result["records"]
    else:
        stderr = Console(stderr=True)
        with Progress(
            "[progress.description]{task.description}",
            BarColumn(),
            MofNCompleteColumn(),
            TimeRemainingColumn(),
            console=stderr,
            transient=True,
            disable=not stderr.is_terminal,
        ) as progress:
            total = 1
            for values in axes.values():
                total *= len(values)
            task = progress.add_task("sweep", total=total)
            with _interrupt_cancels() as cancel:
                done = run_sweep(
                    base,
                    axes,
                    max_points=max_points,
                    workers=workers,
                    cluster=cluster,
                    inline=total <= 8 and cluster is None,
                    progress=lambda n, _total: progress.update(task, completed=n),
                    timeout_s=timeout,
                    cancel=cancel,
                )
        result = done.to_dict()
        records = result["records"]
    if as_csv or (output and output.endswith(".csv")):
        from planning import SweepResult

        text = SweepResult(
            axes=result["axes"],
            records=records,
            ran_on=result["ran_on"],
            workers=result["workers"],
            batches=result["batches"],
        ).to_csv()
    else:
        text = json.dumps(result, indent=None if output else 2)
    if output:
        Path(output).write_text(text + ("" if text.endswith("\n") else "\n"))
    elif as_json or as_csv:
        click.echo(text, nl=not text.endswith("\n"))
    if plot and fmt:
        names = list(result["axes"])
        x = plot_x or (names[0] if names else None)
        if x is None:
            _fail("plot: the sweep has no range to plot against; give one input a range", 2)
        if series is None:
            rest = [n for n in names if n != x]
            series = rest[0] if rest else None
        from planning.plots import render, sweep_figure

        content = render(sweep_figure(records, x, series=series, y=y), fmt)  # type: ignore[arg-type]
        Path(plot).write_bytes(content)
    if not (as_json or as_csv) or output:
        console = stdout_console()
        table = Table(title=f"{result['points']} points ({result['failed']} without an answer)")
        failed = next((r["error"] for r in records if r["error"]), None)
        swept = list(result["axes"]) or ["cpu_tasks", "io_tasks"]
        for name in swept:
            table.add_column(name, justify="right")
        table.add_column("rate (Mbit/s)", justify="right")
        table.add_column("time (s)", justify="right")
        table.add_column("loss", justify="right")
        # On a terminal the first 20 rows and a note; piped, every row.
        shown = records[:20] if stdout_is_terminal() else records
        for r in shown:
            table.add_row(
                *(str(r[n]) for n in swept),
                _mbps(r["effective_bottleneck_rate_bps"]),
                "-" if r["transfer_time_s"] is None else f"{r['transfer_time_s']:.4g}",
                "-" if r["loss_probability"] is None else f"{r['loss_probability']:.3g}",
            )
        print_table(table, console)
        if len(records) > len(shown):
            console.print(f"... {len(records) - len(shown)} more (use --json, --csv or --output)")
        if failed is not None:
            # The first reason on the screen; each row's is in the records' error column.
            console.print(f"no answer: {failed}", markup=False, highlight=False)
        if plot:
            console.print(f"plot written to {plot}")


@click.command("what-if")
@_input_options("")
@click.option(
    "--max-buffer-packets",
    type=click.IntRange(1),
    default=DEFAULT_MAX_BUFFER_PACKETS,
    show_default=True,
    help="The NIC's largest RX ring (ethtool -g).",
)
@click.option(
    "--interface",
    default="eth0",
    show_default=True,
    help="Interface named in the ethtool commands.",
)
@click.option("--json", "as_json", is_flag=True, help="Print the answer as JSON.")
@click.option("--server", default=None, help="Ask a running service (POST /what-if).")
@click.option(
    "--timeout",
    type=FINITE,
    default=600.0,
    show_default=True,
    help="Seconds before giving up (with --server).",
)
def what_if_command(**kwargs: Any) -> None:
    """Rank the single upgrades of a host by the transfer time they save.

    \b
    Example:
      blastrate what-if --cpu-tasks 2 --io-tasks 1 --file-size 500MB \\
        --propagation-delay 100ms --max-buffer-packets 4096
    """
    _run(lambda: _what_if(**kwargs))


def _what_if(
    *,
    max_buffer_packets: int,
    interface: str,
    as_json: bool,
    server: str | None,
    timeout: float,
    **inputs: Any,
) -> None:
    from rich.console import Console
    from rich.table import Table

    specs = _specs(inputs)
    if server:
        payload = {
            "inputs": specs,
            "max_buffer_packets": max_buffer_packets,
            "interface": interface,
        }
        result = _post(server, "/what-if", payload, timeout).json()
    else:
        base, _ = parse_inputs(specs, max_points=1, single=True)
        console = Console(stderr=True)
        with console.status("ranking upgrades", spinner="dots"):
            result = what_if(
                base, max_buffer_packets=max_buffer_packets, interface=interface
            ).to_dict()
    if as_json:
        click.echo(json.dumps(result, indent=2))
        return
    console = stdout_console()
    b = result["baseline"]
    console.print(
        f"now: {_mbps(b['effective_bottleneck_rate_bps'])} Mbit/s, "
        f"{b['transfer_time_s']:.4g} s ({b['limited_by']}), ranked with model={b['model']}"
    )
    table = Table(title="single changes, most time saved first")
    for name, justify in (
        ("change", "left"),
        ("rate (Mbit/s)", "right"),
        ("time (s)", "right"),
        ("saved (s)", "right"),
    ):
        table.add_column(name, justify=justify)  # type: ignore[arg-type]
    notes: list[str] = []

    def marked(note: str | None) -> str:
        # A footnote mark for a row whose numbers need a word of explanation.
        if not note:
            return ""
        if note not in notes:
            notes.append(note)
        return " " + "*" * (notes.index(note) + 1)

    for c in result["changes"]:
        saved = c["time_saved_s"]
        table.add_row(
            c["description"] + marked(c.get("note")),
            _mbps(c["effective_bottleneck_rate_bps"]),
            "never" if c["transfer_time_s"] is None else f"{c['transfer_time_s']:.4g}",
            "-" if saved is None else "no change" if saved == 0 else f"{saved:+.4g}",
        )
    print_table(table, console)
    for k, note in enumerate(notes, 1):
        console.print(f"{'*' * k} {note}", markup=False)
    ring = result["best_ring"]
    if ring:
        console.print(
            f"best ring and coalescing: K={ring['buffer_packets']}, N={ring['coalesce_packets']}"
            f" -> {_mbps(ring['effective_bottleneck_rate_bps'])} Mbit/s, "
            f"{ring['transfer_time_s']:.4g} s"
        )
        for command in ring["commands"]:
            console.print(f"  {command}", markup=False)
    table = Table(title="elasticity d ln(rate) / d ln(parameter), 5% steps")
    table.add_column("parameter")
    table.add_column("rate", justify="right")
    table.add_column("time", justify="right")
    notes = []

    def elasticity(value: float | None) -> str:
        return "-" if value is None else "0" if value == 0 else f"{value:+.3f}"

    for e in result["elasticities"]:
        table.add_row(
            e["parameter"] + marked(e.get("note")),
            elasticity(e["rate_elasticity"]),
            elasticity(e["time_elasticity"]),
        )
    print_table(table, console)
    for k, note in enumerate(notes, 1):
        console.print(f"{'*' * k} {note}", markup=False)
