"""Checks on the public parameters; every failure names the parameter and the reason."""

from __future__ import annotations

import math
import numbers
from typing import Any

import numpy as np
from numpy.typing import NDArray

from .errors import QueueParameterError

# The occupancy matrix has one row per rate and K + 1 columns; refuse requests that
# would need more than this many float64 cells (400 MB).
MAX_CELLS = 50_000_000
# Largest phase-type order accepted (the phase blocks are handled as dense matrices).
MAX_PHASES = 256
# Tolerance on sum(alpha) = 1 and on the row sums of T.
_PROB_TOL = 1e-9


def positive_rates(value: Any, name: str) -> NDArray[np.float64]:
    """A scalar or 1-D array of finite, strictly positive rates, as a 1-D float array."""
    try:
        arr = np.array(value, dtype=np.float64)  # a copy: the result is made read-only
    except (TypeError, ValueError) as exc:
        raise QueueParameterError(
            name, f"must be a number or 1-D array of numbers ({exc})"
        ) from exc
    if arr.ndim > 1:
        raise QueueParameterError(name, f"must be a scalar or a 1-D array, got shape {arr.shape}")
    arr = np.atleast_1d(arr)
    if arr.size == 0:
        raise QueueParameterError(name, "must contain at least one rate")
    # One pass on the usual path (the search calls this per pass): NaN fails both tests.
    if not ((arr > 0.0) & (arr < np.inf)).all():
        if not np.all(np.isfinite(arr)):
            raise QueueParameterError(name, "must be finite (got NaN or infinity)")
        raise QueueParameterError(
            name, f"must be strictly positive, got {float(arr.min())!r} (a rate in 1/s)"
        )
    return arr


def positive_scalar(value: Any, name: str) -> float:
    """A finite, strictly positive real number."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise QueueParameterError(name, f"must be a real number, got {type(value).__name__}")
    x = float(value)
    if not math.isfinite(x):
        raise QueueParameterError(name, "must be finite")
    if x <= 0.0:
        raise QueueParameterError(name, f"must be strictly positive, got {x!r}")
    return x


def positive_integer(value: Any, name: str) -> int:
    """A whole number >= 1; an integral float such as ``6.0`` is accepted, ``6.5`` is not."""
    if isinstance(value, bool):
        raise QueueParameterError(name, "must be an integer, got a bool")
    if isinstance(value, numbers.Integral):
        n = int(value)
    elif isinstance(value, numbers.Real):
        x = float(value)
        if not (math.isfinite(x) and x.is_integer()):
            raise QueueParameterError(name, f"must be an integer, got {x!r}")
        n = int(x)
    else:
        raise QueueParameterError(name, f"must be an integer, got {type(value).__name__}")
    if n < 1:
        raise QueueParameterError(name, f"must be at least 1, got {n}")
    return n


def phase_type(value: Any) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    """Validate an ``(alpha, T)`` pair and return it as dense float arrays.

    ``alpha`` must be a probability vector (non-negative, summing to 1); ``T`` a
    sub-generator (negative diagonal, non-negative off-diagonal, row sums <= 0) from
    which absorption is certain, so that ``-T`` is nonsingular.
    """
    name = "phase_type"
    if not isinstance(value, tuple | list) or len(value) != 2:
        raise QueueParameterError(name, "must be an (alpha, T) pair")
    raw_alpha, raw_T = value
    try:
        alpha = np.asarray(raw_alpha, dtype=np.float64)
        # A SciPy sparse matrix has toarray(); testing for it by name keeps SciPy's
        # import (a tenth of a second) off the exponential queue's path.
        dense = raw_T.toarray() if callable(getattr(raw_T, "toarray", None)) else raw_T
        T = np.asarray(dense, dtype=np.float64)
    except (TypeError, ValueError) as exc:
        raise QueueParameterError(name, f"alpha and T must be numeric arrays ({exc})") from exc
    if alpha.ndim != 1 or alpha.size == 0:
        raise QueueParameterError(name, f"alpha must be a non-empty 1-D vector, got {alpha.shape}")
    m = alpha.size
    if m > MAX_PHASES:
        raise QueueParameterError(name, f"at most {MAX_PHASES} phases are supported, got {m}")
    if T.shape != (m, m):
        raise QueueParameterError(
            name, f"T must be square with one row per phase of alpha ({m}), got shape {T.shape}"
        )
    if not (np.all(np.isfinite(alpha)) and np.all(np.isfinite(T))):
        raise QueueParameterError(name, "alpha and T must be finite")
    if np.any(alpha < 0.0):
        raise QueueParameterError(name, "alpha must be non-negative")
    total = float(alpha.sum())
    if abs(total - 1.0) > _PROB_TOL:
        raise QueueParameterError(
            name,
            f"alpha must sum to 1 (got {total!r}); a zero-length interrupt service with "
            "probability 1 - sum(alpha) is not supported",
        )
    diag = np.diag(T)
    if np.any(diag >= 0.0):
        raise QueueParameterError(name, "T must have a strictly negative diagonal (rates in 1/s)")
    off = T - np.diag(diag)
    if np.any(off < 0.0):
        raise QueueParameterError(name, "T must have non-negative off-diagonal entries")
    exit_rates = -T.sum(axis=1)
    if np.any(exit_rates < -_PROB_TOL * np.abs(diag)):
        raise QueueParameterError(name, "the rows of T must sum to <= 0 (exit rates t = -T 1)")
    if not _absorption_certain(off, np.clip(exit_rates, 0.0, None)):
        raise QueueParameterError(
            name,
            "T must be a sub-generator from which absorption is certain: some phases "
            "cannot reach a phase with a positive exit rate",
        )
    return alpha / total, T


def _absorption_certain(off: NDArray[np.float64], exit_rates: NDArray[np.float64]) -> bool:
    """True if every phase has a path (along ``off > 0``) to a phase with an exit rate."""
    can_exit = exit_rates > 0.0
    while True:
        grown = can_exit | np.any((off > 0.0) & can_exit[None, :], axis=1)
        if np.array_equal(grown, can_exit):
            return bool(can_exit.all())
        can_exit = grown
