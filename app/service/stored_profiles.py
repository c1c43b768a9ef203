"""The service's host profiles: the built-ins and the profile database.

Built-in names are answered from memory.  A stored name needs a database read, which is
done in a worker thread so that the event loop never waits on the database.
"""

from __future__ import annotations

import anyio.to_thread

from app.schemas.problems import ProblemError
from host import HOST_PROFILES, HostProfile
from host.store import ProfileStore, ProfileStoreError

from .state import ServiceState

__all__ = ["fetch_profile", "profile_store", "storage_problem"]

#: Seconds a client is told to wait when the profile database is unavailable.
RETRY_AFTER_S = 5


def profile_store(state: ServiceState) -> ProfileStore:
    """The app's profile store (created by :func:`app.service.factory.create_app`)."""
    store = state.extras.get("profiles")
    if store is None:
        store = state.extras["profiles"] = ProfileStore(state.settings.database_url)
    assert isinstance(store, ProfileStore)
    return store


async def fetch_profile(state: ServiceState, name: str | None) -> HostProfile:
    """The profile called ``name``: built-ins at once, stored ones read in a thread.

    ``None`` (a request that names no profile) is this host's default, the profile that
    ``blastrate calibrate`` last made the default, else the paper's ``sx280-2007``.  It is
    read from the database on every request: another process (``calibrate``) may have
    changed it since the last.

    Raises
    ------
    WorkloadError
        ``field="profile"`` for an unknown name.
    ProfileStoreError
        When the database cannot be read (answered 503 by the app).
    """
    store = profile_store(state)
    if name is None:
        entry = await anyio.to_thread.run_sync(store.default_entry)
        return entry.profile
    built_in = HOST_PROFILES.get(name)
    if built_in is not None:
        return built_in
    profile: HostProfile = await anyio.to_thread.run_sync(store.get, name)
    return profile


def storage_problem(exc: ProfileStoreError) -> ProblemError:
    """The 503 problem for a profile database failure (the server's fault)."""
    return ProblemError(
        "storage-unavailable",
        f"the profile database is unavailable: {exc}",
        headers={"Retry-After": str(RETRY_AFTER_S)},
    )
