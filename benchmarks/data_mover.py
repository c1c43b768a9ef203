"""The data mover at the machine's limit, as users run it, with iperf3 beside it.

    sudo .venv/bin/python benchmarks/data_mover.py [--blocks 5] [--size 200MB] \
        [--json docs/results/data_mover.json] [--compare-tree CHECKOUT]

Every case runs the installed command line: ``blastrate receive --once`` pinned to CPU 0,
``blastrate send`` pinned to CPU 1, authenticated with a secret in the environment, a
file of ``--size`` random bytes, ``--json`` reports.  In each block the cases run once
each in a shuffled order, so that a drift of the machine's speed touches them all alike:

* ``iperf3``: ``iperf3 -u -b 0 -l 1472`` over loopback, 2 s; what its server (the
  receiver, CPU 0) took in;
* ``max``: ``send --rate max`` over loopback, UDP GSO and GRO on (the default); goodput =
  file bits / ``transfer_s`` (first datagram to "nothing missing"), the file intact;
* ``max, --rcvbuf 4MiB``: the same with a 4 MiB receive buffer;
* ``max, no GSO/GRO``: the same with ``send --no-gso`` and ``receive --no-gro`` (one
  datagram per system call, as on a kernel without them);
* ``5G``: ``send --rate 5G`` over loopback: the first blast's achieved rate against 5 Gbit/s;
* ``1G veth``: ``send --rate 1G`` over a veth pair between two namespaces made here, a tbf
  line of 1 Gbit/s of payload on the sender's end and RPS to CPU 0
  (``benchmarks/veth_link.py``): the first blast's rate and loss, with the kernel's
  default receive buffer and with ``receive --rcvbuf 4MiB``; and once with the
  receiver not pinned, as users start it, which lets it hash the file on the other core
  while it arrives (its report's ``hashed_ahead``).  Without root, ``ip`` or ``tc``
  these cases are skipped and the report says why;
* ``500M veth``: ``send --rate 500M`` over the same line, the default buffer: how close
  the pacer comes to a rate below the line, where the receiver may keep up.

``--compare-tree CHECKOUT`` adds the ``max``, ``1G veth`` and ``500M veth`` cases run by another
checkout's modules (``PYTHONPATH``; e.g. ``git worktree add /tmp/before HEAD~1``), in
the same shuffled blocks: a before-and-after of a change on the same machine state.

Ratios are geometric means over blocks of per-block ratios (both figures of a ratio come
from the same block), with a 95 % interval that resamples blocks (4,000 resamples).  The
1-minute load average is printed before and after; run it on a quiet machine.

``--paths`` prints instead what one datagram costs on the receive path's three forms
(the array form over a coalesced batch, the small-batch form, and one datagram at a
time) at batch sizes 1-43,
and the tag's cost in each MAC considered (keyed BLAKE2b in hashlib, AES-GCM through
``cryptography``): the measurements behind ``datamover.receive_path.ARRAY_MIN_SEGMENTS``
and the wire format's choice of AES-GCM.

Bounded: every command is killed after 120 s, iperf3 runs 2 s, each transfer sends one
file; traffic goes only to 127.0.0.1 and to the namespaces made here.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from veth_link import RX_NS, TX_NS, Link

from app.schemas.units import parse_size
from datamover import new_secret

BLASTRATE = str(Path(sys.executable).parent / "blastrate")
TIMEOUT_S = 120.0
RX_CPU, TX_CPU = 0, 1


def _pinned(cpu: int | str, argv: list[str], netns: str | None = None) -> list[str]:
    head = ["ip", "netns", "exec", netns] if netns else []
    return [*head, "taskset", "-c", str(cpu), *argv]


def _transfer(
    path: Path,
    out: Path,
    env: dict[str, str],
    send: list[str],
    receive: list[str],
    host: str = "127.0.0.1",
    rx_ns: str | None = None,
    tx_ns: str | None = None,
    rx_cpus: str = str(RX_CPU),
) -> dict[str, Any]:
    port = random.randint(20_000, 60_000)
    rx = subprocess.Popen(
        _pinned(
            rx_cpus,
            [
                BLASTRATE,
                "receive",
                "--once",
                "--json",
                "--no-calibrate",
                "--overwrite",
                "--host",
                host,
                "--port",
                str(port),
                "--output",
                str(out),
                *receive,
            ],
            rx_ns,
        ),
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert rx.stderr is not None
        deadline = time.monotonic() + TIMEOUT_S
        for line in rx.stderr:  # "receiving into ..." once it listens
            if "receiving into" in line or time.monotonic() > deadline:
                break
        done = subprocess.run(
            _pinned(
                TX_CPU,
                [BLASTRATE, "send", str(path), "--to", f"{host}:{port}", "--json", *send],
                tx_ns,
            ),
            env=env,
            capture_output=True,
            text=True,
            timeout=TIMEOUT_S,
            check=False,
        )
        if done.returncode != 0:
            raise RuntimeError(f"send failed: {done.stderr.strip()[-400:]}")
        report = json.loads(done.stdout)
        rx_out, _ = rx.communicate(timeout=TIMEOUT_S)
        received = json.loads(rx_out.strip().splitlines()[-1])
    finally:
        if rx.poll() is None:
            rx.kill()
            rx.wait()
    if not report["digest_ok"]:
        raise RuntimeError("the file arrived damaged")
    first = report["rounds"][0]
    return {
        "goodput_bps": 8.0 * report["size"] / report["transfer_s"],
        "transfer_s": report["transfer_s"],
        "total_s": report["total_s"],
        "rounds": len(report["rounds"]),
        "first_blast_bps": first["achieved_rate_bps"],
        "first_loss": first["loss"],
        "gso": report["gso"],
        "batch_packets": report["batch_packets"],
        "gro": received["gro"],
        "reads": received["reads"],
        "accepted": received["accepted"],
        "hashed_ahead": received.get("hashed_ahead", 0),
    }


def _iperf3(
    netns_rx: str | None = None,
    netns_tx: str | None = None,
    host: str = "127.0.0.1",
    bitrate: str = "0",
) -> dict[str, Any]:
    port = random.randint(20_000, 60_000)
    server = subprocess.Popen(
        _pinned(RX_CPU, ["iperf3", "-s", "-1", "--json", "-p", str(port), "-B", host], netns_rx),
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    try:
        # Wait until it listens (a probe connection would be taken as the one test).
        listen = ["ss", "-Hltn", f"sport = :{port}"]
        if netns_rx:
            listen = ["ip", "netns", "exec", netns_rx, *listen]
        deadline = time.monotonic() + 10.0
        while not subprocess.run(listen, capture_output=True, text=True, check=False).stdout:
            if time.monotonic() > deadline:
                raise RuntimeError("iperf3's server did not listen within 10 s")
            time.sleep(0.02)
        client = subprocess.run(
            _pinned(
                TX_CPU,
                [
                    *("iperf3", "-c", host, "-p", str(port), "-u", "-b", bitrate),
                    *("-l", "1472", "-t", "2", "--json"),
                ],
                netns_tx,
            ),
            capture_output=True,
            text=True,
            timeout=TIMEOUT_S,
            check=False,
        )
        if client.returncode != 0:
            raise RuntimeError(f"iperf3 failed: {client.stdout[-300:]}")
        out, _ = server.communicate(timeout=TIMEOUT_S)
    finally:
        if server.poll() is None:
            server.kill()
            server.wait()
    got = json.loads(out)["end"]["sum_received"]
    return {"received_bps": got["bits_per_second"], "lost_fraction": got["lost_percent"] / 100}


def _geo_interval(ratios: np.ndarray, resamples: int = 4000) -> tuple[float, float, float]:
    rng = np.random.default_rng(38)
    logs = np.log(ratios)
    draws = [np.exp(rng.choice(logs, logs.size).mean()) for _ in range(resamples)]
    return (
        float(np.exp(logs.mean())),
        float(np.quantile(draws, 0.025)),
        float(np.quantile(draws, 0.975)),
    )


def _paths(repeats: int = 3000) -> None:
    """Microseconds per datagram of the receive path's two forms, and of two MACs."""
    import hashlib
    import socket

    from cryptography.hazmat.primitives.ciphers.aead import AESGCM

    from datamover import DatagramCodec
    from datamover.receive_path import ReceivePath
    from datamover.wire import DEFAULT_PAYLOAD_BYTES

    size = DEFAULT_PAYLOAD_BYTES * 50_000
    codec = DatagramCodec(5, os.urandom(32), size, DEFAULT_PAYLOAD_BYTES)
    source = np.frombuffer(os.urandom(size), np.uint8)
    a, _peer = socket.socketpair(socket.AF_UNIX, socket.SOCK_DGRAM)
    store = os.open(tempfile.gettempdir(), os.O_TMPFILE | os.O_RDWR, 0o600)
    path = ReceivePath(a, codec, store)
    m = codec.datagram_bytes
    print(
        "datagrams per read | array form (us/datagram) | small-batch form (us/datagram) "
        "| one at a time (us/datagram)"
    )
    for n in (1, 2, 4, 8, 12, 16, 24, 32, 43):
        rows = path._bytes[: n * m].reshape(n, m)
        codec.encode_full(np.arange(n, dtype=np.int64), 1, source, rows)
        start = time.perf_counter()
        for _ in range(repeats):
            path._take(rows)
            path.forget()
        array = (time.perf_counter() - start) / repeats / n
        start = time.perf_counter()
        for _ in range(repeats):
            path._few(n * m, m)
            path.forget()
        few = (time.perf_counter() - start) / repeats / n
        start = time.perf_counter()
        for _ in range(repeats):
            for j in range(n):
                path._one((j + 1) * m, j * m)
            path.forget()
        single = (time.perf_counter() - start) / repeats / n
        print(f"{n:18d} | {array * 1e6:24.2f} | {few * 1e6:30.2f} | {single * 1e6:27.2f}")
    datagram = os.urandom(m - 16)
    key = os.urandom(32)
    aead = AESGCM(key)
    nonce = bytes(12)
    for name, tag in (
        (
            "keyed BLAKE2b (hashlib)",
            lambda: hashlib.blake2b(datagram, key=key, digest_size=16).digest(),
        ),
        ("AES-256-GCM, no plaintext (cryptography)", lambda: aead.encrypt(nonce, b"", datagram)),
    ):
        start = time.perf_counter()
        for _ in range(20 * repeats):
            tag()
        cost = (time.perf_counter() - start) / (20 * repeats)
        print(f"{name}: {cost * 1e6:.2f} us per {m - 16}-byte datagram")
    os.close(store)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--blocks", type=int, default=5)
    parser.add_argument("--size", default="200MB")
    parser.add_argument("--json", type=Path, default=None)
    parser.add_argument("--paths", action="store_true", help="the receive path's forms and MACs")
    parser.add_argument(
        "--compare-tree",
        type=Path,
        default=None,
        help="a checkout of another commit: its max and veth cases run in the same blocks",
    )
    args = parser.parse_args()
    if args.paths:
        _paths()
        return
    if not 1 <= args.blocks <= 20:
        parser.error("--blocks must lie in [1, 20]")
    size = parse_size(args.size, "--size")
    if shutil.which("iperf3") is None:
        sys.exit("needs iperf3 (Debian: apt-get install iperf3)")
    env = {**os.environ, "BLASTRATE_SECRET": new_secret(), "BLASTRATE_NO_CALIBRATE": "1"}
    load_before = os.getloadavg()[0]
    rows: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory() as tmp, Link("veth", 1e9, rx_cpu=RX_CPU) as link:
        path = Path(tmp) / "payload.bin"
        with path.open("wb") as f:
            f.write(np.random.default_rng(1).bytes(size))
        out = Path(tmp) / "in"
        out.mkdir()
        veth = link.kind == "veth"
        cases: dict[str, Any] = {
            "iperf3": lambda: _iperf3(),
            "max": lambda: _transfer(path, out, env, ["--rate", "max"], []),
            "max, no GSO/GRO": lambda: _transfer(
                path, out, env, ["--rate", "max", "--no-gso"], ["--no-gro"]
            ),
            "max, --rcvbuf 4MiB": lambda: _transfer(
                path, out, env, ["--rate", "max"], ["--rcvbuf", "4MiB"]
            ),
            "5G": lambda: _transfer(path, out, env, ["--rate", "5G"], []),
        }

        def at_1g(
            env: dict[str, str],
            receive: list[str],
            rx_cpus: str = str(RX_CPU),
            rate: str = "1G",
        ) -> dict[str, Any]:
            # send --rate 1G (or `rate`) over the veth pair and its tbf line.
            return _transfer(
                path,
                out,
                env,
                ["--rate", rate],
                receive,
                host=link.address,
                rx_ns=RX_NS,
                tx_ns=TX_NS,
                rx_cpus=rx_cpus,
            )

        if veth:
            cases["1G veth"] = lambda: at_1g(env, [])
            cases["1G veth, --rcvbuf 4MiB"] = lambda: at_1g(env, ["--rcvbuf", "4MiB"])
            # As users start it: on any CPU, so that the file's digest can be computed
            # on the other core while the file arrives (datamover.running_digest).
            anywhere = ",".join(map(str, sorted(os.sched_getaffinity(0))))
            cases["1G veth, receiver on any CPU"] = lambda: at_1g(env, [], anywhere)
            # Paced below the line: the pacer's own accuracy, where a receiver keeps up.
            cases["500M veth"] = lambda: at_1g(env, [], rate="500M")
        if args.compare_tree is not None:
            # The same command line running another checkout's modules.
            other = {**env, "PYTHONPATH": str(args.compare_tree.resolve())}
            tree = f" [{args.compare_tree.name}]"
            cases["max" + tree] = lambda: _transfer(path, out, other, ["--rate", "max"], [])
            if veth:
                cases["1G veth" + tree] = lambda: at_1g(other, [])
                cases["500M veth" + tree] = lambda: at_1g(other, [], rate="500M")
        rng = random.Random(38)
        for block in range(args.blocks):
            order = list(cases)
            rng.shuffle(order)
            for name in order:
                result = cases[name]()
                rows.append({"block": block, "case": name, **result})
                print(block, name, {k: v for k, v in result.items() if k != "case"}, flush=True)
    load_after = os.getloadavg()[0]

    def per_block(case: str, key: str) -> np.ndarray:
        return np.array(
            [r[key] for r in sorted(rows, key=lambda r: r["block"]) if r["case"] == case]
        )

    iperf = per_block("iperf3", "received_bps")
    summary: dict[str, Any] = {
        "iperf3_received_bps_median": float(np.median(iperf)),
        "link": link.note or "loopback and veth",
        "load_1min_before": load_before,
        "load_1min_after": load_after,
        "blocks": args.blocks,
        "size_bytes": size,
    }
    cases_run = sorted({r["case"] for r in rows})
    for case in [c for c in cases_run if c.startswith("max")]:
        ratio = per_block(case, "goodput_bps") / iperf
        g, lo, hi = _geo_interval(ratio)
        summary[f"{case}: goodput / iperf3"] = {"geomean": g, "ci95": [lo, hi]}
        summary[f"{case}: goodput_bps_median"] = float(np.median(per_block(case, "goodput_bps")))
        # End to end, as the user waits: both digests, the handshake and every round.
        summary[f"{case}: end_to_end_bps_median"] = float(
            8.0 * size / np.median(per_block(case, "total_s"))
        )
    five = per_block("5G", "first_blast_bps") / 5e9
    summary["5G: first blast / 5 Gbit/s"] = {
        "median": float(np.median(five)),
        "min": float(five.min()),
        "max": float(five.max()),
    }
    for case in [c for c in cases_run if c.startswith(("1G veth", "500M veth"))]:
        target = 5e8 if case.startswith("500M") else 1e9
        one = per_block(case, "first_blast_bps") / target
        summary[f"{case}: first blast / {target / 1e9:g} Gbit/s"] = {
            "median": float(np.median(one)),
            "min": float(one.min()),
            "max": float(one.max()),
        }
        summary[f"{case}: first blast loss, max over blocks"] = float(
            per_block(case, "first_loss").max()
        )
        summary[f"{case}: first blast loss, mean over blocks"] = float(
            per_block(case, "first_loss").mean()
        )
        summary[f"{case}: end to end s, median"] = float(np.median(per_block(case, "total_s")))
        summary[f"{case}: bytes hashed while arriving, median"] = float(
            np.median(per_block(case, "hashed_ahead"))
        )
    print(json.dumps(summary, indent=2))
    if args.json is not None:
        args.json.write_text(json.dumps({"summary": summary, "rows": rows}, indent=2) + "\n")


if __name__ == "__main__":
    main()
