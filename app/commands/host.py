"""``blastrate probe``: what the live probe reads on this host (or on a service's host).

Samples the host's tasks over ``--interval`` (a spinner shows on stderr meanwhile) and
prints C, I, m, d and the NIC's parameters, each with where it came from; unread values
show the reason and the named default used instead.  With ``--server URL`` it shows the
latest window of the service's background probe instead (``GET /host``).
"""

from __future__ import annotations

from typing import Any

import click

from .common import print_table, stdout_console
from .service_client import CommandError, call_service, print_json

__all__ = ["probe"]


def _show(body: dict[str, Any]) -> None:
    from rich.table import Table

    table = Table("", "value", "source", title=f"probe over {body['window_s']:.3g} s")
    for group in ("workload", "nic"):
        for name, reading in body[group].items():
            shown = reading["value"]
            note = reading["source"]
            if "unread" in reading:
                note += f"  [unread: {reading['unread']}]"
            table.add_row(
                name,
                "" if shown is None else f"{shown:g}" if isinstance(shown, float) else str(shown),
                note,
            )
    console = stdout_console()
    print_table(table, console)
    for task in body.get("tasks", []):
        console.print(
            f"{task['kind']:4} pid {task['pid']} tid {task['tid']} {task['comm']}: {task['reason']}"
        )


@click.command()
@click.option(
    "--interval", default="2s", show_default=True, help="Sampling window: seconds, or 500ms, 2s."
)
@click.option("--interface", metavar="IF", help="Receiving interface (default: default route's).")
@click.option(
    "--samples", type=int, default=20, show_default=True, help="State samples per window."
)
@click.option("--tasks", is_flag=True, help="Also list the CPU- and I/O-bound tasks and why.")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@click.option("--server", metavar="URL", help="Show a running service's latest probe instead.")
def probe(
    interval: str,
    interface: str | None,
    samples: int,
    tasks: bool,
    as_json: bool,
    server: str | None,
) -> None:
    """Probe this host's workload (C, I, m, d) and NIC (line rate, payload, K, N)."""
    if server:
        _, body = call_service(server, "GET", "/host", params={"tasks": str(tasks).lower()})
    else:
        from app.schemas.units import QuantityError, parse_duration
        from host import WorkloadError
        from host.probe import probe_host

        try:
            window = parse_duration(interval, "interval")
        except QuantityError as exc:
            raise CommandError(f"--interval: {exc.reason}") from None
        try:
            from rich.console import Console

            with Console(stderr=True).status(f"sampling the host's tasks for {window:g} s"):
                result = probe_host(interval_s=window, samples=samples, interface=interface)
        except WorkloadError as exc:
            raise CommandError(f"--{exc.field}: {exc}") from None
        body = result.to_dict(tasks=tasks)
    if as_json:
        print_json(body)
    else:
        _show(body)
