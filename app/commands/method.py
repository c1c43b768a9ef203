"""The inputs of the paper's method as options, shared by ``rate`` and ``curve``.

:func:`method_options` adds the workload, transfer and host options (and ``--server``,
``--timeout``, ``--max-states``); :func:`bottleneck` computes the ``/bottleneck-rate``
answer locally, in a child process that Ctrl-C and ``--timeout`` can stop, or asks the
service named by ``--server``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

import click

from .common import EXIT_MODEL, EXIT_USAGE, FINITE, OPTION_OF, CliError, model_option
from .local import DEFAULT_LOCAL_TIMEOUT_S, Reporter, library_errors, run_local
from .remote import DEFAULT_SERVER_TIMEOUT_S, request, server_option

__all__ = [
    "MethodArgs",
    "bottleneck",
    "max_states_option",
    "method_options",
    "refuse_remote_max_states",
    "timeout_option",
]

F = TypeVar("F", bound=Callable[..., Any])

#: The option values of :func:`method_options`, by parameter name.
MethodArgs = dict[str, Any]


def timeout_option(function: F) -> F:
    """``--timeout S``: the wall-time limit of a local computation, or of the server's answer."""
    return click.option(
        "--timeout",
        type=click.FloatRange(min=0, min_open=True),
        metavar="S",
        help=f"Wall-time limit in seconds (default {DEFAULT_LOCAL_TIMEOUT_S:g} locally, "
        f"{DEFAULT_SERVER_TIMEOUT_S:g} waiting for --server).",
    )(function)


def max_states_option(function: F) -> F:
    """``--max-states N``: the largest chain a local computation may build."""
    return click.option(
        "--max-states",
        type=click.IntRange(min=1),
        metavar="N",
        help="Largest Markov chain (tangible states) to build locally "
        "(default: BLASTRATE_MAX_STATES, or 200000; a --server applies its own).",
    )(function)


def refuse_remote_max_states(max_states: int | None, server: str | None) -> None:
    """Refuse ``--max-states`` with ``--server``: it bounds a local run, and a server
    applies its own ``BLASTRATE_MAX_STATES``, so it would be dropped without a word."""
    if max_states is not None and server:
        raise CliError(
            "--max-states: bounds a local computation only; the server applies its own "
            "BLASTRATE_MAX_STATES (drop --max-states, or --server)",
            EXIT_USAGE,
        )


_METHOD_OPTIONS: list[Callable[[Any], Any]] = [
    click.option("-C", "--cpu-tasks", type=int, required=True, help="CPU-bound tasks C."),
    click.option("-I", "--io-tasks", type=int, required=True, help="I/O-bound tasks I."),
    click.option("--cores", type=int, default=1, show_default=True, help="Cores m."),
    click.option("--disks", type=int, default=1, show_default=True, help="Disks d."),
    click.option(
        "--file-size", required=True, metavar="SIZE", help="File size: bytes, or 500MB, 2GiB..."
    ),
    click.option(
        "--delay",
        "--propagation-delay",
        "delay",
        required=True,
        metavar="DURATION",
        help="One-way propagation delay with its unit: 100ms, 100msec, 0.1s, 250us...",
    ),
    click.option(
        "--profile",
        default=None,
        help="Host profile [default: this host's default from `blastrate calibrate`, "
        "else sx280-2007].",
    ),
    click.option("--mu-io-cpu", type=FINITE, metavar="PER_S", help="Override: 1/s."),
    click.option("--mu-disk", type=FINITE, metavar="PER_S", help="Override: 1/s."),
    click.option("--mu-net", type=FINITE, metavar="PER_S", help="Override: 1/s."),
    click.option("--buffer-packets", type=int, metavar="K", help="Override: NIC buffer (packets)."),
    click.option(
        "--coalesce-packets", type=int, metavar="N", help="Override: coalescing (packets)."
    ),
    click.option("--line-rate", metavar="RATE", help="Override: bit/s, or 1Gbps, 950Mbps..."),
    click.option("--packet-payload", metavar="SIZE", help="Override: payload per packet (bytes)."),
    click.option(
        "--nic-service",
        type=click.Choice(["exponential", "phase-type"]),
        default="exponential",
        show_default=True,
        help="NIC service-time model (exponential is the paper's).",
    ),
    model_option(
        "Receiver model: the time-slice model (the default, chosen by the pooled "
        "validation, with the profile's calibrated slice and costs), or the paper's "
        "(whose tables it reproduces; the only one with --nic-service phase-type).",
    ),
    server_option,
    timeout_option,
    max_states_option,
]


def method_options(function: F) -> F:
    """Add the workload, transfer and host options, ``--server``, ``--timeout`` and
    ``--max-states``; their values arrive as keyword arguments."""
    for option in reversed(_METHOD_OPTIONS):
        function = option(function)
    return function


def _inputs(args: MethodArgs) -> tuple[dict[str, Any], dict[str, Any], dict[str, Any]]:
    """Workload, host and transfer dicts in SI units (human forms parsed here, once)."""
    from app.schemas.units import parse_bitrate, parse_duration, parse_size

    workload = {k: args[k] for k in ("cpu_tasks", "io_tasks", "cores", "disks")}
    line_rate, payload = args["line_rate"], args["packet_payload"]
    host = {
        "profile": args["profile"],
        **{
            k: args[k]
            for k in ("mu_io_cpu", "mu_disk", "mu_net", "buffer_packets", "coalesce_packets")
        },
        "line_rate_bps": None if line_rate is None else parse_bitrate(line_rate, "line_rate"),
        "packet_payload_bytes": None if payload is None else parse_size(payload, "packet_payload"),
    }
    transfer = {
        "file_size_bytes": parse_size(args["file_size"], "file_size"),
        "propagation_delay_s": parse_duration(
            args["delay"], "propagation_delay", unit_required=True
        ),
    }
    return workload, host, transfer


def _within_limits(
    workload: dict[str, Any], host: dict[str, Any], transfer: dict[str, Any]
) -> None:
    """The service's bounds on the same inputs (``app.schemas.bodies``), so that a local
    answer and a ``--server`` one refuse the same values (``--delay 1e300s`` once
    answered locally); the first value out of bounds is named by its option."""
    from pydantic import ValidationError

    from app.schemas.inputs import HostOverrides, TransferRequest, WorkloadModel

    given = {k: v for k, v in host.items() if v is not None}
    for model, values in (
        (WorkloadModel, workload),
        (HostOverrides, given),
        (TransferRequest, transfer),
    ):
        try:
            model.model_validate(values)
        except ValidationError as exc:
            first = exc.errors()[0]
            leaf = str(first["loc"][-1]) if first["loc"] else ""
            raise CliError(f"{OPTION_OF.get(leaf, leaf)}: {first['msg']}", EXIT_USAGE) from None


def _compute(payload: dict[str, Any], report: Reporter) -> dict[str, Any]:
    """The child's work: resolve the inputs, check the chain and work limits, compute."""
    from app.operations.whole_method import (
        compute_bottleneck,
        resolve_inputs,
        state_count,
        time_slice_work,
    )

    with library_errors():
        inputs = resolve_inputs(
            payload["workload"],
            payload["host"],
            payload["transfer"],
            payload["nic_service"],
            payload["model"],
        ).to_dict()
        states = state_count(inputs)
    work = time_slice_work(inputs)  # 0 for the paper's model
    if work > 0 and work > _max_advice_work():
        raise CliError(
            f"--buffer-packets: K={inputs['host']['buffer_packets']} with "
            f"N={inputs['host']['coalesce_packets']} needs about {work:.3g} operations per "
            f"rate in the time-slice model, more than max_advice_work={_max_advice_work():g}; "
            "use a smaller --buffer-packets or --coalesce-packets, or --model paper",
            EXIT_MODEL,
        )
    max_states = payload["max_states"] or _max_states_setting()
    if states > max_states:
        raise CliError(
            f"--max-states: the workload's chain has {states} states, more than "
            f"--max-states={max_states} (the count grows like io_tasks^disks / (disks!)^2); "
            "raise it with --max-states",
            EXIT_MODEL,
        )
    return compute_bottleneck(inputs, payload["options"])


def _max_advice_work() -> float:
    # The time-slice module loads its kernels: only that model asks.
    from transport import MAX_TIME_SLICE_WORK

    return float(MAX_TIME_SLICE_WORK)


def _max_states_setting() -> int:
    """``BLASTRATE_MAX_STATES`` through :class:`app.settings.Settings` (its one parser)
    when it is set, else its default, without loading pydantic-settings."""
    from app.defaults import DEFAULT_MAX_STATES, setting_given

    if not setting_given("max_states"):
        return DEFAULT_MAX_STATES
    from pydantic import ValidationError

    from app.settings import Settings

    try:
        return Settings().max_states
    except ValidationError as exc:  # any bad BLASTRATE_* variable: one line, named
        first = exc.errors()[0]
        name = f"BLASTRATE_{str(first['loc'][-1]).upper()}" if first["loc"] else "BLASTRATE_*"
        raise CliError(f"{name}: {first['msg']}", EXIT_USAGE) from None


def bottleneck(args: MethodArgs, options: dict[str, Any], label: str) -> dict[str, Any]:
    """The ``/bottleneck-rate`` answer for the options in ``args``.

    Parameters
    ----------
    args : dict
        The values of :func:`method_options`.
    options : dict
        ``curve_points``, ``include_curve`` (see
        :func:`app.operations.whole_method.compute_bottleneck`).
    label : str
        What the progress spinner says.
    """
    refuse_remote_max_states(args["max_states"], args["server"])
    with library_errors():
        workload, host, transfer = _inputs(args)
    if args["server"]:
        body = {
            "workload": workload,
            "host": {k: v for k, v in host.items() if v is not None},
            "transfer": transfer,
            "nic_service": args["nic_service"],
            # Always named: the service's default has changed once (the paper's model
            # before issue #39, the time-slice model since).
            "model": args["model"],
            # A curve_points of None is the service's own default.
            **{k: v for k, v in options.items() if v is not None},
        }
        timeout = args["timeout"] or DEFAULT_SERVER_TIMEOUT_S
        return request(args["server"], "POST", "/bottleneck-rate", timeout, json=body)

    # The child starts at once and resolves, checks and computes; the service's bounds
    # (pydantic, a tenth of a second to load) are checked here meanwhile, on the
    # other core, and win over whatever the child answers.
    payload = {
        "workload": workload,
        "host": host,
        "transfer": transfer,
        "nic_service": args["nic_service"],
        "model": args["model"],
        "max_states": args["max_states"],
        "options": options,
    }
    answer: dict[str, Any] = run_local(
        _compute,
        payload,
        timeout=args["timeout"] or DEFAULT_LOCAL_TIMEOUT_S,
        label=label,
        meanwhile=lambda: _within_limits(workload, host, transfer),
    )
    return answer
