"""The kernel's part of a receiver's core: what the model's k and c_C are, measured.

Behind a NIC, the kernel's receive work for each datagram (the driver's poll, IP and UDP,
the socket's queue) runs in softirq context on the core that the NIC's interrupt, or
Receive Packet Steering (RPS), sends it to: with the usual settings, the receiver's own.
The time-slice model (:func:`transport.time_slice_bottleneck_rate`) charges that work to
the receiver's core as ``kernel_s_per_datagram`` (k), and shares what is left between the
receiver and its C competitors as the scheduler really shares it (``effective_competitors``,
c_C, :func:`transport.scheduled_competitors`).

Over loopback neither can be seen: the sender's ``send`` runs the whole receive path on
the *sender's* core, so a calibration over loopback finds k = 0 and a receiver that never
competes with the kernel.  On a veth link with RPS to the receiver's core it costs
4-7 us of that core per datagram on the 2-core machine this was built on
(``docs/results/kernel_cost.txt``), a fifth of the core at 500 Mbit/s, and it competes
with the receiver for the scheduler too; a model that leaves it out advises rates the
receiver cannot take.

:class:`VethPair` makes that path for a measurement: two network namespaces of this
process's own (names carry the process id), joined by a veth pair, with RPS steering the
receive softirq to the receiver's core.  It needs root and ``ip``; without them a
calibration says so and stores no k (:func:`measure_kernel_share`).  Traffic goes only
between the two namespaces made here, bounded in count and time.

* :func:`measure_kernel_cost`: k, from paced datagrams into a socket nobody reads, the
  receive core's busy time by the kernel's own accounting, a quiet window subtracted;
* :func:`measure_wakeup_cost`: the receive path's own cost on its core, per wake-up (a,
  the model's ``wakeup_s``) and per datagram (b), from paced runs of the product's receive
  path on a GRO socket, the kernel's k taken out;
* :func:`measure_competitors`: c_C for C = 1, 2, ... busy loops on the receiver's core,
  from how many datagrams a backlogged receiver drains beside them.
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import itertools
import math
import multiprocessing
import os
import selectors
import shutil
import socket
import subprocess
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from .calibration import _MAX_SEGMENTS, _SOL_UDP, _UDP_GRO, _UDP_SEGMENT, Spread

__all__ = [
    "COMPETITORS_COST",
    "KernelShare",
    "VethPair",
    "WakeupCost",
    "cpu_busy_s",
    "fit_wakeup_cost",
    "measure_competitors",
    "measure_kernel_cost",
    "measure_kernel_share",
    "measure_sender_rate",
    "measure_wakeup_cost",
    "veth_unavailable",
]

# The receiver cost a stored c_C was solved under, stored beside it: a backlogged receiver
# pays each read's whole cost a + N b (capacity N mu_net).  ``transport.time_slice_costs``
# takes a table only with this mark: one solved before 2026-11-29, when the model let a
# backlogged receiver skip a, is too large for today's model and gives too low advice.
COMPETITORS_COST = "per_read"

_CLONE_NEWNET = 0x40000000
# The pair's two ends: a /30 inside namespaces made here (no route leaves them).
_TX_ADDR, _RX_ADDR = "10.231.78.1", "10.231.78.2"
_names = itertools.count()
# c_C as a calibration stores it (transport.timeslice reads [0.001, 1000]).
_MIN_C, _MAX_C = 1e-3, 1e3


def veth_unavailable() -> str | None:
    """Why :class:`VethPair` cannot be made here, or None when it can be tried."""
    if not hasattr(os, "geteuid") or os.geteuid() != 0:
        return "not root"
    if shutil.which("ip") is None:
        return "no `ip` command (iproute2)"
    if not os.path.isdir("/proc/self/ns"):
        return "no network namespaces"
    return None


def _ip(*args: str) -> None:
    subprocess.run(["ip", *args], check=True, capture_output=True, timeout=10)


def enter_namespace(name: str) -> None:
    """Move the calling thread into network namespace ``name`` (``ip netns`` made it).

    Sockets made afterwards live there.  Call it in a process of its own (a forked
    measurement child): a network namespace belongs to a thread, not to a process.
    """
    fd = os.open(f"/run/netns/{name}", os.O_RDONLY)
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        if libc.setns(fd, _CLONE_NEWNET) != 0:
            raise OSError(ctypes.get_errno(), f"setns into {name}")
    finally:
        os.close(fd)


class VethPair:
    """Two namespaces of this process's own, a veth pair between them, RPS to one core.

    Use as a context manager: the namespaces and the pair are gone on exit, also after
    an error.  Needs root and ``ip`` (:func:`veth_unavailable`).

    Parameters
    ----------
    rx_cpu : int
        The core that the receiving end's softirq work is steered to (RPS).

    Attributes
    ----------
    tx_ns, rx_ns : str
        The namespaces' names (``ip netns``), for :func:`enter_namespace`.
    rx_address : str
        The receiving end's IPv4 address, reachable from ``tx_ns`` only.
    """

    def __init__(self, rx_cpu: int) -> None:
        tag = f"{os.getpid()}-{next(_names)}"
        self.rx_cpu = rx_cpu
        self.tx_ns, self.rx_ns = f"blastrate-k{tag}-tx", f"blastrate-k{tag}-rx"
        # Device names are at most 15 bytes; made in this namespace, so unique here.
        short = f"{os.getpid() % 10**7}{tag.rsplit('-', 1)[1][-2:]}"
        self._tx_dev, self._rx_dev = f"bk{short}t", f"bk{short}r"
        self.rx_address = _RX_ADDR

    def __enter__(self) -> VethPair:
        try:
            self._make()
        except BaseException:
            self._remove()
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        self._remove()

    def _make(self) -> None:
        _ip("netns", "add", self.tx_ns)
        _ip("netns", "add", self.rx_ns)
        _ip("link", "add", self._tx_dev, "type", "veth", "peer", "name", self._rx_dev)
        _ip("link", "set", self._tx_dev, "netns", self.tx_ns)
        _ip("link", "set", self._rx_dev, "netns", self.rx_ns)
        for ns, dev, addr in (
            (self.tx_ns, self._tx_dev, _TX_ADDR),
            (self.rx_ns, self._rx_dev, _RX_ADDR),
        ):
            _ip("-n", ns, "addr", "add", f"{addr}/30", "dev", dev)
            _ip("-n", ns, "link", "set", dev, "up")
        # sysfs shows a device's queues only to a mount made in its namespace, which
        # `ip netns exec` makes for the command it runs.
        mask = format(1 << self.rx_cpu, "x")
        rps = f"/sys/class/net/{self._rx_dev}/queues/rx-0/rps_cpus"
        _ip("netns", "exec", self.rx_ns, "sh", "-c", f"echo {mask} > {rps}")

    def _remove(self) -> None:
        # Deleting a namespace deletes the veth end inside it, and so the pair.
        for ns in (self.tx_ns, self.rx_ns):
            subprocess.run(["ip", "netns", "del", ns], capture_output=True, timeout=10)


def _pin(cpu: int) -> None:
    os.sched_setaffinity(0, {cpu})


def udp_arrived() -> int:
    """Datagrams that reached UDP in this thread's network namespace since it was made:
    ``/proc/net/snmp``'s InDatagrams, NoPorts and InErrors (the last counts those a full
    socket dropped).  What a veth pair delivered; datagrams dropped before it (a full
    backlog queue) are not in it."""
    with open("/proc/self/net/snmp") as f:
        rows = [line.split() for line in f if line.startswith("Udp:")]
    head, values = rows[0], rows[1]
    return sum(int(values[head.index(k)]) for k in ("InDatagrams", "NoPorts", "InErrors"))


def _sink(ns: str, conn: Any, stop: Any, cpu: int | None = None) -> None:
    # A UDP socket that nobody reads: datagrams sent to it cost the receive core only
    # the kernel's work, up to the full socket.  Answers each message on ``conn`` with
    # udp_arrived() of its namespace and, when pinned to ``cpu``, that core's busy
    # seconds and the time (_busy_here; NaN unpinned).
    enter_namespace(ns)
    if cpu is not None:
        _pin(cpu)
    sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    sock.bind((_RX_ADDR, 0))
    conn.send(sock.getsockname()[1])
    end = time.monotonic() + 120
    while not stop.is_set() and time.monotonic() < end:
        if conn.poll(0.05):
            conn.recv()
            busy = math.nan if cpu is None else _busy_here(cpu)
            conn.send((udp_arrived(), busy, time.monotonic()))
    sock.close()


def _ask(conn: Any, who: str) -> tuple[Any, ...]:
    # A measurement child's totals, asked over its pipe: the kernel-cost sink answers
    # (datagrams arrived, busy seconds, when), the wake-up receiver (wake-ups, datagrams
    # taken, busy seconds, when); both clocks are the child's own.
    conn.send("count")
    if not conn.poll(10):
        raise RuntimeError(f"the {who} stopped answering")
    return tuple(conn.recv())


def _arrived(conn: Any) -> int:
    return int(_ask(conn, "kernel-cost sink")[0])


@contextlib.contextmanager
def _child(ctx: Any, target: Callable[..., None], *args: Any) -> Iterator[Any]:
    proc = ctx.Process(target=target, args=args, daemon=True)
    proc.start()
    try:
        yield proc
    finally:
        proc.join(10)
        if proc.is_alive():
            proc.kill()
            proc.join(5)


def cpu_busy_s(cpu: int) -> float:
    """CPU seconds that ``cpu`` has spent busy since boot, by the kernel's accounting.

    ``/proc/stat``'s user, nice, system, irq and softirq times: everything but idle,
    iowait and the time the hypervisor took (steal).  Softirq work that the kernel hands
    to ``ksoftirqd`` shows as that thread's system time, so it is counted too.
    """
    with open("/proc/stat") as f:
        for line in f:
            if line.startswith(f"cpu{cpu} "):
                t = [int(x) for x in line.split()[1:8]]
                return (t[0] + t[1] + t[2] + t[5] + t[6]) / os.sysconf("SC_CLK_TCK")
    raise RuntimeError(f"/proc/stat has no cpu{cpu}")


def measure_kernel_cost(
    pair: VethPair,
    *,
    tx_cpu: int,
    rate_bps: float,
    datagram_bytes: int,
    payload_bytes: int,
    runs: int = 3,
    seconds: float = 1.0,
) -> Spread:
    """k: the receive core's CPU seconds per datagram in the kernel, over ``pair``.

    Datagrams paced at ``rate_bps`` go from ``pair.tx_ns`` (the sender pinned to
    ``tx_cpu``) into a socket that nobody reads in ``pair.rx_ns``.  k is the busy time
    of ``pair.rx_cpu`` meanwhile, less what the same core was busy with in a window
    without traffic just before, per datagram that reached UDP (:func:`udp_arrived`).
    The busy time is the clock less the core's idle residency (cpuidle, read on that
    core by the sink pinned there; :func:`cpu_busy_s`, ``/proc/stat`` sampled by the tick,
    without cpuidle).  Neither sees the softirq work that an idle core does inside its
    idle state (the haltpoll driver of a KVM guest counts it as idle), so on such a host
    k comes out near 0 (``benchmarks/kernel_cost.py``).  (A ``SCHED_IDLE`` spinner,
    :class:`host.calibration.IdleSpinner`, measures the same thing, but on this shared
    virtual machine its speed drifts by more than the kernel's share at these rates;
    ``benchmarks/kernel_cost.py`` compares the two.)

    Parameters
    ----------
    pair : VethPair
        The link, entered.
    tx_cpu : int
        The sender's core (not ``pair.rx_cpu``).
    rate_bps : float
        Payload bit rate to pace at (bit/s): below what the receive core's kernel can
        take, or the surplus is dropped early and k comes out low (60 % of the sender's
        maximum is safe).
    datagram_bytes, payload_bytes : int
        Bytes per datagram sent, and the payload bytes that ``rate_bps`` counts.
    runs : int, default 3
        Repetitions (1..100).
    seconds : float, default 1
        Length of each run (s), in (0, 60]; each has a quiet window of half as long.

    Returns
    -------
    Spread
        k per run (s per datagram).

    Raises
    ------
    RuntimeError
        When a child process fails to start or the sender sends nothing.
    """
    if not 1 <= runs <= 100:
        raise ValueError(f"runs must lie in [1, 100], got {runs}")
    if not 0 < seconds <= 60:
        raise ValueError(f"seconds must lie in (0, 60], got {seconds}")
    if tx_cpu == pair.rx_cpu:
        raise ValueError("the sender's core must not be the receive core")
    ctx = multiprocessing.get_context("fork")
    stop = ctx.Event()
    parent, child = ctx.Pipe()
    rate_pps = rate_bps / (8.0 * payload_bytes)
    datagram = bytes(datagram_bytes)
    costs: list[float] = []
    cpu = pair.rx_cpu
    old = os.sched_getaffinity(0)
    try:
        _pin(tx_cpu)  # this process's own waiting stays off the receive core
        with _child(ctx, _sink, pair.rx_ns, child, stop, cpu):
            if not parent.poll(10):
                raise RuntimeError("the kernel-cost sink did not start")
            address = (pair.rx_address, parent.recv())
            for _ in range(runs):
                _, b0, t0 = _ask(parent, "kernel-cost sink")
                time.sleep(seconds / 2)
                n1, b1, t1 = _ask(parent, "kernel-cost sink")
                background = max(b1 - b0, 0.0) / (t1 - t0)
                out = ctx.Array("d", 2, lock=False)
                with _child(
                    ctx, _paced, pair.tx_ns, address, [datagram], rate_pps, seconds, tx_cpu, out
                ):
                    pass
                n2, b2, t2 = _ask(parent, "kernel-cost sink")
                delivered = n2 - n1
                if delivered > 0:
                    costs.append(max(b2 - b1 - background * (t2 - t1), 0.0) / delivered)
            stop.set()
    finally:
        stop.set()
        os.sched_setaffinity(0, old)
    if not costs:
        raise RuntimeError("no datagram reached the kernel-cost sink")
    return Spread.of(costs)


def measure_sender_rate(
    pair: VethPair, *, tx_cpu: int, datagram_bytes: int, payload_bytes: int, seconds: float = 0.4
) -> float:
    """The payload bit rate (bit/s) that reaches UDP over ``pair`` from the measurement's
    sender, back to back into a socket nobody reads: the most that k and c_C can be
    measured at.  (What the sender *sends* can be far more: a veth pair drops what the
    receive core's backlog queue cannot hold, before UDP, unseen by the sender.)"""
    ctx = multiprocessing.get_context("fork")
    stop = ctx.Event()
    parent, child = ctx.Pipe()
    out = ctx.Array("d", 2, lock=False)
    try:
        with _child(ctx, _sink, pair.rx_ns, child, stop):
            if not parent.poll(10):
                raise RuntimeError("the kernel-cost sink did not start")
            address = (pair.rx_address, parent.recv())
            ring = [bytes(datagram_bytes)]
            before = _arrived(parent)
            with _child(ctx, _paced, pair.tx_ns, address, ring, 1e8, seconds, tx_cpu, out, seconds):
                pass
            delivered = _arrived(parent) - before
            stop.set()
    finally:
        stop.set()
    if delivered <= 0 or out[1] <= 0:
        raise RuntimeError("no datagram reached the kernel-cost sink")
    return delivered * 8.0 * payload_bytes / out[1]


def _busy(cpu: int, stop: Any, seconds: float) -> None:
    _pin(cpu)
    end = time.monotonic() + seconds
    while not stop.is_set() and time.monotonic() < end:
        for _ in range(20_000):
            pass


def _receiver_socket(ns: str, cpu: int, rcvbuf_bytes: int | None) -> socket.socket:
    # A measurement's receiving socket as `blastrate receive` makes its own, in namespace
    # ``ns`` with this process pinned to ``cpu``: non-blocking, with UDP GRO (one datagram
    # per read on a kernel without it), bound on the pair's receiving end.
    enter_namespace(ns)
    _pin(cpu)
    sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    if rcvbuf_bytes is not None:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, rcvbuf_bytes)
    with contextlib.suppress(OSError):
        sock.setsockopt(_SOL_UDP, _UDP_GRO, 1)
    sock.bind((_RX_ADDR, 0))
    sock.setblocking(False)
    return sock


def _drain(
    ns: str,
    cpu: int,
    receive_path: Callable[[socket.socket], Callable[[int], int]],
    batch: int,
    rcvbuf_bytes: int | None,
    seconds: float,
    conn: Any,
) -> None:
    # The receiver of a contention run: the product's receive path, backlogged, for
    # ``seconds`` from its first datagram; sends (datagrams taken, wall seconds, datagrams
    # that reached UDP meanwhile).
    sock = _receiver_socket(ns, cpu, rcvbuf_bytes)
    sel = selectors.DefaultSelector()
    sel.register(sock, selectors.EVENT_READ)
    wakeup = receive_path(sock)
    conn.send(sock.getsockname()[1])
    taken = arrived = 0
    wall = 0.0
    if sel.select(timeout=10.0):
        first = udp_arrived()
        start = time.monotonic()
        end = start + seconds
        while time.monotonic() < end:
            if sel.select(timeout=0.05):
                taken += wakeup(batch)
        wall = time.monotonic() - start
        arrived = udp_arrived() - first
    conn.send((taken, wall, arrived))
    sel.close()
    sock.close()


def measure_competitors(
    pair: VethPair,
    *,
    tx_cpu: int,
    rate_bps: float,
    datagrams: Sequence[bytes],
    payload_bytes: int,
    receive_path: Callable[[socket.socket], Callable[[int], int]],
    batch_packets: int,
    capacity_pps: float,
    kernel_s_per_datagram: float,
    max_tasks: int = 3,
    seconds: float = 0.6,
    rcvbuf_bytes: int | None = None,
) -> list[float]:
    """c_C for C = 1..``max_tasks``: the competitors the scheduler makes of C busy loops.

    For each C, C busy loops share ``pair.rx_cpu`` with a receiver running
    ``receive_path`` (the product's: :func:`datamover.receive_path.calibration_receive_path`)
    while datagrams arrive at ``rate_bps``, more than it can take beside them.  The
    time-slice model gives a backlogged receiver ``left / (1 + c)`` of the core, with
    ``left = 1 - lambda k`` what the kernel leaves at the arrival rate lambda; at
    ``capacity_pps`` datagrams per second of its own CPU it drains
    ``capacity_pps * left / (1 + c)`` per second.  Solved for c with the drained rate
    measured, that is c_C (as ``benchmarks/validate_transfer.py``'s lab calibration
    measures it).

    Parameters
    ----------
    pair : VethPair
        The link, entered.
    tx_cpu : int
        The sender's core.
    rate_bps : float
        Payload bit rate the sender is paced at (bit/s): the line rate.
    datagrams : sequence of bytes
        What the sender sends, round robin (valid for ``receive_path``).
    payload_bytes : int
        Payload bytes per datagram (for the rate).
    receive_path : callable
        ``receive_path(sock)`` -> wake-up function ``(limit) -> datagrams taken``.
    batch_packets : int
        N, datagrams per wake-up.
    capacity_pps : float
        Datagrams the receive path takes per second of its own CPU: ``mu_net * N``.
    kernel_s_per_datagram : float
        k (:func:`measure_kernel_cost`).
    max_tasks : int, default 3
        Largest C (1..8).
    seconds : float, default 0.6
        Length of each run (s), in (0, 60].
    rcvbuf_bytes : int, optional
        SO_RCVBUF of the receiving socket (default: the system's).

    Returns
    -------
    list of float
        c_1 .. c_max_tasks, each clipped to [0.001, 1000].  A receiver that kept up (it
        drained at least 95 % of what arrived) shows only a bound; its c is recorded as
        that bound, the most that the run allows.
    """
    if not 1 <= max_tasks <= 8:
        raise ValueError(f"max_tasks must lie in [1, 8], got {max_tasks}")
    if not 0 < seconds <= 60:
        raise ValueError(f"seconds must lie in (0, 60], got {seconds}")
    if not (capacity_pps > 0 and math.isfinite(capacity_pps)):
        raise ValueError(f"capacity_pps must be positive, got {capacity_pps}")
    ctx = multiprocessing.get_context("fork")
    rate_pps = rate_bps / (8.0 * payload_bytes)
    out: list[float] = []
    for tasks in range(1, max_tasks + 1):
        stop = ctx.Event()
        busy = [
            ctx.Process(target=_busy, args=(pair.rx_cpu, stop, seconds + 20), daemon=True)
            for _ in range(tasks)
        ]
        for p in busy:
            p.start()
        parent, child = ctx.Pipe()
        try:
            with _child(
                ctx,
                _drain,
                pair.rx_ns,
                pair.rx_cpu,
                receive_path,
                batch_packets,
                rcvbuf_bytes,
                seconds,
                child,
            ):
                if not parent.poll(10):
                    raise RuntimeError("the contention receiver did not start")
                address = (pair.rx_address, parent.recv())
                sent = ctx.Array("d", 2, lock=False)
                # The sender outlasts the receiver's window, which starts at its first
                # datagram.
                with _child(
                    ctx,
                    _paced,
                    pair.tx_ns,
                    address,
                    list(datagrams),
                    rate_pps,
                    seconds + 0.3,
                    tx_cpu,
                    sent,
                ):
                    if not parent.poll(seconds + 15):
                        raise RuntimeError("the contention receiver did not report")
                    taken, wall, arrived = parent.recv()
        finally:
            stop.set()
            for p in busy:
                p.join(5)
                if p.is_alive():
                    p.kill()
        if wall <= 0 or arrived <= 0:
            raise RuntimeError("the contention run received nothing")
        lam = arrived / wall
        drained = max(taken / wall, 1.0)
        left = min(max(1.0 - lam * kernel_s_per_datagram, 1e-3), 1.0)
        c = left * capacity_pps / drained - 1.0
        out.append(min(max(c, _MIN_C), _MAX_C))
    return out


#: The product sender's batch spacing (``datamover.sender.BATCH_SPACING_S``) and the most
#: bytes one segmented send carries.  (UDP GSO and GRO: the measurement's sender and
#: receiver set them as the product's do, host sitting below datamover.)
_BATCH_SPACING_S, _MAX_SEND_BYTES = 50e-6, 65_507


def _batches(sock: socket.socket, ring: list[bytes], rate_pps: float) -> tuple[list[bytes], int]:
    # The product's batches: as many datagrams as the rate sends in 50 us, one GSO send
    # each; one datagram per send where the kernel refuses (or the datagrams differ).
    size = len(ring[0])
    most = min(_MAX_SEGMENTS, _MAX_SEND_BYTES // max(size, 1))
    batch = max(1, min(most, math.ceil(rate_pps * _BATCH_SPACING_S)))
    if batch > 1 and all(len(d) == size for d in ring):
        try:
            sock.setsockopt(_SOL_UDP, _UDP_SEGMENT, size)
        except OSError:
            batch = 1
    else:
        batch = 1
    if batch == 1:
        return ring, 1
    joined = [
        b"".join(ring[(i + j) % len(ring)] for j in range(batch))
        for i in range(0, len(ring), batch)
    ]
    return joined, batch


def _paced(
    ns: str,
    address: tuple[str, int],
    ring: list[bytes],
    rate_pps: float,
    seconds: float,
    cpu: int,
    out: Any,
    max_s: float | None = None,
) -> None:
    # The measurement's sender: ``ring`` round robin in the product sender's batches
    # (GSO), paced to within half a millisecond, bounded in count and time (``max_s``,
    # default 4 ``seconds`` + 1 s); writes (datagrams sent, seconds taken) into ``out``.
    enter_namespace(ns)
    _pin(cpu)
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.connect(address)
    send = s.send
    sends, batch = _batches(s, ring, rate_pps)
    size = len(sends)
    total = max(1, int(rate_pps * seconds))
    n = k = 0
    start = time.monotonic()
    deadline = start + (4 * seconds + 1 if max_s is None else max_s)
    try:
        while n < total:
            now = time.monotonic()
            if now > deadline:
                break
            owed = min(total, int((now - start) * rate_pps) + 1, n + 256)
            if n >= owed:
                time.sleep(5e-4)
                continue
            while n < owed:
                try:
                    send(sends[k % size])
                except OSError as exc:
                    if batch > 1 and exc.errno in (errno.EMSGSIZE, errno.EIO, errno.EINVAL):
                        # Segments larger than the path MTU, or a device without
                        # segmentation: one datagram per send, as the product falls back.
                        s.setsockopt(_SOL_UDP, _UDP_SEGMENT, 0)
                        sends, batch, size = ring, 1, len(ring)
                        continue
                    break
                n += batch
                k += 1
    finally:
        out[0], out[1] = float(n), time.monotonic() - start
        s.close()


def _paced_receiver(
    ns: str,
    cpu: int,
    receive_path: Callable[[socket.socket], Callable[[int], int]],
    batch: int,
    rcvbuf_bytes: int | None,
    conn: Any,
) -> None:
    # The receiver of the wake-up runs: the product's receive path on a GRO socket, woken
    # by its selector as `blastrate receive` is.  Each message on ``conn`` is answered
    # with its totals so far (wake-ups that took something, datagrams taken); "stop"
    # ends it.  The pipe waits in the same selector, so asking costs no wake-up a system
    # call.  Bounded at 300 s.
    sock = _receiver_socket(ns, cpu, rcvbuf_bytes)
    sel = selectors.DefaultSelector()
    sel.register(sock, selectors.EVENT_READ, "udp")
    sel.register(conn, selectors.EVENT_READ, "conn")
    wakeup = receive_path(sock)
    conn.send(sock.getsockname()[1])
    wakeups = taken = 0
    end = time.monotonic() + 300
    try:
        while time.monotonic() < end:
            for key, _ in sel.select(timeout=0.5):
                if key.data == "udp":
                    n = wakeup(batch)
                    if n:
                        wakeups += 1
                        taken += n
                elif conn.recv() == "stop":
                    return
                else:
                    conn.send((wakeups, taken, _busy_here(cpu), time.monotonic()))
    finally:
        sel.close()
        sock.close()


#: The clock each CPU's busy time is read with in this process, chosen at its first read:
#: two reads of one measurement must never mix clocks.
_BUSY_CLOCK: dict[int, str] = {}


def _idle_residency_s(cpu: int) -> float | None:
    # The residency of ``cpu``'s idle states since boot (cpuidle, microseconds), or None.
    root = f"/sys/devices/system/cpu/cpu{cpu}/cpuidle"
    try:
        states = [e.path for e in os.scandir(root) if e.name.startswith("state")]
        idle_us = 0
        for state in states:
            with open(os.path.join(state, "time")) as f:
                idle_us += int(f.read())
    except (OSError, ValueError):
        return None
    return idle_us / 1e6 if states else None


def _busy_here(cpu: int) -> float:
    # Busy seconds of ``cpu`` (up to a constant), read on that CPU: the monotonic clock
    # less the residency of its idle states, to the microsecond.  Read elsewhere, an idle
    # period under way would be missing; this CPU is busy reading.  What it does not see:
    # interrupt and softirq work that the core does while idling, which idle drivers that
    # handle interrupts inside the idle state (haltpoll, on this VM) count as idle; it
    # sees the tasks' own work and what interrupts a running task.  Without cpuidle:
    # /proc/stat's accounting, sampled by the tick.  The clock is chosen at the first read
    # and kept: a later read that cannot use it fails rather than mix clocks.
    clock = _BUSY_CLOCK.get(cpu)
    idle = _idle_residency_s(cpu) if clock in (None, "cpuidle") else None
    if clock is None:
        clock = _BUSY_CLOCK[cpu] = "proc-stat" if idle is None else "cpuidle"
    if clock == "proc-stat":
        return cpu_busy_s(cpu)
    if idle is None:
        raise RuntimeError(f"CPU {cpu}'s cpuidle residency became unreadable mid-measurement")
    return time.monotonic() - idle


def fit_wakeup_cost(
    wakeups: Sequence[float], datagrams: Sequence[float], own_s: Sequence[float]
) -> tuple[float, float, float]:
    """a and b such that ``own_s ~ a * wakeups + b * datagrams``, both >= 0.

    Non-negative least squares (:func:`scipy.optimize.nnls`) over the runs: the
    receiver's own CPU seconds in each run against its wake-ups and datagrams.  Runs at
    different rates take different numbers of datagrams per wake-up (the sender's batches
    grow with the rate, and a receiver that falls behind finds more waiting), which is
    what tells a from b.

    Parameters
    ----------
    wakeups, datagrams : sequence of float
        Per run: wake-ups that took something, and datagrams taken.
    own_s : sequence of float
        Per run: the receiver's own CPU seconds (s).

    Returns
    -------
    per_wakeup_s, per_datagram_s : float
        a and b (s).
    residual_s : float
        The fit's residual norm (s).
    """
    from scipy.optimize import nnls  # the calibration's only SciPy use: import on demand

    w = [float(x) for x in wakeups]
    d = [float(x) for x in datagrams]
    y = [float(x) for x in own_s]
    if not (len(w) == len(d) == len(y)) or len(w) < 2:
        raise ValueError("fit_wakeup_cost needs two or more runs of equal length")
    if not all(math.isfinite(v) and v >= 0 for v in (*w, *d)):
        raise ValueError("wake-ups and datagrams must be finite and >= 0")
    if not all(math.isfinite(v) for v in y):
        raise ValueError("own_s must be finite")
    (a, b), residual = nnls(np.column_stack([w, d]), np.asarray(y))
    return float(a), float(b), float(residual)


@dataclass(frozen=True)
class WakeupCost:
    """The receive path's own cost on its core, as :func:`measure_wakeup_cost` found it.

    Attributes
    ----------
    per_wakeup_s : float
        a: what a wake-up costs beyond its datagrams (s): the scheduler's wake-up and
        switch, the selector, the read that finds the socket empty.  The time-slice
        model's ``wakeup_s``: the part of a read's cost that does not grow with its
        datagrams.
    per_datagram_s : float
        b: the receive path's cost per datagram (s): the read's share, the checks, the
        write.
    residual_s : float
        The fit's residual norm (s).
    rate_bps : float
        The rate the fractions were of (bit/s).
    runs : tuple of dict
        Per run: ``fraction``, ``wakeups``, ``datagrams``, ``own_s`` (the core's busy
        seconds less the quiet rate and ``k * datagrams``) and ``seconds``.
    """

    per_wakeup_s: float
    per_datagram_s: float
    residual_s: float
    rate_bps: float
    runs: tuple[dict[str, float], ...] = ()

    @property
    def usable(self) -> bool:
        """Both costs positive: a fit that clipped either to 0 says nothing of it."""
        return self.per_wakeup_s > 0 and self.per_datagram_s > 0

    def mu_net(self, batch_packets: int) -> float:
        """Wake-ups of ``batch_packets`` datagrams per second of the receiver's CPU,
        ``1 / (a + N b)``: the model's mu_net, a wake-up's whole cost included (1/s)."""
        return 1.0 / (self.per_wakeup_s + batch_packets * self.per_datagram_s)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready fields, as a calibration's provenance stores them."""
        return {
            "per_wakeup_s": self.per_wakeup_s,
            "per_datagram_s": self.per_datagram_s,
            "residual_s": self.residual_s,
            "rate_bps": self.rate_bps,
            "usable": self.usable,
            "runs": [dict(r) for r in self.runs],
        }


def measure_wakeup_cost(
    pair: VethPair,
    *,
    tx_cpu: int,
    rate_bps: float,
    datagrams: Sequence[bytes],
    payload_bytes: int,
    receive_path: Callable[[socket.socket], Callable[[int], int]],
    batch_packets: int,
    kernel_s_per_datagram: float,
    fractions: Sequence[float] = (0.2, 0.4, 0.6, 0.8),
    runs: int = 1,
    seconds: float = 0.5,
    rcvbuf_bytes: int | None = None,
) -> WakeupCost:
    """a and b: the receive path's own cost per wake-up and per datagram, over ``pair``.

    The receiver (``receive_path``, the product's, on a GRO socket pinned to
    ``pair.rx_cpu``) takes datagrams paced at each of ``fractions`` of ``rate_bps``, in
    the product sender's batches, ``runs`` times over.  In each run the receive core's
    busy time (its idle residency's complement, as :func:`measure_kernel_cost` reads it),
    less its rate with the receiver waiting and nothing
    sent, and less ``kernel_s_per_datagram`` for each datagram, is the receiver's own
    time; :func:`fit_wakeup_cost` splits it into a per wake-up and b per datagram.  (The
    lab's calibration in ``benchmarks/validate_transfer.py`` fits the same two costs from
    whole transfers.)

    Parameters
    ----------
    pair : VethPair
        The link, entered.
    tx_cpu : int
        The sender's core (not ``pair.rx_cpu``); this process waits there too.
    rate_bps : float
        Payload bit rate (bit/s) that ``fractions`` are of: one the receiver keeps up
        with, so that nothing is lost and every datagram is counted.
    datagrams : sequence of bytes
        What the sender sends, round robin (valid for ``receive_path``).
    payload_bytes : int
        Payload bytes per datagram (for the rate).
    receive_path : callable
        ``receive_path(sock)`` -> wake-up function ``(limit) -> datagrams taken``.
    batch_packets : int
        N, the wake-up's limit.
    kernel_s_per_datagram : float
        k (:func:`measure_kernel_cost`), s.
    fractions : sequence of float, default (0.2, 0.4, 0.6, 0.8)
        Rates to pace at, as fractions of ``rate_bps`` in (0, 1].
    runs : int, default 1
        Passes over ``fractions`` (1..20).
    seconds : float, default 0.5
        Length of each paced run (s), in (0, 60].
    rcvbuf_bytes : int, optional
        SO_RCVBUF of the receiving socket (default: the system's).

    Returns
    -------
    WakeupCost

    Raises
    ------
    ValueError
        On arguments out of range, or the receive core as the sender's.
    RuntimeError
        When a child process fails to start or the receiver takes nothing.
    """
    if tx_cpu == pair.rx_cpu:
        raise ValueError("the sender's core must not be the receive core")
    if not 1 <= runs <= 20:
        raise ValueError(f"runs must lie in [1, 20], got {runs}")
    if not 0 < seconds <= 60:
        raise ValueError(f"seconds must lie in (0, 60], got {seconds}")
    if not fractions or not all(0 < f <= 1 for f in fractions):
        raise ValueError(f"fractions must lie in (0, 1], got {list(fractions)}")
    if not (rate_bps > 0 and math.isfinite(rate_bps)):
        raise ValueError(f"rate_bps must be positive, got {rate_bps}")
    ctx = multiprocessing.get_context("fork")
    parent, child = ctx.Pipe()
    rate_pps = rate_bps / (8.0 * payload_bytes)
    ring = list(datagrams)
    cpu = pair.rx_cpu
    rows: list[dict[str, float]] = []
    old = os.sched_getaffinity(0)
    try:
        _pin(tx_cpu)  # this process's own waiting stays off the receive core
        with _child(
            ctx, _paced_receiver, pair.rx_ns, cpu, receive_path, batch_packets, rcvbuf_bytes, child
        ):
            child.close()  # the receiver's end: a receiver that dies then ends the wait
            if not parent.poll(10):
                raise RuntimeError("the wake-up receiver did not start")
            address = (pair.rx_address, parent.recv())
            try:
                _, _, b0, t0 = _ask(parent, "wake-up receiver")
                time.sleep(seconds / 2)
                _, _, b1, t1 = _ask(parent, "wake-up receiver")
                quiet = max(b1 - b0, 0.0) / (t1 - t0)
                for fraction in [f for _ in range(runs) for f in fractions]:
                    w0, d0, b1, t1 = _ask(parent, "wake-up receiver")
                    out = ctx.Array("d", 2, lock=False)
                    with _child(
                        ctx,
                        _paced,
                        pair.tx_ns,
                        address,
                        ring,
                        fraction * rate_pps,
                        seconds,
                        tx_cpu,
                        out,
                    ):
                        pass
                    # Stragglers still in the socket are read within a wake-up or two.
                    time.sleep(0.01)
                    w1, d1, b2, t2 = _ask(parent, "wake-up receiver")
                    wakeups, taken = w1 - w0, d1 - d0
                    own = (b2 - b1) - quiet * (t2 - t1) - kernel_s_per_datagram * taken
                    rows.append(
                        {
                            "fraction": float(fraction),
                            "wakeups": float(wakeups),
                            "datagrams": float(taken),
                            "own_s": own,
                            "seconds": t2 - t1,
                        }
                    )
            finally:
                parent.send("stop")
    finally:
        os.sched_setaffinity(0, old)
    used = [r for r in rows if r["datagrams"] > 0]
    if len(used) < 2:
        raise RuntimeError("the wake-up receiver took nothing")
    a, b, residual = fit_wakeup_cost(
        [r["wakeups"] for r in used], [r["datagrams"] for r in used], [r["own_s"] for r in used]
    )
    return WakeupCost(a, b, residual, float(rate_bps), tuple(rows))


@dataclass(frozen=True)
class KernelShare:
    """What a calibration learned of the kernel's part of the receiver's core.

    Attributes
    ----------
    path : str
        ``"veth+rps"`` (measured on a :class:`VethPair`) or ``"loopback"`` (not measured).
    note : str
        How it was measured, or why it was not.
    kernel_s : Spread or None
        k per run (s per datagram); None when not measured.
    effective_competitors : list of float
        c_1, c_2, ... (empty when not measured: the model then takes c = C).
    rate_bps : float
        The rate the competitors were measured at (bit/s); 0 when not measured.
    """

    path: str
    note: str
    kernel_s: Spread | None = None
    effective_competitors: list[float] = field(default_factory=list)
    rate_bps: float = 0.0
    wakeup: WakeupCost | None = None

    def mu_net(self, batch_packets: int) -> float | None:
        """The model's mu_net from the wake-up fit, ``1 / (a + N b)`` (1/s), as the lab's
        calibration makes it; None when the fit was not made or clipped a cost to 0."""
        if self.wakeup is None or not self.wakeup.usable:
            return None
        return self.wakeup.mu_net(batch_packets)

    def provenance(self) -> dict[str, Any]:
        """The fields a stored calibration carries (``transport.time_slice_costs`` reads
        ``kernel_s_per_datagram``, ``wakeup_s`` and ``effective_competitors``)."""
        out: dict[str, Any] = {"kernel_path": self.path, "kernel_path_note": self.note}
        if self.kernel_s is not None:
            out["kernel_s_per_datagram"] = self.kernel_s.mean
            # Not "kernel": a stored calibration's provenance names the OS kernel so.
            out["kernel_s"] = self.kernel_s.to_dict()
        if self.wakeup is not None:
            out["wakeup_fit"] = self.wakeup.to_dict()
            if self.wakeup.usable:
                out["wakeup_s"] = self.wakeup.per_wakeup_s
                out["per_datagram_s"] = self.wakeup.per_datagram_s
        if self.effective_competitors:
            out["effective_competitors"] = list(self.effective_competitors)
            out["competitors_cost"] = COMPETITORS_COST
            out["competitors_rate_bps"] = self.rate_bps
        return out


def measure_kernel_share(
    *,
    rx_cpu: int,
    tx_cpu: int,
    line_rate_bps: float,
    sender_rate_bps: float,
    datagrams: Sequence[bytes],
    payload_bytes: int,
    receive_path: Callable[[socket.socket], Callable[[int], int]],
    batch_packets: int,
    capacity_pps: float,
    runs: int = 3,
    seconds: float = 1.0,
    max_tasks: int = 3,
    path: str = "auto",
    between: Callable[[], None] | None = None,
) -> KernelShare:
    """k, the wake-up cost and c_C on the receiver's kernel path, or why not: what both
    calibrations call.

    In order: k (:func:`measure_kernel_cost`); the receive path's cost per wake-up and
    per datagram (:func:`measure_wakeup_cost`, ``min(runs, 3)`` passes of runs half as
    long as ``seconds``); c_C (:func:`measure_competitors`, with the backlogged capacity
    ``N / (a + N b)`` of that fit where both its costs came out positive, else
    ``capacity_pps``).

    ``path="auto"`` measures on a :class:`VethPair` where one can be made (root, ``ip``)
    and otherwise returns a loopback :class:`KernelShare` that says why; ``"veth"``
    raises instead; ``"loopback"`` measures nothing.

    Parameters
    ----------
    rx_cpu, tx_cpu : int
        The receiver's and the sender's cores.
    line_rate_bps : float
        The profile's line rate (bit/s).  k is measured at 60 % of the least of it,
        ``sender_rate_bps`` and what reaches UDP over the veth pair
        (:func:`measure_sender_rate`), where the kernel keeps up; the competitors at that
        least rate, or where k says the kernel takes half the core if that is lower.
    sender_rate_bps : float
        The calibration sender's back-to-back rate over loopback (bit/s).
    datagrams, payload_bytes, receive_path, batch_packets, capacity_pps
        As :func:`measure_competitors` takes them.
    runs : int, default 3
        Runs of :func:`measure_kernel_cost`.
    seconds : float, default 1
        Length of each kernel-cost run (s); the contention runs take 0.6 of it each.
    max_tasks : int, default 3
        Largest C measured.
    path : {"auto", "veth", "loopback"}
        Where to measure.
    between : callable, optional
        Called between the measurements (a receiver waits there while it receives).
    """
    if path not in ("auto", "veth", "loopback"):
        raise ValueError(f"path must be auto, veth or loopback, got {path!r}")
    loopback_note = (
        "over loopback the kernel's receive work runs on the sender's core: k and c_C "
        "not measured (the model takes k = 0 and c = C)"
    )
    if path == "loopback":
        return KernelShare("loopback", f"{loopback_note}; asked for")
    why = veth_unavailable()
    if why is not None:
        if path == "veth":
            raise RuntimeError(f"cannot make a veth link: {why}")
        return KernelShare("loopback", f"{loopback_note}; no veth link: {why}")
    if rx_cpu == tx_cpu:
        if path == "veth":
            raise RuntimeError("the kernel's cost needs the sender on another core")
        return KernelShare("loopback", f"{loopback_note}; one core: no sender beside it")
    datagram_bytes = max(len(d) for d in datagrams)
    try:
        with VethPair(rx_cpu) as pair:
            if between is not None:
                between()
            rate = min(
                line_rate_bps,
                sender_rate_bps,
                measure_sender_rate(
                    pair,
                    tx_cpu=tx_cpu,
                    datagram_bytes=datagram_bytes,
                    payload_bytes=payload_bytes,
                ),
            )
            k = measure_kernel_cost(
                pair,
                tx_cpu=tx_cpu,
                rate_bps=0.6 * rate,
                datagram_bytes=datagram_bytes,
                payload_bytes=payload_bytes,
                runs=runs,
                seconds=seconds,
            )
            if between is not None:
                between()
            # Paced below what the receiver keeps up with beside the kernel, so that
            # every datagram is taken and counted.
            keep_up = 8.0 * payload_bytes / (1.0 / capacity_pps + k.mean)
            wakeup = measure_wakeup_cost(
                pair,
                tx_cpu=tx_cpu,
                rate_bps=min(rate, keep_up),
                datagrams=datagrams,
                payload_bytes=payload_bytes,
                receive_path=receive_path,
                batch_packets=batch_packets,
                kernel_s_per_datagram=k.mean,
                runs=min(runs, 3),
                seconds=0.5 * seconds,
            )
            if wakeup.usable:
                # A backlogged receiver pays each read's whole cost a + N b (the model's
                # backlogged service with sleep_s = 0, transport.time_slice_bottleneck_rate):
                # the fit measures that sum well and its split poorly.
                capacity_pps = batch_packets * wakeup.mu_net(batch_packets)
            # Where the kernel alone would take half the core, c is still seen clearly;
            # far above it, what the kernel leaves is a small difference of large terms.
            c_rate = min(rate, 0.5 * 8.0 * payload_bytes / k.mean) if k.mean > 0 else rate
            if between is not None:
                between()
            competitors = measure_competitors(
                pair,
                tx_cpu=tx_cpu,
                rate_bps=c_rate,
                datagrams=datagrams,
                payload_bytes=payload_bytes,
                receive_path=receive_path,
                batch_packets=batch_packets,
                capacity_pps=capacity_pps,
                kernel_s_per_datagram=k.mean,
                max_tasks=max_tasks,
                seconds=0.6 * seconds,
            )
    except (subprocess.CalledProcessError, subprocess.TimeoutExpired, OSError) as exc:
        if path == "veth":
            raise RuntimeError(f"cannot make a veth link: {exc}") from exc
        return KernelShare("loopback", f"{loopback_note}; the veth link failed: {exc}")
    except RuntimeError as exc:  # the receive core never idle, a child that did not start
        if path == "veth":
            raise
        return KernelShare("loopback", f"{loopback_note}; the measurement failed: {exc}")
    return KernelShare(
        "veth+rps",
        f"veth pair between two namespaces of its own, RPS to CPU {rx_cpu}; k at "
        f"{0.6 * rate / 1e6:.0f} Mbit/s, wake-up cost at 20-80 % of "
        f"{wakeup.rate_bps / 1e6:.0f} Mbit/s, c_C at {c_rate / 1e6:.0f} Mbit/s",
        kernel_s=k,
        effective_competitors=competitors,
        rate_bps=c_rate,
        wakeup=wakeup,
    )
