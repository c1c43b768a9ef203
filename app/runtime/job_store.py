"""Durable records of long SRN solves (``/srn/jobs``), kept in SQL through SQLAlchemy.

The default database is an SQLite file in the user's data directory (platformdirs);
``BLASTRATE_DATABASE_URL`` points elsewhere, e.g. ``postgresql+psycopg://...``.  Every
state change is one short transaction, so several service processes can share a
database: a queued job is claimed with a conditional ``UPDATE`` that only one of them
can win, and a running job carries a heartbeat that tells a restarted service whether
its owner is still alive.

Job life cycle::

    queued -> running -> succeeded | failed
       \\          \\-> cancelled (DELETE)   -> interrupted (owner died: restart, crash)
        \\-> cancelled
"""

from __future__ import annotations

import json
import time
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import sqlalchemy as sa

from host.database import for_writing, open_engine, take_turns

__all__ = ["ACTIVE", "FINISHED", "JobRecord", "JobStore", "QueueFull", "default_database_url"]

#: Statuses of a job that still has work to do.
ACTIVE = ("queued", "running")
#: Statuses of a job that is over.
FINISHED = ("succeeded", "failed", "cancelled", "interrupted")

_metadata = sa.MetaData()
_jobs = sa.Table(
    "srn_jobs",
    _metadata,
    sa.Column("id", sa.String(32), primary_key=True),
    sa.Column("status", sa.String(16), nullable=False, index=True),
    sa.Column("created_at", sa.Float, nullable=False),
    sa.Column("started_at", sa.Float),
    sa.Column("finished_at", sa.Float),
    sa.Column("heartbeat_at", sa.Float),
    sa.Column("owner", sa.String(200)),
    sa.Column("cancel_requested", sa.Boolean, nullable=False, default=False),
    sa.Column("request", sa.Text, nullable=False),
    sa.Column("progress", sa.Text, nullable=False, default="{}"),
    sa.Column("result", sa.Text),
    sa.Column("problem", sa.Text),
)


#: The columns a claim sets, as they are before it.
_UNCLAIMED = {"started_at": None, "heartbeat_at": None, "owner": None}


def default_database_url() -> str:
    """``sqlite:///`` URL of ``jobs.sqlite3`` in the user's data directory (created)."""
    import platformdirs

    directory = Path(platformdirs.user_data_dir("blastrate", appauthor=False))
    directory.mkdir(parents=True, exist_ok=True)
    return f"sqlite:///{directory / 'jobs.sqlite3'}"


@dataclass(frozen=True)
class JobRecord:
    """One job as stored.

    Attributes
    ----------
    id : str
        32 hexadecimal digits.
    status : str
        ``queued``, ``running``, ``succeeded``, ``failed``, ``cancelled`` or
        ``interrupted``.
    created_at, started_at, finished_at : float or None
        Unix times (s).
    progress : dict
        What the solve reported last (stage, states, edges, iterations, residual).
    request : dict
        The solve request.
    result : dict or None
        The ``POST /srn/solve`` body, when succeeded.
    problem : dict or None
        The problem+json body, when failed or interrupted.
    cancel_requested : bool
        A DELETE asked for the job to stop.
    """

    id: str
    status: str
    created_at: float
    started_at: float | None
    finished_at: float | None
    progress: dict[str, Any]
    request: dict[str, Any]
    result: dict[str, Any] | None
    problem: dict[str, Any] | None
    cancel_requested: bool


def _record(row: Any) -> JobRecord:
    return JobRecord(
        id=row.id,
        status=row.status,
        created_at=row.created_at,
        started_at=row.started_at,
        finished_at=row.finished_at,
        progress=json.loads(row.progress or "{}"),
        request=json.loads(row.request),
        result=None if row.result is None else json.loads(row.result),
        problem=None if row.problem is None else json.loads(row.problem),
        cancel_requested=bool(row.cancel_requested),
    )


class QueueFull(Exception):
    """``max_queued`` jobs are already waiting or running."""

    def __init__(self, active: int) -> None:
        super().__init__(f"{active} jobs are queued or running")
        self.active = active


class JobStore:
    """Jobs in a SQL database.

    Parameters
    ----------
    url : str
        SQLAlchemy database URL.
    """

    def __init__(self, url: str) -> None:
        self.url = url
        self.engine = open_engine(url)
        # Every transaction below that writes goes through this one (see for_writing).
        self._writes = for_writing(self.engine)
        if url.startswith("sqlite"):

            @sa.event.listens_for(self.engine, "connect")
            def _wal(dbapi_connection: Any, _: Any) -> None:
                # Readers do not block the writer (progress updates during GETs).
                dbapi_connection.execute("PRAGMA journal_mode=WAL")

        _metadata.create_all(self._writes)

    def close(self) -> None:
        """Release the connection pool."""
        self.engine.dispose()

    # -- writes ----------------------------------------------------------------------------
    def create(self, request: dict[str, Any], max_active: int) -> JobRecord:
        """Queue a job, unless ``max_active`` jobs are already queued or running.

        Raises
        ------
        QueueFull
            With the number of active jobs.
        """
        job_id = uuid.uuid4().hex
        now = time.time()
        with self._writes.begin() as conn:
            # Nothing may queue a job between the count and the insert.
            take_turns(conn, "srn_jobs:submit")
            active = conn.execute(
                sa.select(sa.func.count()).select_from(_jobs).where(_jobs.c.status.in_(ACTIVE))
            ).scalar_one()
            if active >= max_active:
                raise QueueFull(int(active))
            conn.execute(
                _jobs.insert().values(
                    id=job_id,
                    status="queued",
                    created_at=now,
                    cancel_requested=False,
                    request=json.dumps(request),
                    progress=json.dumps({"stage": "queued"}),
                )
            )
            # Read back inside the transaction: the job as queued.  Read after the commit
            # (as before), a runner could already have claimed it, and the 202 answer said
            # "running" (seen once on PostgreSQL in CI).
            row = conn.execute(sa.select(_jobs).where(_jobs.c.id == job_id)).one()
        return _record(row)

    def claim(self, owner: str) -> JobRecord | None:
        """Move the oldest queued job to ``running`` for ``owner``; None if none is queued."""
        with self._writes.begin() as conn:
            candidates = conn.execute(
                sa.select(_jobs.c.id)
                .where(_jobs.c.status == "queued")
                .order_by(_jobs.c.created_at)
                .limit(8)
            ).all()
            now = time.time()
            for (job_id,) in candidates:
                won = conn.execute(
                    _jobs.update()
                    .where(_jobs.c.id == job_id, _jobs.c.status == "queued")
                    .values(
                        status="running",
                        started_at=now,
                        heartbeat_at=now,
                        owner=owner,
                        progress=json.dumps({"stage": "starting"}),
                    )
                ).rowcount
                if won:
                    break
            else:
                return None
        return self.get(job_id)

    def release(self, job_id: str, owner: str) -> bool:
        """Put a job that ``owner`` claimed but never started back in the queue.

        Returns
        -------
        bool
            True if the job was ``running`` for ``owner``: it is ``queued`` again, or
            ``cancelled`` if a cancel was asked meanwhile.
        """
        claimed = (_jobs.c.id == job_id, _jobs.c.status == "running", _jobs.c.owner == owner)
        with self._writes.begin() as conn:
            # Cancelled while claimed: it ends here instead of going back to the queue.
            cancelled = conn.execute(
                _jobs.update()
                .where(*claimed, _jobs.c.cancel_requested.is_(True))
                .values(status="cancelled", finished_at=time.time())
            ).rowcount
            moved = conn.execute(
                _jobs.update()
                .where(*claimed)
                .values(status="queued", progress=json.dumps({"stage": "queued"}), **_UNCLAIMED)
            ).rowcount
        return bool(moved or cancelled)

    def heartbeat(self, job_id: str, progress: dict[str, Any] | None = None) -> bool:
        """Record that the job's owner is alive (and its progress); True if cancel was asked."""
        values: dict[str, Any] = {"heartbeat_at": time.time()}
        if progress is not None:
            values["progress"] = json.dumps(progress)
        with self._writes.begin() as conn:
            conn.execute(
                _jobs.update()
                .where(_jobs.c.id == job_id, _jobs.c.status == "running")
                .values(**values)
            )
            flag = conn.execute(
                sa.select(_jobs.c.cancel_requested).where(_jobs.c.id == job_id)
            ).scalar_one_or_none()
        return bool(flag)

    def finish(
        self,
        job_id: str,
        status: str,
        *,
        result: dict[str, Any] | None = None,
        problem: dict[str, Any] | None = None,
        progress: dict[str, Any] | None = None,
    ) -> None:
        """Record the end of a running job (``succeeded``, ``failed`` or ``cancelled``)."""
        values: dict[str, Any] = {
            "status": status,
            "finished_at": time.time(),
            "result": None if result is None else json.dumps(result),
            "problem": None if problem is None else json.dumps(problem),
        }
        if progress is not None:
            values["progress"] = json.dumps(progress)
        with self._writes.begin() as conn:
            conn.execute(
                _jobs.update()
                .where(_jobs.c.id == job_id, _jobs.c.status == "running")
                .values(**values)
            )

    def cancel(self, job_id: str) -> JobRecord | None:
        """Cancel a job: a queued one at once, a running one by flagging it for its owner."""
        with self._writes.begin() as conn:
            conn.execute(
                _jobs.update()
                .where(_jobs.c.id == job_id, _jobs.c.status == "queued")
                .values(status="cancelled", finished_at=time.time(), cancel_requested=True)
            )
            conn.execute(
                _jobs.update()
                .where(_jobs.c.id == job_id, _jobs.c.status == "running")
                .values(cancel_requested=True)
            )
        return self.get(job_id)

    def delete(self, job_id: str) -> bool:
        """Remove a finished job's record; True if one was removed."""
        with self._writes.begin() as conn:
            removed = conn.execute(
                _jobs.delete().where(_jobs.c.id == job_id, _jobs.c.status.in_(FINISHED))
            ).rowcount
        return bool(removed)

    def interrupt_stale(self, stale_after_s: float, problem: dict[str, Any]) -> int:
        """Mark running jobs whose heartbeat is older than ``stale_after_s`` as interrupted.

        Their owner died (the service restarted or crashed), so nobody will finish them.
        Returns how many were marked.
        """
        now = time.time()
        with self._writes.begin() as conn:
            count = conn.execute(
                _jobs.update()
                .where(
                    _jobs.c.status == "running",
                    sa.or_(
                        _jobs.c.heartbeat_at.is_(None),
                        _jobs.c.heartbeat_at < now - stale_after_s,
                    ),
                )
                .values(status="interrupted", finished_at=now, problem=json.dumps(problem))
            ).rowcount
        return int(count)

    def interrupt_owned_by(self, owner: str, problem: dict[str, Any]) -> int:
        """Mark the running jobs of ``owner`` (a previous life of this process) interrupted."""
        with self._writes.begin() as conn:
            count = conn.execute(
                _jobs.update()
                .where(_jobs.c.status == "running", _jobs.c.owner == owner)
                .values(status="interrupted", finished_at=time.time(), problem=json.dumps(problem))
            ).rowcount
        return int(count)

    def purge(self, older_than_s: float) -> int:
        """Delete finished jobs that ended more than ``older_than_s`` seconds ago."""
        with self._writes.begin() as conn:
            count = conn.execute(
                _jobs.delete().where(
                    _jobs.c.status.in_(FINISHED),
                    _jobs.c.finished_at < time.time() - older_than_s,
                )
            ).rowcount
        return int(count)

    # -- reads -----------------------------------------------------------------------------
    def get(self, job_id: str) -> JobRecord | None:
        """The job, or None."""
        with self.engine.connect() as conn:
            row = conn.execute(sa.select(_jobs).where(_jobs.c.id == job_id)).one_or_none()
        return None if row is None else _record(row)

    def count_queued(self) -> int:
        """Jobs waiting for a worker."""
        with self.engine.connect() as conn:
            return int(
                conn.execute(
                    sa.select(sa.func.count()).select_from(_jobs).where(_jobs.c.status == "queued")
                ).scalar_one()
            )
