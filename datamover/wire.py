"""The RBUDP data datagram: a 32-byte authenticated header and one slice of the file.

Layout (network byte order, 32 bytes of header then the payload)::

    offset size field
         0    2 magic      b"RB"
         2    1 version    2
         3    1 flags      0 (reserved)
         4    8 session    64-bit id of this transfer, derived from the handshake
        12    4 seq        packet index: the payload is file[seq * S_pkt : seq * S_pkt + length]
        16    2 round      blast round (1 = first blast), informational
        18    2 length     payload bytes in this datagram
        20   12 tag        keyed BLAKE2b (96 bits) of bytes 0..19 and the payload

The 32 bytes match the model's per-packet overhead (:data:`transport.DEFAULT_HEADER_BYTES`).
The key is the session's data key (:func:`datamover.control.SessionKeys`), which both
ends derive from their shared secret and the handshake's nonces; it never crosses the
wire.  The receiver drops, without touching the file, any datagram whose magic, version,
session, sequence number, length or tag does not match: truncated, corrupted, stray
(another session, or nobody's), forged and out-of-range datagrams.  The cheap checks run
first, so a datagram that is not even of this session costs one ``struct`` unpack and
no MAC.  A duplicate carries the same bytes as the original, so writing it twice is
harmless.

Why BLAKE2b and not HMAC-SHA256, which the control channel uses: it is a MAC in its keyed
mode and one C call, 2.1 against 2.5 microseconds per 1,500-byte datagram in CPython on
the hosts measured (a CRC-32 took 0.6); the receive path's cost per datagram is what the
model's mu_net measures, so ``blastrate calibrate`` measures it with this codec.
"""

from __future__ import annotations

import hashlib
import hmac
import struct
from dataclasses import dataclass

__all__ = [
    "DEFAULT_PAYLOAD_BYTES",
    "HEADER_BYTES",
    "KEY_BYTES",
    "MAX_DATAGRAM_BYTES",
    "MAX_PAYLOAD_BYTES",
    "TAG_BYTES",
    "DatagramCodec",
    "WireError",
]

_MAGIC = b"RB"
_VERSION = 2
# Everything the tag covers that is not the payload.
_PREFIX = struct.Struct("!2sBBQIHH")
#: Bytes of the data key (a BLAKE2b key may have up to 64).
KEY_BYTES = 32
#: Bytes of the tag (96 bits: a forgery passes with probability 2**-96).
TAG_BYTES = 12
HEADER_BYTES = _PREFIX.size + TAG_BYTES
#: Largest UDP payload over IPv4 (65535 - 20 IP - 8 UDP) and the file payload that fits.
MAX_DATAGRAM_BYTES = 65_507
MAX_PAYLOAD_BYTES = MAX_DATAGRAM_BYTES - HEADER_BYTES
#: File bytes per datagram unless told otherwise: the model's S_pkt
#: (``transport.DEFAULT_PACKET_PAYLOAD_BYTES``; tests/datamover/test_wire_format.py pins
#: them equal), kept here so that moving a file does not load the models.
DEFAULT_PAYLOAD_BYTES = 1468
_MAX_PACKETS = 2**32  # seq is 32 bits
_MAX_ROUND = 2**16 - 1


class WireError(ValueError):
    """Invalid parameters for a datagram codec (not a bad datagram: those are dropped).

    Attributes
    ----------
    field : str
        The offending parameter.
    """

    def __init__(self, field: str, reason: str) -> None:
        super().__init__(f"{field}: {reason}")
        self.field = field


@dataclass(frozen=True)
class DatagramCodec:
    """Encode and check the data datagrams of one transfer.

    Parameters
    ----------
    session : int
        Session id, 0 <= session < 2**64.
    key : bytes
        The session's data key, :data:`KEY_BYTES` bytes.
    file_size : int
        File size in bytes, >= 0.
    payload_bytes : int
        Payload per datagram S_pkt in bytes (the last datagram may carry less),
        1..:data:`MAX_PAYLOAD_BYTES`.

    Examples
    --------
    >>> codec = DatagramCodec(7, bytes(32), file_size=10, payload_bytes=4)
    >>> codec.packet_count
    3
    >>> d = codec.encode(2, 1, b"ij")
    >>> seq, payload = codec.decode(d)
    >>> len(d), seq, bytes(payload)
    (34, 2, b'ij')
    >>> codec.decode(d[:-1]) is None        # truncated: dropped
    True
    """

    session: int
    key: bytes
    file_size: int
    payload_bytes: int

    def __post_init__(self) -> None:
        if not 0 <= self.session < 2**64:
            raise WireError("session", f"must be a 64-bit unsigned integer, got {self.session}")
        if not isinstance(self.key, bytes) or len(self.key) != KEY_BYTES:
            raise WireError("key", f"must be {KEY_BYTES} bytes")
        if not 1 <= self.payload_bytes <= MAX_PAYLOAD_BYTES:
            raise WireError(
                "payload_bytes",
                f"must lie in [1, {MAX_PAYLOAD_BYTES}] bytes, got {self.payload_bytes}",
            )
        if self.file_size < 0:
            raise WireError("file_size", f"must be >= 0 bytes, got {self.file_size}")
        if self.packet_count > _MAX_PACKETS:
            raise WireError(
                "file_size",
                f"needs {self.packet_count} datagrams of {self.payload_bytes} bytes; "
                f"the sequence number allows {_MAX_PACKETS}",
            )

    @property
    def packet_count(self) -> int:
        """Number of datagrams that carry the file (0 for an empty file)."""
        return -(-self.file_size // self.payload_bytes)

    def payload_length(self, seq: int) -> int:
        """Payload bytes of datagram ``seq`` (all full but possibly the last)."""
        start = seq * self.payload_bytes
        return min(self.payload_bytes, self.file_size - start)

    def encode(self, seq: int, round_: int, payload: bytes | memoryview) -> bytes:
        """The datagram carrying ``payload`` as packet ``seq`` of blast round ``round_``.

        Raises
        ------
        WireError
            If ``seq`` is out of range, ``payload`` has the wrong length for ``seq``, or
            ``round_`` is not in [0, 65535].
        """
        if not 0 <= seq < self.packet_count:
            raise WireError("seq", f"must lie in [0, {self.packet_count}), got {seq}")
        if len(payload) != self.payload_length(seq):
            raise WireError(
                "payload",
                f"packet {seq} carries {self.payload_length(seq)} bytes, got {len(payload)}",
            )
        if not 0 <= round_ <= _MAX_ROUND:
            raise WireError("round", f"must lie in [0, {_MAX_ROUND}], got {round_}")
        head = _PREFIX.pack(_MAGIC, _VERSION, 0, self.session, seq, round_, len(payload))
        return b"".join((head, self._tag(head, payload), payload))

    def _tag(self, head: bytes | memoryview, payload: bytes | memoryview) -> bytes:
        mac = hashlib.blake2b(head, key=self.key, digest_size=TAG_BYTES)
        mac.update(payload)
        return mac.digest()

    def decode(self, datagram: bytes | bytearray | memoryview) -> tuple[int, memoryview] | None:
        """The packet index and payload of a valid datagram of this session, else None.

        Never raises on the datagram's content: any datagram that is too short, too
        long, of another version or session, out of range, of the wrong length for its
        index, or whose tag does not match is answered with ``None``.  The tag is
        computed only for a datagram that passes every cheaper check.
        """
        view = memoryview(datagram)
        if len(view) < HEADER_BYTES:
            return None
        magic, version, _flags, session, seq, _round, length = _PREFIX.unpack_from(view)
        if (
            magic != _MAGIC
            or version != _VERSION
            or session != self.session
            or seq >= self.packet_count
            or length != self.payload_length(seq)
            or len(view) != HEADER_BYTES + length
        ):
            return None
        payload = view[HEADER_BYTES:]
        tag = self._tag(view[: _PREFIX.size], payload)
        if not hmac.compare_digest(tag, view[_PREFIX.size : HEADER_BYTES]):
            return None
        return seq, payload
