"""The RBUDP data datagram: a 16-byte header, one slice of the file, a 16-byte tag.

Layout (network byte order)::

    offset      size field
         0         2 magic      b"RB"
         2         1 version    3
         3         1 flags      0 (reserved)
         4         4 session    low 32 bits of this transfer's id (a cheap first filter)
         8         4 seq        packet index: the payload is file[seq * S_pkt : ... + length]
        12         2 round      blast round (1 = first blast)
        14         2 length     payload bytes in this datagram
        16    length payload
    16 + length   16 tag        AES-256-GCM tag, nonce = bytes 4..16, no plaintext,
                                associated data = bytes 0 .. 16 + length

With UDP and IPv4 headers the default datagram (:data:`DEFAULT_PAYLOAD_BYTES`) is a
1,500-byte IP packet, the model's packet (S_pkt = 1,468 bytes plus 32 of UDP and IP
headers, :data:`transport.DEFAULT_HEADER_BYTES`); it carries 1,440 bytes of the file, 1.9 %
less than the model's S_pkt, so a rate in file bits per second means 1.9 % more packets
per second here than in the model.  The key is the session's data key
(:func:`datamover.control.SessionKeys`), which both ends derive from their shared secret
and the handshake's nonces; it never crosses the wire.  The receiver drops, without
touching the file, any datagram whose magic, version, session, sequence number, length or
tag does not match: truncated, corrupted, stray (another session, or nobody's), forged
and out-of-range datagrams.  The cheap checks run first, over a whole batch at once
(:meth:`DatagramCodec.check_segments`), so a datagram that is not even of this session
costs no MAC.  A duplicate carries the same bytes as the original, so writing it twice is
harmless.

Why GMAC (GCM without plaintext) and not the keyed BLAKE2b of earlier versions: both are
MACs, and through OpenSSL with AES-NI the GCM tag of a 1,500-byte datagram costs 0.8
microseconds in CPython against 2.5 for BLAKE2b in ``hashlib`` (benchmarks/data_mover.py
prints both), which is the difference between a receiver that keeps up with a batching
sender and one that does not.  GCM needs a nonce that never repeats under one key with
different data: bytes 4..16 name the session, packet and round, and a sender sends each
packet once per round (rounds stop at 65,535, :data:`MAX_ROUND`), so a nonce repeats only
for a byte-identical datagram, which reveals nothing.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, field
from itertools import repeat
from typing import Any

import numpy as np
from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from numpy.typing import NDArray

__all__ = [
    "DEFAULT_PAYLOAD_BYTES",
    "HEADER_BYTES",
    "KEY_BYTES",
    "MAX_DATAGRAM_BYTES",
    "MAX_PAYLOAD_BYTES",
    "MAX_ROUND",
    "TAG_BYTES",
    "DatagramCodec",
    "WireError",
]

_MAGIC = b"RB"
_VERSION = 3
# The header before the payload; the tag covers it and the payload.
_PREFIX = struct.Struct("!2sBBIIHH")
# The same 16 bytes as a NumPy record, to check a whole batch of headers at once.
_PREFIX_DTYPE = np.dtype(
    [
        ("magic", "S2"),
        ("version", "u1"),
        ("flags", "u1"),
        ("session", ">u4"),
        ("seq", ">u4"),
        ("round", ">u2"),
        ("length", ">u2"),
    ]
)
_NONCE = slice(4, 16)  # session, seq, round and length: unique per packet and round
#: Bytes of the data key (AES-256).
KEY_BYTES = 32
#: Bytes of the tag (128 bits: a forgery passes with probability about 2**-128 per try,
#: less a term in the datagram's length, NIST SP 800-38D).
TAG_BYTES = 16
HEADER_BYTES = _PREFIX.size + TAG_BYTES
#: Largest UDP payload over IPv4 (65535 - 20 IP - 8 UDP) and the file payload that fits.
MAX_DATAGRAM_BYTES = 65_507
MAX_PAYLOAD_BYTES = MAX_DATAGRAM_BYTES - HEADER_BYTES
#: File bytes per datagram unless told otherwise: with this header and tag (32 bytes),
#: UDP (8) and IPv4 (20), a 1,500-byte IP packet, the Ethernet MTU and the model's packet
#: (S_pkt + 32 bytes, ``transport.DEFAULT_PACKET_PAYLOAD_BYTES``;
#: tests/datamover/test_wire_format.py pins the sum).  A larger datagram leaves in two
#: IP fragments on such a link, and cannot be sent in UDP GSO batches.
DEFAULT_PAYLOAD_BYTES = 1440
_MAX_PACKETS = 2**32  # seq is 32 bits
#: Last blast round a datagram can name (16 bits); no transfer may run more rounds.
MAX_ROUND = 2**16 - 1


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


def _row_slices(flat: memoryview, n: int, m: int) -> tuple[list[Any], list[Any], list[Any]]:
    """Nonce, tag and signed-bytes slices of the first ``n`` rows of ``m`` bytes."""
    starts = range(0, n * m, m)
    signed = m - TAG_BYTES
    return (
        [flat[a + 4 : a + 16] for a in starts],
        [flat[a + signed : a + m] for a in starts],
        [flat[a : a + signed] for a in starts],
    )


@dataclass(frozen=True)
class DatagramCodec:
    """Encode and check the data datagrams of one transfer, one at a time or in batches.

    Parameters
    ----------
    session : int
        Session id, 0 <= session < 2**64 (its low 32 bits travel in each datagram).
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
    _aead: AESGCM = field(init=False, repr=False, compare=False)
    _word: np.uint64 = field(init=False, repr=False, compare=False)
    # The per-datagram slices of the last batch buffer seen (nonce, tag, signed bytes):
    # a sender and a receiver reuse one buffer, so its slices are made once, and the tag
    # loop is one C-level map over them.
    _slices: list[Any] = field(
        default_factory=lambda: [None], init=False, repr=False, compare=False
    )
    # The same for check_rows, keyed by the receive buffer itself (held here).
    _row_slices: list[Any] = field(
        default_factory=lambda: [None], init=False, repr=False, compare=False
    )

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
        object.__setattr__(self, "_aead", AESGCM(self.key))
        word = _PREFIX.pack(_MAGIC, _VERSION, 0, self.session & 0xFFFF_FFFF, 0, 0, 0)[:8]
        object.__setattr__(self, "_word", np.frombuffer(word, np.uint64)[0])

    @property
    def packet_count(self) -> int:
        """Number of datagrams that carry the file (0 for an empty file)."""
        return -(-self.file_size // self.payload_bytes)

    @property
    def full_packets(self) -> int:
        """Number of datagrams that carry a whole ``payload_bytes`` (all but a short last)."""
        return self.file_size // self.payload_bytes

    @property
    def datagram_bytes(self) -> int:
        """Bytes of a full datagram: header, ``payload_bytes`` and tag."""
        return HEADER_BYTES + self.payload_bytes

    def payload_length(self, seq: int) -> int:
        """Payload bytes of datagram ``seq`` (all full but possibly the last)."""
        start = seq * self.payload_bytes
        return min(self.payload_bytes, self.file_size - start)

    def _prefix(self, seq: int, round_: int, length: int) -> bytes:
        return _PREFIX.pack(_MAGIC, _VERSION, 0, self.session & 0xFFFF_FFFF, seq, round_, length)

    def _check_round(self, round_: int) -> None:
        if not 0 <= round_ <= MAX_ROUND:
            raise WireError("round", f"must lie in [0, {MAX_ROUND}], got {round_}")

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
        self._check_round(round_)
        signed = self._prefix(seq, round_, len(payload)) + bytes(payload)
        return signed + self._aead.encrypt(signed[_NONCE], b"", signed)

    def encode_full(
        self,
        seqs: NDArray[np.int64],
        round_: int,
        source: NDArray[np.uint8],
        out: NDArray[np.uint8],
    ) -> None:
        """Write the datagrams of full packets ``seqs`` of round ``round_`` into ``out``.

        The batch form of :meth:`encode` for a sender that hands the kernel many
        datagrams per call (UDP GSO): headers and payloads are written with two NumPy
        copies; only the tags, one OpenSSL call each, are computed per datagram.

        Parameters
        ----------
        seqs : ndarray of int, shape (n,)
            Indices of full packets (``seq < full_packets``).
        round_ : int
            Blast round, 0..65535.
        source : ndarray of uint8, shape (file_size,)
            The file's bytes.
        out : ndarray of uint8, shape (n, datagram_bytes), C-contiguous
            Receives datagram ``i`` in row ``i``.
        """
        self._check_round(round_)
        n = len(seqs)
        if n and not (int(seqs.min()) >= 0 and int(seqs.max()) < self.full_packets):
            raise WireError("seq", f"full packets lie in [0, {self.full_packets})")
        if out.shape != (n, self.datagram_bytes) or not out.flags.c_contiguous:
            raise WireError("out", f"must be a C-contiguous ({n}, {self.datagram_bytes}) array")
        size = self.payload_bytes
        head = np.empty(n, dtype=_PREFIX_DTYPE)
        head["magic"], head["version"], head["flags"] = _MAGIC, _VERSION, 0
        head["session"], head["seq"] = self.session & 0xFFFF_FFFF, seqs
        head["round"], head["length"] = round_, size
        out[:, : _PREFIX.size] = head.view(np.uint8).reshape(n, _PREFIX.size)
        rows = source[: self.full_packets * size].reshape(-1, size)
        np.take(rows, seqs, axis=0, out=out[:, _PREFIX.size : _PREFIX.size + size])
        nonces, _, signed = self._views(out)
        tags = b"".join(map(self._aead.encrypt, nonces[:n], repeat(b"", n), signed[:n]))
        out[:, _PREFIX.size + size :] = np.frombuffer(tags, dtype=np.uint8).reshape(n, TAG_BYTES)

    def _views(self, rows: NDArray[np.uint8]) -> tuple[list[Any], list[Any], list[Any]]:
        """Nonce, tag and signed-bytes slices of each row of ``rows`` (cached by address)."""
        n, m = rows.shape  # C-contiguous (checked by both callers): reshape is a view
        key = (rows.__array_interface__["data"][0], m)
        cached = self._slices[0]
        if cached is None or cached[0] != key or len(cached[1]) < n:
            # The slices hold ``rows`` alive, so its address cannot be reused meanwhile.
            cached = (key, *_row_slices(rows.reshape(-1).data, n, m))
            self._slices[0] = cached
        return cached[1], cached[2], cached[3]

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
        magic, version, flags, session, seq, _round, length = _PREFIX.unpack_from(view)
        if (
            magic != _MAGIC
            or version != _VERSION
            or flags != 0
            or session != self.session & 0xFFFF_FFFF
            or seq >= self.packet_count
            or length != self.payload_length(seq)
            or len(view) != HEADER_BYTES + length
        ):
            return None
        signed = _PREFIX.size + length
        try:
            self._aead.decrypt(view[_NONCE], view[signed:], view[:signed])
        except InvalidTag:
            return None
        return seq, view[_PREFIX.size : signed]

    def _packets_of_length(self, length: int) -> tuple[int, int] | None:
        # The packets whose payload is ``length`` bytes, as a range [first, last): all
        # but a short last packet, or that one alone; None if no packet has it.
        if length == self.payload_bytes:
            return 0, self.full_packets
        if self.packet_count > self.full_packets and length == self.payload_length(
            self.full_packets
        ):
            return self.full_packets, self.packet_count
        return None

    def check_rows(self, buffer: memoryview, m: int, n: int) -> tuple[list[int], list[int]]:
        """The valid datagrams among the first ``n`` rows of ``m`` bytes of ``buffer``.

        :meth:`check_segments` for a batch too small for array operations to pay
        (``datamover.receive_path.ARRAY_MIN_SEGMENTS``): the checks of :meth:`decode`,
        one datagram at a time, over slices of ``buffer`` made once per buffer and row
        size, so that no slice is made per datagram.  A receiver passes the same
        buffer at every read.

        Parameters
        ----------
        buffer : memoryview
            A receive buffer; it is kept referenced with its slices.
        m : int
            Bytes of every datagram in the batch.
        n : int
            Datagrams in the batch (``n * m <= len(buffer)``).

        Returns
        -------
        seqs : list of int
            Packet indices of the valid datagrams, in arrival order.
        rows : list of int
            Their rows: the payload of row ``r`` is ``buffer[r * m + 16 : (r + 1) * m - 16]``.
        """
        if m <= 0 or not 0 <= n * m <= len(buffer):
            raise WireError("n", f"{n} rows of {m} bytes do not fit a {len(buffer)}-byte buffer")
        length = m - HEADER_BYTES
        span = self._packets_of_length(length)
        if span is None:
            # No datagram of this session has that size (too short to hold a header, or
            # a length no packet has): all refused, no slice made for it.
            return [], []
        first, last = span
        cached = self._row_slices[0]
        if cached is None or cached[0] is not buffer or cached[1] != m:
            cached = (buffer, m, *_row_slices(buffer, len(buffer) // m, m))
            self._row_slices[0] = cached
        _, _, nonces, tags, signed_bytes = cached
        unpack, decrypt = _PREFIX.unpack_from, self._aead.decrypt
        session = self.session & 0xFFFF_FFFF
        seqs: list[int] = []
        good: list[int] = []
        for i in range(n):
            magic, version, flags, got, seq, _round, told = unpack(signed_bytes[i])
            if (
                magic != _MAGIC
                or version != _VERSION
                or flags != 0
                or got != session
                or not first <= seq < last
                or told != length
            ):
                continue
            try:
                decrypt(nonces[i], tags[i], signed_bytes[i])
            except InvalidTag:
                continue
            seqs.append(seq)
            good.append(i)
        return seqs, good

    def check_segments(
        self, segments: NDArray[np.uint8]
    ) -> tuple[NDArray[np.int64], NDArray[np.intp]]:
        """The valid datagrams among equal-sized ``segments``: their packet indices and rows.

        The batch form of :meth:`decode` for a receiver that takes many datagrams per
        call (UDP GRO): the header checks run over the whole batch as array operations,
        and the tag is computed, one OpenSSL call each, only for the rows that pass them.

        Parameters
        ----------
        segments : ndarray of uint8, shape (n, m), C-contiguous
            ``n`` received datagrams of ``m`` bytes each.

        Returns
        -------
        seqs : ndarray of int64, shape (k,)
            Packet indices of the valid datagrams, in arrival order.
        rows : ndarray of intp, shape (k,)
            Their rows in ``segments``; the payload of row ``r`` is
            ``segments[r, 16 : m - 16]``.
        """
        if segments.ndim != 2 or not segments.flags.c_contiguous:
            raise WireError("segments", "must be a C-contiguous 2-D array of bytes")
        n, m = segments.shape
        length = m - HEADER_BYTES
        span = self._packets_of_length(length)
        if span is None:
            return np.empty(0, np.int64), np.empty(0, np.intp)
        first, last = span
        if n == 0:
            return np.empty(0, np.int64), np.empty(0, np.intp)
        # A few array operations over the batch: magic, version, flags and session are one
        # 64-bit word, then the index and the length.
        seqs = segments[:, 8:12].view(">u4")[:, 0].astype(np.int64)
        ok = (segments[:, :8].view(np.uint64)[:, 0] == self._word) & (
            segments[:, 14:16].view(">u2")[:, 0] == length
        )
        ok &= (seqs >= first) & (seqs < last)
        rows = np.flatnonzero(ok)
        if not rows.size:
            return np.empty(0, np.int64), rows
        nonces, tags, signed = self._views(segments)
        if rows.size < n:
            picked = rows.tolist()
            nonces, tags, signed = ([v[i] for i in picked] for v in (nonces, tags, signed))
        else:
            nonces, tags, signed = nonces[:n], tags[:n], signed[:n]
        # One C-level pass while the tags are right, as from a real sender; a wrong one
        # is marked and the pass goes on after it (a forgery costs one check, not a
        # re-check of its batch).
        good = np.ones(rows.size, dtype=bool)
        decrypt = self._aead.decrypt
        start = 0
        while start < rows.size:
            done = start
            try:
                for _ in map(decrypt, nonces[start:], tags[start:], signed[start:]):
                    done += 1
                break
            except InvalidTag:
                good[done] = False
                start = done + 1
        rows = rows[good]
        return seqs[rows], rows
