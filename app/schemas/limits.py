"""The numeric bounds of the API's inputs, without the pydantic models that apply them.

:mod:`app.schemas.inputs` and :mod:`app.schemas.bodies` declare their fields with these;
the command line's planning reads them here, where importing costs nothing.
"""

from __future__ import annotations

__all__ = [
    "MAX_BYTES",
    "MAX_CORES",
    "MAX_DELAY_S",
    "MAX_DISKS",
    "MAX_EXPRESSION_CHARS",
    "MAX_LINE_RATE",
    "MAX_LIST",
    "MAX_PACKETS",
    "MAX_PAYLOAD_BYTES",
    "MAX_RATE",
    "MAX_TASKS",
    "MIN_BIT_RATE",
    "MIN_RATE",
]

MAX_TASKS = 1_000
MAX_CORES = 256
MAX_DISKS = 16
MAX_BYTES = 2**53
MAX_RATE = 1e12  # events/s: far above any host, far below float trouble
MIN_RATE = 1e-6  # events/s: the end-system model's floor too
MIN_BIT_RATE = 1.0  # bit/s: below this, bytes/s underflow is the only thing computed
MAX_LINE_RATE = 1e15  # bit/s (1 Pbit/s)
MAX_DELAY_S = 86_400.0
MAX_PACKETS = 65_536
MAX_PAYLOAD_BYTES = 1_000_000
MAX_LIST = 100_000  # hard ceiling of any list; settings set the working limit
MAX_EXPRESSION_CHARS = 10_000
