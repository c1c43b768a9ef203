"""host.default_profile: the host default read without SQLAlchemy gives what the store
gives whenever it answers, and leaves every other case to the store."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from host import HOST_PROFILES, host_profile
from host.default_profile import DATABASE_URL_ENV, built_in_default
from host.store import ProfileStore

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def sqlite_url(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    url = f"sqlite:///{tmp_path / 'profiles.db'}"
    monkeypatch.setenv(DATABASE_URL_ENV, url)
    return url


def test_no_default_set_is_the_papers_profile(sqlite_url: str) -> None:
    store = ProfileStore(sqlite_url)
    store.list()  # creates the tables
    assert built_in_default() == store.default_entry().profile == HOST_PROFILES["sx280-2007"]


def test_a_built_in_default_is_read_and_a_stored_one_left_to_the_store(sqlite_url: str) -> None:
    store = ProfileStore(sqlite_url)
    store.set_default("sx280-2007")  # a built-in set as the default
    assert built_in_default() == store.default_entry().profile == HOST_PROFILES["sx280-2007"]
    store.put(host_profile("sx280-2007").replace(name="lab-1", mu_net=50_000.0))
    store.set_default("lab-1")
    assert built_in_default() is None  # a stored profile: the store reads it
    store.delete("lab-1")  # the default goes with it
    assert built_in_default() == store.default_entry().profile == HOST_PROFILES["sx280-2007"]


def test_a_file_not_yet_created_is_left_to_the_store(sqlite_url: str, tmp_path: Path) -> None:
    assert built_in_default() is None
    assert not (tmp_path / "profiles.db").exists()  # not created by the quick look


@pytest.mark.parametrize(
    "url",
    ["sqlite://", "sqlite:///:memory:", "postgresql+psycopg://user@db/blastrate",
     "sqlite+pysqlite:///x.db", "sqlite:///x.db?mode=ro"],
)  # fmt: skip
def test_other_databases_are_left_to_the_store(url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(DATABASE_URL_ENV, url)
    assert built_in_default() is None


def test_a_file_without_the_tables_is_left_to_the_store(sqlite_url: str, tmp_path: Path) -> None:
    (tmp_path / "profiles.db").write_bytes(b"")
    assert built_in_default() is None
    (tmp_path / "profiles.db").write_bytes(b"not a database at all" * 100)
    assert built_in_default() is None


def test_rate_with_the_host_default_loads_neither_sqlalchemy_nor_the_plots(
    sqlite_url: str,
) -> None:
    """The command line's process (the computation runs in a forked child) imports no
    SQLAlchemy when the default is a built-in profile, no matplotlib, httpx or advice."""
    ProfileStore(sqlite_url).list()
    code = (
        "import sys\n"
        "from app.commands import main\n"
        "status = main(['rate', '-C', '2', '-I', '1', '--file-size', '500MB', '--delay',"
        " '100ms'], standalone_mode=False)\n"
        "heavy = [m for m in ('sqlalchemy', 'matplotlib', 'httpx', 'datamover.advice',"
        " 'scipy.optimize') if m in sys.modules]\n"
        "print(status, heavy)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip().splitlines()[-1] == "0 []"
