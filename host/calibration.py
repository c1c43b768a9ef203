"""Measure a host's service rates with the paper's representative tasks (§III).

Three rates and one buffer size, each measured the way the model uses it:

``mu_net``
    One *interrupt service* here is one wake-up of the receiving task: an epoll wait on
    the UDP socket followed by up to N non-blocking ``recv_into`` calls, each datagram
    handed to ``process`` (the receiver's own per-datagram work: check and store).
    A sender pinned to another core blasts datagrams back to back so that the socket
    buffer never empties and every wake-up finds N packets; the receiver is pinned to
    its own core.  The receiver alternates: it sleeps 5 ms while the sender fills the
    buffer, then drains it wake-up by wake-up until a wake-up finds fewer than N
    (counted as the share of N it read).  ``mu_net`` = wake-ups / the receiver thread's
    CPU seconds spent draining.  CPU time,
    not wall time: on a shared machine another process may take the core for a while,
    and the model wants the rate of service *while served*.  The share of wake-ups that
    found N packets is reported: below 0.95 the sender did not keep the buffer full and
    the figure is not a service rate.
``mu_io_cpu`` and ``mu_disk``
    The paper's I/O task reads a random line from a large file.  Here lines are 128
    bytes, so a line never straddles a 4 KiB block; each read is one ``pread`` of the
    aligned block with ``O_DIRECT`` (or, where the file system refuses ``O_DIRECT``,
    ``posix_fadvise(DONTNEED)`` before every read), then the line is parsed.
    ``t_inter-disk`` is the thread's CPU time per read cycle: from the end of one
    ``pread`` to the start of the next, plus the CPU time the ``pread`` itself took
    (system call and block layer; on a virtual machine, the virtual disk's exits);
    ``t_disk`` is the rest of the ``pread``'s wall time, when the task waits for the
    device.  ``mu_io_cpu = 1 / mean(t_inter-disk)``, ``mu_disk = 1 / mean(t_disk)``.
    (Counting the read's CPU as disk time, as a first version did, made the I/O task
    look 10x lighter on the processor than it is on this virtual machine, and the
    model over-predicted the bottleneck rate with I/O-bound tasks.)
``buffer_packets`` (K)
    Linux doubles SO_RCVBUF and charges each datagram its kernel buffer size (skb
    truesize), not its payload, so K is measured: send datagrams of the real size into
    a socket that nobody reads, then count how many it holds.

Every measurement is repeated; :class:`Spread` gives mean, standard deviation, min, max
and coefficient of variation.  Everything is bounded in time and size, traffic goes to
127.0.0.1 only, and the large file is removed afterwards.
"""

from __future__ import annotations

import math
import mmap
import multiprocessing
import os
import random
import selectors
import socket
import statistics
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .profiles import HostProfile

__all__ = [
    "SEND_SIZES",
    "IdleSpinner",
    "IoCalibration",
    "NetCalibration",
    "Spread",
    "calibrated_profile",
    "calibration_provenance",
    "measure_buffer_by_send",
    "measure_buffer_packets",
    "measure_io_service",
    "measure_net_service",
    "measure_time_slice",
    "run_io_task",
    "write_line_file",
]

_LINE_BYTES = 128
_BLOCK_BYTES = 4096
#: Largest calibration file (bytes) and longest single run (s).
MAX_FILE_BYTES = 64 * 2**30
MAX_RUN_SECONDS = 600.0


@dataclass(frozen=True)
class Spread:
    """Summary of repeated measurements of one quantity.

    Attributes
    ----------
    samples : tuple of float
        One value per run.
    mean, std, min, max : float
        Sample mean, sample standard deviation (0 for one run), extremes.
    cv : float
        Coefficient of variation, std / mean; NaN when the mean is 0.
    """

    samples: tuple[float, ...]
    mean: float
    std: float
    min: float
    max: float
    cv: float

    @classmethod
    def of(cls, samples: Sequence[float]) -> Spread:
        """The spread of ``samples`` (at least one)."""
        xs = tuple(float(x) for x in samples)
        mean = statistics.fmean(xs)
        std = statistics.stdev(xs) if len(xs) > 1 else 0.0
        return cls(xs, mean, std, min(xs), max(xs), std / mean if mean else math.nan)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form (a cv that is not a number, of a zero mean, is None: JSON has
        no NaN, and a stored provenance must be valid JSON)."""
        return {
            "mean": self.mean,
            "std": self.std,
            "min": self.min,
            "max": self.max,
            "cv": self.cv if math.isfinite(self.cv) else None,
            "samples": list(self.samples),
        }


@dataclass(frozen=True)
class NetCalibration:
    """The receive path's service rate.

    Attributes
    ----------
    mu_net : Spread
        Wake-ups of N datagrams per CPU second of the receiver (1/s).
    wall_rate : Spread
        The same per wall second (1/s): lower than ``mu_net`` when something else shared
        the receiver's core.
    full_fraction : Spread
        Share of wake-ups that found N datagrams.
    sender_rate_bps : Spread
        Payload bit rate the back-to-back sender reached (bit/s).
    batch_packets : int
        N.
    payload_bytes : int
        Payload per datagram (bytes).
    seconds : float
        Length of each run (s).
    cpus : tuple of int
        Receiver's and sender's core.
    """

    mu_net: Spread
    wall_rate: Spread
    full_fraction: Spread
    sender_rate_bps: Spread
    batch_packets: int
    payload_bytes: int
    seconds: float
    cpus: tuple[int, int]

    @classmethod
    def pooled(cls, runs: Sequence[NetCalibration]) -> NetCalibration:
        """Single-run calibrations (``runs=1`` each) as one, the spreads over their runs:
        for a caller that checks something between runs."""
        if not runs or any(len(r.mu_net.samples) != 1 for r in runs):
            raise ValueError("pooled takes calibrations of one run each")
        first = runs[0]
        return cls(
            mu_net=Spread.of([r.mu_net.samples[0] for r in runs]),
            wall_rate=Spread.of([r.wall_rate.samples[0] for r in runs]),
            full_fraction=Spread.of([r.full_fraction.samples[0] for r in runs]),
            sender_rate_bps=Spread.of([r.sender_rate_bps.samples[0] for r in runs]),
            batch_packets=first.batch_packets,
            payload_bytes=first.payload_bytes,
            seconds=first.seconds,
            cpus=first.cpus,
        )

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form."""
        return {
            "mu_net": self.mu_net.to_dict(),
            "wall_rate": self.wall_rate.to_dict(),
            "full_fraction": self.full_fraction.to_dict(),
            "sender_rate_bps": self.sender_rate_bps.to_dict(),
            "batch_packets": self.batch_packets,
            "payload_bytes": self.payload_bytes,
            "seconds": self.seconds,
            "cpus": list(self.cpus),
        }


@dataclass(frozen=True)
class IoCalibration:
    """The representative I/O-bound task's processor and disk rates.

    Attributes
    ----------
    mu_io_cpu : Spread
        1 / mean CPU time between disk accesses, per run (1/s).
    mu_disk : Spread
        1 / mean disk access time, per run (1/s).
    method : str
        ``"O_DIRECT"`` or ``"fadvise"``: how the page cache was defeated.
    file_bytes : int
        Size of the file read (bytes).
    reads : int
        Reads per run.
    """

    mu_io_cpu: Spread
    mu_disk: Spread
    method: str
    file_bytes: int
    reads: int

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form."""
        return {
            "mu_io_cpu": self.mu_io_cpu.to_dict(),
            "mu_disk": self.mu_disk.to_dict(),
            "method": self.method,
            "file_bytes": self.file_bytes,
            "reads": self.reads,
        }


#: UDP GSO and GRO (linux/udp.h), as ``datamover.segments`` sets them (host sits below
#: datamover), and the most datagrams one segmented send carries.
_SOL_UDP, _UDP_SEGMENT, _UDP_GRO, _MAX_SEGMENTS = 17, 103, 104, 64


def measure_buffer_packets(
    datagram_bytes: int,
    *,
    rcvbuf_bytes: int | None = None,
    max_packets: int = 1 << 16,
    segments: int = 1,
) -> int:
    """How many datagrams of ``datagram_bytes`` a UDP socket holds unread (K).

    Parameters
    ----------
    datagram_bytes : int
        UDP payload per datagram (bytes), 1..65507.
    rcvbuf_bytes : int, optional
        SO_RCVBUF to request (Linux doubles it); the system default when omitted.
    max_packets : int, default 65536
        Most datagrams sent (bounds the measurement).
    segments : int, default 1
        Datagrams per send, 1..64.  Above 1 the sender segments (UDP GSO) and the
        socket coalesces (UDP GRO), as the data mover's do: the kernel then queues each
        send whole, and charges the buffer once per send rather than once per datagram,
        so the socket holds more datagrams the larger the sends (on loopback and veth,
        where nothing splits them on the way).  Returns the datagrams held either way.

    Returns
    -------
    int
        Datagrams the socket held (>= 1 on any working host).

    Raises
    ------
    OSError
        ``segments`` > 1 where the kernel refuses UDP GSO or GRO.
    """
    if not 1 <= datagram_bytes <= 65_507:
        raise ValueError(f"datagram_bytes must lie in [1, 65507], got {datagram_bytes}")
    if not 1 <= segments <= _MAX_SEGMENTS or segments * datagram_bytes > 65_507:
        raise ValueError(
            f"segments must lie in [1, {_MAX_SEGMENTS}] with at most 65507 bytes a send, "
            f"got {segments} of {datagram_bytes}"
        )
    rx = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    tx = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    try:
        if rcvbuf_bytes is not None:
            rx.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, rcvbuf_bytes)
        if segments > 1:
            rx.setsockopt(_SOL_UDP, _UDP_GRO, 1)
            tx.setsockopt(_SOL_UDP, _UDP_SEGMENT, datagram_bytes)
        rx.bind(("127.0.0.1", 0))
        rx.setblocking(False)
        tx.connect(rx.getsockname())
        granted = rx.getsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF)
        # Each datagram costs at least its own bytes: beyond this many none can fit.
        sends = min(max_packets // segments, 2 * granted // (datagram_bytes * segments) + 16)
        data = bytes(datagram_bytes * segments)
        for _ in range(sends):
            tx.send(data)  # loopback delivers (or drops) synchronously
        held = 0
        buf = bytearray(datagram_bytes * segments)
        while True:
            try:
                got = rx.recv_into(buf)
            except BlockingIOError:
                return held
            held += -(-got // datagram_bytes)  # a coalesced read holds several
    finally:
        rx.close()
        tx.close()


#: Send sizes (datagrams) at which a calibration fills the socket: up to the data mover's
#: largest send (``datamover.MAX_BURST_PACKETS``, 32), closer together where K changes
#: fastest.
SEND_SIZES = (1, 2, 3, 4, 6, 8, 12, 16, 24, 32)


def measure_buffer_by_send(
    datagram_bytes: int,
    *,
    rcvbuf_bytes: int | None = None,
    sizes: tuple[int, ...] = SEND_SIZES,
) -> dict[int, int]:
    """The datagrams a UDP socket holds when they arrive in sends of each of ``sizes``.

    :func:`measure_buffer_packets` at each size (``segments``): the table
    :class:`transport.SendSizes` takes as ``buffer_by_send``.

    Parameters
    ----------
    datagram_bytes : int
        UDP payload per datagram (bytes).
    rcvbuf_bytes : int, optional
        SO_RCVBUF to request; the system default when omitted.
    sizes : tuple of int
        Datagrams per send, ascending.

    Returns
    -------
    dict of int to int
        Send size to datagrams held.
    """
    return {
        s: measure_buffer_packets(datagram_bytes, rcvbuf_bytes=rcvbuf_bytes, segments=s)
        for s in sizes
    }


def _blast(
    address: tuple[str, int], datagrams: Sequence[bytes], seconds: float, cpu: int, sent: Any
) -> None:
    # The calibration sender: back to back, pinned, bounded in time.
    os.sched_setaffinity(0, {cpu})
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.connect(address)
    send = s.send
    stop = time.monotonic() + seconds
    n = 0
    ring = len(datagrams)
    try:
        while True:
            for _ in range(256):
                send(datagrams[n % ring])
                n += 1
            if time.monotonic() > stop:
                break
    except OSError:
        pass
    finally:
        sent.value = n
        s.close()


def _count_spins(cpu: int, counter: Any, cpu_ns: Any, stop: Any) -> None:
    os.sched_setaffinity(0, {cpu})
    os.sched_setscheduler(0, os.SCHED_IDLE, os.sched_param(0))
    while not stop.is_set():
        for _ in range(20_000):
            pass
        counter.value += 1
        cpu_ns.value = time.thread_time_ns()


class IdleSpinner:
    """A lowest-priority busy loop on one CPU that tells how much of it others used.

    The loop runs under ``SCHED_IDLE``: any other task, and all interrupt and softirq
    work, takes the CPU from it at once, so its progress measures the CPU time that
    everything else used, precisely (``/proc/stat`` samples kernel time by the
    scheduler tick, and charges softirq work to whichever task it interrupted).

    Use as a context manager; :meth:`busy_fraction` measures a span::

        with IdleSpinner(cpu=0) as spin:
            start = spin.mark()
            work()
            used = spin.busy_fraction(start)   # share of the CPU the work took

    The loop's speed, :attr:`idle_rate`, is counted per second of the CPU time the loop
    itself got (``CLOCK_THREAD_CPUTIME_ID``), not per second of wall time: a baseline
    taken while other tasks run now and then is still the speed of an unshared CPU.

    Parameters
    ----------
    cpu : int
        The CPU to watch.
    baseline_s : float, default 0.5
        Least wall time over which to measure the loop's speed (s).  The baseline goes
        on, up to ten times as long, until the loop has had 1/30 of this in CPU time.

    Raises
    ------
    RuntimeError
        On entry, when the loop got too little of the CPU to measure its speed.
    """

    def __init__(self, cpu: int, baseline_s: float = 0.5) -> None:
        self.cpu = cpu
        self.baseline_s = baseline_s
        ctx = multiprocessing.get_context("fork")
        self._counter = ctx.Value("q", 0, lock=False)
        self._cpu_ns = ctx.Value("q", 0, lock=False)
        self._stop = ctx.Event()
        self._proc = ctx.Process(
            target=_count_spins,
            args=(cpu, self._counter, self._cpu_ns, self._stop),
            daemon=True,
        )
        self.idle_rate = math.nan

    def _progress(self) -> tuple[int, int]:
        # The loop writes its count, then its CPU clock: read in the other order, the
        # count is at most one block ahead of the clock once the clock has been written
        # (the loop can be sent away between the two writes of its first block).
        cpu_ns = int(self._cpu_ns.value)
        return int(self._counter.value), cpu_ns

    def __enter__(self) -> IdleSpinner:
        self._proc.start()
        started = time.monotonic()
        deadline = started + 10 * self.baseline_s
        need_ns = int(self.baseline_s / 30 * 1e9)  # 1/30 of it in CPU time: 67 blocks at 0.5 s
        first: tuple[int, int] | None = None
        while time.monotonic() < deadline and self._proc.is_alive():
            time.sleep(min(self.baseline_s / 10, 0.05))
            count, cpu_ns = self._progress()
            if first is None:
                first = (count, cpu_ns) if cpu_ns > 0 else None  # its clock is written
                continue
            ran_ns = cpu_ns - first[1]
            if ran_ns >= need_ns and time.monotonic() - started >= self.baseline_s:
                self.idle_rate = (count - first[0]) / (ran_ns / 1e9)
                break
        if not self._proc.is_alive():
            raise RuntimeError(
                f"the idle loop on CPU {self.cpu} ended (exit code {self._proc.exitcode}): "
                "is the CPU one this process may use?"
            )
        if not self.idle_rate > 0:
            self.__exit__()
            raise RuntimeError(
                f"CPU {self.cpu} gave a lowest-priority loop under {need_ns / 1e6:.0f} ms in "
                f"{10 * self.baseline_s:g} s: other tasks keep it busy, so the CPU they "
                "leave cannot be measured"
            )
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._proc.join(5)
        if self._proc.is_alive():
            self._proc.kill()

    def mark(self) -> tuple[int, float]:
        """The loop's count and the monotonic time (s) now."""
        return int(self._counter.value), time.monotonic()

    def busy_fraction(self, since: tuple[int, float]) -> tuple[float, float]:
        """Share of the CPU others used since ``since`` (0..1), and the span (s)."""
        count, t = self.mark()
        span = t - since[1]
        done = (count - since[0]) / (self.idle_rate * span) if span > 0 else 1.0
        return min(max(1.0 - done, 0.0), 1.0), span


def _spin(cpu: int, seconds: float) -> None:
    os.sched_setaffinity(0, {cpu})
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        for _ in range(10_000):
            pass


def measure_time_slice(
    *,
    cpu: int | None = None,
    runs: int = 5,
    seconds: float = 1.0,
    gap_s: float = 50e-6,
) -> Spread:
    """Measure the scheduler's time slice: how long another CPU-bound task holds the CPU.

    This process and one busy loop share ``cpu``; this process reads the clock as fast
    as it can, and every gap longer than ``gap_s`` is a time the other task ran.  The
    mean gap is the slice that a receiver waits for each competitor (what
    :func:`queues.modulated.time_slice_environment` needs), measured rather than read
    from the scheduler's settings (``/sys/kernel/debug/sched/base_slice_ns`` is often
    unreadable, and the slice a task really gets also depends on wake-up preemption).

    Parameters
    ----------
    cpu : int, optional
        The CPU to measure (default: the first this process may use).
    runs : int, default 5
        Repetitions (1..100), one mean gap each.
    seconds : float, default 1
        Length of each run (s), in (0, 600].
    gap_s : float, default 5e-5
        Shortest gap counted as a slice of the other task (s); the clock loop itself
        takes well under a microsecond.

    Returns
    -------
    Spread
        Mean slice per run (s).
    """
    if not 1 <= runs <= 100:
        raise ValueError(f"runs must lie in [1, 100], got {runs}")
    if not 0 < seconds <= MAX_RUN_SECONDS:
        raise ValueError(f"seconds must lie in (0, {MAX_RUN_SECONDS:g}], got {seconds}")
    target = sorted(os.sched_getaffinity(0))[0] if cpu is None else cpu
    ctx = multiprocessing.get_context("fork")
    old = os.sched_getaffinity(0)
    slices: list[float] = []
    try:
        os.sched_setaffinity(0, {target})
        for _ in range(runs):
            other = ctx.Process(target=_spin, args=(target, seconds + 1.0), daemon=True)
            other.start()
            try:
                clock = time.perf_counter
                gaps: list[float] = []
                last = clock()
                end = last + seconds
                while last < end:
                    now = clock()
                    if now - last > gap_s:
                        gaps.append(now - last)
                    last = now
            finally:
                other.terminate()
                other.join(5)
            if gaps:
                slices.append(statistics.fmean(gaps))
    finally:
        os.sched_setaffinity(0, old)
    if not slices:
        raise RuntimeError("no other task ran on the CPU: cannot measure its slice")
    return Spread.of(slices)


def _two_cpus(receiver_cpu: int | None, sender_cpu: int | None) -> tuple[int, int]:
    cpus = sorted(os.sched_getaffinity(0))
    rx = cpus[0] if receiver_cpu is None else receiver_cpu
    if sender_cpu is not None:
        return rx, sender_cpu
    # A receiver pinned to one core (taskset -c 0) still calibrates with its sender on
    # another: a child may run on any online core, whatever its parent's affinity.
    others = [c for c in cpus if c != rx] or [c for c in _online_cpus() if c != rx]
    return rx, (others[0] if others else rx)


def _online_cpus() -> list[int]:
    """The CPUs online (``/sys/devices/system/cpu/online``, e.g. ``0-3,6``)."""
    try:
        text = Path("/sys/devices/system/cpu/online").read_text().strip()
    except OSError:
        return list(range(os.cpu_count() or 1))
    cpus: list[int] = []
    for part in text.split(","):
        lo, _, hi = part.partition("-")
        cpus.extend(range(int(lo), int(hi or lo) + 1))
    return cpus


def measure_net_service(
    *,
    batch_packets: int,
    payload_bytes: int = 1468,
    datagrams: Sequence[bytes] | None = None,
    receive_path: Callable[[socket.socket], Callable[[int], int]] | None = None,
    rcvbuf_bytes: int | None = 4 * 2**20,
    runs: int = 5,
    seconds: float = 2.0,
    receiver_cpu: int | None = None,
    sender_cpu: int | None = None,
    on_run: Callable[[int], None] | None = None,
) -> NetCalibration:
    """Measure mu_net: wake-ups of N datagrams per CPU second of the receive path.

    Parameters
    ----------
    batch_packets : int
        N: datagrams drained per wake-up (1..4096).
    payload_bytes : int, default 1468
        Payload per datagram, for the sender's bit rate (bytes).
    datagrams : sequence of bytes, optional
        What the sender sends, round robin (default: zero datagrams of
        ``payload_bytes``).  Give the real datagrams when ``process`` checks them.
    receive_path : callable, optional
        ``receive_path(sock)`` returns the receiver's wake-up on ``sock``: a function
        ``(limit) -> datagrams taken`` that takes up to ``limit`` datagrams without
        blocking (:func:`datamover.receive_path.calibration_receive_path`, the path of
        ``blastrate receive``).  Default: bare ``recv_into`` calls, nothing checked.
    rcvbuf_bytes : int or None, default 4 MiB
        SO_RCVBUF of the receiving socket: large, so one fill gives many wake-ups
        (capped by ``net.core.rmem_max``).
    runs : int, default 5
        Repetitions (1..100).
    seconds : float, default 2
        Length of each run (s), in (0, 600].
    receiver_cpu, sender_cpu : int, optional
        Cores (default: the first two this process may use).
    on_run : callable, optional
        Called with the index of each finished run (progress).

    Returns
    -------
    NetCalibration
    """
    if not 1 <= batch_packets <= 4096:
        raise ValueError(f"batch_packets must lie in [1, 4096], got {batch_packets}")
    if not 1 <= runs <= 100:
        raise ValueError(f"runs must lie in [1, 100], got {runs}")
    if not 0 < seconds <= MAX_RUN_SECONDS:
        raise ValueError(f"seconds must lie in (0, {MAX_RUN_SECONDS:g}], got {seconds}")
    ring = list(datagrams) if datagrams else [bytes(payload_bytes)]
    rx_cpu, tx_cpu = _two_cpus(receiver_cpu, sender_cpu)
    ctx = multiprocessing.get_context("fork")
    rates, walls, fulls, sender_rates = [], [], [], []
    old_affinity = os.sched_getaffinity(0)
    try:
        os.sched_setaffinity(0, {rx_cpu})
        for run in range(runs):
            rate, wall, full, sent_bps = _net_run(
                ctx, ring, receive_path, batch_packets, payload_bytes, rcvbuf_bytes, seconds, tx_cpu
            )
            rates.append(rate)
            walls.append(wall)
            fulls.append(full)
            sender_rates.append(sent_bps)
            if on_run is not None:
                on_run(run)
    finally:
        os.sched_setaffinity(0, old_affinity)
    return NetCalibration(
        mu_net=Spread.of(rates),
        wall_rate=Spread.of(walls),
        full_fraction=Spread.of(fulls),
        sender_rate_bps=Spread.of(sender_rates),
        batch_packets=batch_packets,
        payload_bytes=payload_bytes,
        seconds=seconds,
        cpus=(rx_cpu, tx_cpu),
    )


def _bare_wakeup(sock: socket.socket, largest: int) -> Callable[[int], int]:
    """A wake-up that only reads: up to ``limit`` ``recv_into`` calls, nothing checked."""
    buf = bytearray(largest + 1)
    recv_into = sock.recv_into

    def wakeup(limit: int) -> int:
        n = 0
        while n < limit:
            try:
                recv_into(buf)
            except BlockingIOError:
                break
            n += 1
        return n

    return wakeup


def _net_run(
    ctx: Any,
    ring: list[bytes],
    receive_path: Callable[[socket.socket], Callable[[int], int]] | None,
    batch: int,
    payload_bytes: int,
    rcvbuf_bytes: int | None,
    seconds: float,
    tx_cpu: int,
) -> tuple[float, float, float, float]:
    sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    sel = selectors.DefaultSelector()
    warmup = 0.2
    fill_s = 0.005
    sent = ctx.Value("q", 0)
    child = None
    try:
        if rcvbuf_bytes is not None:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, rcvbuf_bytes)
        sock.bind(("127.0.0.1", 0))
        sock.setblocking(False)
        sel.register(sock, selectors.EVENT_READ)
        wakeup = (
            _bare_wakeup(sock, max(len(d) for d in ring))
            if receive_path is None
            else receive_path(sock)
        )
        child = ctx.Process(
            target=_blast,
            args=(sock.getsockname(), ring, seconds + warmup + 0.5, tx_cpu, sent),
            daemon=True,
        )
        child.start()
        if not sel.select(timeout=10.0):
            raise RuntimeError("the calibration sender sent nothing within 10 s")
        time.sleep(warmup)
        cpu = 0.0
        wakeups = 0.0
        full = partial = 0
        t0 = time.monotonic()
        while time.monotonic() - t0 < seconds:
            # Fill: the sender has the buffer to itself for a moment.
            time.sleep(fill_s)
            c0 = time.thread_time()
            while True:
                sel.select(timeout=0)
                n = wakeup(batch)
                if n < batch:
                    # The buffer ran dry: the last wake-up counts for the share it did.
                    wakeups += n / batch
                    partial += 1
                    break
                wakeups += 1
                full += 1
            cpu += time.thread_time() - c0
        wall = time.monotonic() - t0
        child.join(timeout=seconds + 10)
        total = seconds + warmup + 0.5
        sent_bps = sent.value * 8.0 * payload_bytes / total
        return wakeups / cpu, wakeups / wall, full / max(full + partial, 1), sent_bps
    finally:
        if child is not None and child.is_alive():
            child.terminate()
            child.join(timeout=5)
        sel.close()
        sock.close()


def write_line_file(path: str | Path, file_bytes: int) -> int:
    """Write the I/O task's file: 128-byte numbered lines, ``file_bytes`` rounded down.

    Returns
    -------
    int
        Number of lines.
    """
    return _write_lines(Path(path), file_bytes)


def run_io_task(path: str | Path, *, seconds: float, seed: int = 0) -> int:
    """Run the representative I/O-bound task on a :func:`write_line_file` file for
    ``seconds`` (bounded to :data:`MAX_RUN_SECONDS`): read random lines, page cache
    defeated, as in the calibration.  Returns the number of lines read.
    """
    seconds = min(float(seconds), MAX_RUN_SECONDS)
    lines = os.path.getsize(path) // _LINE_BYTES
    try:
        fd = os.open(path, os.O_RDONLY | os.O_DIRECT)
        method = "O_DIRECT"
    except OSError:
        fd = os.open(path, os.O_RDONLY)
        method = "fadvise"
    rng = random.Random(seed)
    done = 0
    stop = time.monotonic() + seconds
    try:
        while time.monotonic() < stop:
            _io_run(fd, method, lines, 256, stop - time.monotonic(), rng)
            done += 256
    except RuntimeError:
        pass  # the last slice was cut short by the deadline
    finally:
        os.close(fd)
    return done


def _write_lines(path: Path, file_bytes: int) -> int:
    lines = file_bytes // _LINE_BYTES
    chunk_lines = (1 << 20) // _LINE_BYTES
    with open(path, "wb") as f:
        for first in range(0, lines, chunk_lines):
            n = min(chunk_lines, lines - first)
            f.write(
                b"".join(
                    f"{i:015d} {(i * 2654435761) % 2**32:010d}".ljust(_LINE_BYTES - 1).encode()
                    + b"\n"
                    for i in range(first, first + n)
                )
            )
        f.flush()
        os.fsync(f.fileno())
    return lines


def measure_io_service(
    *,
    directory: str | Path | None = None,
    file_bytes: int = 256 * 2**20,
    runs: int = 5,
    reads: int = 2000,
    seconds: float = 20.0,
    cpu: int | None = None,
    seed: int = 0,
    on_run: Callable[[int], None] | None = None,
) -> IoCalibration:
    """Measure mu_io_cpu and mu_disk with the random-line reader, page cache defeated.

    Parameters
    ----------
    directory : str or Path, optional
        Where the large file is written (default: the system's temporary directory);
        it must be on the disk to measure, not a RAM file system.
    file_bytes : int, default 256 MiB
        Size of the file, 1 MiB .. 64 GiB.  Larger than the device cache measures the
        device; the file is removed afterwards.
    runs : int, default 5
        Repetitions (1..100).
    reads : int, default 2000
        Random-line reads per run.
    seconds : float, default 20
        Longest a run may take (s); a run stops early when it is reached.
    cpu : int, optional
        Core to pin the reader to.
    seed : int, default 0
        Seed of the line numbers.
    on_run : callable, optional
        Called with the index of each finished run.

    Returns
    -------
    IoCalibration
    """
    if not 2**20 <= file_bytes <= MAX_FILE_BYTES:
        raise ValueError(
            f"file_bytes must lie in [1 MiB, {MAX_FILE_BYTES}] bytes, got {file_bytes}"
        )
    if not 1 <= runs <= 100 or not 1 <= reads <= 10**7:
        raise ValueError("runs must lie in [1, 100] and reads in [1, 10**7]")
    if not 0 < seconds <= MAX_RUN_SECONDS:
        raise ValueError(f"seconds must lie in (0, {MAX_RUN_SECONDS:g}], got {seconds}")
    old_affinity = os.sched_getaffinity(0)
    fd_tmp, name = tempfile.mkstemp(dir=directory, prefix=".blastrate-calibration-", suffix=".txt")
    os.close(fd_tmp)
    path = Path(name)
    try:
        if cpu is not None:
            os.sched_setaffinity(0, {cpu})
        lines = _write_lines(path, file_bytes)
        try:
            fd = os.open(path, os.O_RDONLY | os.O_DIRECT)
            method = "O_DIRECT"
        except OSError:
            fd = os.open(path, os.O_RDONLY)
            method = "fadvise"
        try:
            io_rates, disk_rates = [], []
            rng = random.Random(seed)
            for run in range(runs):
                inter, disk = _io_run(fd, method, lines, reads, seconds, rng)
                io_rates.append(1.0 / inter)
                disk_rates.append(1.0 / disk)
                if on_run is not None:
                    on_run(run)
        finally:
            os.close(fd)
    finally:
        path.unlink(missing_ok=True)
        os.sched_setaffinity(0, old_affinity)
    return IoCalibration(
        mu_io_cpu=Spread.of(io_rates),
        mu_disk=Spread.of(disk_rates),
        method=method,
        file_bytes=lines * _LINE_BYTES,
        reads=reads,
    )


def _io_run(
    fd: int, method: str, lines: int, reads: int, seconds: float, rng: random.Random
) -> tuple[float, float]:
    # One 4 KiB page-aligned buffer: O_DIRECT needs the alignment.
    block = mmap.mmap(-1, _BLOCK_BYTES)
    stop = time.monotonic() + seconds
    inter_total = disk_total = 0.0
    done = 0
    checksum = 0
    try:
        cpu_end_of_access = time.thread_time()
        for _ in range(reads):
            line = rng.randrange(lines)
            offset = line * _LINE_BYTES
            start = offset - offset % _BLOCK_BYTES
            if method == "fadvise":
                os.posix_fadvise(fd, start, _BLOCK_BYTES, os.POSIX_FADV_DONTNEED)
            cpu_start_of_access = time.thread_time()
            t0 = time.perf_counter()
            got = os.preadv(fd, [block], start)
            t1 = time.perf_counter()
            cpu_after = time.thread_time()
            if got != _BLOCK_BYTES:
                raise OSError(f"short read of {got} bytes at offset {start}")
            # The CPU the read itself costs (system call, block layer, and on a virtual
            # machine the exits of the virtual disk) is processor work of the task, not
            # disk time: it competes for the core like the rest of the burst.
            cpu_in_read = cpu_after - cpu_start_of_access
            inter_total += cpu_start_of_access - cpu_end_of_access + cpu_in_read
            disk_total += max(t1 - t0 - cpu_in_read, 0.0)
            cpu_end_of_access = cpu_after
            # The task's own work on the line: parse its two numbers.
            text = block[offset - start : offset - start + _LINE_BYTES].split()
            checksum ^= int(text[0]) ^ int(text[1])
            done += 1
            if time.monotonic() > stop:
                break
    finally:
        block.close()
    if done < 2:
        raise RuntimeError("fewer than two reads completed in the time allowed")
    # The first interval has no previous access; the rest are between accesses.
    return inter_total / done, disk_total / done


def calibration_provenance(
    net: NetCalibration,
    io: IoCalibration,
    time_slice: Spread,
    *,
    method: str,
    started_unix: float,
    buffer_packets: int,
    **extra: Any,
) -> dict[str, Any]:
    """What a stored calibration records beside its profile: the host, when and under
    what load it was measured, and every measurement with its spread.

    Parameters
    ----------
    net, io, time_slice
        The measurements (the slice in s, stored as ``time_slice_s`` for the time-slice
        model too).
    method : str
        Who measured (``blastrate calibrate``, a receiver's quick calibration).
    started_unix : float
        When the measurement started (``time.time()``).
    buffer_packets : int
        K.
    **extra
        Further fields (``kind``, ``rcvbuf_bytes``, ``line_rate_source``, ...).
    """
    import platform

    return {
        **extra,
        "method": method,
        "host": platform.node(),
        "kernel": platform.release(),
        "python": platform.python_version(),
        "started_unix": started_unix,
        "duration_s": time.time() - started_unix,
        "load_average": list(os.getloadavg()),
        "buffer_packets": buffer_packets,
        "net": net.to_dict(),
        "io": io.to_dict(),
        # The time-slice model's scheduler slice (transport.timeslice).
        "time_slice_s": time_slice.mean,
        "time_slice": time_slice.to_dict(),
    }


def calibrated_profile(
    name: str,
    net: NetCalibration,
    io: IoCalibration,
    *,
    buffer_packets: int,
    line_rate_bps: float,
    mu_net: float | None = None,
) -> HostProfile:
    """A :class:`HostProfile` from calibration means (rates in 1/s).

    Parameters
    ----------
    name : str
        Profile name.
    net, io : NetCalibration, IoCalibration
        Measurements; their means are used.
    buffer_packets : int
        K, from :func:`measure_buffer_packets`.
    line_rate_bps : float
        Line rate (bit/s): e.g. the sender's measured maximum.
    mu_net : float, optional
        Wake-ups per second of the receiver's CPU to use instead of ``net``'s: ``1 / (a +
        N b)`` from the wake-up fit on the kernel path
        (:meth:`host.kernel_path.KernelShare.mu_net`), which counts what a wake-up from
        sleep costs; ``net`` measures a receiver that never sleeps.
    """
    return HostProfile(
        name=name,
        mu_io_cpu=io.mu_io_cpu.mean,
        mu_disk=io.mu_disk.mean,
        mu_net=net.mu_net.mean if mu_net is None else mu_net,
        buffer_packets=buffer_packets,
        coalesce_packets=min(net.batch_packets, buffer_packets),
        line_rate_bps=line_rate_bps,
        packet_payload_bytes=net.payload_bytes,
    )
