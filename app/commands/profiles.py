"""``blastrate profiles``: list, show, store and delete host profiles.

Locally the commands use the profile store (:class:`host.store.ProfileStore`, the
database of ``BLASTRATE_DATABASE_URL`` or the user data directory); with ``--server URL``
they use a running service's ``/profiles`` endpoints instead.  Built-in profiles are
read-only.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import click

from .common import FINITE, print_table
from .local import profile_database_error
from .service_client import CommandError, call_service, print_json

__all__ = ["profiles"]

_FIELDS = (
    "mu_io_cpu",
    "mu_disk",
    "mu_net",
    "buffer_packets",
    "coalesce_packets",
    "line_rate_bps",
    "packet_payload_bytes",
)
_json = click.option("--json", "as_json", is_flag=True, help="Print JSON.")
_server = click.option(
    "--server", metavar="URL", default=None, help="Use a running service instead of this host."
)


def _store() -> Any:
    from host.store import ProfileStore

    return ProfileStore()


def _local(action: Any) -> Any:
    """Run a store action with its errors as one-line CLI errors."""
    from host import WorkloadError
    from host.store import ProfileStoreError

    try:
        return action()
    except WorkloadError as exc:
        # Named as typed: the NAME argument, or the option that sets the field.
        field = exc.field or "NAME"
        typed = "NAME" if field in ("profile", "name") else "--" + field.replace("_", "-")
        raise CommandError(f"{typed}: {exc}") from None
    except ProfileStoreError as exc:
        raise profile_database_error(exc) from None


def _entry_dict(entry: Any) -> dict[str, Any]:
    out: dict[str, Any] = {**entry.profile.to_dict(), "built_in": entry.built_in}
    if entry.provenance is not None:
        out["provenance"] = entry.provenance
    if entry.updated_at is not None:
        out["updated_at"] = entry.updated_at.isoformat()
    return out


def _table(rows: list[dict[str, Any]]) -> None:
    from rich.table import Table

    table = Table(
        "name", "kind", "mu_io_cpu/s", "mu_disk/s", "mu_net/s", "K", "N", "line bit/s", "S_pkt B"
    )
    for p in rows:
        kind = "built-in" if p["built_in"] else "stored"
        table.add_row(
            p["name"],
            kind + (", default" if p.get("default") else ""),
            f"{p['mu_io_cpu']:g}",
            f"{p['mu_disk']:g}",
            f"{p['mu_net']:g}",
            str(p["buffer_packets"]),
            str(p["coalesce_packets"]),
            f"{p['line_rate_bps']:g}",
            str(p["packet_payload_bytes"]),
        )
    print_table(table)


@click.group(invoke_without_command=True)
@click.pass_context
def profiles(ctx: click.Context) -> None:
    """Host profiles: the built-in ones (read-only) and the stored ones.

    Without a subcommand, lists them, as `profiles list` does."""
    if ctx.invoked_subcommand is None:
        ctx.invoke(list_profiles, as_json=False, server=None)


@profiles.command("list")
@_json
@_server
def list_profiles(as_json: bool, server: str | None) -> None:
    """List every profile: built-in, then stored."""
    if server:
        _, body = call_service(server, "GET", "/profiles")
        rows, default = body["profiles"], body.get("default")
    else:
        from host import DEFAULT_PROFILE

        store = _store()
        rows = [_entry_dict(e) for e in _local(store.entries)]
        default = _local(store.default_name) or DEFAULT_PROFILE
    for row in rows:  # the one a request that names no profile uses
        if row["name"] == default:
            row["default"] = True
    if as_json:
        print_json(rows)
    else:
        _table(rows)


@profiles.command("show")
@click.argument("name")
@_json
@_server
def show_profile(name: str, as_json: bool, server: str | None) -> None:
    """Show the profile NAME with its provenance."""
    if server:
        _, row = call_service(server, "GET", f"/profiles/{name}")
    else:
        row = _entry_dict(_local(lambda: _store().entry(name)))
    if as_json:
        print_json(row)
        return
    for key, value in row.items():
        shown = json.dumps(value) if isinstance(value, dict) else value
        click.echo(f"{key:22} {shown}")


def _read_json_file(path: str) -> dict[str, Any]:
    try:
        text = sys.stdin.read(1_000_001) if path == "-" else Path(path).read_text()
    except OSError as exc:
        raise CommandError(f"--from-json: cannot read {path}: {exc.strerror or exc}") from None
    if len(text) > 1_000_000:
        raise CommandError("--from-json: file larger than 1 MB")
    try:
        data = json.loads(text)
    except ValueError as exc:
        raise CommandError(f"--from-json: not JSON: {exc}") from None
    if not isinstance(data, dict):
        raise CommandError("--from-json: must hold a JSON object of profile fields")
    return data


@profiles.command("put")
@click.argument("name")
@click.option(
    "--from-json", "from_json", metavar="FILE", help="JSON object of the fields ('-': stdin)."
)
@click.option("--base", metavar="PROFILE", help="Start from this profile's values.")
@click.option("--mu-io-cpu", type=FINITE, help="I/O task processor-to-disk rate (1/s).")
@click.option("--mu-disk", type=FINITE, help="Disk service rate (1/s).")
@click.option("--mu-net", type=FINITE, help="Interrupt service rate alone on a core (1/s).")
@click.option("--buffer-packets", type=int, help="NIC buffer K (packets).")
@click.option("--coalesce-packets", type=int, help="Interrupt coalescing N (packets).")
@click.option("--line-rate", help="Line rate: bit/s, or 1Gbps, 950Mbps.")
@click.option("--packet-payload", help="Payload per packet S_pkt: bytes, or 1468B.")
@_json
@_server
def put_profile(
    name: str,
    from_json: str | None,
    base: str | None,
    mu_io_cpu: float | None,
    mu_disk: float | None,
    mu_net: float | None,
    buffer_packets: int | None,
    coalesce_packets: int | None,
    line_rate: str | None,
    packet_payload: str | None,
    as_json: bool,
    server: str | None,
) -> None:
    """Store the profile NAME (created, or replacing a stored one).

    The values come from --from-json FILE (the fields in SI units, optionally a
    "provenance" object), from --base PROFILE, and from the value options, which win.
    """
    from app.schemas.units import QuantityError, parse_bitrate, parse_size

    values: dict[str, Any] = {}
    provenance: dict[str, Any] | None = None
    if base:
        if server:
            _, row = call_service(server, "GET", f"/profiles/{base}")
        else:
            row = _local(lambda: _store().get(base)).to_dict()
        values.update({k: row[k] for k in _FIELDS})
    if from_json:
        data = _read_json_file(from_json)
        provenance = data.pop("provenance", None)
        data.pop("name", None)
        unknown = sorted(set(data) - set(_FIELDS))
        if unknown:
            raise CommandError(f"--from-json: unknown field(s) {', '.join(unknown)}")
        values.update(data)
    try:
        given = {
            "mu_io_cpu": mu_io_cpu,
            "mu_disk": mu_disk,
            "mu_net": mu_net,
            "buffer_packets": buffer_packets,
            "coalesce_packets": coalesce_packets,
            "line_rate_bps": None if line_rate is None else parse_bitrate(line_rate, "line_rate"),
            "packet_payload_bytes": None
            if packet_payload is None
            else parse_size(packet_payload, "packet_payload"),
        }
    except QuantityError as exc:
        raise CommandError(f"--{exc.field.replace('_', '-')}: {exc.reason}") from None
    values.update({k: v for k, v in given.items() if v is not None})
    missing = [f for f in _FIELDS if f not in values]
    if missing:
        options = ", ".join(
            "--" + f.replace("_bps", "").replace("_bytes", "").replace("_", "-") for f in missing
        )
        raise CommandError(f"{options}: required (or give --from-json or --base)")
    if server:
        body = {**values, **({"provenance": provenance} if provenance is not None else {})}
        status, row = call_service(server, "PUT", f"/profiles/{name}", json=body)
        created = status == 201
    else:
        from host import HostProfile

        store = _store()
        entry, created = _local(
            lambda: store.put_entry(HostProfile(name=name, **values), provenance=provenance)
        )
        row = _entry_dict(entry)
    if as_json:
        print_json({"created": created, "profile": row})
    else:
        click.echo(f"{'created' if created else 'replaced'} profile {name}")


@profiles.command("default")
@click.argument("name", required=False)
@click.option("--clear", is_flag=True, help="Go back to the built-in sx280-2007.")
@_json
def default_profile(name: str | None, clear: bool, as_json: bool) -> None:
    """Show or set this host's default profile: the one every computation uses when it
    names none (`rate`, `curve`, the service, the receiver's advice).

    Without NAME, shows it; with NAME, makes that profile the default; `--clear` goes back
    to sx280-2007.  `blastrate calibrate --name NAME` sets it too.  This host's database
    only (BLASTRATE_DATABASE_URL); a service reads the same database.
    """
    from host import DEFAULT_PROFILE

    store = _store()
    if name is not None and clear:
        raise CommandError("--clear: give NAME or --clear, not both")
    if name is not None or clear:
        _local(lambda: store.set_default(None if clear else name))
    current = _local(store.default_name)
    shown = current or DEFAULT_PROFILE
    if as_json:
        print_json({"default": shown, "set": current is not None})
    else:
        click.echo(shown if current else f"{shown} (built-in; no default set)")


@profiles.command("delete")
@click.argument("name")
@_json
@_server
def delete_profile(name: str, as_json: bool, server: str | None) -> None:
    """Delete the stored profile NAME (built-in profiles cannot be deleted)."""
    if server:
        call_service(server, "DELETE", f"/profiles/{name}")
    elif not _local(lambda: _store().delete(name)):
        raise CommandError(f"NAME: no stored profile {name[:64]!r}")
    if as_json:
        print_json({"deleted": name})
    else:
        click.echo(f"deleted profile {name}")
