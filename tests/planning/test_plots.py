"""Plots: valid SVG (parsed safely) and PNG, the optimum marked where it belongs."""

from __future__ import annotations

import struct

import defusedxml.ElementTree as SafeET
import pytest

from planning import PlanningError, resolve_point, run_sweep, solve_point
from planning.plots import (
    OPTIMUM_ID,
    loss_figure,
    render,
    service_time_figure,
    sweep_figure,
    transfer_time_figure,
)

SVG = "{http://www.w3.org/2000/svg}"
POINT = {
    "cpu_tasks": 2,
    "io_tasks": 1,
    "file_size": 500_000_000,
    "propagation_delay": 0.1,
    "model": "paper",  # solve_point: the paper's whole method
}


@pytest.fixture(scope="module")
def result():  # type: ignore[no-untyped-def]
    return solve_point(resolve_point(POINT))


def png_size(data: bytes) -> tuple[int, int]:
    """Width and height from a PNG's signature and IHDR chunk (PNG spec, section 5)."""
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    assert data[12:16] == b"IHDR"
    width, height = struct.unpack(">II", data[16:24])
    return width, height


def test_transfer_time_svg_marks_the_optimum(result) -> None:  # type: ignore[no-untyped-def]
    svg = render(transfer_time_figure(result.bottleneck), "svg")
    root = SafeET.fromstring(svg)
    assert root.tag == SVG + "svg"
    marker = [e for e in root.iter() if e.get("id") == OPTIMUM_ID]
    assert len(marker) == 1
    # The legend names the optimum's rate, as the search found it.
    text = " ".join(t.text or "" for t in root.iter(SVG + "text"))
    assert f"{result.bottleneck.rate_bps * 1e-6:.1f} Mbit/s" in text
    # Deterministic bytes: same inputs, same file (cacheable).
    assert render(transfer_time_figure(result.bottleneck), "svg") == svg


def test_png_has_the_figure_size(result) -> None:  # type: ignore[no-untyped-def]
    assert png_size(render(loss_figure(result.bottleneck), "png")) == (700, 420)
    assert png_size(render(service_time_figure(result.service), "png")) == (700, 420)


def test_sweep_figure_one_line_per_series() -> None:
    sweep = run_sweep(
        {"file_size": 500_000_000, "propagation_delay": 0.1},
        {"io_tasks": [0, 2], "cpu_tasks": [0, 2, 4]},
        inline=True,
    )
    root = SafeET.fromstring(render(sweep_figure(sweep.records, "cpu_tasks", series="io_tasks")))
    text = " ".join(t.text or "" for t in root.iter(SVG + "text"))
    assert "io_tasks = 0" in text and "io_tasks = 2" in text
    with pytest.raises(PlanningError) as info:
        sweep_figure(sweep.records, "colour")
    assert info.value.field == "x"


def test_unknown_format() -> None:
    with pytest.raises(PlanningError) as info:
        render(sweep_figure([{"a": 1, "effective_bottleneck_rate_bps": 1.0}], "a"), "gif")  # type: ignore[arg-type]
    assert info.value.field == "format"
