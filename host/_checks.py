"""Validation of the numbers a workload or a host profile is made of.

Each check raises :class:`~host.errors.WorkloadError` naming the field, and the limit
when a size limit is exceeded.
"""

from __future__ import annotations

import math
import numbers
from typing import Any

from .errors import WorkloadError

__all__ = ["RATE_MAX", "RATE_MIN", "require_count", "require_rate", "require_real"]

# Service rates must lie in this range (1/s): far wider than any host, narrow enough
# that every time, moment and rate ratio of the model stays well inside double range.
RATE_MIN = 1e-6
RATE_MAX = 1e12


def require_real(value: Any, name: str) -> float:
    # Exact int and float first: the ABC checks cost more than the rest of a request's
    # validation, and these are what requests carry.
    if (
        type(value) is not float
        and type(value) is not int
        and (isinstance(value, bool) or not isinstance(value, numbers.Real))
    ):
        raise WorkloadError(f"{name} must be a number, got {value!r}", field=name)
    v = float(value)
    if not math.isfinite(v):
        raise WorkloadError(f"{name} must be finite, got {value!r}", field=name)
    return v


def require_rate(value: Any, name: str) -> float:
    v = require_real(value, name)
    if v <= 0:
        raise WorkloadError(
            f"{name} must be a positive rate in events per second, got {v}", field=name
        )
    if not RATE_MIN <= v <= RATE_MAX:
        raise WorkloadError(
            f"{name} = {v} events/s is outside the accepted range [{RATE_MIN:g}, {RATE_MAX:g}]",
            field=name,
            limit="rate_range",
            maximum=RATE_MAX,
            reached=v,
        )
    return v


def require_count(
    value: Any, name: str, *, minimum: int, maximum: int | None = None, limit: str | None = None
) -> int:
    if type(value) is not int and (
        isinstance(value, bool) or not isinstance(value, numbers.Integral)
    ):
        raise WorkloadError(f"{name} must be a whole number, got {value!r}", field=name)
    v = int(value)
    if v < minimum:
        raise WorkloadError(f"{name} must be at least {minimum}, got {v}", field=name)
    if maximum is not None and v > maximum:
        raise WorkloadError(
            f"{name} = {v} exceeds the limit {limit} = {maximum}",
            field=name,
            limit=limit,
            maximum=maximum,
            reached=v,
        )
    return v
