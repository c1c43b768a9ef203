"""JSON conversion of the result arrays, shared by the result types of this package."""

from __future__ import annotations

from typing import Any

import numpy as np
from numpy.typing import NDArray

__all__ = ["json_array"]


def json_array(values: NDArray[Any], valid: NDArray[np.bool_], *, integer: bool = False) -> Any:
    """Nested lists (or a scalar for 0-d) with None where ``valid`` is False.

    Parameters
    ----------
    values : ndarray
        Numbers in any unit; non-finite entries also become None.
    valid : ndarray of bool
        Same shape; False entries become None.
    integer : bool, default False
        Emit whole-number floats as JSON integers.

    Returns
    -------
    list or scalar
        A JSON-ready value with no infinity or NaN.
    """
    obj = np.empty(values.shape, dtype=object)
    finite = valid & np.isfinite(values)
    if integer:
        # int() of each entry: whole-number floats become JSON integers.
        obj[finite] = [int(v) for v in values[finite]]
    else:
        obj[finite] = values[finite].tolist()
    obj[~finite] = None
    return obj.tolist()
