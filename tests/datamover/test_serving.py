"""``Receiver.serve``: several senders at once, bounded, and a failure in one transfer
that never ends the receiver.  Loopback only; every wait is on an event or a socket."""

from __future__ import annotations

import errno
import fcntl
import hashlib
import os
import socket
import threading
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from datamover import (
    ReceiveError,
    Receiver,
    ReceiverLimits,
    SendError,
    ServeSummary,
    remove_stale_partials,
    send_file,
)
from datamover import receiver as receiver_module

SECRET = b"serving-test-secret-0123"
LIMITS = ReceiverLimits(total_timeout_s=60, idle_timeout_s=20, handshake_timeout_s=20)


def _payload(path: Path, size: int) -> bytes:
    data = hashlib.shake_256(path.name.encode()).digest(size)
    path.write_bytes(data)
    return data


class _Serving:
    """``rx.serve()`` in a thread, with the errors it reported."""

    def __init__(self, rx: Receiver, **kwargs: Any) -> None:
        self.rx = rx
        self.errors: list[ReceiveError] = []
        self.summary: ServeSummary | None = None
        self.ready = threading.Event()
        self.error_seen = threading.Event()
        self.reports: list[Any] = []
        self.reported = threading.Condition()

        def on_error(peer: str, exc: ReceiveError) -> None:
            self.errors.append(exc)
            self.error_seen.set()

        def on_report(report: Any) -> None:
            # Called once the session has ended and its slot is free again.
            with self.reported:
                self.reports.append(report)
                self.reported.notify_all()

        def run() -> None:
            self.summary = rx.serve(
                on_error=on_error, on_report=on_report, ready=self.ready.set, **kwargs
            )

        self.thread = threading.Thread(target=run, daemon=True)
        self.thread.start()
        assert self.ready.wait(30)

    def stop(self) -> ServeSummary:
        self.rx.close()
        self.thread.join(30)
        assert not self.thread.is_alive() and self.summary is not None
        return self.summary


def _send(src: Path, port: int, **kwargs: Any):
    kwargs.setdefault("rate_bps", 200e6)
    return send_file(src, "127.0.0.1", port, secret=SECRET, total_timeout_s=30, **kwargs)


def transfer_file_open(pid: int, out: Path) -> bool:
    """Whether process ``pid`` has a transfer's file in ``out`` open (unnamed, or a
    ``.blastrate-*.part``): the transfer is under way."""
    fds = Path(f"/proc/{pid}/fd")
    for fd in fds.iterdir():
        try:
            target = os.readlink(fd)
        except OSError:
            continue
        if target.startswith(str(out) + "/") and ("(deleted)" in target or ".part" in target):
            return True
    return False


def test_beyond_max_sessions_a_sender_is_told_the_receiver_is_busy(tmp_path: Path) -> None:
    out = tmp_path / "out"
    out.mkdir()
    slow, fast = tmp_path / "slow.bin", tmp_path / "fast.bin"
    _payload(slow, 300_000)
    _payload(fast, 10_000)
    with Receiver(out, secret=SECRET, limits=replace(LIMITS, max_sessions=1)) as rx:
        serving = _Serving(rx)
        first: list[Any] = []
        started = threading.Event()

        def slow_send() -> None:
            first.append(_send(slow, rx.port, rate_bps=2e6, on_round=lambda r: None))

        # The slow transfer holds the only slot once its file is open.
        t = threading.Thread(target=slow_send, daemon=True)
        t.start()
        while not transfer_file_open(os.getpid(), out):
            assert t.is_alive(), first
            started.wait(0.005)
        with pytest.raises(SendError) as err:
            _send(fast, rx.port)
        assert err.value.field == "max_sessions" and "busy" in err.value.reason
        t.join(60)
        assert first and first[0].digest_ok
        # The slot is free again once the receiver has ended that session (the sender may
        # hold its report a moment before the receiver's thread lets go of the slot).
        with serving.reported:
            assert serving.reported.wait_for(lambda: len(serving.reports) >= 1, 30)
        assert _send(fast, rx.port).digest_ok
        summary = serving.stop()
    assert summary.served == 2 and summary.turned_away == 1


def test_several_senders_at_once(tmp_path: Path) -> None:
    out = tmp_path / "out"
    out.mkdir()
    files = [tmp_path / f"f{i}.bin" for i in range(4)]
    data = [_payload(f, 200_000) for f in files]
    with Receiver(out, secret=SECRET, limits=LIMITS) as rx:
        serving = _Serving(rx, transfers=4)
        results: list[Any] = []
        threads = [
            threading.Thread(target=lambda f=f: results.append(_send(f, rx.port, rate_bps=20e6)))
            for f in files
        ]
        for t in threads:
            t.start()
        for t in threads:
            t.join(60)
        serving.thread.join(30)  # returns by itself after 4 transfers
        assert not serving.thread.is_alive()
    assert len(results) == 4 and all(r.digest_ok for r in results)
    assert [(out / f.name).read_bytes() for f in files] == data
    assert serving.summary is not None and serving.summary.served == 4


@pytest.mark.parametrize(
    ("target", "fault", "field"),
    [
        (receiver_module, "_unnamed_file", "output"),  # a read-only directory (EROFS)
        (os, "posix_fallocate", "size"),  # a full disk (ENOSPC)
        (os, "link", "output"),  # a file system without hard links (EPERM)
    ],
)
def test_a_file_system_error_fails_that_transfer_only(
    tmp_path: Path, monkeypatch, target: Any, fault: str, field: str
) -> None:
    """Before: an uncaught OSError ended the receiver, whatever --transfers said."""
    out = tmp_path / "out"
    out.mkdir()
    src = tmp_path / "data.bin"
    _payload(src, 50_000)
    real = getattr(target, fault)
    armed = [True]

    def failing(*args: Any, **kwargs: Any) -> Any:
        if armed[0]:
            armed[0] = False
            code = {"_unnamed_file": errno.EROFS, "posix_fallocate": errno.ENOSPC}.get(
                fault, errno.EPERM
            )
            raise OSError(code, os.strerror(code))
        return real(*args, **kwargs)

    monkeypatch.setattr(target, fault, failing)
    with Receiver(out, secret=SECRET, limits=LIMITS) as rx:
        serving = _Serving(rx)
        with pytest.raises(SendError) as err:
            _send(src, rx.port)
        assert err.value.field == field
        assert list(out.iterdir()) == []  # nothing left behind
        assert _send(src, rx.port).digest_ok  # and the receiver still serves
        summary = serving.stop()
    assert summary.failed == 1 and summary.served == 1


def _in_handshake(port: int, source: str = "127.0.0.1") -> socket.socket:
    s = socket.socket()
    s.bind((source, 0))
    s.connect(("127.0.0.1", port))
    s.settimeout(30)
    assert s.recv(5, socket.MSG_WAITALL)  # its CHALLENGE: it is in its handshake
    return s


def _closed(s: socket.socket) -> bool:
    """Whether the receiver closed ``s`` (what it had sent before is read past)."""
    try:
        while s.recv(4096):
            pass
    except ConnectionResetError:
        pass
    except TimeoutError:
        return False
    return True


def test_silent_handshakes_cannot_lock_senders_out(tmp_path: Path) -> None:
    """A full set of handshakes makes room by closing the oldest (a real sender's takes
    milliseconds), and one address cannot hold more than its share: the helper's
    review found 64 idle connections (6.4 a second) locked every sender out."""
    out = tmp_path / "out"
    out.mkdir()
    limits = replace(LIMITS, max_handshakes=3, max_handshakes_per_client=2)
    with Receiver(out, secret=SECRET, limits=limits) as rx:
        serving = _Serving(rx)
        first, second = _in_handshake(rx.port), _in_handshake(rx.port)
        # A third from the same address: over its share, closed at once.
        third = socket.create_connection(("127.0.0.1", rx.port))
        third.settimeout(30)
        assert _closed(third)
        # From another address: admitted (3 of 3).
        other = _in_handshake(rx.port, "127.0.0.2")
        # A real sender from a third address: the oldest handshake makes room.
        src = tmp_path / "data.bin"
        _payload(src, 5_000)
        transport_source = "127.0.0.3"
        report = send_file(
            src,
            "127.0.0.1",
            rx.port,
            secret=SECRET,
            rate_bps=200e6,
            total_timeout_s=30,
            source_address=transport_source,
        )
        assert report.digest_ok
        assert _closed(first)
        for s in (first, second, third, other):
            s.close()
        summary = serving.stop()
    assert summary.served == 1 and summary.turned_away >= 2


def test_stale_partials_are_removed_and_live_ones_kept(tmp_path: Path) -> None:
    stale = tmp_path / ".blastrate-dead.part"
    stale.write_bytes(b"x" * 100)
    live = tmp_path / ".blastrate-live.part"
    live.write_bytes(b"y")
    other = tmp_path / "data.part"
    other.write_bytes(b"z")
    fd = os.open(live, os.O_RDWR)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)  # as a running transfer holds it
        assert remove_stale_partials(tmp_path) == 1
    finally:
        os.close(fd)
    assert not stale.exists() and live.exists() and other.exists()


def test_a_receiver_needs_a_secret_or_insecure(tmp_path: Path) -> None:
    with pytest.raises(ReceiveError) as err:
        Receiver(tmp_path)
    assert err.value.field == "secret"
    with pytest.raises(ReceiveError) as err:
        Receiver(tmp_path, udp_port=9999, secret=SECRET)
    assert err.value.field == "udp_port"
    with pytest.raises(SendError) as serr:
        send_file(tmp_path / "x", "127.0.0.1", 9, rate_bps=None)
    assert serr.value.field == "secret"
