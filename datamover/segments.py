"""Many datagrams per system call: UDP generic segmentation (GSO) and receive offload (GRO).

A sender that sets ``UDP_SEGMENT`` hands the kernel one buffer of up to
:data:`MAX_SEGMENTS` equal datagrams, and the kernel (or the NIC) cuts it; a receiver
that sets ``UDP_GRO`` gets datagrams of one flow coalesced the same way, with their size
in a control message.  Both are Linux (4.18 and 5.0); QUIC stacks get their speed from
them.  Where a kernel or a device refuses, the data mover falls back to one datagram
per call and says so (:func:`enable_gso`, :func:`enable_gro`).

A GRO receiver is the paper's coalescing NIC in software: it takes a batch of datagrams per
wake-up (docs/conventions.md, the M/M[N]/1/K queue).
"""

from __future__ import annotations

import socket
import sys

__all__ = [
    "IP_UDP_BYTES",
    "MAX_SEGMENTED_BYTES",
    "MAX_SEGMENTS",
    "RECEIVE_BUFFER_BYTES",
    "SOL_UDP",
    "UDP_GRO",
    "UDP_SEGMENT",
    "enable_gro",
    "enable_gso",
    "largest_unfragmented",
    "segments_per_call",
]

#: Socket option level and options (linux/udp.h); Python's socket module lacks them.
SOL_UDP = getattr(socket, "SOL_UDP", 17)
UDP_SEGMENT = getattr(socket, "UDP_SEGMENT", 103)
UDP_GRO = getattr(socket, "UDP_GRO", 104)
#: Most segments in one GSO send (UDP_MAX_SEGMENTS in linux/udp.h).
MAX_SEGMENTS = 64
#: Most UDP payload bytes in one send, segmented or not (65,535 - 20 IPv4 - 8 UDP).
MAX_SEGMENTED_BYTES = 65_507
#: A receive buffer that holds any GRO batch (at most 64 KiB of payload).
RECEIVE_BUFFER_BYTES = 65_536
_IP_MTU = getattr(socket, "IP_MTU", 14)  # linux/in.h; IPV6_MTU is 24
_IPV6_MTU = getattr(socket, "IPV6_MTU", 24)
#: IP and UDP header bytes in front of a datagram's payload (IPv4, IPv6).
IP_UDP_BYTES = {socket.AF_INET: 28, socket.AF_INET6: 48}


def largest_unfragmented(sock: socket.socket) -> int | None:
    """The largest UDP payload (bytes) that leaves the connected ``sock`` in one IP packet:
    the kernel's path MTU less the IP and UDP headers; None where unknown."""
    try:
        if sock.family == socket.AF_INET6:
            mtu = int(sock.getsockopt(socket.IPPROTO_IPV6, _IPV6_MTU))
        else:
            mtu = int(sock.getsockopt(socket.IPPROTO_IP, _IP_MTU))
    except OSError:
        return None
    return mtu - IP_UDP_BYTES.get(sock.family, 28)


def segments_per_call(datagram_bytes: int) -> int:
    """Most datagrams of ``datagram_bytes`` bytes that one GSO send may carry."""
    return max(1, min(MAX_SEGMENTS, MAX_SEGMENTED_BYTES // max(datagram_bytes, 1)))


def _refusal(sock: socket.socket, option: int, value: int) -> str | None:
    if not sys.platform.startswith("linux"):
        return f"{sys.platform} has no UDP segmentation offload"
    if sock.family not in (socket.AF_INET, socket.AF_INET6):
        return "not an IP socket"
    try:
        sock.setsockopt(SOL_UDP, option, value)
    except OSError as exc:
        return f"the kernel refused it ({exc.strerror})"
    return None


def enable_gso(sock: socket.socket, datagram_bytes: int) -> str | None:
    """Make every send of more than ``datagram_bytes`` on the connected ``sock`` leave as
    datagrams of that size (the last may be shorter).

    Segments are never fragmented, so a datagram larger than the path MTU allows cannot
    be segmented: it leaves alone, in IP fragments.

    Returns
    -------
    str or None
        None when set; else why not (one datagram per send then).
    """
    if segments_per_call(datagram_bytes) < 2:
        return f"datagrams of {datagram_bytes} bytes do not fit twice in one send"
    room = largest_unfragmented(sock)
    if room is not None and datagram_bytes > room:
        return (
            f"datagrams of {datagram_bytes} bytes exceed the path MTU: each leaves in IP "
            f"fragments (at most {room} bytes fit)"
        )
    return _refusal(sock, UDP_SEGMENT, datagram_bytes)


def enable_gro(sock: socket.socket) -> str | None:
    """Let the kernel coalesce the datagrams queued for ``sock`` (read with ``recvmsg``;
    the size of the coalesced datagrams comes in a ``UDP_GRO`` control message).

    Returns
    -------
    str or None
        None when set; else why not (one datagram per read then).
    """
    return _refusal(sock, UDP_GRO, 1)
