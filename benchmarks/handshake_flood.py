"""Idle handshakes from thousands of loopback addresses against ``blastrate receive``.

    .venv/bin/python benchmarks/handshake_flood.py [--workers 3] [--per-worker 1500]

Starts the installed receiver (``--secret-file``, loopback only), then ``--workers``
threads each open ``--per-worker`` idle TCP connections to it, every one from a new source
address in 127.<w>.x.y, as fast as they can, and hold them.  Meanwhile a sender with the
secret sends a 30 kB file.  Printed: the receiver's peak threads and open descriptors
(``/proc/PID/status``, ``/proc/PID/fd``, sampled every 5 ms), the connections opened per
second, and the sender's handshake time and result.  Bounded: connections by count, the
whole run by ``--seconds``; everything is closed and the receiver stopped at the end.
"""

from __future__ import annotations

import argparse
import os
import resource
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from datamover import SendError, send_file

BLASTRATE = str(Path(sys.executable).with_name("blastrate"))
SECRET = "handshake-flood-benchmark-secret-0123"


def _counts(pid: int) -> tuple[int, int]:
    status = Path(f"/proc/{pid}/status").read_text()
    (threads,) = (int(line.split()[1]) for line in status.splitlines() if line[:8] == "Threads:")
    return threads, len(os.listdir(f"/proc/{pid}/fd"))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--workers", type=int, default=3)
    ap.add_argument("--per-worker", type=int, default=1500)
    ap.add_argument("--seconds", type=float, default=20.0)
    args = ap.parse_args()
    _, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (min(hard, 65536), hard))
    work = Path(tempfile.mkdtemp(prefix="blastrate-flood-"))
    key = work / "key"
    key.write_text(SECRET)
    key.chmod(0o600)
    out = work / "out"
    out.mkdir()
    src = work / "f.bin"
    src.write_bytes(os.urandom(30_000))
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = int(s.getsockname()[1])
    env = {**os.environ, "BLASTRATE_NO_CALIBRATE": "1"}
    rx = subprocess.Popen(
        [
            *(BLASTRATE, "receive", "--host", "127.0.0.1", "--port", str(port)),
            *("--output", str(out), "--secret-file", str(key), "--overwrite"),
        ],
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    assert rx.stderr is not None
    rx.stderr.readline()  # "receiving into": it listens
    failures = [0]

    def drain() -> None:
        # Every refused handshake is a line on stderr: read them, or the receiver blocks.
        assert rx.stderr is not None
        for line in rx.stderr:
            failures[0] += "failed" in line

    threading.Thread(target=drain, daemon=True).start()
    print(f"# load before {os.getloadavg()}")
    base = _counts(rx.pid)
    stop = threading.Event()
    opened = [0]
    peak = list(base)
    deadline = time.monotonic() + args.seconds

    def flood(worker: int) -> None:
        held = []
        try:
            for i in range(args.per_worker):
                if stop.is_set() or time.monotonic() > deadline:
                    break
                s = socket.socket()
                s.settimeout(5)
                try:
                    s.bind((f"127.{worker + 1}.{i // 250}.{i % 250 + 1}", 0))
                    s.connect(("127.0.0.1", port))
                except OSError:
                    s.close()
                    continue
                held.append(s)
                opened[0] += 1
            stop.wait(max(0.0, deadline - time.monotonic()))
        finally:
            for s in held:
                s.close()

    def watch() -> None:
        while not stop.is_set():
            try:
                t, f = _counts(rx.pid)
            except (OSError, ValueError):
                return
            peak[0], peak[1] = max(peak[0], t), max(peak[1], f)
            time.sleep(0.005)

    watcher = threading.Thread(target=watch, daemon=True)
    watcher.start()
    started = time.monotonic()
    workers = [threading.Thread(target=flood, args=(w,)) for w in range(args.workers)]
    for w in workers:
        w.start()
    while opened[0] < args.workers * args.per_worker // 3 and time.monotonic() < deadline:
        time.sleep(0.01)
    result = "ok"
    handshake = float("nan")
    try:
        rep = send_file(
            src, "127.0.0.1", port, rate_bps=100e6, secret=SECRET.encode(), total_timeout_s=30
        )
        handshake = rep.handshake_s
        result = "digest ok" if rep.digest_ok else "digest MISMATCH"
    except SendError as exc:
        result = f"failed: {exc}"
    flood_s = time.monotonic() - started
    stop.set()
    for w in workers:
        w.join(60)
    watcher.join(10)
    rx.send_signal(signal.SIGTERM)
    stopping = time.monotonic()
    try:
        rx.wait(60)
        stopped = f"stopped {time.monotonic() - stopping:.1f} s after SIGTERM"
    except subprocess.TimeoutExpired:
        rx.kill()
        rx.wait(30)
        stopped = "did not stop within 60 s of SIGTERM (killed)"
    print(
        f"flood: {opened[0]} idle connections from {opened[0]} addresses in {flood_s:.1f} s "
        f"({opened[0] / flood_s:.0f}/s)\n"
        f"receiver threads: {base[0]} before, peak {peak[0]}; descriptors: {base[1]} before, "
        f"peak {peak[1]} (max_handshakes 64)\n"
        f"a sender with the secret during the flood: {result}, handshake {handshake:.3f} s\n"
        f"the receiver reported {failures[0]} failed handshakes and {stopped}\n"
        f"# load after {os.getloadavg()}"
    )
    shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
