"""Is k, the kernel's CPU time per datagram that ``blastrate calibrate`` stores, right?

Run from the repository root, as root, on a quiet machine::

    .venv/bin/python benchmarks/kernel_cost.py --json docs/results/kernel_cost.json

Two independent measurements of the same quantity on the same link
(:class:`host.kernel_path.VethPair`, RPS to CPU 0, the sender on CPU 1), in shuffled
interleaved blocks over several rates:

* **accounting**: :func:`host.kernel_path.measure_kernel_cost`, as the calibration runs it:
  CPU 0's busy time by the kernel's accounting (``/proc/stat``) over paced datagrams into
  an unread socket, less a quiet window's just before;
* **spinner**: the same datagrams with a ``SCHED_IDLE`` loop on CPU 0
  (:class:`host.calibration.IdleSpinner`) measuring the core time everything else took,
  its speed taken from a quiet window just before each run.

k should not depend much on the rate (the model takes it constant); the two methods
should agree within their spread.  Prints the per-rate means with 95 % intervals over
blocks and the ratio spinner / accounting pooled over rates.
"""

from __future__ import annotations

import argparse
import json
import math
import multiprocessing
import os
import random
import statistics
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from datamover import HEADER_BYTES
from datamover.wire import DEFAULT_PAYLOAD_BYTES
from host import kernel_path as kp
from host.calibration import IdleSpinner

# The data mover's datagram: a 1,500-byte IP packet (1468 left in IP fragments on veth).
PAYLOAD = DEFAULT_PAYLOAD_BYTES


def spinner(pair: kp.VethPair, rate_bps: float, seconds: float, tx_cpu: int) -> float:
    """k from an IdleSpinner on the receive core: its loss of speed during the traffic
    against a quiet window just before, per datagram."""
    ctx = multiprocessing.get_context("fork")
    stop = ctx.Event()
    parent, child = ctx.Pipe()
    sink = ctx.Process(target=kp._sink, args=(pair.rx_ns, child, stop), daemon=True)
    sink.start()
    try:
        if not parent.poll(10):
            raise RuntimeError("sink did not start")
        address = (pair.rx_address, parent.recv())
        with IdleSpinner(pair.rx_cpu, baseline_s=0.2) as spin:
            quiet = spin.mark()
            time.sleep(seconds / 2)
            start = spin.mark()
            idle_rate = (start[0] - quiet[0]) / (start[1] - quiet[1])
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
            end = spin.mark()
        span = end[1] - start[1]
        busy_s = span - (end[0] - start[0]) / idle_rate
        return max(busy_s, 0.0) / out[0]
    finally:
        stop.set()
        sink.join(10)


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
            plan = [(r, m) for r in rates for m in ("spinner", "accounting")]
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
                else:
                    k = spinner(pair, rate, args.seconds, tx_cpu)
                rows.append({"block": block, "rate_bps": rate, "method": method, "k_s": k})
                print(f"block {block} {rate / 1e6:.0f} Mbit/s {method}: {k * 1e6:.2f} us")
    summary = {}
    print("\nrate        spinner (us)            accounting (us)         ratio")
    ratios = []
    for rate in rates:
        s = [r["k_s"] for r in rows if r["rate_bps"] == rate and r["method"] == "spinner"]
        a = [r["k_s"] for r in rows if r["rate_bps"] == rate and r["method"] == "accounting"]
        ms, a_s = _ci(s), _ci(a)
        ratios.append(ms[0] / a_s[0])
        summary[f"{rate:.0f}"] = {"spinner": ms, "accounting": a_s}
        print(
            f"{rate / 1e6:4.0f} Mbit/s  {ms[0] * 1e6:6.2f} [{ms[1] * 1e6:.2f}, {ms[2] * 1e6:.2f}]"
            f"   {a_s[0] * 1e6:6.2f} [{a_s[1] * 1e6:.2f}, {a_s[2] * 1e6:.2f}]   "
            f"{ms[0] / a_s[0]:.3f}"
        )
    gm = math.exp(statistics.fmean(math.log(x) for x in ratios))
    print(f"spinner / accounting, geometric mean over rates: {gm:.3f}")
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
                },
                indent=1,
            )
        )


if __name__ == "__main__":
    main()
