"""A fuzzer for the odd forms a number takes, on every operation of the contract, in
process and against a real server (issue #36).

Schemathesis (``test_fuzz.py``) draws values from the schema, and a schema says
"string" or "number": it did not find that ``cpu_tasks=²`` or 10,000 nines answered 500,
nor that a net with rates 1e160 and 1e-160 did.  Here every query parameter of every GET
and every number in every POST or PUT body of the contract's examples is replaced, one at
a time, by an odd value: thousands of digits, digits of other scripts, ``nan``, ±1e300,
``-0``, booleans, rates many decades apart.  Every answer must be below 500, and a 4xx a
problem+json.

Bounded and repeatable in CI: a fixed seed (``derandomize``) and
``BLASTRATE_FUZZ_EXAMPLES`` examples per operation (default 30; a nightly run sets, say,
2000 and ``BLASTRATE_FUZZ_SEED`` to vary the draw).
"""

from __future__ import annotations

import copy
import json
import os
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from hypothesis import HealthCheck, given, seed, settings
from hypothesis import strategies as st

from app.service.contract import CONTRACT_PATH
from conftest import live_server

EXAMPLES = int(os.environ.get("BLASTRATE_FUZZ_EXAMPLES", "30"))
SEED = int(os.environ.get("BLASTRATE_FUZZ_SEED", "36"))
CONTRACT = json.loads(CONTRACT_PATH.read_text())
#: A valid query for the routes that take GET /bottleneck-rate's parameters.
BASE_QUERY = {"cpu_tasks": "1", "io_tasks": "0", "file_size": "1MB", "propagation_delay": "10ms"}
PATH_VALUES = {"name": "fuzz-lab", "job_id": "0123456789abcdef", "slug": "not-found"}

#: Text a number may arrive as in a query string.
ODD_TEXT = st.one_of(
    st.sampled_from(
        [
            *("9" * 10_000, "nan", "-inf", "infinity", "1e999", "-0", "0x10", "1_000", "true"),
            *("", " ", "1e-99999", "²", "①", "٣", "１", "0..9" * 600, "1,2," * 700, "..", ":"),
        ]
    ),
    st.text(st.characters(categories=("Nd", "No")), min_size=1, max_size=6),
    st.integers(min_value=10**300, max_value=10**400).map(str),
    st.floats().map(repr),
)
#: Values a number may arrive as in a JSON body.
ODD_JSON = st.one_of(
    st.booleans(),
    st.integers(min_value=-(10**400), max_value=10**400),
    st.floats(allow_nan=False, allow_infinity=False),
    st.sampled_from([1e308, -1e308, 5e-324, -0.0, 1e160, 1e-160, 1e-300, 1e300]),
    ODD_TEXT,
    st.lists(st.integers(), max_size=2),
)


def _operations() -> Iterator[tuple[str, str, dict[str, Any]]]:
    for path, ops in CONTRACT["paths"].items():
        for method, op in ops.items():
            if path in ("/metrics",):
                continue
            yield method.upper(), path, op


def _example_body(op: dict[str, Any]) -> Any:
    body = op.get("requestBody")
    if not body:
        return None
    schema = body["content"]["application/json"]["schema"]
    name = schema["$ref"].rsplit("/", 1)[-1]
    return CONTRACT["components"]["schemas"][name]["examples"][0]


def _number_leaves(value: Any, at: tuple[Any, ...] = ()) -> Iterator[tuple[Any, ...]]:
    """Paths to every number (or numeric-looking string) in a JSON value."""
    if isinstance(value, dict):
        for k, v in value.items():
            yield from _number_leaves(v, (*at, k))
    elif isinstance(value, list):
        for i, v in enumerate(value):
            yield from _number_leaves(v, (*at, i))
    elif (isinstance(value, int | float) and not isinstance(value, bool)) or (
        isinstance(value, str) and value[:1].isdigit()
    ):
        yield at


def _replaced(body: Any, at: tuple[Any, ...], new: Any) -> Any:
    out = copy.deepcopy(body)
    target = out
    for key in at[:-1]:
        target = target[key]
    target[at[-1]] = new
    return out


GETS = [
    (m, p, op)
    for m, p, op in _operations()
    if m == "GET" and any(x["in"] == "query" for x in op.get("parameters", []))
]
WRITES = [(m, p, op) for m, p, op in _operations() if _example_body(op) is not None]


def _url(path: str) -> str:
    for key, value in PATH_VALUES.items():
        path = path.replace("{" + key + "}", value)
    return path


def _check(response: httpx.Response, what: str) -> None:
    assert response.status_code < 500, (what, response.status_code, response.text[:300])
    if response.status_code >= 400:
        assert response.headers["content-type"].startswith("application/problem+json"), what


def _fuzz_query(send: Any, path: str, op: dict[str, Any], data: st.DataObject) -> None:
    names = [x["name"] for x in op["parameters"] if x["in"] == "query"]
    name = data.draw(st.sampled_from(names), label="parameter")
    value = data.draw(ODD_TEXT, label="value")
    query = {**BASE_QUERY, name: value}
    if "grid" in path or path.endswith("/sweep"):
        query.setdefault("io_tasks", "0,1")
    _check(send("GET", _url(path), params=query), f"GET {path}?{name}={value[:40]!r}")


def _fuzz_body(send: Any, method: str, path: str, op: dict[str, Any], data: st.DataObject) -> None:
    body = _example_body(op)
    leaves = list(_number_leaves(body))
    assert leaves, f"{method} {path}'s example has no number to replace"
    at = data.draw(st.sampled_from(leaves), label="leaf")
    value = data.draw(ODD_JSON, label="value")
    try:
        content = json.dumps(_replaced(body, at, value))
    except ValueError:  # an integer too long for the encoder: send it as text
        content = json.dumps(_replaced(body, at, "0")).replace('"0"', str(value), 1)
    response = send(
        method, _url(path), content=content, headers={"content-type": "application/json"}
    )
    _check(response, f"{method} {path} {at}={str(value)[:40]}")


def _settings(examples: int) -> Any:
    return settings(
        max_examples=examples,
        deadline=None,
        derandomize=SEED == 36,
        suppress_health_check=list(HealthCheck),
    )


@pytest.mark.parametrize(("method", "path", "op"), GETS, ids=[p for _, p, _ in GETS])
def test_odd_numbers_in_queries_in_process(client: Any, method: str, path: str, op: Any) -> None:
    @_settings(EXAMPLES)
    @seed(SEED)
    @given(data=st.data())
    def run(data: st.DataObject) -> None:
        _fuzz_query(client.request, path, op, data)

    run()


@pytest.mark.parametrize(("method", "path", "op"), WRITES, ids=[f"{m} {p}" for m, p, _ in WRITES])
def test_odd_numbers_in_bodies_in_process(client: Any, method: str, path: str, op: Any) -> None:
    @_settings(EXAMPLES)
    @seed(SEED)
    @given(data=st.data())
    def run(data: st.DataObject) -> None:
        _fuzz_body(client.request, method, path, op, data)

    run()


@pytest.fixture(scope="module")
def server() -> Iterator[httpx.Client]:
    """``uvicorn app.main:app`` as the service runs, with small limits so that a drawn
    value never starts a long computation."""
    env = {
        "BLASTRATE_MAX_STATES": "2000",
        "BLASTRATE_SWEEP_MAX_POINTS": "12",
        "BLASTRATE_PLOT_MAX_POINTS": "12",
        "BLASTRATE_PROBE_ENABLED": "false",
        "BLASTRATE_DATABASE_URL": "sqlite://",
    }
    with live_server(env) as (base, _), httpx.Client(base_url=base, timeout=60) as c:
        yield c


def _against(server: httpx.Client, method: str, path: str, op: Any) -> None:
    @_settings(max(5, EXAMPLES // 3))
    @seed(SEED)
    @given(data=st.data())
    def run(data: st.DataObject) -> None:
        if method == "GET":
            _fuzz_query(server.request, path, op, data)
        else:
            _fuzz_body(server.request, method, path, op, data)

    run()


def test_odd_numbers_against_a_real_server(server: httpx.Client) -> None:
    # A third of the examples per operation, every operation in one test: the server
    # starts once.
    for method, path, op in GETS + WRITES:
        _against(server, method, path, op)
