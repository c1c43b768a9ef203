"""How much of its core a receiver really gets during a transfer, beside C busy tasks.

Run as root from the repository root (veth link; loopback otherwise)::

    .venv/bin/python benchmarks/receiver_share.py [--cpu-tasks 0,1,2,3]
        [--rates 175e6,350e6,525e6] [--runs 3] [--json out.json]

Both receiver models assume the scheduler shares the receiver's core fairly: the paper's
gives the receiver 1/(C + 1) of it (processor sharing), the time-slice model the same on
average, in slices.  ``benchmarks/validate_transfer.py`` found the receiver losing nothing
at rates its calibrated costs say it cannot drain on such a share (README, "Validation":
at K = 1,736 and C = 3 the measured loss onset was 525 Mbit/s, the models' 224-331).  This
script measures the share directly, on the same link and the same receiver: for each C and
rate it sends ``--runs`` transfers of ``--file-size`` bytes paced at that rate (one-way
delay emulated as in the validation), and reads, over each transfer's span,

* the CPU time of the receiver and of each busy task (``/proc/PID/schedstat``, exact);
* the receiving core's softirq and irq time (``/proc/stat``, sampled by the tick);
* the first round's loss.

It prints the receiver's share of the core over the transfer and over its first blast (its
CPU time over the blast's duration: nearly all of its work comes while datagrams arrive),
its CPU time per datagram, the busy tasks' mean share, the kernel's share and what fair
sharing would give the receiver if it were always runnable: ``(1 - kernel) / (C + 1)``.
Everything is bounded in count and time; traffic stays on the
namespaces' veth pair (or 127.0.0.1).
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import signal
import statistics
import sys
import tempfile
import time
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from validate_transfer import SECRET, isolate, receiver_process
from veth_link import Link, setns

from datamover import SendError, send_file

TICK_S = 1.0 / os.sysconf("SC_CLK_TCK")


def _session_tasks(leader_parent: int) -> tuple[int, list[int]]:
    """The receiver (a child of ``leader_parent`` that leads its own session) and the
    other processes of its session (the busy tasks)."""
    receiver, members = None, []
    sessions: dict[int, int] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        pid, ppid, sid = int(entry.name), int(fields[1]), int(fields[3])
        sessions[pid] = sid
        if ppid == leader_parent and sid == pid:
            receiver = pid
    if receiver is None:
        raise RuntimeError("the receiver process was not found")
    members = [p for p, s in sessions.items() if s == receiver and p != receiver]
    return receiver, members


def _cpu_ns(pid: int) -> int:
    """CPU time of all of ``pid``'s threads so far (ns)."""
    total = 0
    for task in Path(f"/proc/{pid}/task").iterdir():
        try:
            total += int((task / "schedstat").read_text().split()[0])
        except OSError:
            continue  # a thread that ended in between
    return total


def _kernel_ticks(cpu: int) -> int:
    """irq + softirq ticks of ``cpu`` so far (``/proc/stat``)."""
    for line in Path("/proc/stat").read_text().splitlines():
        if line.startswith(f"cpu{cpu} "):
            f = line.split()
            return int(f[6]) + int(f[7])
    raise RuntimeError(f"cpu{cpu} not in /proc/stat")


def measure(
    src: Path, link: Link, rx_cpu: int, args: Any, cpu_tasks: int, rates: list[float]
) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = []
    deadline = time.monotonic() + 120
    # Each busy task's count of 100,000-iteration chunks: over its CPU time, the speed of
    # the core it shares with the receiver, transfer by transfer.
    progress = multiprocessing.get_context("fork").RawArray("q", max(cpu_tasks, 1))
    with receiver_process(rx_cpu, args, link, deadline, cpu_tasks=cpu_tasks, progress=progress) as (
        port,
        reports,
    ):
        receiver, busy = _session_tasks(os.getpid())
        # Let the busy tasks start and the scheduler settle before the first transfer.
        time.sleep(0.5)
        for rate in rates:
            for _ in range(args.runs):
                if time.monotonic() > deadline - 10:
                    break
                before = (_cpu_ns(receiver), [_cpu_ns(p) for p in busy], _kernel_ticks(rx_cpu))
                chunks = sum(progress)
                t0 = time.monotonic()
                try:
                    rep = send_file(
                        src,
                        link.address,
                        port,
                        rate_bps=rate,
                        secret=SECRET,
                        name="payload.bin",
                        emulate_delay_s=args.delay,
                        max_rounds=200,
                        total_timeout_s=30,
                        control_timeout_s=30,
                        max_burst_packets=32,
                    )
                except SendError as exc:
                    rows.append({"cpu_tasks": cpu_tasks, "rate_bps": rate, "error": str(exc)})
                    time.sleep(1.2)
                    continue
                span = time.monotonic() - t0
                if reports.poll(10):
                    reports.recv()
                rx_s = (_cpu_ns(receiver) - before[0]) / 1e9
                busy_s = [(_cpu_ns(p) - b) / 1e9 for p, b in zip(busy, before[1], strict=True)]
                done = sum(progress) - chunks
                kernel_s = (_kernel_ticks(rx_cpu) - before[2]) * TICK_S
                # The first blast alone: its span is the datagrams over the achieved rate.
                first = rep.rounds[0]
                rows.append(
                    {
                        "cpu_tasks": cpu_tasks,
                        "rate_bps": rate,
                        "span_s": span,
                        "transfer_s": rep.transfer_s,
                        "rounds": len(rep.rounds),
                        "first_loss": first.loss,
                        "first_blast_s": first.blast_s,
                        "receiver_s": rx_s,
                        # Per datagram of the file, and during the first blast (nearly
                        # all of the receiver's work comes while datagrams arrive).
                        "receiver_us_per_datagram": 1e6 * rx_s / first.packets_sent,
                        "receiver_share_of_blast": rx_s / first.blast_s,
                        "receiver_share": rx_s / span,
                        "busy_share_mean": statistics.fmean(busy_s) / span if busy_s else 0.0,
                        "kernel_share": kernel_s / span,
                        # Busy-loop iterations per CPU second (None without busy tasks).
                        "busy_iterations_per_cpu_s": 1e5 * done / sum(busy_s)
                        if busy and sum(busy_s) > 0
                        else None,
                        "load1": os.getloadavg()[0],
                    }
                )
    return rows


def _speed_against_loss(rows: list[dict[str, Any]], rates: list[float]) -> None:
    """Does a transfer lose more when the core is slower?  Per (C, rate), Spearman's rank
    correlation of the first-round loss with the busy tasks' iterations per CPU second
    (a slower core: fewer).  A negative correlation fits a core whose speed moved and a
    loss that followed, but it is not proof: without ``CONFIG_IRQ_TIME_ACCOUNTING`` the
    softirq work that runs while a busy task is current is charged to that task, so a
    transfer that leaves more kernel work on the core also lowers this meter.
    ``benchmarks/core_speed.py`` measures the core's speed with no traffic at all."""
    from scipy.stats import spearmanr

    for c in sorted({r["cpu_tasks"] for r in rows}):
        for rate in rates:
            pts = [
                (r["first_loss"], r["busy_iterations_per_cpu_s"])
                for r in rows
                if r["cpu_tasks"] == c
                and r["rate_bps"] == rate
                and r.get("busy_iterations_per_cpu_s") is not None
            ]
            if len(pts) < 5 or len({p[0] for p in pts}) < 2:
                continue
            loss, speed = zip(*pts, strict=True)
            rho, p = spearmanr(loss, speed)
            print(
                f"# C={c} {rate / 1e6:.0f} Mbit/s: loss against core speed, Spearman "
                f"{rho:+.2f} (p {p:.2g}, {len(pts)} transfers); speed "
                f"{min(speed) / 1e6:.1f}-{max(speed) / 1e6:.1f} M iterations per CPU s"
            )


def main() -> None:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--cpu-tasks", default="0,1,2,3")
    ap.add_argument("--rates", default="175e6,350e6,525e6", help="payload bit/s")
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--file-size", type=int, default=20_000_000, help="bytes")
    ap.add_argument("--delay", type=float, default=0.1, help="emulated one-way delay (s)")
    ap.add_argument("--rcvbuf", type=int, default=2_000_000, help="SO_RCVBUF (bytes)")
    ap.add_argument("--batch", type=int, default=8, help="N")
    ap.add_argument("--line-rate", type=float, default=7e8, help="tbf rate (payload bit/s)")
    ap.add_argument("--nice", type=int, default=-10)
    ap.add_argument("--json", default=None)
    args = ap.parse_args()
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    if not 1 <= args.runs <= 50:
        sys.exit("--runs: 1..50")
    cores = sorted(os.sched_getaffinity(0))
    if len(cores) < 2:
        sys.exit("needs two cores")
    rx_cpu = cores[0]
    print(f"# scheduler: {isolate(args.nice)}; load before {os.getloadavg()}")
    tmp = Path(tempfile.mkdtemp(prefix="blastrate-share-", dir="/dev/shm"))
    src = tmp / "payload.bin"
    src.write_bytes(np.random.default_rng(1).bytes(args.file_size))
    rates = [float(x) for x in args.rates.split(",")]
    link = Link("veth", args.line_rate, rx_cpu)
    opts = SimpleNamespace(
        nice=args.nice, batch=args.batch, rcvbuf=args.rcvbuf, delay=args.delay, runs=args.runs
    )
    rows: list[dict[str, Any]] = []
    try:
        with link:
            print(f"# link: {link.kind}; {link.note}")
            setns(link.tx_ns)
            os.sched_setaffinity(0, {cores[1]})
            for c in [int(x) for x in args.cpu_tasks.split(",")]:
                rows += measure(src, link, rx_cpu, opts, c, rates)
    finally:
        src.unlink()
        tmp.rmdir()
    print(
        "shares of the receiving core over each transfer's span; 'in blast': the receiver's"
        " CPU time over the first blast's duration"
    )
    print(
        f"{'C':>2} {'Mbit/s':>7} {'runs':>4} {'loss':>6} {'receiver':>9} {'in blast':>9} "
        f"{'us/dgram':>8} {'fair':>6} {'busy each':>9} {'kernel':>7}"
    )
    for c in sorted({r["cpu_tasks"] for r in rows}):
        for rate in rates:
            ok = [
                r for r in rows if r["cpu_tasks"] == c and r["rate_bps"] == rate and "span_s" in r
            ]
            if not ok:
                continue

            def mean(key: str, rs: list[dict[str, Any]] = ok) -> float:
                return statistics.fmean(r[key] for r in rs)

            fair = (1 - mean("kernel_share")) / (c + 1)
            print(
                f"{c:>2} {rate / 1e6:>7.0f} {len(ok):>4} {mean('first_loss'):>6.3f} "
                f"{mean('receiver_share'):>9.3f} {mean('receiver_share_of_blast'):>9.3f} "
                f"{mean('receiver_us_per_datagram'):>8.2f} {fair:>6.3f} "
                f"{mean('busy_share_mean'):>9.3f} {mean('kernel_share'):>7.3f}"
            )
    _speed_against_loss(rows, rates)
    print(f"# load at end {os.getloadavg()}")
    if args.json:
        Path(args.json).write_text(json.dumps({"args": vars(args), "rows": rows}, indent=1))


if __name__ == "__main__":
    main()
