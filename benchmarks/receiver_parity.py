"""Does ``blastrate receive`` lose what the validation's receiver loses, at the same rate?

``send_auto.py`` scores the installed commands (``blastrate receive``, ``blastrate
send``); ``validate_transfer.py`` scores its own receiver process (the same
:class:`datamover.Receiver`, in a session at autogroup nice -10, writing to /dev/shm) and
an in-process sender.  One ``send_auto.py`` run saw the installed pair lose 8-25 % of a
first blast at rates where the validation had measured 3-6 %.  This script asks whether
that is the receiver or the hour: it alternates the two set-ups in short blocks, each
run exactly as its benchmark runs it, at the same fixed rates, on the same veth link
(:mod:`veth_link`), C busy loops sharing the receiver's core::

    bench:      validate_transfer.receiver_process + datamover.send_file (in process)
    installed:  send_auto.installed_receiver + send_auto.installed_send

Blocks come in pairs, the order alternating (bench then installed, then installed then
bench, ...: the first run went bench-first only, and a drift within each pair could have
favoured one set-up); each block is a fresh receiver and fresh busy loops, then
``--transfers`` transfers.  Reported per rate: every block's mean first-round loss, and
the paired difference installed - bench within each pair with a 95 % Student's t
interval and the count of pairs where installed lost more (``--rescore`` prints them
again from a saved ``--json``).  An interval that excludes 0 says the set-ups differ; blocks of
one set-up that differ more than the pairs do say the machine drifts.  The load is
recorded beside every transfer; every transfer has a time limit and the run a budget.

Run as root from the repository root, nothing else running::

    .venv/bin/python benchmarks/receiver_parity.py --rate 343750000,375000000 \\
        --cpu-tasks 2 --rcvbuf 2000000 --blocks 4 --transfers 8 --json out.json
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from send_auto import free_port, installed_receiver, installed_send, stop_session, wait_listening
from validate_transfer import SECRET, receiver_process
from veth_link import Link, setns

from datamover import SendError, send_file

SETUPS = ("bench", "installed")


def _bench_block(
    link: Link, rx_cpu: int, src: Path, rate: float, args: argparse.Namespace
) -> list[dict[str, Any]]:
    opts = argparse.Namespace(nice=-10, batch=args.batch, rcvbuf=args.rcvbuf)
    rows = []
    with receiver_process(
        rx_cpu, opts, link, time.monotonic() + args.block_timeout, cpu_tasks=args.cpu_tasks
    ) as (port, reports):
        time.sleep(0.5)  # the busy loops settle on the core, as in send_auto.py
        for _ in range(args.transfers):
            load = os.getloadavg()[0]
            try:
                rep = send_file(
                    src,
                    link.address,
                    port,
                    rate_bps=rate,
                    secret=SECRET,
                    name="payload.bin",
                    emulate_delay_s=args.delay,
                    total_timeout_s=60,
                    control_timeout_s=30,
                )
            except SendError as exc:
                rows.append({"ok": False, "error": str(exc), "load1": load})
                continue
            if reports.poll(10):
                reports.recv()
            rows.append(
                {
                    "ok": True,
                    "first_loss": rep.rounds[0].loss,
                    "time_s": rep.transfer_s,
                    "load1": load,
                }
            )
    return rows


def _installed_block(
    link: Link,
    cpus: tuple[int, int],
    src: Path,
    rate: float,
    args: argparse.Namespace,
    env: dict[str, str],
    out: Path,
) -> list[dict[str, Any]]:
    rx_cpu, tx_cpu = cpus
    port = free_port()
    rx = installed_receiver(
        link, rx_cpu, args.cpu_tasks, args.rcvbuf, out, port, env, args.block_timeout
    )
    rows: list[dict[str, Any]] = []
    try:
        wait_listening(link.address, link.rx_ns, port, time.monotonic() + 30)
        time.sleep(0.5)
        for _ in range(args.transfers):
            got = installed_send(
                link, tx_cpu, src, port, f"{int(rate)}bps", f"{args.delay * 1e3:g}ms", env
            )
            rows.append({k: got[k] for k in ("ok", "load1", "first_loss", "time_s") if k in got})
    finally:
        stop_session(rx)
    return rows


def _block_mean(rows: list[dict[str, Any]]) -> float | None:
    losses = [r["first_loss"] for r in rows if r["ok"]]
    return statistics.fmean(losses) if losses else None


def summarise(rate: float, blocks: list[dict[str, Any]]) -> dict[str, Any]:
    """The paired comparison of one rate's blocks (in the order run).

    Pairs are consecutive blocks (one of each set-up).  With 4-6 pairs a bootstrap
    interval is too narrow, so the interval is Student's t on the paired differences, and
    the signs are counted beside it.
    """
    from scipy import stats

    pairs = [
        {b["setup"]: b["mean_first_loss"] for b in blocks[i : i + 2]}
        for i in range(0, len(blocks) - 1, 2)
    ]
    diffs = [
        p["installed"] - p["bench"]
        for p in pairs
        if p.get("installed") is not None and p.get("bench") is not None
    ]
    ci = None
    if len(diffs) >= 2:
        mean, sem = statistics.fmean(diffs), statistics.stdev(diffs) / len(diffs) ** 0.5
        half = float(stats.t.ppf(0.975, len(diffs) - 1)) * sem
        ci = [mean - half, mean + half]
    per_setup = {s: [b["mean_first_loss"] for b in blocks if b["setup"] == s] for s in SETUPS}
    return {
        "rate_bps": rate,
        "blocks": blocks,
        "paired_difference": statistics.fmean(diffs) if diffs else None,
        "paired_difference_ci": ci,
        "pairs_installed_higher": sum(d > 0 for d in diffs),
        "pairs": len(diffs),
        "block_range": {s: [min(v), max(v)] for s, v in per_setup.items() if v and None not in v},
    }


def summary_line(row: dict[str, Any]) -> str:
    """One line: the paired difference (points), its interval, the signs, the ranges."""
    ci = row["paired_difference_ci"]
    return (
        f"# {row['rate_bps'] / 1e6:.2f} Mbit/s: installed - bench "
        f"{100 * (row['paired_difference'] or 0):+.1f} points "
        f"(95 % t interval {'-' if ci is None else f'{100 * ci[0]:+.1f} to {100 * ci[1]:+.1f}'}; "
        f"installed higher in {row['pairs_installed_higher']} of {row['pairs']} pairs); "
        "block means "
        + ", ".join(
            f"{s} {100 * lo:.1f}-{100 * hi:.1f} %" for s, (lo, hi) in row["block_range"].items()
        )
    )


def main() -> None:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--rate", default="375000000", help="send rates (bit/s), comma-separated")
    ap.add_argument("--cpu-tasks", type=int, default=2, help="C busy loops on the receiver's core")
    ap.add_argument("--rcvbuf", type=int, default=2_000_000, help="SO_RCVBUF (bytes)")
    ap.add_argument("--batch", type=int, default=8, help="receiver's batch N (datagrams)")
    ap.add_argument("--delay", type=float, default=0.01, help="emulated one-way delay (s)")
    ap.add_argument("--line-rate", type=float, default=500e6, help="tbf line rate (bit/s)")
    ap.add_argument("--file-size", type=int, default=20_000_000, help="bytes")
    ap.add_argument("--blocks", type=int, default=4, help="blocks of each set-up per rate")
    ap.add_argument("--transfers", type=int, default=8, help="transfers per block")
    ap.add_argument("--block-timeout", type=float, default=300.0, help="s per block")
    ap.add_argument("--budget", type=float, default=1200.0, help="wall-time limit (s)")
    ap.add_argument("--json", default=None)
    ap.add_argument(
        "--rescore",
        default=None,
        metavar="JSON",
        help="print the summary of a saved run (its --json) again, sending nothing",
    )
    args = ap.parse_args()
    if args.rescore:
        for row in json.loads(Path(args.rescore).read_text())["results"]:
            print(summary_line(summarise(row["rate_bps"], row["blocks"])))
        return
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # the finally blocks run
    start = time.monotonic()
    print(f"# load before {os.getloadavg()}", flush=True)
    results, link = _run(args, start)
    print(f"# elapsed {time.monotonic() - start:.0f} s; load at end {os.getloadavg()}")
    if args.json:
        Path(args.json).write_text(
            json.dumps({"config": vars(args), "link": link, "results": results}, indent=1)
        )


def _run(args: argparse.Namespace, start: float) -> tuple[list[dict[str, Any]], str]:
    """Every rate's blocks, alternating the set-ups; the results and the link's kind."""
    rx_cpu, tx_cpu = sorted(os.sched_getaffinity(0))[:2]
    work = Path(tempfile.mkdtemp(prefix="blastrate-parity-"))
    results: list[dict[str, Any]] = []
    try:
        src = work / "payload.bin"
        src.write_bytes(np.random.default_rng(1).bytes(args.file_size))
        out = work / "out"
        out.mkdir()
        env = {
            **os.environ,
            "BLASTRATE_SECRET": SECRET.decode(),
            "BLASTRATE_DATABASE_URL": f"sqlite:///{work / 'profiles.db'}",
        }
        with Link("veth", args.line_rate, rx_cpu) as link:
            print(f"# link: {link.kind}; {link.note}", flush=True)
            setns(link.tx_ns)  # the in-process sender sends from the sending namespace
            os.sched_setaffinity(0, {tx_cpu})
            for rate in [float(x) for x in args.rate.split(",")]:
                blocks: list[dict[str, Any]] = []
                for k in range(2 * args.blocks):
                    if time.monotonic() - start > args.budget:
                        print("# budget spent", flush=True)
                        break
                    # Pairs alternate which set-up goes first (bench-installed, then
                    # installed-bench, ...), so a drift within a pair favours neither.
                    setup = SETUPS[(k + k // 2) % 2]
                    rows = (
                        _bench_block(link, rx_cpu, src, rate, args)
                        if setup == "bench"
                        else _installed_block(link, (rx_cpu, tx_cpu), src, rate, args, env, out)
                    )
                    mean = _block_mean(rows)
                    blocks.append({"setup": setup, "mean_first_loss": mean, "rows": rows})
                    load = statistics.fmean(r["load1"] for r in rows)
                    print(
                        f"{rate / 1e6:7.1f} Mbit/s {setup:>9}: first-blast loss "
                        f"{100 * (mean or 0):5.1f} % "
                        f"({sum(r['ok'] for r in rows)}/{len(rows)} ok, load {load:.2f})",
                        flush=True,
                    )
                row = summarise(rate, blocks)
                results.append(row)
                print(summary_line(row), flush=True)
            kind = link.kind
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return results, kind


if __name__ == "__main__":
    main()
