"""The directory in which the worker processes of one server share their metrics.

With ``uvicorn --workers N`` each request, ``/metrics`` included, is served by whichever
worker process accepts it.  prometheus_client's multiprocess mode keeps every process's
counters in memory-mapped files of one directory and sums them when scraped, so
``/metrics`` gives the same totals from any worker.  The service manages that directory:

* one directory per server run, ``<parent>/blastrate-metrics-<uid>/<pid>-<start time>`` of
  the uvicorn supervisor process, created by the first worker that starts;
* cleaned at start: directories left by servers that are no longer running are removed;
* each worker marks itself dead on exit, so that its live gauges stop counting.

A deployment that sets ``PROMETHEUS_MULTIPROC_DIR`` itself keeps that directory (and the
duty to empty it between runs, as prometheus_client documents).
"""

from __future__ import annotations

import contextlib
import fcntl
import multiprocessing
import os
import shutil
import tempfile
from pathlib import Path

from prometheus_client import multiprocess

__all__ = ["mark_worker_dead", "metrics_directory", "one_of_several_servers"]

ENV = "PROMETHEUS_MULTIPROC_DIR"


def _start_time(pid: int) -> str | None:
    """Start time of a process in clock ticks since boot (``/proc/<pid>/stat``), or None."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[19]
    except (OSError, IndexError):
        return None


def _server_key() -> tuple[str, bool]:
    """Name of this server run, and whether it has a supervisor with several workers.

    uvicorn starts its workers with multiprocessing's *spawn*, so a worker knows its
    supervisor as ``multiprocessing.parent_process()``; a single-process server is its
    own key.
    """
    parent = multiprocessing.parent_process()
    pid = parent.pid if parent is not None and parent.pid is not None else os.getpid()
    return f"{pid}-{_start_time(pid)}", parent is not None


def one_of_several_servers() -> bool:
    """Whether this process is one of several server processes on this host.

    True in a worker of ``uvicorn --workers N`` (``blastrate serve --workers N``), which
    uvicorn starts with multiprocessing's *spawn*, and wherever ``PROMETHEUS_MULTIPROC_DIR``
    is set, as a deployment under gunicorn or another process manager sets it for its
    metrics.
    """
    return multiprocessing.parent_process() is not None or bool(os.environ.get(ENV))


def _alive(key: str) -> bool:
    pid, _, started = key.partition("-")
    return pid.isdigit() and _start_time(int(pid)) == started


def metrics_directory(mode: str = "auto", parent: str | None = None) -> str | None:
    """Prepare the shared metrics directory of this server, or None for per-process metrics.

    Parameters
    ----------
    mode : {"auto", "on", "off"}
        "auto": shared when ``PROMETHEUS_MULTIPROC_DIR`` is set or this process is one of
        several uvicorn workers; "on": always; "off": never.
    parent : str, optional
        Where the per-server directories go (default: the temporary directory).

    Returns
    -------
    str or None
        The directory (also put in ``PROMETHEUS_MULTIPROC_DIR`` for prometheus_client).
    """
    if mode == "off":
        return None
    given = os.environ.get(ENV)
    if given:
        Path(given).mkdir(parents=True, exist_ok=True)
        return given
    key, supervised = _server_key()
    if mode == "auto" and not supervised:
        return None
    root = Path(parent or tempfile.gettempdir()) / f"blastrate-metrics-{os.getuid()}"
    root.mkdir(mode=0o700, parents=True, exist_ok=True)
    with open(root / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        for old in root.iterdir():
            if old.is_dir() and old.name != key and not _alive(old.name):
                shutil.rmtree(old, ignore_errors=True)
        mine = root / key
        mine.mkdir(exist_ok=True)
    os.environ[ENV] = str(mine)
    return str(mine)


def mark_worker_dead(directory: str | None, pid: int | None = None) -> None:
    """Drop the live gauges of a worker that is exiting (or has exited)."""
    if directory is not None:
        with contextlib.suppress(OSError):
            multiprocess.mark_process_dead(pid or os.getpid(), directory)
