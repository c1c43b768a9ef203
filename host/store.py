"""Named host profiles kept in a database beside the built-in ones.

A :class:`ProfileStore` answers profile names for every computation: the built-in
profiles of :data:`host.HOST_PROFILES` first (read-only: they are the paper's figures and
never change), then the profiles stored by users or by calibration.  Each stored profile
keeps a *provenance* beside it: a small JSON object saying where its numbers came from
(for a calibration: the host, the date, the spread of the measurements).

The database is SQLAlchemy 2.x.  The URL is, in order: the ``url`` argument, the
``BLASTRATE_DATABASE_URL`` environment variable, and a SQLite file ``blastrate.db`` in
``platformdirs.user_data_dir("blastrate")`` (created on first use).  PostgreSQL works
through the same URL, e.g. ``postgresql+psycopg://user@db.example/blastrate`` (install
the ``psycopg`` driver yourself; the project pins no PostgreSQL driver).  The table
``host_profiles`` is created with ``metadata.create_all`` on first use.

Nothing touches the database until a name that is not built-in is asked for, so a
process that only uses built-in profiles never creates the file.

Examples
--------
>>> import tempfile, os
>>> from host import host_profile
>>> url = "sqlite:///" + os.path.join(tempfile.mkdtemp(), "p.db")
>>> store = ProfileStore(url)
>>> store.put(host_profile("sx280-2007").replace(name="lab-1", mu_net=50_000.0),
...           provenance={"source": "example"})
True
>>> store.get("lab-1").mu_net, store.provenance("lab-1")
(50000.0, {'source': 'example'})
>>> [p.name for p in store.list()]
['sx280-2007', 'lab-1']
>>> store.delete("lab-1"), store.delete("lab-1")
(True, False)
"""

from __future__ import annotations

import builtins
import json
import os
import threading
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import (
    JSON,
    DateTime,
    Engine,
    Float,
    Integer,
    MetaData,
    String,
    delete,
    select,
)
from sqlalchemy.exc import ArgumentError, IntegrityError, NoSuchModuleError, SQLAlchemyError
from sqlalchemy.orm import DeclarativeBase, Mapped, Session, mapped_column
from sqlalchemy.orm.exc import StaleDataError

from .database import for_writing, open_engine, take_turns
from .default_profile import DATABASE_URL_ENV, FALLBACK_PROFILE, default_database_file
from .errors import WorkloadError
from .profiles import HOST_PROFILES, HostProfile

__all__ = [
    "DATABASE_URL_ENV",
    "MAX_PROVENANCE_BYTES",
    "ProfileStore",
    "ProfileStoreError",
    "StoredProfile",
    "database_url",
    "default_store",
    "host_default_writes",
]


#: Largest provenance object stored beside a profile (bytes of compact JSON).
MAX_PROVENANCE_BYTES = 65_536


class ProfileStoreError(RuntimeError):
    """The profile database could not be reached or written (a server-side fault).

    Distinct from :class:`~host.WorkloadError`, which is the caller's mistake (an unknown
    or built-in name, an invalid value).  The message names only the kind of failure, so
    a service may pass it to its clients; ``detail`` (the database driver's first line)
    and ``bad_url`` are for the operator.

    Attributes
    ----------
    bad_url : bool
        The URL itself is unusable: not an SQLAlchemy URL, or a dialect or driver that is
        not installed.
    detail : str
        The underlying error's first line (at most 200 characters); it may name hosts,
        users and paths.
    """

    def __init__(self, message: str, *, bad_url: bool = False, detail: str = "") -> None:
        super().__init__(message)
        self.bad_url = bad_url
        self.detail = detail


def database_url(url: str | None = None) -> str:
    """The database URL a store uses: ``url``, else ``$BLASTRATE_DATABASE_URL``, else the
    SQLite file ``blastrate.db`` in the user data directory (the directory is created).

    Parameters
    ----------
    url : str, optional
        An SQLAlchemy URL.
    """
    if url:
        return url
    env = os.environ.get(DATABASE_URL_ENV)
    if env:
        return env
    file = default_database_file()
    file.parent.mkdir(parents=True, exist_ok=True)
    return f"sqlite:///{file}"


class _Base(DeclarativeBase):
    metadata = MetaData()


class _HostDefaultRow(_Base):
    # One row at most: the profile this host's computations use when none is named.
    __tablename__ = "host_default"

    slot: Mapped[int] = mapped_column(Integer, primary_key=True)
    name: Mapped[str] = mapped_column(String(64))


class _ProfileRow(_Base):
    __tablename__ = "host_profiles"

    name: Mapped[str] = mapped_column(String(64), primary_key=True)
    mu_io_cpu: Mapped[float] = mapped_column(Float)
    mu_disk: Mapped[float] = mapped_column(Float)
    mu_net: Mapped[float] = mapped_column(Float)
    buffer_packets: Mapped[int] = mapped_column(Integer)
    coalesce_packets: Mapped[int] = mapped_column(Integer)
    line_rate_bps: Mapped[float] = mapped_column(Float)
    packet_payload_bytes: Mapped[int] = mapped_column(Integer)
    provenance: Mapped[dict[str, Any] | None] = mapped_column(JSON, nullable=True)
    updated_at: Mapped[datetime] = mapped_column(DateTime(timezone=True))

    def profile(self) -> HostProfile:
        return HostProfile(
            name=self.name,
            mu_io_cpu=self.mu_io_cpu,
            mu_disk=self.mu_disk,
            mu_net=self.mu_net,
            buffer_packets=self.buffer_packets,
            coalesce_packets=self.coalesce_packets,
            line_rate_bps=self.line_rate_bps,
            packet_payload_bytes=self.packet_payload_bytes,
        )


_VALUE_FIELDS = (
    "mu_io_cpu",
    "mu_disk",
    "mu_net",
    "buffer_packets",
    "coalesce_packets",
    "line_rate_bps",
    "packet_payload_bytes",
)


@dataclass(frozen=True)
class StoredProfile:
    """A profile with what the store knows about it.

    Attributes
    ----------
    profile : HostProfile
        The profile's values.
    built_in : bool
        True for the read-only built-in profiles.
    provenance : dict or None
        Where the numbers came from, as stored with :meth:`ProfileStore.put`.
    updated_at : datetime or None
        When it was last stored (UTC); None for built-ins.
    """

    profile: HostProfile
    built_in: bool
    provenance: dict[str, Any] | None
    updated_at: datetime | None


class ProfileStore:
    """Built-in host profiles plus the profiles stored in a database.

    Parameters
    ----------
    url : str, optional
        SQLAlchemy URL; see :func:`database_url` for the default.  The engine is
        created, and the table with it, on the first lookup that needs the database.

    Notes
    -----
    Thread-safe: each call uses its own session.  Several processes may share one
    SQLite file (SQLite serialises the writers); each call is one transaction.
    Database failures raise :class:`ProfileStoreError`.
    """

    def __init__(self, url: str | None = None) -> None:
        self._url = url
        self._engine: Engine | None = None
        self._lock = threading.Lock()

    @property
    def url(self) -> str:
        """The database URL (resolved from the environment when not given)."""
        return database_url(self._url)

    def _db(self) -> Engine:
        with self._lock:
            if self._engine is None:
                try:
                    engine = open_engine(self.url)
                    # As a writer: two processes creating the table at once take turns.
                    _Base.metadata.create_all(for_writing(engine))
                except SQLAlchemyError as exc:
                    lines = str(exc).strip().splitlines()
                    raise ProfileStoreError(
                        f"profile database unavailable: {type(exc).__name__}",
                        bad_url=isinstance(exc, (ArgumentError, NoSuchModuleError)),
                        detail=lines[0][:200] if lines else "",
                    ) from exc
                self._engine = engine
            return self._engine

    def close(self) -> None:
        """Release the database connections (the store reconnects when used again)."""
        with self._lock:
            if self._engine is not None:
                self._engine.dispose()
                self._engine = None

    # -- reading -------------------------------------------------------------------------
    def get(self, name: str) -> HostProfile:
        """The profile called ``name``: a built-in one, else a stored one.

        Raises
        ------
        WorkloadError
            ``field="profile"`` when there is no such profile.
        ProfileStoreError
            When the database cannot be read.
        """
        return self.entry(name).profile

    def entry(self, name: str) -> StoredProfile:
        """The profile called ``name`` with its provenance (see :meth:`get`)."""
        if not isinstance(name, str):
            raise WorkloadError(f"profile must be a profile name, got {name!r}", field="profile")
        built_in = HOST_PROFILES.get(name)
        if built_in is not None:
            return StoredProfile(built_in, True, None, None)
        row = self._read(lambda s: s.get(_ProfileRow, name))
        if row is None:
            raise WorkloadError(
                f"unknown host profile {name[:64]!r}; known profiles: {', '.join(self._names())}",
                field="profile",
            )
        return _stored(row)

    def provenance(self, name: str) -> dict[str, Any] | None:
        """The provenance stored with ``name`` (None for built-ins or when none was given)."""
        return self.entry(name).provenance

    def list(self) -> list[HostProfile]:
        """Every profile: the built-ins (by name), then the stored ones (by name)."""
        return [e.profile for e in self.entries()]

    def entries(self) -> builtins.list[StoredProfile]:
        """Every profile with its provenance, in the order of :meth:`list`."""
        rows = self._read(lambda s: list(s.scalars(select(_ProfileRow).order_by(_ProfileRow.name))))
        built = [StoredProfile(p, True, None, None) for _, p in sorted(HOST_PROFILES.items())]
        return built + [_stored(r) for r in rows]

    def is_built_in(self, name: str) -> bool:
        """Whether ``name`` is a read-only built-in profile."""
        return name in HOST_PROFILES

    # -- writing -------------------------------------------------------------------------
    def put(self, profile: HostProfile, *, provenance: dict[str, Any] | None = None) -> bool:
        """Store ``profile`` under its name, replacing a stored one of the same name.

        :meth:`put_entry` does the same and also returns the entry as stored.

        Parameters
        ----------
        profile : HostProfile
            The (already validated) profile.
        provenance : dict, optional
            JSON-serialisable description of where the values came from, at most
            :data:`MAX_PROVENANCE_BYTES` bytes as compact JSON.

        Returns
        -------
        bool
            True if the name was new, False if a stored profile was replaced.

        Raises
        ------
        WorkloadError
            ``field="name"`` for a built-in name; ``field="provenance"`` for a provenance
            that is not a JSON object or is too large (``limit="max_provenance_bytes"``).
        ProfileStoreError
            When the database cannot be written.
        """
        return self.put_entry(profile, provenance=provenance)[1]

    def put_entry(
        self, profile: HostProfile, *, provenance: dict[str, Any] | None = None
    ) -> tuple[StoredProfile, bool]:
        """Store ``profile`` as :meth:`put` does; the entry as stored, and whether it is new.

        Reply from this entry rather than reading the name back: another writer may
        replace or delete it in between.

        Returns
        -------
        entry : StoredProfile
            What this call wrote: the values, the provenance (as JSON gives it back) and
            the time stored.
        created : bool
            True if the name was new, False if a stored profile was replaced.

        Raises
        ------
        WorkloadError, ProfileStoreError
            As :meth:`put`.
        """
        if not isinstance(profile, HostProfile):
            raise WorkloadError(
                f"put takes a HostProfile, got {type(profile).__name__}", field="profile"
            )
        if profile.name in HOST_PROFILES:
            raise WorkloadError(
                f"{profile.name!r} is a built-in profile and cannot be replaced; "
                "store it under another name",
                field="name",
            )
        prov = _checked_provenance(provenance)
        values = {f: getattr(profile, f) for f in _VALUE_FIELDS}
        now = datetime.now(UTC)
        for attempt in range(2):
            try:
                with Session(for_writing(self._db())) as session, session.begin():
                    # FOR UPDATE below locks an existing row, not an absent one.
                    take_turns(session.connection(), f"host_profiles:{profile.name}")
                    row = session.get(_ProfileRow, profile.name, with_for_update=True)
                    created = row is None
                    if row is None:
                        row = _ProfileRow(name=profile.name)
                        session.add(row)
                    for key, value in values.items():
                        setattr(row, key, value)
                    row.provenance = prov
                    row.updated_at = now
                return StoredProfile(profile, False, prov, now), created
            except (IntegrityError, StaleDataError):
                # Another writer inserted or deleted the same name between our read and
                # write (possible where the database does not lock the read, unlike
                # SQLite here): the second attempt sees the row as it is now.
                if attempt:
                    raise ProfileStoreError("profile database: conflicting writes") from None
            except SQLAlchemyError as exc:
                raise ProfileStoreError(
                    f"profile database write failed: {type(exc).__name__}"
                ) from exc
        raise AssertionError("unreachable")

    def delete(self, name: str) -> bool:
        """Remove the stored profile ``name`` (and the host default, if it was that).

        Returns
        -------
        bool
            True if it was there, False if no stored profile had that name.

        Raises
        ------
        WorkloadError
            ``field="name"`` for a built-in name.
        """
        if name in HOST_PROFILES:
            raise WorkloadError(
                f"{name!r} is a built-in profile and cannot be deleted", field="name"
            )
        try:
            with Session(for_writing(self._db())) as session, session.begin():
                result = session.execute(delete(_ProfileRow).where(_ProfileRow.name == name))
                # A default that named it goes too: a later profile of the same name must
                # not become the default unasked.
                session.execute(delete(_HostDefaultRow).where(_HostDefaultRow.name == name))
                return bool(getattr(result, "rowcount", 0))
        except SQLAlchemyError as exc:
            raise ProfileStoreError(f"profile database write failed: {type(exc).__name__}") from exc
        finally:
            _count_default_write()

    # -- the host default ----------------------------------------------------------------
    def default_name(self) -> str | None:
        """The profile this host uses when none is named (set by ``blastrate calibrate``),
        or None when none was set or it has since been deleted."""
        row = self._read(lambda s: s.get(_HostDefaultRow, 1))
        if row is None:
            return None
        if row.name in HOST_PROFILES:
            return str(row.name)
        exists = self._read(lambda s: s.get(_ProfileRow, row.name))
        return None if exists is None else str(row.name)

    def default_entry(self) -> StoredProfile:
        """The host default's profile and provenance; the paper's ``sx280-2007`` when no
        default is set."""
        return self.entry(self.default_name() or FALLBACK_PROFILE)

    def set_default(self, name: str | None) -> None:
        """Make ``name`` (an existing profile) this host's default; None clears it.

        Raises
        ------
        WorkloadError
            ``field="profile"`` for an unknown name.
        """
        if name is not None:
            self.entry(name)  # refuses an unknown name
        try:
            with Session(for_writing(self._db())) as session, session.begin():
                session.execute(delete(_HostDefaultRow))
                if name is not None:
                    session.add(_HostDefaultRow(slot=1, name=name))
        except SQLAlchemyError as exc:
            raise ProfileStoreError(f"profile database write failed: {type(exc).__name__}") from exc
        finally:
            _count_default_write()

    # -- internals -----------------------------------------------------------------------
    def _read(self, query: Any) -> Any:
        try:
            with Session(self._db(), expire_on_commit=False) as session:
                result = query(session)
                session.expunge_all()
                return result
        except SQLAlchemyError as exc:
            raise ProfileStoreError(f"profile database read failed: {type(exc).__name__}") from exc

    def _names(self) -> builtins.list[str]:
        try:
            stored = self._read(lambda s: list(s.scalars(select(_ProfileRow.name))))
        except ProfileStoreError:
            stored = []
        return sorted(HOST_PROFILES) + sorted(stored)[:20]


def _stored(row: _ProfileRow) -> StoredProfile:
    when = row.updated_at
    if when is not None and when.tzinfo is None:
        when = when.replace(tzinfo=UTC)  # SQLite keeps no time zone; we wrote UTC
    return StoredProfile(row.profile(), False, row.provenance, when)


def _checked_provenance(provenance: Any) -> dict[str, Any] | None:
    if provenance is None:
        return None
    if not isinstance(provenance, dict):
        raise WorkloadError(
            f"provenance must be a JSON object, got {type(provenance).__name__}",
            field="provenance",
        )
    try:
        text = json.dumps(provenance, separators=(",", ":"), allow_nan=False, default=None)
    except (TypeError, ValueError) as exc:
        raise WorkloadError(
            f"provenance must be JSON-serialisable: {exc}", field="provenance"
        ) from None
    if len(text.encode()) > MAX_PROVENANCE_BYTES:
        raise WorkloadError(
            f"provenance is {len(text.encode())} bytes of JSON; "
            f"max_provenance_bytes={MAX_PROVENANCE_BYTES}",
            field="provenance",
            limit="max_provenance_bytes",
            maximum=MAX_PROVENANCE_BYTES,
            reached=len(text.encode()),
        )
    # Stored as the round-tripped JSON, so a later read returns exactly what a JSON
    # client would see (tuples become lists, keys strings).
    value: dict[str, Any] = json.loads(text)
    return value


_DEFAULT_STORES: dict[str, ProfileStore] = {}
# Writes this process made that may change the host default (set_default, delete).
_DEFAULT_WRITES = [0]
_DEFAULT_WRITES_LOCK = threading.Lock()


def _count_default_write() -> None:
    with _DEFAULT_WRITES_LOCK:
        _DEFAULT_WRITES[0] += 1


def host_default_writes() -> int:
    """How many times this process has written what may change the host default.

    A reader that caches the default (the service does, for a second) compares this
    count to see at once a change made in its own process; a change made by another
    process (``blastrate calibrate``) shows when its cache expires.
    """
    with _DEFAULT_WRITES_LOCK:
        return _DEFAULT_WRITES[0]


_DEFAULT_LOCK = threading.Lock()


def default_store() -> ProfileStore:
    """The process-wide store for the current ``BLASTRATE_DATABASE_URL`` (or the user
    data directory), created on first use and reused: what the CLI, the service's
    worker processes and library callers get when they name a profile."""
    key = os.environ.get(DATABASE_URL_ENV) or ""
    with _DEFAULT_LOCK:
        store = _DEFAULT_STORES.get(key)
        if store is None:
            store = _DEFAULT_STORES[key] = ProfileStore(key or None)
        return store
