"""``blastrate send``, ``receive`` and ``calibrate`` as Click commands, over loopback only."""

from __future__ import annotations

import hashlib
import json
import os
import platform
import socket
import threading
import time
from http.server import BaseHTTPRequestHandler, HTTPServer
from pathlib import Path
from urllib.parse import parse_qs, urlparse

import pytest
from click.testing import CliRunner

from app.commands.host_calibrate import _send_sizes_said, calibrate
from app.commands.transfer import receive, send
from datamover import Receiver, ReceiverLimits, SendError, send_file
from datamover.wire import DEFAULT_PAYLOAD_BYTES, MAX_ROUND
from host import HostProfile
from host.kernel_path import veth_unavailable
from transport import time_slice_costs

SECRET = "cli-test-secret-0123456789"
LIMITS = ReceiverLimits(total_timeout_s=30, idle_timeout_s=10, accept_timeout_s=10)


def _file(tmp_path: Path, size: int = 50_000) -> Path:
    p = tmp_path / "payload.bin"
    p.write_bytes(hashlib.shake_256(b"cli").digest(size))
    return p


def _free_port() -> int:
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def _serve_in_thread(rx: Receiver) -> threading.Thread:
    t = threading.Thread(target=rx.serve_one, daemon=True)
    t.start()
    return t


def test_send_fixed_rate_json(tmp_path: Path) -> None:
    src = _file(tmp_path)
    out = tmp_path / "out"
    out.mkdir()
    with Receiver(out, secret=SECRET.encode(), limits=LIMITS) as rx:
        t = _serve_in_thread(rx)
        result = CliRunner().invoke(
            send,
            [str(src), "--to", f"127.0.0.1:{rx.port}", "--rate", "100Mbps", "--json"],
            env={"BLASTRATE_SECRET": SECRET},
        )
        t.join(timeout=30)
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    assert report["digest_ok"] and report["rate_bps"] == 100e6 and report["rate_source"] == "fixed"
    assert report["rounds"][0]["packets_sent"] == -(-50_000 // DEFAULT_PAYLOAD_BYTES)
    assert report["gso"] == "on" and report["batch_packets"] >= 1
    assert (out / "payload.bin").read_bytes() == src.read_bytes()


class _Advice(BaseHTTPRequestHandler):
    queries: list[dict[str, list[str]]] = []  # noqa: RUF012 - shared by the test on purpose

    def do_GET(self) -> None:
        url = urlparse(self.path)
        type(self).queries.append({"path": [url.path], **parse_qs(url.query)})
        body = json.dumps({"effective_bottleneck_rate_bps": 250e6}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass


@pytest.mark.parametrize(
    ("extra", "asked"),
    [
        # The model is always named: the service's default has changed once (review of
        # b4a3a72: --model paper, not named, got the time-slice answer); a profile is
        # passed on.
        ([], {"model": ["timeslice"]}),
        (["--model", "paper", "--profile", "lab"], {"model": ["paper"], "profile": ["lab"]}),
    ],
)
def test_send_rate_auto_asks_the_receivers_service(
    tmp_path: Path, extra: list[str], asked: dict[str, list[str]]
) -> None:
    src = _file(tmp_path)
    out = tmp_path / "out"
    out.mkdir()
    server = HTTPServer(("127.0.0.1", 0), _Advice)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        with Receiver(out, secret=SECRET.encode(), limits=LIMITS) as rx:
            t = _serve_in_thread(rx)
            result = CliRunner().invoke(
                send,
                [
                    str(src),
                    "--to",
                    f"127.0.0.1:{rx.port}",
                    "--service",
                    f"http://127.0.0.1:{server.server_port}",
                    "--propagation-delay",
                    "2ms",
                    "--json",
                    *extra,
                ],
                env={"BLASTRATE_SECRET": SECRET},
            )
            t.join(timeout=30)
    finally:
        server.shutdown()
        server.server_close()
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    assert report["rate_bps"] == 250e6 and report["rate_source"] == "auto"
    q = _Advice.queries[-1]
    assert q["path"] == ["/bottleneck-rate"]
    assert q["workload"] == ["live"]
    assert q["file_size"] == ["50000"]
    assert float(q["propagation_delay"][0]) == 0.002
    assert {k: v for k, v in q.items() if k in ("model", "profile")} == asked
    assert report["auto"]["model"] == asked.get("model", ["paper"])[0]


def test_send_rate_auto_unreachable_service_exits_4(tmp_path: Path) -> None:
    src = _file(tmp_path)
    port = _free_port()
    result = CliRunner(env={"BLASTRATE_SECRET": SECRET}).invoke(
        send,
        [
            str(src),
            "--to",
            "127.0.0.1:9",
            "--service",
            f"http://127.0.0.1:{port}",
            "--propagation-delay",
            "1ms",
        ],
    )
    assert result.exit_code == 4
    assert result.stderr.startswith("blastrate: error: service: cannot reach")


def test_send_bad_inputs_exit_2(tmp_path: Path) -> None:
    src = _file(tmp_path)
    r = CliRunner(env={"BLASTRATE_SECRET": SECRET}).invoke(
        send, [str(src), "--to", "nohostport", "--rate", "1Mbps"]
    )
    assert r.exit_code == 2 and "blastrate: error: --to:" in r.stderr
    r = CliRunner().invoke(send, [str(src), "--to", "127.0.0.1:9", "--rate", "fast"])
    assert r.exit_code == 2 and "blastrate: error: --rate:" in r.stderr
    r = CliRunner().invoke(send, [str(tmp_path / "none"), "--to", "127.0.0.1:9", "--rate", "max"])
    assert r.exit_code == 2 and "blastrate: error: file:" in r.stderr
    # A bare rate is ambiguous (bit/s or Mbit/s?): refused, with the unit to add.
    r = CliRunner(env={"BLASTRATE_SECRET": SECRET}).invoke(
        send, [str(src), "--to", "127.0.0.1:9", "--rate", "800"]
    )
    assert r.exit_code == 2 and "blastrate: error: --rate: a bare number" in r.stderr
    assert "800Mbps" in r.stderr
    # A large bare number reads as bit/s: the hint says so (not 500000000Mbps).
    r = CliRunner(env={"BLASTRATE_SECRET": SECRET}).invoke(
        send, [str(src), "--to", "127.0.0.1:9", "--rate", "500000000"]
    )
    assert r.exit_code == 2 and "500000000bps (bit/s, the same as 500Mbps)" in r.stderr
    assert "500000000Mbps" not in r.stderr
    # No secret, and no --insecure: refused before anything goes on the network.
    r = CliRunner(env={"BLASTRATE_SECRET": None}).invoke(
        send, [str(src), "--to", "127.0.0.1:9", "--rate", "max"]
    )
    assert r.exit_code == 2 and "blastrate: error: --secret-file:" in r.stderr
    r = CliRunner(env={"BLASTRATE_SECRET": SECRET}).invoke(
        send, [str(src), "--to", "127.0.0.1:9", "--rate", "max", "--insecure"]
    )
    assert r.exit_code == 2 and "blastrate: error: --insecure:" in r.stderr


def test_receive_command_takes_one_file(tmp_path: Path) -> None:
    src = _file(tmp_path, 30_000)
    out = tmp_path / "out"
    out.mkdir()
    port = _free_port()
    errors: list[BaseException] = []

    def sender() -> None:
        deadline = time.monotonic() + 10
        while True:
            try:
                send_file(
                    src,
                    "127.0.0.1",
                    port,
                    secret=SECRET.encode(),
                    rate_bps=None,
                    total_timeout_s=20,
                )
                return
            except SendError as exc:
                if exc.field != "to" or time.monotonic() > deadline:
                    errors.append(exc)
                    return
                time.sleep(0.05)

    t = threading.Thread(target=sender, daemon=True)
    t.start()
    result = CliRunner().invoke(
        receive,
        [
            "--port",
            str(port),
            "--host",
            "127.0.0.1",
            "--output",
            str(out),
            "--once",
            "--json",
        ],
        env={"BLASTRATE_SECRET": SECRET},
    )
    t.join(timeout=30)
    assert not errors
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    assert report["size"] == 30_000 and report["rounds"] == 1
    assert (out / "payload.bin").read_bytes() == src.read_bytes()


def test_receive_bad_output_exit_2(tmp_path: Path) -> None:
    r = CliRunner().invoke(receive, ["--port", "9", "--output", str(tmp_path / "missing")])
    assert r.exit_code == 2 and "blastrate: error: --output:" in r.stderr


def test_calibrate_quick_no_store(tmp_path: Path) -> None:
    r = CliRunner().invoke(
        calibrate,
        [
            "--name",
            "test-host",
            "--runs",
            "2",
            "--seconds",
            "0.2",
            "--reads",
            "50",
            "--file-size",
            "1MiB",
            "--dir",
            str(tmp_path),
            "--kernel-path",
            "loopback",
            "--no-store",
            "--json",
        ],
    )
    assert r.exit_code == 0, r.output
    doc = json.loads(r.stdout)
    profile = doc["profile"]
    assert doc["provenance"]["kernel_path"] == "loopback"
    assert "kernel_s_per_datagram" not in doc["provenance"]
    assert profile["name"] == "test-host" and not doc["stored"] and not doc["host_default"]
    assert 2e-4 < doc["provenance"]["time_slice_s"] < 0.05
    assert profile["mu_net"] > 0 and profile["mu_io_cpu"] > 0 and profile["mu_disk"] > 0
    assert profile["buffer_packets"] >= 1 and profile["coalesce_packets"] == min(
        16, profile["buffer_packets"]
    )
    assert len(doc["provenance"]["net"]["mu_net"]["samples"]) == 2
    assert list(tmp_path.iterdir()) == []  # the I/O task's file was removed


@pytest.mark.skipif(
    veth_unavailable() is not None or len(os.sched_getaffinity(0)) < 2,
    reason=f"a veth link needs root, ip and two CPUs ({veth_unavailable()})",
)
def test_calibrate_on_a_veth_link_stores_the_wake_up_cost_the_model_reads(
    tmp_path: Path,
) -> None:
    # Issue #39 section 4: calibrate measures what the default model needs, the wake-up
    # cost included; the profile's mu_net is then 1 / (a + N b) (reference: that formula
    # from the stored fit), and the time-slice model reads wakeup_s from the provenance.
    r = CliRunner().invoke(
        calibrate,
        [
            "--name", "veth-host", "--runs", "1", "--seconds", "0.3", "--reads", "50",
            "--file-size", "1MiB", "--dir", str(tmp_path), "--kernel-path", "veth",
            "--no-store", "--json",
        ],
    )  # fmt: skip
    assert r.exit_code == 0, r.output
    doc = json.loads(r.stdout)
    fit = doc["provenance"]["wakeup_fit"]
    # k's runs are kept beside the OS kernel's name, not overwritten by it.
    assert doc["provenance"]["kernel_s"]["mean"] == doc["provenance"]["kernel_s_per_datagram"]
    assert doc["provenance"]["kernel"] == platform.release()
    assert len(fit["runs"]) == 4 and all(run["datagrams"] > 0 for run in fit["runs"])
    a, b = fit["per_wakeup_s"], fit["per_datagram_s"]
    if a > 0 and b > 0:
        n = doc["profile"]["coalesce_packets"]  # the model's N: min(--batch, K)
        assert doc["profile"]["mu_net"] == pytest.approx(1.0 / (a + n * b), rel=1e-12)
        assert doc["provenance"]["wakeup_s"] == a
        profile = HostProfile(**doc["profile"])
        assert time_slice_costs(doc["provenance"], profile).wakeup_s == a
    else:  # a fit that clipped a cost leaves the never-sleeping receiver's rate
        assert "wakeup_s" not in doc["provenance"]
        assert doc["profile"]["mu_net"] == doc["provenance"]["net"]["mu_net"]["mean"]


def test_calibrate_says_where_the_senders_sends_become_single() -> None:
    # transport.SendSizes.send_size: from the sender's back-to-back rate up, one datagram a
    # call; the line says so, and a table stored before that rate was kept says nothing.
    sends = {"seconds_per_send": 1e-4, "path": "veth", "buffer_by_send": {"1": 92, "2": 170}}
    said = _send_sizes_said({"send_sizes": {**sends, "sender_max_bps": 8.46e8}})
    assert said == (
        "sends: 100 us per call of the sender (veth); K by send size 1: 92, 2: 170; "
        "single datagrams from 846 Mbit/s up (the sender at its most)"
    )
    assert _send_sizes_said({"send_sizes": sends}).endswith("K by send size 1: 92, 2: 170")
    said = _send_sizes_said({"send_sizes_note": "no veth link"})
    assert said == "sends: no veth link (the model takes single datagrams)"


def test_receive_advises_from_this_hosts_default_profile(tmp_path: Path) -> None:
    # The session's test database (conftest.py), never the user's.
    from host import host_profile
    from host.store import ProfileStore

    store = ProfileStore()
    store.put(
        host_profile("sx280-2007").replace(name="cli-lab", mu_net=25_000.0),
        provenance={"time_slice_s": 0.004},
    )
    store.set_default("cli-lab")
    src = _file(tmp_path, 40_000)
    out = tmp_path / "out"
    out.mkdir()
    port = _free_port()
    reports: list[object] = []

    def sender() -> None:
        deadline = time.monotonic() + 15
        while True:
            try:
                reports.append(
                    send_file(
                        src,
                        "127.0.0.1",
                        port,
                        secret=SECRET.encode(),
                        rate_bps=None,
                        total_timeout_s=20,
                        advise={"propagation_delay_s": 0.005},
                    )
                )
                return
            except SendError as exc:
                if exc.field != "to" or time.monotonic() > deadline:
                    reports.append(exc)
                    return
                time.sleep(0.05)

    t = threading.Thread(target=sender, daemon=True)
    t.start()
    try:
        result = CliRunner().invoke(
            receive,
            ["--port", str(port), "--host", "127.0.0.1", "--output", str(out), "--once"],
            env={"BLASTRATE_SECRET": SECRET},
        )
        t.join(timeout=30)
    finally:
        store.set_default(None)
        store.delete("cli-lab")
    assert result.exit_code == 0, result.output
    (report,) = reports
    assert not isinstance(report, BaseException), report
    advice = report.advice  # type: ignore[attr-defined]
    assert advice["profile"] == "cli-lab" and advice["time_slice_s"] == 0.004
    assert advice["coalesce_packets"] == 16  # receive's default --batch
    assert advice["computed_by"] == f"receiver 127.0.0.1:{port}"
    assert report.rate_bps == advice["predicted_rate_bps"] > 0  # type: ignore[attr-defined]


def test_receive_refuses_an_unknown_profile_at_once(tmp_path: Path) -> None:
    r = CliRunner().invoke(
        receive, ["--port", "9", "--output", str(tmp_path), "--profile", "no-such-lab"]
    )
    assert r.exit_code == 2 and "blastrate: error: --profile:" in r.stderr


def test_send_refuses_a_delay_no_receiver_advises_for_as_usage(tmp_path: Path) -> None:
    # The receiver advises for one-way delays up to 60 s; send says so itself (exit 2,
    # naming --delay), not as the receiver's refusal (exit 3).
    from app.commands.transfer import _MAX_ADVICE_DELAY_S
    from datamover.advice import MAX_ADVICE_DELAY_S

    assert _MAX_ADVICE_DELAY_S == MAX_ADVICE_DELAY_S
    src = tmp_path / "f.bin"
    src.write_bytes(b"x" * 10)
    r = CliRunner().invoke(
        send,
        ["--to", "127.0.0.1:9", str(src), "--delay", "1e300s", "--insecure"],
    )
    assert r.exit_code == 2 and "blastrate: error: --delay:" in r.stderr


def test_send_without_gso_says_so_and_arrives_intact(tmp_path: Path) -> None:
    src = _file(tmp_path, 200_000)
    out = tmp_path / "out"
    out.mkdir()
    with Receiver(out, secret=SECRET.encode(), limits=LIMITS, gro=False) as rx:
        t = _serve_in_thread(rx)
        result = CliRunner().invoke(
            send,
            [str(src), "--to", f"127.0.0.1:{rx.port}", "--rate", "max", "--no-gso", "--json"],
            env={"BLASTRATE_SECRET": SECRET},
        )
        t.join(timeout=30)
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    assert report["digest_ok"] and report["gso"] == "turned off (--no-gso)"
    assert (out / "payload.bin").read_bytes() == src.read_bytes()


@pytest.mark.parametrize("command", [send, receive])
def test_more_rounds_than_a_datagram_can_name_is_a_usage_error(
    tmp_path: Path, command: object
) -> None:
    src = _file(tmp_path)
    args = (
        [str(src), "--to", "127.0.0.1:9", "--insecure"]
        if command is send
        else ["--port", "9", "--output", str(tmp_path), "--insecure"]
    )
    result = CliRunner().invoke(command, [*args, "--max-rounds", str(MAX_ROUND + 1)])  # type: ignore[arg-type]
    assert result.exit_code == 2 and "--max-rounds" in result.output


def test_a_provisional_answer_is_said_in_words() -> None:
    from app.commands.transfer import provisional_note

    assert "still measuring" in provisional_note({"calibrating": True, "ready": False})
    assert "not solved" in provisional_note({"calibrating": False, "ready": False})
    assert provisional_note({"calibrating": False, "ready": True}) == ""
    assert provisional_note({}) == ""
