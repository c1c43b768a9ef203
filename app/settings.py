"""Service settings: every limit the API enforces, overridable by ``BLASTRATE_*`` variables.

The defaults suit a 2-core host answering transfer tools in milliseconds while capacity
planners post larger models.  Each limit is reported by name in the problem+json body of
the request that reaches it, so the names here are part of the API.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field, SecretStr
from pydantic_settings import BaseSettings, SettingsConfigDict

from .defaults import DEFAULT_MAX_STATES

__all__ = ["Settings"]


class Settings(BaseSettings):
    """Limits and tuning of the HTTP service.

    Every field can be set by an environment variable named ``BLASTRATE_`` plus the field
    name in upper case, e.g. ``BLASTRATE_SOLVE_TIMEOUT_S=30``.

    Examples
    --------
    >>> Settings(max_states=10_000).max_states
    10000
    """

    model_config = SettingsConfigDict(env_prefix="BLASTRATE_", extra="ignore", frozen=True)

    # -- connections (blastrate serve) ---------------------------------------------------
    max_connections: int = Field(
        default=2_000,
        ge=1,
        description="Open HTTP connections per server process; more are closed at once.",
    )
    max_connections_per_client: int = Field(
        default=256,
        ge=1,
        description="Open HTTP connections from one client address; more are closed at once.",
    )
    read_timeout_s: float = Field(
        default=10.0,
        gt=0,
        description="Longest a client may take to send one whole request, headers and body "
        "(s); then its connection is closed.",
    )
    # -- request size --------------------------------------------------------------------
    max_body_bytes: int = Field(
        default=1_000_000, ge=1_024, description="Largest request body accepted (bytes)."
    )
    # -- SRN models ----------------------------------------------------------------------
    max_states: int = Field(
        default=DEFAULT_MAX_STATES,
        ge=1,
        description="Tangible markings a posted SRN may reach (states).",
    )
    max_edges: int = Field(
        default=5_000_000, ge=1, description="CTMC transitions a posted SRN may generate (edges)."
    )
    max_transitions: int = Field(default=500, ge=1, description="Transitions in a posted SRN.")
    max_places: int = Field(default=500, ge=1, description="Places in a posted SRN.")
    max_expression_length: int = Field(
        default=500, ge=1, description="Characters in one expression (rate, guard, reward...)."
    )
    max_pnml_elements: int = Field(
        default=100_000, ge=1, description="XML elements in a posted PNML document."
    )
    max_time_points: int = Field(
        default=1_000, ge=1, description="Time points in a transient or absorption-time grid."
    )
    max_distribution_states: int = Field(
        default=10_000, ge=0, description="Largest chain whose full distribution may be returned."
    )
    # -- solve time and the process pool ---------------------------------------------------
    solve_timeout_s: float = Field(
        default=10.0, gt=0, description="Wall time one solve may take before it is stopped (s)."
    )
    inprocess_max_states: int = Field(
        default=2_000,
        ge=0,
        description="SRNs up to this many states are solved in the request's process; "
        "larger ones go to the worker pool, where the time limit can stop them.",
    )
    inprocess_max_work: float = Field(
        default=2e7,
        ge=0,
        description="Estimated sparse products (transient, absorption) above which even a "
        "small chain goes to the worker pool.",
    )
    solve_workers: int = Field(
        default=2, ge=1, le=64, description="Worker processes for large solves."
    )
    solve_queue: int = Field(
        default=16,
        ge=0,
        description="Large solves that may wait for a worker before 429 is returned.",
    )
    # -- bounds on every solve, the worker processes, shutdown and metrics ---------------
    max_vanishing: int = Field(
        default=1_000_000,
        ge=1,
        description="Vanishing markings a posted SRN may meet while exploring (applied when "
        "the engine counts them).",
    )
    inprocess_max_seconds: float = Field(
        default=1.0,
        gt=0,
        description="Wall time a solve may run in the server process before it is stopped "
        "and moved to the worker pool (s).",
    )
    inprocess_max_memory_bytes: int = Field(
        default=256_000_000,
        ge=1_000_000,
        description="Growth of the server's resident memory during a solve in the server "
        "process before it is stopped and moved to the worker pool (bytes).",
    )
    solve_memory_bytes: int = Field(
        default=2_000_000_000,
        ge=50_000_000,
        description="Resident memory one solve in a worker process may use; more stops it "
        "with a problem naming this limit (bytes).",
    )
    worker_recycle_bytes: int = Field(
        default=800_000_000,
        ge=50_000_000,
        description="A worker process whose resident memory is above this after a job is "
        "replaced by a fresh one (bytes).",
    )
    solver_retry_after_s: int = Field(
        default=2,
        ge=1,
        description="Retry-After (s) sent with a 503 when a solver process failed on the "
        "server's side.",
    )
    shutdown_timeout_s: float = Field(
        default=10.0,
        gt=0,
        description="Longest time from SIGTERM to exit: running solves are stopped and the "
        "process exits even if one does not stop (s).",
    )
    blas_threads: int = Field(
        default=1,
        ge=1,
        le=256,
        description="Threads of each BLAS / OpenMP library, in the server and every worker.",
    )
    metrics_multiprocess: Literal["auto", "on", "off"] = Field(
        default="auto",
        description="Prometheus multiprocess mode: 'auto' turns it on under uvicorn "
        "--workers N (or when PROMETHEUS_MULTIPROC_DIR is set).",
    )
    metrics_dir: str | None = Field(
        default=None,
        description="Parent directory of the per-server multiprocess metrics directories "
        "(default: the system's temporary directory).",
    )
    # -- long solves (/srn/jobs) -----------------------------------------------------------
    api_token: SecretStr | None = Field(
        default=None,
        description="Bearer token (BLASTRATE_API_TOKEN) that, when set, every route that "
        "writes (profiles, jobs) or reveals the host (`/host`, `workload=live`) requires "
        "in `Authorization: Bearer TOKEN`; the model's read-only routes stay open.",
    )
    database_url: str | None = Field(
        default=None,
        description="SQLAlchemy URL of the job and profile database (BLASTRATE_DATABASE_URL); "
        "by default an SQLite file in the user's data directory.",
    )
    job_workers: int = Field(
        default=1, ge=1, le=64, description="Jobs one service process runs at the same time."
    )
    max_queued_jobs: int = Field(
        default=32, ge=1, description="Jobs that may be queued or running before 429."
    )
    job_timeout_s: float = Field(
        default=3_600.0, gt=0, description="Wall time one job may run before it is stopped (s)."
    )
    job_retention_s: float = Field(
        default=7 * 86_400.0,
        gt=0,
        description="Finished jobs and their results are deleted this long after they end (s).",
    )
    max_job_result_bytes: int = Field(
        default=20_000_000, ge=1_024, description="Largest job result kept (bytes of JSON)."
    )
    # -- the NIC queue and the transfer curve ----------------------------------------------
    max_rates: int = Field(
        default=2_000, ge=1, description="Arrival or sending rates in one request."
    )
    max_buffer_packets: int = Field(
        default=65_536, ge=1, description="Largest NIC buffer K (packets)."
    )
    max_queue_cells: int = Field(
        default=16_000_000,
        ge=1,
        description="Rates times occupancy levels (x phases) one NIC queue evaluation may "
        "hold in memory (8 bytes each).",
    )
    inprocess_max_queue_work: float = Field(
        default=2e6,
        ge=0,
        description="Estimated NIC queue work (rates x levels, x phases^2 x batch for "
        "phase-type service) above which a request goes to the worker pool.",
    )
    # -- in-process compute (harden-contract) -------------------------------------------
    compute_threads: int = Field(
        default=4,
        ge=1,
        le=64,
        description="Threads that run in-process computations, off the event loop.",
    )
    compute_on_loop_cpu: bool = Field(
        default=True,
        description="Pin the event loop and the compute threads to the CPU the loop runs "
        "on at start-up (Linux): each hand-over to a compute thread is then a same-CPU "
        "wake-up, not an inter-processor one (about 0.2 ms off an uncached GET "
        "/bottleneck-rate on a 2-vCPU VM).  Worker processes keep every CPU.  Unless set "
        "explicitly, off in a process that is one of several servers (a uvicorn worker, or "
        "PROMETHEUS_MULTIPROC_DIR set).",
    )
    inprocess_max_method_states: int = Field(
        default=256,
        ge=0,
        description="Bottleneck and service-time requests whose workload chain has more "
        "states go to the worker pool: their compute would hold the interpreter lock long "
        "enough to slow every other request.",
    )
    max_curve_points: int = Field(
        default=5_000, ge=2, description="Points of a T(B_send) curve or of a CDF grid."
    )
    # -- planning: sweeps, what-if, plots -------------------------------------------------
    sweep_max_points: int = Field(
        default=10_000, ge=1, description="Points of one sweep (the product of its axes)."
    )
    sweep_inline_points: int = Field(
        default=64,
        ge=0,
        description="Sweeps up to this many points run in a thread of the service; larger "
        "ones on a process pool (or the Dask cluster).",
    )
    sweep_workers: int = Field(
        default=2, ge=1, le=256, description="Local worker processes of one large sweep."
    )
    sweep_cluster: str | None = Field(
        default=None,
        max_length=200,
        description="Dask scheduler address (tcp://HOST:8786) that runs large sweeps; "
        "unset: a local process pool.",
    )
    sweep_connect_timeout_s: float = Field(
        default=10.0, gt=0, description="Wall time to connect to the Dask scheduler (s)."
    )
    sweep_timeout_s: float = Field(
        default=300.0, gt=0, description="Wall time one sweep may take (s)."
    )
    max_concurrent_sweeps: int = Field(
        default=2,
        ge=1,
        description="Sweeps that may run on a process pool or the cluster at once; more are "
        "answered 429 (each pool starts `sweep_workers` processes).",
    )
    planning_max_buffer_packets: int = Field(
        default=8_192,
        ge=1,
        description="Largest NIC ring K (packets) a sweep, what-if or plot may use: the "
        "queue's cost grows like K^2.",
    )
    plot_max_points: int = Field(
        default=200, ge=1, description="Points (model solves) behind one sweep plot."
    )
    planning_max_time_slice_work: float = Field(
        default=4.0e7,
        gt=0,
        description="Work of the time-slice model behind one plot, or one sweep in the "
        "service's threads (larger sweeps go to the pool): per point K (7 (N + 1))^2 plus "
        "3e5, about 0.1-0.16 us a unit on a 2-core host (4-6 s in all; 88 points at "
        "K = 64, N = 6).",
    )
    plot_cache_entries: int = Field(default=256, ge=0, description="Rendered plots kept in memory.")
    # -- cache ---------------------------------------------------------------------------
    cache_entries: int = Field(default=4_096, ge=0, description="Results kept in the LRU cache.")
    cache_bytes: int = Field(
        default=64_000_000, ge=0, description="Total size of the cached response bodies (bytes)."
    )
    # -- host profiles and the live probe (host-live) ----------------------------------------
    # (the stored profiles share `database_url` with the jobs)
    probe_enabled: bool = Field(
        default=True,
        description="Probe this host's workload in a background thread, for GET /host and "
        "GET /bottleneck-rate?workload=live.",
    )
    probe_interval_s: float = Field(
        default=2.0, gt=0, le=600, description="Sampling window of each live probe (s)."
    )
    probe_interface: str | None = Field(
        default=None,
        max_length=15,
        description="Receiving network interface to probe; default: the default route's.",
    )
    # -- start-up and logging ------------------------------------------------------------
    warm_up: bool = Field(
        default=True, description="Compile the default nets at start-up; /readyz waits for it."
    )
    log_level: Literal["debug", "info", "warning", "error"] = "info"
    log_json: bool = Field(default=True, description="One JSON object per log line.")
