"""``blastrate receive`` as a process of its own, against strangers and hostile peers.

Each test is one row of the hostile-network table of issue #22: what a stranger did to a
receiver that trusted whoever connected, and what happens now.  Everything sends to
127.0.0.1 only, and every loop and flood is bounded in count and time.  The tests wait
on the receiver's own output and on socket states, never on a sleep that guesses how
long something takes.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import os
import queue
import re
import signal
import socket
import struct
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from cli_support import blastrate

from datamover import SendError, send_file

SECRET = "process-test-secret-0123456789"
WAIT_S = 60.0  # longest wait for any one event; generous for a loaded machine


def _free_port(kind: int = socket.SOCK_STREAM) -> int:
    with socket.socket(socket.AF_INET, kind) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _payload(path: Path, size: int, seed: bytes = b"proc") -> bytes:
    data = hashlib.shake_256(seed).digest(size)
    path.write_bytes(data)
    return data


class ReceiverProcess:
    """``blastrate receive --json`` in a child process; its lines read as they come."""

    def __init__(self, out: Path, *args: str, env: dict[str, str] | None = None) -> None:
        self.port = _free_port()
        self.out = out
        self.proc = subprocess.Popen(
            [
                *blastrate(),
                "receive",
                "--host",
                "127.0.0.1",
                "--port",
                str(self.port),
                "--output",
                str(out),
                "--json",
                *args,
            ],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            # The test's secret only where a test passes it: never the user's.
            env={**{k: v for k, v in os.environ.items() if k != "BLASTRATE_SECRET"}, **(env or {})},
        )
        self.stdout: queue.Queue[str] = queue.Queue()
        self.stderr: queue.Queue[str] = queue.Queue()
        self.stderr_seen: list[str] = []
        for stream, sink in ((self.proc.stdout, self.stdout), (self.proc.stderr, self.stderr)):
            threading.Thread(target=self._pump, args=(stream, sink), daemon=True).start()
        self.wait_stderr("blastrate: receiving into")

    @staticmethod
    def _pump(stream: object, sink: queue.Queue[str]) -> None:
        for line in stream:  # type: ignore[attr-defined]
            sink.put(line)
        sink.put("")  # EOF

    def wait_stderr(self, needle: str) -> str:
        """The first stderr line (from now on) that contains ``needle``."""
        while True:
            line = self.stderr.get(timeout=WAIT_S)
            self.stderr_seen.append(line)
            if not line:
                raise AssertionError(f"receiver exited; stderr: {''.join(self.stderr_seen)}")
            if needle in line:
                return line

    def report(self) -> dict[str, object]:
        """The next transfer report (a JSON line on stdout)."""
        line = self.stdout.get(timeout=WAIT_S)
        assert line, f"receiver exited; stderr: {''.join(self.stderr_seen)}"
        return dict(json.loads(line))

    def alive(self) -> bool:
        return self.proc.poll() is None

    def stop(self) -> int:
        if self.alive():
            self.proc.send_signal(signal.SIGTERM)
        return self.proc.wait(WAIT_S)

    def kill(self) -> None:
        if self.alive():
            self.proc.kill()
        self.proc.wait(WAIT_S)


@pytest.fixture
def out(tmp_path: Path) -> Path:
    d = tmp_path / "out"
    d.mkdir()
    return d


@pytest.fixture
def secret_file(tmp_path: Path) -> Path:
    p = tmp_path / "blastrate.key"
    p.write_text(SECRET + "\n")
    p.chmod(0o600)
    return p


@pytest.fixture
def receiver(out: Path, secret_file: Path) -> Iterator[ReceiverProcess]:
    rx = ReceiverProcess(out, "--secret-file", str(secret_file))
    try:
        yield rx
    finally:
        rx.kill()


def _send(src: Path, port: int, secret: str = SECRET, **kwargs: object):
    return send_file(
        src,
        "127.0.0.1",
        port,
        secret=secret.encode(),
        rate_bps=kwargs.pop("rate_bps", 200e6),  # type: ignore[arg-type]
        total_timeout_s=30,
        control_timeout_s=30,
        **kwargs,  # type: ignore[arg-type]
    )


def transfer_file_open(pid: int, out: Path) -> bool:
    """Whether process ``pid`` has a transfer's file in ``out`` open (unnamed, or a
    ``.blastrate-*.part``): the transfer is under way."""
    for fd in Path(f"/proc/{pid}/fd").iterdir():
        try:
            target = os.readlink(fd)
        except OSError:
            continue
        if target.startswith(str(out) + "/") and ("(deleted)" in target or ".part" in target):
            return True
    return False


def _frame(kind: int, body: bytes) -> bytes:
    return struct.pack("!BI", kind, len(body)) + body


def _read_frame(sock: socket.socket) -> tuple[int, bytes]:
    head = b""
    while len(head) < 5:
        chunk = sock.recv(5 - len(head))
        if not chunk:
            raise EOFError
        head += chunk
    kind, length = struct.unpack("!BI", head)
    body = b""
    while len(body) < length:
        chunk = sock.recv(length - len(body))
        if not chunk:
            raise EOFError
        body += chunk
    return kind, body


def test_a_stranger_cannot_write_and_the_receiver_keeps_serving(
    tmp_path: Path, receiver: ReceiverProcess, out: Path
) -> None:
    """Before: a stranger's ``.bashrc`` was stored.  Now its handshake fails, nothing is
    written, and the next sender with the secret is served."""
    src = tmp_path / ".bashrc"
    _payload(src, 5_000)
    with pytest.raises(SendError) as err:
        _send(src, receiver.port, secret="not-the-secret-0123456789")
    assert err.value.field == "secret"
    assert "authentication failed" in receiver.wait_stderr("failed")
    assert list(out.iterdir()) == []
    good = tmp_path / "data.bin"
    data = _payload(good, 40_000)
    assert _send(good, receiver.port).digest_ok
    assert receiver.report()["size"] == 40_000
    assert (out / "data.bin").read_bytes() == data
    assert receiver.alive()
    assert receiver.stop() == 0


def test_a_receiver_without_a_secret_makes_one_and_prints_it_once(
    tmp_path: Path, out: Path
) -> None:
    rx = ReceiverProcess(out, "--once")
    try:
        shown = "".join(rx.stderr_seen)
        match = re.search(r"^\s{4}(\S{40,})$", shown, re.MULTILINE)
        assert match, shown
        made = match.group(1)
        # The command as this receiver was run, to the address it was bound to.
        command = re.search(
            rf"BLASTRATE_SECRET='{re.escape(made)}' (\S*blastrate) send FILE "
            rf"--to 127\.0\.0\.1:{rx.port}",
            shown,
        )
        assert command, shown
        src = tmp_path / "data.bin"
        _payload(src, 10_000)
        with pytest.raises(SendError) as err:
            _send(src, rx.port)  # the test's usual secret: not this receiver's
        assert err.value.field == "secret"
        assert _send(src, rx.port, secret=made).digest_ok
        assert rx.proc.wait(WAIT_S) == 0  # --once: done after the first complete transfer
    finally:
        rx.kill()


def test_connecting_and_closing_does_not_end_a_once_receiver(
    tmp_path: Path, out: Path, secret_file: Path
) -> None:
    """Before: with the default ``--transfers 1``, a connect-and-close ended the
    receiver with status 1.  A refused or abandoned transfer never counts as served."""
    rx = ReceiverProcess(out, "--secret-file", str(secret_file), "--once")
    try:
        for _ in range(3):
            with socket.create_connection(("127.0.0.1", rx.port), timeout=WAIT_S):
                pass
            rx.wait_stderr("failed")
        assert rx.alive()
        src = tmp_path / "data.bin"
        _payload(src, 10_000)
        assert _send(src, rx.port).digest_ok
        assert rx.proc.wait(WAIT_S) == 0
    finally:
        rx.kill()


@pytest.mark.parametrize(
    ("args", "said"), [(["--transfers", "2"], "; 2 transfers"), (["--once"], "; one transfer")]
)
def test_the_receiver_says_how_many_transfers_it_serves(
    out: Path, secret_file: Path, args: list[str], said: str
) -> None:
    # Before: with --transfers 2 it said "until stopped (Ctrl-C)", and exited after two.
    rx = ReceiverProcess(out, "--secret-file", str(secret_file), *args)
    try:
        assert any(said in line for line in rx.stderr_seen)
    finally:
        rx.kill()


def test_a_silent_peer_blocks_no_one(tmp_path: Path, receiver: ReceiverProcess) -> None:
    """Before: a connection that sent nothing held every other sender for 60 s.  Now
    each connection has its own thread: a sender is served while the silent one is
    still waiting in its handshake (it is dropped after ``handshake_timeout_s``)."""
    silent = socket.create_connection(("127.0.0.1", receiver.port), timeout=WAIT_S)
    try:
        kind, _ = _read_frame(silent)  # the receiver's CHALLENGE: it is waiting on us
        assert kind == 7
        src = tmp_path / "data.bin"
        _payload(src, 30_000)
        assert _send(src, receiver.port).digest_ok
        # The silent connection is still open: it was not served first, then closed.
        silent.setblocking(False)
        with pytest.raises(BlockingIOError):
            silent.recv(1)
    finally:
        silent.close()


def test_a_huge_hello_from_a_stranger_reserves_nothing(
    receiver: ReceiverProcess, out: Path
) -> None:
    """Before: one 169-byte HELLO announcing 1 GiB reserved 1 GiB on disk and 2.6 GB of
    memory.  Now a HELLO before the handshake is a protocol error, and no disk, memory
    or transfer slot is taken for a peer that has not proved who it is."""
    free_before = os.statvfs(out).f_bavail
    hello = json.dumps(
        {
            "version": 2,
            "name": "big.bin",
            "size": 2**30,
            "payload_bytes": 1468,
            "sha256": "0" * 64,
            "udp_port": 9,
        }
    ).encode()
    for _ in range(3):
        with socket.create_connection(("127.0.0.1", receiver.port), timeout=WAIT_S) as s:
            assert _read_frame(s)[0] == 7  # CHALLENGE
            s.sendall(_frame(1, hello))
            s.sendall(_frame(3, b'{"round":1,"sent":1}'))
            with pytest.raises((EOFError, ConnectionResetError)):
                while True:
                    _read_frame(s)
        receiver.wait_stderr("failed")
    assert list(out.iterdir()) == []
    # A reservation would take 1 GiB per HELLO; other test workers share the file system
    # and write a few MB meanwhile (2.6 MB once, on CI), so the bound is 256 MiB.
    assert os.statvfs(out).f_bavail >= free_before - 2**28 // os.statvfs(out).f_frsize
    rss_kib = int(
        re.search(r"VmRSS:\s+(\d+)", Path(f"/proc/{receiver.proc.pid}/status").read_text()).group(1)  # type: ignore[union-attr]
    )
    assert rss_kib < 400_000  # the interpreter and its libraries; not the announced GiB
    assert receiver.alive()


def test_a_file_that_appears_during_the_transfer_is_never_replaced(
    tmp_path: Path, receiver: ReceiverProcess, out: Path
) -> None:
    """Before: ``report.txt`` created in the directory during a transfer to that name
    was replaced at the end, without ``--overwrite``."""
    src = tmp_path / "report.txt"
    _payload(src, 200_000)
    result: list[object] = []

    def send() -> None:
        try:
            result.append(_send(src, receiver.port, rate_bps=4e6, emulate_delay_s=0.2))
        except SendError as exc:
            result.append(exc)

    t = threading.Thread(target=send, daemon=True)
    t.start()
    # The transfer is under way once the receiver has its file open.
    pause = threading.Event()
    while not transfer_file_open(receiver.proc.pid, out):
        assert t.is_alive(), result
        pause.wait(0.005)
    (out / "report.txt").write_text("written by someone else\n")
    t.join(WAIT_S)
    (outcome,) = result
    assert isinstance(outcome, SendError) and outcome.field == "name"
    assert "appeared" in outcome.reason
    assert (out / "report.txt").read_text() == "written by someone else\n"
    assert sorted(p.name for p in out.iterdir()) == ["report.txt"]  # no partial left
    assert receiver.alive()


def test_overwrite_onto_a_directory_fails_that_transfer_only(
    tmp_path: Path, out: Path, secret_file: Path
) -> None:
    """Before: with ``--overwrite``, a sender naming an existing subdirectory ended the
    receiver with an uncaught ``OSError``."""
    (out / "sub").mkdir()
    rx = ReceiverProcess(out, "--secret-file", str(secret_file), "--overwrite")
    try:
        src = tmp_path / "data.bin"
        _payload(src, 10_000)
        with pytest.raises(SendError) as err:
            _send(src, rx.port, name="sub")
        assert err.value.field == "name" and "directory" in err.value.reason
        assert (out / "sub").is_dir()
        assert _send(src, rx.port).digest_ok
        assert rx.alive()
    finally:
        rx.kill()


def test_a_killed_receiver_leaves_nothing_and_old_partials_are_removed(
    tmp_path: Path, out: Path, secret_file: Path
) -> None:
    """Before: a killed receiver left its partial file for good.  Now the file of a
    transfer has no name until it is verified (O_TMPFILE), so kill -9 leaves nothing;
    on a file system without unnamed files the .blastrate-*.part of a dead receiver is
    removed when the next one starts (planted here, as such a file system would leave
    it)."""
    first = ReceiverProcess(out, "--secret-file", str(secret_file))
    src = tmp_path / "slow.bin"
    _payload(src, 400_000)

    def doomed() -> None:
        with pytest.raises(SendError):
            _send(src, first.port, rate_bps=1e6)

    t = threading.Thread(target=doomed, daemon=True)
    t.start()
    pause = threading.Event()
    while not transfer_file_open(first.proc.pid, out):
        assert first.alive()
        pause.wait(0.005)
    first.proc.kill()  # kill -9: no chance to clean up
    first.proc.wait(WAIT_S)
    t.join(WAIT_S)
    assert list(out.iterdir()) == []
    (out / ".blastrate-0123456789abcdef.part").write_bytes(b"left by a dead receiver")
    second = ReceiverProcess(out, "--secret-file", str(secret_file))
    try:
        assert "removed 1 stale partial file" in "".join(second.stderr_seen)
        assert list(out.iterdir()) == []
    finally:
        second.kill()


_FLOOD = """
import os, socket, struct, sys, time
src, dst, rate, seconds = int(sys.argv[1]), int(sys.argv[2]), float(sys.argv[3]), float(sys.argv[4])
s = socket.socket(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_UDP)
junk = os.urandom(1500)
d = struct.pack("!HHHH", src, dst, 8 + len(junk), 0) + junk
t0 = time.monotonic()
n = 0
print("flooding", flush=True)
while time.monotonic() - t0 < seconds and n < rate * seconds:
    for _ in range(64):
        try:
            s.sendto(d, ("127.0.0.1", 0))
        except OSError:
            pass
        n += 1
    ahead = n / rate - (time.monotonic() - t0)
    if ahead > 0:
        time.sleep(ahead)
"""


@pytest.mark.skipif(os.geteuid() != 0, reason="forging a UDP source port needs root")
def test_a_flooded_transfer_makes_progress_round_after_round(
    tmp_path: Path, out: Path, secret_file: Path
) -> None:
    """Before: 75,000 garbage datagrams a second during a transfer: 11 rounds, 19 s, no
    progress while the flood ran.  Now the same flood, forged to come from the sender's
    own data port (a flood from anywhere else never reaches the connected data socket):
    the rounds shrink what is missing, and the floods' datagrams are counted."""
    sport, dport = _free_port(socket.SOCK_DGRAM), _free_port(socket.SOCK_DGRAM)
    rx = ReceiverProcess(out, "--secret-file", str(secret_file), "--udp-port", str(dport))
    flood = subprocess.Popen(
        [sys.executable, "-c", _FLOOD, str(sport), str(dport), "75000", "30"],
        stdout=subprocess.PIPE,
    )
    try:
        assert flood.stdout is not None and flood.stdout.readline() == b"flooding\n"
        src = tmp_path / "data.bin"
        data = _payload(src, 2_000_000)
        sent = subprocess.run(
            [
                *blastrate(),
                "send",
                str(src),
                "--to",
                f"127.0.0.1:{rx.port}",
                "--rate",
                "100Mbps",
                "--cport",
                str(sport),
                "--secret-file",
                str(secret_file),
                "--timeout",
                "60s",
                "--json",
            ],
            capture_output=True,
            text=True,
            timeout=120,
        )
        still_flooding = flood.poll() is None
        assert sent.returncode == 0, sent.stderr
        report = json.loads(sent.stdout)
        received = rx.report()
    finally:
        flood.kill()
        flood.wait(WAIT_S)
        rx.kill()
    assert still_flooding  # the flood lasted the whole transfer
    assert (out / "data.bin").read_bytes() == data
    missing = [r["missing_after"] for r in report["rounds"]]
    # What is missing never grows, and no two rounds in a row leave it as it was (before:
    # no progress while the flood ran, 11 rounds).  A round without progress happens on
    # a starved receiver: a strict shrink in every round failed once in CI ([198, 15, 15,
    # 7, 0], four test workers on two cores beside the flood), and "at most one such
    # round" failed once in a full local run at load 4 ([1252, 975, 641, 469, 276, 245,
    # ...], two).  How many rounds it takes depends on how starved: 2 or 3 on a quiet
    # machine, 9 once in CI ([522, 303, 128, 24, 18, 13, ...]) and 13 in another, shrinking
    # every round ([1080, 975, 692, 490, 457, 341, ...]): the count of rounds is not
    # bounded here, progress in them is.
    pairs = list(zip([report["packets"], *missing], missing, strict=False))
    assert all(b <= a for a, b in pairs), missing
    stalled = [b == a for a, b in pairs]
    assert not any(x and y for x, y in itertools.pairwise(stalled)), missing
    assert sum(stalled) <= max(1, len(missing) // 4), missing
    assert received["rejected"] > 1_000


def _threads_and_descriptors(pid: int) -> tuple[int, int]:
    status = Path(f"/proc/{pid}/status").read_text()
    threads = int(
        next(line.split()[1] for line in status.splitlines() if line.startswith("Threads:"))
    )
    return threads, len(os.listdir(f"/proc/{pid}/fd"))


@pytest.mark.long
def test_a_flood_of_idle_handshakes_from_many_addresses_holds_the_cap(
    tmp_path: Path, receiver: ReceiverProcess
) -> None:
    """Before (issue #36): idle handshakes from 5,000-18,000 loopback addresses took the
    receiver to 1,779 threads and 1,767 descriptors in 5 s, 27 times the cap of 64.  Now
    an evicted handshake leaves the pending set at once and the handshake threads are
    capped at twice ``max_handshakes``: threads and descriptors stay bounded whatever
    the number of addresses, and a sender with the secret still gets through."""
    import resource

    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    want = min(hard, 8192)
    if soft < want:
        resource.setrlimit(resource.RLIMIT_NOFILE, (want, hard))
    cap = 64  # ReceiverLimits.max_handshakes, blastrate receive's default
    base_threads, base_fds = _threads_and_descriptors(receiver.proc.pid)
    stop = threading.Event()
    opened = [0]
    peak = [0, 0]
    lock = threading.Lock()

    def flood(worker: int) -> None:
        # Idle connections from 127.<worker+1>.x.y, each a new address; bounded in count
        # (1,200 per worker) and in time (until stop).
        held: list[socket.socket] = []
        try:
            for i in range(1200):
                if stop.is_set():
                    break
                s = socket.socket()
                s.settimeout(5)
                try:
                    s.bind((f"127.{worker + 1}.{i // 250}.{i % 250 + 1}", 0))
                    s.connect(("127.0.0.1", receiver.port))
                except OSError:
                    s.close()
                    continue
                held.append(s)
                with lock:
                    opened[0] += 1
        finally:
            stop.wait(WAIT_S)  # hold them until the test is done looking
            for s in held:
                s.close()

    def watch() -> None:
        while not stop.is_set():
            try:
                threads, fds = _threads_and_descriptors(receiver.proc.pid)
            except (OSError, StopIteration):
                return
            peak[0], peak[1] = max(peak[0], threads), max(peak[1], fds)
            stop.wait(0.005)

    workers = [threading.Thread(target=flood, args=(w,), daemon=True) for w in range(3)]
    watcher = threading.Thread(target=watch, daemon=True)
    watcher.start()
    for w in workers:
        w.start()
    src = tmp_path / "data.bin"
    _payload(src, 30_000)
    try:
        # A sender with the secret, in the middle of the flood.
        while opened[0] < 1000 and any(w.is_alive() for w in workers):
            stop.wait(0.01)
        # Each send retries for 3 s; on a CI host with 4 test workers on 2 cores the
        # receiver's side of a handshake (its scrypt) can outlast the 0.5 s grace, so the
        # sender may be turned away in one window (seen once in CI).  Three windows.
        for attempt in range(3):
            try:
                report = _send(src, receiver.port)
                break
            except SendError as exc:
                if exc.field != "connection" or attempt == 2:
                    raise
        while opened[0] < 3000 and any(w.is_alive() for w in workers):
            stop.wait(0.01)
    finally:
        stop.set()
        for w in workers:
            w.join(WAIT_S)
        watcher.join(WAIT_S)
    assert report.digest_ok
    assert opened[0] >= 2000, f"the flood opened only {opened[0]} connections"
    # Twice the cap of handshake threads, plus the receiver's own (main, advisor, keeper,
    # the transfer); descriptors likewise, plus the listener, the data socket and files.
    assert peak[0] <= base_threads + 2 * cap + 4, peak
    assert peak[1] <= base_fds + 2 * cap + 8, peak
    assert receiver.alive()
