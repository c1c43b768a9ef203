"""What a hostile network does to the receiver and the service, before and after a change.

    .venv/bin/python benchmarks/hostile_network.py [--root PATH] [--runs 3] [flood slow orphans]

``--root`` is the source tree to measure (default: this checkout).  For the code before a
change, check it out beside this one and point there::

    git worktree add /tmp/before d7aba27
    .venv/bin/python benchmarks/hostile_network.py --root /tmp/before     # (as root)

Everything runs on loopback, every flood and connection count is bounded, and the 1-minute
load average is printed beside each figure (measure on a quiet machine).

* ``flood``: a 2 MB ``blastrate send`` at 100 Mbit/s while 75,000 garbage datagrams a
  second (from a process of their own, for 30 s) hit the receiver's data port: rounds and
  transfer time.  Code with a shared secret (``datamover``) gets the flood forged from the
  sender's own data port (a raw socket: root), since a flood from anywhere else never
  reaches its connected data socket; older code gets it from another socket.
* ``slow``: 6,000 idle, half-sent HTTP requests against ``blastrate serve`` with an
  open-file limit of 4,096, and ``/healthz`` from another loopback address every 0.2 s
  for 20 s while they are held.
* ``orphans``: ``kill -9`` of ``blastrate serve`` while a job and a pool solve run; the
  processes of its group still alive 5 s and 30 s later.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import resource
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import httpx

ROOT = Path(__file__).resolve().parents[1]
SECRET = "hostile-network-bench-0123456789"
ENDLESS = {
    "net": {
        "places": {"a": 1, "b": 0},
        "transitions": [
            {"name": "ab", "rate": 1e6, "inputs": {"a": 1}, "outputs": {"b": 1}},
            {"name": "ba", "rate": 1e6, "inputs": {"b": 1}, "outputs": {"a": 1}},
        ],
    },
    "analysis": "transient",
    "times": [1e6],
}
FLOOD = r"""
import os, socket, struct, sys, time
src, dst = int(sys.argv[1]), int(sys.argv[2])
rate, seconds, raw = float(sys.argv[3]), float(sys.argv[4]), sys.argv[5] == "raw"
junk = os.urandom(1500)
if raw:
    s = socket.socket(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_UDP)
    d, target = struct.pack("!HHHH", src, dst, 8 + len(junk), 0) + junk, ("127.0.0.1", 0)
else:
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    d, target = junk, ("127.0.0.1", dst)
t0, n = time.monotonic(), 0
print("go", flush=True)
while time.monotonic() - t0 < seconds:
    for _ in range(64):
        try:
            s.sendto(d, target)
        except OSError:
            pass
        n += 1
    ahead = n / rate - (time.monotonic() - t0)
    if ahead > 0:
        time.sleep(ahead)
"""


def _free(kind: int = socket.SOCK_STREAM) -> int:
    with socket.socket(socket.AF_INET, kind) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _cli(root: Path) -> tuple[list[str], dict[str, str]]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("BLASTRATE_")}
    # The tree measured comes first on the path (run from elsewhere than a checkout, so
    # that the working directory does not shadow it).
    return [sys.executable, "-m", "app.commands"], {**env, "PYTHONPATH": str(root)}


def _load() -> float:
    return round(os.getloadavg()[0], 2)


def flood(root: Path, runs: int) -> dict[str, Any]:
    secure = (root / "datamover").is_dir()
    if secure and os.geteuid() != 0:
        return {"skipped": "forging the sender's port needs a raw socket (root)"}
    cli, env = _cli(root)
    if secure:
        env["BLASTRATE_SECRET"] = SECRET
    rows = []
    for _ in range(runs):
        tmp = Path(tempfile.mkdtemp())
        out = tmp / "out"
        out.mkdir()
        src = tmp / "data.bin"
        src.write_bytes(os.urandom(2_000_000))
        port, dport, sport = _free(), _free(socket.SOCK_DGRAM), _free(socket.SOCK_DGRAM)
        receive = [*cli, "receive", "--port", str(port), "--host", "127.0.0.1", "--output"]
        send = [*cli, "send", str(src), "--to", f"127.0.0.1:{port}", "--rate", "100Mbps"]
        send += ["--json", "--timeout", "60s"]
        if secure:
            receive += [str(out), "--once", "--udp-port", str(dport)]
            send += ["--cport", str(sport)]
            flood_args = [str(sport), str(dport), "75000", "30", "raw"]
        else:
            receive += [str(out), "--wait", "60s"]
            flood_args = ["0", str(port), "75000", "30", "udp"]  # data on the control port
        rx = subprocess.Popen(receive, env=env, cwd=tmp, stdout=subprocess.DEVNULL)
        # A connect-and-close probe would itself end an old receiver: wait on the socket.
        deadline = time.monotonic() + 60
        while not subprocess.run(
            ["ss", "-ltnH", f"sport = :{port}"], capture_output=True, text=True
        ).stdout.strip():
            if time.monotonic() > deadline:
                raise RuntimeError("the receiver did not start")
            time.sleep(0.1)
        fl = subprocess.Popen([sys.executable, "-c", FLOOD, *flood_args], stdout=subprocess.PIPE)
        assert fl.stdout is not None
        fl.stdout.readline()
        done = subprocess.run(send, env=env, cwd=tmp, capture_output=True, text=True, timeout=120)
        fl.kill()
        fl.wait()
        rx.kill()
        rx.wait()
        try:
            report = json.loads(done.stdout)
            rows.append(
                {
                    "rounds": len(report["rounds"]),
                    "transfer_s": round(report["transfer_s"], 3),
                    "missing_per_round": [r["missing_after"] for r in report["rounds"]][:12],
                    "load": _load(),
                }
            )
        except (ValueError, KeyError):
            rows.append({"failed": done.stderr[-200:], "load": _load()})
    return {
        "flood_from": "the sender's own port (forged)" if secure else "another socket",
        "runs": rows,
    }


def _serve(
    root: Path, env_extra: dict[str, str], **popen: Any
) -> tuple[subprocess.Popen[bytes], str]:
    cli, env = _cli(root)
    port = _free()
    env = {**env, "BLASTRATE_WARM_UP": "false", "BLASTRATE_SOLVE_WORKERS": "1", **env_extra}
    server = subprocess.Popen(
        [*cli, "serve", "--port", str(port), "--log-level", "error"],
        env=env,
        cwd=tempfile.gettempdir(),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        **popen,
    )
    base = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        try:
            if httpx.get(base + "/readyz", timeout=2).status_code == 200:
                return server, base
        except httpx.HTTPError:
            pass
        time.sleep(0.1)
    server.kill()
    raise RuntimeError("the service did not start")


def slow(root: Path, runs: int) -> dict[str, Any]:
    def limit() -> None:
        resource.setrlimit(resource.RLIMIT_NOFILE, (4096, 4096))

    server, base = _serve(root, {}, preexec_fn=limit)
    port = int(base.rsplit(":", 1)[1])
    held: list[socket.socket] = []
    try:
        for _ in range(6000):
            try:
                c = socket.create_connection(("127.0.0.1", port), timeout=2)
                c.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\n")  # never the blank line
                held.append(c)
            except OSError:
                break
        ok = failed = 0
        worst = 0.0
        transport = httpx.HTTPTransport(local_address="127.0.0.2")
        t0 = time.monotonic()
        while time.monotonic() - t0 < 20:
            start = time.monotonic()
            try:
                with httpx.Client(transport=transport) as client:
                    status = client.get(base + "/healthz", timeout=5).status_code
                ok += status == 200
                failed += status != 200
            except httpx.HTTPError:
                failed += 1
            worst = max(worst, time.monotonic() - start)
            time.sleep(0.2)
        closed = 0
        for c in held:
            c.setblocking(False)
            try:
                closed += c.recv(1) == b""
            except BlockingIOError:
                pass
            except OSError:
                closed += 1
        return {
            "connections_held": len(held),
            "healthz_ok": ok,
            "healthz_failed": failed,
            "healthz_worst_s": round(worst, 2),
            "closed_by_the_server_within_20_s": closed,
            "load": _load(),
        }
    finally:
        for c in held:
            c.close()
        server.terminate()
        server.wait(30)


def orphans(root: Path, runs: int) -> dict[str, Any]:
    db = Path(tempfile.mkdtemp()) / "jobs.db"
    env = {
        "BLASTRATE_INPROCESS_MAX_STATES": "1",  # the solve goes to the pool
        "BLASTRATE_SOLVE_TIMEOUT_S": "120",
        "BLASTRATE_JOB_TIMEOUT_S": "300",
        "BLASTRATE_DATABASE_URL": f"sqlite:///{db}",
    }
    server, base = _serve(root, env, start_new_session=True)

    def group() -> list[int]:
        found = []
        for entry in Path("/proc").iterdir():
            if entry.name.isdigit():
                try:
                    stat = (entry / "stat").read_text().rsplit(")", 1)[1].split()
                except OSError:
                    continue
                if int(stat[2]) == server.pid and stat[0] != "Z":
                    found.append(int(entry.name))
        return found

    httpx.post(base + "/srn/jobs", json=ENDLESS, timeout=30)

    def solve() -> None:
        with contextlib.suppress(httpx.HTTPError):  # the server is killed under it
            httpx.post(base + "/srn/solve", json=ENDLESS, timeout=60)

    threading.Thread(target=solve, daemon=True).start()
    deadline = time.monotonic() + 60
    while (
        len(group()) < 5 and time.monotonic() < deadline
    ):  # server, fork server, tracker, 2 workers
        time.sleep(0.1)
    running = len(group())
    os.kill(server.pid, signal.SIGKILL)
    server.wait()
    time.sleep(5)
    after_5 = len(group())
    time.sleep(25)
    left = group()
    for pid in left:
        os.kill(pid, signal.SIGKILL)
    return {
        "processes_before_kill": running,
        "alive_5_s_after": after_5,
        "alive_30_s_after": len(left),
        "load": _load(),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--root", type=Path, default=ROOT, help="the source tree to measure")
    ap.add_argument("--runs", type=int, default=3, help="transfers under flood")
    ap.add_argument("what", nargs="*", default=["flood", "slow", "orphans"])
    args = ap.parse_args()
    measures = {"flood": flood, "slow": slow, "orphans": orphans}
    print(json.dumps({"root": str(args.root.resolve()), "load_at_start": _load()}))
    for name in args.what:
        print(json.dumps({name: measures[name](args.root.resolve(), args.runs)}), flush=True)


if __name__ == "__main__":
    main()
