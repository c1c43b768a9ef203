"""Host profiles: the service rates, NIC ring and coalescing, line rate and payload of a
receiving host, in SI units.

``sx280-2007`` is the paper's Table II.  Profiles measured on other hosts are stored
by :mod:`host.store` (when present) and are built from the same :class:`HostProfile`.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any

from ._checks import require_count, require_rate, require_real
from .errors import WorkloadError

__all__ = [
    "DEFAULT_PROFILE",
    "HOST_PROFILES",
    "MAX_BUFFER_PACKETS",
    "MAX_LINE_RATE_BPS",
    "MAX_PAYLOAD_BYTES",
    "HostProfile",
    "host_profile",
]

#: Largest NIC ring K (packets), payload S_pkt (bytes) and line rate (bit/s) accepted.
MAX_BUFFER_PACKETS = 1 << 20
MAX_PAYLOAD_BYTES = 65_535
MAX_LINE_RATE_BPS = 1e15
_PROFILE_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}")


@dataclass(frozen=True)
class HostProfile:
    """A receiving host: its service rates, NIC buffer and coalescing, line and packets.

    Attributes
    ----------
    name : str
        Profile name (1-64 letters, digits, ``.``, ``_`` or ``-``).
    mu_io_cpu : float
        Rate (1/s) at which one I/O-bound task alone on a core finishes its processor
        burst and moves to a disk (the paper's mu_P_I/O).
    mu_disk : float
        Service rate (1/s) of one busy disk (mu_D).
    mu_net : float
        Rate (1/s) at which an interrupt alone on a core is serviced (mu_P_Net).
    buffer_packets : int
        NIC buffer K in packets, counting those in service.
    coalesce_packets : int
        Interrupt coalescing batch N in packets (N <= K).
    line_rate_bps : float
        Line rate in bit/s.
    packet_payload_bytes : int
        Payload per packet S_pkt in bytes.

    Raises
    ------
    WorkloadError
        On construction, naming the field: a rate that is not a finite positive number
        in [1e-6, 1e12] per second, a non-integer or non-positive packet count, N > K.

    Examples
    --------
    >>> fast = host_profile("sx280-2007").replace(name="fast-host", mu_net=83_200.0)
    >>> fast.mu_net, fast.mu_disk
    (83200.0, 1010.0)
    """

    name: str
    mu_io_cpu: float
    mu_disk: float
    mu_net: float
    buffer_packets: int
    coalesce_packets: int
    line_rate_bps: float
    packet_payload_bytes: int

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or _PROFILE_NAME.fullmatch(self.name) is None:
            raise WorkloadError(
                "profile name must be 1-64 letters, digits, '.', '_' or '-', starting with a "
                f"letter or digit; got {self.name!r}",
                field="name",
            )
        for rate in ("mu_io_cpu", "mu_disk", "mu_net"):
            object.__setattr__(self, rate, require_rate(getattr(self, rate), rate))
        k = require_count(
            self.buffer_packets,
            "buffer_packets",
            minimum=1,
            maximum=MAX_BUFFER_PACKETS,
            limit="max_buffer_packets",
        )
        n = require_count(self.coalesce_packets, "coalesce_packets", minimum=1)
        if n > k:
            raise WorkloadError(
                f"coalesce_packets N = {n} cannot exceed buffer_packets K = {k}",
                field="coalesce_packets",
            )
        line = require_real(self.line_rate_bps, "line_rate_bps")
        if not 0 < line <= MAX_LINE_RATE_BPS:
            raise WorkloadError(
                f"line_rate_bps must lie in (0, {MAX_LINE_RATE_BPS:g}] bit/s, got {line}",
                field="line_rate_bps",
            )
        payload = require_count(
            self.packet_payload_bytes,
            "packet_payload_bytes",
            minimum=1,
            maximum=MAX_PAYLOAD_BYTES,
            limit="max_packet_payload_bytes",
        )
        object.__setattr__(self, "buffer_packets", k)
        object.__setattr__(self, "coalesce_packets", n)
        object.__setattr__(self, "line_rate_bps", line)
        object.__setattr__(self, "packet_payload_bytes", payload)

    def replace(self, **overrides: Any) -> HostProfile:
        """A validated copy with some fields changed (the name is kept unless given).

        Parameters
        ----------
        **overrides
            New values by field name, in the units of the attributes.

        Raises
        ------
        WorkloadError
            If a name is not a profile field, or a new value is invalid.
        """
        known = {f.name for f in dataclasses.fields(self)}
        for key in overrides:
            if key not in known:
                raise WorkloadError(
                    f"unknown host profile field {key!r}; the fields are {sorted(known)}",
                    field=key,
                )
        return dataclasses.replace(self, **overrides)

    def to_dict(self) -> dict[str, Any]:
        """The profile as a JSON-ready dict (SI units), fields in declaration order."""
        # Not dataclasses.asdict: it deep-copies every scalar, and this is on the path of
        # every GET /bottleneck-rate.
        return {
            "name": self.name,
            "mu_io_cpu": self.mu_io_cpu,
            "mu_disk": self.mu_disk,
            "mu_net": self.mu_net,
            "buffer_packets": self.buffer_packets,
            "coalesce_packets": self.coalesce_packets,
            "line_rate_bps": self.line_rate_bps,
            "packet_payload_bytes": self.packet_payload_bytes,
        }


#: Built-in host profiles.  ``sx280-2007`` is the paper's Table II (Dell SX280, BCM5700
#: NIC) in SI units: mu_io_cpu 4.6/ms, mu_disk 1.01/ms, mu_net 41.6/ms, K = 64, N = 6.
HOST_PROFILES: Mapping[str, HostProfile] = MappingProxyType(
    {
        "sx280-2007": HostProfile(
            name="sx280-2007",
            mu_io_cpu=4_600.0,
            mu_disk=1_010.0,
            mu_net=41_600.0,
            buffer_packets=64,
            coalesce_packets=6,
            line_rate_bps=1e9,
            packet_payload_bytes=1_468,
        ),
    }
)

DEFAULT_PROFILE = "sx280-2007"


def host_profile(name: str) -> HostProfile:
    """The built-in host profile called ``name``.

    Raises
    ------
    WorkloadError
        With ``field="profile"`` when there is no such profile.

    Examples
    --------
    >>> host_profile("sx280-2007").mu_net
    41600.0
    """
    if not isinstance(name, str):
        raise WorkloadError(f"profile must be a profile name, got {name!r}", field="profile")
    try:
        return HOST_PROFILES[name]
    except KeyError:
        raise WorkloadError(
            f"unknown host profile {name!r}; known profiles: {', '.join(sorted(HOST_PROFILES))}",
            field="profile",
        ) from None
