"""Human-friendly quantities at the edges (CLI, query strings), converted once to SI.

The conventions are those of ``docs/conventions.md`` ("Units"): spelling is
case-sensitive, ``B`` is a byte and ``b`` a bit, decimal prefixes (``k``, ``M``, ``G``,
``T``, ``P``) are powers of 1000 and binary ones (``Ki``, ``Mi``, ``Gi``, ``Ti``, ``Pi``)
powers of 1024.  So ``1GBps`` is 8 * 10^9 bit/s and ``500Mb`` is 62.5 * 10^6 bytes.  A
bare number is already in the SI unit (bytes, bit/s, seconds).

Parsing is a regular expression and an exact lookup in a table generated from those
rules: no user text is evaluated, and nothing is case-folded.  The arithmetic is exact,
on integer ratios (the number's digits times the unit's factor), and rounded once, to
the nearest double, at the end.  A spelling outside the
table (``KB``, ``mb``, ``MBPS``, ``m``...) could mean two things and is refused with the
accepted forms.  A units library was considered and not used: pint, the best kept one,
reads ``b`` as a barn and ``Mb`` as a megabarn, evaluates arithmetic in the unit string,
and would need a custom definition file to get bits and bytes right, so the table is both
stricter and shorter.
"""

from __future__ import annotations

import math
import re
import sys
from decimal import Decimal

__all__ = [
    "BITRATE_FORMS",
    "DURATION_FORMS",
    "SIZE_FORMS",
    "QuantityError",
    "parse_bitrate",
    "parse_duration",
    "parse_number",
    "parse_size",
]

_NUMBER = r"(?P<number>[0-9]+(?:\.[0-9]*)?(?:[eE][+-]?[0-9]+)?|\.[0-9]+(?:[eE][+-]?[0-9]+)?)"
# re.ASCII: \s is the six ASCII spaces only.  Unicode's also has the separators
# \x1c-\x1f, which float() refuses ("0\x1f" was read as 0 here; Hypothesis found it).
_QUANTITY = re.compile(rf"^\s*{_NUMBER}\s*(?P<unit>[A-Za-zµ/]*)\s*$", re.ASCII)
_PLAIN = re.compile(rf"^\s*(?P<sign>[+-]?){_NUMBER}\s*$", re.ASCII)
#: Longest plain number read (characters): a count of tasks or a rate has a few digits.
_MAX_NUMBER_CHARS = 64

_DECIMAL_PREFIXES = {"": 1, "k": 10**3, "M": 10**6, "G": 10**9, "T": 10**12, "P": 10**15}
_BINARY_PREFIXES = {"Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40, "Pi": 2**50}
_PREFIXES = {**_DECIMAL_PREFIXES, **_BINARY_PREFIXES}

_BYTE_WORDS = ("B", "byte", "bytes")
_BIT_WORDS = ("b", "bit", "bits")


# An exact factor to the SI unit: (numerator, denominator), both > 0.
_Ratio = tuple[int, int]


def _table(words: dict[tuple[str, ...], _Ratio]) -> dict[str, _Ratio]:
    """Every prefix + word spelling -> its exact factor to the SI unit."""
    out: dict[str, _Ratio] = {"": (1, 1)}
    for spellings, (num, den) in words.items():
        for prefix, scale in _PREFIXES.items():
            for word in spellings:
                out[prefix + word] = (scale * num, den)
    return out


# Size -> bytes.  Bits must come to whole bytes.
_SIZE_UNITS = _table({_BYTE_WORDS: (1, 1), _BIT_WORDS: (1, 8)})
# Rate -> bit/s.  A rate's "bit" needs no "/s", and iperf3's bare prefix (-b 800M) means
# bit/s, decimal; uppercase K is kilo here (Kbps), as every network tool spells it.
_BITRATE_UNITS = {
    **_table(
        {
            ("bps", "bit/s", "b/s", "bits/s", "bit", "bits"): (1, 1),
            ("Bps", "B/s", "byte/s", "bytes/s"): (8, 1),
        }
    ),
    **{prefix: (scale, 1) for prefix, scale in _DECIMAL_PREFIXES.items() if prefix},
    "K": (10**3, 1),
    "Kbps": (10**3, 1),
    "Kbit/s": (10**3, 1),
    "Kbit": (10**3, 1),
}
_DURATION_UNITS: dict[str, _Ratio] = {
    "": (1, 1),
    "s": (1, 1),
    "sec": (1, 1),
    "secs": (1, 1),
    "ms": (1, 10**3),
    "msec": (1, 10**3),  # ping, tc and ethtool spell it so
    "us": (1, 10**6),
    "usec": (1, 10**6),
    "µs": (1, 10**6),
    "µsec": (1, 10**6),
    "ns": (1, 10**9),
    "nsec": (1, 10**9),
    "min": (60, 1),
    "h": (3600, 1),
}

#: What each parser accepts, as told to the client when it sends something else.
SIZE_FORMS = (
    "a number of bytes, or a number and a unit: B (byte) or b (bit), with an optional "
    "prefix k, M, G, T, P (powers of 1000) or Ki, Mi, Gi, Ti, Pi (powers of 1024); "
    "e.g. 500MB, 1.5GiB, 4000Mb, 1468B ('byte'/'bit' may be spelled out; case matters)"
)
BITRATE_FORMS = (
    "a number of bit/s, or a number and a unit: bps, bit/s, b/s, bit (bits) or Bps, B/s "
    "(bytes, x8), with an optional prefix k or K, M, G, T, P (powers of 1000) or Ki, Mi, "
    "Gi, Ti, Pi (powers of 1024), or iperf3's bare prefix (800M = 800 Mbit/s); e.g. "
    "950Mbps, 10Gbit/s, 1Gb/s, 125MB/s, 800M (case matters: M is mega, B a byte)"
)
DURATION_FORMS = (
    "a number of seconds, or a number and one of s, sec, ms, msec, us, usec, µs, ns, "
    "nsec, min, h; e.g. 100ms, 100msec, 0.1s, 250us (case matters; m alone is refused: "
    "minutes or milliseconds?)"
)

_LARGEST_FLOAT = int(sys.float_info.max)  # exact: the largest double is an integer
# Beyond 2**53 bytes consecutive sizes are no longer distinct doubles (see transport/).
_MAX_BYTES = 2**53


class QuantityError(ValueError):
    """A quantity string that cannot be read.

    Attributes
    ----------
    field : str
        Name of the input that held it.
    reason : str
        Why, with the accepted forms when the unit was the trouble.
    """

    def __init__(self, field: str, reason: str) -> None:
        super().__init__(f"{field}: {reason}")
        self.field = field
        self.reason = reason


def _exact(
    text: str | float | int, field: str, units: dict[str, _Ratio], kind: str, forms: str
) -> _Ratio:
    """The quantity in the SI unit, exactly, as (numerator, denominator) with a positive
    denominator; strictly positive and at most the largest double."""
    if isinstance(text, bool):
        raise QuantityError(field, f"must be a {kind}, got a boolean")
    if isinstance(text, int | float):
        if not math.isfinite(text):
            raise QuantityError(field, f"{kind} is not finite")
        num, den = text.as_integer_ratio()
    else:
        match = _QUANTITY.match(text)
        if match is None:
            # "-10ms" is readable, only not allowed: say that, not "cannot read" (but a
            # unit that is wrong too, as in "-5m", gets the full list of forms).
            negated = _QUANTITY.match(text.strip().removeprefix("-"))
            if negated is not None and negated["unit"] in units:
                raise QuantityError(
                    field, f"{kind} must be strictly positive, got {text.strip()[:40]!r}"
                )
            raise QuantityError(field, f"cannot read {text[:40]!r} as a {kind}; expected {forms}")
        unit = match["unit"]
        factor = units.get(unit)
        if factor is None:
            raise QuantityError(field, f"unknown unit {unit[:16]!r} for a {kind}; use {forms}")
        number = Decimal(match["number"])  # exact: the constructor does not round
        # Bound the exponent before the exact arithmetic: "1e999999" must not build a
        # million-digit integer.
        if number and not -400 < number.adjusted() < 400:
            raise QuantityError(field, f"{kind} {text[:40]!r} is out of range")
        digits, scale = number.as_integer_ratio()
        num, den = digits * factor[0], scale * factor[1]
    if num <= 0:
        got = f", got {text.strip()[:40]!r}" if isinstance(text, str) else f", got {text!r}"
        raise QuantityError(field, f"{kind} must be strictly positive{got}")
    if num > _LARGEST_FLOAT * den:
        raise QuantityError(field, f"{kind} is not finite")
    return num, den


def _nearest_float(value: _Ratio) -> float:
    # int / int is correctly rounded in Python, however large the operands.
    return value[0] / value[1]


def parse_number(text: str | float | int, field: str) -> float:
    """A plain number without a unit: ASCII digits, an optional sign, point and exponent.

    The one reader of a bare number at the edges (query strings, the CLI's sweep specs):
    Python's ``float`` also takes ``"٣"`` (Arabic-Indic three), ``"1_000"``, ``"nan"`` and
    ``"infinity"``, and ``int`` refuses 4,300 digits with a ``ValueError`` that once
    reached a client as a 500.  Here each of those is a :class:`QuantityError` naming
    ``field``.

    Parameters
    ----------
    text : str or number
        The number as typed, or a number (not a boolean).
    field : str
        The field or option as the user typed it, for the error.

    Returns
    -------
    float
        The value, finite; whole numbers up to 2**53 exactly.

    Raises
    ------
    QuantityError
        Not a plain number, longer than 64 characters, or not finite.

    Examples
    --------
    >>> parse_number(" 3 ", "cpu_tasks"), parse_number("-2.5e3", "x")
    (3.0, -2500.0)
    >>> parse_number("٣", "cpu_tasks")
    Traceback (most recent call last):
    ...
    app.schemas.units.QuantityError: cpu_tasks: cannot read '٣' as a number; expected ASCII \
digits, e.g. 2, 0.5 or 1e-3
    """
    if isinstance(text, bool):
        raise QuantityError(field, "must be a number, got a boolean")
    if isinstance(text, int | float):
        value = float(text) if abs(text) <= _LARGEST_FLOAT else math.inf
    else:
        if not isinstance(text, str):
            raise QuantityError(field, f"must be a number, got {type(text).__name__}")
        if len(text) > _MAX_NUMBER_CHARS:
            raise QuantityError(
                field, f"a number of at most {_MAX_NUMBER_CHARS} characters, got {len(text)}"
            )
        match = _PLAIN.match(text)
        if match is None:
            raise QuantityError(
                field,
                f"cannot read {text[:40]!r} as a number; expected ASCII digits, e.g. 2, 0.5 "
                "or 1e-3",
            )
        number = Decimal(match["number"])
        if number and not -400 < number.adjusted() < 400:
            raise QuantityError(field, f"{text.strip()[:40]!r} is out of range")
        value = float(number) * (-1.0 if match["sign"] == "-" else 1.0)
    if not math.isfinite(value):
        raise QuantityError(field, "is not finite")
    return value


def parse_size(text: str | float | int, field: str = "file_size") -> int:
    """A size in bytes from ``"500MB"``, ``"1.5GiB"``, ``"4000Mb"`` or a number of bytes.

    Parameters
    ----------
    text : str or number
        The quantity; a bare number is bytes.  ``B`` is a byte and ``b`` a bit.
    field : str
        Name of the input, for the error.

    Returns
    -------
    int
        Bytes; the quantity must come to a whole number of them.

    Raises
    ------
    QuantityError
        On an unreadable, ambiguous, non-positive, non-finite, too large or fractional
        size.

    Examples
    --------
    >>> parse_size("500MB"), parse_size("500Mb"), parse_size("1KiB"), parse_size(1468)
    (500000000, 62500000, 1024, 1468)
    """
    num, den = _exact(text, field, _SIZE_UNITS, "size", SIZE_FORMS)
    if num > _MAX_BYTES * den:
        raise QuantityError(
            field, f"a size must be at most 2**53 bytes, got {_nearest_float((num, den)):.6g}"
        )
    whole, rest = divmod(num, den)
    if rest:
        raise QuantityError(
            field,
            f"a size must be a whole number of bytes, got {_nearest_float((num, den)):.17g} bytes",
        )
    return whole


def parse_bitrate(
    text: str | float | int, field: str = "line_rate", *, unit_required: bool = False
) -> float:
    """A bit rate in bit/s from ``"950Mbps"``, ``"10Gbit/s"``, ``"125MB/s"`` or a number.

    Parameters
    ----------
    text : str or number
        The quantity; a bare number is bit/s (unless ``unit_required``).  ``b`` is a bit
        and ``B`` a byte.
    field : str
        Name of the input, for the error.
    unit_required : bool, default False
        Refuse a bare number in text (the command line's ``--rate 800``: bit/s or
        Mbit/s?).

    Returns
    -------
    float
        bit/s.

    Raises
    ------
    QuantityError
        On an unreadable, ambiguous, non-positive or non-finite rate.

    Examples
    --------
    >>> parse_bitrate("950Mbps"), parse_bitrate("1GBps"), parse_bitrate("1Gb/s")
    (950000000.0, 8000000000.0, 1000000000.0)
    >>> parse_bitrate("800M"), parse_bitrate("100Kbps"), parse_bitrate("10Gbit")
    (800000000.0, 100000.0, 10000000000.0)
    """
    if unit_required and isinstance(text, str):
        match = _QUANTITY.match(text)
        if match is not None and not match["unit"]:
            raise QuantityError(field, _bare_rate_hint(match["number"]))
    return _nearest_float(_exact(text, field, _BITRATE_UNITS, "bit rate", BITRATE_FORMS))


def _bare_rate_hint(number: str) -> str:
    # A small number was most likely meant in Mbit/s (``--rate 800``), a large one in
    # bit/s (``--rate 500000000``): suggest that reading first, and its short form.
    head = "a bare number is ambiguous here: give a unit, e.g. "
    value = float(number)  # _NUMBER's forms are all float()'s
    if value < 1e5:
        return f"{head}{number}Mbps or {number}M (Mbit/s), or {number}bps"
    prefix, factor = next((p, f) for p, f in (("G", 1e9), ("M", 1e6), ("K", 1e3)) if value >= f)
    return f"{head}{number}bps (bit/s, the same as {value / factor:g}{prefix}bps)"


def parse_duration(
    text: str | float | int, field: str = "propagation_delay", *, unit_required: bool = False
) -> float:
    """A duration in seconds from ``"100ms"``, ``"250us"``, ``"0.1"`` or ``"0.1s"``.

    Parameters
    ----------
    text : str or number
        The quantity; a bare number is seconds (unless ``unit_required``).
    field : str
        Name of the input, for the error.
    unit_required : bool, default False
        Refuse a bare number in text: where people type delays in milliseconds (the
        command line's ``--delay 100``), a bare number is ambiguous.

    Returns
    -------
    float
        Seconds.

    Raises
    ------
    QuantityError
        On an unreadable, non-positive or non-finite duration, or a bare number when a
        unit is required.

    Examples
    --------
    >>> parse_duration("100ms"), parse_duration("100msec"), parse_duration("0.1")
    (0.1, 0.1, 0.1)
    >>> try:
    ...     parse_duration("100", "--delay", unit_required=True)
    ... except QuantityError as exc:
    ...     print(exc.reason)
    a bare number is ambiguous here: give a unit, e.g. 100ms or 100s
    """
    if unit_required and isinstance(text, str):
        match = _QUANTITY.match(text)
        if match is not None and not match["unit"]:
            number = match["number"]
            raise QuantityError(
                field, f"a bare number is ambiguous here: give a unit, e.g. {number}ms or {number}s"
            )
    return _nearest_float(_exact(text, field, _DURATION_UNITS, "duration", DURATION_FORMS))
