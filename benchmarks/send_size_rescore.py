"""What the time-slice model with send sizes would have advised in validation runs made
before the runs measured the sender's sends.

Run from the repository root::

    .venv/bin/python benchmarks/send_size_rescore.py --out /tmp/rescored \\
        docs/results/validate_transfer_v3_run{15,16,17,18}.json
    .venv/bin/python benchmarks/validation_pool.py /tmp/rescored/*.json

A diagnostic, not a score: the runs' calibrations did not measure the sender's time per
call or the socket at each send size, so both come from ``benchmarks/send_size.py``'s
results (``--send-size``, default the committed ones of 2026-11-29): the time per call
is the median over its paced rates below the line of datagrams per read x datagram bits
/ rate, and the socket's datagrams at each send size are its fills scaled to each run's
K (the fills were made at SO_RCVBUF 2,000,000; the system default's table is measured
here).  The rate is the best of 40 rates evenly up to the line, each solved with its own
K and N (:class:`transport.SendSizes`; the lab chose it so when this was first scored;
the product's search, 32 rates and a refinement, lands within a grid cell of it), stored
as ``timeslice-send-size``, and ``validation_pool.py`` times it by
interpolating each pass's measured times between the neighbouring measured rates.  The
mechanism was looked for because of these runs' misses, so only fresh runs can score it.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import numpy as np
from validate_transfer import HEADER_BYTES, PAYLOAD, SETTLE_S

from host import HostProfile, Workload
from host.calibration import measure_buffer_by_send
from transport import SendSizes, time_slice_bottleneck_rate
from transport.timeslice import time_slice_costs

RESULTS = Path(__file__).resolve().parents[1] / "docs" / "results"
#: Rates, evenly up to the line, of which the best is taken.
GRID = 40


def seconds_per_send(send_size_runs: list[dict[str, Any]]) -> float:
    """The sender's time per call (s) from ``send_size.py`` results, as the lab's
    calibration computes it: datagrams per read x datagram bits / rate, the median over
    the paced rates below the line."""
    per_rate = [
        r["datagrams_per_read"] * 8.0 * PAYLOAD / r["rate_bps"]
        for run in send_size_runs
        for r in run["rates"]
        if r["datagrams_per_read"] and r["rate_bps"] < 0.95 * run["config"]["line_rate"]
    ]
    return statistics.median(per_rate)


def rescore(
    run: dict[str, Any], t_send: float, fills: dict[int, int], default_table: dict[int, int]
) -> dict[str, Any]:
    """``run`` with ``timeslice-send-size`` added to every workload's models; ``fills`` and
    ``default_table`` are the socket's datagrams at each send size for SO_RCVBUF 2,000,000
    and for the system default."""
    cal = run["calibration"]
    net = cal["net"]
    base = HostProfile(**cal["profile"])
    for w in run["workloads"]:
        k, n, delay = w["buffer_packets"], w["batch_packets"], w["delay_s"]
        if w["rcvbuf_bytes"] is None:
            table = {s: round(v * k / default_table[1]) for s, v in default_table.items()}
        else:
            table = {s: round(v * k / fills[1]) for s, v in fills.items()}
        profile = base.replace(
            buffer_packets=k,
            coalesce_packets=min(n, k),
            mu_net=1.0 / (net["per_wakeup_s"] + n * net["per_datagram_s"]),
            line_rate_bps=w["line_rate_bps"],
        )
        costs = {
            "time_slice_s": cal["time_slice_s"]["mean"],
            "kernel_s_per_datagram": net["kernel_s_per_datagram"],
            "settle_s": SETTLE_S,
            "wakeup_s": time_slice_costs({"wakeup_s": net["per_wakeup_s"]}, profile).wakeup_s,
        }
        sends = SendSizes(t_send, tuple(sorted(table.items())), run["config"]["max_burst_packets"])
        grid = profile.line_rate_bps * np.arange(1, GRID + 1) / GRID
        best = time_slice_bottleneck_rate(
            Workload(cpu_tasks=w["cpu_tasks"], io_tasks=w["io_tasks"], cores=1),
            profile,
            file_size_bytes=run["config"]["file_size_bytes"],
            propagation_delay_s=delay + net["round_trip_s"] / 2.0,
            rates_bps=grid,
            send_sizes=sends,
            **costs,
        )
        w["models"]["timeslice-send-size"] = {
            "rate_bps": best.rate_bps,
            "model_time_s": best.transfer_time_s,
        }
    return run


def main() -> None:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("runs", nargs="+", help="validate_transfer.py --json results")
    ap.add_argument(
        "--send-size",
        nargs="+",
        default=[str(RESULTS / f"send_size_c{c}.json") for c in range(4)],
        help="send_size.py --json results",
    )
    ap.add_argument("--out", required=True, help="directory for the rescored copies")
    args = ap.parse_args()
    send_size_runs = [json.loads(Path(p).read_text()) for p in args.send_size]
    t_send = seconds_per_send(send_size_runs)
    fills = {f["segments"]: f["datagrams"] for f in send_size_runs[0]["fill"]}
    datagram = HEADER_BYTES + PAYLOAD
    default_table = measure_buffer_by_send(datagram)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    print(f"# the sender's time per call: {t_send * 1e6:.1f} us")
    for path in args.runs:
        run = rescore(json.loads(Path(path).read_text()), t_send, fills, default_table)
        target = out / Path(path).name
        target.write_text(json.dumps(run) + "\n")
        rates = [
            f"C={w['cpu_tasks']} K={w['buffer_packets']} {w['delay_s'] * 1e3:g} ms: "
            f"{w['models']['timeslice']['rate_bps'] / 1e6:.0f} -> "
            f"{w['models']['timeslice-send-size']['rate_bps'] / 1e6:.0f} "
            f"(best {w['best_rate_bps'] / 1e6:.0f})"
            for w in run["workloads"]
        ]
        print(f"{target}:\n  " + "\n  ".join(rates))


if __name__ == "__main__":
    main()
