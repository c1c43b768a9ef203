"""The RBUDP receiver: take files over UDP blasts, report what is missing over TCP.

Serving.  :meth:`Receiver.serve` accepts senders until it is stopped (or has completed
the transfers asked for), each in its own thread: first the handshake, bounded in time
(``handshake_timeout_s``) and in number (``max_handshakes``), then, once the peer has
proved that it holds the secret (:mod:`datamover.handshake`), a transfer slot
(``max_sessions``).  Nothing is reserved for a peer before that: no slot, no disk, no
data socket.  A refused, failed or abandoned transfer never stops the receiver.

One transfer: an epoll loop over its own UDP data socket, *connected* to the sender's
data address so that the kernel drops every datagram from anywhere else before it takes
a byte of the socket's buffer, and over the TCP control connection.  Each time the UDP
socket is readable the receiver drains about
``batch_packets`` (N) datagrams with non-blocking reads (each a batch of up to 64 when
the kernel coalesces them, UDP GRO, :mod:`datamover.segments`), checks them against the
session (:class:`datamover.wire.DatagramCodec`) and writes their payloads into a
temporary file in the output directory (:class:`datamover.receive_path.ReceivePath`).
When the sender says a blast is over, the receiver drains what is queued, waits
``settle_s`` for stragglers (unless every datagram of the blast has arrived), and answers
with the bitmap of missing packets.  When none is missing it checks the SHA-256 of the whole file
against the sender's and, only if it matches, renames the temporary file to
``output_dir/<name>`` -- without replacing a file that appeared there meanwhile,
unless told to overwrite.  The temporary file is locked while its transfer runs; one left
by a killed receiver is removed when the next receiver starts on the directory.

Every loop stops by itself: a total deadline, an idle deadline on every phase, a limit
on rounds, on the file size and on every control message.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import hashlib
import os
import re
import selectors
import socket
import struct
import tempfile
import threading
import time
from collections import Counter, OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from .control import ControlChannel, ControlError, MessageKind
from .handshake import PROTOCOL_VERSION, SessionKeys, challenge, stretched_key
from .receive_path import ReceivePath, StoreError
from .running_digest import RunningDigest
from .segments import enable_gro
from .wire import MAX_PAYLOAD_BYTES, MAX_ROUND, DatagramCodec, WireError

__all__ = [
    "DEFAULT_BATCH_PACKETS",
    "DEFAULT_MAX_FILE_BYTES",
    "DeterministicDrop",
    "ReceiveError",
    "ReceiveReport",
    "Receiver",
    "ReceiverLimits",
    "ServeSummary",
    "remove_stale_partials",
    "safe_file_name",
]

#: Datagrams drained per wake-up (N) unless told otherwise.
DEFAULT_BATCH_PACKETS = 16
#: Largest file accepted unless told otherwise (bytes): 16 GiB.
DEFAULT_MAX_FILE_BYTES = 16 * 2**30
_MAX_NAME_BYTES = 255
# Path separators, C0 and C1 controls, and the Unicode marks that reorder or hide text
# in a terminal or a file manager (bidirectional embeddings, overrides and isolates, the
# directional marks, zero-width characters, the byte-order mark).
_NAME_FORBIDDEN = re.compile(
    "[/\\\\\x00-\x1f\x7f-\x9f\u200b-\u200f\u202a-\u202e\u2060-\u2069\ufeff]"
)
#: Prefix and suffix of the temporary file a transfer writes; a sender may not use them.
_PARTIAL_PREFIX = ".blastrate-"
_PARTIAL_SUFFIX = ".part"


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
    or ``\\``), control characters, the Unicode marks that reorder or hide text
    (bidirectional overrides and isolates, zero-width characters), the receiver's own
    temporary names (``.blastrate-*.part``), more than 255 UTF-8 bytes.  Refused rather
    than reduced to a base name: a sender that sends ``../x`` is broken or hostile.

    Examples
    --------
    >>> safe_file_name("data.bin")
    'data.bin'
    >>> safe_file_name("../etc/passwd")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    datamover.receiver.ReceiveError: name: must be a plain file name, without path ...
    >>> safe_file_name("invoice\u202egpj.exe")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    datamover.receiver.ReceiveError: name: must be a plain file name, without path ...
    """
    if not isinstance(name, str) or not name or name in {".", ".."}:
        raise ReceiveError("name", "must be a non-empty file name other than '.' and '..'")
    if _NAME_FORBIDDEN.search(name):
        raise ReceiveError(
            "name",
            "must be a plain file name, without path separators, control characters or "
            "bidirectional and zero-width marks",
        )
    if name.startswith(_PARTIAL_PREFIX) and name.endswith(_PARTIAL_SUFFIX):
        raise ReceiveError("name", f"{_PARTIAL_PREFIX}*{_PARTIAL_SUFFIX} is the receiver's own")
    if len(name.encode("utf-8", "surrogatepass")) > _MAX_NAME_BYTES:
        raise ReceiveError("name", f"must be at most {_MAX_NAME_BYTES} bytes")
    return name


def remove_stale_partials(directory: str | Path) -> int:
    """Remove the temporary files that killed receivers left in ``directory``.

    A running transfer holds an exclusive lock on its temporary file, so a file whose
    lock can be taken belongs to no running receiver and is removed.

    Returns
    -------
    int
        Files removed.
    """
    removed = 0
    for path in Path(directory).glob(f"{_PARTIAL_PREFIX}*{_PARTIAL_SUFFIX}"):
        try:
            fd = os.open(path, os.O_RDWR | os.O_NOFOLLOW)
        except OSError:
            continue
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            continue  # a running transfer's
        else:
            with contextlib.suppress(FileNotFoundError):
                path.unlink()
                removed += 1
        finally:
            os.close(fd)
    return removed


def _umask() -> int:
    """This process's umask, read without changing it (``os.umask`` sets it, which races
    with other threads); 0o022 where /proc does not say."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("Umask:"):
                return int(line.split()[1], 8)
    except (OSError, ValueError):
        pass
    return 0o022


def _link_open_file(fd: int, path: Path) -> None:
    """Give the open file ``fd`` the name ``path`` (never replacing one): ``linkat`` of
    ``/proc/self/fd/N`` with ``AT_SYMLINK_FOLLOW``, as open(2) documents for O_TMPFILE.
    (``os.link`` calls plain ``link``, which does not follow that link, unless it is
    given a directory descriptor.)"""
    directory = os.open(path.parent, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        os.link(f"/proc/self/fd/{fd}", path.name, dst_dir_fd=directory, follow_symlinks=True)
    finally:
        os.close(directory)


def _unnamed_file(directory: Path) -> tuple[int, Path | None]:
    """A new file in ``directory`` for a transfer: unnamed (``O_TMPFILE``) where the file
    system can, so that a killed receiver leaves nothing behind and nobody can swap the
    file under its name; else a ``.blastrate-*.part`` file (its path returned), which
    the transfer locks and :func:`remove_stale_partials` cleans up after a crash."""
    flag = getattr(os, "O_TMPFILE", 0)
    if flag:
        try:
            return os.open(directory, flag | os.O_RDWR | os.O_CLOEXEC, 0o600), None
        except OSError as exc:
            # Not supported here (old kernel, some network and FUSE file systems).
            if exc.errno not in (errno.EOPNOTSUPP, errno.EISDIR, errno.EINVAL):
                raise
    fd, tmp = tempfile.mkstemp(dir=directory, prefix=_PARTIAL_PREFIX, suffix=_PARTIAL_SUFFIX)
    return fd, Path(tmp)


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
        Longest wait for any control message or datagram once a peer has
        authenticated (s).
    accept_timeout_s : float
        Longest wait for a sender to connect in :meth:`Receiver.serve_one` (s).
    handshake_timeout_s : float
        Longest wait for each message of the handshake, before the peer has proved
        who it is (s).
    max_sessions : int
        Transfers served at once; an authenticated sender beyond them is told the
        receiver is busy.
    max_handshakes : int
        Connections that may be in their handshake at once; beyond, the oldest one is
        closed (a real sender's handshake takes milliseconds).
    max_handshakes_per_client : int
        Connections one address may have in their handshake at once; more from it are
        closed at once.
    handshake_grace_s : float
        A handshake younger than this is never closed to make room for another: when
        ``max_handshakes`` are in progress and the oldest is younger, the newcomer is
        closed instead (s).
    max_packets : int
        Most datagrams a file may take (its size over the sender's payload): the
        receiver keeps a few bytes per packet.
    """

    max_file_bytes: int = DEFAULT_MAX_FILE_BYTES
    max_rounds: int = 1000
    total_timeout_s: float = 3600.0
    idle_timeout_s: float = 60.0
    accept_timeout_s: float = 3600.0
    handshake_timeout_s: float = 10.0
    max_sessions: int = 4
    max_handshakes: int = 64
    max_handshakes_per_client: int = 8
    handshake_grace_s: float = 0.5
    max_packets: int = 2**25

    def __post_init__(self) -> None:
        for name in (
            "max_file_bytes",
            "max_rounds",
            "max_sessions",
            "max_handshakes",
            "max_handshakes_per_client",
            "max_packets",
        ):
            value = getattr(self, name)
            if (
                isinstance(value, bool)
                or not isinstance(value, int)
                or value < (name != "max_file_bytes")
            ):
                raise ReceiveError(name, f"must be a positive integer, got {value!r}")
        if self.max_rounds > MAX_ROUND:
            # Each datagram names its round (16 bits), part of its tag's nonce.
            raise ReceiveError("max_rounds", f"must be at most {MAX_ROUND}, got {self.max_rounds}")
        for name in (
            "total_timeout_s",
            "idle_timeout_s",
            "accept_timeout_s",
            "handshake_timeout_s",
            "handshake_grace_s",
        ):
            value = getattr(self, name)
            if not (isinstance(value, int | float) and not isinstance(value, bool) and value > 0):
                raise ReceiveError(name, f"must be a positive number of seconds, got {value!r}")


@dataclass
class ReceiveReport:
    """What one transfer did, as the receiver saw it.

    Attributes
    ----------
    path : Path
        Where the file was written.
    peer : str
        The sender's address.
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
    reads : int
        System calls that returned datagrams (fewer than the datagrams with GRO).
    gro : str
        ``"on"`` when the kernel coalesced datagrams for the data socket (UDP GRO), else
        why not (one datagram per read).
    elapsed_s : float
        From HELLO to the digest check (s).
    hashed_ahead : int
        Bytes of the file hashed while it arrived, on another core
        (:class:`datamover.running_digest.RunningDigest`); the rest was hashed after
        the last datagram.
    """

    path: Path
    size: int
    peer: str = ""
    rounds: int = 0
    sha256: str = ""
    accepted: int = 0
    duplicates: int = 0
    rejected: int = 0
    dropped: int = 0
    wakeups: int = 0
    reads: int = 0
    gro: str = "on"
    elapsed_s: float = 0.0
    missing_per_round: list[int] = field(default_factory=list)
    hashed_ahead: int = 0

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form."""
        return {
            "path": str(self.path),
            "peer": self.peer,
            "size": self.size,
            "rounds": self.rounds,
            "sha256": self.sha256,
            "accepted": self.accepted,
            "duplicates": self.duplicates,
            "rejected": self.rejected,
            "dropped": self.dropped,
            "wakeups": self.wakeups,
            "reads": self.reads,
            "gro": self.gro,
            "elapsed_s": self.elapsed_s,
            "missing_per_round": list(self.missing_per_round),
            "hashed_ahead": self.hashed_ahead,
        }


def _hello_field(hello: dict[str, Any], key: str, kind: type) -> Any:
    value = hello.get(key)
    if kind is int and (isinstance(value, bool) or not isinstance(value, int)):
        raise ReceiveError(key, f"must be an integer, got {type(value).__name__}")
    if kind is str and not isinstance(value, str):
        raise ReceiveError(key, f"must be a string, got {type(value).__name__}")
    return value


class _Transfer:
    """The state of one file being received (codec, file descriptor, have-bitmap).

    Every ``OSError`` of the file system becomes a :class:`ReceiveError` (field
    ``output``) with nothing left behind.
    """

    def __init__(
        self,
        hello: dict[str, Any],
        keys: SessionKeys,
        output_dir: Path,
        limits: ReceiverLimits,
        overwrite: bool,
    ) -> None:
        if hello.get("version") != PROTOCOL_VERSION:
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
        udp_port = _hello_field(hello, "udp_port", int)
        if not 0 < udp_port < 65536:
            raise ReceiveError("udp_port", f"must lie in [1, 65535], got {udp_port}")
        self.sender_udp_port: int = udp_port
        try:
            self.codec = DatagramCodec(keys.session, keys.data_key, size, payload)
        except WireError as exc:
            raise ReceiveError(exc.field, str(exc)) from None
        if self.codec.packet_count > limits.max_packets:
            raise ReceiveError(
                "payload_bytes",
                f"{size} bytes in datagrams of {payload} bytes are {self.codec.packet_count} "
                f"packets, more than max_packets={limits.max_packets}",
            )
        self.digest = digest
        self.overwrite = overwrite
        self.final = output_dir / self.name
        if self.final.is_dir() or self.final.is_symlink():
            raise ReceiveError(
                "name", f"{self.name!r} is a directory or a link in the output directory"
            )
        if self.final.exists() and not overwrite:
            raise ReceiveError(
                "name",
                f"{self.name!r} already exists in the output directory; send it under another "
                "name (--name) or start the receiver with --overwrite",
            )
        self.size = size
        self.fd = -1
        self.output_dir = output_dir
        self.tmp: Path | None = None
        try:
            fd, self.tmp = _unnamed_file(output_dir)
        except OSError as exc:
            raise ReceiveError(
                "output", f"cannot create a file in {str(output_dir)!r}: {exc.strerror}"
            ) from None
        self.fd = fd
        try:
            if self.tmp is not None:
                # Held until the transfer ends: the mark of a live temporary file.
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            if size:
                # Reserve the blocks now: a full disk refuses the file before any blast.
                os.posix_fallocate(fd, 0, size)
        except OSError as exc:
            self.discard()
            raise ReceiveError("size", f"cannot reserve {size} bytes: {exc.strerror}") from None
        self.have = bytearray(self.codec.packet_count)
        self.payload = payload
        try:
            self.digest_ahead = RunningDigest(fd, size, payload, self.have)
        except (OSError, RuntimeError) as exc:  # RuntimeError: no thread to be had
            self.discard()
            reason = exc.strerror if isinstance(exc, OSError) else str(exc)
            raise ReceiveError("output", f"cannot read back {self.name!r}: {reason}") from None

    def missing(self) -> np.ndarray:
        return np.frombuffer(self.have, dtype=np.uint8) == 0

    def finish(self) -> str:
        """Check the digest; on a match move the file into place and return the digest."""
        try:
            # The page cache's own pages, read without a copy; what arrived early was
            # hashed meanwhile where another core was free.
            got = self.digest_ahead.finish()
            os.fsync(self.fd)
        except OSError as exc:
            raise ReceiveError("output", f"cannot write {self.name!r}: {exc.strerror}") from None
        if got != self.digest:
            raise ReceiveError(
                "sha256", f"file digest {got} does not match the sender's {self.digest}"
            )
        # Written private (0600) while unverified; once verified, the mode any new file
        # of this user gets (0666 less the umask), as cp or curl would leave it.
        with contextlib.suppress(OSError):
            os.fchmod(self.fd, 0o666 & ~_umask())
        self._place()
        os.close(self.fd)
        self.fd = -1
        return got

    def _place(self) -> None:
        # A hard link never replaces: a file that appeared under the name during the
        # transfer stays, and this copy is discarded.  An unnamed file is linked from its
        # open descriptor: exactly the file whose digest was checked gets the name.
        source = self.tmp if self.tmp is not None else Path(f"/proc/self/fd/{self.fd}")
        try:
            if self.overwrite:
                if self.final.is_dir():
                    raise IsADirectoryError(errno.EISDIR, "is a directory")
                if self.tmp is None:
                    named = self.output_dir / (
                        f"{_PARTIAL_PREFIX}{os.urandom(8).hex()}{_PARTIAL_SUFFIX}"
                    )
                    _link_open_file(self.fd, named)
                    self.tmp = named
                os.replace(self.tmp, self.final)
                self.tmp = None
            elif self.tmp is None:
                _link_open_file(self.fd, self.final)
            else:
                os.link(source, self.final, follow_symlinks=False)
                self.tmp.unlink()
                self.tmp = None
        except FileExistsError:
            raise ReceiveError(
                "name",
                f"{self.name!r} appeared in the output directory during the transfer; it "
                "was kept and the received copy discarded (use overwrite to replace it)",
            ) from None
        except OSError as exc:
            raise ReceiveError(
                "output", f"cannot move {self.name!r} into place: {exc.strerror}"
            ) from None

    def discard(self) -> None:
        digest = getattr(self, "digest_ahead", None)
        if digest is not None:
            digest.close()
        if self.tmp is not None:
            with contextlib.suppress(OSError):
                self.tmp.unlink(missing_ok=True)
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1


@dataclass
class ServeSummary:
    """What :meth:`Receiver.serve` did until it returned.

    Attributes
    ----------
    served : int
        Transfers completed (digest checked, file in place).
    failed : int
        Authenticated transfers refused or failed.
    unauthenticated : int
        Connections that failed or abandoned the handshake.
    turned_away : int
        Connections closed at once because ``max_handshakes`` were in progress, plus
        authenticated senders told the receiver was busy (``max_sessions``).
    stale_removed : int
        Temporary files of killed receivers removed at start.
    """

    served: int = 0
    failed: int = 0
    unauthenticated: int = 0
    turned_away: int = 0
    stale_removed: int = 0

    def to_dict(self) -> dict[str, int]:
        """JSON-ready form."""
        return dict(self.__dict__)


class Receiver:
    """An RBUDP receiver bound to a TCP control port.

    Parameters
    ----------
    output_dir : str or Path
        Existing directory where received files are written.
    secret : bytes, optional
        The secret a sender must prove it holds (:func:`datamover.handshake.load_secret`).
        Required unless ``insecure``.
    insecure : bool, default False
        Accept any sender (the handshake still runs, with an empty secret).
    host : str, default "127.0.0.1"
        Address to bind, for control and data.
    port : int, default 0
        TCP control port (0 = any free port; see :attr:`port`).
    udp_port : int, optional
        A fixed UDP data port (for a firewall); then one transfer at a time
        (``limits.max_sessions`` must be 1).  Default: a free port per transfer.
    batch_packets : int, default 16
        Datagrams drained per wake-up (N).
    rcvbuf_bytes : int, optional
        SO_RCVBUF of each data socket (Linux doubles it and counts the kernel's
        per-packet overhead against it).
    settle_s : float, default 0.02
        After the sender's end of blast, how long the socket must stay without a valid
        datagram before the missing bitmap is sent (s).
    limits : ReceiverLimits, optional
        Size, round, time and concurrency limits.
    overwrite : bool, default False
        Replace an existing file of the same name.
    drop : callable, optional
        Test hook ``drop(seq, round) -> bool``: drop that valid datagram.
    advisor : callable, optional
        ``advisor(file_size, request) -> advice`` with a ``to_dict()``
        (:class:`datamover.advice.ReceiverAdvisor`): answers a sender whose HELLO asks
        for the rate to send at (``"advise"``).  Without one such a sender is told that
        this receiver gives no advice.
    gro : bool, default True
        Let the kernel coalesce each data socket's datagrams (UDP GRO) where it can;
        False reads one datagram per call (the report's ``gro`` says which and why).

    Raises
    ------
    ReceiveError
        Field ``secret`` without a secret or ``insecure``; ``output`` if the directory
        does not exist; ``udp_port`` with a fixed data port and ``max_sessions`` > 1.
    OSError
        If a port cannot be bound.
    """

    def __init__(
        self,
        output_dir: str | Path,
        *,
        secret: bytes | None = None,
        insecure: bool = False,
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
        gro: bool = True,
    ) -> None:
        if secret is None and not insecure:
            raise ReceiveError(
                "secret", "give the shared secret, or insecure=True to accept anyone"
            )
        if secret is not None and insecure:
            raise ReceiveError("secret", "a secret and insecure=True exclude each other")
        self.secret = secret
        self.output_dir = Path(output_dir)
        if not self.output_dir.is_dir():
            raise ReceiveError("output", f"{str(self.output_dir)!r} is not a directory")
        if batch_packets < 1:
            raise ReceiveError("batch_packets", f"must be >= 1, got {batch_packets}")
        self.limits = limits or ReceiverLimits()
        if udp_port is not None and self.limits.max_sessions != 1:
            raise ReceiveError(
                "udp_port",
                "a fixed UDP data port serves one transfer at a time: set max_sessions to 1",
            )
        self.host = host
        self.fixed_udp_port = udp_port
        self.batch_packets = batch_packets
        self.rcvbuf_bytes = rcvbuf_bytes
        self.settle_s = settle_s
        self.overwrite = overwrite
        self.drop = drop
        self.advisor = advisor
        self.gro = gro
        self._family = socket.AF_INET6 if ":" in host else socket.AF_INET
        self._stop = threading.Event()
        self._sessions = threading.BoundedSemaphore(self.limits.max_sessions)
        self._receiving = 0
        self._receiving_lock = threading.Lock()
        self._listener = socket.socket(self._family, socket.SOCK_STREAM)
        try:
            self._listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            self._listener.bind((host, port))
            self._listener.listen(128)
        except OSError:
            self._listener.close()
            raise
        self.port: int = self._listener.getsockname()[1]
        self.stale_removed = remove_stale_partials(self.output_dir)

    @property
    def receiving(self) -> int:
        """Transfers whose blasts are being received now (from ACCEPT to the last round;
        the final digest is not counted)."""
        return self._receiving

    def close(self) -> None:
        """Stop serving: close the listener and abort running transfers."""
        self._stop.set()
        self._listener.close()

    def __enter__(self) -> Receiver:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- serving ---------------------------------------------------------------------

    def serve_one(self) -> ReceiveReport:
        """Accept one sender and receive its file, in the calling thread.

        Returns
        -------
        ReceiveReport
            Where the file went and what the transfer did.

        Raises
        ------
        ReceiveError
            If no sender connects within ``accept_timeout_s``, the peer fails the
            handshake (``secret``), the HELLO is refused (name, size, ...), a limit is
            hit, the control exchange fails or the digest does not match.  Nothing is
            left under the file's name; the temporary file is removed.
        """
        self._listener.settimeout(self.limits.accept_timeout_s)
        try:
            conn, peer = self._listener.accept()
        except TimeoutError:
            raise ReceiveError(
                "accept_timeout_s", f"no sender within {self.limits.accept_timeout_s:g} s"
            ) from None
        channel = self._channel(conn)
        try:
            keys = self._authenticate(channel)
            return self._session(channel, keys, peer[0])
        finally:
            channel.close()

    def serve(
        self,
        *,
        transfers: int | None = None,
        on_report: Callable[[ReceiveReport], None] | None = None,
        on_error: Callable[[str, ReceiveError], None] | None = None,
        ready: Callable[[], None] | None = None,
    ) -> ServeSummary:
        """Serve senders, several at once, until :meth:`close` or ``transfers`` completed.

        Parameters
        ----------
        transfers : int, optional
            Return after this many completed transfers (``--once`` is 1); by default
            serve until :meth:`close` is called (from another thread or a signal
            handler).  Refused, failed and abandoned transfers do not count.
        on_report : callable, optional
            Called with each completed transfer's report (from its thread).
        on_error : callable, optional
            Called with the peer's address and the error of each refused or failed
            transfer and each failed handshake (from its thread).
        ready : callable, optional
            Called once the receiver accepts connections.

        Returns
        -------
        ServeSummary
            Counts of what happened.  When it returns, no transfer is running: those
            still running when the count was reached are finished, those running at
            :meth:`close` are aborted.
        """
        summary = ServeSummary(stale_removed=self.stale_removed)
        lock = threading.Lock()
        # Connections in their handshake, oldest first, and how many per address: a
        # peer that has not authenticated holds a thread and a socket, never more, and
        # one address cannot hold them all.
        # An evicted handshake leaves ``pending`` at once (else the next admission would
        # evict the same closed socket again while the set grew: issue #36); its thread
        # ends as soon as it sees the shutdown.  ``handshaking`` counts those threads until
        # they do, and caps them at twice ``max_handshakes`` however fast peers arrive.
        pending: OrderedDict[socket.socket, tuple[str, float]] = OrderedDict()
        per_client: Counter[str] = Counter()
        handshaking = [0]
        threads: set[threading.Thread] = set()
        enough = threading.Event()

        def forget(conn: socket.socket) -> None:
            # Under ``lock``: ``conn`` is no longer a pending handshake.
            entry = pending.pop(conn, None)
            if entry is not None:
                peer = entry[0]
                per_client[peer] -= 1
                if per_client[peer] <= 0:
                    del per_client[peer]

        def authenticated(conn: socket.socket) -> None:
            with lock:
                forget(conn)
                handshaking[0] -= 1

        def failed(peer: str, exc: ReceiveError, counter: str) -> None:
            with lock:
                setattr(summary, counter, getattr(summary, counter) + 1)
            if on_error is not None:
                on_error(peer, exc)

        def run(conn: socket.socket, peer: str) -> None:
            in_handshake = True
            try:
                channel = self._channel(conn)
                try:
                    keys = self._authenticate(channel)
                except ReceiveError as exc:
                    failed(peer, exc, "unauthenticated")
                    return
                finally:
                    in_handshake = False
                    authenticated(conn)
                report = self._session(channel, keys, peer)
            except ReceiveError as exc:
                failed(peer, exc, "turned_away" if exc.field == "max_sessions" else "failed")
                return
            except Exception as exc:  # a defect in one session must not end the receiver
                if in_handshake:
                    authenticated(conn)
                failed(peer, ReceiveError("internal", f"{type(exc).__name__}: {exc}"), "failed")
                return
            finally:
                conn.close()
                with lock:
                    threads.discard(threading.current_thread())
            with lock:
                summary.served += 1
                if transfers is not None and summary.served >= transfers:
                    enough.set()
            if on_report is not None:
                on_report(report)

        def admit(conn: socket.socket, peer: str) -> bool:
            cap = self.limits.max_handshakes
            with lock:
                if per_client[peer] >= self.limits.max_handshakes_per_client:
                    summary.turned_away += 1
                    return False
                if handshaking[0] >= 2 * cap:
                    # Evicted handshakes whose threads have not yet ended: no new thread
                    # until they have (a flood cannot outrun the bound).
                    summary.turned_away += 1
                    return False
                now = time.monotonic()
                if len(pending) >= cap:
                    # Full: the oldest handshake goes, if it has had its grace (a real
                    # sender's takes milliseconds, so it is stalling); else the newcomer
                    # does (a sender tries again), so that a flood cannot evict a real
                    # handshake before it could have finished.
                    oldest = next(iter(pending))
                    if now - pending[oldest][1] < self.limits.handshake_grace_s:
                        summary.turned_away += 1
                        return False
                    forget(oldest)
                    with contextlib.suppress(OSError):
                        oldest.shutdown(socket.SHUT_RDWR)
                    summary.turned_away += 1
                pending[conn] = (peer, now)
                per_client[peer] += 1
                handshaking[0] += 1
                return True

        self._listener.settimeout(0.2)
        if ready is not None:
            ready()
        # The secret's scrypt (about 50 ms) once, beside the listener rather than before it
        # or inside the first sender's handshake, where a flood's evictions could overtake
        # it.
        threading.Thread(target=stretched_key, args=(self.secret,), daemon=True).start()
        try:
            while not self._stop.is_set() and not enough.is_set():
                try:
                    conn, addr = self._listener.accept()
                except TimeoutError:
                    continue
                except OSError as exc:
                    if self._stop.is_set():
                        break
                    # Out of descriptors, or an error a peer provoked (Linux hands back
                    # pending network errors on accept): never the end of serving.
                    if exc.errno in (errno.EMFILE, errno.ENFILE, errno.ENOBUFS, errno.ENOMEM):
                        self._stop.wait(0.1)
                    continue
                peer = str(addr[0])
                if not admit(conn, peer):
                    conn.close()
                    continue
                t = threading.Thread(target=run, args=(conn, peer), daemon=True)
                with lock:
                    threads.add(t)
                try:
                    t.start()
                except RuntimeError:  # no thread to be had: this peer is turned away
                    with lock:
                        threads.discard(t)
                        forget(conn)
                        handshaking[0] -= 1
                        summary.turned_away += 1
                    conn.close()
        except BaseException:
            self._stop.set()  # Ctrl-C: abort the running transfers
            raise
        finally:
            with lock:
                running = list(threads)
            for t in running:
                t.join()
        return summary

    # -- one session -----------------------------------------------------------------

    def _channel(self, conn: socket.socket) -> ControlChannel:
        return ControlChannel(conn, max_bitmap_bytes=0, timeout_s=self.limits.handshake_timeout_s)

    def _authenticate(self, channel: ControlChannel) -> SessionKeys:
        try:
            return challenge(channel, self.secret)
        except ControlError as exc:
            raise ReceiveError(exc.field, exc.reason) from None

    def _session(self, channel: ControlChannel, keys: SessionKeys, peer: str) -> ReceiveReport:
        if not self._sessions.acquire(blocking=False):
            exc = ReceiveError(
                "max_sessions",
                f"the receiver is busy with {self.limits.max_sessions} transfers; try again later",
            )
            self._refuse(channel, exc)
            raise exc
        try:
            channel.timeout_s = self.limits.idle_timeout_s
            return self._receive(channel, keys, peer)
        finally:
            self._sessions.release()

    def _data_socket(self, peer: str, sender_port: int) -> tuple[socket.socket, str]:
        udp = socket.socket(self._family, socket.SOCK_DGRAM)
        try:
            gro = enable_gro(udp) if self.gro else "turned off (--no-gro)"
            if self.rcvbuf_bytes is not None:
                udp.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, self.rcvbuf_bytes)
            udp.bind((self.host, self.fixed_udp_port or 0))
            # Connected: the kernel drops datagrams from any other address or port
            # before they take room in this socket's buffer.
            udp.connect((peer, sender_port))
            udp.setblocking(False)
            # Between bind and connect the socket took datagrams from anyone: drop them.
            # (The sender sends nothing before ACCEPT, so nothing of its is lost.)
            for _ in range(1 << 16):  # bounded: at most a buffer's worth is queued
                try:
                    udp.recv(1)
                except (BlockingIOError, InterruptedError):
                    break
                except OSError:
                    continue  # a queued ICMP error: read past it
        except OSError as exc:
            udp.close()
            raise ReceiveError("udp_port", f"cannot open the data socket: {exc.strerror}") from None
        return udp, "on" if gro is None else gro

    def _receive(self, channel: ControlChannel, keys: SessionKeys, peer: str) -> ReceiveReport:
        start = time.monotonic()
        deadline = start + self.limits.total_timeout_s
        try:
            _, hello = channel.expect_json(MessageKind.HELLO)
        except ControlError as exc:
            raise ReceiveError(exc.field, exc.reason) from None
        try:
            transfer = _Transfer(hello, keys, self.output_dir, self.limits, self.overwrite)
        except ReceiveError as exc:
            self._refuse(channel, exc)
            raise
        udp: socket.socket | None = None
        try:
            udp, gro = self._data_socket(peer, transfer.sender_udp_port)
            report = ReceiveReport(
                path=transfer.final, size=transfer.codec.file_size, peer=peer, gro=gro
            )
            accept: dict[str, Any] = {"udp_port": udp.getsockname()[1]}
            if "advise" in hello:
                accept["advice"] = self._advice(transfer.codec.file_size, hello["advise"])
            with self._receiving_lock:
                self._receiving += 1
            try:
                channel.send_json(MessageKind.ACCEPT, accept)
                self._rounds(channel, udp, transfer, report, deadline)
            finally:
                with self._receiving_lock:
                    self._receiving -= 1
            report.sha256 = transfer.finish()
            report.hashed_ahead = transfer.digest_ahead.hashed_ahead
            report.elapsed_s = time.monotonic() - start
            # The file is verified and in place: a sender gone before hearing so does not
            # undo that (it will report a failure; the file is there all the same).
            with contextlib.suppress(ControlError):
                channel.send_json(
                    MessageKind.RESULT,
                    {"ok": True, "sha256": report.sha256, "path": transfer.name},
                )
            return report
        except ControlError as exc:
            transfer.discard()
            raise ReceiveError(exc.field, exc.reason) from None
        except StoreError as exc:
            transfer.discard()
            failed = ReceiveError("output", f"cannot write {transfer.name!r}: {exc.strerror}")
            self._refuse(channel, failed)
            raise failed from None
        except ReceiveError as exc:
            transfer.discard()
            self._refuse(channel, exc)
            raise
        except BaseException:
            transfer.discard()
            raise
        finally:
            if udp is not None:
                udp.close()

    def _advice(self, file_size: int, request: Any) -> dict[str, Any]:
        # A failure to advise is the sender's to handle (it may send at another rate):
        # it never fails the transfer.
        if self.advisor is None:
            return {"error": "this receiver gives no rate advice (start it with a profile)"}
        try:
            advice: dict[str, Any] = self.advisor(file_size, request).to_dict()
        except Exception as exc:
            field = getattr(exc, "field", None) or type(exc).__name__
            reason = getattr(exc, "reason", None) or str(exc)
            return {"error": f"{field}: {str(reason)[:400]}"}
        return advice

    @staticmethod
    def _refuse(channel: ControlChannel, exc: ReceiveError) -> None:
        with contextlib.suppress(ControlError):
            channel.send_json(MessageKind.ERROR, {"field": exc.field, "reason": exc.reason[:512]})

    def _rounds(
        self,
        channel: ControlChannel,
        udp: socket.socket,
        t: _Transfer,
        report: ReceiveReport,
        deadline: float,
    ) -> None:
        drain = ReceivePath(udp, t.codec, t.fd if t.size else None, have=t.have, drop=self.drop)
        batch = self.batch_packets
        round_ = 1

        sel = selectors.DefaultSelector()
        sel.register(udp, selectors.EVENT_READ, "udp")
        sel.register(channel.sock, selectors.EVENT_READ, "ctl")
        channel.max_bitmap_bytes = 0
        try:
            last_activity = time.monotonic()
            while True:
                now = time.monotonic()
                if self._stop.is_set():
                    raise ReceiveError("interrupted", "the receiver is stopping")
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
                events = sel.select(timeout=min(deadline - now, self.limits.idle_timeout_s, 0.5))
                for key, _ in events:
                    if key.data == "udp":
                        if drain(batch):
                            last_activity = time.monotonic()
                        continue
                    last_activity = time.monotonic()
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
                    self._settle(udp, drain, batch, deadline, lambda: drain.valid >= target)  # noqa: B023
                    drain.take_valid()
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
                    drain.round = round_
                    break  # re-check the deadlines
        finally:
            sel.close()
            report.accepted, report.duplicates = drain.accepted, drain.duplicates
            report.rejected, report.dropped = drain.rejected, drain.dropped
            report.wakeups, report.reads = drain.wakeups, drain.reads

    def _settle(
        self,
        udp: socket.socket,
        drain: Callable[[int], int],
        batch: int,
        deadline: float,
        complete: Callable[[], bool],
    ) -> None:
        # Drain what is queued, then wait until no valid datagram has come for settle_s,
        # or until every datagram of the blast has been seen.  Invalid datagrams do not
        # extend the wait: a flood cannot hold the answer back.
        quiet_until = time.monotonic() + self.settle_s
        sel = selectors.DefaultSelector()
        sel.register(udp, selectors.EVENT_READ)
        try:
            while True:
                now = time.monotonic()
                if now >= quiet_until or now >= deadline or complete():
                    return
                if drain(batch):
                    quiet_until = time.monotonic() + self.settle_s
                    continue
                sel.select(quiet_until - now)
        finally:
            sel.close()
