"""The service's host profiles: the built-ins and the profile database.

Built-in names are answered from memory.  A stored name needs a database read, which is
done in a worker thread so that the event loop never waits on the database.
"""

from __future__ import annotations

import time
from typing import Any

import anyio.to_thread

from app.schemas.problems import ProblemError
from host import DEFAULT_PROFILE, HOST_PROFILES, HostProfile
from host.store import ProfileStore, ProfileStoreError, host_default_writes

from .state import ServiceState

__all__ = ["fetch_profile", "fetch_profile_entry", "profile_store", "storage_problem"]

#: Seconds a client is told to wait when the profile database is unavailable.
RETRY_AFTER_S = 5
#: Seconds the host default's name is trusted before the database is read again (s).
DEFAULT_NAME_TTL_S = 1.0


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
    ``blastrate calibrate`` last made the default, else the paper's ``sx280-2007``.  Its
    name is read from the database at most once every :data:`DEFAULT_NAME_TTL_S` (a
    read in a thread on every request cost more than the rest of a cached answer): a
    default set by another process takes effect within that, one set by this process at
    once (:func:`host.store.host_default_writes`).  A stored default's values are read
    on every request, as for any stored profile.

    Raises
    ------
    WorkloadError
        ``field="profile"`` for an unknown name.
    ProfileStoreError
        When the database cannot be read (answered 503 by the app).
    """
    store = profile_store(state)
    if name is None:
        name = await _default_name(state, store)
        if name not in HOST_PROFILES:
            # The entry as it is now: one read, which also sees a default changed or
            # deleted by another process since the name was cached.
            entry = await anyio.to_thread.run_sync(store.default_entry)
            return entry.profile
    built_in = HOST_PROFILES.get(name)
    if built_in is not None:
        return built_in
    profile: HostProfile = await anyio.to_thread.run_sync(store.get, name)
    return profile


async def fetch_profile_entry(
    state: ServiceState, name: str | None
) -> tuple[HostProfile, dict[str, Any] | None]:
    """The profile called ``name`` (None: this host's default) and its stored provenance,
    from one read (None for a built-in profile, which has none).  Raises as
    :func:`fetch_profile`.

    One read, so that the values and the calibration in the provenance always belong to
    the same profile, even while another process changes the host default.
    """
    store = profile_store(state)
    if name is None:
        name = await _default_name(state, store)
        if name not in HOST_PROFILES:
            entry = await anyio.to_thread.run_sync(store.default_entry)
            return entry.profile, entry.provenance
    built_in = HOST_PROFILES.get(name)
    if built_in is not None:
        return built_in, None
    entry = await anyio.to_thread.run_sync(store.entry, name)
    return entry.profile, entry.provenance


async def _default_name(state: ServiceState, store: ProfileStore) -> str:
    writes, now = host_default_writes(), time.monotonic()
    cached = state.extras.get("host_default")
    if cached is not None and cached[1] == writes and now - cached[2] < DEFAULT_NAME_TTL_S:
        return str(cached[0])
    name = await anyio.to_thread.run_sync(store.default_name) or DEFAULT_PROFILE
    state.extras["host_default"] = (name, writes, now)
    return name


def storage_problem(exc: ProfileStoreError) -> ProblemError:
    """The 503 problem for a profile database failure (the server's fault)."""
    return ProblemError(
        "storage-unavailable",
        f"the profile database is unavailable: {exc}",
        headers={"Retry-After": str(RETRY_AFTER_S)},
    )
