"""Every problem names a field the client sent (issue #13).

``propagation_delay=1e308s`` was blamed on ``query.arrival_rate``, a quantity inside the
model that no client sends.  Here Hypothesis draws ``GET /bottleneck-rate`` queries over
every parameter, with values from ordinary to absurd (1e308, 1e-308, zero, negative,
unknown units), and checks that the answer is never a 5xx and that each ``errors`` entry
of a problem names one of the parameters in the query.
"""

from __future__ import annotations

import warnings
from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from app import Settings, create_app

with warnings.catch_warnings():
    warnings.filterwarnings("ignore", message=".*httpx2.*")
    from fastapi.testclient import TestClient

# Absurd magnitudes first: one_of draws its branches about evenly, so they come often.
EXTREMES = st.sampled_from(["1e308", "1e-308", "1e300", "1e400", "0", "-1", "9e15"])
NUMBERS = st.one_of(
    EXTREMES,
    st.integers(min_value=-3, max_value=70_000).map(str),
    st.floats(allow_nan=False, allow_infinity=False, width=64).map(repr),
    st.sampled_from(["1.5", "7", "2", "64", "0.0"]),
)
SMALL_INTS = st.one_of(
    st.integers(min_value=0, max_value=6).map(str),
    st.sampled_from(["-1", "1001", "1e3", "1.5", "x", "", "100000"]),
)
UNITS = {
    "file_size": ["", "B", "MB", "Mb", "GiB", "kB", "bytes", "XB", "mb", "s"],
    "propagation_delay": ["", "s", "ms", "h", "MS", "m"],
    "line_rate": ["", "bps", "Gbps", "GB/s", "gbps", "B"],
    "packet_payload": ["", "B", "kB", "b", "KiB", "MB", "x"],
}


def quantity(name: str) -> st.SearchStrategy[str]:
    return st.builds(lambda n, u: n + u, NUMBERS, st.sampled_from(UNITS[name]))


OPTIONAL: dict[str, st.SearchStrategy[str]] = {
    "profile": st.sampled_from(["sx280-2007", "nope", ""]),
    "cores": SMALL_INTS,
    "disks": SMALL_INTS,
    "mu_io_cpu": NUMBERS,
    "mu_disk": NUMBERS,
    "mu_net": NUMBERS,
    "buffer_packets": NUMBERS,
    "coalesce_packets": NUMBERS,
    "line_rate": quantity("line_rate"),
    "packet_payload": quantity("packet_payload"),
}


SANE = {"cpu_tasks": "2", "io_tasks": "1", "file_size": "500MB", "propagation_delay": "100ms"}
WILD: dict[str, st.SearchStrategy[str]] = {
    **OPTIONAL,
    "cpu_tasks": SMALL_INTS,
    "io_tasks": SMALL_INTS,
    "file_size": quantity("file_size"),
    "propagation_delay": quantity("propagation_delay"),
}


@st.composite
def queries(draw: st.DrawFn) -> dict[str, str]:
    """A sane query with one to four parameters set to drawn values (often absurd ones),
    so that most queries get past the first check and reach the model."""
    query = dict(SANE)
    chosen = draw(st.lists(st.sampled_from(sorted(WILD)), unique=True, min_size=1, max_size=4))
    for name in chosen:
        query[name] = draw(WILD[name])
    return query


@pytest.fixture(scope="module")
def client() -> Iterator[TestClient]:
    app = create_app(
        Settings(
            warm_up=False,
            log_level="error",
            solve_workers=1,
            max_states=60,
            max_queue_cells=200_000,
            # Everything in-process: the property is about naming, not the pool.
            inprocess_max_queue_work=1e12,
            inprocess_max_method_states=1_000,
        )
    )
    with TestClient(app) as c:
        yield c


def _check(client: TestClient, query: dict[str, str]) -> dict[str, Any] | None:
    response = client.get("/bottleneck-rate", params=query)
    assert response.status_code < 500, (query, response.text)
    if response.status_code < 400:
        return None
    assert response.headers["content-type"].startswith("application/problem+json")
    body: dict[str, Any] = response.json()
    sent = {f"query.{name}" for name in query}
    for entry in body["errors"]:
        assert entry["field"] in sent, (query, body)
    return body


@settings(
    max_examples=400,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(query=queries())
def test_problems_name_only_parameters_the_client_sent(
    client: TestClient, query: dict[str, str]
) -> None:
    _check(client, query)


@pytest.mark.parametrize(
    ("extra", "field"),
    [
        # The case: an absurd delay is the delay's fault, and says so.
        ({"propagation_delay": "1e308s"}, "query.propagation_delay"),
        ({"propagation_delay": "1e308"}, "query.propagation_delay"),
        ({"line_rate": "1e20bps"}, "query.line_rate"),
        ({"packet_payload": "1e9"}, "query.packet_payload"),
    ],
)
def test_out_of_range_quantities_blame_themselves(
    client: TestClient, extra: dict[str, str], field: str
) -> None:
    query = {"cpu_tasks": "2", "io_tasks": "1", "file_size": "500MB", "propagation_delay": "1s"}
    body = _check(client, {**query, **extra})
    assert body is not None
    assert [e["field"] for e in body["errors"]] == [field]


def test_a_failure_inside_the_model_names_no_field_it_was_not_sent(client: TestClient) -> None:
    # A batch larger than the profile's buffer is blamed on the batch the client sent,
    # never on the buffer it did not send.
    query = {"cpu_tasks": "2", "io_tasks": "1", "file_size": "500MB", "propagation_delay": "1s"}
    body = _check(client, {**query, "coalesce_packets": "100"})
    assert body is not None
    assert [e["field"] for e in body["errors"]] == ["query.coalesce_packets"]


@pytest.mark.parametrize("spelling", ["nan", "NaN", "-nan"])
def test_nan_is_refused_for_what_it_is(client: TestClient, spelling: str) -> None:
    # NaN fails every bound, and the reason was the first bound's ("should be less than
    # or equal to 1000000000000"), with that bound as the limit.
    query = {"cpu_tasks": "2", "io_tasks": "1", "file_size": "500MB", "propagation_delay": "1s"}
    body = _check(client, {**query, "mu_net": spelling})
    assert body is not None
    (error,) = body["errors"]
    assert error["field"] == "query.mu_net"
    assert error["reason"] == "Input should be a number, not NaN"
    assert "limit" not in error or error["limit"] is None


@pytest.mark.parametrize(
    ("path", "body", "field"),
    [
        (
            "/bottleneck-rate",
            {
                "workload": {"cpu_tasks": 1, "io_tasks": False},
                "transfer": {"file_size_bytes": 10**6, "propagation_delay_s": 0.01},
            },
            "body.workload.io_tasks",
        ),
        (
            "/bottleneck-rate",
            {
                "workload": {"cpu_tasks": True, "io_tasks": 0},
                "transfer": {"file_size_bytes": 10**6, "propagation_delay_s": 0.01},
            },
            "body.workload.cpu_tasks",
        ),
        (
            "/srn/solve",
            {
                "net": {
                    "places": {"q": 0},
                    "transitions": [{"name": "a", "rate": "lam", "outputs": {"q": 1}}],
                    "parameters": {"lam": True},
                }
            },
            "body.net.parameters.lam",
        ),
        (
            "/srn/solve",
            {"net": {"places": {"q": False}, "transitions": []}},
            "body.net.places.q",
        ),
    ],
)
def test_a_boolean_is_never_a_number(
    client: TestClient, path: str, body: dict[str, Any], field: str
) -> None:
    """Before: ``io_tasks: false`` was read as 0 (pydantic's lax mode)."""
    response = client.post(path, json=body)
    assert response.status_code == 422, response.text
    problem = response.json()
    reasons = {e["field"]: e["reason"] for e in problem["errors"]}
    assert reasons.get(field) == "Input should be a number, not true or false", reasons
