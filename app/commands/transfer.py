"""``blastrate receive`` and ``blastrate send``: move a real file with RBUDP.

The receiver serves a bounded number of transfers (one by default) into a directory; the
sender blasts a file at a fixed rate, as fast as it can (``max``), or at the rate the
receiver's blastrate service advises from its live workload (``auto``): it asks
``GET {service}/bottleneck-rate?workload=live&file_size=...&propagation_delay=...``
just before blasting.

Exit status: 0 sent (digest checked), 2 bad input or the receiver refused the file,
3 the service has no rate for this transfer, 4 receiver or service unreachable,
5 service error, 1 the transfer failed, 130 interrupted.
"""

from __future__ import annotations

import json
import socket
import sys
import time
from pathlib import Path
from typing import Any, NoReturn

import click
import httpx
from rich.console import Console
from rich.table import Table

from app.units import QuantityError, parse_bitrate, parse_duration, parse_size
from transport import (
    DEFAULT_PACKET_PAYLOAD_BYTES,
    ReceiveError,
    Receiver,
    ReceiverLimits,
    RoundReport,
    SendError,
    send_file,
)

from .common import stdout_console

__all__ = ["receive", "send"]

EXIT_OK, EXIT_INTERNAL, EXIT_USAGE, EXIT_MODEL, EXIT_UNREACHABLE, EXIT_SERVER = 0, 1, 2, 3, 4, 5
EXIT_INTERRUPTED = 130
# Fields the receiver refuses on the sender's input (its HELLO): a usage error, not a
# failed transfer.
_INPUT_FIELDS = {"name", "size", "payload_bytes", "file", "rate", "emulate_delay_s", "to"}


def _fail(field: str, reason: str, status: int) -> NoReturn:
    click.echo(f"blastrate: error: {field}: {reason}", err=True)
    sys.exit(status)


def _host_port(text: str) -> tuple[str, int]:
    host, sep, port = text.rpartition(":")
    if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
        _fail("to", f"must be HOST:PORT with a port in 1..65535, got {text!r}", EXIT_USAGE)
    return host.strip("[]"), int(port)


def _round_trip_s(host: str, port: int, tries: int = 3, timeout: float = 2.0) -> float | None:
    """Smallest TCP connect time to ``host:port`` (s): one round trip, or None."""
    best: float | None = None
    for _ in range(tries):
        t0 = time.perf_counter()
        try:
            with socket.create_connection((host, port), timeout=timeout):
                pass
        except OSError:
            return best
        dt = time.perf_counter() - t0
        best = dt if best is None else min(best, dt)
    return best


def advised_rate(
    service: str, file_size: int, propagation_delay_s: float, timeout_s: float
) -> float:
    """The effective bottleneck rate (bit/s) the receiver's service advises now.

    Exits with status 4 (unreachable), 5 (server error) or 3 (no rate) on failure.
    """
    url = service.rstrip("/") + "/bottleneck-rate"
    params = {
        "workload": "live",
        "file_size": str(file_size),
        "propagation_delay": f"{propagation_delay_s!r}",
    }
    try:
        response = httpx.get(url, params=params, timeout=timeout_s)
    except httpx.HTTPError as exc:
        _fail(
            "service",
            f"cannot reach {service} for --rate auto ({exc.__class__.__name__}); give --rate RATE "
            "or --service URL",
            EXIT_UNREACHABLE,
        )
    try:
        body = response.json()
    except ValueError:
        body = None
    if response.status_code >= 500:
        _fail("service", f"{url} answered {response.status_code}", EXIT_SERVER)
    if not isinstance(body, dict):
        _fail(
            "service", f"{url} answered {response.status_code} without a JSON object", EXIT_SERVER
        )
    if response.status_code >= 400:
        detail = body.get("detail") or body.get("title") or response.status_code
        status = EXIT_MODEL if response.status_code == 422 else EXIT_USAGE
        _fail("service", f"{url} refused: {detail}", status)
    rate = body.get("effective_bottleneck_rate_bps")
    if rate is None and isinstance(body.get("bottleneck"), dict):
        rate = body["bottleneck"].get("rate_bps")
    if isinstance(rate, bool) or not isinstance(rate, int | float) or not rate > 0:
        _fail("service", f"{url} gave no effective bottleneck rate", EXIT_MODEL)
    return float(rate)


@click.command("send")
@click.argument("file", type=click.Path(dir_okay=False, path_type=Path))
@click.option("--to", "to", required=True, help="Receiver's control address, HOST:PORT.")
@click.option(
    "--rate",
    default="auto",
    show_default=True,
    help="Sending rate: 'auto' (ask the receiver's service), 'max' (unpaced) or e.g. 800Mbps.",
)
@click.option(
    "--service", default=None, help="Receiver's blastrate service URL [default: http://HOST:8000]."
)
@click.option(
    "--propagation-delay",
    default=None,
    help="One-way delay for --rate auto, e.g. 5ms [default: half a TCP connect to the service].",
)
@click.option(
    "--emulate-delay",
    default="0",
    show_default=True,
    help="Emulated one-way delay per blast and feedback.",
)
@click.option(
    "--payload",
    default=DEFAULT_PACKET_PAYLOAD_BYTES,
    show_default=True,
    help="File bytes per datagram.",
)
@click.option("--name", default=None, help="Name to store the file under [default: its own name].")
@click.option("--max-rounds", default=1000, show_default=True, type=click.IntRange(1, 100_000))
@click.option(
    "--timeout", "timeout", default="1h", show_default=True, help="Limit on the whole transfer."
)
@click.option("--json", "as_json", is_flag=True, help="Print the report as JSON.")
def send(
    file: Path,
    to: str,
    rate: str,
    service: str | None,
    propagation_delay: str | None,
    emulate_delay: str,
    payload: int,
    name: str | None,
    max_rounds: int,
    timeout: str,
    as_json: bool,
) -> None:
    """Send FILE to a `blastrate receive` with RBUDP."""
    host, port = _host_port(to)
    try:
        total_timeout = parse_duration(timeout, "timeout")
        # No delay is the default: the parser only takes strictly positive durations.
        delay = (
            0.0
            if emulate_delay.strip() in {"0", "0s", "0ms"}
            else parse_duration(emulate_delay, "emulate_delay")
        )
        fixed = None if rate in {"auto", "max"} else parse_bitrate(rate, "rate")
        prop = (
            None
            if propagation_delay is None
            else parse_duration(propagation_delay, "propagation_delay")
        )
    except QuantityError as exc:
        _fail(exc.field, str(exc).split(": ", 1)[-1], EXIT_USAGE)
    if not file.is_file():
        _fail("file", f"{str(file)!r} is not a readable file", EXIT_USAGE)
    size = file.stat().st_size
    rate_bps: float | None = fixed
    source = "fixed" if fixed is not None else rate
    if rate == "auto":
        url = service or f"http://{host}:8000"
        if prop is None:
            parsed = httpx.URL(url)
            rtt = _round_trip_s(
                parsed.host, parsed.port or (443 if parsed.scheme == "https" else 80)
            )
            prop = max((rtt or 2e-3) / 2.0, 1e-6)
        rate_bps = advised_rate(url, size, prop + delay, timeout_s=10.0)
    console = Console(stderr=True)
    status = console.status(f"sending {file.name} ({size} bytes) to {host}:{port}")

    def progress(r: RoundReport) -> None:
        status.update(f"round {r.round}: {r.packets_sent} packets, {r.missing_after} still missing")

    try:
        with status:
            report = send_file(
                file,
                host,
                port,
                rate_bps=rate_bps,
                payload_bytes=payload,
                name=name,
                emulate_delay_s=delay,
                max_rounds=max_rounds,
                total_timeout_s=total_timeout,
                on_round=progress,
            )
    except SendError as exc:
        code = (
            EXIT_UNREACHABLE
            if exc.field == "to"
            else EXIT_USAGE
            if exc.field in _INPUT_FIELDS
            else 1
        )
        _fail(exc.field, exc.reason, code)
    except KeyboardInterrupt:
        _fail("transfer", "interrupted", EXIT_INTERRUPTED)
    out: dict[str, Any] = {**report.to_dict(), "rate_source": source}
    if as_json:
        click.echo(json.dumps(out, indent=2))
        return
    table = Table(title=f"{report.name}: {report.size} bytes in {report.transfer_s:.3f} s")
    for col in ("round", "packets sent", "bytes sent", "missing after", "loss", "rate (Mbps)"):
        table.add_column(col, justify="right")
    for r in report.rounds:
        table.add_row(
            str(r.round),
            str(r.packets_sent),
            str(r.bytes_sent),
            str(r.missing_after),
            f"{r.loss:.4f}",
            f"{r.achieved_rate_bps / 1e6:.1f}",
        )
    stdout_console().print(table)
    target = "unpaced" if rate_bps is None else f"{rate_bps / 1e6:.1f} Mbps ({source})"
    click.echo(
        f"rate {target}; sha256 {report.sha256} {'verified' if report.digest_ok else 'MISMATCH'}"
    )


@click.command("receive")
@click.option(
    "--port",
    required=True,
    type=click.IntRange(1, 65535),
    help="TCP control port (UDP data on the same number).",
)
@click.option(
    "--output",
    required=True,
    type=click.Path(file_okay=False, dir_okay=True, path_type=Path),
    help="Existing directory for received files.",
)
@click.option("--host", default="0.0.0.0", show_default=True, help="Address to bind.")
@click.option(
    "--batch",
    default=16,
    show_default=True,
    type=click.IntRange(1, 4096),
    help="Datagrams read per wake-up (N).",
)
@click.option("--rcvbuf", default=None, help="SO_RCVBUF of the data socket, e.g. 4MiB.")
@click.option("--max-file-size", default="16GiB", show_default=True, help="Largest file accepted.")
@click.option("--max-rounds", default=1000, show_default=True, type=click.IntRange(1, 100_000))
@click.option(
    "--timeout", "timeout", default="1h", show_default=True, help="Limit on each transfer."
)
@click.option("--wait", default="1h", show_default=True, help="Longest wait for a sender.")
@click.option(
    "--transfers",
    default=1,
    show_default=True,
    type=click.IntRange(1, 10_000),
    help="Transfers to serve, then exit.",
)
@click.option("--overwrite", is_flag=True, help="Replace a file of the same name.")
@click.option("--json", "as_json", is_flag=True, help="Print each report as JSON.")
def receive(
    port: int,
    output: Path,
    host: str,
    batch: int,
    rcvbuf: str | None,
    max_file_size: str,
    max_rounds: int,
    timeout: str,
    wait: str,
    transfers: int,
    overwrite: bool,
    as_json: bool,
) -> None:
    """Receive files sent with `blastrate send` into OUTPUT."""
    try:
        limits = ReceiverLimits(
            max_file_bytes=parse_size(max_file_size, "max_file_size"),
            max_rounds=max_rounds,
            total_timeout_s=parse_duration(timeout, "timeout"),
            accept_timeout_s=parse_duration(wait, "wait"),
        )
        buffer = None if rcvbuf is None else parse_size(rcvbuf, "rcvbuf")
    except QuantityError as exc:
        _fail(exc.field, str(exc).split(": ", 1)[-1], EXIT_USAGE)
    if not output.is_dir():
        _fail("output", f"{str(output)!r} is not a directory", EXIT_USAGE)
    try:
        rx = Receiver(
            output,
            host=host,
            port=port,
            batch_packets=batch,
            rcvbuf_bytes=buffer,
            limits=limits,
            overwrite=overwrite,
        )
    except OSError as exc:
        _fail("port", f"cannot bind {host}:{port}: {exc.strerror}", EXIT_USAGE)
    failed = False
    with rx:
        for _ in range(transfers):
            try:
                report = rx.serve_one()
            except ReceiveError as exc:
                click.echo(f"blastrate: error: {exc.field}: {exc.reason}", err=True)
                failed = True
                if exc.field == "accept_timeout_s":
                    break
                continue
            except KeyboardInterrupt:
                _fail("transfer", "interrupted", EXIT_INTERRUPTED)
            if as_json:
                click.echo(json.dumps(report.to_dict()))
            else:
                click.echo(
                    f"received {report.path} ({report.size} bytes) in {report.rounds} rounds, "
                    f"{report.elapsed_s:.3f} s; sha256 {report.sha256} verified"
                )
    sys.exit(EXIT_INTERNAL if failed else EXIT_OK)
