"""The TCP control channel of an RBUDP transfer: framed, size-limited messages.

Every message is a frame: one byte of kind, a 4-byte big-endian body length, the body.
JSON bodies (UTF-8 objects) are at most :data:`MAX_JSON_BYTES`; the missing-packet
bitmap at most the limit the channel was built with.  A frame of an unknown kind, an
over-long frame, bad JSON or a bitmap that does not match the transfer is a
:class:`ControlError`, and the transfer stops: the peer is either broken or hostile.

Once the handshake has proved that both ends hold the secret
(:mod:`datamover.handshake`), :meth:`ControlChannel.protect` makes every later frame
carry a 16-byte HMAC-SHA256 tag over its kind, body and position in the stream, keyed
per direction: a frame that is forged, altered, replayed, reordered or dropped in
between fails the next check, and the transfer stops.

The exchange (sender S, receiver R)::

    R -> S  CHALLENGE  {"version", "nonce", "auth"}
    S -> R  AUTH       {"version", "nonce", "proof"}
    R -> S  AUTH_OK    {"proof"}                   or ERROR {"field", "reason"}
    -- every frame from here on carries a tag --
    S -> R  HELLO      {"version", "name", "size", "payload_bytes", "sha256", "udp_port"}
    R -> S  ACCEPT     {"udp_port"}                or ERROR {"field", "reason"}
    repeat: S blasts the missing datagrams over UDP, then
    S -> R  BLAST_END  {"round", "sent"}
    R -> S  MISSING    round (u32), missing count (u32), bitmap (bit i = packet i missing)
    until the count is 0, then
    R -> S  RESULT     {"ok", "sha256", "path"}    (the receiver's own digest)
"""

from __future__ import annotations

import enum
import hashlib
import hmac
import json
import socket
import struct
import time
from typing import Any

import numpy as np
from numpy.typing import NDArray

__all__ = [
    "CONTROL_TAG_BYTES",
    "MAX_JSON_BYTES",
    "ControlChannel",
    "ControlError",
    "MessageKind",
    "decode_bitmap",
    "encode_bitmap",
]

MAX_JSON_BYTES = 4096
#: Bytes of the tag a protected frame carries after its body (truncated HMAC-SHA256).
CONTROL_TAG_BYTES = 16
_FRAME = struct.Struct("!BI")
_MISSING = struct.Struct("!II")
_COUNTER = struct.Struct("!QB")


class MessageKind(enum.IntEnum):
    """Kinds of control frames."""

    HELLO = 1
    ACCEPT = 2
    BLAST_END = 3
    MISSING = 4
    RESULT = 5
    ERROR = 6
    CHALLENGE = 7
    AUTH = 8
    AUTH_OK = 9


class ControlError(Exception):
    """The control exchange failed: a protocol violation, a limit, a timeout or a closed
    connection.

    Attributes
    ----------
    field : str
        What went wrong or which limit was hit, e.g. ``"frame"``, ``"timeout_s"``.
    """

    def __init__(self, field: str, reason: str) -> None:
        super().__init__(f"{field}: {reason}")
        self.field = field
        self.reason = reason


def _printable(value: object, limit: int) -> str:
    """A peer's text made safe to print: at most ``limit`` characters, and every control
    or bidirectional character shown as an escape (no terminal sequence gets through)."""
    text = str(value)[:limit]
    return "".join(
        c
        if c.isprintable() and not 0x202A <= ord(c) <= 0x202E and not 0x2066 <= ord(c) <= 0x2069
        else repr(c)[1:-1]
        for c in text
    )


def encode_bitmap(missing: NDArray[np.bool_]) -> bytes:
    """Pack a boolean mask (True = missing) into bytes, bit i of the stream = packet i."""
    return np.packbits(np.asarray(missing, dtype=bool), bitorder="little").tobytes()


def decode_bitmap(data: bytes, packet_count: int) -> NDArray[np.bool_]:
    """Unpack :func:`encode_bitmap`'s bytes for ``packet_count`` packets.

    Raises
    ------
    ControlError
        If the length is not ``ceil(packet_count / 8)`` or a padding bit is set.
    """
    if len(data) != -(-packet_count // 8):
        raise ControlError(
            "bitmap", f"has {len(data)} bytes, {packet_count} packets need {-(-packet_count // 8)}"
        )
    bits = np.unpackbits(np.frombuffer(data, dtype=np.uint8), bitorder="little").astype(bool)
    if bits[packet_count:].any():
        raise ControlError("bitmap", "sets a bit beyond the last packet")
    return bits[:packet_count]


class ControlChannel:
    """Framed messages over a connected TCP socket, every read bounded in size and time.

    Parameters
    ----------
    sock : socket.socket
        A connected stream socket; the channel owns it from now on.
    max_bitmap_bytes : int
        Largest MISSING body accepted (8 + ceil(max packets / 8)).
    timeout_s : float
        Longest wait for one message (s).
    """

    def __init__(self, sock: socket.socket, *, max_bitmap_bytes: int, timeout_s: float) -> None:
        self.sock = sock
        self.max_bitmap_bytes = max_bitmap_bytes
        self.timeout_s = timeout_s
        self._send_key: bytes | None = None
        self._receive_key: bytes | None = None
        self._sent = 0
        self._received = 0
        if sock.family in (socket.AF_INET, socket.AF_INET6):
            # Small messages that the other side waits for: no Nagle delay.
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def close(self) -> None:
        """Close the socket."""
        self.sock.close()

    @property
    def protected(self) -> bool:
        """True once :meth:`protect` has been called."""
        return self._send_key is not None

    def protect(self, send_key: bytes, receive_key: bytes) -> None:
        """From now on, tag every frame sent with ``send_key`` and check every frame
        received against ``receive_key`` (HMAC-SHA256 over a per-direction frame
        counter, the kind and the body, truncated to :data:`CONTROL_TAG_BYTES`)."""
        self._send_key, self._receive_key = send_key, receive_key
        self._sent = self._received = 0

    @staticmethod
    def _tag(key: bytes, counter: int, kind: int, body: bytes) -> bytes:
        return hmac.new(key, _COUNTER.pack(counter, kind) + body, hashlib.sha256).digest()[
            :CONTROL_TAG_BYTES
        ]

    def _send(self, kind: MessageKind, body: bytes) -> None:
        if self._send_key is not None:
            body += self._tag(self._send_key, self._sent, kind, body)
            self._sent += 1
        self.sock.settimeout(self.timeout_s)
        try:
            self.sock.sendall(_FRAME.pack(kind, len(body)) + body)
        except TimeoutError:
            raise ControlError(
                "timeout_s", f"peer did not take a message within {self.timeout_s:g} s"
            ) from None
        except OSError as exc:
            raise ControlError("connection", f"send failed: {exc}") from None

    def send_json(self, kind: MessageKind, body: dict[str, Any]) -> None:
        """Send a JSON message (raises :class:`ControlError` if over the size limit)."""
        data = json.dumps(body, separators=(",", ":")).encode()
        if len(data) > MAX_JSON_BYTES:
            raise ControlError("frame", f"{kind.name} is {len(data)} bytes > {MAX_JSON_BYTES}")
        self._send(kind, data)

    def send_missing(self, round_: int, missing: NDArray[np.bool_]) -> None:
        """Send the missing-packet bitmap of blast ``round_``."""
        body = _MISSING.pack(round_, int(np.count_nonzero(missing))) + encode_bitmap(missing)
        self._send(MessageKind.MISSING, body)

    def _exact(self, n: int, deadline: float) -> bytes:
        chunks: list[bytes] = []
        left = n
        while left:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise ControlError("timeout_s", f"no complete message within {self.timeout_s:g} s")
            self.sock.settimeout(remaining)
            try:
                chunk = self.sock.recv(min(left, 1 << 16))
            except TimeoutError:
                continue
            except OSError as exc:
                raise ControlError("connection", f"receive failed: {exc}") from None
            if not chunk:
                raise ControlError("connection", "peer closed the control connection")
            chunks.append(chunk)
            left -= len(chunk)
        return b"".join(chunks)

    def receive(self, timeout_s: float | None = None) -> tuple[MessageKind, bytes]:
        """The next frame: its kind and raw body.

        Raises
        ------
        ControlError
            On an unknown kind, a body over the limit for its kind, a timeout or EOF.
        """
        deadline = time.monotonic() + (self.timeout_s if timeout_s is None else timeout_s)
        raw_kind, length = _FRAME.unpack(self._exact(_FRAME.size, deadline))
        try:
            kind = MessageKind(raw_kind)
        except ValueError:
            raise ControlError("frame", f"unknown message kind {raw_kind}") from None
        limit = self.max_bitmap_bytes if kind is MessageKind.MISSING else MAX_JSON_BYTES
        key = self._receive_key
        if key is not None:
            limit += CONTROL_TAG_BYTES
            if length < CONTROL_TAG_BYTES:
                raise ControlError("frame", f"{kind.name} of {length} bytes carries no tag")
        if length > limit:
            raise ControlError("frame", f"{kind.name} of {length} bytes exceeds the limit {limit}")
        body = self._exact(length, deadline)
        if key is not None:
            body, tag = body[:-CONTROL_TAG_BYTES], body[-CONTROL_TAG_BYTES:]
            if not hmac.compare_digest(tag, self._tag(key, self._received, kind, body)):
                raise ControlError(
                    "tag", f"{kind.name} failed its integrity check: forged or altered in transit"
                )
            self._received += 1
        return kind, body

    def expect_json(
        self, *kinds: MessageKind, timeout_s: float | None = None
    ) -> tuple[MessageKind, dict[str, Any]]:
        """The next frame, which must be a JSON object of one of ``kinds`` (or ERROR).

        Raises
        ------
        ControlError
            On another kind, malformed JSON, or an ERROR frame (its field and reason).
        """
        kind, body = self.receive(timeout_s)
        if kind is MessageKind.MISSING:
            raise ControlError("frame", f"expected {[k.name for k in kinds]}, got MISSING")
        try:
            obj = json.loads(body)
        except (UnicodeDecodeError, ValueError, RecursionError):
            # RecursionError: 4 KiB of "[" nests deeper than the parser goes.
            raise ControlError("frame", f"{kind.name} is not valid JSON") from None
        if not isinstance(obj, dict):
            raise ControlError("frame", f"{kind.name} must be a JSON object")
        if kind is MessageKind.ERROR and MessageKind.ERROR not in kinds:
            raise ControlError(
                _printable(obj.get("field", "peer"), 64),
                _printable(obj.get("reason", "error"), 512),
            )
        if kind not in kinds:
            raise ControlError("frame", f"expected {[k.name for k in kinds]}, got {kind.name}")
        return kind, obj

    def expect_missing(
        self, packet_count: int, timeout_s: float | None = None
    ) -> tuple[int, NDArray[np.bool_]]:
        """The next frame, which must be MISSING for ``packet_count`` packets.

        Returns
        -------
        round : int
            The blast round it answers.
        missing : ndarray of bool
            True where the packet is still missing.
        """
        kind, body = self.receive(timeout_s)
        if kind is MessageKind.ERROR:
            try:
                obj = json.loads(body)
            except (UnicodeDecodeError, ValueError, RecursionError):
                obj = {}
            obj = obj if isinstance(obj, dict) else {}
            raise ControlError(
                _printable(obj.get("field", "peer"), 64),
                _printable(obj.get("reason", "error"), 512),
            )
        if kind is not MessageKind.MISSING or len(body) < _MISSING.size:
            raise ControlError("frame", f"expected MISSING, got {kind.name}")
        round_, count = _MISSING.unpack_from(body)
        missing = decode_bitmap(body[_MISSING.size :], packet_count)
        if int(np.count_nonzero(missing)) != count:
            raise ControlError("bitmap", f"claims {count} missing packets, its bits say otherwise")
        return round_, missing
