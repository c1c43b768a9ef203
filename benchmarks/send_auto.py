"""Does ``blastrate send --rate auto`` beat the rates a user could pick by hand?

Run from the repository root, as root (the veth link; loopback otherwise)::

    .venv/bin/python benchmarks/validate_transfer.py --quick --json cal.json   # calibrates
    .venv/bin/python benchmarks/send_auto.py --calibration cal.json --json auto.json

Everything runs as users run it: ``blastrate receive`` and ``blastrate send`` are the
installed commands, each in its own network namespace of the veth link
(:mod:`veth_link`, the line rate of the calibration), the receiver pinned to one core
with C busy loops (its own session, so its own scheduler group), the sender on the other.

The receiver's host is "calibrated": the calibration of an earlier
``validate_transfer.py`` run (``--calibration``; never a run scored here) is stored as a
profile, with its time slice and kernel cost as provenance, and made the host default of
a database of this run's own (``BLASTRATE_DATABASE_URL``, a temporary file).  The
receiver advises from it, its socket's K, its batch and a probe of the tasks on its CPU.

Scored, per (C, SO_RCVBUF): ``--rate auto``, ``--rate max`` and fixed rates at 25, 50,
75 and 100 % of the line rate, ``--runs`` transfers each in shuffled order.  Reported:
mean transfer time and spread of each, and auto's time over the best of the others with
a bootstrap 95 % interval.  The load is recorded beside every transfer.  Every transfer
has a time limit and the whole run a budget.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shlex
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from veth_link import Link

from datamover import new_secret
from host import HostProfile
from host.store import ProfileStore

BLASTRATE = str(Path(sys.executable).with_name("blastrate"))
BUSY = "import time\nend = time.monotonic() + {s}\nwhile time.monotonic() < end:\n    pass\n"


def free_port() -> int:
    """A TCP port free on loopback now (the receiver binds it in its namespace)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _in_ns(ns: str | None, cmd: list[str]) -> list[str]:
    return cmd if ns is None else ["ip", "netns", "exec", ns, *cmd]


def installed_receiver(
    link: Link,
    rx_cpu: int,
    cpu_tasks: int,
    rcvbuf: int | None,
    out: Path,
    port: int,
    env: dict[str, str],
    seconds: float,
    nice: int | None = None,
) -> subprocess.Popen[bytes]:
    """``blastrate receive`` and C busy loops (each ending by itself after ``seconds``)
    in a session of their own on ``rx_cpu``; with ``nice``, its autogroup at that nice
    (as ``validate_transfer.py`` runs its receiving host)."""
    busy = " ".join(
        f"taskset -c {rx_cpu} {sys.executable} -c {shlex.quote(BUSY.format(s=seconds))} &"
        for _ in range(cpu_tasks)
    )
    receive = " ".join(
        _in_ns(
            link.rx_ns,
            [
                "taskset",
                "-c",
                str(rx_cpu),
                BLASTRATE,
                "receive",
                "--port",
                str(port),
                "--host",
                link.address,
                "--output",
                str(out),
                "--batch",
                "8",
                "--overwrite",
                *(["--rcvbuf", str(rcvbuf)] if rcvbuf else []),
            ],
        )
    )
    # Not `exec`: the busy loops must not be the receiver's children, which its probe
    # leaves out as its own work.
    script = f"{busy} {receive}"
    if nice is not None:
        script = f"echo {int(nice)} > /proc/self/autogroup; {script}"
    # A session of its own (start_new_session): its own scheduler group, and one process
    # group that stop_session ends whole.
    return subprocess.Popen(
        ["sh", "-c", script],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )


def stop_session(proc: subprocess.Popen[bytes]) -> None:
    """End the session ``proc`` leads (the receiver and its busy loops), politely first."""
    try:
        os.killpg(proc.pid, signal.SIGTERM)
    except ProcessLookupError:
        return
    try:
        proc.wait(10)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(10)


def installed_send(
    link: Link, tx_cpu: int, src: Path, port: int, rate: str, delay: str, env: dict
) -> dict[str, Any]:
    """One ``blastrate send --json`` at ``rate`` (as typed: ``auto``, ``max``, ``375000000bps``)
    from ``tx_cpu`` in the sending namespace; its time, rate, rounds and first-round loss."""
    load = os.getloadavg()[0]
    cmd = _in_ns(
        link.tx_ns,
        [
            "taskset",
            "-c",
            str(tx_cpu),
            BLASTRATE,
            "send",
            str(src),
            "--to",
            f"{link.address}:{port}",
            "--rate",
            rate,
            "--emulate-delay",
            delay,
            "--timeout",
            "60s",
            "--json",
        ],
    )
    done = subprocess.run(cmd, env=env, capture_output=True, timeout=120)
    if done.returncode != 0:
        return {"ok": False, "error": done.stderr.decode()[-300:], "load1": load}
    report = json.loads(done.stdout)
    return {
        "ok": True,
        "time_s": report["transfer_s"],
        "rate_bps": report["rate_bps"],
        "rounds": len(report["rounds"]),
        "first_loss": report["rounds"][0]["loss"],
        "auto": report.get("auto"),
        "load1": load,
    }


def wait_listening(address: str, ns: str | None, port: int, deadline: float) -> None:
    """Return once something listens on TCP ``port`` in namespace ``ns``, by ``deadline``."""
    probe = _in_ns(ns, ["ss", "-ltnH", f"sport = :{port}"])
    while time.monotonic() < deadline:
        out = subprocess.run(probe, capture_output=True, timeout=10).stdout
        if out.strip():
            return
        time.sleep(0.1)
    raise RuntimeError("the receiver did not start listening")


def _bootstrap(num: list[float], den: list[float], rng: np.random.Generator) -> list[float]:
    a, b = np.asarray(num), np.asarray(den)
    ra = a[rng.integers(0, a.size, (4000, a.size))].mean(axis=1)
    rb = b[rng.integers(0, b.size, (4000, b.size))].mean(axis=1)
    return [float(x) for x in np.percentile(ra / rb, [2.5, 97.5])]


def main() -> None:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--calibration", required=True, help="a validate_transfer.py --json")
    ap.add_argument("--cpu-tasks", default="1,2,3", help="C values, comma-separated")
    ap.add_argument("--rcvbuf", default="0,2000000", help="SO_RCVBUF values; 0 = default")
    ap.add_argument("--delay", default="10ms", help="--emulate-delay of every send")
    ap.add_argument("--file-size", type=int, default=20_000_000, help="bytes")
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--link", choices=["veth", "loopback"], default="veth")
    ap.add_argument("--budget", type=float, default=1800.0, help="wall-time limit (s)")
    ap.add_argument(
        "--autogroup-nice",
        type=int,
        default=None,
        help="the receiving session's autogroup nice (default: left at 0, as a user's "
        "session runs; validate_transfer.py uses -10)",
    )
    ap.add_argument("--json", default=None)
    args = ap.parse_args()
    start = time.monotonic()
    deadline = start + args.budget
    cal = json.loads(Path(args.calibration).read_text())["calibration"]
    profile = HostProfile(**cal["profile"]).replace(name="calibrated-host")
    rx_cpu, tx_cpu = sorted(os.sched_getaffinity(0))[:2]
    work = Path(tempfile.mkdtemp(prefix="blastrate-auto-"))
    env = {
        **os.environ,
        "BLASTRATE_DATABASE_URL": f"sqlite:///{work / 'profiles.db'}",
        # Both ends read the run's shared secret from the environment.
        "BLASTRATE_SECRET": new_secret(),
    }
    store = ProfileStore(env["BLASTRATE_DATABASE_URL"])
    store.put(
        profile,
        provenance={
            "source": f"benchmarks/validate_transfer.py calibration ({args.calibration})",
            "time_slice_s": cal["time_slice_s"]["mean"],
            "kernel_s_per_datagram": cal["net"]["kernel_s_per_datagram"],
            "wakeup_s": cal["net"]["per_wakeup_s"],
        },
    )
    store.set_default(profile.name)
    store.close()
    src = work / "payload.bin"
    src.write_bytes(np.random.default_rng(2).bytes(args.file_size))
    out = work / "out"
    out.mkdir()
    line = profile.line_rate_bps
    fixed = [f"{int(line * f)}bps" for f in (0.25, 0.5, 0.75, 1.0)]
    results = []
    print(f"# load before {os.getloadavg()}; line {line / 1e6:.0f} Mbit/s", flush=True)
    with Link(args.link, line, rx_cpu) as link:
        print(f"# link: {link.kind}; {link.note}", flush=True)
        for rcvbuf in [int(x) or None for x in args.rcvbuf.split(",")]:
            for c in [int(x) for x in args.cpu_tasks.split(",")]:
                if time.monotonic() > deadline:
                    break
                port = free_port()
                rx = installed_receiver(
                    link,
                    rx_cpu,
                    c,
                    rcvbuf,
                    out,
                    port,
                    env,
                    deadline - time.monotonic() + 30,
                    args.autogroup_nice,
                )
                samples: dict[str, list[dict[str, Any]]] = {}
                try:
                    wait_listening(link.address, link.rx_ns, port, time.monotonic() + 30)
                    time.sleep(0.5)  # the busy loops settle on the core
                    order = random.Random(c * 7 + (rcvbuf or 0))
                    for _ in range(args.runs):
                        rates = ["auto", "max", *fixed]
                        order.shuffle(rates)
                        for r in rates:
                            if time.monotonic() > deadline:
                                break
                            got = installed_send(link, tx_cpu, src, port, r, args.delay, env)
                            samples.setdefault(r, []).append(got)
                finally:
                    stop_session(rx)
                row = _score(c, rcvbuf, samples)
                results.append(row)
                print(_line(row), flush=True)
    for f in out.iterdir():
        f.unlink()
    out.rmdir()
    src.unlink()
    for f in work.iterdir():
        f.unlink()
    work.rmdir()
    worst = max((r["ratio"] for r in results if r["ratio"] is not None), default=None)
    print(
        f"# worst auto / best-by-hand {worst}; elapsed {time.monotonic() - start:.0f} s; "
        f"load at end {os.getloadavg()}"
    )
    if args.json:
        Path(args.json).write_text(
            json.dumps(
                {
                    "link": args.link,
                    "calibration": args.calibration,
                    "delay": args.delay,
                    "file_size": args.file_size,
                    "runs": args.runs,
                    "autogroup_nice": args.autogroup_nice,
                    "results": results,
                },
                indent=1,
            )
        )


def _score(c: int, rcvbuf: int | None, samples: dict[str, list[dict[str, Any]]]) -> dict:
    rows = {}
    for rate, xs in samples.items():
        ok = [x["time_s"] for x in xs if x["ok"]]
        rows[rate] = {
            "runs": len(xs),
            "failed": len(xs) - len(ok),
            "times_s": ok,
            "mean_s": statistics.fmean(ok) if ok else None,
            "std_s": statistics.stdev(ok) if len(ok) > 1 else 0.0,
            "first_loss": statistics.fmean(x["first_loss"] for x in xs if x["ok"]) if ok else None,
            "load1": statistics.fmean(x["load1"] for x in xs),
            "errors": [x["error"] for x in xs if not x["ok"]][:2],
        }
    auto = [x for x in samples.get("auto", []) if x["ok"]]
    by_hand = {r: v for r, v in rows.items() if r != "auto" and v["mean_s"] and not v["failed"]}
    best = min(by_hand, key=lambda r: by_hand[r]["mean_s"]) if by_hand else None
    ratio = ci = None
    if auto and best:
        ratio = rows["auto"]["mean_s"] / by_hand[best]["mean_s"]
        ci = _bootstrap(rows["auto"]["times_s"], by_hand[best]["times_s"], np.random.default_rng(c))
    return {
        "cpu_tasks": c,
        "rcvbuf_bytes": rcvbuf,
        "auto_rate_bps": statistics.fmean(x["rate_bps"] for x in auto) if auto else None,
        "auto": auto[0]["auto"] if auto else None,
        "best_by_hand": best,
        "ratio": ratio,
        "ratio_ci": ci,
        "rates": rows,
    }


def _line(row: dict[str, Any]) -> str:
    cells = " ".join(
        f"{r}:{v['mean_s']:.3f}" if v["mean_s"] else f"{r}:failed"
        for r, v in sorted(row["rates"].items())
    )
    auto = row["auto_rate_bps"]
    return (
        f"C={row['cpu_tasks']} rcvbuf={row['rcvbuf_bytes']}: auto "
        f"{(auto or 0) / 1e6:.0f} Mbit/s, ratio to best by hand ({row['best_by_hand']}) "
        f"{row['ratio'] if row['ratio'] is None else round(row['ratio'], 3)} {row['ratio_ci']}; "
        f"{cells}"
    )


if __name__ == "__main__":
    main()
