"""This host's default profile, when a quick look tells it without SQLAlchemy.

``blastrate rate`` and the other quick commands use this host's default profile (set by
``blastrate calibrate``) when none is named, so each of them read the profile database
through :class:`host.store.ProfileStore`, and loading SQLAlchemy took a quarter of a
second of a one-second answer.  :func:`built_in_default` reads the one row that says
which profile is the default straight from a SQLite file with the standard library,
read-only, and answers when that settles it: no default set, or a built-in profile set.
In every other case (a stored profile is the default, another database, a file not yet
created, any error) it answers None and the caller asks the store, which gives the same
profile and reports any failure as before.
"""

from __future__ import annotations

import os
import sqlite3
from pathlib import Path

from .profiles import HOST_PROFILES, HostProfile

__all__ = ["DATABASE_URL_ENV", "FALLBACK_PROFILE", "built_in_default", "default_database_file"]

#: Environment variable that points every store at another database.
DATABASE_URL_ENV = "BLASTRATE_DATABASE_URL"
#: The profile used when no host default is set: the paper's.
FALLBACK_PROFILE = "sx280-2007"

_SQLITE_FILE = "sqlite:///"


def default_database_file() -> Path:
    """The SQLite file of the profile store when ``BLASTRATE_DATABASE_URL`` is unset:
    ``blastrate.db`` in ``platformdirs.user_data_dir("blastrate")`` (not created here)."""
    import platformdirs

    return Path(platformdirs.user_data_dir("blastrate")) / "blastrate.db"


def _sqlite_file(url: str) -> Path | None:
    """The file of a plain ``sqlite:///PATH`` URL (no driver, no query), else None."""
    if not url.startswith(_SQLITE_FILE) or "?" in url or len(url) == len(_SQLITE_FILE):
        return None
    path = url[len(_SQLITE_FILE) :]
    return None if path == ":memory:" else Path(path)


def built_in_default() -> HostProfile | None:
    """This host's default profile if it is a built-in one, read without SQLAlchemy.

    Returns
    -------
    HostProfile or None
        The fallback ``sx280-2007`` when the database holds no default, the built-in
        profile it names, or None when the store must be asked: a stored profile is the
        default, the database is not a SQLite file that exists, or it cannot be read.
    """
    url = os.environ.get(DATABASE_URL_ENV)
    path = _sqlite_file(url) if url else default_database_file()
    if path is None or not path.is_file():
        return None
    try:
        connection = sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True, timeout=1.0)
    except (sqlite3.Error, ValueError):
        return None
    try:
        row = connection.execute("SELECT name FROM host_default WHERE slot = 1").fetchone()
    except sqlite3.Error:
        return None
    finally:
        connection.close()
    if row is None:
        return HOST_PROFILES[FALLBACK_PROFILE]
    return HOST_PROFILES.get(row[0]) if isinstance(row[0], str) else None
