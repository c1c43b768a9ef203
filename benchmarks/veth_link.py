"""The benchmarks' real line: two network namespaces joined by a veth pair, a tbf qdisc at
the line rate on the sender's end, and RPS steering the receive softirq to the receiver's
core.  Falls back to loopback (and says so) without root, ``ip`` or ``tc``.

Only the addresses of the two namespaces made here are ever sent to; ``netem`` does not
work on this kernel, so delays are emulated by the protocol, not the link.
"""

from __future__ import annotations

import ctypes
import os
import shutil
import subprocess
import time
from pathlib import Path

from datamover import HEADER_BYTES
from datamover.wire import DEFAULT_PAYLOAD_BYTES

__all__ = ["CLONE_NEWNET", "RX_ADDR", "RX_NS", "TX_ADDR", "TX_NS", "Drops", "Link", "setns"]

# The data mover's datagram: a 1,500-byte IP packet (1468 left in IP fragments on veth).
PAYLOAD = DEFAULT_PAYLOAD_BYTES
TX_NS, RX_NS = "blastrate-tx", "blastrate-rx"
TX_DEV, RX_DEV = "brtx0", "brrx0"
# Addresses inside the two namespaces this script makes (no route leaves them).
TX_ADDR, RX_ADDR = "10.231.77.1", "10.231.77.2"
# Wire bytes per datagram that tbf counts: payload, our header, UDP, IPv4, Ethernet.
WIRE_OVERHEAD = HEADER_BYTES + 8 + 20 + 14
CLONE_NEWNET = 0x40000000


def setns(name: str | None) -> None:
    """Move this (single-threaded) process into network namespace ``name``."""
    if name is None:
        return
    fd = os.open(f"/var/run/netns/{name}", os.O_RDONLY)
    try:
        _setns_fd(fd, name)
    finally:
        os.close(fd)


def _setns_fd(fd: int, what: str) -> None:
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.setns(fd, CLONE_NEWNET) != 0:
        raise OSError(ctypes.get_errno(), f"setns {what}")


class Drops:
    """Where the receiving side drops datagrams, counted by the kernel.

    * ``socket``: the receiving namespace's ``Udp: RcvbufErrors`` (``/proc/net/snmp``),
      datagrams that found the socket's receive buffer full: the model's K overflowing;
    * ``backlog``: the ``dropped`` column of ``/proc/net/softnet_stat`` for the receive
      CPU, datagrams that found that CPU's input queue (``net.core.netdev_max_backlog``)
      full before the softirq reached them: a loss the model has no term for.

    ``/proc/net/snmp`` is opened once inside the receiving namespace: an open proc file
    keeps reading the namespace it was opened in, wherever this process moves later.
    """

    def __init__(self, netns: str | None, rx_cpu: int) -> None:
        self.rx_cpu = rx_cpu
        here = os.open("/proc/self/ns/net", os.O_RDONLY)
        try:
            setns(netns)
            self._snmp = os.open("/proc/net/snmp", os.O_RDONLY)
        finally:
            if netns is not None:
                _setns_fd(here, "back")
            os.close(here)

    def read(self) -> dict[str, int]:
        """Counters now: ``{"socket": ..., "backlog": ...}`` (datagrams since boot)."""
        os.lseek(self._snmp, 0, os.SEEK_SET)
        text = b""
        while chunk := os.read(self._snmp, 65536):
            text += chunk
        udp = [line.split() for line in text.decode().splitlines() if line.startswith("Udp:")]
        socket_drops = int(udp[1][udp[0].index("RcvbufErrors")])
        softnet = Path("/proc/net/softnet_stat").read_text().splitlines()
        backlog = int(softnet[self.rx_cpu].split()[1], 16)
        return {"socket": socket_drops, "backlog": backlog}

    def since(self, before: dict[str, int]) -> dict[str, int]:
        """Drops since ``before`` (a :meth:`read`)."""
        now = self.read()
        return {k: now[k] - before[k] for k in now}

    def close(self) -> None:
        os.close(self._snmp)


class Link:
    """Where the bytes go: a veth pair between two namespaces with tbf, or loopback."""

    def __init__(self, kind: str, line_rate_bps: float, rx_cpu: int) -> None:
        self.kind = kind
        self.line_rate_bps = line_rate_bps
        self.rx_cpu = rx_cpu
        self.note = ""
        self.rx_ns: str | None = None
        self.tx_ns: str | None = None
        self.address = "127.0.0.1"

    def _ip(self, *args: str) -> None:
        subprocess.run(["ip", *args], check=True, capture_output=True, timeout=10)

    def __enter__(self) -> Link:
        if self.kind == "veth":
            why = None
            if os.geteuid() != 0:
                why = "not root"
            elif not (shutil.which("ip") and shutil.which("tc")):
                why = "no ip/tc"
            if why is None:
                try:
                    self._make()
                except (subprocess.CalledProcessError, OSError) as exc:
                    why = f"set-up failed: {exc}"
                    self.remove()
            if why is not None:
                self.kind = "loopback"
                self.note = f"veth unavailable ({why}); fell back to loopback"
        return self

    def _make(self) -> None:
        self.remove()
        self._ip("netns", "add", TX_NS)
        self._ip("netns", "add", RX_NS)
        # A pair deleted with its namespace goes away asynchronously: retry a few times.
        for attempt in range(30):
            try:
                self._ip("link", "add", TX_DEV, "type", "veth", "peer", "name", RX_DEV)
                break
            except subprocess.CalledProcessError:
                if attempt == 29:
                    raise
                time.sleep(0.1)
        self._ip("link", "set", TX_DEV, "netns", TX_NS)
        self._ip("link", "set", RX_DEV, "netns", RX_NS)
        for ns, dev, addr in ((TX_NS, TX_DEV, TX_ADDR), (RX_NS, RX_DEV, RX_ADDR)):
            self._ip("-n", ns, "addr", "add", f"{addr}/30", "dev", dev)
            self._ip("-n", ns, "link", "set", dev, "up")
            self._ip("-n", ns, "link", "set", "lo", "up")
        self._shape("add")
        mask = format(1 << self.rx_cpu, "x")
        subprocess.run(
            [
                "ip",
                "netns",
                "exec",
                RX_NS,
                "sh",
                "-c",
                f"echo {mask} > /sys/class/net/{RX_DEV}/queues/rx-0/rps_cpus",
            ],
            check=True,
            capture_output=True,
            timeout=10,
        )
        self.rx_ns, self.tx_ns, self.address = RX_NS, TX_NS, RX_ADDR
        self.reset(self.line_rate_bps)

    def drops(self) -> Drops:
        """Counters of the receiving side's drops (call before moving into a namespace)."""
        return Drops(self.rx_ns, self.rx_cpu)

    def _shape(self, verb: str) -> str:
        # tbf counts wire bytes: the payload rate times the datagram's bytes on the wire.
        rate = f"{int(self.line_rate_bps * (PAYLOAD + WIRE_OVERHEAD) / PAYLOAD)}bit"
        subprocess.run(
            [
                *("ip", "netns", "exec", TX_NS, "tc", "qdisc", verb, "dev", TX_DEV, "root"),
                *("tbf", "rate", rate, "burst", "32kb", "latency", "20ms"),
            ],
            check=True,
            capture_output=True,
            timeout=10,
        )
        return rate

    def reset(self, line_rate_bps: float) -> None:
        """Set another line rate (bit/s of payload) on the link in place."""
        self.line_rate_bps = line_rate_bps
        if self.kind == "veth":
            rate = self._shape("replace")
            self.note = (
                f"veth {TX_DEV}->{RX_DEV}, tbf {rate} (payload {line_rate_bps:.4g} bit/s), "
                f"RPS to CPU {self.rx_cpu}"
            )

    def remove(self) -> None:
        for ns in (TX_NS, RX_NS):
            subprocess.run(["ip", "netns", "del", ns], capture_output=True, timeout=10)

    def __exit__(self, *exc: object) -> None:
        if self.kind == "veth":
            self.remove()
