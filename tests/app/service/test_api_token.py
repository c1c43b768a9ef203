"""``BLASTRATE_API_TOKEN``: the routes that write or reveal the host need it; the model's
read-only routes do not.  Before, ``PUT``/``DELETE /profiles``, ``/srn/jobs`` and
``/host`` were open to anyone who could reach the port."""

from __future__ import annotations

import os
from typing import Any

import httpx
import pytest

from conftest import live_server
from host import host_profile

TOKEN = "api-test-token-0123456789"
PROFILE = {k: v for k, v in host_profile("sx280-2007").to_dict().items() if k not in {"name"}}
GUARDED = [
    ("PUT", "/profiles/token-lab", PROFILE),
    ("DELETE", "/profiles/token-lab", None),
    ("GET", "/host", None),
    ("GET", "/bottleneck-rate?workload=live&file_size=1MB&propagation_delay=10ms", None),
    ("POST", "/srn/jobs", {"net": {"places": {"q": 1}, "transitions": []}}),
    ("GET", "/srn/jobs/0123456789abcdef", None),
    ("DELETE", "/srn/jobs/0123456789abcdef", None),
]


def _call(client: Any, method: str, path: str, body: Any, token: str | None) -> Any:
    headers = {} if token is None else {"Authorization": f"Bearer {token}"}
    return client.request(method, path, json=body, headers=headers)


@pytest.mark.parametrize(("method", "path", "body"), GUARDED)
def test_guarded_routes_need_the_token(make_client, method: str, path: str, body: Any) -> None:
    client = make_client(api_token=TOKEN)
    for token, reason in ((None, "missing"), ("wrong-token", "wrong token")):
        r = _call(client, method, path, body, token)
        assert r.status_code == 401, r.text
        assert r.headers["www-authenticate"].startswith("Bearer")
        assert r.headers["content-type"].startswith("application/problem+json")
        assert r.json()["type"] == "/problems/unauthorized"
        assert r.json()["errors"] == [{"field": "header.authorization", "reason": reason}]
    assert _call(client, method, path, body, TOKEN).status_code != 401


def test_reads_of_the_model_stay_open(make_client) -> None:
    client = make_client(api_token=TOKEN)
    for path in (
        "/bottleneck-rate?cpu_tasks=1&io_tasks=0&file_size=1MB&propagation_delay=10ms",
        "/profiles",
        "/profiles/sx280-2007",
        "/healthz",
    ):
        assert client.get(path).status_code == 200, path


def test_without_a_token_nothing_is_guarded(make_client) -> None:
    client = make_client()
    assert client.get("/host").status_code != 401


def test_a_real_server_started_with_the_token_guards_writes() -> None:
    with live_server({"BLASTRATE_API_TOKEN": TOKEN}) as (base, _):
        r = httpx.put(base + "/profiles/token-live", json=PROFILE, timeout=30)
        assert r.status_code == 401, r.text
        r = httpx.put(
            base + "/profiles/token-live",
            json=PROFILE,
            headers={"Authorization": f"Bearer {TOKEN}"},
            timeout=30,
        )
        assert r.status_code == 201, r.text
        # The server wrote into the session's test database, never the user's.
        from host.store import ProfileStore

        store = ProfileStore(os.environ["BLASTRATE_DATABASE_URL"])
        assert store.entry("token-live").profile.name == "token-live"
        assert httpx.delete(base + "/profiles/token-live", timeout=30).status_code == 401
        r = httpx.delete(
            base + "/profiles/token-live",
            headers={"Authorization": f"Bearer {TOKEN}"},
            timeout=30,
        )
        assert r.status_code == 204


LIVE = "file_size=1MB&propagation_delay=10ms"
AROUND = [
    ("HEAD", "/host"),
    ("OPTIONS", "/host"),
    ("POST", "/host"),
    ("GET", "/host/"),
    ("GET", "/HOST"),
    ("GET", "/./host"),
    ("GET", "/%68ost"),
    ("GET", f"/host?token={TOKEN}"),
    ("GET", f"/host?authorization=Bearer%20{TOKEN}"),
    ("HEAD", f"/bottleneck-rate?workload=live&{LIVE}"),
    ("GET", f"/bottleneck-rate?workload=%6Cive&{LIVE}"),
    ("GET", f"/bottleneck-rate?workload=fixed&workload=live&{LIVE}"),
    ("GET", f"/bottleneck-rate?workload=live&workload=fixed&cpu_tasks=1&io_tasks=0&{LIVE}"),
    ("GET", f"/bottleneck-rate?workload=LIVE&{LIVE}"),
    ("GET", f"/bottleneck-rate?Workload=live&{LIVE}"),
    ("PUT", "/profiles/token-lab/"),
    ("DELETE", "/profiles/token-lab/"),
    ("GET", "/srn/jobs/0123456789abcdef/"),
    ("HEAD", "/srn/jobs/0123456789abcdef"),
]


@pytest.fixture(scope="module")
def guarded() -> Any:
    from fastapi.testclient import TestClient

    from app import Settings, create_app
    from conftest import TEST_SETTINGS

    with TestClient(create_app(Settings(**{**TEST_SETTINGS, "api_token": TOKEN}))) as client:
        yield client


@pytest.mark.parametrize(("method", "path"), AROUND)
@pytest.mark.parametrize("override", [None, "GET", "PUT", "DELETE"])
def test_no_way_around_the_token(guarded: Any, method: str, path: str, override: Any) -> None:
    """Issue #36: HEAD, a trailing slash, case, percent-encoding, a method override, the
    token in the query, a repeated ``workload``: none reaches a guarded route's work
    without the token.  Each is refused, or is not a route at all."""
    client = guarded
    headers = {} if override is None else {"X-HTTP-Method-Override": override}
    r = client.request(method, path, headers=headers, follow_redirects=True)
    assert r.status_code in (401, 404, 405, 422), (r.status_code, r.text[:200])


def test_no_way_around_the_token_of_a_real_server() -> None:
    """The same ways around, against ``uvicorn app.main:app`` as the service runs, and
    deep or huge bodies on every write route of that server."""
    deep = "[" * 100_000 + "]" * 100_000
    huge = '{"x": "' + "a" * 2_000_000 + '"}'
    auth = {"Authorization": f"Bearer {TOKEN}", "content-type": "application/json"}
    with (
        live_server({"BLASTRATE_API_TOKEN": TOKEN}) as (base, _),
        httpx.Client(base_url=base, timeout=30) as c,
    ):
        for method, path in AROUND:
            for override in (None, "GET", "DELETE"):
                headers = {} if override is None else {"X-HTTP-Method-Override": override}
                r = c.request(method, path, headers=headers)
                assert r.status_code in (401, 404, 405, 422), (method, path, r.status_code)
        paths = c.get("/openapi.json").json()["paths"]
        for path, ops in paths.items():
            for method in (m.upper() for m in ops if m in ("post", "put")):
                for body in (deep, huge):
                    url = path.replace("{name}", "deep-x")
                    r = c.request(method, url, content=body, headers=auth)
                    assert 400 <= r.status_code < 500, (method, path, r.status_code)
