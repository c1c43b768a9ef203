"""Does the predicted rate win a real transfer?  Predicted effective bottleneck rates
against real RBUDP transfers, with naive rules scored in the same run.

Run from the repository root, as root for the veth link (loopback otherwise)::

    .venv/bin/python benchmarks/validate_transfer.py --quick --json out.json --plot fig.png

The line.  ``--link veth`` (default): two network namespaces made by this script
(``blastrate-tx``, ``blastrate-rx``) joined by a veth pair, a ``tbf`` qdisc at
``--line-rate`` on the sender's end, and RPS steering the receive softirq to the
receiver's core, so the receiving host pays for its own network stack as a NIC's host
does.  ``netem`` does not work on this kernel, so the propagation delay is emulated by
the protocol (§IV of the paper: each blast starts T_prop after the previous feedback,
each feedback is taken T_prop after it arrives).  ``--link loopback`` (or no root, no
``ip``/``tc``) falls back to 127.0.0.1, where the kernel's receive work runs on the
sender's core; the JSON says which link was used.  Traffic goes only to the namespaces
made here or to loopback; every loop is bounded in count and time.

The receiving end system.  The receiver (:class:`transport.Receiver`) runs in its own
session pinned to one core together with C CPU-bound tasks (a bare Python loop) and I
I/O-bound tasks (the calibration's random-line reader); the sender is pinned to the
other core.

Calibration (never a scored run).  With the receiver alone: mu_net from the receive
core's busy time while it takes an unpaced blast over the same link (CPU seconds per
datagram, kernel and receiver together), mu_io_cpu and mu_disk from
:func:`host.calibration.measure_io_service`, the scheduler's slice from
:func:`host.calibration.measure_time_slice`, K by filling a socket of the receiver's
SO_RCVBUF, the sender's maximum rate.  ``--profile-json`` reuses an earlier run's
calibration.

Models scored (each gives a predicted rate; ablations show what each mechanism buys):

* ``timeslice`` -- the default model (:mod:`transport.timeslice`) as a calibrated host
  runs it: the scheduler's lag account (a receiver is sent away for the others' slices
  only once it has run a slice beyond its share), wake-ups that cost by the datagrams
  they take (a read of N its whole cost ``a + N b``, backlogged or not), finite blasts,
  the sender's send sizes, and the competitors c_C that C busy loops make, measured
  beside them and solved for c under that cost per read
  (``effective_competitors_read_cost``, from :func:`calibrate_contention`; ``blastrate
  calibrate`` stores the same quantity, measured by :func:`host.kernel_path.measure_competitors`);
* ``timeslice-processor-sharing`` -- the same with c = C, processor sharing's share
  1 / (C + 1): what a host without a competitor calibration runs (a built-in profile;
  a receiver's quick first-start calibration measures c_C too).
  Runs before 2026-11-29 12:00 UTC scored this form as ``timeslice`` and the default as
  ``timeslice-measured-share`` (``validation_pool.today_names`` reads them as today's);
* ``timeslice-rotation`` -- the same with the scheduler as a fixed rotation (a slice, then
  c others' slices, whatever the receiver's load) and every wake-up a full one's cost:
  the default until the lag account;
* ``timeslice-constant-slices`` -- the same with 12 Erlang stages per slice and vacation
  (coefficient of variation 0.29, against 0.58): the kernel's are nearly constant
  (``benchmarks/slice_trace.py``);
* ``timeslice-no-slices`` -- the same with processor sharing in place of slices;
* ``timeslice-stationary`` -- the same with each blast scored by the stationary loss;
* ``timeslice-skip-wakeup`` -- the same with a backlogged receiver skipping all of its
  per-wake-up cost ``a`` (``sleep_s = wakeup_s``), the default until 2026-11-29, and c_C
  solved under that receiver's cost (``effective_competitors``): with a fitted b near 0
  it drains without bound (issue #39 section 3; runs before that day scored the default
  against ``timeslice-read-cost``, which is today's default);
* ``timeslice-single-sends`` -- the default as it was until the send sizes: every
  datagram reaching the socket on its own, K and N as for single datagrams, where the
  default takes each rate's K and N at the sender's send size
  (:class:`transport.SendSizes`; ``benchmarks/send_size.py``);
* ``paper`` -- the paper's model (:func:`transport.workload_bottleneck_rate`).

Baselines: the line rate, half the line rate, and the share rule
``0.96 * mu_net * N * S_pkt * 8 / (C + 1)``.

Measurement.  Per workload: a coarse grid (a quarter, half, three quarters and all of
the line rate), a fine grid around the default model's prediction (+-5, 10, 20, 40 %),
and every model's and baseline's rate, each ``--runs`` times in shuffled order.  The
best time is the lowest mean over the grids alone; every scored rate gets
``time_ratio = mean time / best`` with a bootstrap 95 % interval.  The measured loss
onset is the lowest grid rate whose mean first-round loss exceeds 1 %; the grid rate below
it closes its bracket (``loss_onset_bracket_bps``), and a miss says when that bracket is
wider than 10 %.  The 1-minute load and the run queue (``/proc/loadavg``) are recorded
beside every transfer; a workload whose mean run queue exceeds what its own tasks explain
(C + I + 2 + ``--noise-margin``) is marked ``noisy`` and not scored.
"""

from __future__ import annotations

import argparse
import contextlib
import ctypes
import json
import math
import multiprocessing
import os
import platform
import random
import signal
import socket
import statistics
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from core_speed import windows as core_speed_windows
from veth_link import CLONE_NEWNET, Drops, Link, setns

import queues
from datamover import HEADER_BYTES, Receiver, ReceiverLimits, SendError, new_secret, send_file
from datamover.segments import enable_gro, enable_gso, segments_per_call
from datamover.sender import batch_packets_for, blast
from datamover.wire import DEFAULT_PAYLOAD_BYTES
from host import HostProfile, Workload
from host.calibration import (
    IdleSpinner,
    measure_buffer_by_send,
    measure_buffer_packets,
    measure_io_service,
    measure_time_slice,
    run_io_task,
    write_line_file,
)
from transport import SendSizes, transfer_time, workload_bottleneck_rate
from transport.timeslice import (
    competitors_per_core,
    scheduled_competitors,
    time_slice_bottleneck_rate,
    time_slice_costs,
)

# The data mover's datagram: a 1,500-byte IP packet (1468 left in IP fragments on veth).
PAYLOAD = DEFAULT_PAYLOAD_BYTES
CTX = multiprocessing.get_context("fork")
# One secret for the run; the receiver is a forked child and inherits it.
SECRET = new_secret().encode()
# The receiver's wait for stragglers after a blast (s); the model is told the same.
SETTLE_S = 0.002


#: Erlang stages of the ``timeslice-constant-slices`` ablation.
TIGHT_STAGES = 12


def _busy(cpu: int, deadline: float, progress: Any = None, slot: int = 0) -> None:
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    os.sched_setaffinity(0, {cpu})
    while time.monotonic() < deadline:
        for _ in range(100_000):
            pass
        if progress is not None:
            # Chunks of 100,000 iterations done: with the task's CPU time, a speed meter
            # of the core (benchmarks/receiver_share.py).
            progress[slot] += 1


def _io(cpu: int, path: str, deadline: float, seed: int) -> None:
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    os.sched_setaffinity(0, {cpu})
    run_io_task(path, seconds=max(deadline - time.monotonic(), 0.0), seed=seed)


def _receiver(
    cpu: int,
    out: str,
    conn: Any,
    stop: Any,
    deadline: float,
    opts: dict[str, Any],
) -> None:
    # The receiving end system: a session of its own (so its own scheduler autogroup,
    # apart from the sender's) holding the receiver and its C + I background tasks, all
    # on one core, in the receiving namespace.
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    setns(opts["netns"])
    isolate(opts["nice"])
    os.sched_setaffinity(0, {cpu})
    pids = []
    for slot in range(opts["cpu_tasks"]):
        pid = os.fork()
        if pid == 0:
            _busy(cpu, deadline, opts.get("progress"), slot)
            os._exit(0)
        pids.append(pid)
    for seed in range(opts["io_tasks"]):
        pid = os.fork()
        if pid == 0:
            _io(cpu, opts["io_file"], deadline, seed)
            os._exit(0)
        pids.append(pid)
    limits = ReceiverLimits(total_timeout_s=120, idle_timeout_s=30, accept_timeout_s=1.0)
    try:
        with Receiver(
            out,
            secret=SECRET,
            host=opts["address"],
            batch_packets=opts["batch"],
            rcvbuf_bytes=opts["rcvbuf"],
            settle_s=SETTLE_S,
            limits=limits,
            overwrite=True,
        ) as rx:
            conn.send(rx.port)
            while not stop.is_set() and time.monotonic() < deadline:
                # Accept timeouts between transfers; failures show on the sender's side.
                with contextlib.suppress(Exception):
                    done = rx.serve_one()
                    conn.send((done.wakeups, done.accepted + done.duplicates, done.reads))
    finally:
        for pid in pids:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGTERM)
        for pid in pids:
            with contextlib.suppress(ChildProcessError):
                os.waitpid(pid, 0)


def _round_trip(address: str, port: int) -> float:
    """Smallest TCP connect time to the receiver (s)."""
    best = 1.0
    for _ in range(20):
        t0 = time.perf_counter()
        with socket.create_connection((address, port), timeout=2):
            pass
        best = min(best, time.perf_counter() - t0)
    return best


@contextlib.contextmanager
def receiver_process(
    rx_cpu: int,
    args: argparse.Namespace,
    link: Link,
    deadline: float,
    cpu_tasks: int = 0,
    io_tasks: int = 0,
    io_file: Path | None = None,
    progress: Any = None,
) -> Iterator[tuple[int, Any]]:
    """A receiver process pinned to ``rx_cpu`` serving transfers until the block ends;
    yields its control port and the pipe on which it reports (wake-ups, datagrams) of
    each transfer.  With ``progress`` (a shared array of at least ``cpu_tasks`` integers,
    ``multiprocessing.RawArray``), busy task i counts its loop's chunks in slot i."""
    out_dir = tempfile.mkdtemp(
        prefix="blastrate-rx-", dir="/dev/shm" if Path("/dev/shm").is_dir() else None
    )
    stop = CTX.Event()
    parent, child = CTX.Pipe()
    rx = CTX.Process(
        target=_receiver,
        args=(
            rx_cpu,
            out_dir,
            child,
            stop,
            deadline + 5,
            {
                "nice": args.nice,
                "batch": args.batch,
                "rcvbuf": args.rcvbuf,
                "cpu_tasks": cpu_tasks,
                "io_tasks": io_tasks,
                "io_file": str(io_file),
                "netns": link.rx_ns,
                "address": link.address,
                "progress": progress,
            },
        ),
        daemon=True,
    )
    rx.start()
    try:
        if not parent.poll(10):
            raise RuntimeError("receiver did not start")
        yield parent.recv(), parent
    finally:
        stop.set()
        rx.join(timeout=5)
        if rx.is_alive():
            rx.terminate()
            rx.join(timeout=5)
        for f in Path(out_dir).iterdir():
            f.unlink()
        os.rmdir(out_dir)


def _sink(netns: str | None, address: str, conn: Any, stop: Any) -> None:
    # A UDP socket that nobody reads, in the receiving namespace: datagrams sent to it
    # cost the receive core only the kernel's work, up to the full socket.
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    setns(netns)
    sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    enable_gro(sock)  # as the receiver's socket: a batch is not split into datagrams
    sock.bind((address, 0))
    conn.send(sock.getsockname()[1])
    stop.wait(120)
    sock.close()


def kernel_cost(link: Link, rx_cpu: int, tx_cpu: int, rate_bps: float, seconds: float) -> float:
    """CPU seconds the receive core's kernel spends per datagram (s): paced datagrams
    into a socket nobody reads, the receive core watched by an :class:`IdleSpinner`."""
    stop = CTX.Event()
    parent, child = CTX.Pipe()
    sink = CTX.Process(target=_sink, args=(link.rx_ns, link.address, child, stop), daemon=True)
    sink.start()
    old = os.sched_getaffinity(0)
    try:
        if not parent.poll(10):
            raise RuntimeError("the sink did not start")
        port = parent.recv()
        udp = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        udp.connect((link.address, port))
        size = HEADER_BYTES + PAYLOAD
        # The product sender's batches at this rate, one segmented send each (GSO): the
        # kernel's work per datagram depends on it (one datagram per send cost 11 us
        # here, several times what a batch of them costs per datagram).
        batch = batch_packets_for(rate_bps, 8.0 * PAYLOAD, segments_per_call(size))
        if batch > 1 and enable_gso(udp, size) is not None:
            batch = 1
        view = memoryview(bytes(size * batch))
        count = int(rate_bps * seconds / (8 * PAYLOAD))
        os.sched_setaffinity(0, {tx_cpu})
        with IdleSpinner(rx_cpu) as spin:
            mark = spin.mark()
            blast(
                lambda chunk: udp.send(view[: size * len(chunk)]),
                np.arange(count, dtype=np.int64),
                packet_bits=8.0 * PAYLOAD,
                rate_bps=rate_bps,
                deadline=time.monotonic() + 4 * seconds,
                batch_packets=batch,
            )
            used, span = spin.busy_fraction(mark)
        udp.close()
        return used * span / count
    finally:
        os.sched_setaffinity(0, old)
        stop.set()
        sink.join(5)


def calibrate_link(
    src: Path, rx_cpu: int, tx_cpu: int, args: argparse.Namespace, link: Link, runs: int
) -> dict[str, Any]:
    """The receive path over this link with the receiver alone on its core.

    The receive core is watched by an :class:`IdleSpinner`, which sees every CPU
    second that the receiver and the kernel take from it (``/proc/stat`` would not:
    it samples kernel time by the tick).

    * k, the kernel's seconds per datagram, from datagrams paced at 60 % of the sender's
      maximum into a socket that nobody reads (:func:`kernel_cost`);
    * transfers unpaced (the first blast's achieved rate is the sender's maximum) and
      paced at 30..90 % of it, the receiver reporting its wake-ups W and datagrams D:
      the receiver's own time, the core time used less k D, is a W + b D by
      non-negative least squares, and mu_net = 1 / (a + N b): wake-ups of a full batch
      of N per second of the receiver's CPU, what the model's wake-up rate means;
    * the sender's time per paced call, from the datagrams per read of the paced
      transfers (:class:`transport.SendSizes`).
    """
    from scipy.optimize import nnls

    old = os.sched_getaffinity(0)
    rates: list[float] = []
    rows, used_s = [], []
    sends: list[float] = []
    with receiver_process(rx_cpu, args, link, time.monotonic() + 180) as (port, reports):
        os.sched_setaffinity(0, {tx_cpu})
        try:
            with IdleSpinner(rx_cpu) as spin:
                plan: list[float | None] = [None] * runs
                for _ in range(runs):
                    plan += [0.3, 0.5, 0.7, 0.9]
                for step in plan:
                    rate = None if step is None else step * statistics.fmean(rates)
                    mark = spin.mark()
                    rep = send_file(
                        src,
                        link.address,
                        port,
                        rate_bps=rate,
                        secret=SECRET,
                        name="payload.bin",
                        total_timeout_s=60,
                    )
                    if not reports.poll(10):
                        raise RuntimeError("the receiver did not report its transfer")
                    wakeups, taken, reads = reports.recv()
                    used, span = spin.busy_fraction(mark)
                    if step is None:
                        rates.append(rep.rounds[0].achieved_rate_bps)
                    elif reads and rate is not None and rate < 0.95 * link.line_rate_bps:
                        # The sender's time per call: the datagrams its sends carried
                        # (as the receiver read them) over the datagrams a second.
                        sends.append(taken / reads * 8.0 * PAYLOAD / rate)
                    rows.append((wakeups, taken))
                    used_s.append(used * span)
            rtt = _round_trip(link.address, port)
        finally:
            os.sched_setaffinity(0, old)
    sender_max = statistics.fmean(rates)
    k = statistics.fmean(
        kernel_cost(link, rx_cpu, tx_cpu, 0.6 * min(sender_max, link.line_rate_bps), 1.0)
        for _ in range(runs)
    )
    w = np.array(rows, dtype=float)
    own = np.array(used_s) - k * w[:, 1]
    (a, b), residual = nnls(w, own)
    mu_net = 1.0 / (a + args.batch * b)
    return {
        "sender_max_rate_bps": _spread(rates),
        "per_wakeup_s": a,
        "per_datagram_s": b,
        "kernel_s_per_datagram": k,
        "fit_residual_s": residual,
        "transfers": [
            {"wakeups": int(x), "datagrams": int(d), "core_s": u}
            for (x, d), u in zip(rows, used_s, strict=True)
        ],
        "mu_net": mu_net,
        # Datagrams per second the core takes at full batches, kernel included.
        "capacity_pps": 1.0 / (a / args.batch + b + k),
        "round_trip_s": rtt,
        # The sender's time per paced call (s), the median over the paced transfers
        # below the line (transport.SendSizes): its sends carry rate * this / datagram bits.
        "seconds_per_send": statistics.median(sends) if sends else None,
    }


def calibrate_contention(
    src: Path,
    rx_cpu: int,
    tx_cpu: int,
    args: argparse.Namespace,
    link: Link,
    net: dict[str, Any],
    line_bps: float,
    buffer_packets: int,
    max_tasks: int,
    runs: int,
) -> dict[str, Any]:
    """The share of its core a backlogged receiver gets beside C = 1..max_tasks busy loops.

    Blasts at the line rate into the receiver with C busy loops on its core (never a
    scored run): it cannot keep up, so over the first blast it drains
    ``(received - K) / blast_s`` datagrams per second (the buffer is full at the end).
    The time-slice model (its default) gives a backlogged receiver, which pays each read
    of N its whole cost ``a + N b``, ``left N / ((a + N b)(1 + c))`` of them, with
    ``left = 1 - lambda k`` the CPU the kernel leaves (:func:`calibrate_link`); solved
    for c, that is the effective number of competitors ``c_C``
    (:func:`transport.scheduled_competitors`), ``effective_competitors_read_cost``.
    lambda is the line rate the blasts are paced at, not each blast's achieved rate.

    ``effective_competitors`` solves the same drain for c under the
    ``timeslice-skip-wakeup`` ablation, where a backlogged receiver skips ``a`` and takes
    ``left / (b (1 + c))``.
    """
    old = os.sched_getaffinity(0)
    lam = line_bps / (8.0 * PAYLOAD)
    left = 1.0 - lam * net["kernel_s_per_datagram"]
    rows: list[dict[str, Any]] = []
    measured: list[float] = []
    read_cost: list[float] = []
    batch = int(args.batch)
    per_read_s = net["per_wakeup_s"] + batch * net["per_datagram_s"]
    for tasks in range(1, max_tasks + 1):
        drained: list[float] = []
        deadline = time.monotonic() + 120
        with receiver_process(rx_cpu, args, link, deadline, cpu_tasks=tasks) as (port, reports):
            os.sched_setaffinity(0, {tx_cpu})
            try:
                time.sleep(0.3)  # let the busy loops settle on the core
                for _ in range(runs):
                    rep = send_file(
                        src,
                        link.address,
                        port,
                        rate_bps=line_bps,
                        secret=SECRET,
                        name="payload.bin",
                        total_timeout_s=60,
                    )
                    if reports.poll(10):
                        reports.recv()
                    first = rep.rounds[0]
                    received = first.packets_sent - first.missing_after
                    # Only a blast that lost something says what the receiver drains;
                    # one that delivered less than the buffer holds says nothing either.
                    rate = None
                    if first.missing_after > 0 and first.blast_s > 0:
                        rate = (received - buffer_packets) / first.blast_s
                    if rate is not None and rate > 0:
                        drained.append(rate)
                    rows.append(
                        {
                            "cpu_tasks": tasks,
                            "first_round_loss": first.loss,
                            "blast_s": first.blast_s,
                            "drained_pps": rate,
                        }
                    )
            finally:
                os.sched_setaffinity(0, old)
        if not drained:
            # It kept up: no share measured; the model's own c stands for this C on.
            break
        b = net["per_datagram_s"]
        # A fit with b = 0 leaves the skipping receiver no cost: any c would do.
        c = left / (b * statistics.fmean(drained)) - 1.0 if b > 0 else math.inf
        # The bounds transport accepts: a receiver that drained more than the model's
        # whole core gives it is recorded as all but alone.
        measured.append(min(max(c, 1e-3), 1e3))
        c = left * batch / (per_read_s * statistics.fmean(drained)) - 1.0
        read_cost.append(min(max(c, 1e-3), 1e3))
    return {
        "effective_competitors": measured,
        "effective_competitors_read_cost": read_cost,
        "arrival_pps": lam,
        "kernel_left": left,
        "buffer_packets": buffer_packets,
        "transfers": rows,
    }


def isolate(nice: int) -> str:
    """Give this benchmark its own scheduler autogroup at ``nice``.

    Linux (with ``kernel.sched_autogroup_enabled``) shares a core fairly between
    sessions first, then between the tasks of a session.  On a machine shared with other
    users' CPU-bound sessions the receiver's core would otherwise hold C + 1 of our tasks
    AND theirs, which is not the workload the model is given.  A new session with nice
    ``nice`` weighs about 1.25**-nice times a nice-0 session (e.g. 9.3x at -10): the
    other sessions keep a small share instead of an equal one.  Returns what was done.
    """
    # A process-group leader cannot start a session: run me under `setsid` then.
    with contextlib.suppress(PermissionError):
        os.setsid()
    if os.getsid(0) != os.getpid():
        return "shared autogroup (run under setsid to isolate)"
    try:
        Path("/proc/self/autogroup").write_text(str(nice))
    except OSError as exc:
        return f"own session, autogroup nice not set ({exc.strerror})"
    return Path("/proc/self/autogroup").read_text().strip()


def _spread(xs: list[float]) -> dict[str, float]:
    if not xs:
        return {"n": 0}
    return {
        "n": len(xs),
        "mean": statistics.fmean(xs),
        "std": statistics.stdev(xs) if len(xs) > 1 else 0.0,
        "min": min(xs),
        "max": max(xs),
    }


def _runnable() -> int:
    """Tasks runnable on the whole machine right now (``/proc/loadavg``'s 4th field)."""
    return int(Path("/proc/loadavg").read_text().split()[3].split("/")[0])


def _one_transfer(
    src: Path,
    link: Link,
    port: int,
    rate: float,
    args: argparse.Namespace,
    deadline: float,
    drops: Drops,
) -> dict[str, Any]:
    load = os.getloadavg()[0]
    runnable = _runnable()
    before = drops.read()
    try:
        rep = send_file(
            src,
            link.address,
            port,
            rate_bps=rate,
            secret=SECRET,
            name="payload.bin",
            emulate_delay_s=args.delay,
            max_rounds=args.max_rounds,
            total_timeout_s=min(args.transfer_timeout, max(deadline - time.monotonic(), 1.0)),
            control_timeout_s=30,
            max_burst_packets=args.max_burst,
        )
    except SendError as exc:
        time.sleep(1.2)  # let the receiver give up on that transfer
        return {"ok": False, "error": str(exc), "load1": load, "runnable": runnable}
    return {
        "ok": True,
        "time_s": rep.transfer_s,
        "rounds": len(rep.rounds),
        "first_loss": rep.rounds[0].loss,
        "first_lost_datagrams": rep.rounds[0].missing_after,
        "achieved_rate_bps": rep.rounds[0].achieved_rate_bps,
        "load1": load,
        "runnable": runnable,
        # Every round's drops, by where the kernel dropped them.
        **{f"{where}_drops": n for where, n in drops.since(before).items()},
    }


def _bootstrap_ratio(
    num: list[float], den: list[float], rng: np.random.Generator, draws: int = 4000
) -> list[float]:
    """95 % percentile-bootstrap interval of mean(num) / mean(den)."""
    a, b = np.asarray(num), np.asarray(den)
    ra = a[rng.integers(0, a.size, (draws, a.size))].mean(axis=1)
    rb = b[rng.integers(0, b.size, (draws, b.size))].mean(axis=1)
    lo, hi = np.percentile(ra / rb, [2.5, 97.5])
    return [float(lo), float(hi)]


def predictions(
    cpu_tasks: int,
    io_tasks: int,
    profile: HostProfile,
    size: int,
    t_prop: float,
    costs: dict[str, Any],
    measured_share: tuple[float, ...] = (),
    ablations: bool = True,
) -> dict[str, dict[str, Any]]:
    """Every model's predicted rate for one workload.

    ``measured_share`` is :func:`calibrate_contention`'s ``effective_competitors`` (c_C for
    a receiver that skips its wake-up cost when backlogged, the skip-wakeup ablation's).
    Without ``ablations``: the default, its processor-sharing and single-sends forms and
    the paper's model only (with send sizes an ablation costs up to 25 s a busy workload,
    taken from the run's budget).

    ``costs`` are the time-slice model's calibrated keywords, as a calibrated host's
    provenance gives them (:func:`transport.time_slice_costs`): ``time_slice_s``,
    ``kernel_s_per_datagram``, ``settle_s``, ``wakeup_s``, ``send_sizes`` and
    ``effective_competitors`` (c_C under the default's cost per read).
    """
    w = Workload(cpu_tasks=cpu_tasks, io_tasks=io_tasks, cores=1)
    out: dict[str, dict[str, Any]] = {}

    def timeslice(**changes: Any) -> Any:
        return time_slice_bottleneck_rate(
            w, profile, file_size_bytes=size, propagation_delay_s=t_prop, **{**costs, **changes}
        )

    ts = timeslice()
    out["timeslice"] = {"rate_bps": ts.rate_bps, "model_time_s": ts.transfer_time_s}
    # Processor sharing's 1 / (C + 1) in place of the share measured beside C busy loops:
    # what a host without a competitor calibration runs.
    shared_core = timeslice(effective_competitors=())
    out["timeslice-processor-sharing"] = {
        "rate_bps": shared_core.rate_bps,
        "model_time_s": shared_core.transfer_time_s,
    }
    if costs.get("send_sizes") is not None:
        # Every datagram on its own, as the default took them before the send sizes.
        single = timeslice(send_sizes=None)
        out["timeslice-single-sends"] = {
            "rate_bps": single.rate_bps,
            "model_time_s": single.transfer_time_s,
        }
    paper = workload_bottleneck_rate(w, profile, file_size_bytes=size, propagation_delay_s=t_prop)
    out["paper"] = {
        "rate_bps": paper.bottleneck.rate_bps,
        "model_time_s": paper.bottleneck.transfer_time_s,
    }
    if not ablations:
        return out
    # Nearly constant slices, as the kernel's are (benchmarks/slice_trace.py): 12 Erlang
    # stages, a coefficient of variation of 0.29 where the default's 3 give 0.58.
    tight = timeslice(slice_stages=TIGHT_STAGES)
    out["timeslice-constant-slices"] = {
        "rate_bps": tight.rate_bps,
        "model_time_s": tight.transfer_time_s,
    }
    # The scheduler as a fixed rotation (the default before the lag account): a slice,
    # then c others' slices, whatever the receiver's load, every wake-up a full one.
    rotation = timeslice(scheduler="rotation")
    out["timeslice-rotation"] = {
        "rate_bps": rotation.rate_bps,
        "model_time_s": rotation.transfer_time_s,
    }
    # Without slices: the receiver served at the processor-sharing average all the time.
    shared = _processor_sharing(w, profile, size, t_prop, costs)
    out["timeslice-no-slices"] = {
        "rate_bps": shared.rate_bps,
        "model_time_s": shared.transfer_time_s,
    }
    # Without finite blasts: every blast scored by the stationary loss alone.
    curve = ts.curve
    lam_t = transfer_time(
        curve.rate_bps, curve.stationary_loss, size, t_prop, packet_payload_bytes=PAYLOAD
    )
    times = np.where(lam_t.completes, lam_t.total_s, np.inf)
    k = int(np.argmin(times))
    out["timeslice-stationary"] = {
        "rate_bps": float(curve.rate_bps[k]),
        "model_time_s": float(times[k]),
    }
    # A backlogged receiver that skips its whole per-wake-up cost (the default before
    # 2026-11-29): a sleep it does not take, where the default makes it a cost per read;
    # its c_C solved under that receiver's cost.
    skip = timeslice(sleep_s=costs["wakeup_s"], effective_competitors=measured_share)
    out["timeslice-skip-wakeup"] = {
        "rate_bps": skip.rate_bps,
        "model_time_s": skip.transfer_time_s,
    }
    return out


def _processor_sharing(
    w: Workload, profile: HostProfile, size: int, t_prop: float, costs: dict[str, Any]
) -> Any:
    # c = 0 with the on-rate scaled to the receiver's average share: no vacations.  The
    # wake-up's cost scales with it, so that a backlogged receiver gains the same factor.
    # c is the default's: the scheduler's c from the measured table, C without one.
    c = scheduled_competitors(
        competitors_per_core(w.cpu_tasks, w.cores), costs.get("effective_competitors") or ()
    )
    alone = Workload(cpu_tasks=0, io_tasks=w.io_tasks, cores=w.cores, disks=w.disks)
    return time_slice_bottleneck_rate(
        alone,
        profile.replace(mu_net=profile.mu_net / (1 + c)),
        file_size_bytes=size,
        propagation_delay_s=t_prop,
        **{**costs, "wakeup_s": costs["wakeup_s"] * (1 + c), "effective_competitors": ()},
    )


def loss_onset(per_rate: list[dict[str, Any]]) -> tuple[float | None, list[float] | None]:
    """The measured loss onset and its bracket ``[grid rate below, onset]`` (bit/s).

    The onset is the lowest grid rate whose mean first-round loss exceeds 1 %.  The fine
    grid follows the prediction, so where that is far from the onset the bracket is
    wide: a 100 ms row once had no grid rate between 350 and 525 Mbit/s.
    """
    in_grid = [r for r in per_rate if r["in_grid"]]
    at = next(
        (i for i, r in enumerate(in_grid) if r["first_round_loss"].get("mean", 0) > 0.01), None
    )
    if at is None:
        return None, None
    onset = in_grid[at]["rate_bps"]
    return onset, [in_grid[at - 1]["rate_bps"] if at else 0.0, onset]


def run_workload(
    cpu_tasks: int,
    io_tasks: int,
    *,
    profile: HostProfile,
    costs: dict[str, Any],
    measured_share: tuple[float, ...],
    capacity_pps: float,
    args: argparse.Namespace,
    link: Link,
    rx_cpu: int,
    tx_cpu: int,
    src: Path,
    io_file: Path | None,
    t_prop: float,
    budget_deadline: float,
    drops: Drops,
) -> dict[str, Any]:
    size = src.stat().st_size
    line = profile.line_rate_bps
    models = predictions(
        cpu_tasks,
        io_tasks,
        profile,
        size,
        t_prop,
        costs,
        measured_share,
        ablations=args.ablations,
    )
    predicted = models["timeslice"]["rate_bps"]
    # The share rule with the core's whole capacity at full batches (mu_net * N when the
    # kernel's work is counted in): 0.96 * mu_net * N * S_pkt * 8 / (C + 1).
    share = 0.96 * capacity_pps * PAYLOAD * 8 / (cpu_tasks + 1)
    baselines = {"line_rate": line, "half_line": line / 2, "share_rule": min(share, line)}
    coarse = [line * f for f in (0.25, 0.5, 0.75, 1.0)]
    fine = [predicted * (1 + d) for d in (-0.4, -0.2, -0.1, -0.05, 0.05, 0.1, 0.2, 0.4)]
    grid = sorted({round(r) for r in coarse + fine if 0 < r <= line * 1.0001})
    scored = {round(m["rate_bps"]) for m in models.values()} | {
        round(b) for b in baselines.values()
    }
    rates = sorted(set(grid) | scored)

    load_before = os.getloadavg()[0]
    # The receive core's speed just before the workload (loop iterations per CPU second,
    # nothing of ours on it): runs are compared at equal speed, and the drift shows.
    core_speed = core_speed_windows(rx_cpu, 0.2, 1)["per_cpu_s"][0]
    deadline = min(budget_deadline, time.monotonic() + args.workload_seconds)
    samples: dict[int, list[dict[str, Any]]] = {r: [] for r in rates}
    old = os.sched_getaffinity(0)
    try:
        with receiver_process(rx_cpu, args, link, deadline, cpu_tasks, io_tasks, io_file) as (
            port,
            _,
        ):
            os.sched_setaffinity(0, {tx_cpu})
            time.sleep(0.3)  # let the background tasks settle on the core
            order = random.Random(cpu_tasks * 100 + io_tasks)
            for _run in range(args.runs):
                shuffled = list(rates)
                order.shuffle(shuffled)
                for rate in shuffled:
                    if time.monotonic() > deadline:
                        break
                    samples[rate].append(
                        _one_transfer(src, link, port, rate, args, deadline, drops)
                    )
    finally:
        os.sched_setaffinity(0, old)
    taken = [s for v in samples.values() for s in v]
    if not taken:  # the budget ran out before this workload's first transfer
        raise RuntimeError(
            f"no transfer at C={cpu_tasks}, I={io_tasks}: the budget ran out (a larger --budget)"
        )
    load_during = statistics.fmean(s["load1"] for s in taken)
    runnable = statistics.fmean(s["runnable"] for s in taken)

    # The models at every measured rate: the default model's first-round loss and time.
    variants: dict[str, dict[str, Any]] = {
        "model": {},
        "processor_sharing_model": {"effective_competitors": ()},
        "single_sends_model": {"send_sizes": None},
    }
    if args.ablations:
        variants |= {
            "rotation_model": {"scheduler": "rotation"},
            "constant_slices_model": {"slice_stages": TIGHT_STAGES},
            "skip_wakeup_model": {
                "sleep_s": costs["wakeup_s"],
                "effective_competitors": measured_share,
            },
        }
    curves = {
        name: time_slice_bottleneck_rate(
            Workload(cpu_tasks=cpu_tasks, io_tasks=io_tasks, cores=1),
            profile,
            file_size_bytes=size,
            propagation_delay_s=t_prop,
            rates_bps=np.array(rates, dtype=float),
            **{**costs, **changes},
        ).curve
        for name, changes in variants.items()
        if name != "single_sends_model" or costs.get("send_sizes") is not None
    }
    ts_curve = curves["model"]
    paper = workload_bottleneck_rate(
        Workload(cpu_tasks=cpu_tasks, io_tasks=io_tasks, cores=1),
        profile,
        file_size_bytes=size,
        propagation_delay_s=t_prop,
    )
    lam = np.array(rates, dtype=float) / (8.0 * PAYLOAD)
    paper_loss = queues.loss_probability(
        lam, paper.service.rate_per_s, profile.buffer_packets, profile.coalesce_packets
    )
    per_rate = []
    for i, rate in enumerate(rates):
        ok = [s for s in samples[rate] if s["ok"]]
        per_rate.append(
            {
                "rate_bps": float(rate),
                "in_grid": rate in grid,
                "runs": len(samples[rate]),
                "failed": len(samples[rate]) - len(ok),
                "times_s": [s["time_s"] for s in ok],
                "time_s": _spread([s["time_s"] for s in ok]),
                "rounds": _spread([float(s["rounds"]) for s in ok]),
                "first_round_loss": _spread([s["first_loss"] for s in ok]),
                # Datagrams dropped per transfer (all rounds): at the socket (K) and in the
                # CPU's input queue before the socket (no term in the model).
                "socket_drops": _spread([float(s["socket_drops"]) for s in ok]),
                "backlog_drops": _spread([float(s["backlog_drops"]) for s in ok]),
                "achieved_rate_bps": _spread([s["achieved_rate_bps"] for s in ok]),
                "load1": _spread([s["load1"] for s in samples[rate]]),
                "model_time_s": float(ts_curve.transfer_time_s[i]),
                # Each variant's first-round loss (None where not solved).
                **{
                    f"{name}_loss": (
                        float(curves[name].first_round_loss[i]) if name in curves else None
                    )
                    for name in (
                        "model",
                        "processor_sharing_model",
                        "rotation_model",
                        "constant_slices_model",
                        "skip_wakeup_model",
                        "single_sends_model",
                    )
                },
                "paper_model_loss": float(paper_loss[i]),
            }
        )
    by_rate = {round(r["rate_bps"]): r for r in per_rate}
    complete = [
        r for r in per_rate if r["in_grid"] and r["failed"] == 0 and r["time_s"].get("n", 0) > 0
    ]
    best = min(complete, key=lambda r: r["time_s"]["mean"]) if complete else None
    rng = np.random.default_rng(cpu_tasks * 100 + io_tasks)

    def score(rate: float) -> dict[str, Any]:
        row = by_rate[round(rate)]
        if best is None or row["failed"] or not row["times_s"]:
            return {"rate_bps": rate, "time_ratio": None, "time_ratio_ci": None}
        return {
            "rate_bps": rate,
            "time_s": row["time_s"]["mean"],
            "time_ratio": row["time_s"]["mean"] / best["time_s"]["mean"],
            "time_ratio_ci": _bootstrap_ratio(row["times_s"], best["times_s"], rng),
        }

    onset, onset_bracket = loss_onset(per_rate)
    # What the workload itself explains: its C + I tasks, the receiver and the sender.
    # The run queue when each transfer starts, not the 1-minute load average: that lags a
    # change of workload by a minute (it marked quiet C = 0 rows after C = 3 rows noisy).
    noisy = runnable > cpu_tasks + io_tasks + 2 + args.noise_margin
    scored_models = {name: {**m, **score(m["rate_bps"])} for name, m in models.items()}
    model_onset = next((r["rate_bps"] for r in per_rate if r["model_loss"] > 0.01), None)
    return {
        "cpu_tasks": cpu_tasks,
        "io_tasks": io_tasks,
        "predicted_rate_bps": predicted,
        "models": scored_models,
        "baselines": {name: score(rate) for name, rate in baselines.items()},
        "best_rate_bps": best["rate_bps"] if best else None,
        "best_time_s": best["time_s"]["mean"] if best else None,
        "time_ratio": scored_models["timeslice"]["time_ratio"],
        "time_ratio_ci": scored_models["timeslice"]["time_ratio_ci"],
        "loss_onset_bps": onset,
        "loss_onset_bracket_bps": onset_bracket,
        "model_loss_onset_bps": model_onset,
        "load_before": load_before,
        "core_speed_per_cpu_s": core_speed,
        "load_during": load_during,
        "runnable_during": runnable,
        "noisy": noisy,
        # Where the receiving side dropped, over every transfer of the workload.
        "drops": {
            where: sum(s.get(f"{where}_drops", 0) for v in samples.values() for s in v)
            for where in ("socket", "backlog")
        },
        "rates": per_rate,
    }


def plot(result: dict[str, Any], path: str) -> None:
    """Transfer time and first-round loss against the sending rate, measured (points)
    and modelled (dashed), one row of panels per (K, N, delay)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    ws = result["workloads"]
    keys = list(dict.fromkeys((w["buffer_packets"], w["batch_packets"], w["delay_s"]) for w in ws))
    fig, axes = plt.subplots(len(keys), 2, figsize=(11, 3.6 * len(keys)), squeeze=False)
    for row, key in enumerate(keys):
        ax_t, ax_l = axes[row]
        group = [w for w in ws if (w["buffer_packets"], w["batch_packets"], w["delay_s"]) == key]
        for i, w in enumerate(group):
            color = f"C{i}"
            pts = [r for r in w["rates"] if r["time_s"].get("n")]
            x = [r["rate_bps"] / 1e6 for r in pts]
            label = f"C={w['cpu_tasks']}, I={w['io_tasks']}" + (" (noisy)" if w["noisy"] else "")
            # Measured (points with their spread) and modelled (dashed), time then loss.
            for ax, measured, modelled in (
                (ax_t, "time_s", "model_time_s"),
                (ax_l, "first_round_loss", "model_loss"),
            ):
                ax.errorbar(
                    x,
                    [r[measured]["mean"] for r in pts],
                    yerr=[r[measured]["std"] for r in pts],
                    marker="o",
                    ms=3,
                    capsize=2,
                    linestyle="none",
                    color=color,
                    label=label,
                )
                ax.plot(x, [r[modelled] for r in pts], color=color, linestyle="--", lw=1)
            ax_t.axvline(w["predicted_rate_bps"] / 1e6, color=color, linestyle=":", lw=1.2)
        K, N, delay = key
        ax_t.set_title(
            f"K={K} N={N} delay {delay * 1e3:g} ms: time (dashed: model, dotted: predicted)",
            fontsize=10,
        )
        ax_l.set_title(f"K={K} N={N} delay {delay * 1e3:g} ms: first-round loss", fontsize=10)
        ax_t.set_ylabel("transfer time (s)")
        ax_l.set_ylabel("first-round loss")
        for ax in (ax_t, ax_l):
            ax.set_xlabel("sending rate (Mbit/s)")
            ax.grid(alpha=0.3)
            ax.legend(fontsize=8)
    cfg = result["config"]
    fig.suptitle(
        f"RBUDP over {cfg['link']}, {cfg['file_size_bytes'] / 1e6:g} MB, "
        f"{cfg['runs']} runs per rate",
        fontsize=11,
    )
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


def _fmt(x: float | None, spec: str = ".3f") -> str:
    return "-" if x is None else format(x, spec)


#: The loss-curve bar: the model within this many (fraction) of the measured first-round
#: loss at every grid rate below twice the onset (:func:`loss_scored_rates`).
LOSS_BAR = 0.03


def time_bar(delay_s: float) -> float:
    """The time-ratio bar of a workload: 1.05 at 100 ms of delay and more, else 1.10."""
    return 1.05 if delay_s >= 0.1 else 1.10


def onset_ok(predicted_bps: float, w: dict[str, Any]) -> bool:
    """The onset bar: ``predicted_bps`` within 10 % of workload ``w``'s measured onset, or
    at least 0.9x its line rate where nothing was lost up to it."""
    onset = w["loss_onset_bps"]
    if onset is None:
        return predicted_bps >= 0.9 * w["line_rate_bps"]
    return abs(predicted_bps - onset) <= 0.1 * onset


def loss_scored_rates(w: dict[str, Any]) -> list[dict[str, Any]]:
    """The rate rows of workload ``w`` the loss-curve bar scores: measured, and below twice
    the onset (all of them where nothing was lost)."""
    onset = w["loss_onset_bps"]
    return [
        x
        for x in w["rates"]
        if x["first_round_loss"].get("n") and (onset is None or x["rate_bps"] < 2 * onset)
    ]


def report(result: dict[str, Any]) -> None:
    """Print the table, misses first."""
    ws = result["workloads"]
    print()
    misses = []
    for w in ws:
        tag = (
            f"K={w['buffer_packets']} N={w['batch_packets']} delay {w['delay_s'] * 1e3:g} ms "
            f"C={w['cpu_tasks']} I={w['io_tasks']}"
        )
        if w["noisy"]:
            misses.append(
                f"{tag}: noisy ({w.get('runnable_during', w['load_during']):.1f} runnable), "
                "not scored"
            )
            continue
        r, ci = w["time_ratio"], w["time_ratio_ci"]
        limit = time_bar(w["delay_s"])
        if r is None or r > limit:
            misses.append(f"{tag}: time ratio {_fmt(r)} > {limit}")
        onset, pred = w["loss_onset_bps"], w["predicted_rate_bps"]
        if onset_ok(pred, w):
            pass
        elif onset is None:
            misses.append(f"{tag}: no loss up to the line rate, predicted {pred / 1e6:.0f} Mbit/s")
        else:
            lower = (w.get("loss_onset_bracket_bps") or [onset, onset])[0]
            unresolved = (
                f" (the onset lies in {lower / 1e6:.0f}-{onset / 1e6:.0f}: the grid does not "
                "resolve it to 10 %)"
                if lower < 0.9 * onset
                else ""
            )
            misses.append(
                f"{tag}: predicted {pred / 1e6:.0f} vs measured onset {onset / 1e6:.0f} Mbit/s"
                + unresolved
            )
        gap = max(
            (abs(x["first_round_loss"]["mean"] - x["model_loss"]) for x in loss_scored_rates(w)),
            default=0.0,
        )
        if gap > LOSS_BAR:
            misses.append(f"{tag}: loss curve off by {100 * gap:.1f} points")
    print("misses:" if misses else "misses: none")
    for m in misses:
        print("  " + m)
    print()
    names = [
        "timeslice",
        "timeslice-processor-sharing",
        "timeslice-constant-slices",
        "timeslice-rotation",
        "timeslice-no-slices",
        "timeslice-stationary",
        "timeslice-skip-wakeup",
        "timeslice-single-sends",
        "paper",
    ]
    # A run whose calibration did not measure the sender's sends has no single-sends
    # ablation (its default is that model).
    names = [n for n in names if all(n in w["models"] for w in ws)]
    bases = ["line_rate", "half_line", "share_rule"]
    print(
        f"{'K':>5} {'N':>3} {'ms':>4} {'C':>2} {'I':>2} {'onset':>7} {'best':>7} "
        + " ".join(f"{n[:14]:>22}" for n in names + bases)
    )
    for w in ws:
        cells = []
        for entry in [w["models"][n] for n in names] + [w["baselines"][b] for b in bases]:
            ci = entry.get("time_ratio_ci")
            cells.append(
                f"{entry['rate_bps'] / 1e6:5.0f}:{_fmt(entry.get('time_ratio'))}"
                f"[{_fmt(ci[0] if ci else None, '.2f')},{_fmt(ci[1] if ci else None, '.2f')}]"
            )
        print(
            f"{w['buffer_packets']:>5} {w['batch_packets']:>3} {w['delay_s'] * 1e3:>4.0f} "
            f"{w['cpu_tasks']:>2} {w['io_tasks']:>2} "
            f"{_fmt((w['loss_onset_bps'] or 0) / 1e6, '7.0f')} "
            f"{_fmt((w['best_rate_bps'] or 0) / 1e6, '7.0f')} "
            + " ".join(f"{c:>22}" for c in cells)
            + ("  NOISY" if w["noisy"] else "")
        )
    worst = {}
    for n in names + bases:
        vals = [
            (w["models"].get(n) or w["baselines"].get(n))["time_ratio"]
            for w in ws
            if not w["noisy"]
        ]
        vals = [v for v in vals if v is not None]
        worst[n] = max(vals) if vals else None
    print("worst time ratio: " + ", ".join(f"{n} {_fmt(v)}" for n, v in worst.items()))
    # The loss curve of each model that gives one, by the same rule as the misses.
    gaps = {}
    for key in (
        "model_loss",
        "processor_sharing_model_loss",
        "rotation_model_loss",
        "constant_slices_model_loss",
        "skip_wakeup_model_loss",
        "single_sends_model_loss",
        "paper_model_loss",
    ):
        gaps[key] = max(
            (
                abs(x["first_round_loss"]["mean"] - x[key])
                for w in ws
                if not w["noisy"]
                for x in loss_scored_rates(w)
                if x.get(key) is not None
            ),
            default=None,
        )
    print(
        "worst loss-curve gap (points): "
        + ", ".join(f"{k} {_fmt(None if v is None else 100 * v, '.1f')}" for k, v in gaps.items())
    )
    result["worst_loss_gap"] = gaps
    dropped = {
        where: sum(w.get("drops", {}).get(where, 0) for w in ws) for where in ("socket", "backlog")
    }
    print(
        f"datagrams dropped: {dropped['socket']} at the socket (K), "
        f"{dropped['backlog']} in the receive CPU's input queue"
    )
    result["worst_time_ratio"] = worst
    result["misses"] = misses


def _list(text: str, kind: type) -> list[Any]:
    return [kind(x) for x in str(text).split(",") if x.strip()]


def main() -> None:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument(
        "--quick", action="store_true", help="a representative subset, under five minutes"
    )
    ap.add_argument("--cpu-tasks", default="0,1,2,3", help="C values, comma-separated")
    ap.add_argument(
        "--io-tasks", default=None, help="I values, comma-separated [default: 0,1,2,3; quick 0]"
    )
    ap.add_argument("--file-size", type=int, default=None, help="bytes")
    ap.add_argument(
        "--delay", default=None, help="emulated one-way delays (s), comma-separated [0.01,0.1]"
    )
    ap.add_argument("--runs", type=int, default=None, help="transfers per rate (at least 5)")
    ap.add_argument("--batch", default=None, help="N values, comma-separated [8,32; quick 8]")
    ap.add_argument(
        "--rcvbuf",
        default=None,
        help="SO_RCVBUF values (bytes), comma-separated; 0 = the system default [0,2000000]",
    )
    ap.add_argument("--link", choices=["veth", "loopback"], default="veth")
    ap.add_argument(
        "--line-rate",
        type=float,
        default=1e9,
        help="tbf rate of the veth link (payload bit/s); lowered to 85 %% of the sender's "
        "maximum, in steps of 50 Mbit/s, when the sender reaches under 90 %% of it",
    )
    ap.add_argument("--max-rounds", type=int, default=200)
    ap.add_argument("--transfer-timeout", type=float, default=30.0)
    ap.add_argument("--max-burst", type=int, default=32, help="sender's catch-up burst (packets)")
    ap.add_argument(
        "--ablations",
        action="store_true",
        help="also solve and score the ablations (constant slices, rotation, no slices, "
        "stationary, skip-wakeup): up to 25 s a busy workload with send sizes, taken from "
        "the budget",
    )
    ap.add_argument(
        "--nice", type=int, default=-10, help="autogroup nice of this benchmark's session"
    )
    ap.add_argument(
        "--noise-margin",
        type=float,
        default=1.0,
        help="load above the workload's own that marks a row noisy",
    )
    ap.add_argument(
        "--budget", type=float, default=None, help="wall-time limit (s) [quick 290, else 3 h]"
    )
    ap.add_argument(
        "--profile-json", default=None, help="reuse the calibration of an earlier --json"
    )
    ap.add_argument("--json", default=None, help="write the results here")
    ap.add_argument("--plot", default=None, help="write the plot here (PNG)")
    args = ap.parse_args()
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    quick = args.quick
    args.file_size = args.file_size or 20_000_000
    delays = _list(args.delay or ("0.01" if quick else "0.01,0.1"), float)
    batches = _list(args.batch or ("8" if quick else "8,32"), int)
    rcvbufs = [x or None for x in _list(args.rcvbuf or ("2000000,0"), int)]
    if quick and args.rcvbuf is None:
        rcvbufs = [2_000_000]
    args.runs = max(args.runs or 5, 3 if quick else 5)
    cpu_list = _list(args.cpu_tasks, int)
    io_list = _list(args.io_tasks or ("0" if quick else "0,1,2,3"), int)
    groups = [(r, n, d) for r in rcvbufs for n in batches for d in delays]
    workloads = [(c, i) for i in io_list for c in cpu_list]
    budget = args.budget or (290.0 if quick else 3 * 3600.0)
    start = time.monotonic()
    budget_deadline = start + budget

    cores = sorted(os.sched_getaffinity(0))
    if len(cores) < 2:
        sys.exit("needs two cores")
    rx_cpu, tx_cpu = cores[0], cores[1]
    isolation = isolate(args.nice)
    print(f"# scheduler: {isolation}; load before {os.getloadavg()}")
    tmp = Path(
        tempfile.mkdtemp(
            prefix="blastrate-validate-", dir="/dev/shm" if Path("/dev/shm").is_dir() else None
        )
    )
    src = tmp / "payload.bin"
    src.write_bytes(np.random.default_rng(1).bytes(args.file_size))
    main_ns = os.open("/proc/self/ns/net", os.O_RDONLY)
    link = Link(args.link, args.line_rate, rx_cpu)
    results: list[dict[str, Any]] = []
    datagram = HEADER_BYTES + PAYLOAD
    try:
        with link:
            print(f"# link: {link.kind}; {link.note}")
            drops = link.drops()  # opened here, in the receiving namespace's view
            setns(link.tx_ns)  # this process is the sender
            # Calibrate with the receiver as in the first group (never a scored run).
            args.rcvbuf, args.batch, args.delay = 2_000_000, batches[0], 0.0
            if args.profile_json:
                calibration = json.loads(Path(args.profile_json).read_text())["calibration"]
                base = HostProfile(**calibration["profile"])
            else:
                net = calibrate_link(src, rx_cpu, tx_cpu, args, link, runs=2 if quick else 3)
                sender_max = net["sender_max_rate_bps"]["mean"]
                line = args.line_rate
                # A sender held by the tbf line reaches 0.94-0.99 of it; one clearly
                # below the line would be the bottleneck itself.
                if link.kind == "veth" and sender_max < line * 0.90:
                    lowered = max(50e6, 50e6 * int(0.85 * sender_max // 50e6))
                    print(
                        f"# sender max {sender_max / 1e6:.0f} Mbit/s < line {line / 1e6:.0f}: "
                        f"line lowered to {lowered / 1e6:.0f} Mbit/s"
                    )
                    link.reset(lowered)
                    setns(link.tx_ns)
                    line = lowered
                elif link.kind == "loopback":
                    line = sender_max
                io = measure_io_service(
                    file_bytes=64 * 2**20 if quick else 256 * 2**20,
                    runs=3,
                    reads=500 if quick else 2000,
                    cpu=rx_cpu,
                    directory="/var/tmp",
                )
                slices = measure_time_slice(cpu=rx_cpu, runs=3 if quick else 5)
                base = HostProfile(
                    name="validate-transfer",
                    mu_io_cpu=io.mu_io_cpu.mean,
                    mu_disk=io.mu_disk.mean,
                    mu_net=net["mu_net"],
                    buffer_packets=64,
                    coalesce_packets=batches[0],
                    line_rate_bps=line,
                    packet_payload_bytes=PAYLOAD,
                )
                calibration = {
                    "net": net,
                    "io": io.to_dict(),
                    "time_slice_s": slices.to_dict(),
                    "load1_during": os.getloadavg()[0],
                    "profile": base.to_dict(),
                }
            net = calibration["net"]
            if "contention" not in calibration:
                calibration["contention"] = calibrate_contention(
                    src,
                    rx_cpu,
                    tx_cpu,
                    args,
                    link,
                    net,
                    base.line_rate_bps,
                    measure_buffer_packets(datagram, rcvbuf_bytes=args.rcvbuf),
                    max((c for c, _ in workloads), default=0),
                    runs=2 if quick else 3,
                )
            contention = calibration["contention"]["effective_competitors"]
            per_read = calibration["contention"].get("effective_competitors_read_cost", [])
            slice_s = calibration["time_slice_s"]["mean"]
            kernel_s = net["kernel_s_per_datagram"]
            t_rtt = net["round_trip_s"] / 2.0
            print(
                f"# per wake-up {net['per_wakeup_s'] * 1e6:.2f} us + per datagram "
                f"{net['per_datagram_s'] * 1e6:.2f} us (receiver), kernel "
                f"{kernel_s * 1e6:.2f} us/datagram, line {base.line_rate_bps / 1e6:.0f} Mbit/s, "
                f"slice {slice_s * 1e3:.2f} ms, mu_io_cpu {base.mu_io_cpu:.0f}/s, "
                f"mu_disk {base.mu_disk:.0f}/s, half RTT {t_rtt * 1e6:.0f} us; effective "
                f"competitors for C = 1..{len(per_read)}: "
                + (", ".join(f"{c:.2f}" for c in per_read) or "none measured"),
                flush=True,
            )
            io_file = None
            if any(i for _, i in workloads):
                io_file = Path(tempfile.mkstemp(prefix=".blastrate-io-", dir="/var/tmp")[1])
                write_line_file(io_file, 256 * 2**20)
            cells = len(groups) * len(workloads)
            try:
                for rcvbuf, batch, delay in groups:
                    args.rcvbuf, args.batch, args.delay = rcvbuf, batch, delay
                    k = measure_buffer_packets(datagram, rcvbuf_bytes=rcvbuf)
                    buffer_by_send = {
                        **measure_buffer_by_send(datagram, rcvbuf_bytes=rcvbuf),
                        1: k,
                    }
                    # The default model's send sizes (transport.SendSizes): this link's
                    # sender time per call and this socket's fills.
                    sends = (
                        SendSizes(
                            net["seconds_per_send"],
                            tuple(sorted(buffer_by_send.items())),
                            max_send=args.max_burst,
                            # From here up the sender is behind and its bursts are split.
                            sender_max_bps=net["sender_max_rate_bps"]["mean"],
                        )
                        if net.get("seconds_per_send")
                        else None
                    )
                    profile = base.replace(
                        buffer_packets=k,
                        coalesce_packets=min(batch, k),
                        mu_net=1.0 / (net["per_wakeup_s"] + batch * net["per_datagram_s"]),
                    )
                    capacity_pps = 1.0 / (
                        net["per_wakeup_s"] / batch + net["per_datagram_s"] + kernel_s
                    )
                    t_prop = delay + t_rtt
                    print(f"## K={k} (SO_RCVBUF {rcvbuf}), N={batch}, delay {delay * 1e3:g} ms")
                    for c, i in workloads:
                        left = cells - len(results)
                        args.workload_seconds = (budget_deadline - time.monotonic() - 5) / left
                        w = run_workload(
                            c,
                            i,
                            profile=profile,
                            costs={
                                "time_slice_s": slice_s,
                                "kernel_s_per_datagram": kernel_s,
                                "settle_s": SETTLE_S,
                                # The receiver's own cost per wake-up, from the same fit,
                                # by the product's rule (time_slice_costs): none when the
                                # fit put the whole wake-up in it (b = 0), which the model
                                # refuses (a fresh run's calibration once did).
                                "wakeup_s": time_slice_costs(
                                    {"wakeup_s": net["per_wakeup_s"]}, profile
                                ).wakeup_s,
                                "send_sizes": None if sends is None else sends.to_dict(),
                                # c_C as a calibrated host stores it, solved under the
                                # default's cost per read.
                                "effective_competitors": tuple(per_read),
                            },
                            measured_share=tuple(contention),
                            capacity_pps=capacity_pps,
                            args=args,
                            link=link,
                            rx_cpu=rx_cpu,
                            tx_cpu=tx_cpu,
                            src=src,
                            io_file=io_file,
                            t_prop=t_prop,
                            budget_deadline=budget_deadline,
                            drops=drops,
                        )
                        w.update(
                            buffer_packets=k,
                            buffer_by_send=buffer_by_send,
                            rcvbuf_bytes=rcvbuf,
                            batch_packets=batch,
                            delay_s=delay,
                            line_rate_bps=profile.line_rate_bps,
                        )
                        results.append(w)
                        print(
                            f"C={c} I={i}: predicted {w['predicted_rate_bps'] / 1e6:.0f}, onset "
                            f"{_fmt((w['loss_onset_bps'] or 0) / 1e6, '.0f')} (model "
                            f"{_fmt((w['model_loss_onset_bps'] or 0) / 1e6, '.0f')}), best "
                            f"{_fmt((w['best_rate_bps'] or 0) / 1e6, '.0f')} Mbit/s, ratio "
                            f"{_fmt(w['time_ratio'])} {w['time_ratio_ci']}; load "
                            f"{w['load_before']:.2f}/{w['load_during']:.2f}",
                            flush=True,
                        )
            finally:
                if io_file is not None:
                    io_file.unlink(missing_ok=True)
    finally:
        with contextlib.suppress(OSError):
            ctypes.CDLL(None, use_errno=True).setns(main_ns, CLONE_NEWNET)
        os.close(main_ns)
        src.unlink(missing_ok=True)
        tmp.rmdir()
    result = {
        "config": {
            "quick": quick,
            "link": link.kind,
            "link_note": link.note,
            "line_rate_bps": base.line_rate_bps,
            "file_size_bytes": args.file_size,
            "delays_s": delays,
            "batches": batches,
            "rcvbufs": rcvbufs,
            "runs": args.runs,
            "max_burst_packets": args.max_burst,
            "host": platform.node(),
            "kernel": platform.release(),
            "cores": [rx_cpu, tx_cpu],
            "scheduler": isolation,
            "elapsed_s": time.monotonic() - start,
            "load_end": os.getloadavg(),
        },
        "calibration": calibration,
        "workloads": results,
    }
    report(result)
    print(f"# elapsed {result['config']['elapsed_s']:.0f} s; load at end {os.getloadavg()}")
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=1))
    if args.plot:
        plot(result, args.plot)


if __name__ == "__main__":
    main()
