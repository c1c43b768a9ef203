"""Structured JSON logs carrying the request id, and the Prometheus metrics of one app."""

from __future__ import annotations

import datetime as _dt
import glob
import json
import logging
import os
import sys
from typing import Any

from prometheus_client import (
    CollectorRegistry,
    Counter,
    Gauge,
    GCCollector,
    Histogram,
    PlatformCollector,
    ProcessCollector,
)
from prometheus_client import values as _prometheus_values
from prometheus_client.multiprocess import MultiProcessCollector

from app.schemas.problems import REQUEST_ID

__all__ = ["JsonFormatter", "Metrics", "configure_logging", "logging_config"]

# Attributes every LogRecord has; anything else was passed with ``extra=`` and is logged.
_STANDARD_ATTRS = frozenset(
    vars(logging.LogRecord("", 0, "", 0, "", None, None)).keys()
    | {"message", "asctime", "color_message"}  # uvicorn's ANSI-coloured copy of the message
)


class JsonFormatter(logging.Formatter):
    """One JSON object per line: time, level, logger, message, request id and extras."""

    def format(self, record: logging.LogRecord) -> str:
        entry: dict[str, Any] = {
            "ts": _dt.datetime.fromtimestamp(record.created, _dt.UTC).isoformat(
                timespec="milliseconds"
            ),
            "level": record.levelname.lower(),
            "logger": record.name,
            "message": record.getMessage(),
        }
        request_id = getattr(record, "request_id", None) or REQUEST_ID.get()
        if request_id is not None:
            entry["request_id"] = request_id
        for key, value in record.__dict__.items():
            if key not in _STANDARD_ATTRS and key not in entry:
                entry[key] = value
        if record.exc_info:
            entry["exception"] = self.formatException(record.exc_info)
        return json.dumps(entry, default=str, separators=(",", ":"))


def logging_config(level: str = "info", json_lines: bool = True) -> dict[str, Any]:
    """A ``logging.config.dictConfig`` for the service and uvicorn (also for ``uvicorn.run``).

    Uvicorn's own access log is silenced: the service middleware writes one access line per
    request, with the request id and the route.
    """
    formatter = (
        {"()": f"{__name__}.JsonFormatter"}
        if json_lines
        else {"format": "%(asctime)s %(levelname)s %(name)s %(message)s"}
    )
    return {
        "version": 1,
        "disable_existing_loggers": False,
        "formatters": {"default": formatter},
        "handlers": {
            "default": {
                "class": "logging.StreamHandler",
                "formatter": "default",
                "stream": "ext://sys.stderr",
            }
        },
        "loggers": {
            "blastrate": {"handlers": ["default"], "level": level.upper(), "propagate": False},
            "uvicorn": {"handlers": ["default"], "level": level.upper(), "propagate": False},
            "uvicorn.error": {"level": level.upper()},
            "uvicorn.access": {"handlers": [], "level": "WARNING", "propagate": False},
        },
    }


def configure_logging(level: str = "info", json_lines: bool = True) -> None:
    """Attach a JSON handler to the ``blastrate`` logger unless it has one (idempotent)."""
    logger = logging.getLogger("blastrate")
    logger.setLevel(level.upper())
    if logger.handlers:  # already configured (by `blastrate serve`, or an earlier app)
        return
    handler = logging.StreamHandler(sys.stderr)
    if json_lines:
        handler.setFormatter(JsonFormatter())
    logger.addHandler(handler)
    logger.propagate = False


# Latency buckets (s): sub-millisecond answers for cached and paper-sized requests up to
# solves that hit the wall-time limit.
_LATENCY_BUCKETS = (
    0.0005,
    0.001,
    0.002,
    0.005,
    0.01,
    0.025,
    0.05,
    0.1,
    0.25,
    0.5,
    1.0,
    2.5,
    5.0,
    10.0,
    30.0,
    60.0,
)


def _value_class(multiprocess_dir: str | None) -> None:
    """Make the metrics created next per-process (in memory) or shared (mmap files).

    prometheus_client picks its value class once, at import, from the environment; the
    service decides at app creation, so it sets the class itself.  The multiprocess class
    is made once per process: two of them would map the same files twice.
    """
    global _MULTIPROCESS_VALUE
    if multiprocess_dir is None:
        _prometheus_values.ValueClass = _prometheus_values.MutexValue
        return
    if _MULTIPROCESS_VALUE is None:
        _MULTIPROCESS_VALUE = _prometheus_values.MultiProcessValue()
    _prometheus_values.ValueClass = _MULTIPROCESS_VALUE


_MULTIPROCESS_VALUE: Any = None


class Metrics:
    """The Prometheus metrics of one app, in a registry of their own.

    Parameters
    ----------
    multiprocess_dir : str, optional
        A directory shared by every worker process of the server (see
        :mod:`app.service.multiprocess_metrics`).  Then counters and histograms are summed over the
        workers, gauges are summed over the live ones, and ``/metrics`` answers the same
        whichever worker serves it.  Process metrics (CPU, memory, GC) are left out then:
        they describe one process only.
    """

    def __init__(self, multiprocess_dir: str | None = None) -> None:
        self.multiprocess_dir = multiprocess_dir
        _value_class(multiprocess_dir)
        self.registry = CollectorRegistry(auto_describe=True)
        if multiprocess_dir is None:
            ProcessCollector(registry=self.registry)
            PlatformCollector(registry=self.registry)
            GCCollector(registry=self.registry)
        self.requests = Histogram(
            "blastrate_http_request_duration_seconds",
            "Time from receiving a request to sending the end of its response.",
            ["method", "route", "status"],
            buckets=_LATENCY_BUCKETS,
            registry=self.registry,
        )
        self.solves = Histogram(
            "blastrate_solve_duration_seconds",
            "Compute time of one model solve (cache misses only).",
            ["kind", "where"],
            buckets=_LATENCY_BUCKETS,
            registry=self.registry,
        )
        self.solve_timeouts = Counter(
            "blastrate_solve_timeouts",
            "Solves stopped because they exceeded the wall-time limit.",
            ["kind"],
            registry=self.registry,
        )
        self.cache_lookups = Counter(
            "blastrate_cache_lookups",
            "Result-cache lookups, by outcome.",
            ["kind", "outcome"],
            registry=self.registry,
        )
        self.cache_entries = Gauge(
            "blastrate_cache_entries",
            "Results held in the caches (summed over the server's worker processes).",
            registry=self.registry,
            multiprocess_mode="livesum",
        )
        self.pool_busy = Gauge(
            "blastrate_pool_busy_workers",
            "Worker processes running a solve.",
            registry=self.registry,
            multiprocess_mode="livesum",
        )
        self.pool_waiting = Gauge(
            "blastrate_pool_waiting_solves",
            "Solves waiting for a free worker process.",
            registry=self.registry,
            multiprocess_mode="livesum",
        )
        self.worker_restarts = Counter(
            "blastrate_pool_worker_restarts",
            "Solver processes replaced, by reason: timeout, memory, died, recycled.",
            ["reason"],
            registry=self.registry,
        )
        self.moved_to_pool = Counter(
            "blastrate_solves_moved_to_pool",
            "Solves stopped in the server process and moved to the worker pool, by the "
            "bound they reached (time, memory) or the estimate.",
            ["kind", "reason"],
            registry=self.registry,
        )

    def exposition_registry(self) -> CollectorRegistry:
        """The registry to serialise for ``/metrics`` (all workers' in multiprocess mode)."""
        if self.multiprocess_dir is None:
            return self.registry
        registry = CollectorRegistry()
        _WorkerFilesCollector(registry, path=self.multiprocess_dir)
        return registry


class _WorkerFilesCollector(MultiProcessCollector):
    """prometheus_client's multiprocess collector, reading only files that hold something.

    A worker creates its file empty and sizes it a moment later, the first time it
    records a metric of a kind; a scrape that reads the file in between fails as a whole
    (prometheus/client_python#1199), so a scrape just after another worker's first
    request could answer 500.  An empty file holds nothing yet and is skipped; a file
    only ever grows, so one seen non-empty stays readable.  (A live gauge's file removed
    since the listing, by a worker exiting, the library already skips.)
    """

    def collect(self) -> Any:
        files = [f for f in glob.glob(os.path.join(self._path, "*.db")) if _holds_data(f)]
        return self.merge(files, accumulate=True)


def _holds_data(path: str) -> bool:
    """Whether the file at ``path`` exists and is no longer empty."""
    try:
        return os.stat(path).st_size > 0
    except FileNotFoundError:
        return False
