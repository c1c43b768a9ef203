"""The RBUDP sender: blast a file over UDP at a paced rate, resend what the receiver
reports missing, until nothing is (He, Leigh, Yu and DeFanti, "Reliable Blast UDP", 2002).

Pacing.  Packet k of a blast is due at ``t0 + k * 8 * S_pkt / rate`` on the monotonic
clock.  Before each batch the sender checks the clock: if the batch is due more than
1.5 ms from now it sleeps until 1 ms before (the kernel's sleep overshoots by tens of
microseconds to a millisecond on a busy host), then busy-waits the rest, so the
schedule holds to a few microseconds while the sender keeps up.  When it is behind, its
next call carries every packet already due, up to :data:`MAX_BURST_PACKETS`, so that
a send call's fixed cost (tens of microseconds) does not cap the paced rate at a batch
per call: it falls back to the schedule unless the sender's CPU is the limit even at
the largest burst.  It never owes more than :data:`MAX_BURST_PACKETS`: an older debt
is forgiven, so a stall does not turn into a burst that a receiver could not take.  The
rate each blast actually achieved is in the report (``achieved_rate_bps``).
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import math
import mmap
import os
import socket
import struct
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import NDArray

from .control import ControlChannel, ControlError, MessageKind
from .handshake import PROTOCOL_VERSION, SessionKeys, answer_challenge, stretched_key
from .segments import (
    SOL_UDP,
    UDP_SEGMENT,
    enable_gso,
    largest_unfragmented,
    segments_per_call,
)
from .wire import (
    DEFAULT_PAYLOAD_BYTES,
    HEADER_BYTES,
    MAX_PAYLOAD_BYTES,
    MAX_ROUND,
    DatagramCodec,
    WireError,
)

__all__ = [
    "BATCH_SPACING_S",
    "MAX_BURST_PACKETS",
    "RoundReport",
    "SendError",
    "SendReport",
    "batch_packets_for",
    "blast",
    "send_file",
    "tcp_round_trip_s",
]

#: Most packets the pacer owes at once, and sends in one call to catch up with its schedule.
MAX_BURST_PACKETS = 32
#: Time a paced batch spans (s): the batch is as many datagrams as the rate sends in it.
BATCH_SPACING_S = 50e-6
_SLEEP_THRESHOLD_S = 1.5e-3
_SLEEP_MARGIN_S = 1e-3


class SendError(Exception):
    """A transfer could not start or did not finish.

    Attributes
    ----------
    field : str
        The offending argument or the limit hit (``"file"``, ``"rate"``,
        ``"max_rounds"``, ``"total_timeout_s"``, ``"sha256"``, or a field the receiver
        named when it refused the file).
    """

    def __init__(self, field: str, reason: str) -> None:
        super().__init__(f"{field}: {reason}")
        self.field = field
        self.reason = reason


@dataclass(frozen=True)
class RoundReport:
    """One blast and the receiver's answer.

    Attributes
    ----------
    round : int
        1 for the first blast.
    packets_sent, bytes_sent : int
        Datagrams sent and their payload bytes.
    missing_after : int
        Packets still missing once this blast was over.
    loss : float
        ``missing_after`` over the packets of this blast (what this round lost).
    blast_s : float
        Duration of the blast (s).
    achieved_rate_bps : float
        Payload bits sent over ``blast_s`` (bit/s).
    """

    round: int
    packets_sent: int
    bytes_sent: int
    missing_after: int
    loss: float
    blast_s: float
    achieved_rate_bps: float

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form."""
        return {
            "round": self.round,
            "packets_sent": self.packets_sent,
            "bytes_sent": self.bytes_sent,
            "missing_after": self.missing_after,
            "loss": self.loss,
            "blast_s": self.blast_s,
            "achieved_rate_bps": self.achieved_rate_bps,
        }


@dataclass
class SendReport:
    """What one transfer did.

    Attributes
    ----------
    name : str
        File name sent to the receiver.
    size : int
        File size (bytes).
    packets : int
        Datagrams the file takes.
    rate_bps : float or None
        Target sending rate of payload (bit/s); None = unpaced (as fast as possible).
    rounds : list of RoundReport
        Every blast.
    transfer_s : float
        From the start of the first blast to the receiver's report that nothing is
        missing (s): what the RBUDP model's T predicts.
    total_s : float
        From the call to the receiver's digest check (s): the file's digest, the
        handshake, every round.
    digest_s : float
        Of which computing the file's SHA-256 before connecting (s).
    handshake_s : float
        Of which from connecting to the receiver's ACCEPT (s): the secret proved both
        ways, the HELLO, and the receiver's advice when asked for.
    accept_wait_s : float
        Of which from sending the HELLO to the ACCEPT (s): the receiver's checks of the
        file, its reserving the file's space, and its advice.
    sha256 : str
        Digest of the file sent (hex).
    receiver_sha256 : str
        Digest of the file the receiver wrote (hex).
    advice : dict or None
        The receiver's rate advice when it was asked for (see ``send_file(advise=)``).
    batch_packets : int
        Datagrams per paced batch (:func:`batch_packets_for`).
    gso : str
        ``"on"`` when batches left in one segmented send each (UDP GSO), else why not
        (one datagram per send).
    """

    name: str
    size: int
    packets: int
    rate_bps: float | None
    rounds: list[RoundReport] = field(default_factory=list)
    transfer_s: float = 0.0
    total_s: float = 0.0
    digest_s: float = 0.0
    handshake_s: float = 0.0
    accept_wait_s: float = 0.0
    sha256: str = ""
    receiver_sha256: str = ""
    advice: dict[str, Any] | None = None
    batch_packets: int = 1
    gso: str = "on"

    @property
    def digest_ok(self) -> bool:
        """True when the receiver's digest equals the sender's."""
        return bool(self.sha256) and self.sha256 == self.receiver_sha256

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form."""
        return {
            "name": self.name,
            "size": self.size,
            "packets": self.packets,
            "rate_bps": self.rate_bps,
            "rounds": [r.to_dict() for r in self.rounds],
            "bytes_sent": sum(r.bytes_sent for r in self.rounds),
            "transfer_s": self.transfer_s,
            "total_s": self.total_s,
            "digest_s": self.digest_s,
            "handshake_s": self.handshake_s,
            "accept_wait_s": self.accept_wait_s,
            "sha256": self.sha256,
            "receiver_sha256": self.receiver_sha256,
            "digest_ok": self.digest_ok,
            "batch_packets": self.batch_packets,
            "gso": self.gso,
            **({} if self.advice is None else {"advice": self.advice}),
        }


def batch_packets_for(rate_bps: float | None, packet_bits: float, most: int) -> int:
    """Datagrams per paced batch: as many as the rate sends in
    :data:`BATCH_SPACING_S` (at least 1, at most ``most``); ``most`` when unpaced.

    Small at the rates a busy receiver is advised (3 at 500 Mbit/s with 1,440-byte
    payloads, 5 at 1 Gbit/s), so that the arrivals stay close to the paced stream the
    model assumes; larger where only a batch per system call keeps the rate (22 at
    5 Gbit/s).
    """
    if not rate_bps:
        return most
    return max(1, min(most, math.ceil(rate_bps * BATCH_SPACING_S / packet_bits)))


def blast(
    send: Callable[[NDArray[np.int64]], Any],
    seqs: NDArray[np.int64],
    *,
    packet_bits: float,
    rate_bps: float | None,
    deadline: float,
    batch_packets: int = 1,
    max_burst_packets: int = MAX_BURST_PACKETS,
) -> float:
    """Send the packets ``seqs`` in batches of ``batch_packets``, paced at ``rate_bps``.

    Parameters
    ----------
    send : callable
        Sends the datagrams of a batch of packet indices (one or a few system calls).
    seqs : ndarray of int
        Packet indices, in order.
    packet_bits : float
        Payload bits of one full packet (8 * S_pkt): the pacing unit.
    rate_bps : float or None
        Payload bit rate (bit/s); None sends back to back.
    deadline : float
        ``time.monotonic()`` after which the blast stops with :class:`SendError`.
    batch_packets : int, default 1
        Packets per call of ``send`` on schedule; the call starting at packet k is due at
        ``t0 + k * packet_bits / rate_bps``.
    max_burst_packets : int, default 32
        Most packets owed at once (at least one batch): a call made behind schedule
        carries every packet already due, up to this many; an older debt is forgiven
        (the rate achieved is then below ``rate_bps``).

    Returns
    -------
    float
        Duration of the blast (s).
    """
    clock = time.monotonic
    interval = packet_bits / rate_bps if rate_bps else 0.0
    batch = max(1, int(batch_packets))
    burst = max(1, max_burst_packets, batch)
    slack = burst * interval
    t0 = clock()
    due = t0
    start, calls = 0, 0
    while start < len(seqs):
        size = batch
        if interval:
            now = clock()
            ahead = due - now
            if ahead > 0.0:
                if now > deadline:
                    raise SendError("total_timeout_s", "the transfer did not finish in time")
                if ahead > _SLEEP_THRESHOLD_S:
                    # Never past the deadline, which is checked again on waking.
                    time.sleep(min(ahead - _SLEEP_MARGIN_S, max(deadline - now, 0.0)))
                    if clock() > deadline:
                        raise SendError("total_timeout_s", "the transfer did not finish in time")
                while clock() < due:
                    pass
            elif -ahead > slack:
                due = now - slack  # forgive the older debt
                size = burst
            else:
                # Behind: one call takes every packet already due (at most a burst), so
                # that a call's fixed cost is paid once for them, not once a batch.
                size = min(burst, max(batch, int(-ahead / interval) + 1))
        chunk = seqs[start : start + size]
        start += chunk.size
        if interval:
            due += interval * chunk.size
        if not calls & 255 and clock() > deadline:
            raise SendError("total_timeout_s", "the transfer did not finish in time")
        calls += 1
        send(chunk)
    return clock() - t0


class _DatagramWriter:
    """The sender's data socket: datagrams of a batch of packets, in as few calls as the
    kernel allows (one GSO send per batch), else one datagram per call."""

    def __init__(
        self, sock: socket.socket, codec: DatagramCodec, source: NDArray[np.uint8], gso: bool
    ) -> None:
        self.sock = sock
        self.codec = codec
        self.source = source
        self.round = 1
        self.gso_note = enable_gso(sock, codec.datagram_bytes) if gso else "turned off (--no-gso)"
        if self.gso_note is not None and gso:
            # Too large for the path (not a refusal): name the payload that fits.
            room = largest_unfragmented(sock)
            if room is not None and codec.datagram_bytes > room:
                self.gso_note += f"; --payload {room - HEADER_BYTES} fits"
        # Encoded a batch at a time either way (the array work is per batch); without GSO
        # a batch then leaves one datagram per call.
        self.most = segments_per_call(codec.datagram_bytes)
        self._out = np.empty((self.most, codec.datagram_bytes), np.uint8)

    def fall_back(self, reason: str) -> None:
        self.gso_note = reason
        with contextlib.suppress(OSError):
            self.sock.setsockopt(SOL_UDP, UDP_SEGMENT, 0)

    def _send(self, data: memoryview) -> bool:
        # A datagram that cannot leave is a lost datagram, which the next round resends:
        # an ICMP error from an earlier one (the receiver's socket was briefly gone), or a
        # full interface queue.  A receiver that is really gone shows on the control
        # connection.  False: the kernel refused the segmented send itself.
        try:
            self.sock.send(data)
        except (ConnectionRefusedError, BlockingIOError):
            pass
        except OSError as exc:
            if exc.errno == errno.ENOBUFS:
                return True
            if self.gso_note is None and exc.errno in (
                errno.EIO,
                errno.EINVAL,
                errno.EOPNOTSUPP,
                errno.EMSGSIZE,
            ):
                self.fall_back(f"a segmented send failed ({exc.strerror})")
                return False
            raise SendError("connection", f"cannot send a datagram: {exc}") from None
        return True

    def __call__(self, seqs: NDArray[np.int64]) -> None:
        codec = self.codec
        full = seqs
        if seqs.size and seqs[-1] >= codec.full_packets:  # the short last packet
            full = seqs[:-1]
            last = int(seqs[-1])
            start = last * codec.payload_bytes
            tail = codec.encode(last, self.round, self.source[start:].data)
            self._send(memoryview(tail))
        for begin in range(0, full.size, self._out.shape[0]):
            part = full[begin : begin + self._out.shape[0]]
            out = self._out[: part.size]
            codec.encode_full(part, self.round, self.source, out)
            flat = out.reshape(-1).data
            if self.gso_note is None and part.size > 1 and self._send(flat):
                continue
            step = codec.datagram_bytes
            for a in range(0, part.size * step, step):
                self._send(flat[a : a + step])


_TCP_INFO_RTT = struct.Struct("=I")  # tcpi_rtt (us), at offset 68 of Linux's struct tcp_info
_TCP_INFO_RTT_OFFSET = 68


def tcp_round_trip_s(sock: socket.socket) -> float | None:
    """The kernel's smoothed round-trip time of a connected TCP socket (s), or None.

    Right after ``connect`` it is the SYN / SYN-ACK exchange: a round trip measured
    without sending anything the peer has to answer.
    """
    tcp_info = getattr(socket, "TCP_INFO", None)
    if tcp_info is None or sock.family not in (socket.AF_INET, socket.AF_INET6):
        return None
    try:
        raw = sock.getsockopt(socket.IPPROTO_TCP, tcp_info, 104)
    except OSError:
        return None
    if len(raw) < _TCP_INFO_RTT_OFFSET + _TCP_INFO_RTT.size:
        return None
    (rtt_us,) = _TCP_INFO_RTT.unpack_from(raw, _TCP_INFO_RTT_OFFSET)
    return rtt_us / 1e6 if rtt_us > 0 else None


def _advised_rate(advice: Any) -> float:
    if not isinstance(advice, dict):
        raise SendError("advice", "the receiver gave no rate advice")
    if "error" in advice:
        raise SendError("advice", f"the receiver could not advise: {str(advice['error'])[:400]}")
    rate = advice.get("predicted_rate_bps")
    # A floor of 1 kbit/s: a hostile or broken receiver must not park the sender for hours.
    if isinstance(rate, bool) or not isinstance(rate, int | float) or not (1e3 <= rate < 1e13):
        raise SendError("advice", f"the receiver advised an invalid rate {rate!r}")
    return float(rate)


def _file_digest(view: mmap.mmap | None) -> str:
    h = hashlib.sha256()
    if view is not None:
        h.update(view)
    return h.hexdigest()


def send_file(
    path: str | Path,
    host: str,
    port: int,
    *,
    rate_bps: float | None,
    secret: bytes | None = None,
    insecure: bool = False,
    payload_bytes: int = DEFAULT_PAYLOAD_BYTES,
    name: str | None = None,
    source_port: int = 0,
    source_address: str | None = None,
    emulate_delay_s: float = 0.0,
    max_rounds: int = 1000,
    total_timeout_s: float = 3600.0,
    control_timeout_s: float = 60.0,
    sndbuf_bytes: int | None = None,
    max_burst_packets: int = MAX_BURST_PACKETS,
    on_round: Callable[[RoundReport], None] | None = None,
    advise: dict[str, Any] | None = None,
    gso: bool = True,
) -> SendReport:
    """Send one file to a :class:`transport.Receiver` with RBUDP.

    Parameters
    ----------
    path : str or Path
        The file to send.
    host : str
        Receiver address.
    port : int
        Receiver's TCP control port.
    rate_bps : float or None
        Sending rate of payload (bit/s), > 0; None = as fast as the sender can.
    secret : bytes, optional
        The secret shared with the receiver (:func:`datamover.handshake.load_secret`).
        Required unless ``insecure``.
    insecure : bool, default False
        Talk to a receiver that runs without a secret (and only to such a receiver).
    payload_bytes : int, default 1440
        File bytes per datagram S_pkt (the datagram adds a 32-byte header).
    name : str, optional
        Name for the receiver (default: the file's base name).
    source_port : int, default 0
        Local UDP port the datagrams leave from (0 = any free port).
    source_address : str, optional
        Local address to send from, control and data (iperf3's ``--bind``); default:
        the one the route gives.
    emulate_delay_s : float, default 0
        Emulated one-way propagation delay (s), as in the paper's §IV: each blast starts
        this long after the previous feedback, and each feedback is taken this long after
        it arrives.
    max_rounds : int, default 1000
        Most blasts before giving up.
    total_timeout_s : float, default 3600
        Longest the whole transfer may take (s).
    control_timeout_s : float, default 60
        Longest wait for one control message (s).
    sndbuf_bytes : int, optional
        SO_SNDBUF of the data socket.
    max_burst_packets : int, default 32
        Most packets the pacer owes at once, sent in one call when it is behind.
    on_round : callable, optional
        Called with each :class:`RoundReport` as it completes (progress).
    advise : dict, optional
        Ask the receiver for the rate (receiver feedback): the request of
        :func:`transport.advice.parse_advice_request` (``propagation_delay_s`` (s),
        optionally ``profile`` and ``model``; a ``propagation_delay_s`` of None is half the
        control connection's TCP round trip plus ``emulate_delay_s``).  The transfer then
        sends at the rate in
        the receiver's answer, ``rate_bps`` is ignored, and the answer is in the report
        (``advice``).  A receiver that cannot advise fails the transfer with
        ``SendError("advice", ...)`` before any datagram is sent.
    gso : bool, default True
        Send each paced batch in one system call with UDP segmentation offload where the
        kernel allows it (else, and with False, one datagram per call; the report's
        ``gso`` says which and why).

    Returns
    -------
    SendReport
        Rounds, bytes, loss per round, transfer time and both digests.

    Raises
    ------
    SendError
        Names the argument, the limit hit or the receiver's refusal; the file was not
        accepted (the receiver keeps nothing).
    """
    source = Path(path)
    if secret is None and not insecure:
        raise SendError("secret", "give the shared secret, or insecure=True")
    if secret is not None and insecure:
        raise SendError("secret", "a secret and insecure=True exclude each other")
    if not 0 <= source_port < 65536:
        raise SendError("source_port", f"must lie in [0, 65535], got {source_port}")
    if rate_bps is not None and not (rate_bps > 0 and np.isfinite(rate_bps)):
        raise SendError("rate", f"must be a finite positive bit rate, got {rate_bps}")
    if not 1 <= payload_bytes <= MAX_PAYLOAD_BYTES:
        raise SendError(
            "payload_bytes", f"must lie in [1, {MAX_PAYLOAD_BYTES}], got {payload_bytes}"
        )
    if not 0 <= emulate_delay_s <= 60:
        raise SendError("emulate_delay_s", f"must lie in [0, 60] s, got {emulate_delay_s}")
    if not 1 <= max_rounds <= MAX_ROUND:
        # A round number names each datagram's nonce (datamover.wire): it must not wrap.
        raise SendError("max_rounds", f"must lie in [1, {MAX_ROUND}], got {max_rounds}")
    started = time.monotonic()
    deadline = started + total_timeout_s
    try:
        fd = os.open(source, os.O_RDONLY)
    except OSError as exc:
        raise SendError("file", f"cannot open {str(source)!r}: {exc.strerror}") from None
    try:
        size = os.fstat(fd).st_size
        view = mmap.mmap(fd, size, prot=mmap.PROT_READ) if size else None
    finally:
        os.close(fd)
    try:
        return _send(
            view,
            size,
            name or source.name,
            host,
            port,
            rate_bps,
            payload_bytes,
            emulate_delay_s,
            max_rounds,
            deadline,
            control_timeout_s,
            sndbuf_bytes,
            max_burst_packets,
            on_round,
            started,
            advise,
            secret,
            source_port,
            source_address,
            gso,
        )
    finally:
        if view is not None:
            # An exception's traceback may still hold a view of the map (an interrupt
            # inside the batch encoder): the map then closes when it is collected.
            with contextlib.suppress(BufferError):
                view.close()


#: How long a sender keeps trying when the receiver closes its connection during the
#: handshake (a receiver under a flood of idle connections turns the newest away) (s).
_HANDSHAKE_RETRY_S = 3.0


def _authenticated(
    host: str,
    port: int,
    source_address: str | None,
    timeout_s: float,
    max_bitmap_bytes: int,
    secret: bytes | None,
    retry_until: float,
) -> tuple[socket.socket, ControlChannel, SessionKeys]:
    """Connect and prove the secret both ways.  A receiver that closes the connection
    before the proof is done is tried again, after 50 ms doubling, until ``retry_until``
    (monotonic s): under a flood it turns newcomers away while its handshakes are full."""
    stretched_key(secret)  # its scrypt before connecting, not inside the handshake
    pause = 0.05
    first = True
    while True:
        # A retry waits no longer than the retry window for its connection.
        wait = timeout_s if first else min(timeout_s, max(retry_until - time.monotonic(), 0.5))
        first = False
        try:
            conn = socket.create_connection(
                (host, port),
                timeout=wait,
                source_address=None if source_address is None else (source_address, 0),
            )
        except OSError as exc:
            raise SendError("to", f"cannot connect to {host}:{port}: {exc}") from None
        channel = ControlChannel(conn, max_bitmap_bytes=max_bitmap_bytes, timeout_s=timeout_s)
        try:
            return conn, channel, answer_challenge(channel, secret)
        except ControlError as exc:
            channel.close()
            if exc.field != "connection" or time.monotonic() + pause > retry_until:
                raise SendError(exc.field, exc.reason) from None
        time.sleep(pause)
        pause *= 2


def _send(
    view: mmap.mmap | None,
    size: int,
    name: str,
    host: str,
    port: int,
    rate_bps: float | None,
    payload_bytes: int,
    delay_s: float,
    max_rounds: int,
    deadline: float,
    control_timeout_s: float,
    sndbuf_bytes: int | None,
    max_burst_packets: int,
    on_round: Callable[[RoundReport], None] | None,
    started: float,
    advise: dict[str, Any] | None,
    secret: bytes | None,
    source_port: int,
    source_address: str | None = None,
    gso: bool = True,
) -> SendReport:
    try:
        # The codec's session and key come from the handshake; this one checks the sizes.
        codec = DatagramCodec(0, bytes(32), size, payload_bytes)
    except WireError as exc:
        raise SendError("file" if exc.field == "file_size" else exc.field, str(exc)) from None
    report = SendReport(name=name, size=size, packets=codec.packet_count, rate_bps=rate_bps)
    report.sha256 = _file_digest(view)
    connecting = time.monotonic()
    report.digest_s = connecting - started
    conn, channel, keys = _authenticated(
        host,
        port,
        source_address,
        control_timeout_s,
        8 + -(-codec.packet_count // 8),
        secret,
        min(deadline, connecting + _HANDSHAKE_RETRY_S),
    )
    udp: socket.socket | None = None
    source: NDArray[np.uint8] | None = None
    writer: _DatagramWriter | None = None
    if advise is not None and advise.get("propagation_delay_s") is None:
        # One-way delay = half the connection's round trip, plus the emulated delay.
        rtt = tcp_round_trip_s(conn) or 2e-3
        advise = {**advise, "propagation_delay_s": max(rtt / 2.0, 1e-6) + delay_s}
    try:
        codec = DatagramCodec(keys.session, keys.data_key, size, payload_bytes)
        # The data socket exists before the HELLO: the receiver connects its own to it.
        udp = socket.socket(conn.family, socket.SOCK_DGRAM)
        try:
            if sndbuf_bytes is not None:
                udp.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, sndbuf_bytes)
            udp.bind((conn.getsockname()[0], source_port))
        except OSError as exc:
            raise SendError(
                "source_port", f"cannot bind the data socket to port {source_port}: {exc.strerror}"
            ) from None
        channel.send_json(
            MessageKind.HELLO,
            {
                "version": PROTOCOL_VERSION,
                "name": name,
                "size": size,
                "payload_bytes": payload_bytes,
                "sha256": report.sha256,
                "udp_port": udp.getsockname()[1],
                **({} if advise is None else {"advise": advise}),
            },
        )
        hello_sent = time.monotonic()
        _, accept = channel.expect_json(MessageKind.ACCEPT)
        accepted = time.monotonic()
        report.handshake_s = accepted - connecting
        report.accept_wait_s = accepted - hello_sent
        if advise is not None:
            rate_bps = _advised_rate(accept.get("advice"))
            report.rate_bps = rate_bps
            report.advice = dict(accept["advice"])
        udp_port = accept.get("udp_port")
        if isinstance(udp_port, bool) or not isinstance(udp_port, int) or not 0 < udp_port < 65536:
            raise SendError("udp_port", f"receiver sent an invalid UDP port {udp_port!r}")
        peer = conn.getpeername()[0]
        udp.connect((peer, udp_port))
        udp.settimeout(control_timeout_s)

        source = np.frombuffer(view, dtype=np.uint8) if view is not None else np.empty(0, np.uint8)
        writer = _DatagramWriter(udp, codec, source, gso)
        report.gso = "on" if writer.gso_note is None else writer.gso_note
        seqs = np.arange(codec.packet_count, dtype=np.int64)
        first = time.monotonic()
        for round_ in range(1, max_rounds + 1):
            if delay_s:
                time.sleep(delay_s)
            writer.round = round_
            report.batch_packets = batch_packets_for(rate_bps, 8.0 * payload_bytes, writer.most)
            blast_s = blast(
                writer,
                seqs,
                packet_bits=8.0 * payload_bytes,
                rate_bps=rate_bps,
                deadline=deadline,
                batch_packets=report.batch_packets,
                max_burst_packets=max_burst_packets,
            )
            if writer.gso_note is not None and report.gso == "on":
                report.gso = writer.gso_note
            channel.send_json(MessageKind.BLAST_END, {"round": round_, "sent": int(seqs.size)})
            got_round, missing = channel.expect_missing(
                codec.packet_count,
                timeout_s=min(control_timeout_s, max(deadline - time.monotonic(), 0.001)),
            )
            if got_round != round_:
                raise SendError("round", f"receiver answered round {got_round} to round {round_}")
            if delay_s:
                time.sleep(delay_s)
            last = codec.packet_count - 1
            sent_bytes = int(seqs.size) * payload_bytes
            if seqs.size and seqs[-1] == last:
                sent_bytes -= payload_bytes - codec.payload_length(last)
            count = int(np.count_nonzero(missing))
            r = RoundReport(
                round=round_,
                packets_sent=int(seqs.size),
                bytes_sent=sent_bytes,
                missing_after=count,
                loss=count / seqs.size if seqs.size else 0.0,
                blast_s=blast_s,
                achieved_rate_bps=8.0 * sent_bytes / blast_s if blast_s > 0 else 0.0,
            )
            report.rounds.append(r)
            if on_round is not None:
                on_round(r)
            if count == 0:
                report.transfer_s = time.monotonic() - first
                break
            seqs = np.flatnonzero(missing).astype(np.int64)
            if time.monotonic() > deadline:
                raise SendError(
                    "total_timeout_s", f"{count} packets still missing when time ran out"
                )
        else:
            raise SendError("max_rounds", f"packets still missing after {max_rounds} rounds")
        _, result = channel.expect_json(MessageKind.RESULT)
        digest = result.get("sha256")
        report.receiver_sha256 = digest if isinstance(digest, str) else ""
        report.total_s = time.monotonic() - started
        if not report.digest_ok or result.get("ok") is not True:
            raise SendError(
                "sha256",
                f"receiver's digest {report.receiver_sha256!r} differs from {report.sha256}",
            )
        return report
    except ControlError as exc:
        raise SendError(exc.field, exc.reason) from None
    finally:
        # Views of the file's memory map: the caller closes the map, which needs them gone
        # (a traceback keeps the frames, and so the writer, alive).
        if writer is not None:
            writer.source = np.empty(0, np.uint8)
        source = writer = None
        if udp is not None:
            udp.close()
        channel.close()
