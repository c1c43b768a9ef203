"""``blastrate rate``: the effective bottleneck rate of a workload."""

from __future__ import annotations

from typing import Any

import click

from .common import json_option, json_text, seconds_text, si_text, write_output
from .method import bottleneck, method_options

__all__ = ["rate", "rate_summary"]


def rate_summary(body: dict[str, Any]) -> str:
    """The ``/bottleneck-rate`` answer as aligned ``name  value`` lines."""
    inputs = body["inputs"]
    w, h, t = inputs["workload"], inputs["host"], inputs["transfer"]
    limited = "the end system" if body["limited_by"] == "end-system" else "the line rate"
    rows = [
        (
            "effective bottleneck rate",
            f"{si_text(body['effective_bottleneck_rate_bps'], 'bit/s')} (limited by {limited})",
        ),
        (
            "transfer time",
            f"{seconds_text(body['transfer_time_s'])} for {si_text(t['file_size_bytes'], 'B')} "
            f"with {seconds_text(t['propagation_delay_s'])} one-way delay",
        ),
        (
            "loss probability",
            f"{body['loss_probability']:.3e}"
            + (" (first blast)" if inputs.get("model") == "timeslice" else ""),
        ),
        ("rounds", str(body["rounds"])),
        (
            "receiver's rate while it runs"
            if inputs.get("model") == "timeslice"
            else "interrupt service rate",
            _per_second(body["interrupt_service_rate_per_s"]),
        ),
        (
            "workload",
            f"C={w['cpu_tasks']} I={w['io_tasks']} cores={w['cores']} disks={w['disks']}",
        ),
        (
            "host",
            f"{h['profile']}: K={h['buffer_packets']} N={h['coalesce_packets']} "
            f"line {si_text(h['line_rate_bps'], 'bit/s')}, payload "
            f"{h['packet_payload_bytes']} B, NIC service {inputs['nic_service']}",
        ),
        ("model", _model_text(inputs)),
    ]
    width = max(len(k) for k, _ in rows)
    return "\n".join(f"{k:<{width}}  {v}" for k, v in rows)


@click.command(short_help="Effective bottleneck rate of a workload.")
@method_options
@json_option
def rate(as_json: bool, **args: Any) -> None:
    """Effective bottleneck rate of a workload: the sending rate that minimises the
    transfer time.

    \b
    Example:
      blastrate rate -C 2 -I 1 --file-size 500MB --delay 100ms
    """
    body = bottleneck(args, {"curve_points": 200}, "computing the bottleneck rate")
    write_output(json_text(body) if as_json else rate_summary(body), None)


def _per_second(rate: float) -> str:
    """A rate in 1/s: grouped digits from 100 up, else three significant digits (a
    rate of 1e-6 /s printed as "0.0 /s")."""
    return f"{rate:,.1f} /s" if rate >= 100 else f"{rate:.3g} /s"


def _model_text(inputs: dict[str, Any]) -> str:
    """The receiver model and, for the time-slice model, its calibrated inputs."""
    model = inputs.get("model", "paper")
    if model != "timeslice":
        return "paper (processor sharing, stationary loss)"
    ts = inputs["time_slice"]
    # An older server's answer has no measured competitors.
    measured = ts.get("effective_competitors") or []
    share = (
        "measured competitors " + ", ".join(f"{c:.3g}" for c in measured)
        if measured
        else "competitors C (processor sharing)"
    )
    # An older server's answer names no scheduler: it used the rotation.
    scheduler = ts.get("scheduler", "rotation")
    sends = ts.get("send_sizes")
    sent = (
        f", sends of {seconds_text(sends['seconds_per_send'])} a call"
        if isinstance(sends, dict)
        else ", single datagrams"
    )
    return (
        f"timeslice ({scheduler}): slice {seconds_text(ts['time_slice_s'])}, kernel "
        f"{seconds_text(ts['kernel_s_per_datagram'])}/datagram, wake-up "
        f"{seconds_text(ts['wakeup_s'])}, settle {seconds_text(ts['settle_s'])}, {share}"
        f"{sent}"
    )
