"""The sender's time per paced call, measured with this package's sender and receiver.

The sender paces by calls: each call sends every datagram already due in one UDP GSO
buffer (:func:`datamover.sender.blast`), so a send at rate R carries about
``R * t_send / (8 * S_pkt)`` datagrams, t_send the time a call takes.  The receiver, with
UDP GRO on, reads a send whole where nothing on the way split it, so its datagrams per
read measure the send size (:mod:`transport.send_sizes`).  Here both run on this host,
each in a process of its own on a core of its own, over loopback, and
:func:`measure_seconds_per_send` turns the receiver's datagrams per read at a few paced
rates into t_send: ``datagrams per read * 8 * S_pkt / R``, the median over the rates.

Over loopback the kernel's receive work for a send runs inside the sender's call, so this
t_send is that of a sender whose peer is on the same host; ``blastrate calibrate`` stores
it with the path it was measured on.
"""

from __future__ import annotations

import multiprocessing
import os
import statistics
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from host.calibration import measure_buffer_by_send

from .handshake import new_secret
from .receiver import Receiver, ReceiverLimits
from .sender import MAX_BURST_PACKETS, send_file
from .wire import HEADER_BYTES

__all__ = ["SendTime", "measure_seconds_per_send", "measure_send_sizes", "send_sizes_provenance"]

#: Fractions of the rate the sender keeps up with at which its calls are timed.
PACED_FRACTIONS = (0.3, 0.5, 0.7)


@dataclass(frozen=True)
class SendTime:
    """The sender's time per paced call, and what it was measured from.

    Attributes
    ----------
    seconds_per_send : float
        The median over the rates of ``datagrams per read * 8 * payload / rate`` (s).
    rates : tuple of dict
        Per paced transfer: ``rate_bps``, ``datagrams``, ``reads``, ``datagrams_per_read``
        and ``seconds_per_send``.
    sender_max_bps : float
        The first blast's rate of a transfer sent back to back (payload bit/s).
    path : str
        Where it was measured (``"loopback"``).
    """

    seconds_per_send: float
    rates: tuple[dict[str, Any], ...]
    sender_max_bps: float
    path: str = "loopback"

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form."""
        return {
            "seconds_per_send": self.seconds_per_send,
            "sender_max_bps": self.sender_max_bps,
            "path": self.path,
            "rates": [dict(r) for r in self.rates],
        }


def _receive(
    directory: str, secret: bytes, count: int, cpu: int | None, conn: Any, timeout_s: float
) -> None:
    """The child: pin, listen, tell the port, receive ``count`` files, report each."""
    if cpu is not None:
        os.sched_setaffinity(0, {cpu})
    limits = ReceiverLimits(accept_timeout_s=timeout_s)
    try:
        with Receiver(directory, secret=secret, limits=limits, overwrite=True) as rx:
            conn.send(rx.port)
            for _ in range(count):
                report = rx.serve_one()
                conn.send((report.accepted, report.reads, report.gro))
    except Exception as exc:  # reported, not raised: the parent names it
        conn.send(f"{type(exc).__name__}: {exc}")
    finally:
        conn.close()


def measure_seconds_per_send(
    rates_bps: tuple[float, ...],
    *,
    payload_bytes: int,
    file_bytes: int = 8_000_000,
    receiver_cpu: int | None = None,
    sender_cpu: int | None = None,
    timeout_s: float = 30.0,
) -> SendTime:
    """Measure the sender's time per paced call: one transfer over loopback back to back,
    then one at each rate.

    Parameters
    ----------
    rates_bps : tuple of float
        Paced rates (payload bit/s), below what this host's sender does back to back (a
        sender behind its schedule sends bursts, not its calls' worth).
    payload_bytes : int
        File bytes per datagram.
    file_bytes : int, default 8,000,000
        Size of each transfer (bytes).
    receiver_cpu, sender_cpu : int, optional
        Cores to pin the receiver's process and this one to.
    timeout_s : float, default 30
        Bound on each transfer and on the receiver's wait for it (s).

    Returns
    -------
    SendTime

    Raises
    ------
    RuntimeError
        When the receiver fails, reports no reads, or reads without GRO (one datagram per
        read says nothing of the sends).
    """
    if not rates_bps or not all(r > 0 for r in rates_bps):
        raise ValueError("rates_bps must be rates > 0 bit/s")
    secret = new_secret().encode()
    ctx = multiprocessing.get_context("spawn")
    old = os.sched_getaffinity(0)
    with tempfile.TemporaryDirectory(prefix="blastrate-send-") as tmp:
        source = Path(tmp) / "source.bin"
        source.write_bytes(os.urandom(file_bytes))
        incoming = Path(tmp) / "in"
        incoming.mkdir()
        parent, child = ctx.Pipe()
        proc = ctx.Process(
            target=_receive,
            args=(str(incoming), secret, len(rates_bps) + 1, receiver_cpu, child, timeout_s),
            daemon=True,
        )
        proc.start()
        child.close()
        try:
            return _paced_transfers(
                parent, rates_bps, source, secret, payload_bytes, sender_cpu, timeout_s
            )
        except (EOFError, OSError) as exc:
            raise RuntimeError(f"the calibration receiver went away: {exc!r}") from None
        finally:
            os.sched_setaffinity(0, old)
            parent.close()
            proc.join(timeout_s)
            if proc.is_alive():
                proc.kill()
                proc.join()


def _paced_transfers(
    parent: Any,
    rates_bps: tuple[float, ...],
    source: Path,
    secret: bytes,
    payload_bytes: int,
    sender_cpu: int | None,
    timeout_s: float,
) -> SendTime:
    """The sender's half: one paced transfer per rate, the receiver's counts for each."""
    rows: list[dict[str, Any]] = []
    if not parent.poll(timeout_s):
        raise RuntimeError("the calibration receiver did not start")
    port = parent.recv()
    if isinstance(port, str):
        raise RuntimeError(f"the calibration receiver failed: {port}")
    if sender_cpu is not None:
        os.sched_setaffinity(0, {sender_cpu})
    sender_max = 0.0
    for rate in (None, *rates_bps):  # first back to back: what the sender keeps up with
        sent = send_file(
            source,
            "127.0.0.1",
            port,
            rate_bps=rate,
            secret=secret,
            payload_bytes=payload_bytes,
            name="send-size.bin",
            total_timeout_s=timeout_s,
            control_timeout_s=timeout_s,
        )
        if not parent.poll(timeout_s):
            raise RuntimeError("the calibration receiver did not report")
        got = parent.recv()
        if isinstance(got, str):
            raise RuntimeError(f"the calibration receiver failed: {got}")
        datagrams, reads, gro = got
        if rate is None:
            sender_max = sent.rounds[0].achieved_rate_bps
            continue
        if gro != "on" or not reads:
            raise RuntimeError(f"the receiver read without UDP GRO ({gro}): no sends seen")
        per_read = datagrams / reads
        rows.append(
            {
                "rate_bps": float(rate),
                "datagrams": int(datagrams),
                "reads": int(reads),
                "datagrams_per_read": per_read,
                "seconds_per_send": per_read * 8.0 * payload_bytes / rate,
            }
        )
    return SendTime(
        seconds_per_send=statistics.median(r["seconds_per_send"] for r in rows),
        rates=tuple(rows),
        sender_max_bps=sender_max,
    )


def measure_send_sizes(
    *,
    payload_bytes: int,
    buffer_packets: int,
    rate_bps: float,
    rcvbuf_bytes: int | None = None,
    receiver_cpu: int | None = None,
    sender_cpu: int | None = None,
) -> dict[str, Any]:
    """What a calibration stores as ``send_sizes`` (:class:`transport.SendSizes`' form).

    The sender's time per call (:func:`measure_seconds_per_send` at
    :data:`PACED_FRACTIONS` of ``rate_bps``) and the socket filled at each send size
    (:func:`host.calibration.measure_buffer_by_send`; its single-datagram entry is
    ``buffer_packets``, the profile's K, measured the same way just before).

    Parameters
    ----------
    payload_bytes : int
        File bytes per datagram.
    buffer_packets : int
        K of the profile (datagrams).
    rate_bps : float
        What the calibration's sender keeps up with (bit/s): the line, or less.
    rcvbuf_bytes : int, optional
        SO_RCVBUF of the profile's socket (None: the system default).
    receiver_cpu, sender_cpu : int, optional
        Cores for the two ends.

    Raises
    ------
    RuntimeError
        As :func:`measure_seconds_per_send`.
    """
    table = measure_buffer_by_send(HEADER_BYTES + payload_bytes, rcvbuf_bytes=rcvbuf_bytes)
    table[1] = buffer_packets
    timed = measure_seconds_per_send(
        tuple(f * rate_bps for f in PACED_FRACTIONS),
        payload_bytes=payload_bytes,
        receiver_cpu=receiver_cpu,
        sender_cpu=sender_cpu,
    )
    return {
        "seconds_per_send": timed.seconds_per_send,
        "buffer_by_send": {str(s): k for s, k in sorted(table.items())},
        "max_send": MAX_BURST_PACKETS,
        "sender_max_bps": timed.sender_max_bps,
        "path": timed.path,
        "rates": [dict(r) for r in timed.rates],
    }


def send_sizes_provenance(
    *,
    payload_bytes: int,
    buffer_packets: int,
    rate_bps: float,
    rcvbuf_bytes: int | None = None,
    receiver_cpu: int | None = None,
    sender_cpu: int | None = None,
) -> dict[str, Any]:
    """What a calibration's provenance carries of the sends: ``{"send_sizes": ...}``
    (:func:`measure_send_sizes`, same arguments), or, where they could not be measured,
    ``{"send_sizes_note": why}`` (the model then counts single datagrams)."""
    try:
        sends = measure_send_sizes(
            payload_bytes=payload_bytes,
            buffer_packets=buffer_packets,
            rate_bps=rate_bps,
            rcvbuf_bytes=rcvbuf_bytes,
            receiver_cpu=receiver_cpu,
            sender_cpu=sender_cpu,
        )
        return {"send_sizes": sends}
    except (OSError, RuntimeError) as exc:
        return {"send_sizes_note": f"not measured: {exc}"[:300]}
