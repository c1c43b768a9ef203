"""Hypothesis strategies shared by the host tests (imported by name, as pytest puts this
folder on the path)."""

from __future__ import annotations

import numpy as np
from hypothesis import strategies as st


def log_uniform(low: float, high: float) -> st.SearchStrategy[float]:
    """Floats in [low, high], uniform in their logarithm: rates over many decades."""
    return st.floats(np.log10(low), np.log10(high)).map(lambda e: float(10.0**e))
