"""Set-up for every test: no test ever touches the user's real profile database.

(At the repository root, outside the doctest-collected folders: several ``conftest.py``
without packages would clash under ``--doctest-modules``.)

``BLASTRATE_DATABASE_URL`` points at a SQLite file in a temporary directory for the
whole session, set before any test module is imported; tests that need a database of
their own pass an explicit URL.
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


def pytest_unconfigure(config: pytest.Config) -> None:
    if _FOLDER is not None:
        shutil.rmtree(_FOLDER, ignore_errors=True)
