"""Does the unit of the receiving core's work grow with the sending rate?

Run from the repository root, as root, on a quiet machine::

    .venv/bin/python benchmarks/send_size.py --json docs/results/send_size.json

The model counts the receiver's buffer K, its kernel cost k and its read of N in
datagrams.  The product's sender does not send datagrams: it sends one UDP GSO buffer per
paced call (what the rate sends in 50 us, and every datagram already due when it runs
behind, up to its burst), and the product's receiver has UDP GRO on, so the kernel keeps
each such buffer whole up to the socket and hands it over in one read.  If the sends grow
with the rate, so do the datagrams a socket of a given SO_RCVBUF holds, the datagrams a
wake-up takes and the datagrams the kernel's per-packet work is spread over.

Two measurements, both of the product's own code:

* **fill**: a GRO socket of ``--rcvbuf`` (as :func:`datamover.segments.enable_gro` sets
  it) filled on loopback with GSO sends of s datagrams, for s = 1, 2, 3, 4, 6, 8, 16, 32:
  the datagrams it holds (K(s); ``host.calibration.measure_buffer_packets`` is s = 1);
* **transfers**: the validation's lab (``validate_transfer.py``: veth with ``tbf``, RPS
  to the receiver's core, the product's receiver pinned there beside ``--cpu-tasks`` busy
  loops, ``send_file`` on the other core, ``--delay`` emulated), transfers at each of
  ``--rates`` in shuffled blocks.  Per transfer: datagrams per read (the sender's sends as
  the socket saw them), datagrams and reads per wake-up, the first blast's loss, and the
  socket's drops (``RcvbufErrors`` counts buffers, not datagrams).

Prints the per-rate means with the spread over blocks, and writes everything to
``--json``.  A diagnostic: nothing here is a model's parameter.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import signal
import socket
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from validate_transfer import PAYLOAD, _one_transfer, receiver_process
from veth_link import Drops, Link, setns

from datamover import HEADER_BYTES
from datamover.segments import SOL_UDP, UDP_SEGMENT, enable_gro

#: Sends per fill: a bound on the measurement (the socket fills long before).
_MAX_FILL_SENDS = 1 << 16


def fill(segments: int, rcvbuf_bytes: int, datagram_bytes: int) -> dict[str, int]:
    """Datagrams and buffers a GRO socket holds after GSO sends of ``segments`` each."""
    rx = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    tx = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    try:
        rx.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, rcvbuf_bytes)
        gro = enable_gro(rx)
        rx.bind(("127.0.0.1", 0))
        rx.setblocking(False)
        tx.connect(rx.getsockname())
        if segments > 1:
            tx.setsockopt(SOL_UDP, UDP_SEGMENT, datagram_bytes)
        granted = rx.getsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF)
        data = bytes(datagram_bytes * segments)
        sends = min(_MAX_FILL_SENDS, 2 * granted // len(data) + 16)
        for _ in range(sends):
            tx.send(data)  # loopback delivers (or drops) synchronously
        datagrams = buffers = 0
        buf = bytearray(datagram_bytes * 64 + 1)
        while True:
            try:
                got = rx.recv_into(buf)
            except BlockingIOError:
                break
            buffers += 1
            datagrams += -(-got // datagram_bytes)
        return {
            "segments": segments,
            "datagrams": datagrams,
            "buffers": buffers,
            "granted_bytes": granted,
            "gro": gro is None,
        }
    finally:
        rx.close()
        tx.close()


def transfer(
    src: Path,
    link: Link,
    port: int,
    reports: Any,
    rate_bps: float,
    args: argparse.Namespace,
    deadline: float,
    drops: Drops,
) -> dict[str, Any]:
    """One transfer at ``rate_bps`` as the validation makes it, with what the receiver saw
    of it: its wake-ups, datagrams and reads."""
    row = _one_transfer(src, link, port, rate_bps, args, deadline, drops)
    if row["ok"] and reports.poll(10):
        wakeups, datagrams, reads = reports.recv()
        row |= {"wakeups": wakeups, "datagrams": datagrams, "reads": reads}
    return row


def _mean(rows: list[dict[str, Any]], f: Any) -> float | None:
    xs = [f(r) for r in rows]
    xs = [x for x in xs if x is not None]
    return statistics.fmean(xs) if xs else None


def summarise(rate: float, rows: list[dict[str, Any]]) -> dict[str, Any]:
    """Per-rate means of one block's transfers, and over blocks."""
    ok = [r for r in rows if r["ok"] and "reads" in r]

    def ratio(num: str, den: str) -> Any:
        return lambda r: r[num] / r[den] if r[den] else None

    lost_per_drop = [
        r["first_lost_datagrams"] / r["socket_drops"] for r in ok if r["socket_drops"] > 0
    ]
    return {
        "rate_bps": rate,
        "transfers": len(ok),
        "failed": len(rows) - len(ok),
        "datagrams_per_read": _mean(ok, ratio("datagrams", "reads")),
        "datagrams_per_wakeup": _mean(ok, ratio("datagrams", "wakeups")),
        "reads_per_wakeup": _mean(ok, ratio("reads", "wakeups")),
        "first_loss": _mean(ok, lambda r: r["first_loss"]),
        "socket_drops": _mean(ok, lambda r: r["socket_drops"]),
        "backlog_drops": _mean(ok, lambda r: r["backlog_drops"]),
        # First-blast datagrams lost per buffer the socket dropped (all rounds' drops: a
        # lower bound on the datagrams per dropped buffer when later rounds drop too).
        "first_lost_per_socket_drop": statistics.fmean(lost_per_drop) if lost_per_drop else None,
        "time_s": _mean(ok, lambda r: r["time_s"]),
        "load1": _mean(ok, lambda r: r["load1"]),
    }


def main() -> None:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--cpu-tasks", type=int, default=3, help="busy loops beside the receiver")
    ap.add_argument(
        "--rates", default="150,250,500,750,1000", help="sending rates (Mbit/s), comma-separated"
    )
    ap.add_argument("--blocks", type=int, default=3, help="shuffled passes over the rates")
    ap.add_argument("--transfers", type=int, default=2, help="transfers per rate per block")
    ap.add_argument("--delay", type=float, default=0.01, help="emulated one-way delay (s)")
    ap.add_argument("--rcvbuf", type=int, default=2_000_000, help="receiver's SO_RCVBUF (bytes)")
    ap.add_argument("--batch", type=int, default=8, help="receiver's N (datagrams a wake-up)")
    ap.add_argument("--file-size", type=int, default=20_000_000, help="bytes")
    ap.add_argument("--line-rate", type=float, default=1e9, help="tbf rate (payload bit/s)")
    ap.add_argument("--budget", type=float, default=900.0, help="wall-time limit (s)")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--json", default=None)
    # The validation's transfer settings (validate_transfer.py's defaults).
    ap.set_defaults(max_rounds=200, transfer_timeout=60.0, max_burst=32)
    args = ap.parse_args()
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    rates = [float(x) * 1e6 for x in args.rates.split(",") if x]
    if not rates or any(r <= 0 for r in rates) or args.blocks < 1 or args.transfers < 1:
        ap.error("--rates, --blocks and --transfers must be positive")
    datagram = PAYLOAD + HEADER_BYTES
    started = time.monotonic()
    deadline = started + args.budget
    load_before = os.getloadavg()
    print(f"# load before {load_before}", flush=True)

    fills = [fill(s, args.rcvbuf, datagram) for s in (1, 2, 3, 4, 6, 8, 16, 32)]
    for f in fills:
        print(
            f"fill: sends of {f['segments']:>2}: {f['datagrams']:>5} datagrams in "
            f"{f['buffers']:>5} buffers (SO_RCVBUF granted {f['granted_bytes']})",
            flush=True,
        )

    rx_cpu, tx_cpu = 0, 1
    blocks: list[dict[float, list[dict[str, Any]]]] = []
    with tempfile.TemporaryDirectory(dir="/dev/shm" if Path("/dev/shm").is_dir() else None) as d:
        src = Path(d) / "payload.bin"
        src.write_bytes(os.urandom(args.file_size))
        with Link("veth", args.line_rate, rx_cpu) as link:
            drops = link.drops()  # opened here, in the receiving namespace's view
            setns(link.tx_ns)  # this process is the sender
            opts = argparse.Namespace(nice=-10, batch=args.batch, rcvbuf=args.rcvbuf)
            old = os.sched_getaffinity(0)
            try:
                with receiver_process(rx_cpu, opts, link, deadline, cpu_tasks=args.cpu_tasks) as (
                    port,
                    reports,
                ):
                    os.sched_setaffinity(0, {tx_cpu})
                    time.sleep(0.5)  # the busy loops settle on the core
                    order = random.Random(args.seed)
                    for b in range(args.blocks):
                        shuffled = list(rates)
                        order.shuffle(shuffled)
                        block: dict[float, list[dict[str, Any]]] = {r: [] for r in rates}
                        for rate in shuffled:
                            for _ in range(args.transfers):
                                if time.monotonic() > deadline:
                                    break
                                row = transfer(
                                    src, link, port, reports, rate, args, deadline, drops
                                )
                                block[rate].append(row)
                        blocks.append(block)
                        print(f"block {b} done at {time.monotonic() - started:.0f} s", flush=True)
            finally:
                os.sched_setaffinity(0, old)
                drops.close()
            link_note = link.note or f"{link.kind}, RPS to CPU {rx_cpu}"

    summary = []
    print(
        f"\n# C = {args.cpu_tasks}, delay {args.delay * 1e3:g} ms, SO_RCVBUF {args.rcvbuf}, "
        f"N = {args.batch}; per rate: mean over blocks (min-max of block means)"
    )
    print("rate Mbit/s | dgrams/read | dgrams/wake | reads/wake | first loss | lost/drop")
    for rate in rates:
        per_block = [summarise(rate, blk[rate]) for blk in blocks]
        pooled = summarise(rate, [r for blk in blocks for r in blk[rate]])
        pooled["blocks"] = per_block
        summary.append(pooled)

        def span(key: str, rows: list[dict[str, Any]] = per_block) -> str:
            xs = [r[key] for r in rows if r[key] is not None]
            return f"{min(xs):.2f}-{max(xs):.2f}" if xs else "-"

        def val(key: str, row: dict[str, Any] = pooled) -> str:
            return "-" if row[key] is None else f"{row[key]:.2f}"

        print(
            f"{rate / 1e6:>11.0f} | {val('datagrams_per_read')} ({span('datagrams_per_read')})"
            f" | {val('datagrams_per_wakeup')} ({span('datagrams_per_wakeup')})"
            f" | {val('reads_per_wakeup')} | {val('first_loss')} ({span('first_loss')})"
            f" | {val('first_lost_per_socket_drop')}"
        )
    load_after = os.getloadavg()
    print(f"# load after {load_after}; {time.monotonic() - started:.0f} s")
    if args.json:
        out = {
            "config": vars(args) | {"link": link_note, "datagram_bytes": datagram},
            "load_before": load_before,
            "load_after": load_after,
            "fill": fills,
            "rates": summary,
            "transfers": [
                {"block": b, "rate_bps": r, **row}
                for b, blk in enumerate(blocks)
                for r, rows in blk.items()
                for row in rows
            ],
        }
        Path(args.json).write_text(json.dumps(out, indent=1) + "\n")


if __name__ == "__main__":
    main()
