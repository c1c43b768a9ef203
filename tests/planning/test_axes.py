"""The axis grammar: ranges, lists, units, and the limits it names."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from app.schemas.units import parse_duration, parse_size
from planning import PlanningError, axis_values


def size(text: str, field: str) -> float:
    return float(parse_size(text, field))


def test_integer_range_list_and_mixed() -> None:
    assert axis_values("io_tasks", "0..20", integer=True) == list(range(21))
    assert axis_values("cores", "1,2,4,8", integer=True) == [1, 2, 4, 8]
    assert axis_values("buffer_packets", "64, 512..2048:512", integer=True) == [
        64,
        512,
        1024,
        1536,
        2048,
    ]
    assert axis_values("cores", [1, 2, 2, 1], integer=True) == [1, 2]  # duplicates dropped
    assert axis_values("cpu_tasks", 3, integer=True) == [3]


def test_human_units_in_ranges() -> None:
    assert axis_values("file_size", "100MB..300MB:100MB", size, integer=True) == [
        100_000_000,
        200_000_000,
        300_000_000,
    ]
    assert axis_values("propagation_delay", "10ms,100ms", parse_duration) == [0.01, 0.1]
    # The end is kept despite rounding of 0.1 + 2 * 0.1.
    assert len(axis_values("propagation_delay", "0.1..0.3:0.1")) == 3


@pytest.mark.parametrize(
    ("spec", "reason"),
    [
        ("5..1", "ends below its start"),
        ("1..5:0", "must be > 0"),
        ("1..", "a range is a..b"),
        ("1.5", "not a whole number"),
        ("1,,2", "empty item"),
        ("x", "cannot read"),
    ],
)
def test_bad_specs_name_the_field(spec: str, reason: str) -> None:
    with pytest.raises(PlanningError, match=reason) as info:
        axis_values("io_tasks", spec, integer=True)
    assert info.value.field == "io_tasks"


def test_non_integer_range_needs_a_step() -> None:
    with pytest.raises(PlanningError, match="needs a step"):
        axis_values("propagation_delay", "10ms..100ms", parse_duration)


def test_a_long_range_is_refused_before_it_is_built() -> None:
    with pytest.raises(PlanningError) as info:
        axis_values("io_tasks", "0..1000000000000", integer=True, max_values=1000)
    assert info.value.limit == "max_points"
    assert info.value.reached == 1000000000001
    assert "max_points=1000" in str(info.value)


@given(st.integers(-1000, 1000), st.integers(0, 500), st.integers(1, 50))
def test_integer_range_matches_python_range(start: int, length: int, step: int) -> None:
    stop = start + length
    assert axis_values("x", f"{start}..{stop}:{step}", integer=True) == list(
        range(start, stop + 1, step)
    )
