"""GET and POST /bottleneck-rate, POST /workloads/service-time and the profiles."""

from __future__ import annotations

import math
from typing import Any

import pytest
from fastapi.testclient import TestClient

import transport
from host import Workload

# The paper's model, named: these tests check its tables and the endpoints' behaviour
# with it (the default model, the time-slice one: test_bottleneck_models.py).
PAPER = {
    "cpu_tasks": 2,
    "io_tasks": 1,
    "file_size": "500MB",
    "propagation_delay": "100ms",
    "model": "paper",
}


def test_get_answers_with_the_documented_fields(client: TestClient) -> None:
    r = client.get("/bottleneck-rate", params=PAPER)
    assert r.status_code == 200, r.text
    body = r.json()
    for name in (
        "effective_bottleneck_rate_bps",
        "transfer_time_s",
        "loss_probability",
        "interrupt_service_rate_per_s",
        "limited_by",
        "inputs",
    ):
        assert name in body
    # The service adds nothing of its own: the library's composed method, same inputs.
    expected = transport.workload_bottleneck_rate(
        Workload(cpu_tasks=2, io_tasks=1),
        "sx280-2007",
        file_size_bytes=500_000_000,
        propagation_delay_s=0.1,
    )
    assert body["effective_bottleneck_rate_bps"] == expected.bottleneck.rate_bps
    assert body["transfer_time_s"] == expected.bottleneck.transfer_time_s
    assert body["limited_by"] == "end-system"


def test_inputs_are_normalised_to_si_with_profile_values(client: TestClient) -> None:
    body = client.get("/bottleneck-rate", params={**PAPER, "line_rate": "950Mbps"}).json()
    assert body["inputs"] == {
        "workload": {"cpu_tasks": 2, "io_tasks": 1, "cores": 1, "disks": 1},
        "host": {
            "profile": "sx280-2007",
            "mu_io_cpu": 4600.0,
            "mu_disk": 1010.0,
            "mu_net": 41600.0,
            "buffer_packets": 64,
            "coalesce_packets": 6,
            "line_rate_bps": 950e6,
            "packet_payload_bytes": 1468,
        },
        "transfer": {"file_size_bytes": 500_000_000, "propagation_delay_s": 0.1},
        "nic_service": "exponential",
        "model": "paper",
    }
    assert body["effective_bottleneck_rate_bps"] <= 950e6


def test_one_cpu_task_halves_the_interrupt_rate(client: TestClient) -> None:
    # docs/conventions.md §2 check: C = 1, I = 0, m = 1 gives mu = 41600 / 2 = 20800 /s.
    r = client.get("/bottleneck-rate", params={**PAPER, "cpu_tasks": 1, "io_tasks": 0})
    assert r.json()["interrupt_service_rate_per_s"] == pytest.approx(20_800.0, rel=1e-12)


def test_a_very_fast_host_is_limited_by_the_line(client: TestClient) -> None:
    params = {**PAPER, "cpu_tasks": 0, "io_tasks": 0, "mu_net": 1e9, "buffer_packets": 4096}
    body = client.get("/bottleneck-rate", params=params).json()
    assert body["limited_by"] == "line-rate"
    assert body["effective_bottleneck_rate_bps"] == pytest.approx(1e9, rel=1e-4)


def test_human_forms_and_si_numbers_give_the_same_cached_answer(client: TestClient) -> None:
    first = client.get("/bottleneck-rate", params={**PAPER, "cpu_tasks": 3})
    same = client.get(
        "/bottleneck-rate",
        params={**PAPER, "cpu_tasks": 3, "file_size": "500000000", "propagation_delay": "0.1s"},
    )
    assert same.headers["etag"] == first.headers["etag"]
    assert same.headers["x-cache"] == "hit"
    assert same.content == first.content


def test_if_none_match_gives_304(client: TestClient) -> None:
    first = client.get("/bottleneck-rate", params=PAPER)
    etag = first.headers["etag"]
    again = client.get("/bottleneck-rate", params=PAPER, headers={"If-None-Match": etag})
    assert again.status_code == 304
    assert again.content == b""
    assert again.headers["etag"] == etag
    other = client.get("/bottleneck-rate", params=PAPER, headers={"If-None-Match": '"nope"'})
    assert other.status_code == 200


def test_post_matches_get_and_adds_curve_and_service_time(client: TestClient) -> None:
    got = client.get("/bottleneck-rate", params=PAPER).json()
    r = client.post(
        "/bottleneck-rate",
        json={
            "workload": {"cpu_tasks": 2, "io_tasks": 1},
            "host": {"profile": "sx280-2007"},
            "transfer": {"file_size_bytes": 500_000_000, "propagation_delay_s": 0.1},
            "model": "paper",
            "include_curve": True,
            "include_service_time": True,
            "service_time_points": 11,
        },
    )
    assert r.status_code == 200, r.text
    posted = r.json()
    for name in ("effective_bottleneck_rate_bps", "transfer_time_s", "inputs", "rounds"):
        assert posted[name] == got[name]
    curve = posted["curve"]
    assert len(curve["send_rate_bps"]) == 200
    assert min(t for t in curve["total_s"] if t is not None) >= posted["transfer_time_s"] - 1e-12
    service = posted["service_time"]
    assert len(service["times_s"]) == len(service["cdf"]) == 11
    assert service["rate_per_s"] == pytest.approx(1 / service["mean_s"], rel=1e-12)
    assert posted["interrupt_service_rate_per_s"] == service["rate_per_s"]


def test_phase_type_nic_service_is_selectable(client: TestClient) -> None:
    exp = client.get("/bottleneck-rate", params=PAPER).json()
    ph = client.get("/bottleneck-rate", params={**PAPER, "nic_service": "phase-type"}).json()
    assert ph["inputs"]["nic_service"] == "phase-type"
    assert 0 < ph["effective_bottleneck_rate_bps"] <= 1e9
    assert exp["inputs"]["nic_service"] == "exponential"


def test_service_time_endpoint(client: TestClient) -> None:
    r = client.post(
        "/workloads/service-time",
        json={
            "workload": {"cpu_tasks": 2, "io_tasks": 0},
            "times_s": [0.0, 1e-4],
            "include_phase_type": True,
        },
    )
    assert r.status_code == 200, r.text
    body = r.json()
    # With I = 0 the service time is exponential, rate mu_net * min(1, m / (C + 1)).
    rate = 41_600.0 / 3
    assert body["rate_per_s"] == pytest.approx(rate, rel=1e-12)
    assert body["cdf"][1] == pytest.approx(1 - math.exp(-rate * 1e-4))
    assert body["phase_type"]["T"]["shape"] == [1, 1]
    assert body["inputs"]["workload"]["cpu_tasks"] == 2


@pytest.mark.parametrize(
    ("params", "kind", "field"),
    [
        ({"file_size": "500XB"}, "invalid-parameter", "query.file_size"),
        ({"propagation_delay": "soon"}, "invalid-parameter", "query.propagation_delay"),
        ({"line_rate": "fast"}, "invalid-parameter", "query.line_rate"),
        ({"coalesce_packets": 100}, "invalid-parameter", "query.coalesce_packets"),
        ({"profile": "nope"}, "invalid-parameter", "query.profile"),
        ({"cpu_tasks": -1}, "validation-error", "query.cpu_tasks"),
        ({"cpu_tasks": 600, "io_tasks": 600}, "limit-exceeded", "query.cpu_tasks"),
        ({"io_tasks": 900, "disks": 16}, "limit-exceeded", "query.disks"),
    ],
)
def test_bad_queries_name_the_field(
    client: TestClient, problem_of: Any, params: dict[str, Any], kind: str, field: str
) -> None:
    body = problem_of(client.get("/bottleneck-rate", params={**PAPER, **params}), 422)
    assert body["type"] == f"/problems/{kind}"
    assert field in [e["field"] for e in body["errors"]]


def test_query_validation_reports_each_field_and_its_limit(
    client: TestClient, problem_of: Any
) -> None:
    # The whole query string is validated at once; every bad field is reported, in the
    # documented order, with the limit it broke.
    query = {**PAPER, "cpu_tasks": "x", "cores": 0, "disks": 99, "nic_service": "fast"}
    body = problem_of(client.get("/bottleneck-rate", params=query), 422)
    assert body["type"] == "/problems/validation-error"
    errors = {e["field"]: e for e in body["errors"]}
    assert list(errors) == ["query.cpu_tasks", "query.cores", "query.disks", "query.nic_service"]
    assert (errors["query.cores"]["limit"], errors["query.cores"]["allowed"]) == ("minimum", 1)
    assert (errors["query.disks"]["limit"], errors["query.disks"]["allowed"]) == ("maximum", 16)


@pytest.mark.parametrize(
    ("extra", "field", "suggestion"),
    [
        # Issue #13: both were answered 200 for the profile's 1 Gbps line.
        ("linerate=10Gbps", "query.linerate", "line_rate"),
        ("line_rate_bps=10e9", "query.line_rate_bps", "line_rate"),
        ("io_task=3", "query.io_task", "io_tasks"),
        ("colour=blue", "query.colour", None),
    ],
)
def test_unknown_query_parameters_are_refused_with_the_closest_name(
    client: TestClient, problem_of: Any, extra: str, field: str, suggestion: str | None
) -> None:
    query = "&".join(f"{k}={v}" for k, v in PAPER.items())
    body = problem_of(client.get(f"/bottleneck-rate?{query}&{extra}"), 422)
    assert body["type"] == "/problems/validation-error"
    assert [e["field"] for e in body["errors"]] == [field]
    reason = body["errors"][0]["reason"]
    assert "unknown parameter" in reason
    if suggestion is None:
        assert "did you mean" not in reason
    else:
        assert f"did you mean {suggestion!r}" in reason


def test_repeated_query_parameters_are_refused(client: TestClient, problem_of: Any) -> None:
    # Issue #13: the last of a repeated parameter silently won.
    query = "&".join(f"{k}={v}" for k, v in PAPER.items())
    body = problem_of(client.get(f"/bottleneck-rate?cpu_tasks=7&{query}"), 422)
    assert [e["field"] for e in body["errors"]] == ["query.cpu_tasks"]
    assert "2 times" in body["errors"][0]["reason"]


def test_a_refused_query_is_not_answered_from_the_index(
    client: TestClient, problem_of: Any
) -> None:
    # The raw-query index in front of the route must not learn a refused query.
    query = "&".join(f"{k}={v}" for k, v in PAPER.items())
    for _ in range(2):
        problem_of(client.get(f"/bottleneck-rate?{query}&line_rate_bps=1"), 422)


def test_missing_query_parameters_are_listed(client: TestClient, problem_of: Any) -> None:
    body = problem_of(client.get("/bottleneck-rate", params={"cpu_tasks": 1}), 422)
    fields = {e["field"] for e in body["errors"]}
    assert fields == {"query.io_tasks", "query.file_size", "query.propagation_delay"}


def test_post_errors_name_body_fields(client: TestClient, problem_of: Any) -> None:
    r = client.post(
        "/bottleneck-rate",
        json={
            "workload": {"cpu_tasks": 1, "io_tasks": 0},
            "host": {"buffer_packets": 2},
            "transfer": {"file_size_bytes": 1000, "propagation_delay_s": 0.1},
        },
    )
    body = problem_of(r, 422)
    # The batch N = 6 comes from the profile; the buffer is what the client sent.
    assert [e["field"] for e in body["errors"]] == ["body.host.buffer_packets"]


def test_profiles(client: TestClient, problem_of: Any) -> None:
    listing = client.get("/profiles").json()
    assert listing["default"] == "sx280-2007"
    one = client.get("/profiles/sx280-2007").json()
    assert one in listing["profiles"]
    # docs/conventions.md "Units": the paper's Table II in SI units.
    assert (one["mu_io_cpu"], one["mu_disk"], one["mu_net"]) == (4600.0, 1010.0, 41600.0)
    assert (one["buffer_packets"], one["coalesce_packets"]) == (64, 6)
    problem_of(client.get("/profiles/nope"), 404)


def test_a_reordered_query_is_answered_from_the_normalised_cache(client: TestClient) -> None:
    first = client.get("/bottleneck-rate", params={**PAPER, "cpu_tasks": 4})
    reordered = dict(reversed(list({**PAPER, "cpu_tasks": 4}.items())))
    again = client.get("/bottleneck-rate", params=reordered)
    assert again.headers["x-cache"] == "hit"
    assert again.headers["etag"] == first.headers["etag"]
    # The route's own conditional answer (this query string is not in the index yet).
    reordered_again = client.get(
        "/bottleneck-rate",
        params={**reordered, "profile": "sx280-2007"},
        headers={"If-None-Match": first.headers["etag"]},
    )
    assert reordered_again.status_code == 304


def test_repeated_query_is_answered_without_the_route(client: TestClient) -> None:
    params = {**PAPER, "cpu_tasks": 3, "io_tasks": 3}
    first = client.get("/bottleneck-rate", params=params)
    lookups = client.app.state.service.metrics.cache_lookups  # type: ignore[attr-defined]
    before = lookups.labels("bottleneck", "hit")._value.get()
    again = client.get("/bottleneck-rate", params=params)
    assert again.content == first.content
    assert again.headers["x-cache"] == "hit"
    assert again.headers["content-type"] == "application/json"
    assert lookups.labels("bottleneck", "hit")._value.get() == before + 1
