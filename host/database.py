"""SQL engines that the threads and processes of a service may share.

Both of blastrate's databases, the host profiles (:class:`host.ProfileStore`) and the
queued SRN jobs of the service, open their engines here, so they agree on how SQLite is
driven: which transactions take the write lock, how long they wait for it, and how an
in-memory database is shared between threads.  Any other SQLAlchemy URL (PostgreSQL)
gets a plain engine; :func:`take_turns` gives it the one guarantee SQLite's write lock
gives for free.
"""

from __future__ import annotations

import hashlib
from typing import Any

from sqlalchemy import Connection, Engine, create_engine, event, func, select
from sqlalchemy.pool import QueuePool

__all__ = ["SQLITE_WAIT_S", "for_writing", "open_engine", "take_turns"]

#: Longest wait, in seconds, for SQLite's write lock or for the one connection of an
#: in-memory database.
SQLITE_WAIT_S = 30.0


#: Execution option that makes a SQLite transaction take the write lock at BEGIN.
_WRITES = "blastrate_sqlite_begin_immediate"


def open_engine(url: str) -> Engine:
    """An SQLAlchemy engine for ``url`` that the threads of one process may share.

    Parameters
    ----------
    url : str
        SQLAlchemy database URL.

    Returns
    -------
    sqlalchemy.Engine
        For SQLite, a transaction begins when SQLAlchemy begins it (``BEGIN``, or
        ``BEGIN IMMEDIATE`` on an engine from :func:`for_writing`) and waits up to
        :data:`SQLITE_WAIT_S` seconds for a lock.  An in-memory SQLite database
        (``sqlite://``) lives in a single connection, so its pool holds exactly that one
        and lends it to one thread at a time; a thread that waits longer than
        :data:`SQLITE_WAIT_S` seconds gets :class:`sqlalchemy.exc.TimeoutError`.

    Notes
    -----
    Why not the defaults.  Python's ``sqlite3`` module sends no ``BEGIN`` before a
    ``SELECT``, so a read-then-write transaction reads outside any transaction and
    ``SELECT ... FOR UPDATE`` locks nothing.  And ``StaticPool``, the usual advice for
    in-memory SQLite, lends its one connection to every thread at once, which
    ``sqlite3`` does not serialise: two transactions then interleave, raising
    ``OperationalError`` at best and crashing the interpreter at worst.
    """
    if not url.startswith("sqlite"):
        return create_engine(url)
    options: dict[str, Any] = {
        "connect_args": {"check_same_thread": False, "timeout": SQLITE_WAIT_S}
    }
    if url in ("sqlite://", "sqlite:///:memory:"):
        options.update(poolclass=QueuePool, pool_size=1, max_overflow=0, pool_timeout=SQLITE_WAIT_S)
    engine = create_engine(url, **options)

    @event.listens_for(engine, "connect")
    def _no_implicit_transactions(dbapi_connection: Any, _: Any) -> None:
        # SQLAlchemy, not the driver, says where transactions begin (the listener below).
        dbapi_connection.isolation_level = None

    @event.listens_for(engine, "begin")
    def _begin(connection: Any) -> None:
        immediate = connection.get_execution_options().get(_WRITES, False)
        connection.exec_driver_sql("BEGIN IMMEDIATE" if immediate else "BEGIN")

    return engine


def for_writing(engine: Engine) -> Engine:
    """``engine`` for transactions that write: on SQLite they take the write lock at BEGIN.

    Parameters
    ----------
    engine : sqlalchemy.Engine
        An engine from :func:`open_engine`.

    Returns
    -------
    sqlalchemy.Engine
        The same engine and pool.  On SQLite, each transaction begins ``IMMEDIATE``, so a
        read followed by a write (count the queued jobs, then queue one; find a profile,
        then replace it) sees no other writer in between, and never fails to upgrade its
        read lock.  Reads through ``engine`` itself begin deferred and, in WAL mode, never
        wait for a writer.  Other databases ignore the option.
    """
    return engine.execution_options(**{_WRITES: True})


def take_turns(connection: Connection, name: str) -> None:
    """Make the transactions that call this with ``name`` run one at a time.

    Parameters
    ----------
    connection : sqlalchemy.Connection
        A connection inside a writing transaction (from :func:`for_writing`).
    name : str
        What the transactions take turns on, e.g. ``"srn_jobs:submit"``.

    Notes
    -----
    On SQLite this does nothing: a writing transaction already holds the database's
    write lock from its ``BEGIN IMMEDIATE``.  On PostgreSQL it takes a
    transaction-scoped advisory lock keyed by a 63-bit hash of ``name``, released when
    the transaction ends; the default isolation (read committed) would otherwise let two
    transactions read the same state and both write on it.
    """
    if connection.dialect.name != "postgresql":
        return
    key = int.from_bytes(hashlib.blake2b(name.encode(), digest_size=8).digest(), "big") >> 1
    connection.execute(select(func.pg_advisory_xact_lock(key)))
