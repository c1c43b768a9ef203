"""The transfer-time curve T(B_send) that the bottleneck-rate search returns for plotting."""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Any

import numpy as np
from numpy.typing import NDArray

from ._json import json_array

__all__ = ["TransferCurve"]


@dataclass(frozen=True)
class TransferCurve:
    """T(B_send) on a grid, for plotting.  All arrays are read-only, shape (n,).

    Attributes
    ----------
    send_rate_bps : ndarray
        Sending rates ``line_rate * k / n``, k = 1..n (bit/s), ascending.
    total_s : ndarray
        Transfer time T (s); ``+inf`` where ``completes`` is False (None in
        :meth:`to_dict`).
    loss : ndarray
        Loss probability returned by the loss function at each rate (dimensionless).
    completes : ndarray of bool
        True where the loss is below 1, i.e. the transfer finishes.
    """

    send_rate_bps: NDArray[np.float64]
    total_s: NDArray[np.float64]
    loss: NDArray[np.float64]
    completes: NDArray[np.bool_]

    def __post_init__(self) -> None:
        for f in fields(self):
            value = getattr(self, f.name)
            if isinstance(value, np.ndarray):
                value.flags.writeable = False

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready form: lists, ``None`` for the time where the transfer never
        completes (and for an infinite loss); no infinity or NaN."""
        everywhere = np.ones(self.completes.shape, dtype=bool)
        return {
            "send_rate_bps": json_array(self.send_rate_bps, everywhere),
            "total_s": json_array(self.total_s, self.completes),
            "loss": json_array(self.loss, everywhere),
            "completes": self.completes.tolist(),
        }
