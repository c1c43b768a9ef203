"""REST profiles: stored beside the built-ins, used by every computation, never stale."""

from __future__ import annotations

import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from host import host_profile

SX = host_profile("sx280-2007").to_dict()
FIELDS = {k: v for k, v in SX.items() if k != "name"}
QUERY = {"cpu_tasks": 2, "io_tasks": 1, "file_size": "500MB", "propagation_delay": "100ms"}


@pytest.fixture
def api(make_client: Callable[..., TestClient], tmp_path: Path) -> TestClient:
    return make_client(database_url=f"sqlite:///{tmp_path / 'profiles.db'}")


def test_list_has_the_builtins(api: TestClient) -> None:
    body = api.get("/profiles").json()
    assert body["default"] == "sx280-2007"
    assert body["profiles"] == [{**SX, "built_in": True}]


def test_put_get_replace_delete(api: TestClient, problem_of: Any) -> None:
    values = {**FIELDS, "mu_net": 83_200.0, "provenance": {"host": "rx-7", "spread": 0.02}}
    created = api.put("/profiles/lab-1", json=values)
    assert created.status_code == 201, created.text
    assert created.headers["location"] == "/profiles/lab-1"
    got = api.get("/profiles/lab-1").json()
    assert got["mu_net"] == 83_200.0 and got["built_in"] is False
    assert got["provenance"] == {"host": "rx-7", "spread": 0.02}
    assert "updated_at" in got
    replaced = api.put("/profiles/lab-1", json={**FIELDS, "mu_disk": 2_000.0})
    assert replaced.status_code == 200
    again = api.get("/profiles/lab-1").json()
    assert (again["mu_disk"], again["mu_net"]) == (2_000.0, 41_600.0)
    assert "provenance" not in again
    assert [p["name"] for p in api.get("/profiles").json()["profiles"]] == ["sx280-2007", "lab-1"]
    assert api.delete("/profiles/lab-1").status_code == 204
    problem_of(api.get("/profiles/lab-1"), 404)
    problem_of(api.delete("/profiles/lab-1"), 404)


def test_builtins_are_refused(api: TestClient, problem_of: Any) -> None:
    put = problem_of(api.put("/profiles/sx280-2007", json={**FIELDS, "mu_net": 1.0}), 409)
    assert put["type"] == "/problems/profile-read-only"
    assert put["errors"][0]["field"] == "path.name"
    problem_of(api.delete("/profiles/sx280-2007"), 409)
    assert api.get("/profiles/sx280-2007").json()["mu_net"] == 41_600.0


def test_invalid_profiles_name_the_field(api: TestClient, problem_of: Any) -> None:
    bad = problem_of(api.put("/profiles/x", json={**FIELDS, "coalesce_packets": 65}), 422)
    assert bad["errors"][0]["field"] == "body.coalesce_packets"
    name = problem_of(api.put("/profiles/bad name!", json=FIELDS), 422)
    assert name["errors"][0]["field"] == "path.name"
    other = problem_of(api.put("/profiles/a", json={**FIELDS, "name": "b"}), 422)
    assert other["errors"][0]["field"] == "body.name"
    missing = problem_of(api.put("/profiles/a", json={"mu_net": 1.0}), 422)
    assert {e["field"] for e in missing["errors"]} >= {"body.mu_disk", "body.buffer_packets"}
    unknown = problem_of(api.put("/profiles/a", json={**FIELDS, "colour": "red"}), 422)
    assert unknown["errors"][0]["field"] == "body.colour"


def test_stored_profile_drives_the_bottleneck_rate(api: TestClient) -> None:
    # Independent path: the same values given as overrides of the built-in profile.
    api.put("/profiles/fast", json={**FIELDS, "mu_net": 83_200.0, "buffer_packets": 128})
    stored = api.get("/bottleneck-rate", params={**QUERY, "profile": "fast"}).json()
    override = api.get(
        "/bottleneck-rate", params={**QUERY, "mu_net": 83_200.0, "buffer_packets": 128}
    ).json()
    assert stored["inputs"]["host"]["profile"] == "fast"
    for key in ("effective_bottleneck_rate_bps", "transfer_time_s", "interrupt_service_rate_per_s"):
        assert stored[key] == override[key]
    service = api.post(
        "/workloads/service-time",
        json={"workload": {"cpu_tasks": 1, "io_tasks": 0}, "host": {"profile": "fast"}},
    ).json()
    # SPEC section 2 check: C = 1, I = 0, m = 1 gives mu = mu_net / 2.
    assert service["rate_per_s"] == pytest.approx(83_200.0 / 2, rel=1e-9)


def test_a_put_is_never_answered_from_the_cache(api: TestClient) -> None:
    params = {**QUERY, "profile": "lab"}
    api.put("/profiles/lab", json=FIELDS)
    first = api.get("/bottleneck-rate", params=params)
    repeat = api.get("/bottleneck-rate", params=params)
    assert repeat.headers["x-cache"] == "hit"
    api.put("/profiles/lab", json={**FIELDS, "mu_net": 4 * 41_600.0})
    after = api.get("/bottleneck-rate", params=params)
    assert after.headers["x-cache"] == "miss"
    assert after.headers["etag"] != first.headers["etag"]
    expected = api.get("/bottleneck-rate", params={**QUERY, "mu_net": 4 * 41_600.0}).json()
    assert after.json()["interrupt_service_rate_per_s"] == expected["interrupt_service_rate_per_s"]
    api.delete("/profiles/lab")
    gone = api.get("/bottleneck-rate", params=params)
    assert gone.status_code == 422
    assert gone.json()["errors"][0]["field"] == "query.profile"


def test_unknown_profile_in_a_post_names_the_field(api: TestClient, problem_of: Any) -> None:
    body = {"workload": {"cpu_tasks": 1, "io_tasks": 0}, "host": {"profile": "nope"}}
    problem = problem_of(api.post("/workloads/service-time", json=body), 422)
    assert problem["errors"][0]["field"] == "body.host.profile"


def test_database_down_is_a_503(make_client: Callable[..., TestClient], problem_of: Any) -> None:
    client = make_client(database_url="sqlite:////nonexistent-dir/for/sure/p.db")
    # Built-ins never need the database.
    assert client.get("/profiles/sx280-2007").status_code == 200
    down = problem_of(client.get("/profiles/lab"), 503)
    assert down["type"] == "/problems/storage-unavailable"
    assert client.get("/profiles/lab").headers["retry-after"] == "5"
    problem_of(client.get("/bottleneck-rate", params={**QUERY, "profile": "lab"}), 503)


def test_put_racing_delete_answers_what_it_stored(api: TestClient) -> None:
    # Two writers and two deleters on one name.  A PUT used to read its row outside any
    # transaction, so a DELETE in between made the write a 503 (StaleDataError), and the
    # reply, read back after the write, could be a 422 "unknown profile" or show the
    # other writer's values.  Now every PUT is 200/201 with its own values.
    statuses: list[int] = []
    wrong: list[dict[str, Any]] = []

    def writer(mu_net: float) -> None:
        for _ in range(40):
            response = api.put("/profiles/raced", json={**FIELDS, "mu_net": mu_net})
            statuses.append(response.status_code)
            if response.status_code < 300 and response.json()["mu_net"] != mu_net:
                wrong.append(response.json())

    def deleter() -> None:
        for _ in range(40):
            statuses.append(api.delete("/profiles/raced").status_code)

    threads = [
        threading.Thread(target=f, args=a)
        for f, a in ((writer, (50_000.0,)), (writer, (60_000.0,)), (deleter, ()), (deleter, ()))
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert wrong == []
    assert set(statuses) <= {200, 201, 204, 404}, sorted(set(statuses))
    assert len(statuses) == 160


def test_a_request_naming_no_profile_uses_this_hosts_default(
    api: TestClient, tmp_path: Path
) -> None:
    # Issue #21: `blastrate calibrate` makes its profile the host default, and the
    # service answers with it when a request names none; a named profile always wins.
    from host.store import ProfileStore

    store = ProfileStore(f"sqlite:///{tmp_path / 'profiles.db'}")
    assert api.put("/profiles/lab-1", json={**FIELDS, "mu_net": 20_000.0}).status_code == 201

    def used(query: dict[str, Any]) -> tuple[str, float]:
        host = api.get("/bottleneck-rate", params=query).json()["inputs"]["host"]
        return host["profile"], host["mu_net"]

    assert used(QUERY) == ("sx280-2007", 41_600.0)  # no default set: the paper's host
    store.set_default("lab-1")
    assert api.get("/profiles").json()["default"] == "lab-1"
    assert used(QUERY) == ("lab-1", 20_000.0)  # the same query string, not a stale answer
    assert used({**QUERY, "profile": "sx280-2007"}) == ("sx280-2007", 41_600.0)
    body = {
        "workload": {"cpu_tasks": 2, "io_tasks": 1},
        "transfer": {"file_size_bytes": 500e6, "propagation_delay_s": 0.1},
    }
    posted = api.post("/bottleneck-rate", json=body).json()["inputs"]["host"]
    assert (posted["profile"], posted["mu_net"]) == ("lab-1", 20_000.0)
    store.set_default(None)
    assert used(QUERY) == ("sx280-2007", 41_600.0)
    assert api.get("/profiles").json()["default"] == "sx280-2007"


def test_the_host_default_is_not_read_from_the_database_on_every_request(
    api: TestClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A read in a thread per request took a cached answer from 0.21 to 0.90 ms at p50
    # (benchmarks/service_latency.py): the name is trusted for DEFAULT_NAME_TTL_S.
    from host.store import ProfileStore

    reads: list[str | None] = []
    real = ProfileStore.default_name

    def counted(self: ProfileStore) -> str | None:
        reads.append(name := real(self))
        return name

    monkeypatch.setattr(ProfileStore, "default_name", counted)
    # Five requests may take longer than the 1 s TTL on a busy machine (CI once read the
    # name twice): a long TTL tests the cache, not the machine's speed.
    monkeypatch.setattr("app.service.stored_profiles.DEFAULT_NAME_TTL_S", 3600.0)
    for _ in range(5):
        assert api.get("/bottleneck-rate", params=QUERY).status_code == 200
    assert len(reads) <= 1
