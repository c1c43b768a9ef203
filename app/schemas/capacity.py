"""Request and response bodies of the capacity-planning endpoints (sweeps, what-if)."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import ConfigDict, Field, create_model

from planning.whatif import DEFAULT_MAX_BUFFER_PACKETS

from .bodies import RequestModel, ResponseModel

__all__ = [
    "PointInputs",
    "SweepInputs",
    "SweepRecord",
    "SweepRequest",
    "SweepResult",
    "WhatIfRequest",
    "WhatIfResult",
]

_SPEC_DOC = (
    "One value, a list `1,2,4,8`, a range `0..20` (whole inputs step by 1) or `a..b:step`; "
    "human units as in GET /bottleneck-rate (`500MB`, `100ms`, `1Gbps`)."
)
AxisSpec = str | int | float | list[str | int | float]
Value = str | int | float
# Input -> (description, required).
_INPUTS: dict[str, tuple[str, bool]] = {
    "cpu_tasks": ("C, CPU-bound tasks.", True),
    "io_tasks": ("I, I/O-bound tasks.", True),
    "cores": ("m, cores (default 1).", False),
    "disks": ("d, disks (default 1).", False),
    "profile": ("Host profile name (default sx280-2007).", False),
    "mu_io_cpu": ("Override (1/s).", False),
    "mu_disk": ("Override (1/s).", False),
    "mu_net": ("Override (1/s).", False),
    "buffer_packets": ("Override of the NIC ring K (packets).", False),
    "coalesce_packets": ("Override of the coalescing batch N (packets).", False),
    "line_rate": ("Override of the line rate (bit/s, or `10Gbps`).", False),
    "packet_payload": ("Override of S_pkt (bytes).", False),
    "file_size": ("File size (bytes, or `500MB`).", True),
    "propagation_delay": ("One-way propagation delay (s, or `100ms`).", True),
    "nic_service": ("exponential (the paper's) or phase-type.", False),
    "model": (
        "The receiver's model: timeslice (the default; with a built-in profile's inputs: "
        "the kernel's default slice, exponential NIC service, K and N within "
        "max_advice_work) or paper. What-if ranks with paper unless told, and refuses "
        "timeslice.",
        False,
    ),
}


def _fields(kind: Any, doc: str) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for name, (text, required) in _INPUTS.items():
        if required:
            out[name] = (kind, Field(description=f"{text} {doc}"))
        else:
            out[name] = (kind | None, Field(default=None, description=f"{text} {doc}"))
    return out


SweepInputs = create_model(
    "SweepInputs",
    __base__=RequestModel,
    __doc__="The inputs of GET /bottleneck-rate, each a value, a list or a range.",
    **_fields(AxisSpec, _SPEC_DOC),
)
PointInputs = create_model(
    "PointInputs",
    __base__=RequestModel,
    __doc__="The inputs of GET /bottleneck-rate, one value each.",
    **_fields(Value, "Human units as in GET /bottleneck-rate."),
)


class SweepRequest(RequestModel):
    """A sweep: the product of the inputs' values, evaluated point by point."""

    model_config = ConfigDict(
        json_schema_extra={
            "examples": [
                {
                    "inputs": {
                        "cpu_tasks": "0..4",
                        "io_tasks": [0, 1],
                        "cores": "1,2",
                        "file_size": "500MB",
                        "propagation_delay": "100ms",
                    },
                    "format": "json",
                }
            ]
        }
    )

    inputs: SweepInputs  # type: ignore[valid-type]
    format: Literal["json", "csv"] = Field(
        default="json", description="`json` (records) or `csv` (text/csv, one row a point)."
    )


class SweepRecord(ResponseModel):
    """One point: its inputs (named and valued as GET /bottleneck-rate takes them, SI
    units) and its results (None, with `error`, when the point has no answer)."""

    model_config = ConfigDict(extra="allow")

    cpu_tasks: int | None
    io_tasks: int | None
    file_size: int | None = Field(description="Bytes.")
    propagation_delay: float | None = Field(description="Seconds.")
    line_rate: float | None = Field(default=None, description="bit/s.")
    effective_bottleneck_rate_bps: float | None = Field(description="bit/s.")
    transfer_time_s: float | None = Field(description="Seconds.")
    loss_probability: float | None
    interrupt_service_rate_per_s: float | None = Field(description="Interrupts/s.")
    limited_by: str | None
    rounds: int | None
    error: str | None = Field(description="`field: reason` when the point has no answer.")


class SweepResult(ResponseModel):
    """The records of a sweep, in product order (the last axis varies fastest)."""

    points: int
    failed: int = Field(description="Points without an answer (their `error` says why).")
    axes: dict[str, list[Any]] = Field(description="The inputs swept and their values (SI).")
    ran_on: Literal["inline", "processes", "dask"]
    workers: int
    batches: int
    records: list[SweepRecord]


class WhatIfRequest(RequestModel):
    """A workload, a host and a transfer, and the NIC's limits."""

    model_config = ConfigDict(
        json_schema_extra={
            "examples": [
                {
                    "inputs": {
                        "cpu_tasks": 2,
                        "io_tasks": 1,
                        "file_size": "500MB",
                        "propagation_delay": "100ms",
                    },
                    "max_buffer_packets": 4096,
                    "interface": "eth0",
                }
            ]
        }
    )

    inputs: PointInputs  # type: ignore[valid-type]
    max_buffer_packets: int = Field(
        default=DEFAULT_MAX_BUFFER_PACKETS,
        ge=1,
        description="The NIC's largest RX ring (packets; `ethtool -g IF`, Pre-set "
        "maximums). Default 4096, common on 1/10 GbE server NICs.",
    )
    interface: str = Field(
        default="eth0",
        pattern=r"^[A-Za-z0-9_.:-]{1,15}$",
        description="Interface named in the ethtool commands.",
    )


class WhatIfResult(ResponseModel):
    """Each single upgrade ranked by the transfer time it saves, the best (K, N) with the
    ethtool commands that set them, and the elasticities d ln(rate) / d ln(parameter)."""

    baseline: SweepRecord
    changes: list[dict[str, Any]]
    best_ring: dict[str, Any] | None
    elasticities: list[dict[str, Any]]
    max_buffer_packets: int
