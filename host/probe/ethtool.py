"""NIC ring size and interrupt coalescing from the driver, through the ethtool ioctls.

``SIOCETHTOOL`` on any socket, with a ``struct ifreq`` whose ``ifr_data`` points at the
command's structure (``linux/ethtool.h``):

* ``ETHTOOL_GRINGPARAM`` (0x10) fills ``struct ethtool_ringparam``: nine ``__u32``
  (``cmd``, ``rx_max_pending``, ``rx_mini_max_pending``, ``rx_jumbo_max_pending``,
  ``tx_max_pending``, ``rx_pending``, ``rx_mini_pending``, ``rx_jumbo_pending``,
  ``tx_pending``).  K is ``rx_pending``, the receive ring's current size in descriptors
  (one packet each).
* ``ETHTOOL_GCOALESCE`` (0x0e) fills ``struct ethtool_coalesce``: 23 ``__u32``, of which
  ``rx_coalesce_usecs`` (1), ``rx_max_coalesced_frames`` (2) and
  ``use_adaptive_rx_coalesce`` (10) matter here.  N is ``rx_max_coalesced_frames``.

``struct ifreq`` is 16 bytes of name and a 24-byte union (40 bytes on 64-bit Linux);
the pointer sits at the union's start.  When the ioctl fails for a reason other than
"not supported" (e.g. a seccomp filter), the ``ethtool`` command is tried, if installed
(``ethtool -g`` and ``ethtool -c``).
"""

from __future__ import annotations

import array
import errno
import fcntl
import re
import shutil
import socket
import struct
import subprocess
from dataclasses import dataclass

__all__ = [
    "EthtoolCoalesce",
    "EthtoolRing",
    "EthtoolUnavailable",
    "parse_coalesce_output",
    "parse_ring_output",
    "read_coalesce",
    "read_ring",
]

SIOCETHTOOL = 0x8946
ETHTOOL_GCOALESCE = 0x0000000E
ETHTOOL_GRINGPARAM = 0x00000010
_IFNAMSIZ = 16
_IFREQ_SIZE = 40
_RING_WORDS = 9
_COALESCE_WORDS = 23


class EthtoolUnavailable(OSError):
    """The driver would not say (not supported, no such device, no permission)."""


@dataclass(frozen=True)
class EthtoolRing:
    """Receive ring: current and maximum size (descriptors), and how it was read."""

    rx_pending: int
    rx_max_pending: int
    source: str


@dataclass(frozen=True)
class EthtoolCoalesce:
    """Receive interrupt coalescing settings, and how they were read."""

    rx_frames: int
    rx_usecs: int
    adaptive_rx: bool
    source: str


def _ioctl(interface: str, command: int, words: int) -> list[int]:
    name = interface.encode()
    if not name or len(name) >= _IFNAMSIZ:
        raise EthtoolUnavailable(errno.EINVAL, f"invalid interface name {interface!r}")
    data = array.array("I", [command] + [0] * (words - 1))
    address = data.buffer_info()[0]
    request = bytearray(struct.pack(f"{_IFNAMSIZ}sP", name, address).ljust(_IFREQ_SIZE, b"\0"))
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
        fcntl.ioctl(sock.fileno(), SIOCETHTOOL, request)
    return list(data)


def _command(interface: str, flag: str) -> str | None:
    tool = shutil.which("ethtool")
    if tool is None:
        return None
    try:
        done = subprocess.run(
            [tool, flag, interface], capture_output=True, text=True, timeout=5, check=False
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    return done.stdout if done.returncode == 0 else None


def _unsupported(exc: OSError) -> bool:
    return exc.errno in (errno.EOPNOTSUPP, errno.ENOTSUP, errno.ENODEV, errno.EINVAL)


def _why(exc: OSError) -> str:
    return errno.errorcode.get(exc.errno or 0, str(exc.errno)) + f" ({exc.strerror or exc})"


def read_ring(interface: str) -> EthtoolRing:
    """The receive ring of ``interface`` (``ETHTOOL_GRINGPARAM``, else ``ethtool -g``).

    Raises
    ------
    EthtoolUnavailable
        With the reason (e.g. ``EOPNOTSUPP`` for loopback and most virtual devices).
    """
    try:
        words = _ioctl(interface, ETHTOOL_GRINGPARAM, _RING_WORDS)
        return EthtoolRing(words[5], words[1], "ioctl SIOCETHTOOL ETHTOOL_GRINGPARAM rx_pending")
    except EthtoolUnavailable:
        raise
    except OSError as exc:
        if _unsupported(exc):
            raise EthtoolUnavailable(exc.errno, f"ETHTOOL_GRINGPARAM: {_why(exc)}") from None
        text = _command(interface, "-g")
        parsed = parse_ring_output(text) if text else None
        if parsed is None:
            raise EthtoolUnavailable(exc.errno, f"ETHTOOL_GRINGPARAM: {_why(exc)}") from None
        return parsed


def read_coalesce(interface: str) -> EthtoolCoalesce:
    """Receive coalescing of ``interface`` (``ETHTOOL_GCOALESCE``, else ``ethtool -c``).

    Raises
    ------
    EthtoolUnavailable
        With the reason.
    """
    try:
        words = _ioctl(interface, ETHTOOL_GCOALESCE, _COALESCE_WORDS)
        return EthtoolCoalesce(
            words[2], words[1], bool(words[10]), "ioctl SIOCETHTOOL ETHTOOL_GCOALESCE"
        )
    except EthtoolUnavailable:
        raise
    except OSError as exc:
        if _unsupported(exc):
            raise EthtoolUnavailable(exc.errno, f"ETHTOOL_GCOALESCE: {_why(exc)}") from None
        text = _command(interface, "-c")
        parsed = parse_coalesce_output(text) if text else None
        if parsed is None:
            raise EthtoolUnavailable(exc.errno, f"ETHTOOL_GCOALESCE: {_why(exc)}") from None
        return parsed


def parse_ring_output(text: str) -> EthtoolRing | None:
    """The receive ring from ``ethtool -g`` output (None if it has no RX lines).

    Examples
    --------
    >>> out = "Pre-set maximums:\\nRX:\\t\\t4096\\nCurrent hardware settings:\\nRX:\\t\\t512\\n"
    >>> parse_ring_output(out).rx_pending
    512
    """
    maximum, _, current = text.partition("Current hardware settings:")
    rx_max = re.search(r"^RX:\s*(\d+)", maximum, re.MULTILINE)
    rx_now = re.search(r"^RX:\s*(\d+)", current, re.MULTILINE)
    if rx_now is None:
        return None
    return EthtoolRing(
        int(rx_now.group(1)),
        int(rx_max.group(1)) if rx_max else 0,
        "ethtool -g (Current hardware settings: RX)",
    )


def parse_coalesce_output(text: str) -> EthtoolCoalesce | None:
    """Receive coalescing from ``ethtool -c`` output (None if it has no rx-frames).

    Examples
    --------
    >>> out = "Adaptive RX: off  TX: off\\nrx-usecs: 18\\nrx-frames: 12\\n"
    >>> c = parse_coalesce_output(out); (c.rx_frames, c.rx_usecs, c.adaptive_rx)
    (12, 18, False)
    """
    frames = re.search(r"^rx-frames:\s*(\d+)", text, re.MULTILINE)
    usecs = re.search(r"^rx-usecs:\s*(\d+)", text, re.MULTILINE)
    adaptive = re.search(r"^Adaptive RX:\s*(\w+)", text, re.MULTILINE)
    if frames is None:
        return None
    return EthtoolCoalesce(
        int(frames.group(1)),
        int(usecs.group(1)) if usecs else 0,
        adaptive is not None and adaptive.group(1) == "on",
        "ethtool -c (rx-frames)",
    )
