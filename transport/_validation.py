"""Checks on the public parameters; every failure names the parameter and the reason."""

from __future__ import annotations

import math
import numbers
from typing import Any

import numpy as np
from numpy.typing import NDArray

from .errors import TransportParameterError

# Sizes are converted to float64 for the formula; above 2**53 bytes (9 PB) consecutive
# byte counts are no longer distinct doubles, so S_total would silently round.
MAX_BYTES = 2**53


def positive_real(value: Any, name: str, unit: str) -> float:
    """A finite, strictly positive real number (``unit`` only goes into the message)."""
    # Exact float and int first: the ABC checks are the slow part on the usual path.
    if (
        type(value) is not float
        and type(value) is not int
        and (isinstance(value, bool) or not isinstance(value, numbers.Real))
    ):
        raise TransportParameterError(
            name, f"must be a real number ({unit}), got {type(value).__name__}"
        )
    x = float(value)
    if math.isnan(x):
        raise TransportParameterError(name, f"must be a number ({unit}), got NaN")
    if not math.isfinite(x):
        raise TransportParameterError(name, f"must be finite ({unit}), got {x!r}")
    if x <= 0.0:
        raise TransportParameterError(name, f"must be strictly positive ({unit}), got {x!r}")
    return x


def whole_number(
    value: Any, name: str, *, minimum: int, maximum: int = MAX_BYTES, unit: str = "bytes"
) -> int:
    """An integer in ``[minimum, maximum]``; an integral float such as ``1468.0`` is accepted."""
    if type(value) is int:  # the usual case, without the ABC checks below
        n = value
    elif isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise TransportParameterError(
            name, f"must be a whole number of {unit}, got {type(value).__name__}"
        )
    elif isinstance(value, numbers.Integral):
        n = int(value)
    else:
        x = float(value)
        if math.isnan(x):
            raise TransportParameterError(name, f"must be a whole number of {unit}, got NaN")
        if not (math.isfinite(x) and x.is_integer()):
            raise TransportParameterError(name, f"must be a whole number of {unit}, got {x!r}")
        n = int(x)
    if n < minimum:
        qualifier = "strictly positive" if minimum == 1 else f"at least {minimum}"
        raise TransportParameterError(name, f"must be {qualifier} ({unit}), got {n}")
    if n > maximum:
        raise TransportParameterError(name, f"must be at most {maximum} {unit}, got {n}")
    return n


def float_array(value: Any, name: str, unit: str) -> NDArray[np.float64]:
    """Any scalar or array of real numbers as a float64 array (shape kept)."""
    if isinstance(value, bool | np.bool_):
        raise TransportParameterError(name, f"must be a number or an array ({unit}), got a bool")
    try:
        arr = np.asarray(value, dtype=np.float64)
    except (TypeError, ValueError) as exc:
        raise TransportParameterError(
            name, f"must be a number or an array of numbers ({unit}): {exc}"
        ) from None
    if arr.size == 0:
        raise TransportParameterError(name, "must contain at least one value")
    return arr


def send_rates(value: Any, name: str = "send_rate_bps") -> NDArray[np.float64]:
    """Sending rates: finite and strictly positive (bit/s)."""
    arr = float_array(value, name, "bit/s")
    if np.isnan(arr).any():
        raise TransportParameterError(name, "must not contain NaN (bit/s)")
    if not np.isfinite(arr).all():
        raise TransportParameterError(name, "must be finite (bit/s), got infinity")
    if (arr <= 0.0).any():
        raise TransportParameterError(
            name, f"must be strictly positive (bit/s), got {float(arr.min())!r}"
        )
    return arr


def loss_values(value: Any, name: str = "loss") -> NDArray[np.float64]:
    """Loss probabilities: not NaN and >= 0; values >= 1 (infinity included) are allowed and
    mean "the transfer never completes"."""
    arr = float_array(value, name, "probability")
    if np.isnan(arr).any():
        raise TransportParameterError(name, "must not contain NaN (a probability in [0, 1])")
    if (arr < 0.0).any():
        raise TransportParameterError(
            name, f"must be non-negative (a probability), got {float(arr.min())!r}"
        )
    return arr
