"""Thread pools of the native libraries (BLAS, OpenMP), held to a fixed size per process.

The matrices here are small (hundreds to thousands of states), where BLAS threads only
add contention with the server's own threads and solver processes: on a loaded 2-core
host they turned a 4 ms eigen-decomposition into a second.  The limit is applied where the
work runs, at app start and in every solver process, so that ``uvicorn app.main:app`` and
an installed package get it as well as ``./scripts/serve``.
"""

from __future__ import annotations

from typing import Any

from threadpoolctl import threadpool_info, threadpool_limits

__all__ = ["limit_native_threads", "native_thread_counts"]

# threadpoolctl keeps the effect of a limit only while its controller object lives.
_ACTIVE: list[Any] = []


def limit_native_threads(threads: int) -> None:
    """Hold every loaded BLAS and OpenMP library of this process to ``threads`` threads.

    Parameters
    ----------
    threads : int
        Threads per library (>= 1).  Applies to the libraries loaded now; NumPy and SciPy
        load theirs on import, so call this after importing them.
    """
    # SciPy's own BLAS loads with scipy.linalg, which the service now imports on first
    # use rather than at start: loaded here, so that the limit reaches it too.
    import scipy.linalg  # noqa: F401

    _ACTIVE.clear()
    _ACTIVE.append(threadpool_limits(limits=threads))


def native_thread_counts() -> dict[str, int]:
    """Threads of each loaded native thread pool, keyed by ``"user_api:internal_api:path"``."""
    return {
        f"{lib['user_api']}:{lib['internal_api']}:{lib['filepath']}": int(lib["num_threads"])
        for lib in threadpool_info()
    }
