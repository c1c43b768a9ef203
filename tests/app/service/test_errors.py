"""Every error is RFC 9457 problem+json with a 4xx status that names the field."""

from __future__ import annotations

from typing import Any

import pytest
from fastapi.testclient import TestClient

POST_ENDPOINTS = [
    "/bottleneck-rate",
    "/workloads/service-time",
    "/queues/nic",
    "/transfer-time",
    "/srn/solve",
]


@pytest.mark.parametrize("path", POST_ENDPOINTS)
def test_empty_object_is_a_validation_problem(
    client: TestClient, problem_of: Any, path: str
) -> None:
    body = problem_of(client.post(path, json={}), 422)
    assert body["type"] == "/problems/validation-error"
    assert body["errors"], "the missing fields are listed"
    assert all(e["field"].startswith("body") for e in body["errors"])


@pytest.mark.parametrize("path", POST_ENDPOINTS)
def test_unknown_fields_are_rejected(client: TestClient, problem_of: Any, path: str) -> None:
    body = problem_of(client.post(path, json={"no_such_field": 1}), 422)
    assert "body.no_such_field" in {e["field"] for e in body["errors"]}


@pytest.mark.parametrize("path", POST_ENDPOINTS)
def test_malformed_json_is_400(client: TestClient, problem_of: Any, path: str) -> None:
    # Issue #13: a body that is not JSON is a bad request (400), not a schema mismatch.
    for content in (b'{"a": ', b"\xff\xfe{", b"\x00"):
        r = client.post(path, content=content, headers={"content-type": "application/json"})
        body = problem_of(r, 400)
        assert body["type"] == "/problems/malformed-json"
        assert body["errors"][0]["field"] == "body"


@pytest.mark.parametrize(
    ("path", "body", "flag"),
    [
        (
            "/bottleneck-rate",
            {
                "workload": {"cpu_tasks": 1, "io_tasks": 0},
                "transfer": {"file_size_bytes": 1000, "propagation_delay_s": 0.1},
            },
            "include_curve",
        ),
        (
            "/workloads/service-time",
            {"workload": {"cpu_tasks": 1, "io_tasks": 0}},
            "include_phase_type",
        ),
        (
            "/queues/nic",
            {
                "arrival_rates_pps": [1.0],
                "service_rate_per_s": 2.0,
                "buffer_packets": 4,
                "coalesce_packets": 1,
            },
            "include_distribution",
        ),
    ],
)
@pytest.mark.parametrize("value", [0, 1, "true", "yes", None])
def test_booleans_are_strict(
    client: TestClient, problem_of: Any, path: str, body: dict[str, Any], flag: str, value: Any
) -> None:
    # Issue #13: `0` was read as false.  Only JSON true and false are booleans.
    problem = problem_of(client.post(path, json={**body, flag: value}), 422)
    assert f"body.{flag}" in {e["field"] for e in problem["errors"]}
    assert client.post(path, json={**body, flag: False}).status_code == 200


@pytest.mark.parametrize("path", POST_ENDPOINTS)
def test_non_json_bodies_are_415(client: TestClient, problem_of: Any, path: str) -> None:
    r = client.post(path, content=b"a=1", headers={"content-type": "text/plain"})
    body = problem_of(r, 415)
    assert body["errors"][0]["field"] == "header.content-type"


def test_a_pnml_file_posted_as_it_is_is_told_where_it_goes(
    client: TestClient, problem_of: Any
) -> None:
    # A newcomer's trial: `curl --data-binary @net.xml -H 'Content-Type: application/xml'`
    # got "must be JSON" with no word of the "pnml" member that takes the file.
    r = client.post("/srn/solve", content=b"<pnml/>", headers={"content-type": "application/xml"})
    body = problem_of(r, 415)
    assert '"pnml"' in body["detail"]
    plain = client.post("/srn/solve", content=b"a=1", headers={"content-type": "text/plain"})
    assert "pnml" not in problem_of(plain, 415)["detail"]


@pytest.mark.parametrize("path", POST_ENDPOINTS)
def test_json_of_the_wrong_shape(client: TestClient, problem_of: Any, path: str) -> None:
    problem_of(client.post(path, json=[1, 2, 3]), 422)
    problem_of(client.post(path, json="text"), 422)


def test_nan_and_infinity_are_refused(client: TestClient, problem_of: Any) -> None:
    # Python's JSON reader accepts the NaN and Infinity literals; the API must not.
    for literal in (b"NaN", b"Infinity"):
        r = client.post(
            "/queues/nic",
            content=b'{"arrival_rates_pps": [1000.0], "service_rate_per_s": '
            + literal
            + b', "buffer_packets": 8, "coalesce_packets": 2}',
            headers={"content-type": "application/json"},
        )
        body = problem_of(r, 422)
        assert body["errors"][0]["field"] == "body.service_rate_per_s"


def test_range_errors_report_the_limit(client: TestClient, problem_of: Any) -> None:
    r = client.post(
        "/workloads/service-time", json={"workload": {"cpu_tasks": 2000, "io_tasks": 0}}
    )
    error = problem_of(r, 422)["errors"][0]
    assert error["field"] == "body.workload.cpu_tasks"
    assert (error["limit"], error["allowed"], error["actual"]) == ("maximum", 1000, 2000)


def test_unknown_path_is_404(client: TestClient, problem_of: Any) -> None:
    body = problem_of(client.get("/no/such/path"), 404)
    assert body["instance"] == "/no/such/path"


def test_wrong_method_is_405_with_allow(client: TestClient, problem_of: Any) -> None:
    r = client.delete("/srn/solve")
    problem_of(r, 405)
    assert r.headers["allow"] == "POST"
    r = client.put("/bottleneck-rate")
    problem_of(r, 405)
    assert set(r.headers["allow"].replace(" ", "").split(",")) == {"GET", "POST"}


def test_problem_types_are_documented(client: TestClient, problem_of: Any) -> None:
    body = client.get("/problems/limit-exceeded").json()
    assert body["status"] == 422
    assert body["type"] == "/problems/limit-exceeded"
    problem_of(client.get("/problems/nothing"), 404)


def test_unexpected_errors_are_problem_json_500(make_client: Any, monkeypatch: Any) -> None:
    import app.service.routes.planning as planning

    def broken(request: Any) -> Any:
        raise RuntimeError("a bug")

    monkeypatch.setattr(planning, "solve_nic_queue", broken)
    client = make_client()
    r = client.post(
        "/queues/nic",
        json={
            "arrival_rates_pps": [1000.0],
            "service_rate_per_s": 2000.0,
            "buffer_packets": 8,
            "coalesce_packets": 2,
        },
    )
    assert r.status_code == 500
    assert r.headers["content-type"].startswith("application/problem+json")
    assert r.json()["type"] == "/problems/internal-error"
    assert r.json()["request_id"] == r.headers["x-request-id"]


def test_a_solver_that_does_not_converge_is_the_servers_fault() -> None:
    """A valid chain that no steady-state route solves is a 5xx, never blamed on the client."""
    import srn
    from app.schemas.problems import PROBLEM_TYPES, problem_from_exception

    attempt = srn.SolverAttempt(
        method="bicgstab", residual=1e-3, iterations=5000, seconds=1.0, note="stagnated"
    )
    problem = problem_from_exception(srn.ConvergenceError([attempt], 1e-10))
    assert problem is not None
    assert PROBLEM_TYPES[problem.slug].status == 500
    assert "bicgstab" in problem.detail and "best residual 0.001" in problem.detail


def test_range_errors_in_a_query_string_report_the_actual_value(
    client: TestClient, problem_of: Any
) -> None:
    # The query's number arrives as text; the problem still gives it as a number.
    r = client.get("/bottleneck-rate?cpu_tasks=2000&io_tasks=1&file_size=1MB&propagation_delay=0")
    error = problem_of(r, 422)["errors"][0]
    assert error["field"] == "query.cpu_tasks"
    assert (error["limit"], error["allowed"], error["actual"]) == ("maximum", 1000, 2000)
