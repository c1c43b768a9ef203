"""The receiving NIC: line rate, MTU and payload, ring size K and coalescing N.

* Interface: the one named, else the one carrying the default route (the
  ``00000000/00000000`` line of ``/proc/net/route`` with the lowest metric).
* Line rate: ``/sys/class/net/IF/speed`` in Mb/s; ``-1``, ``0`` or unreadable (virtual
  and down interfaces) means unread.
* MTU: ``/sys/class/net/IF/mtu``; payload S_pkt = MTU - 32 bytes, the paper's UDP-over-IP
  overhead convention (1500 -> 1468).
* K: the receive ring size, and N: the receive coalescing batch, from the driver
  (:mod:`host.probe.ethtool`).  N is ``rx-frames`` when it is at least 1; with
  ``rx-frames`` 0 and ``rx-usecs`` 0 the NIC interrupts once per packet, so N = 1.  With
  ``rx-frames`` 0 and ``rx-usecs`` > 0 (coalescing by time only) or adaptive coalescing
  the batch has no fixed size: N is unread.

A value that cannot be read is replaced by the value of the named default profile and
says so (``"default: profile sx280-2007"``), with the reason it was unread.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..errors import WorkloadError
from ..profiles import HostProfile
from .ethtool import EthtoolCoalesce, EthtoolRing, EthtoolUnavailable, read_coalesce, read_ring
from .readings import Reading, under_root

__all__ = ["UDP_IP_OVERHEAD_BYTES", "NicReadings", "default_interface", "probe_nic"]

#: UDP (8) + IP (24, as the paper counts it) header bytes taken from the MTU.
UDP_IP_OVERHEAD_BYTES = 32

RingReader = Callable[[str], EthtoolRing]
CoalesceReader = Callable[[str], EthtoolCoalesce]


@dataclass(frozen=True)
class NicReadings:
    """What the probe read about the receiving NIC (each value with its source)."""

    interface: Reading
    line_rate_bps: Reading
    mtu_bytes: Reading
    packet_payload_bytes: Reading
    buffer_packets: Reading
    coalesce_packets: Reading

    def to_dict(self) -> dict[str, Any]:
        return {
            "interface": self.interface.to_dict(),
            "line_rate_bps": self.line_rate_bps.to_dict(),
            "mtu_bytes": self.mtu_bytes.to_dict(),
            "packet_payload_bytes": self.packet_payload_bytes.to_dict(),
            "buffer_packets": self.buffer_packets.to_dict(),
            "coalesce_packets": self.coalesce_packets.to_dict(),
        }

    def profile_overrides(self) -> dict[str, Any]:
        """The host profile fields that were read from the NIC (defaults left out)."""
        fields = ("line_rate_bps", "packet_payload_bytes", "buffer_packets", "coalesce_packets")
        return {f: getattr(self, f).value for f in fields if getattr(self, f).was_read}


def default_interface(root: str | Path = "/") -> Reading:
    """The interface of the default route, from ``/proc/net/route``."""
    path = under_root(root, "/proc/net/route")
    try:
        lines = path.read_text().splitlines()[1:]
    except OSError as exc:
        return Reading(None, "/proc/net/route", f"unreadable: {exc.strerror or exc}")
    best: tuple[int, str] | None = None
    for line in lines:
        fields = line.split()
        if len(fields) < 8:
            continue
        try:
            flags, metric = int(fields[3], 16), int(fields[6])
        except ValueError:
            continue
        # Destination and mask 0: the default route; RTF_UP (0x1) set.
        default = fields[1] == "00000000" and fields[7] == "00000000" and flags & 0x1
        if default and (best is None or metric < best[0]):
            best = (metric, fields[0])
    if best is None:
        return Reading(None, "/proc/net/route", "no default route")
    return Reading(best[1], "/proc/net/route (default route)")


def _read_int(path: Path) -> int | str:
    """The integer in ``path``, or why it could not be read."""
    try:
        return int(path.read_text().strip())
    except OSError as exc:
        return f"unreadable: {exc.strerror or exc}"
    except ValueError:
        return "not an integer"


def probe_nic(
    root: str | Path = "/",
    interface: str | None = None,
    defaults: HostProfile | None = None,
    *,
    ring_reader: RingReader | None = None,
    coalesce_reader: CoalesceReader | None = None,
) -> NicReadings:
    """Read the receiving NIC's parameters.

    Parameters
    ----------
    root : str or Path
        File-system root holding ``/proc`` and ``/sys`` (``"/"`` for this host).
    interface : str, optional
        Interface name; default: the one carrying the default route.
    defaults : HostProfile, optional
        Profile whose values stand in for unread ones (default: ``sx280-2007``).
    ring_reader, coalesce_reader : callable, optional
        Read the driver's ring and coalescing settings of an interface (raising
        :class:`~host.probe.ethtool.EthtoolUnavailable`).  Default: the ethtool ioctls
        when ``root`` is ``/``; for another root the driver cannot be asked, so K and N
        are unread.

    Raises
    ------
    WorkloadError
        ``field="interface"`` when a named interface does not exist.
    """
    from ..profiles import DEFAULT_PROFILE, host_profile

    base = defaults or host_profile(DEFAULT_PROFILE)
    label = f"profile {base.name}"
    if interface is not None:
        if not (under_root(root, "/sys/class/net") / interface).is_dir() or "/" in interface:
            raise WorkloadError(
                f"no network interface {interface[:32]!r} (not in /sys/class/net)",
                field="interface",
            )
        iface = Reading(interface, "named")
    else:
        iface = default_interface(root)
    if Path(root) == Path("/"):
        ring_reader = ring_reader or read_ring
        coalesce_reader = coalesce_reader or read_coalesce

    def unread(field: str, reason: str) -> Reading:
        return Reading.defaulted(getattr(base, field), label, reason)

    name = iface.value
    if name is None:
        why = f"no interface: {iface.unread}"
        return NicReadings(
            iface,
            unread("line_rate_bps", why),
            Reading(None, "/sys/class/net", why),
            unread("packet_payload_bytes", why),
            unread("buffer_packets", why),
            unread("coalesce_packets", why),
        )
    folder = under_root(root, "/sys/class/net") / name
    where = f"/sys/class/net/{name}"

    speed = _read_int(folder / "speed")
    if isinstance(speed, int) and speed > 0:
        line = Reading(speed * 1e6, f"{where}/speed ({speed} Mb/s)")
    else:
        why = f"{where}/speed = {speed}" if isinstance(speed, int) else f"{where}/speed {speed}"
        line = unread("line_rate_bps", why + " (no link speed: virtual or down interface)")

    mtu_value = _read_int(folder / "mtu")
    if isinstance(mtu_value, int) and mtu_value > UDP_IP_OVERHEAD_BYTES:
        mtu = Reading(mtu_value, f"{where}/mtu")
        payload_value = min(mtu_value - UDP_IP_OVERHEAD_BYTES, 65_535)
        payload = Reading(
            payload_value, f"{where}/mtu - {UDP_IP_OVERHEAD_BYTES} (UDP + IP headers)"
        )
    else:
        why = f"{where}/mtu {mtu_value}"
        mtu = Reading(None, f"{where}/mtu", why)
        payload = unread("packet_payload_bytes", why)

    k: Reading
    if ring_reader is None:
        k = unread("buffer_packets", f"the driver can only be asked on the live host, not {root}")
    else:
        try:
            ring = ring_reader(name)
            k = (
                Reading(ring.rx_pending, f"{ring.source} of {name}")
                if ring.rx_pending > 0
                else unread("buffer_packets", f"{ring.source} of {name}: rx ring size 0")
            )
        except EthtoolUnavailable as exc:
            k = unread("buffer_packets", f"{name}: {exc.strerror or exc}")

    n: Reading
    if coalesce_reader is None:
        n = unread("coalesce_packets", f"the driver can only be asked on the live host, not {root}")
    else:
        try:
            co = coalesce_reader(name)
            src = f"{co.source} of {name}"
            if co.adaptive_rx:
                n = unread("coalesce_packets", f"{src}: adaptive rx coalescing, no fixed batch")
            elif co.rx_frames >= 1:
                n = Reading(co.rx_frames, f"{src} rx-frames={co.rx_frames} rx-usecs={co.rx_usecs}")
            elif co.rx_usecs == 0:
                n = Reading(1, f"{src} rx-frames=0 rx-usecs=0: one interrupt per packet")
            else:
                n = unread(
                    "coalesce_packets",
                    f"{src}: coalescing by time only (rx-usecs={co.rx_usecs}), no fixed batch",
                )
        except EthtoolUnavailable as exc:
            n = unread("coalesce_packets", f"{name}: {exc.strerror or exc}")
    if isinstance(k.value, int) and isinstance(n.value, int) and n.value > k.value and n.was_read:
        # The model needs N <= K; a driver batch larger than the ring cannot fill.
        n = Reading(k.value, f"{n.source}, capped at the ring size K = {k.value}")
    return NicReadings(iface, line, mtu, payload, k, n)
