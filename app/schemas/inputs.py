"""The inputs every computation shares: a workload, a host and a transfer (pydantic v2).

Kept apart from the rest of :mod:`app.schemas.bodies` (which re-exports these models)
so that the command line can check its options against the API's bounds without building
every model of the API: ``blastrate rate`` imports this module only.
"""

from __future__ import annotations

import functools
import typing
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, StrictBool, model_validator

from .limits import (
    MAX_BYTES,
    MAX_CORES,
    MAX_DELAY_S,
    MAX_DISKS,
    MAX_EXPRESSION_CHARS,
    MAX_LINE_RATE,
    MAX_PACKETS,
    MAX_PAYLOAD_BYTES,
    MAX_RATE,
    MAX_TASKS,
    MIN_BIT_RATE,
    MIN_RATE,
)

__all__ = [
    "BOOLEAN_MARK",
    "HostOverrides",
    "RequestModel",
    "TransferRequest",
    "WorkloadModel",
]

_PROFILE_DOC = (
    "Name of a profile from `GET /profiles`; default: this host's default (`default` in "
    "`GET /profiles`, set by `blastrate calibrate`), else `sx280-2007`."
)
MAX_NAME_CHARS = 128

Rate = Annotated[float, Field(ge=MIN_RATE, le=MAX_RATE)]
#: A JSON boolean: only ``true`` or ``false`` (not 0, 1, "yes"...).
Flag = StrictBool
Name = Annotated[str, Field(min_length=1, max_length=MAX_NAME_CHARS)]
Expression = Annotated[str, Field(min_length=1, max_length=MAX_EXPRESSION_CHARS)]


@functools.cache
def _bool_is_foreign(annotation: Any) -> bool:
    """True when no JSON boolean can be a legitimate value anywhere in ``annotation``:
    no ``bool`` in it, and no nested model or ``Any`` (which check their own values)."""
    if annotation is bool or annotation is Any:
        return False
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return False
    if typing.get_origin(annotation) is Literal:
        return not any(isinstance(a, bool) for a in typing.get_args(annotation))
    args = typing.get_args(annotation)
    if typing.get_origin(annotation) is Annotated:
        args = args[:1]
    return all(_bool_is_foreign(a) for a in args if a is not type(None) and a is not Ellipsis)


#: What a boolean becomes in a number field before validation (see RequestModel).
BOOLEAN_MARK = " (a boolean is not a number)"


def _unmask_bools(value: Any) -> Any:
    """``value`` with every boolean in it replaced by a string that no number field
    accepts, so that the field's own check fails where the boolean is (its ``loc``)."""
    if isinstance(value, bool):
        return f"{str(value).lower()}{BOOLEAN_MARK}"
    if isinstance(value, dict):
        return {k: _unmask_bools(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_unmask_bools(v) for v in value]
    return value


class RequestModel(BaseModel):
    """Base of request bodies: unknown fields, NaN and infinities are rejected, and a
    boolean is never a number (pydantic's lax mode would read ``false`` as 0)."""

    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)

    @model_validator(mode="before")
    @classmethod
    def _no_bool_as_number(cls, data: Any) -> Any:
        # Each nested model runs this on its own fields; here only this model's.
        if not isinstance(data, dict):
            return data
        fields = cls.model_fields
        out = dict(data)
        for name, value in data.items():
            field = fields.get(name)
            if field is not None and _bool_is_foreign(field.annotation):  # type: ignore[arg-type]
                out[name] = _unmask_bools(value)
        return out


class WorkloadModel(RequestModel):
    """The receiving host's workload (docs/conventions.md §1-§2)."""

    model_config = ConfigDict(
        json_schema_extra={"examples": [{"cpu_tasks": 2, "io_tasks": 1, "cores": 1, "disks": 1}]}
    )

    cpu_tasks: int = Field(ge=0, le=MAX_TASKS, description="C, CPU-bound tasks.")
    io_tasks: int = Field(ge=0, le=MAX_TASKS, description="I, I/O-bound tasks.")
    cores: int = Field(default=1, ge=1, le=MAX_CORES, description="m, processor cores.")
    disks: int = Field(default=1, ge=1, le=MAX_DISKS, description="d, disks.")


class HostOverrides(RequestModel):
    """A named host profile and optional overrides of any of its values."""

    model_config = ConfigDict(
        json_schema_extra={"examples": [{"profile": "sx280-2007", "buffer_packets": 512}]}
    )

    profile: Name | None = Field(default=None, description=_PROFILE_DOC)
    mu_io_cpu: Rate | None = Field(default=None, description="Processor-to-disk move rate (1/s).")
    mu_disk: Rate | None = Field(default=None, description="Disk service rate per busy disk (1/s).")
    mu_net: Rate | None = Field(
        default=None, description="Interrupt service rate alone on a core (1/s)."
    )
    buffer_packets: int | None = Field(
        default=None, ge=1, le=MAX_PACKETS, description="K (packets)."
    )
    coalesce_packets: int | None = Field(
        default=None, ge=1, le=MAX_PACKETS, description="N (packets)."
    )
    line_rate_bps: float | None = Field(
        default=None, ge=MIN_BIT_RATE, le=MAX_LINE_RATE, description="bit/s."
    )
    packet_payload_bytes: int | None = Field(
        default=None, ge=1, le=MAX_PAYLOAD_BYTES, description="S_pkt (bytes)."
    )


class TransferRequest(RequestModel):
    """The file transfer: its size and the one-way propagation delay."""

    model_config = ConfigDict(
        json_schema_extra={
            "examples": [{"file_size_bytes": 500_000_000, "propagation_delay_s": 0.1}]
        }
    )

    file_size_bytes: int = Field(ge=1, le=MAX_BYTES, description="File size (bytes).")
    propagation_delay_s: float = Field(
        gt=0, le=MAX_DELAY_S, description="One-way propagation delay (s)."
    )
