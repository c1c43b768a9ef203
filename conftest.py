"""Set-up for every test: no test ever touches the user's real profile database.

(At the repository root, outside the doctest-collected folders: several ``conftest.py``
without packages would clash under ``--doctest-modules``.)

The session runs in a temporary directory of its own: ``TMPDIR`` points there (for this
process, pytest-xdist's workers and every process a test starts) and the session removes
it at its end, so that what a run's processes leave in the temp directory goes with it:
multiprocessing's ``pymp-*`` folders (removed by a process only when it exits
normally), Dask's ``dask-scratch-space``, pytest's own ``tmp_path`` folders.

``BLASTRATE_DATABASE_URL`` points at a SQLite file in a temporary directory for the
whole session, set before any test module is imported; tests that need a database of
their own pass an explicit URL.  ``BLASTRATE_NO_CALIBRATE`` keeps receivers from
calibrating their host at first start, except where a test asks for it.
"""

from __future__ import annotations

import os
import shutil
import tempfile

import pytest

_FOLDER: str | None = None
#: The session's temp directory (``TMPDIR``), made and removed by the controlling process
#: (with pytest-xdist, its workers inherit it and leave it alone).
_SESSION_TMP: str | None = None


def pytest_configure(config: pytest.Config) -> None:
    global _FOLDER, _SESSION_TMP
    if not os.environ.get("PYTEST_XDIST_WORKER"):
        _SESSION_TMP = tempfile.mkdtemp(prefix="blastrate-tests-")
        os.environ["TMPDIR"] = _SESSION_TMP
        tempfile.tempdir = None  # gettempdir() reads TMPDIR again
    _FOLDER = tempfile.mkdtemp(prefix="blastrate-test-db-")
    os.environ["BLASTRATE_DATABASE_URL"] = f"sqlite:///{_FOLDER}/blastrate.db"
    # A receiver on a host without a profile measures one at its first start (a few
    # seconds of loopback blasts beside the test's own transfer): off for the suite,
    # on in the tests of that calibration (tests/app/commands/test_receiver_advice.py).
    os.environ["BLASTRATE_NO_CALIBRATE"] = "1"
    config.addinivalue_line(
        "markers", "long: one of the suite's longest tests, started first (see below)"
    )


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    # The longest tests (15-55 s each beside the others) first: pytest-xdist hands tests
    # out in this order, so none of them starts last and holds the run up while the
    # other workers are idle.  The sort is stable: the rest keep their order.
    items.sort(key=lambda item: item.get_closest_marker("long") is None)


def pytest_unconfigure(config: pytest.Config) -> None:
    if _FOLDER is not None:
        shutil.rmtree(_FOLDER, ignore_errors=True)
    if _SESSION_TMP is not None:
        # After multiprocessing's own exit clean-up, which removes this process's pymp-*
        # folder in it (removing the folder first made that clean-up raise at exit).
        from multiprocessing import util

        util.Finalize(
            None,
            shutil.rmtree,
            args=(_SESSION_TMP,),
            kwargs={"ignore_errors": True},
            exitpriority=-200,
        )


#: The PostgreSQL server that ``scripts/test`` starts (from Debian's packages), or None.
POSTGRES_URL = os.environ.get("BLASTRATE_TEST_DATABASE_URL")
_STORE_TABLES = ("srn_jobs", "host_profiles", "host_default")


@pytest.fixture(scope="session")
def postgres_url(worker_id: str) -> str | None:
    """The PostgreSQL database of this pytest-xdist worker: ``BLASTRATE_TEST_DATABASE_URL``
    itself without xdist, else a database ``<its name>_<worker>`` on the same server,
    created here, so that two workers never drop each other's tables."""
    if not POSTGRES_URL or worker_id == "master":
        return POSTGRES_URL
    import sqlalchemy as sa

    url = sa.make_url(POSTGRES_URL)
    name = f"{url.database}_{worker_id}"
    engine = sa.create_engine(url, isolation_level="AUTOCOMMIT")
    with engine.connect() as conn:
        exists = conn.execute(
            sa.text("SELECT 1 FROM pg_database WHERE datname = :name"), {"name": name}
        ).first()
        if exists is None:
            conn.execute(sa.text(f'CREATE DATABASE "{name}"'))
    engine.dispose()
    return url.set(database=name).render_as_string(hide_password=False)


@pytest.fixture(params=["sqlite", "postgresql"])
def store_url(
    request: pytest.FixtureRequest,
    tmp_path_factory: pytest.TempPathFactory,
    postgres_url: str | None,
) -> str:
    """A fresh, empty database for a store test, once on each backend as deployed: an
    SQLite file, and the PostgreSQL server of ``BLASTRATE_TEST_DATABASE_URL`` (a database
    of this xdist worker's own: :func:`postgres_url`) with the stores' tables dropped
    first (its advisory locks run only there)."""
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path_factory.mktemp('store') / 'store.db'}"
    if not postgres_url:
        pytest.skip(
            "no PostgreSQL server: scripts/test starts one as root from Debian's packages, "
            "or set BLASTRATE_TEST_DATABASE_URL"
        )
    import sqlalchemy as sa

    engine = sa.create_engine(postgres_url)
    with engine.begin() as conn:
        for table in _STORE_TABLES:
            conn.execute(sa.text(f"DROP TABLE IF EXISTS {table}"))
    engine.dispose()
    return postgres_url
