"""The NIC receive buffer as an M/M[N]/1/K bulk-service queue (docs/conventions.md §3).

Exact stationary measures -- loss probability, throughput, mean occupancy, probability
that an interrupt service is running, the full occupancy distribution -- for many arrival
rates at once::

    from queues import bulk_service_queue, loss_probability

    lam = [42_575.0, 63_862.0, 85_150.0]          # packets/s (500..1000 Mbps, 1468 B)
    sol = bulk_service_queue(lam, 20_800.0, 64, 6, packet_bytes=1468)
    sol.loss_probability, sol.throughput_bps
    loss_probability(lam, 20_800.0, 64, 6)         # the loss alone, fast path

The receive buffer of a receiver that the CPU scheduler takes away in time slices, with
finite blasts, is :mod:`queues.modulated` (``ModulatedQueue``, ``modulated_loss``,
``blast_loss``).

Rules: the paper's fixed batch N (default), or the general ``[a, b]`` rule
(``min_batch=a``, ``batch=b``); service: exponential (``service_rate``) or phase-type
(``phase_type=(alpha, T)``, ``service_rate=None``).
"""

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ._fixed import NUMPY_MAX_LEVELS, compiled_kernels_preferred, forced_kernels
    from .bulk import BulkQueueSolution, bulk_service_queue, loss_probability
    from .errors import QueueParameterError
    from .modulated import (
        ModulatedQueue,
        blast_loss,
        blast_loss_terms,
        lag_environment,
        modulated_loss,
        time_slice_environment,
    )

__all__ = [
    "NUMPY_MAX_LEVELS",
    "BulkQueueSolution",
    "ModulatedQueue",
    "QueueParameterError",
    "blast_loss",
    "blast_loss_terms",
    "bulk_service_queue",
    "compiled_kernels_preferred",
    "forced_kernels",
    "lag_environment",
    "loss_probability",
    "modulated_loss",
    "time_slice_environment",
]


# Each public name's module, imported when the name is first used (PEP 562), so that
# importing one light part (the errors, the profiles) does not load the solvers, SciPy
# and the compiled kernels of the rest.
_LAZY: dict[str, str] = {
    "BulkQueueSolution": "bulk",
    "bulk_service_queue": "bulk",
    "loss_probability": "bulk",
    "NUMPY_MAX_LEVELS": "_fixed",
    "compiled_kernels_preferred": "_fixed",
    "forced_kernels": "_fixed",
    "QueueParameterError": "errors",
    "ModulatedQueue": "modulated",
    "blast_loss": "modulated",
    "blast_loss_terms": "modulated",
    "lag_environment": "modulated",
    "modulated_loss": "modulated",
    "time_slice_environment": "modulated",
}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    from importlib import import_module

    value = getattr(import_module(f"{__name__}.{module}"), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *_LAZY})
