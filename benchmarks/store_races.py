"""Do the job and profile databases hold when threads use them at once?  Counts, not times.

Four checks, each in its own Python process (a crash inside ``sqlite3`` is reported as
the signal that ended it, not as a crash of this script), each bounded in time:

``queue_bound``
    ``--trials`` times, 16 threads submit a job at the same moment to a fresh job
    database with ``max_active=5``.  Reports the trials that queued more than 5.
``put_delete``
    For ``--seconds``, two threads ``PUT /profiles/raced`` (each its own ``mu_net``) and
    two ``DELETE`` it, through the app (in-process test client) on a fresh SQLite file.
    Reports every status seen; only 200/201 (PUT) and 204/404 (DELETE) are right, and a
    PUT's answer must show the values that request sent.
``in_memory``
    For ``--seconds``, four threads create, claim, beat and finish jobs and put, read and
    delete profiles on in-memory databases (``sqlite://``).  Reports the errors.
``read_during_write``
    Another connection holds the SQLite write lock of a job database and of a profile
    database for 2 s (as a second service process or the CLI would); times one job read
    and one profile read made meanwhile.  Reads should not wait.

Run::

    .venv/bin/python benchmarks/store_races.py                  # this tree
    .venv/bin/python benchmarks/store_races.py --root ../older-checkout
    .venv/bin/python benchmarks/store_races.py --database-url postgresql+psycopg://...

``--database-url`` points ``queue_bound`` at another database (its ``srn_jobs`` table is
dropped first).  Nothing leaves the machine; no server is started.
"""

from __future__ import annotations

import argparse
import collections
import contextlib
import json
import os
import random
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
CHECKS = ("queue_bound", "put_delete", "in_memory", "read_during_write")


def together(work: Callable[[int], None], count: int) -> collections.Counter[str]:
    """Run ``work(i)`` in ``count`` threads at once; what they raised, by type and text."""
    with ThreadPoolExecutor(max_workers=count) as pool:
        outcomes = [pool.submit(work, i) for i in range(count)]
    raised = (f.exception() for f in outcomes)
    return collections.Counter(f"{type(e).__name__}: {str(e)[:70]}" for e in raised if e)


def submissions_at_once(store: Any, threads: int, bound: int) -> int:
    """``threads`` submissions released by one barrier; how many were queued."""
    from app.runtime.job_store import QueueFull

    start = threading.Barrier(threads)
    queued: list[str] = []

    def submit(_: int) -> None:
        start.wait()
        with contextlib.suppress(QueueFull):
            queued.append(store.create({}, bound).id)

    together(submit, threads)
    return len(queued)


def queue_bound(args: argparse.Namespace, folder: str) -> dict[str, Any]:
    import sqlalchemy as sa

    from app.runtime.job_store import JobStore

    over, worst = 0, 0
    for trial in range(args.trials):
        url = args.database_url or f"sqlite:///{folder}/jobs-{trial}.sqlite3"
        if args.database_url:
            engine = sa.create_engine(url)
            with engine.begin() as conn:
                conn.execute(sa.text("DROP TABLE IF EXISTS srn_jobs"))
            engine.dispose()
        store = JobStore(url)
        queued = submissions_at_once(store, threads=16, bound=5)
        store.close()
        over += queued > 5
        worst = max(worst, queued)
    return {"trials": args.trials, "over_the_bound": over, "most_queued": worst, "bound": 5}


def put_delete(args: argparse.Namespace, folder: str) -> dict[str, Any]:
    from fastapi.testclient import TestClient

    from app import Settings, create_app
    from host import host_profile

    fields = {k: v for k, v in host_profile("sx280-2007").to_dict().items() if k != "name"}
    settings = Settings(
        database_url=f"sqlite:///{folder}/store.sqlite3",  # jobs and profiles
        warm_up=False,
        probe_enabled=False,
        log_level="error",
    )
    statuses: dict[str, collections.Counter[int]] = {
        "PUT": collections.Counter(),
        "DELETE": collections.Counter(),
    }
    not_its_own = [0]
    with TestClient(create_app(settings)) as client:
        end = time.monotonic() + args.seconds

        def work(i: int) -> None:
            while time.monotonic() < end:
                if i % 2:
                    statuses["DELETE"][client.delete("/profiles/raced").status_code] += 1
                else:
                    mu_net = 40_000.0 + i
                    response = client.put("/profiles/raced", json={**fields, "mu_net": mu_net})
                    statuses["PUT"][response.status_code] += 1
                    if response.status_code < 300 and response.json()["mu_net"] != mu_net:
                        not_its_own[0] += 1

        errors = together(work, 4)
    wrong = sum(n for s, n in statuses["PUT"].items() if s not in (200, 201)) + sum(
        n for s, n in statuses["DELETE"].items() if s not in (204, 404)
    )
    return {
        "put": dict(statuses["PUT"]),
        "delete": dict(statuses["DELETE"]),
        "wrong_statuses": wrong,
        "puts_answering_other_values": not_its_own[0],
        "errors": dict(errors),
    }


def in_memory(args: argparse.Namespace, folder: str) -> dict[str, Any]:
    from app.runtime.job_store import JobStore, QueueFull
    from host import host_profile
    from host.store import ProfileStore

    jobs, profiles = JobStore("sqlite://"), ProfileStore("sqlite://")
    base = host_profile("sx280-2007")
    done = [0]

    def run_a_job(rnd: random.Random) -> None:
        record = jobs.claim("bench")
        if record is not None:
            jobs.heartbeat(record.id, {"stage": "solving"})
            jobs.finish(record.id, "succeeded", result={"ok": True})

    operations: list[Callable[[random.Random], object]] = [
        lambda r: jobs.create({}, 10**6),
        run_a_job,
        lambda r: jobs.get("0" * 32),
        lambda r: profiles.put(base.replace(name=f"p{r.randrange(4)}", mu_net=r.uniform(1e4, 1e5))),
        lambda r: profiles.list(),
        lambda r: profiles.delete(f"p{r.randrange(4)}"),
    ]
    end = time.monotonic() + args.seconds

    def work(i: int) -> None:
        rnd = random.Random(i)
        while time.monotonic() < end:
            with contextlib.suppress(QueueFull):
                rnd.choice(operations)(rnd)
            done[0] += 1

    errors = together(work, 4)
    return {"operations": done[0], "errors": dict(errors)}


def read_during_write(args: argparse.Namespace, folder: str) -> dict[str, Any]:
    import sqlite3

    from app.runtime.job_store import JobStore
    from host import host_profile
    from host.store import ProfileStore

    jobs = JobStore(f"sqlite:///{folder}/jobs.sqlite3")
    job = jobs.create({}, 10)
    profiles = ProfileStore(f"sqlite:///{folder}/profiles.db")
    profiles.put(host_profile("sx280-2007").replace(name="lab"))
    waited = {}
    for name, path, read in (
        ("job_read_s", "jobs.sqlite3", lambda: jobs.get(job.id)),
        ("profile_read_s", "profiles.db", lambda: profiles.entry("lab")),
    ):
        other = sqlite3.connect(f"{folder}/{path}", isolation_level=None, check_same_thread=False)
        other.execute("BEGIN IMMEDIATE")
        release = threading.Timer(2.0, lambda other=other: other.execute("COMMIT"))
        release.start()
        started = time.monotonic()
        read()
        waited[name] = round(time.monotonic() - started, 3)
        release.join()
        other.close()
    jobs.close()
    profiles.close()
    return {"lock_held_s": 2.0, **waited}


def run_check(name: str, args: argparse.Namespace) -> dict[str, Any]:
    """One check in a child process of ``--root``; its JSON line, or how it died."""
    command = [sys.executable, __file__, "--child", name, *sys.argv[1:]]
    child = subprocess.run(
        command,
        cwd=args.root,
        env={**os.environ, "PYTHONPATH": str(args.root)},
        capture_output=True,
        text=True,
        timeout=args.seconds + args.trials * 10 + 120,
    )
    if child.returncode != 0:
        tail = (child.stderr.strip().splitlines() or [""])[-1][:120]
        return {"ended_by": f"exit status {child.returncode}", "last_line": tail}
    result: dict[str, Any] = json.loads(child.stdout.strip().splitlines()[-1])
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--root", type=Path, default=ROOT, help="source tree to test")
    parser.add_argument("--seconds", type=float, default=10.0, help="per timed check (at most 60)")
    parser.add_argument("--trials", type=int, default=30, help="queue_bound trials (at most 100)")
    parser.add_argument("--database-url", help="job database of queue_bound (default SQLite)")
    parser.add_argument("--check", choices=CHECKS, action="append", help="run only these")
    parser.add_argument("--child", choices=CHECKS, help=argparse.SUPPRESS)
    args = parser.parse_args()
    args.seconds = min(max(args.seconds, 0.5), 60.0)
    args.trials = min(max(args.trials, 1), 100)
    if args.child:
        with tempfile.TemporaryDirectory(prefix="store-races-") as folder:
            check = {
                "queue_bound": queue_bound,
                "put_delete": put_delete,
                "in_memory": in_memory,
                "read_during_write": read_during_write,
            }
            print(json.dumps(check[args.child](args, folder)))
        return
    print(f"python {sys.version.split()[0]}, {os.cpu_count()} cores; tree {args.root.resolve()}")
    results = {}
    for name in args.check or CHECKS:
        results[name] = run_check(name, args)
        print(f"{name:12} {json.dumps(results[name])}")
    print(json.dumps(results))


if __name__ == "__main__":
    main()
