"""How the datagrams reach the receiver's socket: in the sender's sends, whose size grows
with the rate.

The product's sender (:mod:`datamover`) sends one UDP GSO buffer per paced call, carrying
every datagram already due, and its receiver turns UDP GRO on.  Where nothing on the way
splits a send (veth, loopback), the socket queues a send whole and charges its memory
once, and a read takes it whole.  The sender's calls take about the same time whatever
the rate, so a send at rate R carries about ``s = R t_send / (8 S_pkt)`` datagrams, and
with it:

* the socket holds more datagrams: K(s), measured by filling it with sends of s
  (:func:`host.calibration.measure_buffer_packets` with ``segments``);
* a backlogged wake-up takes more: it reads until it has N and finishes the send it is
  in, about ``N + (s - 1) / 2`` datagrams;
* such a wake-up costs ``a + n b`` for its n datagrams, a the cost per wake-up
  (``wakeup_s``), b = ``(1 / mu - a) / N`` the cost per datagram.

Measured over a shaped veth link (``benchmarks/send_size.py``, docs/validation.md):
1.3-1.4 datagrams per read at 150 Mbit/s, 4.4-5.1 at 500, 6.3-7.3 at 750; at the line the
shaper (``tbf``, a 32 KB burst) splits the sender's catch-up bursts and sends arrive as
single datagrams, which is the rule here: s = 1 at the line, and from what the sender
sends back to back up, where every call is such a burst.  Behind a physical NIC the
unit is the receiving NIC's GRO batch, which nothing here measures.

:func:`transport.time_slice_bottleneck_rate` takes a :class:`SendSizes` as ``send_sizes``
and solves each rate with its own K and N.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from host import HostProfile

from .errors import TransportParameterError

__all__ = ["MAX_SEND_DATAGRAMS", "SendSizes", "send_sizes_from"]

#: Most datagrams one of the sender's calls carries (``datamover.MAX_BURST_PACKETS``; a
#: test pins the two equal): the largest send size.
MAX_SEND_DATAGRAMS = 32
# Bounds on what a stored calibration can give.
_MAX_SECONDS_PER_SEND = 0.01
_MAX_TABLE = 64
_MAX_HELD = 10**7
_MAX_RATE_BPS = 1e15
# Rates within this fraction of the line are "at the line": the shaper splits sends.
_AT_LINE = 0.999


@dataclass(frozen=True)
class SendSizes:
    """The sender's send size against the rate, and the socket's capacity against it.

    Parameters
    ----------
    seconds_per_send : float
        The sender's time per paced call (s): a send at rate R (bit/s) carries
        ``R * seconds_per_send / (8 * payload)`` datagrams, at least 1, at most
        ``max_send``.
    buffer_by_send : tuple of (int, int)
        ``(s, K_s)`` pairs, s ascending: the datagrams the receiver's socket holds when
        they arrive in sends of s (linear in between, the end values beyond).
    max_send : int, default :data:`MAX_SEND_DATAGRAMS`
        The sender's largest send (datagrams).
    sender_max_bps : float, optional
        What the sender sends back to back (bit/s).  From there up it is behind its
        schedule and every call is a catch-up burst, which a shaper splits into
        datagrams (as from the line up): sends of 1.  None: the line alone.
    """

    seconds_per_send: float
    buffer_by_send: tuple[tuple[int, int], ...]
    max_send: int = MAX_SEND_DATAGRAMS
    sender_max_bps: float | None = None

    def __post_init__(self) -> None:
        _check_real(self.seconds_per_send, "seconds_per_send", _MAX_SECONDS_PER_SEND, "s")
        table = self.buffer_by_send
        if not (1 <= len(table) <= _MAX_TABLE):
            raise TransportParameterError(
                "send_sizes.buffer_by_send", f"must have 1 to {_MAX_TABLE} entries"
            )
        sizes = [s for s, _ in table]
        if sizes != sorted(set(sizes)) or not all(
            _whole(s, 1, 1024) and _whole(k, 1, _MAX_HELD) for s, k in table
        ):
            raise TransportParameterError(
                "send_sizes.buffer_by_send",
                "must pair distinct, ascending send sizes (1-1024 datagrams) with the "
                f"datagrams the socket holds (1-{_MAX_HELD})",
            )
        if self.sender_max_bps is not None:
            _check_real(self.sender_max_bps, "sender_max_bps", _MAX_RATE_BPS, "bit/s")
        if not _whole(self.max_send, 1, 1024):
            raise TransportParameterError(
                "send_sizes.max_send", f"must be a whole number 1-1024, got {self.max_send!r}"
            )

    @classmethod
    def from_dict(cls, stored: Mapping[str, Any]) -> SendSizes:
        """From :meth:`to_dict`'s form (a stored calibration's ``send_sizes``).

        Raises
        ------
        TransportParameterError
            Naming the field that is missing or out of bounds.
        """
        if not isinstance(stored, Mapping):
            raise TransportParameterError("send_sizes", "must be an object")
        table = stored.get("buffer_by_send")
        if not isinstance(table, Mapping) or not (1 <= len(table) <= _MAX_TABLE):
            raise TransportParameterError(
                "send_sizes.buffer_by_send",
                f"must map 1 to {_MAX_TABLE} send sizes to the datagrams the socket holds",
            )
        pairs: list[tuple[int, int]] = []
        for s, k in table.items():
            try:
                size = int(s)
            except (TypeError, ValueError):
                size = 0
            if not _whole(size, 1, 1024) or not _whole(k, 1, _MAX_HELD):
                raise TransportParameterError(
                    "send_sizes.buffer_by_send",
                    f"entry {str(s)[:20]!r}: {str(k)[:20]!r} is not a send size (1-1024) and "
                    f"a count of datagrams (1-{_MAX_HELD})",
                )
            pairs.append((size, int(k)))
        return cls(
            seconds_per_send=stored.get("seconds_per_send"),  # type: ignore[arg-type]
            buffer_by_send=tuple(sorted(pairs)),
            max_send=stored.get("max_send", MAX_SEND_DATAGRAMS),
            sender_max_bps=stored.get("sender_max_bps"),
        )

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form (what a calibration stores as ``send_sizes``)."""
        return {
            "seconds_per_send": self.seconds_per_send,
            "buffer_by_send": {str(s): k for s, k in self.buffer_by_send},
            "max_send": self.max_send,
            "sender_max_bps": self.sender_max_bps,
        }

    def top_bps(self, line_rate_bps: float) -> float:
        """The rate (bit/s) from which sends are single datagrams: the line, or what the
        sender sends back to back where that is less."""
        if self.sender_max_bps is None:
            return float(line_rate_bps)
        return min(float(line_rate_bps), self.sender_max_bps)

    def send_size(self, rate_bps: float, line_rate_bps: float, payload_bytes: int) -> float:
        """Mean datagrams per send at ``rate_bps`` (1 from :meth:`top_bps` up, where the
        sender's catch-up bursts are split into datagrams)."""
        if rate_bps >= _AT_LINE * self.top_bps(line_rate_bps):
            return 1.0
        s = rate_bps * self.seconds_per_send / (8.0 * payload_bytes)
        return float(min(max(s, 1.0), self.max_send))

    def buffer_packets(self, send_size: float) -> int:
        """Datagrams the socket holds in sends of ``send_size`` (linear in the table)."""
        sizes = [float(s) for s, _ in self.buffer_by_send]
        held = [float(k) for _, k in self.buffer_by_send]
        return max(1, round(float(np.interp(send_size, sizes, held))))

    def at(self, profile: HostProfile, rate_bps: float) -> tuple[int, int]:
        """``(K, N)``, the socket's capacity and a backlogged wake-up's datagrams, at
        ``rate_bps`` on ``profile`` (whose ``coalesce_packets`` is N for single sends)."""
        s = self.send_size(rate_bps, profile.line_rate_bps, profile.packet_payload_bytes)
        k = self.buffer_packets(s)
        n = max(1, min(round(profile.coalesce_packets + (s - 1.0) / 2.0), k))
        return k, n

    def largest(self, profile: HostProfile) -> tuple[int, int]:
        """The largest ``(K, N)`` at any rate up to the line: what bounds the model's work."""
        top = self.send_size(
            _AT_LINE * 0.9999 * self.top_bps(profile.line_rate_bps),
            profile.line_rate_bps,
            profile.packet_payload_bytes,
        )
        held = [self.buffer_packets(top)] + [k for s, k in self.buffer_by_send if s <= top]
        k = max(held)
        n = max(1, round(profile.coalesce_packets + (top - 1.0) / 2.0))
        return k, min(n, k)


def send_sizes_from(value: Any) -> SendSizes | None:
    """``value`` as :class:`SendSizes`: None, a :class:`SendSizes` or its dict form.

    Raises
    ------
    TransportParameterError
        Naming the field of a dict that is out of bounds.
    """
    if value is None or isinstance(value, SendSizes):
        return value
    return SendSizes.from_dict(value)


def _check_real(value: Any, name: str, upper: float, unit: str) -> None:
    """Refuse ``value`` unless it is a real number in (0, upper], naming ``send_sizes.name``."""
    if (
        isinstance(value, bool)
        or not isinstance(value, int | float)
        or not math.isfinite(value)
        or not 0 < value <= upper
    ):
        raise TransportParameterError(
            f"send_sizes.{name}", f"must be in (0, {upper:g}] {unit}, got {value!r}"[:200]
        )


def _whole(value: Any, lo: int, hi: int) -> bool:
    """``value`` is an integer (not a bool) in [lo, hi]."""
    if isinstance(value, bool) or not isinstance(value, int | np.integer):
        return False
    return lo <= int(value) <= hi
