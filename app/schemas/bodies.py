"""Request and response models of the HTTP API (pydantic v2), all in SI units.

Request bodies take plain SI numbers, with the unit in the field name
(``file_size_bytes``, ``propagation_delay_s``, ``line_rate_bps``); human forms such as
``500MB`` are accepted only in query strings and on the command line.  Every request model
carries an example, which also feeds the OpenAPI document.

The static bounds here (``le=...``) are hard ceilings of the API; the configurable limits
of :class:`app.settings.Settings` are checked when a request is served, so that changing a
setting does not change the API contract.
"""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    model_validator,
)

__all__ = [
    "BOOLEAN_MARK",
    "BottleneckQuery",
    "BottleneckRateRequest",
    "BottleneckRateResult",
    "HostOverrides",
    "HostProbeResult",
    "HostProfileModel",
    "JobProgress",
    "NicQueueRequest",
    "NicQueueResult",
    "Problem",
    "ProfileBody",
    "ServiceTimeRequest",
    "ServiceTimeResult",
    "SrnJob",
    "SrnReward",
    "SrnSolveRequest",
    "SrnSolveResult",
    "StoredProfileModel",
    "TransferRequest",
    "TransferTimeRequest",
    "TransferTimeResult",
    "WorkloadModel",
    "query_parameters",
]

from transport.models import DEFAULT_RECEIVER_MODEL, NicService, ReceiverModelName

from .inputs import (
    _PROFILE_DOC,
    BOOLEAN_MARK,
    MAX_NAME_CHARS,
    Expression,
    Flag,
    HostOverrides,
    Name,
    Rate,
    RequestModel,
    TransferRequest,
    WorkloadModel,
)
from .limits import (
    MAX_BYTES,
    MAX_CORES,
    MAX_DELAY_S,
    MAX_DISKS,
    MAX_LINE_RATE,
    MAX_LIST,
    MAX_PACKETS,
    MAX_PAYLOAD_BYTES,
    MAX_RATE,
    MAX_TASKS,
    MIN_BIT_RATE,
    MIN_RATE,
)


class ResponseModel(BaseModel):
    """Base of response bodies (documentation and conformance only)."""

    model_config = ConfigDict(allow_inf_nan=False)


# -- problems ------------------------------------------------------------------------------


class FieldProblemModel(ResponseModel):
    """What is wrong with one field, and the limit reached if any."""

    field: str = Field(description="Dotted location, e.g. `query.cpu_tasks`.")
    reason: str
    limit: str | None = Field(
        default=None, description="Name of the limit reached, e.g. `max_states`."
    )
    allowed: float | None = Field(default=None, description="The limit's value.")
    actual: float | None = Field(
        default=None, description="The value or count the request reached."
    )
    raise_with: str | None = Field(
        default=None,
        description="The setting that raises the limit where the service runs, e.g. "
        "`BLASTRATE_MAX_STATES` (null when no setting controls it).",
    )


class Problem(ResponseModel):
    """RFC 9457 problem details."""

    type: str = Field(description="Problem type URI, `/problems/<slug>`.")
    title: str
    status: int
    detail: str
    instance: str = Field(description="The request path.")
    request_id: str | None = Field(default=None, description="Also sent as `X-Request-ID`.")
    errors: list[FieldProblemModel] = Field(default_factory=list)


class ProblemTypeModel(ResponseModel):
    """Documentation of one problem type."""

    type: str
    slug: str
    status: int
    title: str
    description: str


# -- workloads, hosts, transfers ----------------------------------------------------------


ReceiverModel = ReceiverModelName
_MODEL_DOC = (
    "The receiver's model: `timeslice` (the default: the scheduler's slices and finite "
    "blasts, what `blastrate send --rate auto` uses, chosen by the pooled validation, "
    "docs/validation.md) or `paper` (processor sharing with the C tasks and the "
    "stationary loss of the NIC queue, the paper's method, whose tables it reproduces; the "
    "only one that takes `nic_service=phase-type`); docs/conventions.md §5.  With "
    "`timeslice`, `loss_probability` is the first blast's, "
    "`interrupt_service_rate_per_s` the receiver's wake-up rate while it holds the CPU "
    "(the C tasks are its vacations), and the calibrated slice, kernel and wake-up costs "
    "come from the profile's provenance (`inputs.time_slice`)."
)

_SIZE_DOC = "bytes, or with a unit: `500MB`, `1.5GiB`, `1468B` (1 MB = 10^6 B)"


class BottleneckQuery(BaseModel):
    """The query string of ``GET /bottleneck-rate``: text as sent, human units allowed.

    The route validates the whole query with this one model (pydantic's lax mode turns
    ``"2"`` into 2, as FastAPI does for a declared query parameter) and documents each
    field as a query parameter (:func:`query_parameters`).  Unknown and repeated
    parameters are refused (:func:`app.service.routes.common.strict_query`), as the unknown
    fields of a POST body are: a misspelt override must not be answered with the
    default.  Units follow docs/conventions.md.
    """

    # Not a RequestModel: infinities fail the bounds instead of allow_inf_nan.
    model_config = ConfigDict(extra="forbid")

    cpu_tasks: int | None = Field(
        default=None,
        ge=0,
        le=MAX_TASKS,
        description="C, CPU-bound tasks (required unless `workload=live`; given, it overrides "
        "the probe).",
        examples=[2],
    )
    io_tasks: int | None = Field(
        default=None,
        ge=0,
        le=MAX_TASKS,
        description="I, I/O-bound tasks (required unless `workload=live`; given, it overrides "
        "the probe).",
        examples=[1],
    )
    workload: Literal["given", "live"] = Field(
        default="given",
        description="`live`: C, I, m and d (and the NIC values it could read) from the "
        "live probe of the host running the service; explicit parameters override.",
    )
    file_size: str = Field(
        min_length=1, max_length=64, description=f"File size: {_SIZE_DOC}.", examples=["500MB"]
    )
    propagation_delay: str = Field(
        min_length=1,
        max_length=64,
        description="One-way propagation delay: seconds, or `100ms`, `250us`, `0.1s`.",
        examples=["100ms"],
    )
    profile: str | None = Field(
        default=None,
        min_length=1,
        max_length=MAX_NAME_CHARS,
        description=_PROFILE_DOC,
    )
    cores: int | None = Field(default=None, ge=1, le=MAX_CORES, description="m, cores.")
    disks: int | None = Field(default=None, ge=1, le=MAX_DISKS, description="d, disks.")
    mu_io_cpu: float | None = Field(
        default=None, ge=MIN_RATE, le=MAX_RATE, description="Override (1/s)."
    )
    mu_disk: float | None = Field(
        default=None, ge=MIN_RATE, le=MAX_RATE, description="Override (1/s)."
    )
    mu_net: float | None = Field(
        default=None, ge=MIN_RATE, le=MAX_RATE, description="Override (1/s)."
    )
    buffer_packets: int | None = Field(
        default=None, ge=1, le=MAX_PACKETS, description="Override of K (packets)."
    )
    coalesce_packets: int | None = Field(
        default=None, ge=1, le=MAX_PACKETS, description="Override of N (packets)."
    )
    line_rate: str | None = Field(
        default=None,
        min_length=1,
        max_length=64,
        description="Override of the line rate: bit/s, or `950Mbps`, `10Gbps`.",
        examples=["1Gbps"],
    )
    packet_payload: str | None = Field(
        default=None,
        min_length=1,
        max_length=64,
        description=f"Override of S_pkt: {_SIZE_DOC}.",
        examples=["1468"],
    )
    nic_service: NicService = Field(
        default="exponential",
        description="NIC service model: exponential (the paper's) or phase-type.",
    )
    model: ReceiverModel = Field(default=DEFAULT_RECEIVER_MODEL, description=_MODEL_DOC)


def query_parameters(model: type[BaseModel]) -> list[dict[str, Any]]:
    """OpenAPI query parameters, one per field of ``model``, as FastAPI writes them.

    For a route that validates its query string with ``model`` itself rather than
    through declared ``Query()`` parameters.
    """
    schema = model.model_json_schema()
    required = set(schema.get("required", ()))
    out = []
    for name, field_schema in schema["properties"].items():
        field_schema = dict(field_schema)
        if "default" in field_schema and field_schema["default"] is None:
            del field_schema["default"]  # FastAPI does not document a None default
        parameter: dict[str, Any] = {
            "name": name,
            "in": "query",
            "required": name in required,
            "schema": field_schema,
        }
        if "description" in field_schema:
            parameter["description"] = field_schema["description"]
        out.append(parameter)
    return out


class BottleneckRateRequest(RequestModel):
    """The whole method: workload, host and transfer in; the effective bottleneck rate out."""

    model_config = ConfigDict(
        json_schema_extra={
            "examples": [
                {
                    "workload": {"cpu_tasks": 2, "io_tasks": 1},
                    "host": {"profile": "sx280-2007"},
                    "transfer": {"file_size_bytes": 500_000_000, "propagation_delay_s": 0.1},
                    "nic_service": "exponential",
                    "include_curve": True,
                    "curve_points": 50,
                    "include_service_time": False,
                }
            ]
        }
    )

    workload: WorkloadModel
    host: HostOverrides = Field(default_factory=HostOverrides)
    transfer: TransferRequest
    nic_service: NicService = Field(
        default="exponential",
        description="NIC service-time model: the paper's exponential approximation with "
        "rate 1/E[S], or the full phase-type distribution.",
    )
    model: ReceiverModel = Field(default=DEFAULT_RECEIVER_MODEL, description=_MODEL_DOC)
    include_curve: Flag = Field(default=False, description="Return the curve T(B_send).")
    curve_points: int = Field(
        default=200,
        ge=2,
        le=MAX_LIST,
        description="Points of the curve (the paper's model also scans them in its search). "
        "Not sent, the time-slice model draws 200 or as many as its work bound allows where "
        "that is fewer (95 at K = 1,736, N = 6); sent, more than that bound is refused.",
    )
    include_service_time: Flag = Field(
        default=False,
        description="Return the interrupt service-time distribution (CDF, quantiles).",
    )
    service_time_points: int = Field(
        default=101, ge=2, le=MAX_LIST, description="Points of the CDF."
    )


class WorkloadInputs(ResponseModel):
    cpu_tasks: int
    io_tasks: int
    cores: int
    disks: int


class HostInputs(ResponseModel):
    profile: str
    mu_io_cpu: float
    mu_disk: float
    mu_net: float
    buffer_packets: int
    coalesce_packets: int
    line_rate_bps: float
    packet_payload_bytes: int


class TransferInputs(ResponseModel):
    file_size_bytes: int
    propagation_delay_s: float


class SendSizesInputs(ResponseModel):
    """The sender's sends as a calibration measured them (`transport.SendSizes`)."""

    seconds_per_send: float = Field(
        description="The sender's time per paced call (s): a send at rate R carries "
        "R * this / (8 * payload) datagrams, 1 at the line."
    )
    buffer_by_send: dict[str, int] = Field(
        description="Datagrams the receiver's socket holds when they arrive in sends of "
        "each size (datagrams per send, as a string)."
    )
    max_send: int = Field(description="The sender's largest send (datagrams).")
    sender_max_bps: float | None = Field(
        default=None,
        description="What the sender sends back to back (bit/s): from there (or the line) "
        "up its catch-up bursts are split and sends are single datagrams.",
    )


class TimeSliceInputs(ResponseModel):
    """The time-slice model's calibrated inputs (s), from the profile's provenance."""

    time_slice_s: float = Field(description="The scheduler's slice (s).")
    kernel_s_per_datagram: float = Field(
        description="The kernel's CPU time per datagram on the receiver's CPU (s)."
    )
    wakeup_s: float = Field(description="A wake-up's cost beyond its datagrams' (s).")
    effective_competitors: list[float] = Field(
        description="c measured for 1, 2, ... busy tasks on the receiver's core: the share "
        "1 / (1 + c) of it a backlogged receiver gets (empty: c from the workload, "
        "max(0, (C + 1) / m - 1), processor sharing)."
    )
    settle_s: float = Field(description="The receiver's wait for stragglers (s).")
    scheduler: str = Field(
        default="lag",
        description="How the scheduler sends the receiver away: `lag` (only once it has "
        "run a slice beyond its share; a receiver under its share is served as it wakes) "
        "or `rotation` (a slice, then the others' slices, whatever its load).",
    )
    send_sizes: SendSizesInputs | None = Field(
        default=None,
        description="The sender's sends, from a calibration: each rate is solved with the "
        "K and N of its send size (absent: datagrams arrive singly).",
    )


class BottleneckInputs(ResponseModel):
    """Every input, normalised to SI units, profile values included."""

    workload: WorkloadInputs
    host: HostInputs
    transfer: TransferInputs
    nic_service: NicService
    model: ReceiverModel
    time_slice: TimeSliceInputs | None = Field(
        default=None, description="With `model=timeslice`: its calibrated inputs."
    )


class CurveModel(ResponseModel):
    """T(B_send) on a grid; `total_s` is null where the transfer never completes."""

    send_rate_bps: list[float]
    total_s: list[float | None]
    loss: list[float | None]
    completes: list[bool]


class QuantileModel(ResponseModel):
    level: float
    seconds: float


class ServiceTimeSummary(ResponseModel):
    """The interrupt service-time distribution (time to absorption of Fig. 1b)."""

    mean_s: float
    variance_s2: float
    rate_per_s: float = Field(description="mu = 1 / mean (interrupts/s).")
    quantiles: list[QuantileModel]
    times_s: list[float]
    cdf: list[float]


class BottleneckRateResult(ResponseModel):
    """The effective bottleneck rate and the transfer there."""

    effective_bottleneck_rate_bps: float
    transfer_time_s: float
    loss_probability: float
    interrupt_service_rate_per_s: float
    limited_by: Literal["end-system", "line-rate"]
    rounds: int = Field(
        description="ceil(N_resend) + 1 at the chosen rate (paper); the rounds of the "
        "expected play-out (timeslice)."
    )
    workload_source: Literal["live"] | None = Field(
        default=None, description="`live` when the workload came from the live probe."
    )
    probe: HostProbeResult | None = Field(
        default=None, description="The live probe the workload came from."
    )
    inputs: BottleneckInputs
    curve: CurveModel | None = None
    service_time: ServiceTimeSummary | None = None


# -- profiles ------------------------------------------------------------------------------


class HostProfileModel(ResponseModel):
    """A named host: service rates (1/s), NIC (packets), link (bit/s), payload (bytes)."""

    name: str
    mu_io_cpu: float
    mu_disk: float
    mu_net: float
    buffer_packets: int
    coalesce_packets: int
    line_rate_bps: float
    packet_payload_bytes: int


class StoredProfileModel(HostProfileModel):
    """A host profile with what the store knows about it."""

    built_in: bool = Field(description="True for the read-only built-in profiles.")
    provenance: dict[str, Any] | None = Field(
        default=None, description="Where a stored profile's values came from."
    )
    updated_at: str | None = Field(
        default=None, description="When a stored profile was last written (ISO 8601, UTC)."
    )


class ProfileList(ResponseModel):
    default: str
    profiles: list[StoredProfileModel]


class ProfileBody(RequestModel):
    """A host profile to store: every value in SI units, and optionally its provenance."""

    model_config = ConfigDict(
        json_schema_extra={
            "examples": [
                {
                    "mu_io_cpu": 5200.0,
                    "mu_disk": 1500.0,
                    "mu_net": 83000.0,
                    "buffer_packets": 512,
                    "coalesce_packets": 32,
                    "line_rate_bps": 10e9,
                    "packet_payload_bytes": 8968,
                    "provenance": {"host": "rx-7", "method": "blastrate calibrate"},
                }
            ]
        }
    )

    name: Name | None = Field(
        default=None, description="If given, must equal the name in the path."
    )
    mu_io_cpu: Rate = Field(description="Processor-to-disk move rate of an I/O task (1/s).")
    mu_disk: Rate = Field(description="Disk service rate per busy disk (1/s).")
    mu_net: Rate = Field(description="Interrupt service rate alone on a core (1/s).")
    buffer_packets: int = Field(ge=1, le=MAX_PACKETS, description="NIC buffer K (packets).")
    coalesce_packets: int = Field(ge=1, le=MAX_PACKETS, description="Coalescing N (packets).")
    line_rate_bps: float = Field(ge=MIN_BIT_RATE, le=MAX_LINE_RATE, description="bit/s.")
    packet_payload_bytes: int = Field(ge=1, le=65_535, description="S_pkt (bytes).")
    provenance: dict[str, Any] | None = Field(
        default=None, description="Where the values came from (a JSON object, <= 64 kB)."
    )


# -- the live probe ------------------------------------------------------------------------


class ProbeReading(ResponseModel):
    """One probed value and where it came from."""

    value: Any = Field(description="The value, or the default used when unread.")
    source: str = Field(description="File, call or command read, or `default: <name>`.")
    unread: str | None = Field(default=None, description="Why the value could not be read.")


class HostProbeResult(ResponseModel):
    """One window of the live probe (extra members: CPU, block devices, tasks)."""

    model_config = ConfigDict(extra="allow")

    workload: dict[str, ProbeReading] = Field(
        description="`cpu_tasks`, `io_tasks`, `cores`, `disks`."
    )
    nic: dict[str, ProbeReading] = Field(
        description="`interface`, `line_rate_bps`, `mtu_bytes`, `packet_payload_bytes`, "
        "`buffer_packets`, `coalesce_packets`."
    )
    window_s: float = Field(description="Length of the sampling window (s).")
    taken_at: str = Field(description="End of the window (ISO 8601, UTC).")


# -- service time --------------------------------------------------------------------------


class ServiceTimeRequest(RequestModel):
    """A workload in; the interrupt service-time distribution out."""

    model_config = ConfigDict(
        json_schema_extra={
            "examples": [
                {
                    "workload": {"cpu_tasks": 2, "io_tasks": 1},
                    "host": {"profile": "sx280-2007"},
                    "quantiles": [0.5, 0.9, 0.99],
                    "grid_points": 21,
                    "include_phase_type": False,
                }
            ]
        }
    )

    workload: WorkloadModel
    host: HostOverrides = Field(default_factory=HostOverrides)
    times_s: list[Annotated[float, Field(ge=0, le=1e9)]] | None = Field(
        default=None,
        max_length=MAX_LIST,
        description="Time grid of the CDF (s); chosen from the distribution when omitted.",
    )
    grid_points: int = Field(
        default=101, ge=2, le=MAX_LIST, description="Size of the default grid."
    )
    quantiles: list[Annotated[float, Field(gt=0, lt=1)]] = Field(
        default_factory=lambda: [0.5, 0.9, 0.99], max_length=100
    )
    include_phase_type: Flag = Field(default=False, description="Return the pair (alpha, T).")


class SparseMatrixModel(ResponseModel):
    """A sparse matrix in coordinate form."""

    shape: list[int]
    rows: list[int]
    cols: list[int]
    values: list[float]


class PhaseTypeOut(ResponseModel):
    alpha: list[float]
    T: SparseMatrixModel


class OccupancyModel(ResponseModel):
    """Steady state of the end system without the interrupt (Fig. 1a)."""

    cpu_tasks_at_processor: float
    io_tasks_at_processor: float
    io_tasks_at_disks: float
    processor_utilisation: float
    disk_utilisation: float
    io_throughput_per_s: float
    io_at_processor_distribution: list[float]


class ServiceTimeInputs(ResponseModel):
    workload: WorkloadInputs
    host: HostInputs


class ServiceTimeResult(ResponseModel):
    """The interrupt service time of one network interrupt (docs/conventions.md §2)."""

    mean_s: float
    variance_s2: float
    std_s: float
    rate_per_s: float = Field(description="mu = 1 / mean (interrupts/s).")
    quantiles: list[QuantileModel]
    times_s: list[float]
    cdf: list[float]
    occupancy: OccupancyModel
    n_states: int = Field(description="Tangible states of the Fig. 1a chain.")
    n_transient_states: int = Field(description="Order of T.")
    method: str
    phase_type: PhaseTypeOut | None = None
    inputs: ServiceTimeInputs


# -- NIC queue -----------------------------------------------------------------------------


class PhaseTypeIn(RequestModel):
    """A phase-type service time: initial probabilities and sub-generator (1/s)."""

    alpha: list[Annotated[float, Field(ge=0, le=1)]] = Field(min_length=1, max_length=256)
    T: list[list[Annotated[float, Field(ge=-MAX_RATE, le=MAX_RATE)]]] = Field(
        min_length=1, max_length=256
    )


class NicQueueRequest(RequestModel):
    """The NIC buffer as an M/M[N]/1/K bulk-service queue, over a list of rates."""

    model_config = ConfigDict(
        json_schema_extra={
            "examples": [
                {
                    "send_rates_bps": [500e6, 750e6, 1e9],
                    "service_rate_per_s": 20_800.0,
                    "buffer_packets": 64,
                    "coalesce_packets": 6,
                    "packet_payload_bytes": 1468,
                }
            ]
        }
    )

    send_rates_bps: list[Annotated[float, Field(ge=MIN_BIT_RATE, le=MAX_LINE_RATE)]] | None = Field(
        default=None,
        min_length=1,
        max_length=MAX_LIST,
        description="Sending rates (bit/s); lambda = B / (8 S_pkt). Give this or "
        "`arrival_rates_pps`.",
    )
    arrival_rates_pps: list[Annotated[float, Field(ge=MIN_RATE, le=MAX_RATE)]] | None = Field(
        default=None,
        min_length=1,
        max_length=MAX_LIST,
        description="Packet arrival rates (packets/s).",
    )
    service_rate_per_s: Rate | None = Field(
        default=None,
        description="Exponential interrupt service rate mu (1/s); or give `phase_type`.",
    )
    phase_type: PhaseTypeIn | None = None
    buffer_packets: int = Field(ge=1, le=MAX_PACKETS, description="K (packets).")
    coalesce_packets: int = Field(ge=1, le=MAX_PACKETS, description="N, or b of [a, b].")
    min_batch: int | None = Field(
        default=None, ge=1, le=MAX_PACKETS, description="a of the general bulk rule [a, b]."
    )
    packet_payload_bytes: int = Field(default=1468, ge=1, le=MAX_PAYLOAD_BYTES)
    include_distribution: Flag = Field(
        default=False, description="Return P(n) for n = 0..K per rate."
    )

    @model_validator(mode="after")
    def _one_rate_list(self) -> NicQueueRequest:
        if (self.send_rates_bps is None) == (self.arrival_rates_pps is None):
            raise ValueError("give exactly one of send_rates_bps and arrival_rates_pps")
        if (self.service_rate_per_s is None) == (self.phase_type is None):
            raise ValueError("give exactly one of service_rate_per_s and phase_type")
        return self


class NicQueueResult(ResponseModel):
    """Stationary measures, one entry per rate."""

    arrival_rate_pps: list[float]
    send_rate_bps: list[float]
    loss_probability: list[float]
    throughput_pps: list[float]
    throughput_bps: list[float]
    mean_occupancy: list[float]
    busy_probability: list[float]
    interrupt_rate_per_s: list[float]
    mean_batch: list[float]
    method: str
    occupancy_distribution: list[list[float]] | None = None
    inputs: dict[str, Any]


# -- transfer time -------------------------------------------------------------------------


class ConstantLoss(RequestModel):
    kind: Literal["constant"]
    loss: float = Field(ge=0, le=1, description="Loss probability at every rate.")


class TableLoss(RequestModel):
    """Loss at given rates, linearly interpolated (constant beyond the ends)."""

    kind: Literal["table"]
    send_rate_bps: list[Annotated[float, Field(ge=MIN_BIT_RATE, le=MAX_LINE_RATE)]] = Field(
        min_length=1, max_length=MAX_LIST
    )
    loss: list[Annotated[float, Field(ge=0, le=1)]] = Field(min_length=1, max_length=MAX_LIST)

    @model_validator(mode="after")
    def _same_length(self) -> TableLoss:
        if len(self.send_rate_bps) != len(self.loss):
            raise ValueError("send_rate_bps and loss must have the same length")
        return self


class NicQueueLoss(RequestModel):
    """Loss of the paper's NIC queue M/M[N]/1/K with exponential service."""

    kind: Literal["nic-queue"]
    service_rate_per_s: Rate
    buffer_packets: int = Field(ge=1, le=MAX_PACKETS)
    coalesce_packets: int = Field(ge=1, le=MAX_PACKETS)


LossModel = Annotated[ConstantLoss | TableLoss | NicQueueLoss, Field(discriminator="kind")]


class TransferTimeRequest(RequestModel):
    """The RBUDP transfer time over sending rates, for a given loss model."""

    model_config = ConfigDict(
        json_schema_extra={
            "examples": [
                {
                    "file_size_bytes": 500_000_000,
                    "propagation_delay_s": 0.1,
                    "line_rate_bps": 1e9,
                    "curve_points": 20,
                    "loss_model": {
                        "kind": "nic-queue",
                        "service_rate_per_s": 20_800.0,
                        "buffer_packets": 64,
                        "coalesce_packets": 6,
                    },
                    "find_optimum": True,
                }
            ]
        }
    )

    file_size_bytes: int = Field(ge=1, le=MAX_BYTES)
    propagation_delay_s: float = Field(gt=0, le=MAX_DELAY_S)
    line_rate_bps: float = Field(default=1e9, ge=MIN_BIT_RATE, le=MAX_LINE_RATE)
    packet_payload_bytes: int = Field(default=1468, ge=1, le=MAX_PAYLOAD_BYTES)
    header_bytes: int = Field(default=32, ge=0, le=MAX_PAYLOAD_BYTES)
    send_rates_bps: list[Annotated[float, Field(ge=MIN_BIT_RATE, le=MAX_LINE_RATE)]] | None = Field(
        default=None,
        min_length=1,
        max_length=MAX_LIST,
        description="Rates of the curve (bit/s); default `curve_points` rates up to the line.",
    )
    curve_points: int = Field(default=200, ge=2, le=MAX_LIST)
    loss_model: LossModel
    find_optimum: Flag = Field(
        default=True, description="Also search the effective bottleneck rate."
    )


class TransferCurveModel(ResponseModel):
    send_rate_bps: list[float]
    loss: list[float]
    completes: list[bool]
    total_s: list[float | None]
    first_blast_s: list[float]
    resend_s: list[float | None]
    feedback_s: list[float | None]
    n_resend: list[float | None]
    rounds: list[int | None]


class OptimumModel(ResponseModel):
    rate_bps: float
    transfer_time_s: float
    loss: float
    rounds: int
    limited_by: Literal["end-system", "line-rate"]
    resolution_bps: float


class TransferTimeResult(ResponseModel):
    curve: TransferCurveModel
    optimum: OptimumModel | None = Field(
        default=None,
        description="Null when not asked for, or when no rate lets the transfer complete.",
    )
    total_bytes: int = Field(description="S: payload plus per-packet overhead (bytes).")
    inputs: dict[str, Any]


# -- general SRN ---------------------------------------------------------------------------

Multiplicity = Annotated[int, Field(ge=0, le=2**31 - 1)] | Expression


class SrnTransition(RequestModel):
    """A timed or immediate transition with its arcs."""

    name: Name
    kind: Literal["timed", "immediate"] = "timed"
    rate: Annotated[float, Field(ge=0)] | Expression = Field(
        default=1.0, description="Firing rate (1/s) or an expression of the marking (timed)."
    )
    weight: Annotated[float, Field(ge=0)] | Expression = Field(
        default=1.0, description="(immediate)"
    )
    priority: int = Field(default=1, ge=-1_000_000, le=1_000_000, description="(immediate)")
    inputs: dict[Name, Multiplicity] = Field(default_factory=dict)
    outputs: dict[Name, Multiplicity] = Field(default_factory=dict)
    inhibitors: dict[Name, Multiplicity] = Field(default_factory=dict)
    guard: Expression | None = None


class SrnNet(RequestModel):
    """A stochastic reward net: places with initial tokens, transitions, parameters."""

    places: dict[Name, Annotated[int, Field(ge=0, le=2**31 - 1)]] = Field(min_length=1)
    transitions: list[SrnTransition] = Field(max_length=MAX_LIST)
    parameters: dict[Name, float] = Field(default_factory=dict)


class SrnInitial(RequestModel):
    """A distribution over initial markings (the paper's vanishing initial marking)."""

    markings: list[dict[Name, Annotated[int, Field(ge=0, le=2**31 - 1)]]] = Field(
        min_length=1, max_length=MAX_LIST
    )
    probabilities: list[Annotated[float, Field(ge=0, le=1)]] | None = Field(
        default=None, description="Uniform when omitted; must sum to 1."
    )


class SrnReward(RequestModel):
    """A reward with a rate part and impulse parts (both optional)."""

    rate: float | Expression | None = Field(
        default=None, description="Reward per second as an expression of the marking."
    )
    impulse: dict[Name, float] = Field(
        default_factory=dict,
        max_length=MAX_LIST,
        description="Transition name -> reward earned each time it fires.",
    )


class SrnMeasures(RequestModel):
    """Reward measures to report."""

    rewards: dict[Name, Annotated[float, Field()] | Expression | SrnReward] = Field(
        default_factory=dict,
        description="Name -> reward: an expression of the marking (a reward rate), or "
        "`{rate, impulse}`.  Steady state reports E[rate] + sum(impulse_t * throughput_t); "
        "transient reports that rate at each time in `rewards` and the expected reward "
        "earned over [0, t] in `accumulated_rewards`.",
    )
    probabilities: dict[Name, Expression] = Field(
        default_factory=dict, description="Name -> condition on the marking."
    )
    mean_tokens: Flag = True
    throughput: Flag = True


SRN_EXAMPLE: dict[str, Any] = {
    "net": {
        "places": {"queue": 0},
        "transitions": [
            {"name": "arrive", "rate": "lam", "outputs": {"queue": 1}, "inhibitors": {"queue": 5}},
            {"name": "serve", "rate": "mu", "inputs": {"queue": 1}},
        ],
        "parameters": {"lam": 1.0, "mu": 2.0},
    },
    "analysis": "steady-state",
    "measures": {"rewards": {"in_system": "#queue"}, "probabilities": {"full": "#queue == 5"}},
}


class SrnSolveRequest(RequestModel):
    """A general SRN, solved in steady state, in transient, or to absorption."""

    model_config = ConfigDict(json_schema_extra={"examples": [SRN_EXAMPLE]})

    net: SrnNet | None = Field(
        default=None, description="The net as JSON; give either `net` or `pnml`."
    )
    pnml: str | None = Field(
        default=None,
        min_length=1,
        description="The net as a PNML document: the GSPN dialect of PIPE and Storm "
        "(`Default,N` markings, `rate`, `timed`, `priority`, `weight`, `infiniteServer`, "
        "normal and inhibitor arcs) or the ISO/IEC 15909-2 place/transition core (P/T "
        "transitions are timed at rate 1/s).  DTDs and entities are refused; the document "
        "is bounded by `max_body_bytes` and `max_pnml_elements`.",
    )
    parameters: dict[Name, float] = Field(
        default_factory=dict, description="Overrides of the net's parameter values."
    )
    analysis: Literal["steady-state", "transient", "absorption"] = "steady-state"
    times: list[Annotated[float, Field(ge=0, le=1e12)]] | None = Field(
        default=None,
        max_length=MAX_LIST,
        description="Times (s): required for transient; the CDF grid for absorption.",
    )
    initial: SrnInitial | None = None
    absorbing: Expression | None = Field(
        default=None,
        description="Absorption: condition that makes a marking absorbing (default: the "
        "markings with no way out).",
    )
    quantiles: list[Annotated[float, Field(gt=0, lt=1)]] = Field(
        default_factory=lambda: [0.5, 0.9, 0.99], max_length=100
    )
    grid_points: int = Field(default=101, ge=2, le=MAX_LIST)
    measures: SrnMeasures = Field(default_factory=SrnMeasures)
    include_distribution: Flag = Field(
        default=False, description="Return the markings and their probabilities (small chains)."
    )

    @model_validator(mode="after")
    def _one_net(self) -> SrnSolveRequest:
        if (self.net is None) == (self.pnml is None):
            raise ValueError("give exactly one of 'net' (JSON) and 'pnml' (a PNML document)")
        return self


class Measures(ResponseModel):
    rewards: dict[str, Any] = Field(default_factory=dict)
    accumulated_rewards: dict[str, Any] | None = Field(
        default=None,
        description="Transient only: expected reward earned over [0, t], one value per time.",
    )
    probabilities: dict[str, Any] = Field(default_factory=dict)
    mean_tokens: dict[str, Any] | None = None
    throughput: dict[str, Any] | None = None


class SteadyStateOut(ResponseModel):
    residual: float = Field(description="||pi Q||_1")
    method: str
    iterations: int
    note: str = Field(
        "",
        description="How the route that answered did it, where it says: for `sparse-lu`, "
        "the fill-reducing order (`AMD ordering`, or SuperLU's own where the AMD library "
        "is not installed)",
    )
    measures: Measures


class TransientOut(ResponseModel):
    times: list[float]
    error_bound: list[float]
    method: str
    measures: Measures


class AbsorptionOut(ResponseModel):
    mean_s: float
    variance_s2: float
    quantiles: list[QuantileModel]
    times_s: list[float]
    cdf: list[float]
    atom: float
    n_transient_states: int
    error_bound: float


class DistributionOut(ResponseModel):
    place_names: list[str]
    markings: list[list[int]]
    probabilities: list[Any] = Field(
        description="One probability per marking (steady state), or one list per time."
    )


class SrnSolveResult(ResponseModel):
    analysis: Literal["steady-state", "transient", "absorption"]
    n_states: int
    n_edges: int
    n_vanishing: int
    n_dead_states: int
    n_absorbing_states: int
    solved_in: Literal["process", "worker-pool"]
    steady_state: SteadyStateOut | None = None
    transient: TransientOut | None = None
    absorption: AbsorptionOut | None = None
    distribution: DistributionOut | None = None
    renamed: dict[str, str] | None = Field(
        default=None,
        description="PNML only: the ids that are not identifiers (e.g. with `.` or `-`), "
        "each with the name expressions use for it (`#p_Request` for `p.Request`).  Results "
        "are keyed by the file's own ids.",
    )


# -- long solves ---------------------------------------------------------------------------


class JobProgress(ResponseModel):
    """What a job has reported so far."""

    stage: str = Field(
        description="`queued`, `starting`, `exploring` (reachability graph), `solving`, "
        "`measures`, then the final status."
    )
    states: int | None = Field(
        default=None,
        description="Tangible markings found: so far while `exploring` (reported about "
        "every half second), then the graph's count.",
    )
    edges: int | None = Field(
        default=None, description="CTMC edges generated: so far while `exploring`, then all."
    )
    method: str | None = Field(
        default=None, description="The steady-state solver's route running (or that ran)."
    )
    iterations: int | None = Field(
        default=None,
        description="Iterations of the steady-state solver so far, reported every 10 "
        "(0 for direct routes).",
    )
    residual: float | None = Field(
        default=None,
        description="||pi Q||_1 (1/s): of the current iterate while solving (estimated from "
        "the recurrence for BiCGSTAB; none yet for direct routes), then of the steady state.",
    )
    elapsed_s: float | None = Field(default=None, description="Wall time since the job started.")


class SrnJob(ResponseModel):
    """A long SRN solve: its status, progress and, once done, its result or problem."""

    id: str = Field(description="32 hexadecimal digits.")
    status: Literal["queued", "running", "succeeded", "failed", "cancelled", "interrupted"] = Field(
        description="`interrupted`: the service stopped or restarted while the job ran "
        "(submit it again)."
    )
    created_at: datetime
    started_at: datetime | None = None
    finished_at: datetime | None = None
    cancel_requested: bool = False
    progress: JobProgress
    result: SrnSolveResult | None = Field(
        default=None, description="The POST /srn/solve body, when `succeeded`."
    )
    problem: Problem | None = Field(
        default=None, description="Why the job failed or was interrupted (problem+json)."
    )


# -- health --------------------------------------------------------------------------------


class Health(ResponseModel):
    status: Literal["ok"]
    version: str


class Readiness(ResponseModel):
    status: Literal["ready"]
    compiled_nets: int
    solve_workers: int
