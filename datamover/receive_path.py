"""One wake-up of the receiver: drain up to N datagrams, check each, store the new ones.

:class:`ReceivePath` is the whole per-datagram work of ``blastrate receive``.  The
receiver (:class:`datamover.Receiver`) calls it each time its data socket is readable;
the calibration of mu_net (``blastrate calibrate`` and the receiver's own quick
calibration, :func:`host.calibration.measure_net_service`) calls the very same object
on a socket that a back-to-back sender keeps full.  So the service rate the model is
calibrated with is the rate of the code users run, header checks, keyed tags and copies
included, and a change to this path shows in the next calibration.

Python's socket module has no ``recvmmsg``: a wake-up is a loop of non-blocking
``recv_into`` calls, each datagram decoded by :class:`datamover.wire.DatagramCodec`
(tag checked before any byte is stored) and copied into the file's memory.
"""

from __future__ import annotations

import mmap
import os
import socket
from collections.abc import Callable

from .wire import HEADER_BYTES, DatagramCodec

__all__ = ["ReceivePath", "calibration_receive_path"]


class ReceivePath:
    """The receiver's work for one readable data socket.

    Parameters
    ----------
    sock : socket.socket
        The non-blocking UDP data socket.
    codec : DatagramCodec
        The session's datagram codec (checks the tag, the session and the sequence).
    store : mmap.mmap or bytearray or None
        Where payloads go, at ``seq * payload_bytes``; None only for an empty file (a
        valid datagram then cannot exist).
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
    accepted, duplicates, rejected, dropped, wakeups : int
        Datagrams stored, valid repeats, refused (wrong session, size or tag), dropped by
        the test hook; calls that found the socket readable.
    """

    def __init__(
        self,
        sock: socket.socket,
        codec: DatagramCodec,
        store: mmap.mmap | bytearray | None,
        *,
        have: bytearray | None = None,
        drop: Callable[[int, int], bool] | None = None,
    ) -> None:
        self.sock = sock
        self.codec = codec
        self.store = store
        self.drop = drop
        self.payload_bytes = codec.payload_bytes
        self.have = bytearray(codec.packet_count) if have is None else have
        if len(self.have) != codec.packet_count:
            raise ValueError("have must hold one byte per datagram of the file")
        # +1: an over-long datagram shows as one byte too many and fails the codec.
        self._buf = bytearray(HEADER_BYTES + codec.payload_bytes + 1)
        self.round = 1
        self.valid = 0
        self.accepted = self.duplicates = self.rejected = self.dropped = self.wakeups = 0

    def __call__(self, limit: int) -> int:
        """Take up to ``limit`` datagrams without blocking; returns how many were valid
        (a flood of garbage does not count as the sender's)."""
        recv_into = self.sock.recv_into
        buf = self._buf
        view = memoryview(buf)
        decode = self.codec.decode
        have = self.have
        store = self.store
        size = self.payload_bytes
        drop = self.drop
        n = valid = 0
        while n < limit:
            try:
                got = recv_into(buf)
            except (BlockingIOError, InterruptedError):
                break
            except OSError:
                # ECONNREFUSED and kin: an ICMP error for the connected peer.  It counts,
                # so that a stream of them cannot hold the loop.
                n += 1
                continue
            n += 1
            decoded = decode(view[:got])
            if decoded is None:
                self.rejected += 1
                continue
            seq, payload = decoded
            valid += 1
            if drop is not None and drop(seq, self.round):
                self.dropped += 1
            elif have[seq]:
                self.duplicates += 1
            else:
                assert store is not None  # a valid datagram implies a non-empty file
                offset = seq * size
                store[offset : offset + len(payload)] = payload
                have[seq] = 1
                self.accepted += 1
        self.valid += valid
        self.wakeups += 1
        return valid

    def take_valid(self) -> int:
        """Valid datagrams since the last call, and start counting again."""
        valid, self.valid = self.valid, 0
        return valid

    def forget(self) -> None:
        """Mark every datagram missing again, so that the next ones are stored anew (the
        calibration sends the same datagrams round and round)."""
        self.have[:] = bytes(len(self.have))


def calibration_receive_path(
    payload_bytes: int, packets: int = 16_384
) -> tuple[list[bytes], Callable[[socket.socket], Callable[[int], int]]]:
    """Datagrams of a made-up transfer and the receive path that takes them.

    For :func:`host.calibration.measure_net_service`: its sender sends ``datagrams``
    round and round; its receiver calls ``path(sock)(N)`` at each wake-up, the receive
    path of ``blastrate receive`` over an anonymous memory map of the file, which
    forgets what it stored each time it comes upon a datagram it already has, so that
    nearly every datagram is checked and copied as the first of a blast's are.

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
        receive = ReceivePath(sock, codec, mmap.mmap(-1, size))

        def wakeup(limit: int) -> int:
            taken = receive(limit)
            if receive.duplicates:
                receive.forget()
                receive.duplicates = 0
            return taken

        return wakeup

    return datagrams, path
