"""The ``blastrate`` command line.

Commands::

    blastrate rate  -C 2 -I 1 --file-size 500MB --delay 100ms   # effective bottleneck rate
    blastrate curve -C 2 -I 1 --file-size 500MB --delay 100ms --output curve.csv
    blastrate solve net.json                                     # a general SRN (or net.pnml)
    blastrate profiles                                           # the host profiles
    blastrate serve --host 127.0.0.1 --port 8000 --workers 1     # the HTTP service

``rate``, ``curve``, ``solve`` and ``profiles`` compute locally, or ask a running service
with ``--server URL``.  Errors are one line on stderr, and the exit status says what went
wrong:

====  ==========================================================================
0     success
1     unexpected internal error
2     usage error or invalid input (a bad option, an unreadable file, a bad value)
3     the model has no answer (the transfer never completes, a chain that is not
      ergodic, a limit reached)
4     the server is unreachable, timed out or busy
5     the server answered with an unexpected error
====  ==========================================================================
"""

from __future__ import annotations

import argparse
import csv
import io
import json
import os
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, NoReturn

__all__ = [
    "EXIT_INTERNAL",
    "EXIT_MODEL",
    "EXIT_OK",
    "EXIT_SERVER",
    "EXIT_UNREACHABLE",
    "EXIT_USAGE",
    "main",
]

EXIT_OK = 0
EXIT_INTERNAL = 1
EXIT_USAGE = 2
EXIT_MODEL = 3
EXIT_UNREACHABLE = 4
EXIT_SERVER = 5

_LOG_LEVELS = ("debug", "info", "warning", "error")

# Library / API field -> the option that sets it, for one-line errors.
_OPTION_OF = {
    "cpu_tasks": "--cpu-tasks",
    "io_tasks": "--io-tasks",
    "tasks": "--cpu-tasks/--io-tasks",
    "cores": "--cores",
    "disks": "--disks",
    "profile": "--profile",
    "name": "--profile",
    "mu_io_cpu": "--mu-io-cpu",
    "mu_disk": "--mu-disk",
    "mu_net": "--mu-net",
    "buffer_packets": "--buffer-packets",
    "coalesce_packets": "--coalesce-packets",
    "line_rate": "--line-rate",
    "line_rate_bps": "--line-rate",
    "packet_payload": "--packet-payload",
    "packet_payload_bytes": "--packet-payload",
    "file_size": "--file-size",
    "file_size_bytes": "--file-size",
    "propagation_delay": "--delay",
    "propagation_delay_s": "--delay",
    "nic_service": "--nic-service",
    "curve_points": "--points",
    "loss": "the host (no sending rate completes)",
}


class CliError(Exception):
    """A failure to report on one line, with the exit status."""

    def __init__(self, message: str, status: int) -> None:
        super().__init__(message)
        self.status = status


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        self.exit(EXIT_USAGE, f"{self.prog}: error: {message}\n")


# -- formatting ----------------------------------------------------------------------------


def _si(value: float, unit: str) -> str:
    for factor, prefix in ((1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k")):
        if abs(value) >= factor:
            return f"{value / factor:.4g} {prefix}{unit}"
    return f"{value:.4g} {unit}"


def _seconds(value: float) -> str:
    if value >= 1:
        return f"{value:.4g} s"
    if value >= 1e-3:
        return f"{value * 1e3:.4g} ms"
    return f"{value * 1e6:.4g} us"


def _rate_summary(body: dict[str, Any]) -> str:
    inputs = body["inputs"]
    w, h, t = inputs["workload"], inputs["host"], inputs["transfer"]
    limited = "the end system" if body["limited_by"] == "end-system" else "the line rate"
    rows = [
        (
            "effective bottleneck rate",
            f"{_si(body['effective_bottleneck_rate_bps'], 'bit/s')} (limited by {limited})",
        ),
        (
            "transfer time",
            f"{_seconds(body['transfer_time_s'])} for {_si(t['file_size_bytes'], 'B')} "
            f"with {_seconds(t['propagation_delay_s'])} one-way delay",
        ),
        ("loss probability", f"{body['loss_probability']:.3e}"),
        ("rounds", str(body["rounds"])),
        ("interrupt service rate", f"{body['interrupt_service_rate_per_s']:,.1f} /s"),
        (
            "workload",
            f"C={w['cpu_tasks']} I={w['io_tasks']} cores={w['cores']} disks={w['disks']}",
        ),
        (
            "host",
            f"{h['profile']}: K={h['buffer_packets']} N={h['coalesce_packets']} "
            f"line {_si(h['line_rate_bps'], 'bit/s')}, payload {h['packet_payload_bytes']} B, "
            f"NIC service {inputs['nic_service']}",
        ),
    ]
    width = max(len(k) for k, _ in rows)
    return "\n".join(f"{k:<{width}}  {v}" for k, v in rows)


def _curve_rows(body: dict[str, Any]) -> list[dict[str, Any]]:
    curve = body["curve"]
    return [
        {"send_rate_bps": r, "transfer_time_s": t, "loss_probability": loss, "completes": ok}
        for r, t, loss, ok in zip(
            curve["send_rate_bps"],
            curve["total_s"],
            curve["loss"],
            curve["completes"],
            strict=True,
        )
    ]


def _curve_csv(rows: list[dict[str, Any]]) -> str:
    out = io.StringIO()
    writer = csv.DictWriter(out, fieldnames=list(rows[0]), lineterminator="\n")
    writer.writeheader()
    for row in rows:
        writer.writerow({k: "" if v is None else v for k, v in row.items()})
    return out.getvalue()


def _curve_table(body: dict[str, Any], rows: list[dict[str, Any]]) -> str:
    lines = [f"{'send rate':>14}  {'transfer time':>14}  {'loss':>10}"]
    for row in rows:
        t = "never" if row["transfer_time_s"] is None else _seconds(row["transfer_time_s"])
        lines.append(
            f"{_si(row['send_rate_bps'], 'bit/s'):>14}  {t:>14}  {row['loss_probability']:>10.3e}"
        )
    lines.append(
        f"best: {_si(body['effective_bottleneck_rate_bps'], 'bit/s')} -> "
        f"{_seconds(body['transfer_time_s'])}"
    )
    return "\n".join(lines)


def _solve_summary(body: dict[str, Any]) -> str:
    lines = [
        f"states {body['n_states']}, edges {body['n_edges']}, vanishing {body['n_vanishing']}, "
        f"dead {body['n_dead_states']} ({body['analysis']}, solved in {body['solved_in']})"
    ]
    if body.get("steady_state"):
        ss = body["steady_state"]
        lines.append(f"residual ||pi Q||_1 = {ss['residual']:.3e} ({ss['method']})")
        lines.extend(_measure_lines(ss["measures"]))
    if body.get("transient"):
        tr = body["transient"]
        lines.append(
            f"times {tr['times']} ({tr['method']}, error bound {max(tr['error_bound']):.1e})"
        )
        lines.extend(_measure_lines(tr["measures"]))
    if body.get("absorption"):
        ab = body["absorption"]
        lines.append(
            f"time to absorption: mean {ab['mean_s']:.6g} s, variance {ab['variance_s2']:.6g} s^2"
        )
        for q in ab["quantiles"]:
            lines.append(f"  p{q['level'] * 100:g} = {q['seconds']:.6g} s")
    return "\n".join(lines)


def _measure_lines(measures: dict[str, Any]) -> list[str]:
    lines = []
    for group, label in (
        ("rewards", "reward"),
        ("accumulated_rewards", "accumulated reward over [0, t]"),
        ("probabilities", "probability"),
        ("mean_tokens", "mean tokens"),
        ("throughput", "throughput"),
    ):
        for name, value in (measures.get(group) or {}).items():
            lines.append(f"  {label} {name} = {value}")
    return lines


# -- errors --------------------------------------------------------------------------------


def _problem_error(body: dict[str, Any], status: int | None = None) -> CliError:
    from .problems import PROBLEM_TYPES

    slug = str(body.get("type", "")).rsplit("/", 1)[-1]
    kind = PROBLEM_TYPES.get(slug)
    exit_status = kind.cli_exit if kind else (EXIT_SERVER if (status or 0) >= 500 else EXIT_USAGE)
    if status is not None and status >= 500:
        exit_status = EXIT_SERVER if slug != "not-ready" else EXIT_UNREACHABLE
    errors = body.get("errors") or []
    if errors:
        first = errors[0]
        where = str(first.get("field", ""))
        name = where.split(".", 1)[-1] if where.startswith(("query.", "body.")) else where
        leaf = name.rsplit(".", 1)[-1]
        option = _OPTION_OF.get(leaf, name)
        return CliError(f"{option}: {first.get('reason', body.get('detail', ''))}", exit_status)
    return CliError(str(body.get("detail") or body.get("title") or "error"), exit_status)


def _local(compute: Callable[[], Any]) -> Any:
    """Run a local computation; library errors become one-line CLI errors."""
    from .problems import ProblemError, translated_errors

    try:
        with translated_errors():
            return compute()
    except ProblemError as problem:
        raise _problem_error(problem.to_dict("")) from None


# -- the server ----------------------------------------------------------------------------


def _request(server: str, method: str, path: str, timeout: float, **kwargs: Any) -> dict[str, Any]:
    import httpx

    url = server.rstrip("/") + path
    try:
        response = httpx.request(method, url, timeout=timeout, **kwargs)
    except httpx.TimeoutException:
        raise CliError(
            f"server {server} did not answer within {timeout:g} s", EXIT_UNREACHABLE
        ) from None
    except httpx.HTTPError as exc:
        raise CliError(f"cannot reach server {server}: {exc}", EXIT_UNREACHABLE) from None
    try:
        body = response.json()
    except ValueError:
        raise CliError(
            f"server {server} answered {response.status_code} without JSON", EXIT_SERVER
        ) from None
    if response.status_code >= 400:
        if response.status_code == 429:
            raise CliError(str(body.get("detail", "server busy")), EXIT_UNREACHABLE)
        raise _problem_error(body, response.status_code)
    if not isinstance(body, dict):
        raise CliError(f"server {server} answered an unexpected document", EXIT_SERVER)
    return body


# -- commands ------------------------------------------------------------------------------


def _method_inputs(
    args: argparse.Namespace,
) -> tuple[dict[str, Any], dict[str, Any], dict[str, Any]]:
    """Workload, host and transfer dicts in SI units (human forms parsed here, once)."""
    from .units import parse_bitrate, parse_duration, parse_size

    workload = {
        "cpu_tasks": args.cpu_tasks,
        "io_tasks": args.io_tasks,
        "cores": args.cores,
        "disks": args.disks,
    }
    host = {
        "profile": args.profile,
        "mu_io_cpu": args.mu_io_cpu,
        "mu_disk": args.mu_disk,
        "mu_net": args.mu_net,
        "buffer_packets": args.buffer_packets,
        "coalesce_packets": args.coalesce_packets,
        "line_rate_bps": None
        if args.line_rate is None
        else parse_bitrate(args.line_rate, "line_rate"),
        "packet_payload_bytes": None
        if args.packet_payload is None
        else parse_size(args.packet_payload, "packet_payload"),
    }
    transfer = {
        "file_size_bytes": parse_size(args.file_size, "file_size"),
        "propagation_delay_s": parse_duration(args.delay, "propagation_delay"),
    }
    return workload, host, transfer


def _bottleneck(args: argparse.Namespace, options: dict[str, Any]) -> dict[str, Any]:
    if args.server:
        workload, host, transfer = _local(lambda: _method_inputs(args))
        body = {
            "workload": workload,
            "host": {k: v for k, v in host.items() if v is not None},
            "transfer": transfer,
            "nic_service": args.nic_service,
            **options,
        }
        return _request(args.server, "POST", "/bottleneck-rate", args.timeout, json=body)

    def compute() -> dict[str, Any]:
        from .bottleneck import compute_bottleneck, resolve_inputs

        workload, host, transfer = _method_inputs(args)
        inputs = resolve_inputs(workload, host, transfer, args.nic_service).to_dict()
        return compute_bottleneck(inputs, options)

    result: dict[str, Any] = _local(compute)
    return result


def _cmd_rate(args: argparse.Namespace) -> int:
    body = _bottleneck(args, {"curve_points": 200})
    print(json.dumps(body, indent=2) if args.json else _rate_summary(body))
    return EXIT_OK


def _cmd_curve(args: argparse.Namespace) -> int:
    if not 2 <= args.points <= 100_000:
        raise CliError("--points: must lie in 2..100000", EXIT_USAGE)
    body = _bottleneck(args, {"curve_points": args.points, "include_curve": True})
    rows = _curve_rows(body)
    fmt = args.format
    if fmt is None:
        suffix = Path(args.output).suffix.lower() if args.output else ""
        fmt = {".json": "json", ".csv": "csv"}.get(suffix, "csv" if args.output else "table")
    if fmt == "json":
        text = json.dumps(
            {
                "effective_bottleneck_rate_bps": body["effective_bottleneck_rate_bps"],
                "transfer_time_s": body["transfer_time_s"],
                "inputs": body["inputs"],
                "curve": rows,
            },
            indent=2,
        )
    elif fmt == "csv":
        text = _curve_csv(rows)
    else:
        text = _curve_table(body, rows)
    if args.output:
        try:
            Path(args.output).write_text(text if text.endswith("\n") else text + "\n")
        except OSError as exc:
            raise CliError(
                f"--output: cannot write {args.output}: {exc.strerror}", EXIT_USAGE
            ) from None
        print(f"wrote {len(rows)} points to {args.output}", file=sys.stderr)
    else:
        print(text.rstrip("\n"))
    return EXIT_OK


def _read_net_request(path: str, analysis: str | None, times: str | None) -> dict[str, Any]:
    from .net_files import NetFileError, read_net_request

    try:
        request = read_net_request(path)  # JSON, or PNML (.pnml/.xml or '<...')
    except NetFileError as exc:
        raise CliError(str(exc), EXIT_USAGE) from None
    if analysis:
        request["analysis"] = analysis
    if times:
        try:
            request["times"] = [float(t) for t in times.split(",") if t.strip()]
        except ValueError:
            raise CliError("--times: expected comma-separated seconds", EXIT_USAGE) from None
    return request


def _cmd_solve(args: argparse.Namespace) -> int:
    from pydantic import ValidationError

    from .schemas import SrnSolveRequest

    raw = _read_net_request(args.net, args.analysis, args.times)
    if args.server:
        body = _request(args.server, "POST", "/srn/solve", args.timeout, json=raw)
    else:
        try:
            request = SrnSolveRequest.model_validate(raw).model_dump(mode="json")
        except ValidationError as exc:
            first = exc.errors()[0]
            where = ".".join(str(p) for p in first["loc"])
            raise CliError(f"{args.net}: {where}: {first['msg']}", EXIT_USAGE) from None

        def compute() -> dict[str, Any]:
            from .settings import Settings
            from .srn_solve import SolveBudget, solve_srn

            s = Settings()
            budget = SolveBudget(
                max_states=s.max_states,
                max_edges=s.max_edges,
                max_transitions=s.max_transitions,
                max_places=s.max_places,
                max_expression_length=s.max_expression_length,
                max_time_points=s.max_time_points,
                max_distribution_states=s.max_distribution_states,
            )
            return {**solve_srn(request, budget), "solved_in": "process"}

        body = _local(compute)
    print(json.dumps(body, indent=2) if args.json else _solve_summary(body))
    return EXIT_OK


def _cmd_convert(args: argparse.Namespace) -> int:
    # Until the Click CLI lands, this mirrors app.commands.srn_files.convert.
    from .net_files import NetFileError, net_format, read_net_request, write_net

    try:
        net = read_net_request(args.source)["net"]
        if args.to:
            fmt = args.to
        elif args.target != "-" and Path(args.target).suffix.lower() in (".json", ".pnml", ".xml"):
            fmt = net_format(args.target)
        else:
            fmt = "pnml" if args.source == "-" or net_format(args.source) == "json" else "json"
        write_net(net, args.target, fmt, dialect=args.dialect)
    except NetFileError as exc:
        raise CliError(str(exc), EXIT_USAGE) from None
    return EXIT_OK


def _cmd_profiles(args: argparse.Namespace) -> int:
    if args.server:
        body = _request(args.server, "GET", "/profiles", args.timeout)
    else:
        from host import DEFAULT_PROFILE, HOST_PROFILES

        body = {
            "default": DEFAULT_PROFILE,
            "profiles": [p.to_dict() for _, p in sorted(HOST_PROFILES.items())],
        }
    if args.json:
        print(json.dumps(body, indent=2))
        return EXIT_OK
    for p in body["profiles"]:
        mark = " (default)" if p["name"] == body["default"] else ""
        print(
            f"{p['name']}{mark}: mu_io_cpu {p['mu_io_cpu']:g}/s, mu_disk {p['mu_disk']:g}/s, "
            f"mu_net {p['mu_net']:g}/s, K={p['buffer_packets']}, N={p['coalesce_packets']}, "
            f"line {_si(p['line_rate_bps'], 'bit/s')}, payload {p['packet_payload_bytes']} B"
        )
    return EXIT_OK


def _cmd_serve(args: argparse.Namespace) -> int:
    import uvicorn

    from .observability import logging_config

    if not 1 <= args.port <= 65_535:
        raise CliError("--port: must lie in 1..65535", EXIT_USAGE)
    if args.workers < 1:
        raise CliError("--workers: must be at least 1", EXIT_USAGE)
    if args.log_level is not None:
        # The app reads its settings from the environment (in every uvicorn worker).
        os.environ["BLASTRATE_LOG_LEVEL"] = args.log_level
    level = os.environ.get("BLASTRATE_LOG_LEVEL", "info").lower()
    uvicorn.run(
        "app.main:app",
        host=args.host,
        port=args.port,
        workers=args.workers,
        log_config=logging_config(level if level in _LOG_LEVELS else "info"),
        access_log=False,
        server_header=False,
    )
    return EXIT_OK


# -- the parser ----------------------------------------------------------------------------


def _add_method_options(p: argparse.ArgumentParser) -> None:
    w = p.add_argument_group("workload")
    w.add_argument("-C", "--cpu-tasks", type=int, required=True, help="CPU-bound tasks C")
    w.add_argument("-I", "--io-tasks", type=int, required=True, help="I/O-bound tasks I")
    w.add_argument("--cores", type=int, default=1, help="cores m (default 1)")
    w.add_argument("--disks", type=int, default=1, help="disks d (default 1)")
    t = p.add_argument_group("transfer")
    t.add_argument(
        "--file-size", required=True, metavar="SIZE", help="file size: bytes or 500MB, 2GiB..."
    )
    t.add_argument(
        "--delay",
        required=True,
        metavar="DURATION",
        help="one-way propagation delay: seconds or 100ms, 250us...",
    )
    h = p.add_argument_group("host (a profile, and overrides of its values)")
    h.add_argument("--profile", default="sx280-2007", help="host profile (default sx280-2007)")
    h.add_argument("--mu-io-cpu", type=float, metavar="PER_S", help="1/s")
    h.add_argument("--mu-disk", type=float, metavar="PER_S", help="1/s")
    h.add_argument("--mu-net", type=float, metavar="PER_S", help="1/s")
    h.add_argument("--buffer-packets", type=int, metavar="K", help="NIC buffer (packets)")
    h.add_argument("--coalesce-packets", type=int, metavar="N", help="coalescing (packets)")
    h.add_argument("--line-rate", metavar="RATE", help="bit/s or 1Gbps, 950Mbps...")
    h.add_argument("--packet-payload", metavar="SIZE", help="payload per packet (bytes)")
    p.add_argument(
        "--nic-service",
        choices=("exponential", "phase-type"),
        default="exponential",
        help="NIC service-time model (default exponential, the paper's)",
    )
    _add_server_options(p)


def _add_server_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--server", metavar="URL", help="ask this blastrate service instead")
    p.add_argument(
        "--timeout", type=float, default=30.0, metavar="S", help="server timeout (default 30 s)"
    )


def build_parser() -> argparse.ArgumentParser:
    """The ``blastrate`` argument parser."""
    from . import __version__

    parser = _Parser(
        prog="blastrate",
        description="Effective bottleneck rate of a data transfer into a busy host.",
        epilog="Exit status: 0 ok, 2 bad input, 3 no answer (model), 4 server unreachable, "
        "5 server error, 1 internal error.",
    )
    parser.add_argument("--version", action="version", version=f"blastrate {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    rate = sub.add_parser("rate", help="effective bottleneck rate of a workload")
    _add_method_options(rate)
    rate.add_argument("--json", action="store_true", help="print the full JSON answer")
    rate.set_defaults(run=_cmd_rate)

    curve = sub.add_parser("curve", help="the transfer-time curve T(B_send)")
    _add_method_options(curve)
    curve.add_argument("--points", type=int, default=200, help="curve points (default 200)")
    curve.add_argument("-o", "--output", metavar="FILE", help="write to FILE (.csv or .json)")
    curve.add_argument("--format", choices=("table", "csv", "json"), help="output format")
    curve.set_defaults(run=_cmd_curve)

    solve = sub.add_parser("solve", help="solve a general SRN from a JSON or PNML file")
    solve.add_argument(
        "net",
        metavar="NET.json|NET.pnml",
        help="a POST /srn/solve body, a bare net, or a PNML file ('-' for stdin)",
    )
    solve.add_argument(
        "--analysis", choices=("steady-state", "transient", "absorption"), help="override"
    )
    solve.add_argument("--times", metavar="T1,T2,...", help="times (s) for transient/absorption")
    solve.add_argument("--json", action="store_true", help="print the full JSON answer")
    _add_server_options(solve)
    solve.set_defaults(run=_cmd_solve)

    convert = sub.add_parser("convert", help="convert a net between JSON and PNML")
    convert.add_argument("source", metavar="IN", help="a JSON or PNML net ('-' for stdin)")
    convert.add_argument("target", metavar="OUT", help="the file to write ('-' for stdout)")
    convert.add_argument("--to", choices=["json", "pnml"], help="output format (default: by OUT)")
    convert.add_argument(
        "--dialect",
        choices=["pipe", "storm"],
        default="pipe",
        help="PNML spelling of inhibitor arcs: 'inhibitor' (PIPE) or 'inhibition' (Storm)",
    )
    convert.set_defaults(run=_cmd_convert)

    profiles = sub.add_parser("profiles", help="list the host profiles")
    profiles.add_argument("--json", action="store_true")
    _add_server_options(profiles)
    profiles.set_defaults(run=_cmd_profiles)

    serve = sub.add_parser("serve", help="run the HTTP service (uvicorn)")
    serve.add_argument("--host", default="127.0.0.1", help="bind address (default 127.0.0.1)")
    serve.add_argument("--port", type=int, default=8000, help="port (default 8000)")
    serve.add_argument("--workers", type=int, default=1, help="worker processes (default 1)")
    serve.add_argument(
        "--log-level", choices=_LOG_LEVELS, help="default: BLASTRATE_LOG_LEVEL, or info"
    )
    serve.set_defaults(run=_cmd_serve)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run the ``blastrate`` command line and return its exit status.

    Examples
    --------
    >>> main(["profiles"])  # doctest: +SKIP
    sx280-2007 (default): mu_io_cpu 4600/s, ...
    0
    """
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:
        return int(exc.code) if isinstance(exc.code, int) else EXIT_USAGE
    try:
        status: int = args.run(args)
        return status
    except CliError as exc:
        print(f"blastrate: error: {exc}", file=sys.stderr)
        return exc.status
    except KeyboardInterrupt:
        return 130
    except Exception as exc:  # one line, never a traceback, for a shell user
        print(f"blastrate: internal error: {type(exc).__name__}: {exc}", file=sys.stderr)
        return EXIT_INTERNAL


if __name__ == "__main__":
    sys.exit(main())
