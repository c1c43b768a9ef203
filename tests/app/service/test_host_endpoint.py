"""GET /host and GET /bottleneck-rate?workload=live, from the background probe."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from typing import Any

import pytest
from fastapi.testclient import TestClient

from host.probe import HostProbe, ProbeSampler, Reading
from host.probe.cores import CpuQuota
from host.probe.nic import NicReadings

QUERY = {"file_size": "500MB", "propagation_delay": "100ms"}


def fixed_probe(**_: Any) -> HostProbe:
    """A probe as if the host had C = 3, I = 1, m = 2, d = 1 and a 512/16 NIC ring."""
    nic = NicReadings(
        interface=Reading("eth0", "named"),
        line_rate_bps=Reading(1e9, "fake speed"),
        mtu_bytes=Reading(1500, "fake mtu"),
        packet_payload_bytes=Reading(1468, "fake mtu - 32"),
        buffer_packets=Reading(512, "fake ring"),
        coalesce_packets=Reading.defaulted(6, "profile sx280-2007", "fake: adaptive"),
    )
    return HostProbe(
        cpu_tasks=Reading(3, "fake schedstat"),
        io_tasks=Reading(1, "fake io"),
        cores=Reading(2, "fake affinity"),
        disks=Reading(1, "fake /sys/block"),
        nic=nic,
        tasks=(),
        excluded_tasks=0,
        window_s=0.05,
        samples=1,
        taken_at=datetime.now(UTC),
        affinity=Reading(2, "fake affinity"),
        quota=CpuQuota(None, "fake"),
    )


@pytest.fixture
def live_client(make_client: Callable[..., TestClient]) -> Iterator[TestClient]:
    client = make_client()
    sampler = ProbeSampler(0.05, pause_s=0.05, probe=fixed_probe)
    client.app.state.service.extras["probe"] = sampler  # type: ignore[attr-defined]
    sampler.start()
    assert sampler.wait(timeout=10)
    yield client
    sampler.stop()


def test_host_reports_the_latest_window(live_client: TestClient) -> None:
    body = live_client.get("/host").json()
    assert body["workload"]["cpu_tasks"] == {"value": 3, "source": "fake schedstat"}
    assert body["nic"]["coalesce_packets"]["unread"] == "fake: adaptive"
    assert body["nic"]["coalesce_packets"]["source"] == "default: profile sx280-2007"
    assert body["age_s"] >= 0


def test_live_answer_equals_the_same_workload_given(live_client: TestClient) -> None:
    live = live_client.get("/bottleneck-rate", params={**QUERY, "workload": "live"})
    assert live.status_code == 200, live.text
    body = live.json()
    assert body["workload_source"] == "live"
    assert body["probe"]["workload"]["io_tasks"]["value"] == 1
    # Independent path: the same C, I, m, d and the NIC values the probe read, given.
    given = live_client.get(
        "/bottleneck-rate",
        params={**QUERY, "cpu_tasks": 3, "io_tasks": 1, "cores": 2, "buffer_packets": 512},
    ).json()
    assert body["inputs"] == given["inputs"]
    assert body["effective_bottleneck_rate_bps"] == given["effective_bottleneck_rate_bps"]
    assert "workload_source" not in given


def test_live_parameters_override_the_probe(live_client: TestClient) -> None:
    body = live_client.get(
        "/bottleneck-rate", params={**QUERY, "workload": "live", "cores": 1, "buffer_packets": 64}
    ).json()
    assert body["inputs"]["workload"] == {"cpu_tasks": 3, "io_tasks": 1, "cores": 1, "disks": 1}
    assert body["inputs"]["host"]["buffer_packets"] == 64
    # C and I too: a value the client sent is never dropped (it was, in favour of the
    # probe's, while cores was applied).
    body = live_client.get(
        "/bottleneck-rate",
        params={**QUERY, "workload": "live", "cpu_tasks": 7, "io_tasks": 5, "cores": 3},
    ).json()
    assert body["inputs"]["workload"] == {"cpu_tasks": 7, "io_tasks": 5, "cores": 3, "disks": 1}
    assert body["probe"]["workload"]["cpu_tasks"]["value"] == 3


def test_live_answers_are_not_filed_in_the_query_index(live_client: TestClient) -> None:
    params = {**QUERY, "workload": "live"}
    first = live_client.get("/bottleneck-rate", params=params).json()
    time.sleep(0.3)  # a few windows later: a new probe, a new answer
    second = live_client.get("/bottleneck-rate", params=params).json()
    assert first["probe"]["taken_at"] != second["probe"]["taken_at"]


def test_given_workload_still_needs_c_and_i(live_client: TestClient, problem_of: Any) -> None:
    body = problem_of(live_client.get("/bottleneck-rate", params=QUERY), 422)
    assert {e["field"] for e in body["errors"]} == {"query.cpu_tasks", "query.io_tasks"}


def test_disabled_probe_is_a_404(client: TestClient, problem_of: Any) -> None:
    host = problem_of(client.get("/host"), 404)
    assert host["type"] == "/problems/probe-disabled"
    live = problem_of(client.get("/bottleneck-rate", params={**QUERY, "workload": "live"}), 404)
    assert live["errors"][0]["field"] == "query.workload"


def test_no_window_yet_is_a_503_with_retry_after(
    make_client: Callable[..., TestClient], problem_of: Any
) -> None:
    client = make_client()
    release = threading.Event()

    def slow(**_: Any) -> HostProbe:
        release.wait(10)
        return fixed_probe()

    sampler = ProbeSampler(3.0, probe=slow)
    client.app.state.service.extras["probe"] = sampler  # type: ignore[attr-defined]
    sampler.start()
    try:
        response = client.get("/host")
        problem_of(response, 503)
        assert response.headers["retry-after"] == "3"
    finally:
        release.set()
        sampler.stop()


def test_the_real_probe_runs_in_the_background(make_client: Callable[..., TestClient]) -> None:
    client = make_client(probe_enabled=True, probe_interval_s=0.3)
    deadline = time.monotonic() + 20
    while (response := client.get("/host")).status_code == 503:
        assert time.monotonic() < deadline, response.text
        time.sleep(0.1)
    assert response.status_code == 200, response.text
    body = response.json()
    # At least the window asked for (longer on a loaded host: the end snapshot).
    assert body["window_s"] >= 0.29 and body["samples"] >= 1
    for name in ("cpu_tasks", "io_tasks", "cores", "disks"):
        assert isinstance(body["workload"][name]["value"], int)
        assert body["workload"][name]["source"]
