"""host.database: the SQL engines both stores share (SQLite locking, in-memory sharing)."""

from __future__ import annotations

import sqlite3
import threading
import time
from pathlib import Path

from host.database import for_writing, open_engine


def test_in_memory_connection_is_lent_to_one_thread_at_a_time() -> None:
    engine = open_engine("sqlite://")
    try:
        with engine.connect() as first:
            first.exec_driver_sql("CREATE TABLE t (x INTEGER)")
            first.commit()
            got: list[int] = []

            def reader() -> None:
                with engine.connect() as second:
                    got.append(second.exec_driver_sql("SELECT count(*) FROM t").scalar_one())

            waiter = threading.Thread(target=reader)
            waiter.start()
            waiter.join(timeout=0.3)
            assert waiter.is_alive(), "a second thread got the connection while it was lent"
            first.exec_driver_sql("INSERT INTO t VALUES (1)")
            first.commit()
        waiter.join(timeout=10)
        # The same database, not a fresh empty one: the row the first thread wrote.
        assert got == [1]
    finally:
        engine.dispose()


def test_reads_do_not_wait_for_a_writer_and_writers_take_turns(tmp_path: Path) -> None:
    # Only transactions that write begin IMMEDIATE: a read while another process holds
    # the write lock answers at once (WAL), where a write waits for the lock.
    path = tmp_path / "w.db"
    engine = open_engine(f"sqlite:///{path}")
    with for_writing(engine).begin() as conn:
        conn.exec_driver_sql("PRAGMA journal_mode=WAL")
        conn.exec_driver_sql("CREATE TABLE t (x INTEGER)")
    other = sqlite3.connect(path, isolation_level=None)
    try:
        other.execute("BEGIN IMMEDIATE")
        started = time.monotonic()
        with engine.connect() as conn:
            assert conn.exec_driver_sql("SELECT count(*) FROM t").scalar_one() == 0
        assert time.monotonic() - started < 1.0
        wrote: list[float] = []

        def write() -> None:
            with for_writing(engine).begin() as conn:
                wrote.append(time.monotonic())
                conn.exec_driver_sql("INSERT INTO t VALUES (1)")

        writer = threading.Thread(target=write)
        writer.start()
        time.sleep(0.5)
        assert wrote == [], "a writing transaction began while another writer held the lock"
        released = time.monotonic()
        other.execute("COMMIT")
        writer.join(timeout=20)
        assert wrote and wrote[0] >= released
    finally:
        other.close()
        engine.dispose()
