"""``blastrate calibrate``: measure this host's service rates and store them as a profile.

Runs the paper's representative tasks (§III) through :mod:`host.calibration`: the
receive path of ``blastrate receive`` itself (:class:`datamover.receive_path.ReceivePath`,
N datagrams per wake-up, each checked and stored) for mu_net, the random-line reader
with the page cache defeated for mu_io_cpu and mu_disk, and the real socket buffer K in
datagrams; and, on a veth link with RPS to the receiver's core where one can be made,
the kernel's CPU time per datagram k, the receive path's cost per wake-up a and per
datagram b from paced runs (then mu_net is ``1 / (a + N b)``, what a wake-up from sleep
costs counted, as the validation's lab calibration makes it) and the competitors c_C
that the scheduler makes of C busy loops (:mod:`host.kernel_path`; over loopback none
of them can be seen).  Every figure is the mean of several runs, reported with its
spread.  The profile goes to the profile store (``host.store.ProfileStore``) with the
full measurement as provenance.
"""

from __future__ import annotations

import json
import os
import platform
import sys
import time
from pathlib import Path
from typing import Any, NoReturn

import click
from rich.console import Console
from rich.table import Table

from app.schemas.units import QuantityError, parse_bitrate, parse_size
from datamover import HEADER_BYTES
from datamover.receive_path import calibration_receive_path
from datamover.wire import DEFAULT_PAYLOAD_BYTES
from host import HostProfile, WorkloadError
from host.calibration import (
    Spread,
    calibrated_profile,
    calibration_provenance,
    measure_buffer_packets,
    measure_io_service,
    measure_net_service,
    measure_time_slice,
)
from host.kernel_path import measure_kernel_share

from .common import print_table, si_text

__all__ = ["calibrate"]


def _fail(field: str, reason: str, status: int) -> NoReturn:
    click.echo(f"blastrate: error: {field}: {reason}", err=True)
    sys.exit(status)


def _send_sizes_said(provenance: dict[str, Any]) -> str:
    """One line on the send sizes a calibration measured, or why it did not."""
    sends = provenance.get("send_sizes")
    if not isinstance(sends, dict):
        why = provenance.get("send_sizes_note", "not measured")
        return f"sends: {why} (the model takes single datagrams)"
    table = sends.get("buffer_by_send", {})
    most = sends.get("sender_max_bps")
    # From the sender's back-to-back rate up its calls carry one datagram each
    # (transport.SendSizes.send_size): the table ends there.
    top = (
        f"; single datagrams from {si_text(most, 'bit/s')} up (the sender at its most)"
        if isinstance(most, int | float) and most > 0
        else ""
    )
    return (
        f"sends: {sends['seconds_per_send'] * 1e6:.0f} us per call of the sender "
        f"({sends.get('path', '?')}); K by send size "
        + ", ".join(f"{s}: {n}" for s, n in table.items())
        + top
    )


def _spread_row(table: Table, name: str, unit: str, s: Spread, scale: float = 1.0) -> None:
    table.add_row(
        name,
        unit,
        f"{s.mean / scale:.6g}",
        f"{s.std / scale:.3g}",
        f"{s.min / scale:.6g}",
        f"{s.max / scale:.6g}",
        f"{100 * s.cv:.1f}%",
    )


@click.command("calibrate")
@click.option("--name", required=True, help="Name of the host profile to store.")
@click.option(
    "--runs",
    default=5,
    show_default=True,
    type=click.IntRange(1, 100),
    help="Repetitions of each task.",
)
@click.option(
    "--seconds",
    default=2.0,
    show_default=True,
    type=click.FloatRange(0.1, 600),
    help="Length of a network run (s).",
)
@click.option(
    "--reads",
    default=2000,
    show_default=True,
    type=click.IntRange(10, 10**7),
    help="Random-line reads per I/O run.",
)
@click.option(
    "--file-size", default="256MiB", show_default=True, help="Size of the I/O task's file."
)
@click.option(
    "--dir",
    "directory",
    default=None,
    type=click.Path(file_okay=False, path_type=Path),
    help="Where the I/O task's file goes (on the disk to measure) [default: temp dir].",
)
@click.option(
    "--batch",
    default=16,
    show_default=True,
    type=click.IntRange(1, 4096),
    help="Datagrams per wake-up (N).",
)
@click.option(
    "--payload",
    default=DEFAULT_PAYLOAD_BYTES,
    show_default=True,
    type=click.IntRange(1, 65_000),
    help="File bytes per datagram, as `blastrate send --payload`.",
)
@click.option(
    "--rcvbuf",
    default=None,
    help="SO_RCVBUF of the receiving socket for K [default: system default].",
)
@click.option(
    "--line-rate",
    default="measure",
    show_default=True,
    help="Line rate for the profile: 'measure' (the back-to-back sender's rate) or a rate.",
)
@click.option(
    "--kernel-path",
    default="auto",
    show_default=True,
    type=click.Choice(["auto", "veth", "loopback"]),
    help="Where to measure the kernel's cost per datagram k and the competitors c_C: a "
    "veth link with RPS to the receiver's core (needs root and ip), or loopback, where "
    "neither can be seen; auto: veth when it can be made.",
)
@click.option("--no-store", is_flag=True, help="Measure and print only.")
@click.option(
    "--no-default",
    is_flag=True,
    help="Store the profile without making it this host's default (the profile that "
    "`blastrate receive` and `send --rate auto` use when none is named).",
)
@click.option("--json", "as_json", is_flag=True, help="Print the measurement as JSON.")
def calibrate(
    name: str,
    runs: int,
    seconds: float,
    reads: int,
    file_size: str,
    directory: Path | None,
    batch: int,
    payload: int,
    rcvbuf: str | None,
    line_rate: str,
    kernel_path: str,
    no_store: bool,
    no_default: bool,
    as_json: bool,
) -> None:
    """Measure mu_net, mu_io_cpu, mu_disk, K, the scheduler's time slice, the receive
    path's cost per wake-up and the kernel's part of the receiver's core (k, c_C) on this
    host, store them as profile NAME and make it this host's default (unless
    --no-default)."""
    from datamover.send_calibration import send_sizes_provenance  # the product's sender

    try:
        file_bytes = parse_size(file_size, "file_size")
        buffer = None if rcvbuf is None else parse_size(rcvbuf, "rcvbuf")
        fixed_line = None if line_rate == "measure" else parse_bitrate(line_rate, "line_rate")
    except QuantityError as exc:
        _fail(exc.field, str(exc).split(": ", 1)[-1], 2)
    if len(os.sched_getaffinity(0)) < 2:
        _fail("cpus", "calibration needs two cores: the receiver's and the sender's", 2)
    console = Console(stderr=True)
    started = time.time()
    try:
        with console.status("calibrating") as status:
            status.update("socket buffer K")
            k = measure_buffer_packets(HEADER_BYTES + payload, rcvbuf_bytes=buffer)
            datagrams, path = calibration_receive_path(payload)
            status.update(f"receive path: {runs} runs of {seconds:g} s")
            net = measure_net_service(
                batch_packets=batch,
                payload_bytes=payload,
                datagrams=datagrams,
                receive_path=path,
                runs=runs,
                seconds=seconds,
            )
            line_guess = fixed_line if fixed_line is not None else net.sender_rate_bps.mean
            status.update(f"kernel path ({kernel_path}): k and c_C")
            kernel = measure_kernel_share(
                rx_cpu=net.cpus[0],
                tx_cpu=net.cpus[1],
                line_rate_bps=line_guess,
                sender_rate_bps=net.sender_rate_bps.mean,
                datagrams=datagrams,
                payload_bytes=payload,
                receive_path=path,
                batch_packets=batch,
                capacity_pps=net.mu_net.mean * batch,
                runs=runs,
                path=kernel_path,
            )
            status.update("the sender's sends: K per send size, time per call")
            sends = send_sizes_provenance(
                payload_bytes=payload,
                buffer_packets=k,
                rate_bps=min(line_guess, net.sender_rate_bps.mean),
                rcvbuf_bytes=buffer,
                receiver_cpu=net.cpus[0],
                sender_cpu=net.cpus[1],
            )
            status.update(f"I/O task: {runs} runs of {reads} random lines")
            io = measure_io_service(
                directory=directory, file_bytes=file_bytes, runs=runs, reads=reads
            )
            status.update(f"scheduler time slice: {runs} runs of 1 s")
            time_slice = measure_time_slice(runs=runs, seconds=1.0)
    except (OSError, ValueError, RuntimeError) as exc:
        _fail("calibration", str(exc), 1)
    except KeyboardInterrupt:
        _fail("calibration", "interrupted", 130)
    line = fixed_line if fixed_line is not None else net.sender_rate_bps.mean
    try:
        profile: HostProfile = calibrated_profile(
            name, net, io, buffer_packets=k, line_rate_bps=line, mu_net=kernel.mu_net(min(batch, k))
        )
    except WorkloadError as exc:
        _fail(exc.field or "name", str(exc), 2)
    provenance = calibration_provenance(
        net,
        io,
        time_slice,
        method="blastrate calibrate (host.calibration, paper §III representative tasks)",
        started_unix=started,
        buffer_packets=k,
        rcvbuf_bytes=buffer,
        line_rate_source="measured sender" if fixed_line is None else "given",
        **kernel.provenance(),
        **sends,
    )
    stored = False
    made_default = False
    if not no_store:
        try:
            from host.store import ProfileStore  # the profile store (host-live)
        except ImportError:
            _fail("store", "this build has no profile store (host.store); use --no-store --json", 1)
        try:
            store = ProfileStore()
            store.put(profile, provenance=provenance)
            if not no_default:
                store.set_default(profile.name)
                made_default = True
        except WorkloadError as exc:
            _fail(exc.field or "name", str(exc), 2)
        except Exception as exc:  # the store's own failure (database unreachable, ...)
            _fail("store", f"{type(exc).__name__}: {exc}", 1)
        stored = True
    if as_json:
        click.echo(
            json.dumps(
                {
                    "profile": profile.to_dict(),
                    "stored": stored,
                    "host_default": made_default,
                    "provenance": provenance,
                },
                indent=2,
            )
        )
        return
    table = Table(title=f"calibration of {platform.node()} ({runs} runs)")
    for col in ("rate", "unit", "mean", "std", "min", "max", "CV"):
        table.add_column(col, justify="right")
    _spread_row(table, "mu_net", "1/s", net.mu_net)
    _spread_row(table, "mu_io_cpu", "1/s", io.mu_io_cpu)
    _spread_row(table, "mu_disk", "1/s", io.mu_disk)
    _spread_row(table, "sender rate", "Mbit/s", net.sender_rate_bps, 1e6)
    _spread_row(table, "full wake-ups", "share", net.full_fraction)
    _spread_row(table, "time slice", "ms", time_slice, 1e-3)
    if kernel.kernel_s is not None:
        _spread_row(table, "kernel k", "us/datagram", kernel.kernel_s, 1e-6)
    print_table(table)
    if kernel.wakeup is not None:
        fit = kernel.wakeup
        used = (
            f"profile's mu_net = 1/(a + N b) = {profile.mu_net:.4g}/s"
            if fit.usable
            else f"not used ({'a' if fit.per_wakeup_s <= 0 else 'b'} came out 0): "
            "profile's mu_net as measured above"
        )
        click.echo(
            f"receive path: {fit.per_wakeup_s * 1e6:.1f} us per wake-up (a), "
            f"{fit.per_datagram_s * 1e6:.2f} us per datagram (b) over {len(fit.runs)} "
            f"paced runs; {used}"
        )
    if kernel.effective_competitors:
        shown = ", ".join(f"{c:.3g}" for c in kernel.effective_competitors)
        click.echo(f"competitors c_C for C = 1..{len(kernel.effective_competitors)}: {shown}")
    click.echo(f"kernel path: {kernel.path} ({kernel.note})")
    click.echo(_send_sizes_said(sends))
    click.echo(
        f"K = {k} datagrams of {HEADER_BYTES + payload} bytes; N = {batch}; I/O via {io.method}"
    )
    where = "stored" if stored else "not stored (--no-store)"
    if made_default:
        where += " and made this host's default"
    click.echo(f"profile {name!r} {where}")


if __name__ == "__main__":  # until the lead registers it: python -m app.commands.host_calibrate
    calibrate()
