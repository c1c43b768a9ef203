"""The interrupt service-time distribution of a workload: the method's first stage.

A workload (C CPU-bound tasks, I I/O-bound tasks, m cores, d disks) and a host profile
go in; the distribution of the time the host takes to service one network interrupt
comes out, by the tagged-customer method:

1. The steady state of Fig. 1a (:mod:`host.nets`) is the state an interrupt finds on
   arrival (Poisson arrivals see time averages).
2. The tagged net of Fig. 1b, started from that state, absorbs when the interrupt
   completes; the time to absorption is a phase-type distribution ``(alpha, T)``.

Both chains are reversible (a closed BCMP network whose routing is reversible), which
the solution exploits and checks at run time: detailed balance gives the steady state
in logs, exact componentwise even where probabilities underflow, and it symmetrises T
(see :mod:`host._spectral`).  Should a check fail, the engine's general solvers take
over.  Paper-sized chains (both at most :data:`host._shape.SMALL` states) run both steps
as one compiled call, with the moments from a subtraction-free elimination of ``-T``
(:mod:`host._small_chain`).  The result defers what only some callers read (quantiles,
the CDF grid, T as a sparse matrix) to first access.
"""

from __future__ import annotations

import dataclasses
import functools
import math
import numbers
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import scipy.sparse as sp
from numpy.typing import ArrayLike, NDArray

from srn import AbsorptionTime, Limits, ReachabilityGraph, steady_state, time_to_absorption

from ._checks import require_count
from ._direct_chain import DIRECT_MAX_STATES, direct_mean_service_time
from ._shape import SHAPES, Shape
from ._spectral import SpectralDistribution, Spectrum, spectral_solution
from .errors import WorkloadError
from .nets import end_system_state_count, net_parameters
from .profiles import DEFAULT_PROFILE, HostProfile, host_profile
from .workload import Workload

__all__ = [
    "DEFAULT_LIMITS",
    "EndSystemOccupancy",
    "InterruptServiceTime",
    "interrupt_service_time",
]

#: Limits of the end-system nets when the caller gives none.  The state count depends on
#: I and d only (see :func:`host.end_system_state_count`); beyond this it is refused up
#: front.
DEFAULT_LIMITS = Limits(max_states=300_000)

_MAX_GRID_POINTS = 100_000


@dataclass(frozen=True)
class EndSystemOccupancy:
    """Steady state of the end system without the interrupt (Fig. 1a).

    Attributes
    ----------
    cpu_tasks_at_processor : float
        Mean CPU-bound tasks at the processor (always C).
    io_tasks_at_processor : float
        Mean I/O-bound tasks at the processor, E[i].
    io_tasks_at_disks : float
        Mean I/O-bound tasks at the disks, queued or in service, I - E[i].
    processor_utilisation : float
        Mean fraction of the m cores busy, E[min(C + i, m)] / m.
    disk_utilisation : float
        Mean fraction of the d disks busy.
    io_throughput_per_s : float
        Disk completions per second (= processor bursts of I/O tasks per second).
    io_at_processor_distribution : tuple of float
        P(i = k) for k = 0..I; an arriving interrupt sees this (PASTA).
    """

    cpu_tasks_at_processor: float
    io_tasks_at_processor: float
    io_tasks_at_disks: float
    processor_utilisation: float
    disk_utilisation: float
    io_throughput_per_s: float
    io_at_processor_distribution: tuple[float, ...]

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready dict."""
        out = dataclasses.asdict(self)
        out["io_at_processor_distribution"] = list(self.io_at_processor_distribution)
        return out


@dataclass(frozen=True)
class InterruptServiceTime:
    """The distribution of the time the host takes to service one network interrupt.

    Attributes
    ----------
    workload : Workload
        The workload analysed.
    profile : HostProfile
        The host profile used.
    absorption : AbsorptionTime
        The full time-to-absorption result of the tagged net: ``times`` and ``cdf``
        (the CDF on the grid, s), ``mean``, ``variance``, ``quantiles`` and the
        phase-type pair ``alpha``, ``T``.  Computed on first access (the quantiles, the
        grid and the sparse T cost more than the mean), then kept.
    mean_s : float
        Mean service time (s).
    variance_s2 : float
        Variance (s^2).
    rate_per_s : float
        mu = 1 / mean_s, the interrupt service rate the NIC queue uses (1/s).
    quantiles_s : dict of float to float
        Level -> service time (s) not exceeded with that probability (from
        :attr:`absorption`, so also computed on first access).
    occupancy : EndSystemOccupancy
        Steady state of processor and disks without the interrupt.
    n_states : int
        Tangible states of the Fig. 1a chain.
    n_transient_states : int
        Order of T (states of the Fig. 1b chain before absorption).
    method : str
        How the distribution was evaluated: ``"spectral"`` (eigen-decomposition of the
        symmetrised T, dense), ``"spectral-tridiagonal"`` (the same on the tridiagonal T
        of one disk), ``"spectral-lanczos"`` (large multi-disk chains, sparse Lanczos)
        or ``"uniformization"`` (the engine's generic solver, should T ever fail the
        reversibility check).
    steady_state_residual : float
        ``||pi Q||_1`` of the Fig. 1a steady state.
    """

    workload: Workload
    profile: HostProfile
    mean_s: float
    variance_s2: float
    rate_per_s: float
    occupancy: EndSystemOccupancy
    n_states: int
    n_transient_states: int
    # The distribution itself, or what computes it on first access (internal).
    _distribution: AbsorptionTime | SpectralDistribution = dataclasses.field(
        repr=False, compare=False
    )
    method: str = "spectral"
    steady_state_residual: float = 0.0

    @functools.cached_property
    def absorption(self) -> AbsorptionTime:
        """The time-to-absorption result of the tagged net (see the class attributes)."""
        d = self._distribution
        return d if isinstance(d, AbsorptionTime) else d.build()

    @functools.cached_property
    def quantiles_s(self) -> dict[float, float]:
        """Level -> service time (s) not exceeded with that probability."""
        return dict(self.absorption.quantiles)

    @property
    def std_s(self) -> float:
        """Standard deviation (s)."""
        return math.sqrt(max(self.variance_s2, 0.0))

    @property
    def times_s(self) -> NDArray[np.float64]:
        """The CDF's time grid (s)."""
        return self.absorption.times

    @property
    def cdf(self) -> NDArray[np.float64]:
        """P(service time <= t) on :attr:`times_s`."""
        return self.absorption.cdf

    def cdf_at(self, times: ArrayLike) -> NDArray[np.float64]:
        """P(service time <= t) at any times (s)."""
        return self.absorption.cdf_at(times)

    def phase_type(self) -> tuple[NDArray[np.float64], sp.csr_array]:
        """The phase-type pair (alpha, T): initial probabilities and sub-generator (1/s)."""
        return self.absorption.alpha, self.absorption.T

    def to_dict(self, *, include_phase_type: bool = False) -> dict[str, Any]:
        """A JSON-ready dict (every number finite).

        Parameters
        ----------
        include_phase_type : bool
            Add ``phase_type`` with ``alpha`` and ``T`` as sparse triplets.
        """
        out: dict[str, Any] = {
            "workload": self.workload.to_dict(),
            "profile": self.profile.to_dict(),
            "mean_s": self.mean_s,
            "variance_s2": self.variance_s2,
            "std_s": self.std_s,
            "rate_per_s": self.rate_per_s,
            "quantiles_s": {repr(float(k)): v for k, v in self.quantiles_s.items()},
            "cdf": {
                "times_s": self.absorption.times.tolist(),
                "probability": self.absorption.cdf.tolist(),
            },
            "occupancy": self.occupancy.to_dict(),
            "n_states": self.n_states,
            "n_transient_states": self.n_transient_states,
            "method": self.method,
            "steady_state_residual": self.steady_state_residual,
            "error_bound": float(self.absorption.error_bound),
        }
        if include_phase_type:
            T = sp.coo_array(self.absorption.T)
            out["phase_type"] = {
                "alpha": self.absorption.alpha.tolist(),
                "T": {
                    "shape": list(T.shape),
                    "rows": T.row.tolist(),
                    "cols": T.col.tolist(),
                    "values": T.data.tolist(),
                },
            }
        return out


_DEFAULT_QUANTILES = (0.5, 0.9, 0.99)
_DEFAULT_GRID_POINTS = 101
# What _validate_request returns for the defaults (a copy of the levels each time): the
# bottleneck search calls with them on every request.
_DEFAULT_LEVELS = np.array(_DEFAULT_QUANTILES)


def _validate_request(
    times: ArrayLike | None, quantiles: Sequence[float], grid_points: int
) -> tuple[NDArray[np.float64] | None, NDArray[np.float64], int]:
    defaults = quantiles is _DEFAULT_QUANTILES and type(grid_points) is int
    if times is None and defaults and grid_points == _DEFAULT_GRID_POINTS:
        return None, _DEFAULT_LEVELS.copy(), _DEFAULT_GRID_POINTS
    grid = None
    if times is not None:
        try:
            grid = np.atleast_1d(np.asarray(times, dtype=float))
        except (TypeError, ValueError):
            raise WorkloadError("times must be a list of seconds", field="times") from None
        if grid.ndim != 1 or not np.all(np.isfinite(grid)) or np.any(grid < 0):
            raise WorkloadError(
                "times must be a 1-D list of finite, non-negative seconds", field="times"
            )
        if len(grid) > _MAX_GRID_POINTS:
            raise WorkloadError(
                f"times has {len(grid)} entries, more than {_MAX_GRID_POINTS}",
                field="times",
                limit="max_grid_points",
                maximum=_MAX_GRID_POINTS,
                reached=len(grid),
            )
    if isinstance(quantiles, str | bytes) or not isinstance(quantiles, Sequence | np.ndarray):
        raise WorkloadError("quantiles must be a list of levels in (0, 1)", field="quantiles")
    if len(quantiles) > 1_000:
        raise WorkloadError("at most 1000 quantile levels", field="quantiles")
    levels: list[float] = []
    for q in quantiles:
        if isinstance(q, bool) or not isinstance(q, numbers.Real) or not 0 < float(q) < 1:
            raise WorkloadError(f"quantile levels must lie in (0, 1), got {q!r}", field="quantiles")
        levels.append(float(q))
    points = require_count(
        grid_points, "grid_points", minimum=2, maximum=_MAX_GRID_POINTS, limit="max_grid_points"
    )
    return grid, np.array(levels, dtype=np.float64), points


def _steady_state(
    shape: Shape, graph: ReachabilityGraph, edge_rates: NDArray[np.float64] | None = None
) -> tuple[NDArray[np.float64], NDArray[np.float64], float]:
    """Fig. 1a's stationary distribution, its logs, and the residual ``||pi Q||_1``.

    The closed network is reversible (a BCMP product form whose routing is
    reversible), so detailed balance gives log pi componentwise to rounding, also where
    pi underflows.  Should the check fail, the engine's general solver takes over.
    ``edge_rates`` are the graph's, if already known.
    """
    rates = (graph.edge_rates() if edge_rates is None else edge_rates)[shape.a_moving]
    log_pi = shape.balance_a.log_weights(rates)
    if log_pi is None:
        pi = steady_state(graph.generator()).probabilities
        with np.errstate(divide="ignore"):
            log_pi = np.log(pi)
    else:
        log_pi = log_pi - np.log(np.exp(log_pi).sum())
        pi = np.exp(log_pi)
    n = shape.n_states
    flow = pi[shape.a_src] * rates
    balance = np.bincount(shape.a_dst, weights=flow, minlength=n) - np.bincount(
        shape.a_src, weights=flow, minlength=n
    )
    return pi, log_pi, float(np.abs(balance).sum())


def interrupt_service_time(
    workload: Workload,
    profile: HostProfile | str = DEFAULT_PROFILE,
    *,
    times: ArrayLike | None = None,
    quantiles: Sequence[float] = _DEFAULT_QUANTILES,
    grid_points: int = _DEFAULT_GRID_POINTS,
    limits: Limits | None = None,
) -> InterruptServiceTime:
    """Distribution of the time the host takes to service one network interrupt.

    Solves the steady-state net (Fig. 1a) for the state an interrupt finds on arrival,
    then the tagged-customer net (Fig. 1b) from that state for the time until the
    interrupt completes: a phase-type distribution.  SPEC sections 1 and 2 fix the
    conventions.  Compiled nets and reachability graphs are cached per (I, d); a call
    with a cached shape only re-evaluates the rates and solves.

    Parameters
    ----------
    workload : Workload
        C CPU-bound tasks, I I/O-bound tasks, m cores, d disks.
    profile : HostProfile or str, default "sx280-2007"
        The host's service rates (1/s), or the name of a built-in profile.
    times : array_like, optional
        Times (s) at which to report the CDF.  By default ``grid_points`` evenly
        spaced points from 0 to the 99.9 % quantile.
    quantiles : sequence of float, default (0.5, 0.9, 0.99)
        Levels in (0, 1) of the quantiles to report.
    grid_points : int, default 101
        Size of the default grid (2..100000).
    limits : Limits, optional
        Engine limits for the two nets; by default at most 300,000 states.

    Returns
    -------
    InterruptServiceTime
        CDF, mean, variance, quantiles, rate ``mu = 1 / mean``, phase-type pair, and
        the steady-state occupancy of processor and disks.

    Raises
    ------
    WorkloadError
        Naming the field: an unknown profile name, an invalid ``times``, ``quantiles``
        or ``grid_points``, or a workload whose state count (see
        :func:`end_system_state_count`) exceeds ``limits.max_states`` (``limit`` is then
        ``"max_states"``, with ``maximum`` and ``reached``).

    Examples
    --------
    One CPU-bound task, nothing else: the interrupt gets half the core.

    >>> r = interrupt_service_time(Workload(cpu_tasks=1, io_tasks=0))
    >>> round(r.rate_per_s, 6)
    20800.0
    >>> r = interrupt_service_time(Workload(cpu_tasks=2, io_tasks=2), "sx280-2007")
    >>> r.n_states, round(r.mean_s * 1e6, 3)
    (3, 87.383)
    """
    if not isinstance(workload, Workload):
        raise WorkloadError("workload must be a Workload", field="workload")
    host = host_profile(profile) if isinstance(profile, str) else profile
    if not isinstance(host, HostProfile):
        raise WorkloadError("profile must be a HostProfile or a profile name", field="profile")
    grid, levels, points = _validate_request(times, quantiles, grid_points)
    limits = DEFAULT_LIMITS if limits is None else limits
    if not isinstance(limits, Limits):
        raise WorkloadError("limits must be an srn.Limits", field="limits")
    count = end_system_state_count(workload)
    if count + 1 > limits.max_states:
        name = "disks" if workload.disks > 1 else "io_tasks"
        raise WorkloadError(
            f"io_tasks = {workload.io_tasks} on disks = {workload.disks} gives {count + 1} "
            f"tangible markings, above the limit max_states = {limits.max_states}; the count "
            "grows like io_tasks^disks / (disks!)^2",
            field=name,
            limit="max_states",
            maximum=limits.max_states,
            reached=count + 1,
        )

    shape = SHAPES.get(workload.io_tasks, workload.disks, limits)
    values = net_parameters(workload, host)
    small = None if shape.small_chain is None else shape.small_chain.solve(values)
    distribution: AbsorptionTime | SpectralDistribution
    if small is None:
        occupancy, distribution, method, residual = _general_solution(
            shape, values, workload, host, grid, levels, points
        )
        mean, variance = distribution.mean, distribution.variance
    else:
        # Paper-sized chains: both steps of _general_solution in one compiled call.
        mean, variance = small.mean, small.second - small.mean * small.mean
        occupancy = _occupancy_of(
            small.io_at_processor,
            small.busy_disks,
            small.busy_cores,
            small.io_distribution,
            workload,
            host,
        )
        spectrum = Spectrum(small.left, small.right, mean, dense=small.S)
        distribution = SpectralDistribution(
            shape,
            spectrum,
            mean,
            variance,
            grid,
            levels,
            points,
            small.alpha,
            small.inner,
            small.out_rate,
        )
        method, residual = "spectral", small.residual
    if count <= DIRECT_MAX_STATES:
        # One E[S] for every caller: the direct elimination's, which the paper's
        # answers take without this function (host.interrupt_service_rate); the
        # solution's own mean above agrees with it to 1e-12 relative.
        mean = direct_mean_service_time(workload, host)
    return InterruptServiceTime(
        workload=workload,
        profile=host,
        mean_s=mean,
        variance_s2=variance,
        rate_per_s=1.0 / mean,
        occupancy=occupancy,
        n_states=shape.n_states,
        n_transient_states=len(shape.transient),
        _distribution=distribution,
        method=method,
        steady_state_residual=residual,
    )


def _general_solution(
    shape: Shape,
    values: dict[str, float],
    workload: Workload,
    host: HostProfile,
    grid: NDArray[np.float64] | None,
    levels: NDArray[np.float64],
    points: int,
) -> tuple[EndSystemOccupancy, AbsorptionTime | SpectralDistribution, str, float]:
    """Steps 1 and 2 with NumPy and, where a check fails, the engine: the occupancy,
    the distribution, the method's name and the steady state's residual."""
    # Step 1: the steady state of Fig. 1a.
    graph_a = shape.graph_a.with_parameters(values)
    rates_a = None if shape.rates_a is None else shape.rates_a(values)
    pi, log_pi, residual = _steady_state(shape, graph_a, rates_a)
    occupancy = _occupancy(shape, pi, workload, host)

    # Step 2: the tagged customer, started from that steady state (the engine's
    # vanishing initial marking, on the graph cached for this shape).
    def tagged_graph() -> ReachabilityGraph:
        return shape.graph_b.with_parameters(values).with_initial(pi)

    if shape.rates_b is None:
        graph_b = tagged_graph()
        rates_b = graph_b.edge_rates()
        alpha = graph_b.initial_distribution[shape.transient]
    else:
        rates_b = shape.rates_b(values)
        # Every start is tangible, so each transient state starts from one Fig. 1a state
        # with its probability (what the engine's initial distribution holds, exactly).
        alpha = pi[shape.b_from_a]
    nt = len(alpha)
    inner = rates_b[shape.b_inner]
    exit_rates: NDArray[np.float64] = np.bincount(
        shape.b_exit_row, weights=rates_b[shape.b_exit], minlength=nt
    ).astype(np.float64)
    out_rate = exit_rates + np.bincount(shape.b_rows, weights=inner, minlength=nt)
    log_w = shape.balance_b.log_weights(inner)
    spectral = None
    if log_w is not None:
        log_alpha = log_pi[shape.b_from_a]
        spectral = spectral_solution(shape, inner, out_rate, exit_rates, alpha, log_alpha, log_w)
    if spectral is None:
        graph_b = tagged_graph()
        absorption = time_to_absorption(
            graph_b.generator(),
            graph_b.initial_distribution,
            times=grid,
            quantiles=tuple(levels),
            grid_points=points,
        )
        return occupancy, absorption, "uniformization", residual
    spectrum, mean, variance, method = spectral
    distribution = SpectralDistribution(
        shape, spectrum, mean, variance, grid, levels, points, alpha, inner, out_rate
    )
    return occupancy, distribution, method, residual


def _occupancy(
    shape: Shape, pi: NDArray[np.float64], workload: Workload, host: HostProfile
) -> EndSystemOccupancy:
    present = workload.cpu_tasks + shape.io_at_cpu
    return _occupancy_of(
        float(pi @ shape.io_at_cpu),
        float(pi @ shape.busy_disks),
        float(pi @ np.minimum(present, workload.cores)),
        np.asarray(
            np.bincount(
                shape.io_at_cpu.astype(np.intp), weights=pi, minlength=workload.io_tasks + 1
            ),
            dtype=np.float64,
        ),
        workload,
        host,
    )


def _occupancy_of(
    io_cpu: float,
    busy: float,
    cores: float,
    marginal: NDArray[np.float64],
    workload: Workload,
    host: HostProfile,
) -> EndSystemOccupancy:
    """The occupancy from E[i], E[busy disks], E[min(C + i, m)] and P(i = k)."""
    return EndSystemOccupancy(
        cpu_tasks_at_processor=float(workload.cpu_tasks),
        io_tasks_at_processor=io_cpu,
        io_tasks_at_disks=workload.io_tasks - io_cpu,
        processor_utilisation=cores / workload.cores,
        disk_utilisation=busy / workload.disks,
        io_throughput_per_s=host.mu_disk * busy,
        io_at_processor_distribution=tuple(float(p) for p in marginal),
    )
