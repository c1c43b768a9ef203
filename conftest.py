"""Set-up for every test: no test ever touches the user's real profile database.

(At the repository root, outside the doctest-collected folders: several ``conftest.py``
without packages would clash under ``--doctest-modules``.)

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


def pytest_configure(config: pytest.Config) -> None:
    global _FOLDER
    _FOLDER = tempfile.mkdtemp(prefix="blastrate-test-db-")
    os.environ["BLASTRATE_DATABASE_URL"] = f"sqlite:///{_FOLDER}/blastrate.db"
    # A receiver on a host without a profile measures one at its first start (a few
    # seconds of loopback blasts beside the test's own transfer): off for the suite,
    # on in the tests of that calibration (tests/app/commands/test_receiver_advice.py).
    os.environ["BLASTRATE_NO_CALIBRATE"] = "1"


def pytest_unconfigure(config: pytest.Config) -> None:
    if _FOLDER is not None:
        shutil.rmtree(_FOLDER, ignore_errors=True)


#: The PostgreSQL server that ``scripts/test`` starts (from Debian's packages), or None.
POSTGRES_URL = os.environ.get("BLASTRATE_TEST_DATABASE_URL")
_STORE_TABLES = ("srn_jobs", "host_profiles", "host_default")


@pytest.fixture(params=["sqlite", "postgresql"])
def store_url(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> str:
    """A fresh, empty database for a store test, once on each backend as deployed: an
    SQLite file, and the PostgreSQL server of ``BLASTRATE_TEST_DATABASE_URL`` with the
    stores' tables dropped first (its advisory locks run only there)."""
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path_factory.mktemp('store') / 'store.db'}"
    if not POSTGRES_URL:
        pytest.skip(
            "no PostgreSQL server: scripts/test starts one as root from Debian's packages, "
            "or set BLASTRATE_TEST_DATABASE_URL"
        )
    import sqlalchemy as sa

    engine = sa.create_engine(POSTGRES_URL)
    with engine.begin() as conn:
        for table in _STORE_TABLES:
            conn.execute(sa.text(f"DROP TABLE IF EXISTS {table}"))
    engine.dispose()
    return POSTGRES_URL
