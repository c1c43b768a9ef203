"""The RBUDP receiver: take one file over UDP blasts, report what is missing over TCP.

One transfer, single-threaded: an epoll loop over the UDP data socket and the TCP
control connection.  Each time the UDP socket is readable the receiver drains up to
``batch_packets`` (N) datagrams with a loop of non-blocking ``recv_into`` calls (Python's
socket module has no ``recvmmsg``), checks each against the session
(:class:`transport.wire.DatagramCodec`) and writes its payload into a memory map of a
temporary file in the output directory.  When the sender says a blast is over, the
receiver drains what is queued, waits ``settle_s`` for stragglers (unless every datagram
of the blast has arrived), and answers with the
bitmap of missing packets.  When none is missing it checks the SHA-256 of the whole file
against the sender's and, only if it matches, renames the temporary file to
``output_dir/<name>``.

Every loop stops by itself: a total deadline, an idle deadline, a limit on rounds, on
the file size and on every control message.
"""

from __future__ import annotations

import contextlib
import hashlib
import mmap
import os
import re
import selectors
import socket
import struct
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from .control import ControlChannel, ControlError, MessageKind
from .wire import HEADER_BYTES, KEY_BYTES, MAX_PAYLOAD_BYTES, DatagramCodec, WireError

__all__ = [
    "DEFAULT_BATCH_PACKETS",
    "DEFAULT_MAX_FILE_BYTES",
    "DeterministicDrop",
    "ReceiveError",
    "ReceiveReport",
    "Receiver",
    "ReceiverLimits",
    "safe_file_name",
]

#: Datagrams drained per wake-up (N) unless told otherwise.
DEFAULT_BATCH_PACKETS = 16
#: Largest file accepted unless told otherwise (bytes): 16 GiB.
DEFAULT_MAX_FILE_BYTES = 16 * 2**30
_MAX_NAME_BYTES = 255
_NAME_FORBIDDEN = re.compile(r"[/\\\x00-\x1f\x7f]")


class ReceiveError(Exception):
    """A transfer was refused or failed; nothing was written under the file's name.

    Attributes
    ----------
    field : str
        The offending HELLO field or the limit hit (``"name"``, ``"size"``,
        ``"max_rounds"``, ``"total_timeout_s"``, ``"sha256"``, ...).
    """

    def __init__(self, field: str, reason: str) -> None:
        super().__init__(f"{field}: {reason}")
        self.field = field
        self.reason = reason


def safe_file_name(name: Any) -> str:
    """``name`` if it is a plain file name, else :class:`ReceiveError` (field ``name``).

    Refused: anything but a non-empty string, ``.`` and ``..``, a path separator (``/``
    or ``\\``), control characters, more than 255 UTF-8 bytes.  Refused rather than
    reduced to a base name: a sender that sends ``../x`` is broken or hostile.

    Examples
    --------
    >>> safe_file_name("data.bin")
    'data.bin'
    >>> safe_file_name("../etc/passwd")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    transport.receiver.ReceiveError: name: must be a plain file name, without path ...
    """
    if not isinstance(name, str) or not name or name in {".", ".."}:
        raise ReceiveError("name", "must be a non-empty file name other than '.' and '..'")
    if _NAME_FORBIDDEN.search(name):
        raise ReceiveError(
            "name", "must be a plain file name, without path separators or control characters"
        )
    if len(name.encode("utf-8", "surrogatepass")) > _MAX_NAME_BYTES:
        raise ReceiveError("name", f"must be at most {_MAX_NAME_BYTES} bytes")
    return name


@dataclass(frozen=True)
class DeterministicDrop:
    """A test hook: drop a fixed fraction of the valid datagrams, decided by a hash of
    (seed, packet, round), so a run is reproducible and every round drops afresh.

    Parameters
    ----------
    fraction : float
        Share of datagrams dropped, in [0, 1).
    seed : int
        Any integer.
    """

    fraction: float
    seed: int = 0

    def __post_init__(self) -> None:
        if not 0.0 <= self.fraction < 1.0:
            raise ValueError(f"fraction must lie in [0, 1), got {self.fraction}")

    def __call__(self, seq: int, round_: int) -> bool:
        """True if packet ``seq`` of round ``round_`` is to be dropped."""
        h = hashlib.blake2b(struct.pack("!qQI", self.seed, seq, round_), digest_size=8)
        return int.from_bytes(h.digest(), "big") < self.fraction * 2**64


@dataclass(frozen=True)
class ReceiverLimits:
    """Bounds on one transfer.

    Attributes
    ----------
    max_file_bytes : int
        Largest file accepted (bytes).
    max_rounds : int
        Most blast rounds before the transfer is abandoned.
    total_timeout_s : float
        Longest a transfer may take from HELLO to RESULT (s).
    idle_timeout_s : float
        Longest wait for any control message or datagram (s).
    accept_timeout_s : float
        Longest wait for a sender to connect (s).
    """

    max_file_bytes: int = DEFAULT_MAX_FILE_BYTES
    max_rounds: int = 1000
    total_timeout_s: float = 3600.0
    idle_timeout_s: float = 60.0
    accept_timeout_s: float = 3600.0


@dataclass
class ReceiveReport:
    """What one transfer did, as the receiver saw it.

    Attributes
    ----------
    path : Path
        Where the file was written.
    size : int
        File size (bytes).
    rounds : int
        Blast rounds.
    sha256 : str
        Digest of the written file (hex); equal to the sender's.
    accepted, duplicates, rejected, dropped : int
        Datagrams written, valid repeats, dropped as invalid (wrong session, size or
        tag), dropped by the test hook.
    wakeups : int
        Times the UDP socket was drained.
    elapsed_s : float
        From HELLO to the digest check (s).
    """

    path: Path
    size: int
    rounds: int = 0
    sha256: str = ""
    accepted: int = 0
    duplicates: int = 0
    rejected: int = 0
    dropped: int = 0
    wakeups: int = 0
    elapsed_s: float = 0.0
    missing_per_round: list[int] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form."""
        return {
            "path": str(self.path),
            "size": self.size,
            "rounds": self.rounds,
            "sha256": self.sha256,
            "accepted": self.accepted,
            "duplicates": self.duplicates,
            "rejected": self.rejected,
            "dropped": self.dropped,
            "wakeups": self.wakeups,
            "elapsed_s": self.elapsed_s,
            "missing_per_round": list(self.missing_per_round),
        }


def _hello_field(hello: dict[str, Any], key: str, kind: type) -> Any:
    value = hello.get(key)
    if kind is int and (isinstance(value, bool) or not isinstance(value, int)):
        raise ReceiveError(key, f"must be an integer, got {type(value).__name__}")
    if kind is str and not isinstance(value, str):
        raise ReceiveError(key, f"must be a string, got {type(value).__name__}")
    return value


class _Transfer:
    """The state of one file being received (codec, memory map, have-bitmap)."""

    def __init__(
        self, hello: dict[str, Any], output_dir: Path, limits: ReceiverLimits, overwrite: bool
    ) -> None:
        if hello.get("version") != 1:
            raise ReceiveError("version", f"unsupported protocol version {hello.get('version')!r}")
        self.name = safe_file_name(hello.get("name"))
        size = _hello_field(hello, "size", int)
        if not 0 <= size <= limits.max_file_bytes:
            raise ReceiveError(
                "size",
                f"must lie in [0, {limits.max_file_bytes}] bytes (max_file_bytes), got {size}",
            )
        payload = _hello_field(hello, "payload_bytes", int)
        if not 1 <= payload <= MAX_PAYLOAD_BYTES:
            raise ReceiveError(
                "payload_bytes", f"must lie in [1, {MAX_PAYLOAD_BYTES}], got {payload}"
            )
        digest = _hello_field(hello, "sha256", str)
        if re.fullmatch(r"[0-9a-f]{64}", digest) is None:
            raise ReceiveError("sha256", "must be 64 lower-case hex digits")
        key_hex = _hello_field(hello, "key", str)
        if re.fullmatch(rf"[0-9a-f]{{{2 * KEY_BYTES}}}", key_hex) is None:
            raise ReceiveError("key", f"must be {2 * KEY_BYTES} lower-case hex digits")
        session = _hello_field(hello, "session", int)
        try:
            self.codec = DatagramCodec(session, bytes.fromhex(key_hex), size, payload)
        except WireError as exc:
            raise ReceiveError(exc.field, str(exc)) from None
        self.digest = digest
        self.final = output_dir / self.name
        if self.final.exists() and not overwrite:
            raise ReceiveError("name", f"{self.name!r} already exists in the output directory")
        fd, tmp = tempfile.mkstemp(dir=output_dir, prefix=".blastrate-", suffix=".part")
        self.tmp = Path(tmp)
        self.map: mmap.mmap | None = None
        try:
            if size:
                # Reserve the blocks now: a memory map over a sparse file on a full disk
                # fails with SIGBUS, not an exception.
                os.posix_fallocate(fd, 0, size)
                self.map = mmap.mmap(fd, size)
        except OSError as exc:
            os.close(fd)
            self.tmp.unlink(missing_ok=True)
            raise ReceiveError("size", f"cannot reserve {size} bytes: {exc.strerror}") from None
        self.fd = fd
        self.have = bytearray(self.codec.packet_count)
        self.payload = payload

    def missing(self) -> np.ndarray:
        return np.frombuffer(self.have, dtype=np.uint8) == 0

    def finish(self) -> str:
        """Check the digest; on a match move the file into place and return the digest."""
        h = hashlib.sha256()
        if self.map is not None:
            h.update(self.map)
            self.map.flush()
            self.map.close()
            self.map = None
        os.fsync(self.fd)
        os.close(self.fd)
        self.fd = -1
        got = h.hexdigest()
        if got != self.digest:
            raise ReceiveError(
                "sha256", f"file digest {got} does not match the sender's {self.digest}"
            )
        os.replace(self.tmp, self.final)
        return got

    def discard(self) -> None:
        if self.map is not None:
            self.map.close()
            self.map = None
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1
        self.tmp.unlink(missing_ok=True)


class Receiver:
    """An RBUDP receiver bound to a TCP control port and a UDP data port.

    Parameters
    ----------
    output_dir : str or Path
        Existing directory where received files are written.
    host : str, default "127.0.0.1"
        Address to bind.
    port : int, default 0
        TCP control port (0 = any free port; see :attr:`port`).
    udp_port : int, optional
        UDP data port; the control port's number when a port was given, else any free.
    batch_packets : int, default 16
        Datagrams drained per wake-up (N).
    rcvbuf_bytes : int, optional
        SO_RCVBUF of the data socket (Linux doubles it and counts the kernel's
        per-packet overhead against it).
    settle_s : float, default 0.02
        After the sender's end of blast, how long the socket must stay empty before the
        missing bitmap is sent (s).
    limits : ReceiverLimits, optional
        Size, round and time limits.
    overwrite : bool, default False
        Replace an existing file of the same name.
    drop : callable, optional
        Test hook ``drop(seq, round) -> bool``: drop that valid datagram.
    advisor : callable, optional
        ``advisor(file_size, request) -> advice`` with a ``to_dict()``
        (:class:`transport.advice.ReceiverAdvisor`): answers a sender whose HELLO asks
        for the rate to send at (``"advise"``).  Without one such a sender is told that
        this receiver gives no advice.
    """

    def __init__(
        self,
        output_dir: str | Path,
        *,
        host: str = "127.0.0.1",
        port: int = 0,
        udp_port: int | None = None,
        batch_packets: int = DEFAULT_BATCH_PACKETS,
        rcvbuf_bytes: int | None = None,
        settle_s: float = 0.02,
        limits: ReceiverLimits | None = None,
        overwrite: bool = False,
        drop: Callable[[int, int], bool] | None = None,
        advisor: Callable[[int, Any], Any] | None = None,
    ) -> None:
        self.output_dir = Path(output_dir)
        if not self.output_dir.is_dir():
            raise ReceiveError("output", f"{str(self.output_dir)!r} is not a directory")
        if batch_packets < 1:
            raise ReceiveError("batch_packets", f"must be >= 1, got {batch_packets}")
        self.batch_packets = batch_packets
        self.settle_s = settle_s
        self.limits = limits or ReceiverLimits()
        self.overwrite = overwrite
        self.drop = drop
        self.advisor = advisor
        family = socket.AF_INET6 if ":" in host else socket.AF_INET
        self._listener = socket.socket(family, socket.SOCK_STREAM)
        self._udp = socket.socket(family, socket.SOCK_DGRAM)
        try:
            self._listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            self._listener.bind((host, port))
            self._listener.listen(1)
            self.port: int = self._listener.getsockname()[1]
            if rcvbuf_bytes is not None:
                self._udp.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, rcvbuf_bytes)
            self._udp.bind((host, (port or 0) if udp_port is None else udp_port))
            self._udp.setblocking(False)
            self.udp_port: int = self._udp.getsockname()[1]
        except OSError:
            self.close()
            raise

    def close(self) -> None:
        """Close both sockets."""
        self._listener.close()
        self._udp.close()

    def __enter__(self) -> Receiver:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _flush_udp(self) -> None:
        # Datagrams left over from an earlier transfer or a stray sender.
        buf = bytearray(1)
        while True:
            try:
                self._udp.recv_into(buf)
            except (BlockingIOError, InterruptedError):
                return

    def serve_one(self) -> ReceiveReport:
        """Accept one sender and receive its file.

        Returns
        -------
        ReceiveReport
            Where the file went and what the transfer did.

        Raises
        ------
        ReceiveError
            If no sender connects within ``accept_timeout_s``, the HELLO is refused
            (name, size, ...), a limit is hit, the control exchange fails or the digest
            does not match.  Nothing is left under the file's name; the temporary file
            is removed.
        """
        self._listener.settimeout(self.limits.accept_timeout_s)
        try:
            conn, _ = self._listener.accept()
        except TimeoutError:
            raise ReceiveError(
                "accept_timeout_s", f"no sender within {self.limits.accept_timeout_s:g} s"
            ) from None
        channel = ControlChannel(conn, max_bitmap_bytes=0, timeout_s=self.limits.idle_timeout_s)
        try:
            return self._serve(channel)
        finally:
            channel.close()

    def _serve(self, channel: ControlChannel) -> ReceiveReport:
        start = time.monotonic()
        deadline = start + self.limits.total_timeout_s
        try:
            _, hello = channel.expect_json(MessageKind.HELLO)
        except ControlError as exc:
            raise ReceiveError(exc.field, exc.reason) from None
        try:
            transfer = _Transfer(hello, self.output_dir, self.limits, self.overwrite)
        except ReceiveError as exc:
            self._refuse(channel, exc)
            raise
        try:
            report = ReceiveReport(path=transfer.final, size=transfer.codec.file_size)
            self._flush_udp()
            accept: dict[str, Any] = {"udp_port": self.udp_port}
            if "advise" in hello:
                accept["advice"] = self._advice(transfer.codec.file_size, hello["advise"])
            channel.send_json(MessageKind.ACCEPT, accept)
            self._rounds(channel, transfer, report, deadline)
            report.sha256 = transfer.finish()
            report.elapsed_s = time.monotonic() - start
            channel.send_json(
                MessageKind.RESULT, {"ok": True, "sha256": report.sha256, "path": transfer.name}
            )
            return report
        except ControlError as exc:
            transfer.discard()
            raise ReceiveError(exc.field, exc.reason) from None
        except ReceiveError as exc:
            transfer.discard()
            self._refuse(channel, exc)
            raise
        except BaseException:
            transfer.discard()
            raise

    def _advice(self, file_size: int, request: Any) -> dict[str, Any]:
        # A failure to advise is the sender's to handle (it may send at another rate):
        # it never fails the transfer.
        if self.advisor is None:
            return {"error": "this receiver gives no rate advice (start it with a profile)"}
        try:
            advice: dict[str, Any] = self.advisor(file_size, request).to_dict()
        except Exception as exc:
            field = getattr(exc, "field", None) or type(exc).__name__
            return {"error": f"{field}: {str(exc)[:400]}"}
        return advice

    @staticmethod
    def _refuse(channel: ControlChannel, exc: ReceiveError) -> None:
        with contextlib.suppress(ControlError):
            channel.send_json(MessageKind.ERROR, {"field": exc.field, "reason": exc.reason[:512]})

    def _rounds(
        self, channel: ControlChannel, t: _Transfer, report: ReceiveReport, deadline: float
    ) -> None:
        udp = self._udp
        codec = t.codec
        buf = bytearray(HEADER_BYTES + t.payload + 1)  # +1: an over-long datagram shows
        view = memoryview(buf)
        have = t.have
        mapped = t.map
        size = t.payload
        drop = self.drop
        batch = self.batch_packets
        round_ = 1
        seen = [0]  # valid datagrams since the last answer

        def drain(limit: int) -> int:
            # One wake-up: up to `limit` datagrams, non-blocking.
            n = 0
            while n < limit:
                try:
                    got = udp.recv_into(buf)
                except (BlockingIOError, InterruptedError):
                    break
                n += 1
                decoded = codec.decode(view[:got])
                if decoded is None:
                    report.rejected += 1
                    continue
                seq, payload = decoded
                seen[0] += 1
                if drop is not None and drop(seq, round_):
                    report.dropped += 1
                elif have[seq]:
                    report.duplicates += 1
                else:
                    assert mapped is not None  # a valid datagram implies a non-empty file
                    offset = seq * size
                    mapped[offset : offset + len(payload)] = payload
                    have[seq] = 1
                    report.accepted += 1
            report.wakeups += 1
            return n

        sel = selectors.DefaultSelector()
        sel.register(udp, selectors.EVENT_READ, "udp")
        sel.register(channel.sock, selectors.EVENT_READ, "ctl")
        channel.max_bitmap_bytes = 0
        try:
            last_activity = time.monotonic()
            while True:
                now = time.monotonic()
                if now > deadline:
                    raise ReceiveError(
                        "total_timeout_s",
                        f"transfer not complete within {self.limits.total_timeout_s:g} s",
                    )
                if now - last_activity > self.limits.idle_timeout_s:
                    raise ReceiveError(
                        "idle_timeout_s",
                        f"nothing from the sender for {self.limits.idle_timeout_s:g} s",
                    )
                events = sel.select(timeout=min(deadline - now, self.limits.idle_timeout_s, 1.0))
                for key, _ in events:
                    last_activity = time.monotonic()
                    if key.data == "udp":
                        drain(batch)
                        continue
                    _, end = channel.expect_json(MessageKind.BLAST_END)
                    if end.get("round") != round_:
                        raise ReceiveError(
                            "round",
                            f"expected BLAST_END of round {round_}, got {end.get('round')!r}",
                        )
                    sent = end.get("sent")
                    if isinstance(sent, bool) or not isinstance(sent, int) or sent < 0:
                        raise ReceiveError(
                            "sent", f"BLAST_END must count the datagrams, got {sent!r}"
                        )
                    # Every datagram of the blast arrived: no straggler to wait for.
                    target: int = sent
                    self._settle(drain, batch, deadline, lambda: seen[0] >= target)  # noqa: B023
                    seen[0] = 0
                    missing = t.missing()
                    count = int(np.count_nonzero(missing))
                    report.missing_per_round.append(count)
                    report.rounds = round_
                    channel.send_missing(round_, missing)
                    if count == 0:
                        return
                    if round_ >= self.limits.max_rounds:
                        raise ReceiveError(
                            "max_rounds", f"{count} packets still missing after {round_} rounds"
                        )
                    round_ += 1
                    break  # re-check the deadlines
        finally:
            sel.close()

    def _settle(
        self,
        drain: Callable[[int], int],
        batch: int,
        deadline: float,
        complete: Callable[[], bool],
    ) -> None:
        # Drain what is queued, then wait until the socket stays quiet for settle_s, or
        # until every datagram of the blast has been seen.
        quiet_until = time.monotonic() + self.settle_s
        while True:
            now = time.monotonic()
            if now >= quiet_until or now >= deadline or complete():
                return
            if drain(batch):
                quiet_until = time.monotonic() + self.settle_s
                continue
            self._udp_readable(quiet_until - now)

    def _udp_readable(self, timeout: float) -> None:
        sel = selectors.DefaultSelector()
        try:
            sel.register(self._udp, selectors.EVENT_READ)
            sel.select(timeout)
        finally:
            sel.close()
