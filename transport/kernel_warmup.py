"""Load the compiled search and queue kernels into this process ahead of time.

A process that has not loaded Numba answers paper-sized searches with NumPy twins of the
compiled kernels (:func:`queues.compiled_kernels_preferred`), which saves a one-shot
command the half second of loading them.  A process about to run many searches (the
service, a sweep's worker) is better off loading them once: a paper-sized search then
takes about 0.3 ms instead of about 2 ms.  The answers are the same to the last bit.
"""

from __future__ import annotations

import time

import numpy as np

__all__ = ["load_kernels"]

_loaded = False


def load_kernels() -> float:
    """Load (from Numba's disk cache, or compile) every compiled kernel of the search
    and of the exponential NIC queue's loss, by running each once on a small case.

    From then on every search in this process runs them.  Idempotent: later calls
    return at once.  Meant for start-up or before a batch of many searches.

    Returns
    -------
    float
        Seconds it took (s): about half a second from the cache, 0 once loaded.
    """
    global _loaded
    if _loaded:
        return 0.0
    start = time.perf_counter()
    # Importing the compiled module loads Numba, and from then on the shared rule
    # (queues.compiled_kernels_preferred) picks the compiled kernels in this process: no
    # process-wide override, which the service's requests, answered while this runs
    # after readiness, would have raced with.
    from . import _kernels  # noqa: F401
    from .rate_search import bulk_queue_bottleneck_rate, effective_bottleneck_rate
    from .rbudp import transfer_time_terms

    # The one compiled call of the exponential NIC's search, then the general search's
    # steps.
    bulk_queue_bottleneck_rate(
        8e3, 64, 6, line_rate_bps=1e9, file_size_bytes=10**8, propagation_delay_s=0.01
    )
    effective_bottleneck_rate(
        lambda rates: np.minimum(rates / 2e9, 1.0),
        line_rate_bps=1e9,
        file_size_bytes=10**8,
        propagation_delay_s=0.01,
    )
    transfer_time_terms(np.array([1e9]), np.array([0.01]), 1e8, 1468.0, 0.01)
    _loaded = True
    return time.perf_counter() - start
