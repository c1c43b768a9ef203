"""Human-friendly quantities at the edges (CLI, query strings), converted once to SI.

Decimal prefixes follow SPEC "Units": 1 MB = 10^6 bytes and 1 Mbps = 10^6 bit/s.  Binary
prefixes are accepted for sizes only when spelled out (``KiB``, ``MiB``, ``GiB``, ``TiB``).
A bare number is already in the SI unit (bytes, bit/s, seconds).  Parsing is a regular
expression and a table: no user text is ever evaluated.
"""

from __future__ import annotations

import math
import re

__all__ = ["QuantityError", "parse_bitrate", "parse_duration", "parse_size"]

_NUMBER = r"(?P<number>[0-9]+(?:\.[0-9]*)?(?:[eE][+-]?[0-9]+)?|\.[0-9]+(?:[eE][+-]?[0-9]+)?)"
_QUANTITY = re.compile(rf"^\s*{_NUMBER}\s*(?P<unit>[A-Za-zµ/]*)\s*$")

# Unit tables: lower-cased spelling -> factor to the SI unit.
_SIZE_UNITS = {
    "": 1,
    "b": 1,
    "byte": 1,
    "bytes": 1,
    "kb": 10**3,
    "mb": 10**6,
    "gb": 10**9,
    "tb": 10**12,
    "pb": 10**15,
    "kib": 2**10,
    "mib": 2**20,
    "gib": 2**30,
    "tib": 2**40,
}
_SIZE_FACTORS = {k: float(v) for k, v in _SIZE_UNITS.items()}
# Beyond 2**53 bytes consecutive sizes are no longer distinct doubles (see transport/).
_MAX_BYTES = 2**53
_BITRATE_UNITS = {
    "": 1.0,
    "bps": 1.0,
    "bit/s": 1.0,
    "b/s": 1.0,
    "kbps": 1e3,
    "kbit/s": 1e3,
    "mbps": 1e6,
    "mbit/s": 1e6,
    "gbps": 1e9,
    "gbit/s": 1e9,
    "tbps": 1e12,
    "tbit/s": 1e12,
}
_DURATION_UNITS = {
    "": 1.0,
    "s": 1.0,
    "sec": 1.0,
    "ms": 1e-3,
    "us": 1e-6,
    "µs": 1e-6,
    "ns": 1e-9,
    "min": 60.0,
    "h": 3600.0,
}


class QuantityError(ValueError):
    """A quantity string that cannot be read.

    Attributes
    ----------
    field : str
        Name of the input that held it.
    """

    def __init__(self, field: str, reason: str) -> None:
        super().__init__(f"{field}: {reason}")
        self.field = field
        self.reason = reason


def _parse(text: str | float | int, field: str, units: dict[str, float], kind: str) -> float:
    if isinstance(text, bool):
        raise QuantityError(field, f"must be a {kind}, got a boolean")
    if isinstance(text, int | float):
        value = float(text)
        unit_factor = 1.0
    else:
        match = _QUANTITY.match(text)
        if match is None:
            raise QuantityError(
                field,
                f"cannot read {text[:40]!r} as a {kind}: expected a non-negative number "
                f"and an optional unit ({', '.join(sorted(k for k in units if k))})",
            )
        unit = match["unit"]
        key = unit.lower()
        if key not in units:
            raise QuantityError(
                field,
                f"unknown unit {unit!r} for a {kind}; use one of "
                f"{', '.join(sorted(k for k in units if k))}",
            )
        value = float(match["number"])
        unit_factor = units[key]
    si = value * unit_factor
    if not math.isfinite(si):
        raise QuantityError(field, f"{kind} is not finite")
    if si <= 0.0:
        raise QuantityError(field, f"{kind} must be strictly positive")
    return si


def parse_size(text: str | float | int, field: str = "file_size") -> int:
    """A size in bytes from ``"500MB"``, ``"1.5GiB"`` or a plain number of bytes.

    Parameters
    ----------
    text : str or number
        The quantity; a bare number is bytes.
    field : str
        Name of the input, for the error.

    Returns
    -------
    int
        Bytes; must come out a whole number.

    Raises
    ------
    QuantityError
        On an unreadable, non-positive, non-finite or fractional size.

    Examples
    --------
    >>> parse_size("500MB"), parse_size("1KiB"), parse_size(1468)
    (500000000, 1024, 1468)
    """
    value = _parse(text, field, _SIZE_FACTORS, "size")
    if value > _MAX_BYTES:
        raise QuantityError(field, f"a size must be at most 2**53 bytes, got {value:.6g}")
    if isinstance(text, str):
        # Exact integer arithmetic when the number itself is whole: "500MB" must give
        # exactly 500_000_000, not a float product that might round.
        match = _QUANTITY.match(text)
        if match is not None and match["number"].isdigit():
            return int(match["number"]) * _SIZE_UNITS[match["unit"].lower()]
    if value != math.floor(value):
        raise QuantityError(field, f"a size must be a whole number of bytes, got {value!r}")
    return int(value)


def parse_bitrate(text: str | float | int, field: str = "line_rate") -> float:
    """A bit rate in bit/s from ``"950Mbps"``, ``"1Gbps"``, ``"10Gbit/s"`` or a number.

    Examples
    --------
    >>> parse_bitrate("950Mbps"), parse_bitrate("1gbps")
    (950000000.0, 1000000000.0)
    """
    return _parse(text, field, _BITRATE_UNITS, "bit rate")


def parse_duration(text: str | float | int, field: str = "propagation_delay") -> float:
    """A duration in seconds from ``"100ms"``, ``"250us"``, ``"0.1"`` or ``"0.1s"``.

    Examples
    --------
    >>> parse_duration("100ms")
    0.1
    """
    return _parse(text, field, _DURATION_UNITS, "duration")
