"""``blastrate curve``: the transfer-time curve T(B_send), as a table, CSV or JSON."""

from __future__ import annotations

import csv
import io
from pathlib import Path
from typing import Any

import click

from .common import (
    EXIT_USAGE,
    CliError,
    json_option,
    json_text,
    resolve_format,
    seconds_text,
    si_text,
    write_output,
)
from .method import bottleneck, method_options

__all__ = ["CURVE_FORMATS", "curve", "curve_plot_option", "write_curve_plot"]

#: The formats ``curve`` writes; the first is the default on stdout.
CURVE_FORMATS = ("table", "csv", "json")

_MAX_POINTS = 100_000


def _rows(body: dict[str, Any]) -> list[dict[str, Any]]:
    points = body["curve"]
    return [
        {"send_rate_bps": r, "transfer_time_s": t, "loss_probability": loss, "completes": ok}
        for r, t, loss, ok in zip(
            points["send_rate_bps"],
            points["total_s"],
            points["loss"],
            points["completes"],
            strict=True,
        )
    ]


def _csv(rows: list[dict[str, Any]]) -> str:
    out = io.StringIO()
    writer = csv.DictWriter(out, fieldnames=list(rows[0]), lineterminator="\n")
    writer.writeheader()
    for row in rows:
        writer.writerow({k: "" if v is None else v for k, v in row.items()})
    return out.getvalue()


def _table(body: dict[str, Any], rows: list[dict[str, Any]]) -> str:
    # The time-slice model's loss is the first blast's, not a stationary probability.
    loss = "first-blast loss" if body["inputs"].get("model") == "timeslice" else "loss"
    lines = [f"{'send rate':>14}  {'transfer time':>14}  {loss:>10}"]
    for row in rows:
        t = "never" if row["transfer_time_s"] is None else seconds_text(row["transfer_time_s"])
        lines.append(
            f"{si_text(row['send_rate_bps'], 'bit/s'):>14}  {t:>14}  "
            f"{row['loss_probability']:>10.3e}"
        )
    lines.append(
        f"best: {si_text(body['effective_bottleneck_rate_bps'], 'bit/s')} -> "
        f"{seconds_text(body['transfer_time_s'])}"
    )
    return "\n".join(lines)


#: The ``--plot`` option of ``blastrate curve`` (add it to that command's decorators).
curve_plot_option = click.option(
    "--plot",
    type=click.Path(dir_okay=False),
    default=None,
    help="Also draw T(B_send) with the optimum marked (.svg or .png).",
)


def write_curve_plot(body: dict[str, Any], path: str) -> None:
    """Draw a ``/bottleneck-rate`` answer with its ``curve`` to ``path`` (.svg or .png).

    Parameters
    ----------
    body : dict
        The answer of ``POST /bottleneck-rate`` with ``include_curve`` (or the local
        equivalent): ``effective_bottleneck_rate_bps`` (bit/s), ``transfer_time_s`` (s),
        ``inputs.host.line_rate_bps`` and ``curve`` (``send_rate_bps``, ``total_s``).
    path : str
        Output file; its suffix chooses the format.

    Raises
    ------
    click.BadParameter
        When the suffix is neither ``.svg`` nor ``.png`` (Click exits with status 2).
    """
    fmt = Path(path).suffix.lower().lstrip(".")
    if fmt not in ("svg", "png"):
        raise click.BadParameter(
            f"the file must end in .svg or .png, got {path!r}", param_hint="--plot"
        )
    curve = body["curve"]
    pairs = [
        (r, t)
        for r, t in zip(curve["send_rate_bps"], curve["total_s"], strict=True)
        if t is not None
    ]
    from planning.plots import curve_figure, render

    fig = curve_figure(
        [r for r, _ in pairs],
        [t for _, t in pairs],
        optimum=(body["effective_bottleneck_rate_bps"], body["transfer_time_s"]),
        line_rate_bps=float(body["inputs"]["host"]["line_rate_bps"]),
    )
    Path(path).write_bytes(render(fig, fmt))  # type: ignore[arg-type]


@click.command(short_help="The transfer-time curve T(B_send) as a table, CSV or JSON.")
@method_options
@click.option(
    "--points",
    type=int,
    default=None,
    help=f"Points of the curve, evenly spaced up to the line rate (2..{_MAX_POINTS}) "
    "[default: 200; with the time-slice model, which solves a chain per point, 200 or as "
    "many as its work bound allows: 95 at K = 1,736, N = 6].",
)
@click.option(
    "-o",
    "--output",
    metavar="FILE",
    help="Write to FILE; its suffix (.csv, .json, .txt) picks the format.",
)
@click.option(
    "--format",
    "fmt",
    type=click.Choice(CURVE_FORMATS),
    help="Output format (default: from the suffix of --output, else table).",
)
@curve_plot_option
@json_option
def curve(
    points: int | None,
    output: str | None,
    fmt: str | None,
    as_json: bool,
    plot: str | None,
    **args: Any,
) -> None:
    """The transfer-time curve T(B_send) and its minimum.

    \b
    Examples:
      blastrate curve -C 2 -I 1 --file-size 500MB --delay 100ms --points 5
      blastrate curve -C 2 -I 1 --file-size 500MB --delay 100ms -o curve.csv
      blastrate curve -C 2 -I 1 --file-size 500MB --delay 100ms --plot curve.svg
    """
    if points is not None and not 2 <= points <= _MAX_POINTS:
        raise CliError(f"--points: must lie in 2..{_MAX_POINTS}, got {points}", EXIT_USAGE)
    chosen = resolve_format(fmt, as_json, output, CURVE_FORMATS)
    if plot is not None and not plot.lower().endswith((".svg", ".png")):
        raise CliError(f"--plot: the file must end in .svg or .png, got {plot!r}", EXIT_USAGE)
    body = bottleneck(args, {"curve_points": points, "include_curve": True}, "computing the curve")
    rows = _rows(body)
    if chosen == "json":
        text = json_text(
            {
                "effective_bottleneck_rate_bps": body["effective_bottleneck_rate_bps"],
                "transfer_time_s": body["transfer_time_s"],
                "inputs": body["inputs"],
                "curve": rows,
            }
        )
    elif chosen == "csv":
        text = _csv(rows)
    else:
        text = _table(body, rows)
    if plot is not None:
        write_curve_plot(body, plot)
        click.echo(f"plot written to {plot}", err=True)  # stdout keeps the table alone
    write_output(text, output, what=f"{len(rows)} points")
