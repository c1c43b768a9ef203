"""``blastrate receive`` and ``blastrate send``: move a real file with RBUDP.

Both ends share a secret (``--secret-file PATH`` or ``$BLASTRATE_SECRET``); a receiver
started without one makes one and prints it once.  ``--insecure`` on both ends is the
only way to go without (:mod:`datamover.handshake` says what the secret protects).

The receiver serves until stopped (``--once``: until one transfer is complete), several
senders at once up to ``--max-sessions``, into a directory; the sender blasts a file at
a fixed rate, as fast as it can (``max``), or at the rate the receiver advises
(``auto``): the sender's HELLO asks, and the receiver answers from its
own profile (the host default that ``blastrate calibrate`` set, or ``--profile``), its
socket's real K, its batch N and the tasks competing for its CPUs right now
(:mod:`datamover.advice`).  ``--service URL`` asks a blastrate service instead
(``GET {service}/bottleneck-rate?workload=live&...``), for receivers that are not
``blastrate receive``.

Exit status: 0 sent (digest checked), 2 bad input or the receiver refused the file,
3 the receiver or service has no rate for this transfer, 4 receiver or service unreachable,
5 service error, 1 the transfer failed, 130 interrupted.
"""

from __future__ import annotations

import json
import os
import shlex
import signal
import socket
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn

import click
from rich.console import Console
from rich.table import Table

from app.schemas.units import QuantityError, parse_bitrate, parse_duration, parse_size
from datamover import (
    HEADER_BYTES,
    SECRET_ENV,
    ReceiveError,
    Receiver,
    ReceiveReport,
    ReceiverLimits,
    RoundReport,
    SecretError,
    SendError,
    load_secret,
    new_secret,
    send_file,
)
from datamover.deferred_advice import DeferredAdvisor, lower_priority
from datamover.wire import DEFAULT_PAYLOAD_BYTES, MAX_ROUND
from transport.models import DEFAULT_RECEIVER_MODEL

from .common import model_option, print_table

if TYPE_CHECKING:
    from host import HostProfile

# The models (host, transport) load in about a second: only the receiver's advice and
# --service need them, and they are imported there, so that send and receive start at once.

__all__ = ["receive", "send"]

EXIT_OK, EXIT_INTERNAL, EXIT_USAGE, EXIT_MODEL, EXIT_UNREACHABLE, EXIT_SERVER = 0, 1, 2, 3, 4, 5
EXIT_INTERRUPTED = 130
#: datamover.advice.MAX_ADVICE_DELAY_S, kept here so that send does not load the models
#: (tests/app/commands/test_transfer_commands.py pins them equal) (s).
_MAX_ADVICE_DELAY_S = 60.0
#: The receiver builds its advisor once it has received nothing for this long (s), or
#: at once when a sender asks for advice.
_BUILD_AFTER_IDLE_S = 1.0
# Fields the receiver refuses on the sender's input (its HELLO): a usage error, not a
# failed transfer.
_INPUT_FIELDS = {
    "name",
    "size",
    "payload_bytes",
    "file",
    "rate",
    "emulate_delay_s",
    "to",
    "secret",
    "source_port",
}


#: SendError fields that one of send's options sets: errors name the option.
_SEND_OPTIONS = {
    "to": "--to",
    "rate": "--rate",
    "payload_bytes": "--payload",
    "emulate_delay_s": "--emulate-delay",
    "source_port": "--cport",
    "max_rounds": "--max-rounds",
    "total_timeout_s": "--timeout",
}


def _secret_option(secret_file: Path | None, insecure: bool) -> bytes | None:
    """The secret from ``--secret-file`` or ``$BLASTRATE_SECRET``; None with
    ``--insecure``.  Exits with status 2 on a bad or conflicting choice."""
    try:
        secret = load_secret(secret_file)
    except SecretError as exc:
        _fail(exc.field, exc.reason, EXIT_USAGE)
    if secret_file is not None and secret_file.stat().st_mode & 0o077:
        click.echo(
            f"blastrate: warning: --secret-file: {str(secret_file)!r} can be read by others; "
            f"chmod 600 {shlex.quote(str(secret_file))}",
            err=True,
        )
    if insecure and secret is not None:
        _fail(
            "--insecure",
            "excludes a secret (--secret-file or BLASTRATE_SECRET): give one or the other",
            EXIT_USAGE,
        )
    return secret


def _secret_options(command: Any) -> Any:
    command = click.option(
        "--insecure",
        is_flag=True,
        help="No secret: anyone who reaches the port may send (and the sender cannot tell "
        "who receives). Both ends must say it.",
    )(command)
    return click.option(
        "--secret-file",
        type=click.Path(dir_okay=False, path_type=Path),
        default=None,
        help=f"File holding the secret both ends share [default: ${SECRET_ENV}].",
    )(command)


def _fail(field: str, reason: str, status: int) -> NoReturn:
    click.echo(f"blastrate: error: {field}: {reason}", err=True)
    sys.exit(status)


def _host_port(text: str) -> tuple[str, int]:
    host, sep, port = text.rpartition(":")
    if (
        not sep
        or not host
        or not (port.isascii() and port.isdigit() and len(port) <= 5)
        or not 0 < int(port) < 65536
    ):
        _fail("--to", f"must be HOST:PORT with a port in 1..65535, got {text!r}", EXIT_USAGE)
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
    service: str,
    file_size: int,
    propagation_delay_s: float,
    timeout_s: float,
    *,
    model: str = DEFAULT_RECEIVER_MODEL,
    profile: str | None = None,
) -> tuple[float, dict[str, Any]]:
    """The effective bottleneck rate (bit/s) a blastrate service advises now, and where
    it came from (the ``auto`` block of ``send --json``).

    ``model`` and ``profile`` are sent as the service's ``model`` and ``profile``; the
    model always, since the service's default is not the same in every version (the
    paper's before issue #39, the time-slice model since).  Exits with status 4
    (unreachable), 5 (server error) or 3 (no rate) on failure.
    """
    import httpx

    url = service.rstrip("/") + "/bottleneck-rate"
    params = {
        "workload": "live",
        "file_size": str(file_size),
        "propagation_delay": f"{propagation_delay_s!r}",
        "model": model,
    }
    if profile is not None:
        params["profile"] = profile
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
    raw_inputs = body.get("inputs")
    inputs: dict[str, Any] = raw_inputs if isinstance(raw_inputs, dict) else {}
    raw_host = inputs.get("host")
    host: dict[str, Any] = raw_host if isinstance(raw_host, dict) else {}
    return float(rate), {
        "profile": host.get("profile"),
        "model": inputs.get("model", model),
        "workload": inputs.get("workload"),
        "buffer_packets": host.get("buffer_packets"),
        "coalesce_packets": host.get("coalesce_packets"),
        "propagation_delay_s": propagation_delay_s,
        "predicted_rate_bps": float(rate),
        "predicted_loss": body.get("loss_probability"),
        "computed_by": f"service {service}",
    }


def _profile_check(profile: str) -> None:
    """Fail now, not at the first sender, on a ``--profile`` the store does not know."""
    from host import WorkloadError
    from host.store import ProfileStore, ProfileStoreError

    try:
        ProfileStore().entry(profile)
    except (WorkloadError, ProfileStoreError) as exc:
        _fail("--profile", str(exc), EXIT_USAGE)


def _kernel_said(provenance: dict[str, Any]) -> str:
    """The quick calibration's kernel path in a few words."""
    k = provenance.get("kernel_s_per_datagram")
    if k is None:
        return "k not measured (loopback)"
    comps = ", ".join(f"{c:.2g}" for c in provenance.get("effective_competitors", []))
    return f"k {k * 1e6:.3g} us/datagram, c_C [{comps}] (veth)"


def receiver_advice(
    profile: str | None,
    batch: int,
    rcvbuf_bytes: int | None,
    name: str,
    *,
    busy: Callable[[], bool],
    calibrate: bool,
) -> tuple[Any, Any]:
    """The advisor of a ``blastrate receive`` and the keeper that keeps it ready.

    The advisor answers from its profile (``--profile``, else this host's default at the
    time of each request), its socket's K, its batch N, its CPUs and the keeper's latest
    look at the tasks on them.  With ``calibrate`` and no profile of this host's own, the
    keeper first measures one quickly (stored as ``quick-HOSTNAME`` and made the host
    default, marked ``quick``).  Built after the receiver listens: this loads the models.

    Returns
    -------
    advisor : datamover.ReceiverAdvisor
    keeper : datamover.advice_keeper.AdviceKeeper
        Not yet started.
    """
    import platform

    from datamover.advice import ReceiverAdvisor, profile_kind
    from datamover.advice_keeper import AdviceKeeper, quick_calibration
    from host import Workload, WorkloadError
    from host.calibration import measure_buffer_by_send, measure_buffer_packets
    from host.store import ProfileStore, ProfileStoreError

    store = ProfileStore()

    def stored(name_: str) -> tuple[HostProfile, dict[str, Any] | None]:
        try:
            entry = store.entry(name_)
        except (WorkloadError, ProfileStoreError) as exc:
            raise LookupError(str(exc)) from None
        return entry.profile, entry.provenance

    fixed = stored(profile) if profile is not None else None
    # Until a quick calibration is stored (or where the store cannot take it), its
    # result stands in for the host default.
    measured: list[tuple[HostProfile, dict[str, Any]]] = []

    def own() -> tuple[HostProfile, dict[str, Any] | None]:
        if fixed is not None:
            return fixed
        entry = store.default_entry()
        if entry.built_in and measured:
            return measured[-1]
        return entry.profile, entry.provenance

    by_send: dict[int, int] | None
    try:
        held = measure_buffer_packets(
            HEADER_BYTES + DEFAULT_PAYLOAD_BYTES, rcvbuf_bytes=rcvbuf_bytes
        )
        k: int | None = held
        # The same socket filled in the sender's sends of 1..32 datagrams (GRO).
        by_send = {
            **measure_buffer_by_send(
                HEADER_BYTES + DEFAULT_PAYLOAD_BYTES, rcvbuf_bytes=rcvbuf_bytes
            ),
            1: held,
        }
    except OSError:  # no loopback to fill a socket on: the profile's K stands
        k, by_send = None, None
    cpus = os.sched_getaffinity(0)
    advisor = ReceiverAdvisor(
        own,
        buffer_packets=k,
        buffer_by_send=by_send,
        batch_packets=batch,
        cpus=cpus,
        workload=lambda _: Workload(cpu_tasks=0, io_tasks=0, cores=len(cpus)),
        profiles=stored,
        name=name,
    )

    def wait_while_busy() -> None:
        # Between the calibration's measurements: not while a blast is received (bounded:
        # a minute of back-to-back transfers, and it measures anyway).
        for _ in range(1200):
            if not busy():
                return
            time.sleep(0.05)

    def quick() -> None:
        if store.default_name() is not None:
            return  # this host has a profile: calibrated, or quick at an earlier start
        host = platform.node() or "host"
        made, provenance = quick_calibration(
            name=f"quick-{host}"[:64],
            batch_packets=batch,
            payload_bytes=DEFAULT_PAYLOAD_BYTES,
            buffer_packets=k or store.default_entry().profile.buffer_packets,
            receiver_cpu=min(cpus),
            between=wait_while_busy,
            rcvbuf_bytes=rcvbuf_bytes,
        )
        measured.append((made, provenance))
        where = "stored as this host's default"
        try:
            store.put(made, provenance=provenance)
            if store.default_name() is None:  # not set by a calibration meanwhile
                store.set_default(made.name)
        except (WorkloadError, ProfileStoreError) as exc:
            where = f"not stored ({exc})"
        click.echo(
            f"blastrate: measured this host in {provenance['duration_s']:.1f} s (quick "
            f"calibration): profile {made.name}, mu_net {made.mu_net:.4g}/s, "
            f"K {made.buffer_packets}, {_kernel_said(provenance)}, {where}; "
            "`blastrate calibrate --name NAME` "
            "measures it properly",
            err=True,
        )

    started = time.monotonic()

    def ready() -> None:
        made, provenance = own()
        workload = advisor.workload(advisor.cpus)
        click.echo(
            f"blastrate: rate advice ready in {time.monotonic() - started:.1f} s: profile "
            f"{made.name} ({profile_kind(provenance)}), K {k}, N {batch}, "
            f"C={workload.cpu_tasks} I={workload.io_tasks} m={workload.cores} now",
            err=True,
        )

    keeper = AdviceKeeper(
        advisor,
        busy=busy,
        calibrate=quick if calibrate and profile is None else None,
        on_ready=ready,
    )
    return advisor, keeper


#: One bound on both ends: each datagram names its blast round in 16 bits.
_max_rounds_option = click.option(
    "--max-rounds",
    default=1000,
    show_default=True,
    type=click.IntRange(1, MAX_ROUND),
    help="Most blast rounds of a transfer (each datagram names its round in 16 bits).",
)


def provisional_note(auto: dict[str, Any]) -> str:
    """Words for an ``auto`` answer that is a stand-in (also in ``--json``: ``calibrating``,
    ``ready``), or ""."""
    if auto.get("calibrating") is True:
        return " (provisional: the receiver was still measuring its host)"
    if auto.get("ready") is False:
        return " (provisional: the receiver had not solved this workload ahead)"
    return ""


@click.command("send")
@click.argument("file", type=click.Path(dir_okay=False, path_type=Path))
@click.option("--to", "to", required=True, help="Receiver's control address, HOST:PORT.")
@click.option(
    "--rate",
    default="auto",
    show_default=True,
    help="Sending rate: 'auto' (ask the receiver), 'max' (unpaced), or a rate with its "
    "unit: 800Mbps, 800M, 1Gbit/s.",
)
@click.option(
    "--service",
    default=None,
    help="For --rate auto, ask this blastrate service URL instead of the receiver.",
)
@click.option(
    "--profile",
    default=None,
    help="For --rate auto, the host profile to use [default: the receiver's own, or with "
    "--service the service's default].",
)
@model_option(
    "For --rate auto: the time-slice model, or the paper's (from the receiver, or from --service)."
)
@click.option(
    "--delay",
    "--propagation-delay",
    "propagation_delay",
    default=None,
    help="One-way delay for --rate auto, e.g. 5ms [default: half the control connection's "
    "round trip, plus --emulate-delay].",
)
@click.option(
    "--emulate-delay",
    default="0",
    show_default=True,
    help="Emulated one-way delay per blast and feedback.",
)
@click.option(
    "--payload",
    default=DEFAULT_PAYLOAD_BYTES,
    show_default=True,
    help="File bytes per datagram.",
)
@click.option("--name", default=None, help="Name to store the file under [default: its own name].")
@_max_rounds_option
@click.option(
    "--timeout", "timeout", default="1h", show_default=True, help="Limit on the whole transfer."
)
@click.option(
    "--no-gso",
    is_flag=True,
    help="Send one datagram per system call instead of batches with UDP segmentation "
    "offload (GSO; used by default where the kernel supports it).",
)
@click.option(
    "--cport",
    default=0,
    show_default=True,
    type=click.IntRange(0, 65535),
    help="Local UDP port the data leaves from (0 = any), as iperf3's --cport.",
)
@_secret_options
@click.option("--json", "as_json", is_flag=True, help="Print the report as JSON.")
def send(
    file: Path,
    to: str,
    rate: str,
    service: str | None,
    profile: str | None,
    model: str,
    propagation_delay: str | None,
    emulate_delay: str,
    payload: int,
    name: str | None,
    max_rounds: int,
    timeout: str,
    no_gso: bool,
    cport: int,
    secret_file: Path | None,
    insecure: bool,
    as_json: bool,
) -> None:
    """Send FILE to a `blastrate receive` with RBUDP."""
    host, port = _host_port(to)
    try:
        total_timeout = parse_duration(timeout, "--timeout")
        # No delay is the default: the parser only takes strictly positive durations.
        delay = (
            0.0
            if emulate_delay.strip() in {"0", "0s", "0ms"}
            else parse_duration(emulate_delay, "--emulate-delay", unit_required=True)
        )
        fixed = (
            None if rate in {"auto", "max"} else parse_bitrate(rate, "--rate", unit_required=True)
        )
        prop = (
            None
            if propagation_delay is None
            else parse_duration(propagation_delay, "--delay", unit_required=True)
        )
    except QuantityError as exc:
        _fail(exc.field, str(exc).split(": ", 1)[-1], EXIT_USAGE)
    if prop is not None and prop + delay > _MAX_ADVICE_DELAY_S:
        # The receiver's bound (datamover.advice.MAX_ADVICE_DELAY_S), checked here so
        # that it is a usage error naming the option, not the receiver's refusal.
        _fail(
            "--delay",
            f"a receiver advises for one-way delays up to {_MAX_ADVICE_DELAY_S:g} s "
            f"(with --emulate-delay), got {prop + delay:g} s",
            EXIT_USAGE,
        )
    if not file.is_file():
        _fail("file", f"{str(file)!r} is not a readable file", EXIT_USAGE)
    secret = _secret_option(secret_file, insecure)
    if secret is None and not insecure:
        _fail(
            "--secret-file",
            f"the receiver needs its secret: give --secret-file PATH or set {SECRET_ENV} "
            "(a receiver started without one printed it), or --insecure for a receiver "
            "started with --insecure",
            EXIT_USAGE,
        )
    size = file.stat().st_size
    rate_bps: float | None = fixed
    source = "fixed" if fixed is not None else rate
    auto: dict[str, Any] | None = None
    ask: dict[str, Any] | None = None
    if rate == "auto":
        if service is not None:
            if prop is None:
                import httpx

                parsed = httpx.URL(service)
                rtt = _round_trip_s(
                    parsed.host, parsed.port or (443 if parsed.scheme == "https" else 80)
                )
                prop = max((rtt or 2e-3) / 2.0, 1e-6)
            rate_bps, auto = advised_rate(
                service, size, prop + delay, timeout_s=10.0, model=model, profile=profile
            )
        else:
            # Without --propagation-delay, the sender measures the control connection's
            # round trip (TCP_INFO) once connected: nothing extra reaches the receiver.
            ask = {"propagation_delay_s": None if prop is None else prop + delay, "model": model}
            if profile is not None:
                ask["profile"] = profile
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
                secret=secret,
                insecure=insecure,
                payload_bytes=payload,
                name=name,
                source_port=cport,
                emulate_delay_s=delay,
                max_rounds=max_rounds,
                total_timeout_s=total_timeout,
                on_round=progress,
                advise=ask,
                gso=not no_gso,
            )
    except SendError as exc:
        code = (
            EXIT_UNREACHABLE
            if exc.field == "to"
            else EXIT_MODEL
            if exc.field == "advice"
            else EXIT_USAGE
            if exc.field in _INPUT_FIELDS
            else 1
        )
        _fail(_SEND_OPTIONS.get(exc.field, exc.field), exc.reason, code)
    except KeyboardInterrupt:
        _fail("transfer", "interrupted", EXIT_INTERRUPTED)
    if ask is not None and report.advice is not None:
        rate_bps = report.rate_bps
        auto = {**report.advice, "computed_by": f"receiver {host}:{port}"}
    if report.gso != "on" and not no_gso:
        # Said once: this sender is slower than it could be here.
        click.echo(f"blastrate: GSO off, one datagram per send: {report.gso}", err=True)
    out: dict[str, Any] = {**report.to_dict(), "rate_source": source}
    out.pop("advice", None)
    if auto is not None:
        out["auto"] = auto
    if as_json:
        click.echo(json.dumps(out, indent=2))
        return
    table = Table(title=f"{report.name}: {report.size} bytes in {report.transfer_s:.3f} s")
    for col in ("round", "packets sent", "bytes sent", "missing after", "loss", "rate (Mbit/s)"):
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
    print_table(table)
    target = "unpaced" if rate_bps is None else f"{rate_bps / 1e6:.1f} Mbit/s ({source})"
    if auto is not None:
        raw_w = auto.get("workload")
        w = raw_w if isinstance(raw_w, dict) else {}
        raw_loss = auto.get("predicted_loss")
        loss = (
            f"{raw_loss:.3g}"
            if isinstance(raw_loss, int | float) and not isinstance(raw_loss, bool)
            else "unknown"
        )
        target += (
            f" from {auto.get('computed_by')}: profile {auto.get('profile')}, "
            f"C={w.get('cpu_tasks')} I={w.get('io_tasks')} m={w.get('cores')}, "
            f"K={auto.get('buffer_packets')} N={auto.get('coalesce_packets')}, "
            f"model {auto.get('model')}, predicted loss {loss}"
        )
        target += provisional_note(auto)
    click.echo(
        f"rate {target}; sha256 {report.sha256} {'verified' if report.digest_ok else 'MISMATCH'}"
    )


@click.command("receive")
@click.option(
    "--port",
    required=True,
    type=click.IntRange(1, 65535),
    help="TCP control port.",
)
@click.option(
    "--udp-port",
    default=None,
    type=click.IntRange(1, 65535),
    help="A fixed UDP data port, for a firewall; then one transfer at a time "
    "[default: a free port per transfer].",
)
@click.option(
    "--output",
    required=True,
    type=click.Path(file_okay=False, dir_okay=True, path_type=Path),
    help="Existing directory for received files.",
)
@click.option(
    "--host",
    default="0.0.0.0",
    show_default=True,
    help="Address to bind: every IPv4 address by default; 127.0.0.1 for this host only, "
    ":: for IPv6.",
)
@click.option(
    "--batch",
    default=16,
    show_default=True,
    type=click.IntRange(1, 4096),
    help="Datagrams read per wake-up (N).",
)
@click.option("--rcvbuf", default=None, help="SO_RCVBUF of the data socket, e.g. 4MiB.")
@click.option(
    "--no-gro",
    is_flag=True,
    help="Read one datagram per system call instead of batches coalesced by UDP GRO (used "
    "by default where the kernel supports it).",
)
@click.option("--max-file-size", default="16GiB", show_default=True, help="Largest file accepted.")
@_max_rounds_option
@click.option(
    "--timeout", "timeout", default="1h", show_default=True, help="Limit on each transfer."
)
@click.option(
    "--idle-timeout",
    default="60s",
    show_default=True,
    help="Longest silence of an authenticated sender before its transfer is dropped.",
)
@click.option(
    "--max-sessions",
    default=4,
    show_default=True,
    type=click.IntRange(1, 256),
    help="Transfers served at once; more senders are told to retry later.",
)
@click.option("--once", is_flag=True, help="Exit after the first complete transfer.")
@click.option(
    "--transfers",
    default=None,
    type=click.IntRange(1, 1_000_000),
    help="Exit after this many complete transfers [default: serve until stopped].",
)
@click.option("--overwrite", is_flag=True, help="Replace a file of the same name.")
@click.option(
    "--profile",
    default=None,
    help="Host profile for the rate this receiver advises to `send --rate auto` "
    "[default: this host's default from `blastrate calibrate`, else a quick calibration "
    "made at first start].",
)
@click.option(
    "--no-calibrate",
    is_flag=True,
    envvar="BLASTRATE_NO_CALIBRATE",
    help="Do not measure this host at first start when it has no profile of its own: "
    "advise from the paper's sx280-2007 until `blastrate calibrate` (env "
    "BLASTRATE_NO_CALIBRATE). A measured profile becomes the default of the profile "
    "database, which every checkout of this user shares (BLASTRATE_DATABASE_URL names "
    "another); as root the measurement makes a veth pair between two network namespaces "
    "of its own.",
)
@_secret_options
@click.option("--json", "as_json", is_flag=True, help="Print each report as JSON.")
def receive(
    port: int,
    udp_port: int | None,
    output: Path,
    host: str,
    batch: int,
    rcvbuf: str | None,
    no_gro: bool,
    max_file_size: str,
    max_rounds: int,
    timeout: str,
    idle_timeout: str,
    max_sessions: int,
    once: bool,
    transfers: int | None,
    overwrite: bool,
    profile: str | None,
    no_calibrate: bool,
    secret_file: Path | None,
    insecure: bool,
    as_json: bool,
) -> None:
    """Receive files sent with `blastrate send` into OUTPUT, until stopped.

    Only senders that hold the shared secret may send.  Without --secret-file or
    BLASTRATE_SECRET the receiver makes a secret and prints it once.  The secret
    decides who may write and keeps every datagram intact; it does not hide the data
    (see the threat model in docs/data-mover.md).
    """
    if once and transfers is not None:
        _fail("--once", "excludes --transfers (it is --transfers 1)", EXIT_USAGE)
    if udp_port is not None and max_sessions != 1:
        if click.get_current_context().get_parameter_source("max_sessions") is (
            click.core.ParameterSource.DEFAULT
        ):
            max_sessions = 1
        else:
            _fail(
                "--udp-port",
                "a fixed UDP port serves one transfer at a time: "
                "drop --max-sessions or set it to 1",
                EXIT_USAGE,
            )
    secret = _secret_option(secret_file, insecure)
    try:
        limits = ReceiverLimits(
            max_file_bytes=parse_size(max_file_size, "--max-file-size"),
            max_rounds=max_rounds,
            total_timeout_s=parse_duration(timeout, "--timeout"),
            idle_timeout_s=parse_duration(idle_timeout, "--idle-timeout"),
            max_sessions=max_sessions,
        )
        buffer = None if rcvbuf is None else parse_size(rcvbuf, "--rcvbuf")
    except QuantityError as exc:
        _fail(exc.field, str(exc).split(": ", 1)[-1], EXIT_USAGE)
    if not output.is_dir():
        _fail("--output", f"{str(output)!r} is not a directory", EXIT_USAGE)
    if profile is not None:
        _profile_check(profile)
    advice = DeferredAdvisor()
    if secret is None and not insecure:
        # The command as this receiver was started (.venv/bin/blastrate, say), and its
        # address when it was bound to one.
        program = shlex.quote(sys.argv[0]) if sys.argv[0].endswith("blastrate") else "blastrate"
        to_host = host if host not in ("0.0.0.0", "::", "") else "HOST"
        made = new_secret()
        secret = made.encode()
        click.echo(
            f"blastrate: no --secret-file or {SECRET_ENV}: this receiver accepts only "
            f"senders that hold this secret (shown once):\n\n    {made}\n\n"
            f"Send with:  {SECRET_ENV}='{made}' {program} send FILE --to {to_host}:{port}\n"
            "(or write it to a file readable only by you and pass --secret-file)",
            err=True,
        )
    try:
        rx = Receiver(
            output,
            secret=secret,
            insecure=insecure,
            host=host,
            port=port,
            udp_port=udp_port,
            batch_packets=batch,
            rcvbuf_bytes=buffer,
            limits=limits,
            overwrite=overwrite,
            advisor=advice,
            gro=not no_gro,
        )
    except OSError as exc:
        _fail("--port", f"cannot bind {host}:{port}: {exc.strerror}", EXIT_USAGE)
    except ReceiveError as exc:
        _fail(exc.field, exc.reason, EXIT_USAGE)
    lock = threading.Lock()

    def done(report: ReceiveReport) -> None:
        with lock:
            if as_json:
                click.echo(json.dumps(report.to_dict()))
            else:
                click.echo(
                    f"received {report.path} ({report.size} bytes) from {report.peer} in "
                    f"{report.rounds} round{'s' if report.rounds != 1 else ''}, "
                    f"{report.elapsed_s:.3f} s; sha256 {report.sha256} "
                    "verified" + ("" if report.gro == "on" or no_gro else f" (GRO {report.gro})")
                )

    def failed(peer: str, exc: ReceiveError) -> None:
        with lock:
            click.echo(
                f"blastrate: transfer from {peer} failed: {exc.field}: {exc.reason}", err=True
            )

    keepers: list[Any] = []
    keepers_lock = threading.Lock()
    stopping = threading.Event()

    def build_advice() -> None:
        # After listening: the models load, K is measured and the keeper starts.  A
        # sender that asks meanwhile waits for this (DeferredAdvisor).  It yields to a
        # transfer that starts first: at a lower priority (this thread only, on Linux),
        # and not until no blast is being received.
        lower_priority()
        # Loading the models holds the interpreter for about a second: not while a
        # transfer that started first is being received.  Build once the receiver has been
        # idle for a second, or at once when a sender asks for advice.
        idle_since = time.monotonic()
        while not stopping.is_set() and not advice.asked.is_set():
            if rx.receiving:
                idle_since = time.monotonic()
            elif time.monotonic() - idle_since >= _BUILD_AFTER_IDLE_S:
                break
            advice.asked.wait(0.05)
        with keepers_lock:
            if stopping.is_set():
                return
        try:
            advisor, keeper = receiver_advice(
                profile,
                batch,
                buffer,
                f"receiver {host}:{port}",
                busy=lambda: rx.receiving > 0,
                calibrate=not no_calibrate,
            )
            with keepers_lock:
                if stopping.is_set():
                    return
                keepers.append(keeper)
                keeper.start()
        except Exception as exc:  # no advice; transfers at a fixed rate still work
            advice.set(None, f"the receiver's advisor failed: {type(exc).__name__}: {exc}")
            click.echo(f"blastrate: warning: no rate advice: {exc}", err=True)
            return
        advice.set(advisor)

    def listening() -> None:
        stale = f"; removed {rx.stale_removed} stale partial files" if rx.stale_removed else ""
        mode = "ANYONE may send (--insecure)" if insecure else "senders with the secret"
        count = 1 if once else transfers
        if count is None:
            until = "until stopped (Ctrl-C)"
        else:
            until = "one transfer" if count == 1 else f"{count} transfers"
        click.echo(
            f"blastrate: receiving into {output} on {host}:{port} from {mode}{stale}; {until}",
            err=True,
        )
        threading.Thread(target=build_advice, name="blastrate-advisor", daemon=True).start()

    # SIGTERM stops serving as Ctrl-C does, but as a normal end (status 0).
    on_main = threading.current_thread() is threading.main_thread()
    previous = signal.signal(signal.SIGTERM, lambda *_: rx.close()) if on_main else None
    with rx:
        try:
            rx.serve(
                transfers=1 if once else transfers,
                on_report=done,
                on_error=failed,
                ready=listening,
            )
        except KeyboardInterrupt:
            # Ctrl-C is how a receiver is stopped: said plainly, not as an error.
            click.echo("blastrate: receiver stopped (interrupted)", err=True)
            sys.exit(EXIT_INTERRUPTED)
        finally:
            if on_main:
                signal.signal(signal.SIGTERM, previous)
            with keepers_lock:
                stopping.set()
            for keeper in keepers:
                keeper.stop()
    sys.exit(EXIT_OK)
