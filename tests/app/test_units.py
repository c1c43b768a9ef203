"""Human-friendly quantities (SPEC "Units": 1 MB = 10^6 B, 1 Mbps = 10^6 bit/s)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from app.units import QuantityError, parse_bitrate, parse_duration, parse_size


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("500MB", 500_000_000),
        ("500 MB", 500_000_000),
        ("1.5GB", 1_500_000_000),
        ("1kB", 1_000),
        ("1KiB", 1_024),
        ("2MiB", 2 * 1024**2),
        ("1468", 1_468),
        ("1468B", 1_468),
        ("5e8", 500_000_000),
        ("1TB", 10**12),
    ],
)
def test_sizes_in_bytes(text: str, expected: int) -> None:
    value = parse_size(text)
    assert value == expected
    assert isinstance(value, int)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("950Mbps", 950e6),
        ("1Gbps", 1e9),
        ("1gbps", 1e9),
        ("10Gbit/s", 10e9),
        ("100kbps", 100e3),
        ("123456", 123_456.0),
    ],
)
def test_bit_rates_in_bit_per_second(text: str, expected: float) -> None:
    assert parse_bitrate(text) == pytest.approx(expected, rel=1e-15)


@pytest.mark.parametrize(
    ("text", "expected"),
    [("100ms", 0.1), ("0.1", 0.1), ("0.1s", 0.1), ("250us", 250e-6), ("2min", 120.0)],
)
def test_durations_in_seconds(text: str, expected: float) -> None:
    assert parse_duration(text) == pytest.approx(expected, rel=1e-15)


@pytest.mark.parametrize(
    ("parse", "text", "words"),
    [
        (parse_size, "abc", "cannot read"),
        (parse_size, "-5MB", "cannot read"),
        (parse_size, "0MB", "strictly positive"),
        (parse_size, "1.5B", "whole number"),
        (parse_size, "5XB", "unknown unit"),
        (parse_size, "1e300", "at most 2"),
        (parse_size, "nan", "cannot read"),
        (parse_bitrate, "1GB/s", "unknown unit"),
        (parse_bitrate, "inf", "cannot read"),
        (parse_duration, "5 parsecs", "unknown unit"),
        (parse_duration, "1e400", "not finite"),
    ],
)
def test_bad_quantities_name_the_field(parse: object, text: str, words: str) -> None:
    with pytest.raises(QuantityError, match=words) as info:
        parse(text, "the_field")  # type: ignore[operator]
    assert info.value.field == "the_field"


@given(st.integers(min_value=1, max_value=10**6), st.sampled_from(["kB", "MB", "GB"]))
def test_decimal_prefixes_are_exact(number: int, unit: str) -> None:
    factor = {"kB": 10**3, "MB": 10**6, "GB": 10**9}[unit]
    assert parse_size(f"{number}{unit}") == number * factor
