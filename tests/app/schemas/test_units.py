"""Human-friendly quantities (docs/conventions.md "Units": case matters, B is a byte and b a
bit, 1 MB = 10^6 B, 1 MiB = 2^20 B, 1 Mbps = 10^6 bit/s)."""

from __future__ import annotations

from fractions import Fraction

import pytest
from hypothesis import given
from hypothesis import strategies as st

from app.schemas.units import QuantityError, parse_bitrate, parse_duration, parse_size


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
        ("1468bytes", 1_468),
        ("5e8", 500_000_000),
        ("1TB", 10**12),
        # b is a bit: 500 megabits are 62.5 megabytes.
        ("500Mb", 62_500_000),
        ("4000Mbit", 500_000_000),
        ("8b", 1),
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
        ("1Gbit/s", 1e9),
        ("1Gb/s", 1e9),
        ("10Gbit/s", 10e9),
        ("100kbps", 100e3),
        ("123456", 123_456.0),
        # B is a byte: 1 GB/s is 8 Gbit/s.
        ("1GBps", 8e9),
        ("1GB/s", 8e9),
        ("125MB/s", 1e9),
        ("1MiB/s", 8 * 2**20),
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
        (parse_size, "-5MB", "strictly positive, got '-5MB'"),
        (parse_duration, "-10ms", "strictly positive, got '-10ms'"),
        (parse_duration, " -0.1 ", "strictly positive, got '-0.1'"),
        (parse_bitrate, "-1Gbps", "strictly positive, got '-1Gbps'"),
        (parse_duration, "--10ms", "cannot read"),
        (parse_duration, "-5m", "cannot read"),
        (parse_size, "-5MB/s", "cannot read"),
        (parse_duration, "-0", "strictly positive, got '-0'"),
        (parse_duration, -0.5, "strictly positive, got -0.5"),
        (parse_size, "0MB", "strictly positive"),
        (parse_size, "1.5B", "whole number"),
        (parse_size, "7b", "whole number"),
        (parse_size, "5XB", "unknown unit"),
        (parse_size, "1e300", "at most 2"),
        (parse_size, "1e999999", "out of range"),
        (parse_size, "nan", "cannot read"),
        (parse_bitrate, "1GB", "unknown unit"),
        (parse_bitrate, "inf", "cannot read"),
        (parse_duration, "5 parsecs", "unknown unit"),
        (parse_duration, "1e400", "out of range"),
        (parse_duration, "1e-999999", "out of range"),
    ],
)
def test_bad_quantities_name_the_field(parse: object, text: str, words: str) -> None:
    with pytest.raises(QuantityError, match=words) as info:
        parse(text, "the_field")  # type: ignore[operator]
    assert info.value.field == "the_field"


@pytest.mark.parametrize(
    ("text", "bps"),
    [
        # iperf3's -b spelling (bits, powers of 1000) and the K every network tool writes.
        ("800M", 800e6),
        ("1G", 1e9),
        ("100K", 100e3),
        ("100Kbps", 100e3),
        ("10Gbit", 10e9),
        ("1kbit/s", 1e3),
    ],
)
def test_network_tool_spellings_of_a_rate(text: str, bps: float) -> None:
    assert parse_bitrate(text, "f") == bps


@pytest.mark.parametrize(
    ("parse", "text"),
    [
        # Case is meaning: these are refused rather than guessed.
        (parse_bitrate, "1gbps"),
        (parse_bitrate, "1GBPS"),
        (parse_bitrate, "1KBps"),  # K bytes: 1000 or 1024?  Refused (a rate's K is bits)
        (parse_size, "500mb"),
        (parse_size, "1KB"),
        (parse_size, "1kib"),
        (parse_duration, "100MS"),
        (parse_duration, "5m"),
    ],
)
def test_ambiguous_spellings_list_the_accepted_forms(parse: object, text: str) -> None:
    with pytest.raises(QuantityError, match="unknown unit") as info:
        parse(text, "f")  # type: ignore[operator]
    assert "case matters" in info.value.reason
    assert "e.g." in info.value.reason


@given(st.integers(min_value=1, max_value=10**6), st.sampled_from(["kB", "MB", "GB"]))
def test_decimal_prefixes_are_exact(number: int, unit: str) -> None:
    factor = {"kB": 10**3, "MB": 10**6, "GB": 10**9}[unit]
    assert parse_size(f"{number}{unit}") == number * factor


_PREFIX = {"": 1, "k": 10**3, "M": 10**6, "G": 10**9, "Ki": 2**10, "Mi": 2**20, "Gi": 2**30}


@given(
    st.integers(min_value=1, max_value=10**6),
    st.sampled_from(sorted(_PREFIX)),
    st.sampled_from(["bps", "bit/s", "b/s", "Bps", "B/s"]),
)
def test_rates_bits_and_bytes(number: int, prefix: str, word: str) -> None:
    # The byte forms are exactly 8 times the bit forms (one conversion, no rounding
    # beyond the final float).
    bits = Fraction(number * _PREFIX[prefix]) * (8 if word[0] == "B" else 1)
    assert parse_bitrate(f"{number}{prefix}{word}") == float(bits)


@given(st.integers(min_value=1, max_value=10**6), st.sampled_from(sorted(_PREFIX)))
def test_sizes_bits_are_an_eighth_of_bytes(number: int, prefix: str) -> None:
    nbytes = number * _PREFIX[prefix]
    assert parse_size(f"{number}{prefix}B") == nbytes
    assert parse_size(f"{8 * number}{prefix}b") == nbytes


_DURATION_FACTOR = {"": 1, "s": 1, "ms": Fraction(1, 10**3), "us": Fraction(1, 10**6), "h": 3600}


@given(
    st.integers(min_value=1, max_value=10**12),
    st.integers(min_value=0, max_value=12),
    st.integers(min_value=-30, max_value=30),
    st.sampled_from(sorted(_DURATION_FACTOR)),
)
def test_decimal_text_is_rounded_once(digits: int, point: int, exponent: int, unit: str) -> None:
    """A decimal with a fraction and an exponent, times a unit, is the exact product
    rounded once to the nearest double: the reference is Python's exact Fraction
    arithmetic, whose float() rounds correctly."""
    whole, fraction = divmod(digits, 10**point)
    text = f"{whole}.{fraction:0{point}d}" if point else str(digits)
    text += f"e{exponent}{unit}"
    exact = Fraction(digits, 10**point) * Fraction(10) ** exponent * _DURATION_FACTOR[unit]
    assert parse_duration(text) == float(exact)
    assert parse_bitrate(text.removesuffix(unit) + "Mbps") == float(
        Fraction(digits, 10**point) * Fraction(10) ** exponent * 10**6
    )
