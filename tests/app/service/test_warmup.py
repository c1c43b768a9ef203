"""Start-up work never waits on the profile database."""

from __future__ import annotations

import pytest

from app.service.warmup import compile_default_nets
from host.store import DATABASE_URL_ENV


def test_warm_up_does_not_read_the_profile_database(monkeypatch: pytest.MonkeyPatch) -> None:
    # A request naming no profile reads the host default from the database; the warm-up
    # did the same, so a service whose database could not be opened never became ready,
    # though only its profile routes need the database.
    monkeypatch.setenv(DATABASE_URL_ENV, "sqlite:////nonexistent-dir/for/sure/warm.db")
    assert compile_default_nets() == 8
