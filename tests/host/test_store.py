"""ProfileStore: round trips through a temporary SQLite database, built-ins read-only."""

from __future__ import annotations

import os
import threading
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from host import HOST_PROFILES, HostProfile, WorkloadError, host_profile
from host.store import (
    MAX_PROVENANCE_BYTES,
    ProfileStore,
    ProfileStoreError,
    StoredProfile,
    database_url,
)


@pytest.fixture
def url(store_url: str) -> str:
    """A fresh database on each backend (the root conftest's ``store_url``)."""
    return store_url


def lab(name: str = "lab-1", **changes: float) -> HostProfile:
    return host_profile("sx280-2007").replace(name=name, **changes)


def in_threads(work: Callable[[int], object], count: int) -> list[BaseException]:
    """Run ``work(0) ... work(count - 1)`` in as many threads at once; what they raised."""
    errors: list[BaseException] = []

    def run(i: int) -> None:
        try:
            work(i)
        except BaseException as exc:  # returned to the test, which asserts on it
            errors.append(exc)

    threads = [threading.Thread(target=run, args=(i,)) for i in range(count)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return errors


def test_round_trip_keeps_every_value_and_provenance(url: str) -> None:
    store = ProfileStore(url)
    profile = lab(mu_net=52_345.5, buffer_packets=512, coalesce_packets=32)
    provenance = {"host": "rx-7", "date": "2026-11-23", "spread": {"mu_net": 0.031}}
    assert store.put(profile, provenance=provenance) is True
    # A second store on the same file (another process would see the same) reads it back.
    again = ProfileStore(url)
    assert again.get("lab-1") == profile
    entry = again.entry("lab-1")
    assert entry.provenance == provenance
    assert not entry.built_in
    assert entry.updated_at is not None
    assert abs((datetime.now(UTC) - entry.updated_at).total_seconds()) < 60


def test_put_replaces_and_reports_created(url: str) -> None:
    store = ProfileStore(url)
    assert store.put(lab(mu_disk=900.0)) is True
    assert store.put(lab(mu_disk=1_200.0), provenance={"v": 2}) is False
    assert store.get("lab-1").mu_disk == 1_200.0
    assert store.provenance("lab-1") == {"v": 2}
    assert [p.name for p in store.list()] == [*sorted(HOST_PROFILES), "lab-1"]


def test_list_is_builtins_then_stored_by_name(url: str) -> None:
    store = ProfileStore(url)
    for name in ("zeta", "alpha", "mid"):
        store.put(lab(name))
    assert [p.name for p in store.list()] == [*sorted(HOST_PROFILES), "alpha", "mid", "zeta"]


def test_builtins_are_read_only(url: str) -> None:
    store = ProfileStore(url)
    assert store.get("sx280-2007") is HOST_PROFILES["sx280-2007"]
    assert store.entry("sx280-2007").built_in
    with pytest.raises(WorkloadError) as put:
        store.put(lab("sx280-2007", mu_net=1.0))
    assert put.value.field == "name"
    with pytest.raises(WorkloadError) as gone:
        store.delete("sx280-2007")
    assert gone.value.field == "name"
    assert store.get("sx280-2007").mu_net == 41_600.0


def test_unknown_name_is_a_profile_error(url: str) -> None:
    store = ProfileStore(url)
    store.put(lab("known"))
    with pytest.raises(WorkloadError) as err:
        store.get("nope")
    assert err.value.field == "profile"
    assert "known" in str(err.value)
    assert store.delete("nope") is False


def test_delete_removes(url: str) -> None:
    store = ProfileStore(url)
    store.put(lab())
    assert store.delete("lab-1") is True
    with pytest.raises(WorkloadError):
        store.get("lab-1")


def test_deleting_the_default_clears_it_for_good(url: str) -> None:
    # Found by a new user's trial: the default row outlived its profile, so a later
    # profile of the same name became the default unasked.
    store = ProfileStore(url)
    store.put(lab())
    store.set_default("lab-1")
    store.delete("lab-1")
    assert store.default_name() is None
    store.put(lab())
    assert store.default_name() is None
    assert store.default_entry().profile.name == "sx280-2007"


def test_provenance_must_be_a_small_json_object(url: str) -> None:
    store = ProfileStore(url)
    with pytest.raises(WorkloadError) as kind:
        store.put(lab(), provenance=[1, 2])  # type: ignore[arg-type]
    assert kind.value.field == "provenance"
    with pytest.raises(WorkloadError) as nan:
        store.put(lab(), provenance={"x": float("nan")})
    assert nan.value.field == "provenance"
    with pytest.raises(WorkloadError) as big:
        store.put(lab(), provenance={"x": "a" * MAX_PROVENANCE_BYTES})
    assert big.value.limit == "max_provenance_bytes"
    # Nothing was stored by the refused puts.
    with pytest.raises(WorkloadError):
        store.get("lab-1")


def test_builtin_lookup_never_opens_the_database(tmp_path: Path) -> None:
    missing = tmp_path / "no" / "such" / "dir" / "p.db"
    store = ProfileStore(f"sqlite:///{missing}")
    assert store.get("sx280-2007").name == "sx280-2007"
    assert not missing.parent.exists()
    # A stored name needs the database, which cannot be opened there: a store error,
    # not a profile error (the server's fault, not the client's).
    with pytest.raises(ProfileStoreError):
        store.get("lab-1")


def test_in_memory_database_is_shared_by_threads() -> None:
    store = ProfileStore("sqlite://")
    store.put(lab("mem"))
    found: list[float] = []
    worker = threading.Thread(target=lambda: found.append(store.get("mem").mu_net))
    worker.start()
    worker.join()
    assert found == [41_600.0]


def test_in_memory_database_takes_concurrent_writers() -> None:
    # Four threads writing and reading at once.  With the one connection lent to every
    # thread at the same time (StaticPool), this raised OperationalError or crashed the
    # interpreter inside sqlite3; the CI fuzz run met it as a 503 from POST /srn/jobs.
    store = ProfileStore("sqlite://")

    def writer(k: int) -> None:
        for i in range(60):
            store.put(lab(f"t{k}-{i}", mu_net=1000.0 + i))
            assert store.get(f"t{k}-{i}").mu_net == 1000.0 + i
            store.list()

    assert in_threads(writer, 4) == []
    assert len(store.list()) == len(HOST_PROFILES) + 4 * 60


def test_put_entry_is_what_was_stored_even_while_another_thread_deletes(url: str) -> None:
    # The read of the row and the write are one transaction (BEGIN IMMEDIATE on
    # SQLite), so a delete cannot fall in between and fail the write (StaleDataError).
    store = ProfileStore(url)
    entries: list[StoredProfile] = []

    def work(i: int) -> None:
        for j in range(40):
            if i % 2:
                store.delete("raced")
            else:
                entry, _ = store.put_entry(
                    lab("raced", mu_net=1000.0 * (i + 1) + j), provenance={"i": i, "j": j}
                )
                assert entry.profile.mu_net == 1000.0 * (i + 1) + j
                assert entry.provenance == {"i": i, "j": j}
                entries.append(entry)

    assert in_threads(work, 4) == []
    assert len(entries) == 80
    last, _ = store.put_entry(lab("raced", mu_net=7.0), provenance={"k": [1, 2]})
    # Against a read-back: what put_entry returns is exactly what a reader sees.
    assert store.entry("raced") == last and last.profile.mu_net == 7.0


def test_tests_never_use_the_user_database() -> None:
    # Set for the whole session by the repository's conftest.py.
    url = os.environ["BLASTRATE_DATABASE_URL"]
    assert url.startswith("sqlite:///") and "blastrate-test-db-" in url


def test_url_comes_from_the_environment(monkeypatch: pytest.MonkeyPatch, url: str) -> None:
    monkeypatch.setenv("BLASTRATE_DATABASE_URL", url)
    assert database_url() == url
    assert database_url("sqlite://") == "sqlite://"
    ProfileStore().put(lab("from-env"))
    assert ProfileStore(url).get("from-env").name == "from-env"


def test_concurrent_puts_of_one_name_leave_one_row(url: str) -> None:
    store = ProfileStore(url)
    store.get("sx280-2007")
    assert in_threads(lambda i: store.put(lab("shared", mu_net=40_000.0 + i)), 8) == []
    names = [p.name for p in store.list()]
    assert names.count("shared") == 1
    assert 40_000.0 <= store.get("shared").mu_net <= 40_007.0


@settings(max_examples=25, deadline=None)
@given(
    mu=st.floats(1e-6, 1e12, allow_nan=False),
    k=st.integers(1, 4096),
    payload=st.integers(1, 65_535),
    line=st.floats(1.0, 1e15),
)
def test_any_valid_profile_round_trips_exactly(
    tmp_path_factory: pytest.TempPathFactory, mu: float, k: int, payload: int, line: float
) -> None:
    folder = tmp_path_factory.mktemp("rt")
    store = ProfileStore(f"sqlite:///{folder / 'p.db'}")
    profile = lab(
        "prop",
        mu_io_cpu=mu,
        mu_disk=mu,
        mu_net=mu,
        buffer_packets=k,
        coalesce_packets=max(1, k // 2),
        line_rate_bps=line,
        packet_payload_bytes=payload,
    )
    store.put(profile)
    assert ProfileStore(store.url).get("prop") == profile
    store.close()


def test_the_host_default_is_set_followed_and_forgotten_with_its_profile(url: str) -> None:
    store = ProfileStore(url)
    assert store.default_name() is None
    assert store.default_entry().profile.name == "sx280-2007"  # the paper's, built in
    store.put(lab("lab-1"), provenance={"time_slice_s": 0.003})
    store.set_default("lab-1")
    # A second store on the same database (another process) sees it.
    other = ProfileStore(url)
    assert other.default_name() == "lab-1"
    assert other.default_entry().provenance == {"time_slice_s": 0.003}
    store.delete("lab-1")
    assert other.default_name() is None
    assert other.default_entry().profile.name == "sx280-2007"


def test_the_host_default_must_exist(url: str) -> None:
    store = ProfileStore(url)
    with pytest.raises(WorkloadError) as err:
        store.set_default("no-such-profile")
    assert err.value.field == "profile"
    store.set_default("sx280-2007")  # a built-in may be the default
    assert store.default_name() == "sx280-2007"
    store.set_default(None)
    assert store.default_name() is None
