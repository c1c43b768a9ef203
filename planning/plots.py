"""The paper's figures and any sweep, drawn with matplotlib's Agg backend as SVG or PNG.

Every function builds a :class:`matplotlib.figure.Figure` directly (never pyplot, whose
global state is not safe in a server's threads) and :func:`render` turns it into bytes.
Rendering holds a lock: matplotlib's font and text caches are shared by all figures.
SVG output keeps text as text (smaller, searchable) and is deterministic (fixed ids, no
date), so the same inputs give the same bytes and a cache can serve them.

* :func:`transfer_time_figure`: T(B_send) with the optimum marked (the paper's Fig. 4).
* :func:`loss_figure`: the loss against the sending rate: the NIC queue's (the paper's
  model) or the first blast's (the time-slice model's).
* :func:`service_time_figure`: the interrupt service-time CDF with its quantiles.
* :func:`sweep_figure`: any result of a sweep against one input, one line per value of
  another (``x="cpu_tasks", series="io_tasks"`` is the paper's Fig. 3).
"""

from __future__ import annotations

import io
import threading
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, Literal

import numpy as np

import transport

if TYPE_CHECKING:
    from matplotlib.figure import Figure

    from host import InterruptServiceTime

from .errors import PlanningError
from .points import PointCurve

__all__ = [
    "OPTIMUM_ID",
    "PLOT_FORMATS",
    "curve_figure",
    "loss_figure",
    "render",
    "service_time_figure",
    "sweep_figure",
    "transfer_time_figure",
]

#: Output formats and their media types.
PLOT_FORMATS = {"svg": "image/svg+xml", "png": "image/png"}
#: The ``gid`` (SVG element id) of the marker of the optimum.
OPTIMUM_ID = "optimum"

_LOCK = threading.Lock()
_COLORS = ["#1f5f8b", "#d9822b", "#2e8b57", "#b0413e", "#6a4c93", "#5b8e7d", "#8c564b"]
# Result field -> (axis label, scale to the plotted unit).
_FIELDS = {
    "effective_bottleneck_rate_bps": ("effective bottleneck rate (Mbit/s)", 1e-6),
    "transfer_time_s": ("transfer time (s)", 1.0),
    "loss_probability": ("loss probability at the optimum", 1.0),
    "interrupt_service_rate_per_s": ("interrupt service rate (1/s)", 1.0),
    "line_rate": ("line rate (Mbit/s)", 1e-6),
    "file_size": ("file size (MB)", 1e-6),
    "propagation_delay": ("propagation delay (ms)", 1e3),
}


def _figure(width: float = 7.0, height: float = 4.2) -> Figure:
    # Matplotlib (half a second to import) is loaded by the first figure, not by the
    # import of this module: the service imports it at start to route the plots.
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=(width, height), dpi=100, layout="constrained")
    FigureCanvasAgg(fig)
    return fig


#: Text is drawn this much larger than matplotlib's default (10 pt in a 7-inch figure),
#: so that it stays readable where the page shows a plot at 560-700 pixels.
_TEXT_SCALE = 1.3


def _readable(fig: Figure) -> Figure:
    """Enlarge every text of ``fig`` by :data:`_TEXT_SCALE` (titles, labels, ticks,
    legends, notes): before, the page's plots had text too small to read."""
    from matplotlib.text import Text

    for text in fig.findobj(Text):
        text.set_fontsize(float(text.get_fontsize()) * _TEXT_SCALE)
    return fig


def _style(ax: Any) -> None:
    ax.grid(True, color="#d0d7de", linewidth=0.6)
    ax.set_axisbelow(True)
    for side in ("top", "right"):
        ax.spines[side].set_visible(False)


def render(fig: Figure, fmt: Literal["svg", "png"] = "svg") -> bytes:
    """The figure as SVG or PNG bytes.

    Parameters
    ----------
    fig : Figure
        A figure from this module.
    fmt : {"svg", "png"}, default "svg"
        Output format (PNG at 100 dpi: 700 x 420 pixels for the default size).

    Returns
    -------
    bytes
        The file's bytes; deterministic for SVG.
    """
    if fmt not in PLOT_FORMATS:
        raise PlanningError("format", f"must be one of {', '.join(PLOT_FORMATS)}, got {fmt!r}")
    from matplotlib import rc_context

    buffer = io.BytesIO()
    metadata: dict[str, Any] = {"Date": None} if fmt == "svg" else {"Software": None}
    with _LOCK, rc_context({"svg.fonttype": "none", "svg.hashsalt": "blastrate"}):
        fig.savefig(buffer, format=fmt, metadata=metadata)
    return buffer.getvalue()


def _mark_optimum(ax: Any, x: float, y: float, label: str) -> None:
    (marker,) = ax.plot(
        [x],
        [y],
        marker="*",
        markersize=15,
        color="#b0413e",
        linestyle="none",
        zorder=5,
        label=label,
    )
    marker.set_gid(OPTIMUM_ID)


def transfer_time_figure(
    best: transport.BottleneckRate | PointCurve, *, title: str | None = None
) -> Figure:
    """Transfer time against the sending rate, the optimum marked (the paper's Fig. 4).

    Parameters
    ----------
    best : transport.BottleneckRate or PointCurve
        A search result of the paper's model, or either model's curve at a point
        (:func:`planning.point_curve`); its ``curve`` is drawn (rates in Mbit/s, T in s)
        and its optimum marked with a star whose SVG id is ``optimum``.
    title : str, optional
        Figure title.

    Returns
    -------
    Figure
    """
    curve = best.curve
    ok = curve.completes
    return curve_figure(
        curve.send_rate_bps[ok],
        curve.total_s[ok],
        optimum=(best.rate_bps, best.transfer_time_s),
        line_rate_bps=best.line_rate_bps,
        title=title,
    )


def curve_figure(
    send_rate_bps: Any,
    total_s: Any,
    *,
    optimum: tuple[float, float],
    line_rate_bps: float,
    title: str | None = None,
) -> Figure:
    """T(B_send) from plain arrays (e.g. a ``/bottleneck-rate`` answer's ``curve``).

    Parameters
    ----------
    send_rate_bps, total_s : array_like
        Sending rates (bit/s) and transfer times (s) of the completing points.
    optimum : (float, float)
        The effective bottleneck rate (bit/s) and T there (s), marked with a star whose
        SVG id is ``optimum``.
    line_rate_bps : float
        Right end of the rate axis (bit/s).
    title : str, optional
        Figure title.

    Returns
    -------
    Figure
    """
    rates = np.asarray(send_rate_bps, dtype=float)
    times = np.asarray(total_s, dtype=float)
    rate, time = optimum
    fig = _figure()
    ax = fig.add_subplot()
    ax.plot(rates * 1e-6, times, color=_COLORS[0], lw=1.6, label="transfer time T")
    label = f"optimum {rate * 1e-6:.1f} Mbit/s, {time:.3g} s"
    _mark_optimum(ax, rate * 1e-6, time, label)
    if times.size:
        # The slowest rates take far longer than the interesting part: clip the view.
        top = min(float(times.max()), 4.0 * time)
        ax.set_ylim(0.0, max(top, time) * 1.05)
    ax.set_xlim(0.0, line_rate_bps * 1e-6)
    ax.set_xlabel("sending rate (Mbit/s)")
    ax.set_ylabel("transfer time (s)")
    ax.set_title(title or "Transfer time against sending rate")
    ax.legend(loc="upper right", frameon=False, fontsize=9)
    _style(ax)
    return _readable(fig)


def loss_figure(
    best: transport.BottleneckRate | PointCurve,
    *,
    title: str | None = None,
    label: str = "loss",
) -> Figure:
    """A loss probability against the sending rate, the optimum marked.

    Parameters
    ----------
    best : transport.BottleneckRate or PointCurve
        As :func:`transfer_time_figure`; the loss along its ``curve`` is drawn (capped at
        1): the NIC queue's stationary loss (the paper's model) or the first blast's (the
        time-slice model's).
    title : str, optional
        Figure title.
    label : str, default "loss"
        What the loss is (the legend's entry).

    Returns
    -------
    Figure
    """
    curve = best.curve
    loss = np.minimum(curve.loss, 1.0)
    fig = _figure()
    ax = fig.add_subplot()
    ax.plot(curve.send_rate_bps * 1e-6, loss, color=_COLORS[1], lw=1.6, label=label)
    _mark_optimum(ax, best.rate_bps * 1e-6, best.loss, f"at the optimum: {best.loss:.3g}")
    ax.set_xlim(0.0, best.line_rate_bps * 1e-6)
    top = float(loss.max()) if loss.size else 0.0
    ax.set_ylim(0.0, max(0.05, top * 1.05))
    ax.set_xlabel("sending rate (Mbit/s)")
    ax.set_ylabel("loss probability")
    ax.set_title(title or "NIC loss against sending rate")
    ax.legend(loc="upper left", frameon=False, fontsize=9)
    _style(ax)
    return _readable(fig)


def service_time_figure(service: InterruptServiceTime, *, title: str | None = None) -> Figure:
    """The CDF of the interrupt service time, with the mean and the quantiles.

    Parameters
    ----------
    service : host.InterruptServiceTime
        Stage 1's result; times are drawn in microseconds.
    title : str, optional
        Figure title.

    Returns
    -------
    Figure
    """
    fig = _figure()
    ax = fig.add_subplot()
    times = np.asarray(service.times_s, dtype=float) * 1e6
    ax.plot(times, np.asarray(service.cdf, dtype=float), color=_COLORS[2], lw=1.8, label="CDF")
    ax.axvline(
        service.mean_s * 1e6,
        color="#555",
        ls="--",
        lw=1,
        label=f"mean {service.mean_s * 1e6:.1f} µs",
    )
    for level, seconds in service.quantiles_s.items():
        ax.plot([seconds * 1e6], [level], marker="o", color=_COLORS[3], ms=5)
        ax.annotate(
            f"p{level * 100:g} {seconds * 1e6:.1f} µs",
            (seconds * 1e6, level),
            xytext=(6, -12),
            textcoords="offset points",
            fontsize=8,
        )
    ax.set_ylim(0.0, 1.02)
    ax.set_xlim(0.0, float(times[-1]))
    ax.set_xlabel("interrupt service time (µs)")
    ax.set_ylabel("P(service time ≤ t)")
    ax.set_title(title or "Interrupt service time")
    ax.legend(loc="lower right", frameon=False, fontsize=9)
    _style(ax)
    return _readable(fig)


def sweep_figure(
    records: Sequence[Mapping[str, Any]],
    x: str,
    *,
    series: str | None = None,
    y: str = "effective_bottleneck_rate_bps",
    title: str | None = None,
    max_series: int = 12,
) -> Figure:
    """A sweep's result ``y`` against input ``x``, one line per value of ``series``.

    Parameters
    ----------
    records : sequence of dict
        Sweep records (:func:`planning.evaluate_point`); records with an ``error`` are
        left out (gaps).
    x : str
        Input on the horizontal axis (e.g. ``"cpu_tasks"``).
    series : str, optional
        Input with one line per value (e.g. ``"io_tasks"``: the paper's Fig. 3).
        Records that differ in other inputs too are drawn as separate points of the
        same line, so sweep at most two inputs for a readable plot.
    y : str, default "effective_bottleneck_rate_bps"
        Result on the vertical axis: a field of :data:`planning.RESULT_FIELDS`.
    title : str, optional
        Figure title.
    max_series : int, default 12
        The most lines drawn.

    Returns
    -------
    Figure

    Raises
    ------
    PlanningError
        Naming ``x``, ``series`` or ``y`` when it is not in the records, or ``series``
        with more than ``max_series`` values.
    """
    if not records:
        raise PlanningError("records", "nothing to plot")
    for field, name in (("x", x), ("y", y), ("series", series)):
        if name is not None and name not in records[0]:
            raise PlanningError(field, f"{name!r} is not a field of the records")
    groups: dict[Any, list[Mapping[str, Any]]] = {}
    for r in records:
        groups.setdefault(r[series] if series else None, []).append(r)
    if len(groups) > max_series:
        raise PlanningError(
            "series", f"{len(groups)} values of {series!r}; at most {max_series} lines"
        )
    ylabel, yscale = _FIELDS.get(y, (y, 1.0))
    xlabel, xscale = _FIELDS.get(x, (x.replace("_", " "), 1.0))
    fig = _figure()
    ax = fig.add_subplot()
    for k, (value, rows) in enumerate(groups.items()):
        rows = sorted(rows, key=lambda r: r[x])
        xs = np.array([float(r[x]) * xscale for r in rows])
        ys = np.array([np.nan if r[y] is None else float(r[y]) * yscale for r in rows])
        label = (
            f"{series} = {value:g}"
            if isinstance(value, int | float)
            else (f"{series} = {value}" if series else None)
        )
        ax.plot(xs, ys, marker="o", ms=4, lw=1.5, color=_COLORS[k % len(_COLORS)], label=label)
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    if y == "effective_bottleneck_rate_bps":
        ax.set_ylim(bottom=0.0)
    ax.set_title(title or f"{ylabel.split(' (')[0].capitalize()} against {xlabel.split(' (')[0]}")
    if series:
        ax.legend(frameon=False, fontsize=9, ncols=2 if len(groups) > 6 else 1)
    _style(ax)
    return _readable(fig)
