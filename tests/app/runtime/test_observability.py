"""Request ids, JSON logs, Prometheus metrics and readiness."""

from __future__ import annotations

import gc
import json
import logging
import struct
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from app.runtime.observability import JsonFormatter


class _Records(logging.Handler):
    def __init__(self) -> None:
        super().__init__()
        self.lines: list[dict[str, Any]] = []
        self.setFormatter(JsonFormatter())

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(json.loads(self.format(record)))


@pytest.fixture
def access_lines() -> Any:
    logger = logging.getLogger("blastrate.access")
    handler = _Records()
    level = logger.level
    logger.addHandler(handler)
    logger.setLevel(logging.INFO)
    yield handler.lines
    logger.removeHandler(handler)
    logger.setLevel(level)


def test_request_id_is_generated_and_echoed(client: TestClient) -> None:
    generated = client.get("/healthz").headers["x-request-id"]
    assert len(generated) == 32
    assert (
        client.get("/healthz", headers={"X-Request-ID": "abc-123"}).headers["x-request-id"]
        == "abc-123"
    )
    # Anything that could forge a log line is replaced, not echoed.
    forged = client.get("/healthz", headers={"X-Request-ID": "a b\tc"}).headers["x-request-id"]
    assert forged != "a b\tc" and len(forged) == 32


def test_access_log_is_one_json_object_with_the_request_id(
    client: TestClient, access_lines: list[dict[str, Any]]
) -> None:
    client.get("/profiles/sx280-2007", headers={"X-Request-ID": "trace-42"})
    line = access_lines[-1]
    assert line["request_id"] == "trace-42"
    assert line["route"] == "/profiles/{name}"
    assert line["status"] == 200
    assert line["method"] == "GET"
    assert line["level"] == "info"
    assert line["duration_ms"] >= 0


def test_metrics_have_request_and_solve_histograms(client: TestClient) -> None:
    client.get("/healthz")
    client.post(
        "/queues/nic",
        json={
            "arrival_rates_pps": [100.0],
            "service_rate_per_s": 300.0,
            "buffer_packets": 8,
            "coalesce_packets": 2,
        },
    )
    r = client.get("/metrics")
    assert r.status_code == 200
    assert r.headers["content-type"].startswith("text/plain")
    text = r.text
    assert (
        'blastrate_http_request_duration_seconds_bucket{le="0.001",method="GET",route="/healthz",status="200"}'
        in text
    )
    assert 'blastrate_solve_duration_seconds_count{kind="nic",where="process"}' in text
    assert "blastrate_cache_lookups_total" in text
    # Unknown paths share one label value: the label set cannot grow without bound.
    client.get("/random/path/1")
    client.get("/openapi.json")
    for k in range(3):  # under a mount: unknown files must not make labels of their own
        client.get(f"/docs/assets/no-such-file-{k}")
    text = client.get("/metrics").text
    assert "no-such-file" not in text
    assert 'route="unmatched",status="404"' in text
    # FastAPI's schema route is a plain Starlette route (no scope["route"]): still named.
    assert 'route="/openapi.json",status="200"' in text
    assert 'route="unmatched",status="200"' not in text


def test_readiness_waits_for_the_default_nets(
    make_client: Any, monkeypatch: Any, problem_of: Any
) -> None:
    import app.service.warmup

    release = threading.Event()
    real = app.service.warmup.compile_default_nets

    def slow_compile(on_ready: Any = None) -> int:
        release.wait(10)
        return real(on_ready)

    monkeypatch.setattr(app.service.warmup, "compile_default_nets", slow_compile)
    gc.unfreeze()  # so that what is frozen below is this app's doing
    assert gc.get_freeze_count() == 0
    client = make_client(warm_up=True)
    assert client.get("/healthz").status_code == 200  # alive while still compiling
    not_ready = client.get("/readyz")
    problem_of(not_ready, 503)
    assert not_ready.headers["retry-after"] == "1"
    release.set()
    deadline = time.monotonic() + 60
    while client.get("/readyz").status_code != 200 and time.monotonic() < deadline:
        time.sleep(0.05)
    ready = client.get("/readyz").json()
    assert ready["status"] == "ready"
    assert ready["compiled_nets"] == 8  # Fig. 1a and 1b for I = 0..3
    # The start-up objects are out of the cyclic collector's sight (no 110 ms full
    # collections under load), once the warm-up is over (with the kernels cached it goes
    # on loading them after readiness); give them back, this test process goes on.
    while gc.get_freeze_count() <= 10_000 and time.monotonic() < deadline:
        time.sleep(0.05)
    assert gc.get_freeze_count() > 10_000
    gc.unfreeze()


def test_a_worker_file_not_yet_sized_does_not_fail_the_scrape(tmp_path: Path) -> None:
    """A worker creates its metrics file empty and sizes it a moment later
    (prometheus_client's ``MmapedDict.__init__``); a scrape in between must still answer,
    with every other worker's figures.  Reference: prometheus/client_python#1199, where
    the library's own collector raises ``struct.error`` on such a file."""
    from prometheus_client import CollectorRegistry, generate_latest
    from prometheus_client.mmap_dict import MmapedDict, mmap_key
    from prometheus_client.multiprocess import MultiProcessCollector

    from app.runtime.observability import _WorkerFilesCollector

    written = MmapedDict(str(tmp_path / "counter_101.db"))
    key = mmap_key("jobs", "jobs_total", ["kind"], ["sweep"], "Jobs run.")
    written.write_value(key, 7.0, 0.0)
    written.close()
    (tmp_path / "counter_102.db").touch()  # the second worker, between create and size

    plain = CollectorRegistry()
    MultiProcessCollector(plain, path=str(tmp_path))
    with pytest.raises(struct.error):
        generate_latest(plain)

    tolerant = CollectorRegistry()
    _WorkerFilesCollector(tolerant, path=str(tmp_path))
    assert tolerant.get_sample_value("jobs_total", {"kind": "sweep"}) == 7.0
