"""Is k, the kernel's CPU time per datagram that ``blastrate calibrate`` stores, right?

Run from the repository root, as root, on a quiet machine::

    .venv/bin/python benchmarks/kernel_cost.py --json docs/results/kernel_cost.json

Three measurements of the same quantity on the same link
(:class:`host.kernel_path.VethPair`, RPS to CPU 0, the sender on CPU 1, in the product
sender's batches), in shuffled interleaved blocks over several rates:

* **accounting**: :func:`host.kernel_path.measure_kernel_cost`, as the calibration runs it:
  CPU 0's busy time (the clock less its cpuidle residency, read on CPU 0) over paced
  datagrams into an unread socket, less a quiet window's just before;
* **proc-stat**: the same, with the busy time that ``/proc/stat`` accounts to CPU 0 read
  from elsewhere (the calibration's clock before 2026-11-28; sampled by the tick);
* **spinner**: the same sender and rates with a ``SCHED_IDLE`` loop on CPU 0
  (:class:`host.calibration.IdleSpinner`) measuring the core time everything else took,
  its speed taken from a quiet window just before each run.

k should not depend much on the rate (the model takes it constant); the methods should
agree within their spread.  Prints the per-rate means with 95 % intervals over blocks and
the ratios spinner / accounting and proc-stat / accounting pooled over rates.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import math
import multiprocessing
import os
import random
import statistics
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from datamover import HEADER_BYTES
from datamover.wire import DEFAULT_PAYLOAD_BYTES
from host import kernel_path as kp
from host.calibration import IdleSpinner

# The data mover's datagram: a 1,500-byte IP packet (1468 left in IP fragments on veth).
PAYLOAD = DEFAULT_PAYLOAD_BYTES


@contextlib.contextmanager
def _unread_sink(pair: kp.VethPair) -> Iterator[tuple[Any, tuple[str, int]]]:
    """The calibration's unread socket on the pair (unpinned): its pipe and address."""
    ctx = multiprocessing.get_context("fork")
    stop = ctx.Event()
    parent, child = ctx.Pipe()
    sink = ctx.Process(target=kp._sink, args=(pair.rx_ns, child, stop), daemon=True)
    sink.start()
    try:
        if not parent.poll(10):
            raise RuntimeError("sink did not start")
        yield parent, (pair.rx_address, parent.recv())
    finally:
        stop.set()
        sink.join(10)


def _send(
    pair: kp.VethPair, address: tuple[str, int], rate_bps: float, seconds: float, tx_cpu: int
) -> float:
    """The calibration's paced sender, in the product's batches; datagrams sent."""
    ctx = multiprocessing.get_context("fork")
    out = ctx.Array("d", 2, lock=False)
    p = ctx.Process(
        target=kp._paced,
        args=(
            pair.tx_ns,
            address,
            [bytes(HEADER_BYTES + PAYLOAD)],
            rate_bps / (8 * PAYLOAD),
            seconds,
            tx_cpu,
            out,
        ),
    )
    p.start()
    p.join(4 * seconds + 10)
    return float(out[0])


def spinner(pair: kp.VethPair, rate_bps: float, seconds: float, tx_cpu: int) -> float:
    """k from an IdleSpinner on the receive core: its loss of speed during the traffic
    against a quiet window just before, per datagram sent."""
    with (
        _unread_sink(pair) as (_, address),
        IdleSpinner(pair.rx_cpu, baseline_s=0.2) as spin,
    ):
        quiet = spin.mark()
        time.sleep(seconds / 2)
        start = spin.mark()
        idle_rate = (start[0] - quiet[0]) / (start[1] - quiet[1])
        sent = _send(pair, address, rate_bps, seconds, tx_cpu)
        end = spin.mark()
    busy_s = (end[1] - start[1]) - (end[0] - start[0]) / idle_rate
    return max(busy_s, 0.0) / max(sent, 1.0)


def proc_stat(pair: kp.VethPair, rate_bps: float, seconds: float, tx_cpu: int) -> float:
    """k from ``/proc/stat``'s busy time of the receive core, read from this process (not
    on that core), against a quiet window just before: the calibration's clock until
    2026-11-28."""
    with _unread_sink(pair) as (parent, address):
        t0, b0 = time.monotonic(), kp.cpu_busy_s(pair.rx_cpu)
        time.sleep(seconds / 2)
        n1 = kp._arrived(parent)
        t1, b1 = time.monotonic(), kp.cpu_busy_s(pair.rx_cpu)
        _send(pair, address, rate_bps, seconds, tx_cpu)
        t2, b2 = time.monotonic(), kp.cpu_busy_s(pair.rx_cpu)
        delivered = kp._arrived(parent) - n1
    background = (b1 - b0) / (t1 - t0)
    return max(b2 - b1 - background * (t2 - t1), 0.0) / max(delivered, 1)


def _ci(xs: list[float]) -> tuple[float, float, float]:
    m = statistics.fmean(xs)
    if len(xs) < 2:
        return m, math.nan, math.nan
    h = 1.96 * statistics.stdev(xs) / math.sqrt(len(xs))
    return m, m - h, m + h


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--rates", default="100e6,200e6,300e6,400e6", help="payload bit/s")
    ap.add_argument("--blocks", type=int, default=4)
    ap.add_argument("--seconds", type=float, default=2.0)
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--json", default=None)
    args = ap.parse_args()
    why = kp.veth_unavailable()
    if why is not None:
        sys.exit(f"kernel_cost.py: needs a veth link ({why})")
    rx_cpu, tx_cpu = sorted(os.sched_getaffinity(0))[:2]
    rates = [float(r) for r in args.rates.split(",")]
    rng = random.Random(args.seed)
    rows: list[dict[str, Any]] = []
    load = os.getloadavg()
    print(f"# load before {load}", flush=True)
    with kp.VethPair(rx_cpu) as pair:
        for block in range(args.blocks):
            plan = [(r, m) for r in rates for m in ("spinner", "accounting", "proc-stat")]
            rng.shuffle(plan)
            for rate, method in plan:
                if method == "accounting":
                    k = kp.measure_kernel_cost(
                        pair,
                        tx_cpu=tx_cpu,
                        rate_bps=rate,
                        datagram_bytes=HEADER_BYTES + PAYLOAD,
                        payload_bytes=PAYLOAD,
                        runs=1,
                        seconds=args.seconds,
                    ).mean
                elif method == "proc-stat":
                    k = proc_stat(pair, rate, args.seconds, tx_cpu)
                else:
                    k = spinner(pair, rate, args.seconds, tx_cpu)
                rows.append({"block": block, "rate_bps": rate, "method": method, "k_s": k})
                print(f"block {block} {rate / 1e6:.0f} Mbit/s {method}: {k * 1e6:.2f} us")
    summary: dict[str, dict[str, tuple[float, float, float]]] = {}
    methods = ("accounting", "proc-stat", "spinner")
    print("\nk per datagram (us), mean [95 % interval over blocks]")
    print("rate        " + "".join(f"{m:<26}" for m in methods))
    for rate in rates:
        cells = {
            m: _ci([r["k_s"] for r in rows if r["rate_bps"] == rate and r["method"] == m])
            for m in methods
        }
        summary[f"{rate:.0f}"] = cells
        print(
            f"{rate / 1e6:4.0f} Mbit/s  "
            + "".join(
                f"{c[0] * 1e6:7.3f} [{c[1] * 1e6:.3f}, {c[2] * 1e6:.3f}]".ljust(26)
                for c in cells.values()
            )
        )

    def pooled(method: str) -> float:
        # Geometric mean over rates of method / accounting (NaN where either is 0).
        logs = [
            math.log(cells[method][0] / cells["accounting"][0])
            for cells in summary.values()
            if cells[method][0] > 0 and cells["accounting"][0] > 0
        ]
        return math.exp(statistics.fmean(logs)) if logs else math.nan

    gm = pooled("spinner")
    gm_proc = pooled("proc-stat")
    print(f"spinner / accounting, geometric mean over rates: {gm:.3f}")
    print(f"proc-stat / accounting, geometric mean over rates: {gm_proc:.3f}")
    print(f"# load after {os.getloadavg()}")
    if args.json:
        Path(args.json).write_text(
            json.dumps(
                {
                    "load_before": load,
                    "load_after": os.getloadavg(),
                    "rows": rows,
                    "summary": summary,
                    "ratio_gmean": gm,
                    "proc_stat_ratio_gmean": gm_proc,
                },
                indent=1,
            )
        )


if __name__ == "__main__":
    main()
