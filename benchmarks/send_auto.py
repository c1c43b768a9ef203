"""Does ``blastrate send --rate auto`` win as shipped?

Run from the repository root, as root (the veth link; loopback otherwise)::

    .venv/bin/python benchmarks/send_auto.py --json docs/results/send_auto.json

Everything runs as users run it: ``blastrate receive``, ``blastrate send`` and
``blastrate calibrate`` are the installed commands, the receiver in its own network
namespace of the veth link (:mod:`veth_link`, a ``tbf`` line of ``--line-rate``), pinned
to one core with C busy loops (its own session, so its own scheduler group), the sender
pinned to the other core.  The time scored is what the user waits for: the sender's
``total_s``, from the command's start of work to the receiver's digest check (the file's
digest, the handshake with the advice, every round); the process's wall time is kept too.

Two hosts, each with a profile database of its own made in this run:

* **out of the box**: an empty database.  The receiver's first start (alone on its core)
  measures the host quickly and stores the result as the host default, as a user's first
  start does; every later start advises from it.
* **calibrated**: ``blastrate calibrate --line-rate LINE`` (the product's calibration,
  given the line rate as a user who knows the link would), run before any cell.
* **calibrated-no-wakeup** (an ablation; only when named in ``--hosts``, with
  ``calibrated``): the same calibration as the calibration before the wake-up fit made it
  (:func:`without_wakeup_fit`): mu_net the never-sleeping loopback measurement, no
  ``wakeup_s``, and c_C for that mu_net.  Its cells are shuffled among the others', so
  the two calibrations are compared in the same run, setting by setting
  (``calibrated / calibrated-no-wakeup``: auto's time, paired by C, buffer and delay).

Cells: both hosts x C = 0..3 busy loops on the receiver's core x both socket buffers
(the default and ``--rcvbuf``) x ``--delays``, in a shuffled order, each with a fresh
receiver that has said its advice is ready.  In each cell ``--blocks`` blocks, each a fresh
shuffled order of: ``auto`` (the default model, as users run it); a fixed send at the
rate auto advised in that block (``same``, always after auto); ``auto-MODEL`` for each of
``--other-models`` (``--rate auto --model MODEL``); ``max``; and fixed rates at 25, 50, 75
and 100 % of the line.

Scored, per host, with 95 % intervals from resampling blocks within cells (4,000
resamples):

* auto / same: what the auto path costs over sending at its rate;
* auto / best fixed, the best grid rate chosen on the cell's *other* blocks (held out, no
  winner's curse);
* auto / max, over the cells where max lost more than 1 % of its first blast;
* auto / auto-MODEL, block by block: the default model against another on the product's
  path (and auto-MODEL / best fixed, / max);

each a geometric mean over cells of the per-cell geometric mean over blocks.  Per-cell
figures are diagnostics.  ``--rescore JSON`` prints a saved run's tables again.  Every
send has a time limit, every cell its receiver's, the whole run ``--budget``.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import random
import shlex
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from veth_link import Link

from datamover import new_secret
from transport.models import DEFAULT_RECEIVER_MODEL, RECEIVER_MODELS

BLASTRATE = str(Path(sys.executable).with_name("blastrate"))
BUSY = "import time\nend = time.monotonic() + {s}\nwhile time.monotonic() < end:\n    pass\n"
#: The grid of fixed rates, as fractions of the line rate.
GRID = (0.25, 0.5, 0.75, 1.0)
READY_LINE = "rate advice ready"


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
    log: Path | None = None,
) -> subprocess.Popen[bytes]:
    """``blastrate receive`` and C busy loops (each ending by itself after ``seconds``)
    in a session of their own on ``rx_cpu``; with ``nice``, its autogroup at that nice
    (as ``validate_transfer.py`` runs its receiving host); its stderr to ``log``."""
    busy = " ".join(
        f"taskset -c {rx_cpu} {sys.executable} -c {shlex.quote(BUSY.format(s=seconds))} &"
        for _ in range(cpu_tasks)
    )
    receive = " ".join(
        _in_ns(
            link.rx_ns,
            [
                *("taskset", "-c", str(rx_cpu), BLASTRATE, "receive"),
                *("--port", str(port), "--host", link.address, "--output", str(out)),
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
        stderr=subprocess.DEVNULL if log is None else log.open("ab"),
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
    link: Link,
    tx_cpu: int,
    src: Path,
    port: int,
    rate: str,
    delay: str,
    env: dict,
    model: str | None = None,
) -> dict[str, Any]:
    """One ``blastrate send --json`` at ``rate`` (as typed: ``auto``, ``max``, ``375000000bps``)
    from ``tx_cpu`` in the sending namespace: its times, rate, rounds and first-round loss.
    ``model`` is passed as ``--model`` (None: the command's default, as users run it).

    ``time_s`` is the sender's ``transfer_s`` (first blast to nothing missing),
    ``total_s`` what the user waits for once the command runs, ``wall_s`` the process's
    whole life (the interpreter's start included)."""
    load = os.getloadavg()[0]
    cmd = _in_ns(
        link.tx_ns,
        [
            *("taskset", "-c", str(tx_cpu), BLASTRATE, "send", str(src)),
            *("--to", f"{link.address}:{port}", "--rate", rate, "--emulate-delay", delay),
            *("--timeout", "60s", "--json"),
            *(("--model", model) if model else ()),
        ],
    )
    started = time.monotonic()
    done = subprocess.run(cmd, env=env, capture_output=True, timeout=120)
    wall = time.monotonic() - started
    if done.returncode != 0:
        return {"ok": False, "error": done.stderr.decode()[-300:], "load1": load}
    report = json.loads(done.stdout)
    auto = report.get("auto")
    return {
        "ok": True,
        "time_s": report["transfer_s"],
        "total_s": report["total_s"],
        "wall_s": wall,
        "handshake_s": report.get("handshake_s"),
        "accept_wait_s": report.get("accept_wait_s"),
        "rate_bps": report["rate_bps"],
        "rounds": len(report["rounds"]),
        "first_loss": report["rounds"][0]["loss"],
        "auto": auto,
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


def wait_line(log: Path, needle: str, deadline: float) -> str:
    """The first line of ``log`` (a receiver's stderr) that holds ``needle``."""
    while time.monotonic() < deadline:
        for line in log.read_text(errors="replace").splitlines():
            if needle in line:
                return line
        time.sleep(0.1)
    raise RuntimeError(f"no {needle!r} from the receiver: {log.read_text()[-500:]}")


# -- scoring ---------------------------------------------------------------------------


def _gmean(xs: Sequence[float]) -> float:
    return math.exp(statistics.fmean(math.log(x) for x in xs))


def _held_out_best(blocks: list[dict[str, Any]], i: int, rates: list[str]) -> str | None:
    """The grid rate with the lowest mean total over the blocks other than ``i``."""
    means = {}
    for r in rates:
        xs = [b[r]["total_s"] for j, b in enumerate(blocks) if j != i and b.get(r, {}).get("ok")]
        if xs:
            means[r] = statistics.fmean(xs)
    return min(means, key=means.__getitem__) if means else None


def other_autos(cell: dict[str, Any]) -> list[str]:
    """The cell's ``auto-MODEL`` rules: ``--rate auto`` with a model named."""
    return sorted({r for b in cell["blocks"] for r in b.get("order", []) if r.startswith("auto-")})


def cell_ratios(
    cell: dict[str, Any], metric: str = "total_s", rule: str = "auto"
) -> dict[str, list[float]]:
    """Per block: ``rule`` / same (``auto`` only), / held-out best fixed, / max, and
    ``auto`` / each ``auto-MODEL`` rule (key ``vs:auto-MODEL``)."""
    blocks = cell["blocks"]
    out: dict[str, list[float]] = {"same": [], "best": [], "max": []}
    for i, b in enumerate(blocks):
        auto = b.get(rule, {})
        if not auto.get("ok"):
            continue
        if rule == "auto" and b.get("same", {}).get("ok"):
            out["same"].append(auto[metric] / b["same"][metric])
        best = _held_out_best(blocks, i, cell["grid"])
        if best is not None and b.get(best, {}).get("ok"):
            out["best"].append(auto[metric] / b[best][metric])
        if b.get("max", {}).get("ok"):
            out["max"].append(auto[metric] / b["max"][metric])
        if rule == "auto":
            for other in other_autos(cell):
                if b.get(other, {}).get("ok"):
                    out.setdefault(f"vs:{other}", []).append(auto[metric] / b[other][metric])
    return out


def _max_lossy(cell: dict[str, Any]) -> bool:
    losses = [b["max"]["first_loss"] for b in cell["blocks"] if b.get("max", {}).get("ok")]
    return bool(losses) and statistics.fmean(losses) > 0.01


def pooled(
    cells: list[dict[str, Any]],
    figure: str,
    rng: np.random.Generator,
    keep: Callable[[dict[str, Any]], bool] = lambda c: True,
    metric: str = "total_s",
    resamples: int = 4000,
    rule: str = "auto",
) -> dict[str, Any]:
    """Geometric mean over cells of each cell's geometric mean over blocks, and a 95 %
    interval from resampling blocks within each cell."""
    per_cell = [cell_ratios(c, metric, rule).get(figure, []) for c in cells if keep(c)]
    per_cell = [np.log(np.asarray(x)) for x in per_cell if x]
    if not per_cell:
        return {"cells": 0, "gmean": None, "ci95": None}
    point = float(np.exp(np.mean([x.mean() for x in per_cell])))
    draws = np.empty(resamples)
    for k in range(resamples):
        draws[k] = np.mean([x[rng.integers(0, x.size, x.size)].mean() for x in per_cell])
    lo, hi = np.exp(np.percentile(draws, [2.5, 97.5]))
    return {"cells": len(per_cell), "gmean": point, "ci95": [float(lo), float(hi)]}


def host_against_host(
    cells: list[dict[str, Any]],
    host: str,
    other: str,
    rng: np.random.Generator,
    resamples: int = 4000,
) -> dict[str, Any]:
    """``host``'s auto time over ``other``'s, paired by setting (C, buffer, delay): the
    geometric mean over settings of the ratio of the two cells' geometric means over
    blocks, with a 95 % interval from resampling blocks within each cell."""

    def autos(cell: dict[str, Any]) -> np.ndarray:
        times = [b["auto"]["total_s"] for b in cell["blocks"] if b.get("auto", {}).get("ok")]
        return np.log(np.asarray(times, dtype=float))

    def key(cell: dict[str, Any]) -> tuple[Any, ...]:
        return (cell["cpu_tasks"], cell["rcvbuf"], cell["delay"])

    mine = {key(c): autos(c) for c in cells if c["host"] == host}
    theirs = {key(c): autos(c) for c in cells if c["host"] == other}
    pairs = [(mine[k], theirs[k]) for k in mine if k in theirs and mine[k].size and theirs[k].size]
    if not pairs:
        return {"settings": 0, "gmean": None, "ci95": None}
    point = float(np.exp(np.mean([a.mean() - b.mean() for a, b in pairs])))
    draws = np.empty(resamples)
    for k in range(resamples):
        draws[k] = np.mean(
            [
                a[rng.integers(0, a.size, a.size)].mean()
                - b[rng.integers(0, b.size, b.size)].mean()
                for a, b in pairs
            ]
        )
    lo, hi = np.exp(np.percentile(draws, [2.5, 97.5]))
    return {"settings": len(pairs), "gmean": point, "ci95": [float(lo), float(hi)]}


def without_wakeup_fit(
    profile: dict[str, Any], provenance: dict[str, Any]
) -> tuple[dict[str, Any], dict[str, Any]]:
    """A calibration as ``blastrate calibrate`` made it before it fitted the wake-up cost.

    mu_net goes back to the never-sleeping loopback measurement (``net.mu_net``),
    ``wakeup_s`` and ``per_datagram_s`` go, and each c_C is solved again for that mu_net
    from the same drained rate: the contention run gave ``1 + c = left / (b drained)``
    with the fit's b, and ``1 + c = left mu N / drained`` before, so ``1 + c_before =
    (1 + c) b mu N`` (clipped to [0.001, 1000] as the calibration clips it).
    """
    mu = float(provenance["net"]["mu_net"]["mean"])
    n = int(provenance["net"]["batch_packets"])  # the N the contention's capacity used
    before = {k: v for k, v in provenance.items() if k not in ("wakeup_s", "per_datagram_s")}
    b = provenance.get("per_datagram_s")
    table = provenance.get("effective_competitors")
    if b and table:
        before["effective_competitors"] = [
            min(max((1.0 + c) * b * mu * n - 1.0, 1e-3), 1e3) for c in table
        ]
    before["method"] = f"{provenance.get('method')}; ablation: without the wake-up fit"
    return {**profile, "mu_net": mu}, before


def advice_cost(cells: list[dict[str, Any]], cpu_tasks: int = 2) -> dict[str, Any]:
    """What the advice adds to a transfer with C busy loops beside the receiver (s,
    medians over blocks): auto's total minus the same-rate fixed send's, auto's wait from
    HELLO to ACCEPT, and the receiver's own time on the answer."""
    added, waits, answers = [], [], []
    for c in cells:
        if c["cpu_tasks"] != cpu_tasks:
            continue
        for b in c["blocks"]:
            auto, same = b.get("auto", {}), b.get("same", {})
            if auto.get("ok") and same.get("ok"):
                added.append(auto["total_s"] - same["total_s"])
            if auto.get("ok"):
                waits.append(auto.get("accept_wait_s") or 0.0)
                answers.append((auto.get("auto") or {}).get("advice_s") or 0.0)
    med = statistics.median
    return {
        "cpu_tasks": cpu_tasks,
        "blocks": len(added),
        "added_s": med(added) if added else float("nan"),
        "accept_wait_s": med(waits) if waits else float("nan"),
        "advice_s": med(answers) if answers else float("nan"),
    }


def report(result: dict[str, Any]) -> dict[str, Any]:
    """The pooled tables of a run (printed, and returned for the JSON)."""
    rng = np.random.default_rng(35)
    tables: dict[str, Any] = {}
    for host in ("out-of-the-box", "calibrated", "calibrated-no-wakeup"):
        cells = [c for c in result["cells"] if c["host"] == host]
        if not cells:
            continue
        rows = {
            "auto / same rate": pooled(cells, "same", rng),
            "auto / best fixed (held out)": pooled(cells, "best", rng),
            "auto / max (max lost > 1 %)": pooled(cells, "max", rng, keep=_max_lossy),
            "auto / best fixed, wall time": pooled(cells, "best", rng, metric="wall_s"),
        }
        for other in sorted({r for c in cells for r in other_autos(c)}):
            rows[f"auto / {other}"] = pooled(cells, f"vs:{other}", rng)
            rows[f"{other} / best fixed (held out)"] = pooled(cells, "best", rng, rule=other)
            rows[f"{other} / max (max lost > 1 %)"] = pooled(
                cells, "max", rng, keep=_max_lossy, rule=other
            )
        tables[host] = rows
        advised_by = sorted(
            {
                str(b["auto"]["auto"].get("model"))
                for c in cells
                for b in c["blocks"]
                if b.get("auto", {}).get("ok") and b["auto"].get("auto")
            }
        )
        print(f"\n## {host}: {len(cells)} cells; auto (the default) advised with {advised_by}")
        for name, row in rows.items():
            ci = row["ci95"]
            shown = "n/a" if row["gmean"] is None else f"{row['gmean']:.3f}"
            interval = "" if ci is None else f" [{ci[0]:.3f}, {ci[1]:.3f}]"
            print(f"{name:32s} {shown}{interval}  ({row['cells']} cells)")
    paired = host_against_host(result["cells"], "calibrated", "calibrated-no-wakeup", rng)
    if paired["gmean"] is not None:
        tables["calibrated / calibrated-no-wakeup"] = paired
        ci = paired["ci95"]
        print(
            f"\n## calibrated / calibrated-no-wakeup, auto's time paired by setting: "
            f"{paired['gmean']:.3f} [{ci[0]:.3f}, {ci[1]:.3f}] ({paired['settings']} settings)"
        )
    cost = advice_cost(result["cells"])
    tables["advice_cost"] = cost
    print(
        "\n## what the advice adds, beside 2 busy loops (C = 2): median over blocks of "
        f"auto's total - same's total {1e3 * cost['added_s']:.1f} ms ({cost['blocks']} "
        f"blocks); auto's wait for ACCEPT {1e3 * cost['accept_wait_s']:.1f} ms, the "
        f"receiver's time on the answer {1e3 * cost['advice_s']:.2f} ms (medians)"
    )
    print(
        "\n## per cell (diagnostics): auto/same, auto/best held out, auto/max; auto's rate, "
        "its first blast's loss against the model's"
    )
    for c in sorted(
        result["cells"], key=lambda c: (c["host"], c["delay"], c["rcvbuf"] or 0, c["cpu_tasks"])
    ):
        r = cell_ratios(c)
        autos = [b["auto"] for b in c["blocks"] if b.get("auto", {}).get("ok")]
        rate = statistics.fmean(a["rate_bps"] for a in autos) / 1e6 if autos else float("nan")
        waits = [a["auto"].get("advice_s") or 0.0 for a in autos if a.get("auto")]
        lost = statistics.fmean(a["first_loss"] for a in autos) if autos else float("nan")
        said = [a["auto"].get("predicted_loss") or 0.0 for a in autos if a.get("auto")]
        not_ready = sum(1 for a in autos if a.get("auto") and not a["auto"].get("ready"))
        print(
            f"{c['host']:15s} C={c['cpu_tasks']} rcvbuf={c['rcvbuf'] or 'default':>8} "
            f"delay={c['delay']:>5}: "
            + " ".join(f"{_gmean(r[k]):.3f}" if r[k] else "  n/a" for k in ("same", "best", "max"))
            + f"; auto {rate:.0f} Mbit/s, first blast lost {lost:.3f} (model "
            + f"{statistics.fmean(said or [float('nan')]):.3f}), "
            + f"advice {1e3 * statistics.fmean(waits or [0]):.1f} ms"
            + (f", {not_ready} not ready" if not_ready else "")
        )
    return tables


# -- the run ---------------------------------------------------------------------------


def _calibrate(link: Link, env: dict[str, str], line: float) -> dict[str, Any]:
    """``blastrate calibrate`` as a user who knows the line rate runs it."""
    cmd = _in_ns(
        link.rx_ns,
        [
            *(BLASTRATE, "calibrate", "--name", "calibrated-host"),
            *("--line-rate", f"{int(line)}bps", "--runs", "3", "--json"),
        ],
    )
    done = subprocess.run(cmd, env=env, capture_output=True, timeout=600, check=True)
    return dict(json.loads(done.stdout))


def _store_default(
    env: dict[str, str], profile: dict[str, Any], provenance: dict[str, Any]
) -> None:
    """Store a profile as the host default of the database ``env`` names, as
    ``blastrate calibrate`` stores its own (the product's store)."""
    from host import HostProfile
    from host.store import ProfileStore

    store = ProfileStore(env["BLASTRATE_DATABASE_URL"])
    store.put(HostProfile(**profile), provenance=provenance)
    store.set_default(profile["name"])


def _first_start(
    link: Link, rx_cpu: int, env: dict[str, str], out: Path, log: Path, deadline: float
) -> str:
    """The out-of-the-box host's first receiver start, alone: its quick calibration."""
    port = free_port()
    rx = installed_receiver(link, rx_cpu, 0, None, out, port, env, 120, log=log)
    try:
        return wait_line(log, "quick calibration", min(deadline, time.monotonic() + 120))
    finally:
        stop_session(rx)


def main() -> None:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--rescore", default=None, help="print a saved run's tables and stop")
    ap.add_argument("--line-rate", type=float, default=500e6, help="tbf line (payload bit/s)")
    ap.add_argument("--cpu-tasks", default="0,1,2,3", help="C values, comma-separated")
    ap.add_argument("--rcvbuf", default="0,2000000", help="SO_RCVBUF values; 0 = default")
    ap.add_argument("--delays", default="10ms,100ms", help="--emulate-delay values")
    ap.add_argument("--hosts", default="out-of-the-box,calibrated")
    ap.add_argument("--file-size", type=int, default=30_000_000, help="bytes")
    ap.add_argument("--blocks", type=int, default=4)
    ap.add_argument("--link", choices=["veth", "loopback"], default="veth")
    ap.add_argument("--budget", type=float, default=3600.0, help="wall-time limit (s)")
    ap.add_argument("--seed", type=int, default=35)
    ap.add_argument(
        "--other-models",
        default=",".join(m for m in RECEIVER_MODELS if m != DEFAULT_RECEIVER_MODEL),
        help="models also run in every block as --rate auto --model M (rule auto-M), "
        "comma-separated; empty for none [default: every model but the default]",
    )
    ap.add_argument("--json", default=None)
    args = ap.parse_args()
    args.other_models = [m for m in args.other_models.split(",") if m]
    for m in args.other_models:
        if m not in RECEIVER_MODELS or m == DEFAULT_RECEIVER_MODEL:
            ap.error(
                f"--other-models: {m!r} is not one of the models other than the default "
                f"({', '.join(x for x in RECEIVER_MODELS if x != DEFAULT_RECEIVER_MODEL)})"
            )
    hosts = args.hosts.split(",")
    known = ("out-of-the-box", "calibrated", "calibrated-no-wakeup")
    if not hosts or any(h not in known for h in hosts):
        ap.error(f"--hosts: each of {', '.join(known)}, got {args.hosts!r}")
    if "calibrated-no-wakeup" in hosts and "calibrated" not in hosts:
        ap.error("--hosts: calibrated-no-wakeup is made from calibrated's calibration")
    if args.rescore:
        report(json.loads(Path(args.rescore).read_text()))
        return
    start = time.monotonic()
    deadline = start + args.budget
    rx_cpu, tx_cpu = sorted(os.sched_getaffinity(0))[:2]
    work = Path(tempfile.mkdtemp(prefix="blastrate-auto-"))
    secret = new_secret()
    envs = {
        host: {
            **{k: v for k, v in os.environ.items() if k != "BLASTRATE_NO_CALIBRATE"},
            "BLASTRATE_DATABASE_URL": f"sqlite:///{work / (host + '.db')}",
            "BLASTRATE_SECRET": secret,
        }
        for host in args.hosts.split(",")
    }
    src = work / "payload.bin"
    src.write_bytes(np.random.default_rng(2).bytes(args.file_size))
    out = work / "out"
    out.mkdir()
    line = args.line_rate
    grid = [f"{int(line * f)}bps" for f in GRID]
    cells = [
        {"host": h, "cpu_tasks": c, "rcvbuf": int(b) or None, "delay": d}
        for h in envs
        for c in (int(x) for x in args.cpu_tasks.split(","))
        for b in args.rcvbuf.split(",")
        for d in args.delays.split(",")
    ]
    rng = random.Random(args.seed)
    rng.shuffle(cells)
    result: dict[str, Any] = {
        "link": args.link,
        "line_rate_bps": line,
        "file_size": args.file_size,
        "blocks": args.blocks,
        "default_model": DEFAULT_RECEIVER_MODEL,
        "other_models": args.other_models,
        "load_before": os.getloadavg(),
        "started_unix": time.time(),
        "cells": [],
    }
    print(f"# load before {os.getloadavg()}; line {line / 1e6:.0f} Mbit/s", flush=True)
    try:
        with Link(args.link, line, rx_cpu) as link:
            result["link_note"] = f"{link.kind}; {link.note}"
            print(f"# link: {result['link_note']}", flush=True)
            if "calibrated" in envs:
                cal = _calibrate(link, envs["calibrated"], line)
                result["calibration"] = cal["profile"]
                result["calibration_provenance"] = cal["provenance"]
                print(f"# calibrated: {cal['profile']}", flush=True)
                if "calibrated-no-wakeup" in envs:
                    profile, provenance = without_wakeup_fit(cal["profile"], cal["provenance"])
                    _store_default(envs["calibrated-no-wakeup"], profile, provenance)
                    result["ablation"] = {"profile": profile, "provenance": provenance}
                    print(f"# calibrated-no-wakeup: {profile}", flush=True)
            if "out-of-the-box" in envs:
                said = _first_start(
                    link, rx_cpu, envs["out-of-the-box"], out, work / "first.log", deadline
                )
                result["first_start"] = said
                print(f"# first start: {said}", flush=True)
            for cell in cells:
                if time.monotonic() > deadline:
                    print("# budget spent", flush=True)
                    break
                try:
                    cell.update(
                        run_cell(cell, link, rx_cpu, tx_cpu, src, out, work, envs, grid, args)
                    )
                except RuntimeError as exc:  # a receiver that never got ready: said, skipped
                    cell["error"] = str(exc)[:500]
                    print(f"# cell failed: {cell}", flush=True)
                    result.setdefault("failed_cells", []).append(cell)
                    continue
                result["cells"].append(cell)
                if args.json:  # what is measured survives a later failure
                    Path(args.json).write_text(json.dumps(result, indent=1))
                print(
                    f"# cell done: {cell['host']} C={cell['cpu_tasks']} "
                    f"rcvbuf={cell['rcvbuf']} delay={cell['delay']}; "
                    f"{time.monotonic() - start:.0f} s",
                    flush=True,
                )
    finally:
        shutil.rmtree(work, ignore_errors=True)
    result["elapsed_s"] = time.monotonic() - start
    result["load_after"] = os.getloadavg()
    result["tables"] = report(result)
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=1))


def run_cell(
    cell: dict[str, Any],
    link: Link,
    rx_cpu: int,
    tx_cpu: int,
    src: Path,
    out: Path,
    work: Path,
    envs: dict[str, dict[str, str]],
    grid: list[str],
    args: argparse.Namespace,
) -> dict[str, Any]:
    """One cell: a fresh receiver, ready to advise, and ``--blocks`` shuffled blocks."""
    env = envs[cell["host"]]
    port = free_port()
    log = work / f"rx-{port}.log"
    rx = installed_receiver(
        link, rx_cpu, cell["cpu_tasks"], cell["rcvbuf"], out, port, env, 900, log=log
    )
    blocks: list[dict[str, Any]] = []
    order = random.Random(f"{cell}")
    try:
        wait_listening(link.address, link.rx_ns, port, time.monotonic() + 60)
        # Beside three busy loops the advisor's threads (nice 10) get a few per cent of
        # the core: its first solve with the 2 MB buffer has taken over 120 s here.
        ready = wait_line(log, READY_LINE, time.monotonic() + 300)
        for _ in range(args.blocks):
            rules = ["auto", "same", "max", *(f"auto-{m}" for m in args.other_models), *grid]
            order.shuffle(rules)
            # "same" is sent at the rate auto advised in this block: after auto.
            a, s = rules.index("auto"), rules.index("same")
            if s < a:
                rules[a], rules[s] = rules[s], rules[a]
            block: dict[str, Any] = {"order": rules}
            for r in rules:
                rate, model = r, None
                if r == "same":
                    if not block["auto"].get("ok"):
                        continue
                    rate = f"{int(block['auto']['rate_bps'])}bps"
                elif r.startswith("auto-"):
                    rate, model = "auto", r.removeprefix("auto-")
                block[r] = installed_send(
                    link, tx_cpu, src, port, rate, cell["delay"], env, model=model
                )
            blocks.append(block)
    finally:
        stop_session(rx)
        log.unlink(missing_ok=True)
    return {"grid": grid, "ready_line": ready, "blocks": blocks}


if __name__ == "__main__":
    main()
