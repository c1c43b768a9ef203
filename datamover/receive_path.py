"""One wake-up of the receiver: drain up to N datagrams, check each, store the new ones.

:class:`ReceivePath` is the whole per-datagram work of ``blastrate receive``.  The
receiver (:class:`datamover.Receiver`) calls it each time its data socket is readable;
the calibration of mu_net (``blastrate calibrate`` and the receiver's own quick
calibration, :func:`host.calibration.measure_net_service`) calls the very same object
on a socket that a back-to-back sender keeps full.  So the service rate the model is
calibrated with is the rate of the code users run, header checks, tags and copies
included, and a change to this path shows in the next calibration.

Each read takes one datagram, or a batch of them when the socket has UDP GRO on
(:func:`datamover.segments.enable_gro`): the kernel then hands over up to 64 datagrams
of one size in one buffer.  The batch is checked as a whole, every tag of its
full-sized datagrams before any of them is stored
(:meth:`datamover.wire.DatagramCodec.check_segments`, header checks as array
operations, for large batches; :meth:`~datamover.wire.DatagramCodec.check_rows` for
small ones; a shorter last datagram after a large batch is checked on its own),
and its new payloads go into the file with one ``pwritev`` per run of consecutive
packets, straight from the receive buffer.  Not a memory map: on ext4 a first write
through a map costs about three times what ``pwrite`` does (a page fault
per 4 KiB page; benchmarks/data_mover.py).
"""

from __future__ import annotations

import errno
import os
import socket
import sys
import tempfile
import weakref
from collections.abc import Callable

import numpy as np
from numpy.typing import NDArray

from .segments import MAX_SEGMENTS, RECEIVE_BUFFER_BYTES, SOL_UDP, UDP_GRO
from .wire import HEADER_BYTES, TAG_BYTES, DatagramCodec

__all__ = ["ARRAY_MIN_SEGMENTS", "ReceivePath", "StoreError", "calibration_receive_path"]

_LITTLE = sys.byteorder == "little"  # the control message's int is the host's
_CMSG_BYTES = socket.CMSG_SPACE(4)  # one int: the size of the coalesced datagrams
_PAYLOAD_AT = HEADER_BYTES - TAG_BYTES  # the payload follows the 16-byte prefix
#: Fewest datagrams in a coalesced read for which the array form is used.  Below, its
#: fixed cost (about 30 us of NumPy calls) exceeds that of the small-batch form, which
#: checks them one at a time over slices made once (1,440-byte payloads, us a datagram,
#: array against small-batch form: 8.9 / 2.8 at 4, 2.9 / 1.9 at 16, 1.85 / 1.76 at 32,
#: 1.60 / 1.77 at 43; one datagram per read costs 4.6; docs/results/data_mover_paths.txt).
#: The crossover lies between 32 and 43; at 32 the two differ by 5 %.
ARRAY_MIN_SEGMENTS = 32


class StoreError(OSError):
    """The file could not be written (a full disk, an I/O error)."""


class ReceivePath:
    """The receiver's work for one readable data socket.

    Parameters
    ----------
    sock : socket.socket
        The non-blocking UDP data socket (with or without UDP GRO).
    codec : DatagramCodec
        The session's datagram codec (checks the tag, the session and the sequence).
    store : int or None
        A file descriptor open for writing: payloads go at ``seq * payload_bytes``.
        None only for an empty file (a valid datagram then cannot exist).
    have : bytearray, optional
        One byte per datagram of the file, 1 once stored (the transfer's own bitmap);
        default a new one, all missing.
    drop : callable, optional
        Test hook ``drop(seq, round) -> bool``: drop that valid datagram.

    Attributes
    ----------
    have : bytearray
        One byte per datagram of the file: 1 once its payload is stored.
    round : int
        The blast being received (for ``drop``).
    valid : int
        Valid datagrams since :meth:`take_valid` was last called.
    accepted, duplicates, rejected, dropped : int
        Datagrams stored, valid repeats, refused (wrong session, size or tag), dropped by
        the test hook.
    wakeups, reads : int
        Calls that found the socket readable; system calls that returned data (one
        per datagram without GRO, one per batch with it).
    """

    def __init__(
        self,
        sock: socket.socket,
        codec: DatagramCodec,
        store: int | None,
        *,
        have: bytearray | None = None,
        drop: Callable[[int, int], bool] | None = None,
    ) -> None:
        self.sock = sock
        self.codec = codec
        self.drop = drop
        self.payload_bytes = codec.payload_bytes
        self.have = bytearray(codec.packet_count) if have is None else have
        if len(self.have) != codec.packet_count:
            raise ValueError("have must hold one byte per datagram of the file")
        self._have = np.frombuffer(self.have, dtype=np.uint8)
        self.store = store
        # Room for the largest batch GRO makes of these datagrams (64 of them), and +1: an
        # over-long datagram shows as one byte too many and fails the codec.  A batch cut
        # short (MSG_TRUNC) loses its tail, which the next round resends.
        self._buf = bytearray(
            max(RECEIVE_BUFFER_BYTES, min(MAX_SEGMENTS * codec.datagram_bytes, 2**22)) + 1
        )
        self._bytes = np.frombuffer(self._buf, dtype=np.uint8)
        self._view = memoryview(self._buf)
        self._payloads: tuple[int, list[memoryview]] = (0, [])
        self.round = 1
        self.valid = 0
        self.accepted = self.duplicates = self.rejected = self.dropped = 0
        self.wakeups = self.reads = 0

    def __call__(self, limit: int) -> int:
        """Take about ``limit`` datagrams without blocking (a read that crosses the limit
        is finished); returns how many were valid (a flood of garbage does not count as
        the sender's)."""
        recvmsg_into = self.sock.recvmsg_into
        buffers = [self._buf]
        n = valid = 0
        while n < limit:
            try:
                got, ancillary, _flags, _ = recvmsg_into(buffers, _CMSG_BYTES)
            except (BlockingIOError, InterruptedError):
                break
            except OSError:
                # ECONNREFUSED and kin: an ICMP error for the connected peer.  It counts,
                # so that a stream of them cannot hold the loop.
                n += 1
                continue
            self.reads += 1
            segment = got
            for level, kind, data in ancillary:
                if level == SOL_UDP and kind == UDP_GRO and len(data) >= 4:
                    segment = int.from_bytes(data[:4], "little" if _LITTLE else "big")
            if segment >= got:  # one datagram: the scalar path is cheaper than arrays
                n += 1
                valid += self._one(got)
                continue
            if segment <= 0:
                n += 1
                self.rejected += 1
                continue
            whole = got // segment
            n += whole + (got > whole * segment)
            if whole >= ARRAY_MIN_SEGMENTS:
                valid += self._take(self._bytes[: whole * segment].reshape(whole, segment))
                if got > whole * segment:  # a shorter last datagram after the batch
                    valid += self._one(got, whole * segment)
            else:
                valid += self._few(got, segment)
        self.valid += valid
        self.wakeups += 1
        return valid

    def _one(self, end: int, start: int = 0) -> int:
        # The datagram in bytes start..end of the receive buffer.
        decoded = self.codec.decode(self._view[start:end])
        if decoded is None:
            self.rejected += 1
            return 0
        seq, payload = decoded
        if self.drop is not None and self.drop(seq, self.round):
            self.dropped += 1
        elif self.have[seq]:
            self.duplicates += 1
        else:
            assert self.store is not None  # a valid datagram implies a non-empty file
            try:
                written = os.pwrite(self.store, payload, seq * self.payload_bytes)
            except OSError as exc:
                raise StoreError(exc.errno, exc.strerror) from None
            if written != len(payload):
                raise StoreError(errno.ENOSPC, "short write (file system full or quota)")
            self.have[seq] = 1
            self.accepted += 1
        return 1

    def _few(self, got: int, segment: int) -> int:
        # A coalesced batch too small for the array form (bytes 0..got of the receive
        # buffer, datagrams of ``segment`` bytes, the last maybe shorter): every tag
        # checked before any byte is stored (DatagramCodec.check_rows, no slice made per
        # datagram), then one ``pwritev`` per run of consecutive new packets.  A sender's
        # batch is one run: one write where one at a time made one per datagram.
        whole = got // segment
        found, rows = self.codec.check_rows(self._view, segment, whole)
        picked = [self._payload_views(segment)[r] for r in rows] if rows else []
        if got > whole * segment:  # a shorter last datagram
            decoded = self.codec.decode(self._view[whole * segment : got])
            if decoded is None:
                self.rejected += 1
            else:
                found.append(decoded[0])
                picked.append(decoded[1])
        self.rejected += whole - len(rows)
        have = self.have
        seqs: list[int] = []
        fresh: list[memoryview] = []
        for seq, payload in zip(found, picked, strict=True):
            if self.drop is not None and self.drop(seq, self.round):
                self.dropped += 1
            elif have[seq] or seq in seqs:
                self.duplicates += 1
            else:
                seqs.append(seq)
                fresh.append(payload)
        begin = 0  # runs in arrival order: a sender's batch is one
        for i in range(1, len(seqs) + 1):
            if i == len(seqs) or seqs[i] != seqs[i - 1] + 1:
                self._store(fresh[begin:i], seqs[begin] * self.payload_bytes)
                begin = i
        for seq in seqs:
            have[seq] = 1
        self.accepted += len(seqs)
        return len(found)

    def _payload_views(self, m: int) -> list[memoryview]:
        # The payload of each row of m-byte datagrams in the receive buffer, made once.
        if self._payloads[0] != m:
            starts = range(0, len(self._buf) - m + 1, m)
            self._payloads = (m, [self._view[a + _PAYLOAD_AT : a + m - TAG_BYTES] for a in starts])
        return self._payloads[1]

    def _store(self, payloads: list[memoryview], offset: int) -> None:
        # Consecutive payloads, written at ``offset`` of the file in one system call.
        assert self.store is not None  # a valid datagram implies a non-empty file
        try:
            written = os.pwritev(self.store, payloads, offset)
        except OSError as exc:
            raise StoreError(exc.errno, exc.strerror) from None
        if written != sum(map(len, payloads)):
            raise StoreError(errno.ENOSPC, "short write (file system full or quota)")

    def _take(self, segments: NDArray[np.uint8]) -> int:
        # ``segments``: whole rows of the receive buffer, from its start.
        seqs, rows = self.codec.check_segments(segments)
        self.rejected += len(segments) - len(seqs)
        if not seqs.size:
            return 0
        valid = int(seqs.size)
        if self.drop is not None:
            keep = np.array([not self.drop(int(q), self.round) for q in seqs], dtype=bool)
            self.dropped += valid - int(keep.sum())
            seqs, rows = seqs[keep], rows[keep]
        new = self._have[seqs] == 0
        fresh, first = np.unique(seqs[new], return_index=True)  # sorted: runs are contiguous
        self.duplicates += int(seqs.size - fresh.size)
        if fresh.size:
            self._write(fresh, rows[new][first], segments.shape[1])
            self._have[fresh] = 1
            self.accepted += int(fresh.size)
        return valid

    def _write(self, seqs: NDArray[np.int64], rows: NDArray[np.intp], m: int) -> None:
        # One pwritev per run of consecutive packets, its buffers the payloads in place.
        payloads = self._payload_views(m)
        breaks = (np.flatnonzero(np.diff(seqs) != 1) + 1).tolist()
        rows_list, seqs_list = rows.tolist(), seqs.tolist()
        for begin, end in zip([0, *breaks], [*breaks, len(seqs_list)], strict=True):
            self._store(
                [payloads[r] for r in rows_list[begin:end]], seqs_list[begin] * self.payload_bytes
            )

    def take_valid(self) -> int:
        """Valid datagrams since the last call, and start counting again."""
        valid, self.valid = self.valid, 0
        return valid

    def forget(self) -> None:
        """Mark every datagram missing again, so that the next ones are stored anew (the
        calibration sends the same datagrams round and round)."""
        self._have[:] = 0


def calibration_receive_path(
    payload_bytes: int, packets: int = 16_384
) -> tuple[list[bytes], Callable[[socket.socket], Callable[[int], int]]]:
    """Datagrams of a made-up transfer and the receive path that takes them.

    For :func:`host.calibration.measure_net_service`: its sender sends ``datagrams``
    round and round, one per call; its receiver calls ``path(sock)(N)`` at each wake-up,
    the receive path of ``blastrate receive`` writing into a temporary file, which
    forgets what it stored each time it comes upon a datagram it already has, so that
    nearly every datagram is checked and written as the first of a blast's are.

    One datagram per read is the path a receiver runs below about 240 Mbit/s: a sender
    batches as many datagrams as it sends in 50 us (2 at 500 Mbit/s, 5 at 1 Gbit/s), and
    the receiver checks a batch of several in its small-batch form (about as costly as
    one at a time for 2, 0.84 of it for 4, 0.67 for 8), above about 7.5 Gbit/s (32 in 50 us)
    in its array form.  This calibration measures neither.

    Parameters
    ----------
    payload_bytes : int
        File bytes per datagram.
    packets : int, default 16384
        Distinct datagrams (a file of ``packets * payload_bytes`` bytes).

    Returns
    -------
    datagrams : list of bytes
        Valid datagrams of one session.
    path : callable
        ``path(sock)``: a wake-up function ``(limit) -> datagrams taken`` on ``sock``.
    """
    size = packets * payload_bytes
    codec = DatagramCodec(0x5EED, os.urandom(32), size, payload_bytes)
    data = os.urandom(size)
    datagrams = [
        codec.encode(i, 1, data[i * payload_bytes : (i + 1) * payload_bytes])
        for i in range(packets)
    ]

    def path(sock: socket.socket) -> Callable[[int], int]:
        # A file of its own, as a transfer writes one (it shares the page cache's work).
        with tempfile.TemporaryFile() as file:
            store = os.dup(file.fileno())
        os.ftruncate(store, size)
        receive = ReceivePath(sock, codec, store)
        weakref.finalize(receive, os.close, store)

        def wakeup(limit: int) -> int:
            taken = receive(limit)
            if receive.duplicates:
                receive.forget()
                receive.duplicates = 0
            return taken

        return wakeup

    return datagrams, path
