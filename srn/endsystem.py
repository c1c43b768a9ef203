"""The end-system workload model and the interrupt service-time distribution.

This is the first stage of the paper's method (SPEC sections 1 and 2).  A workload --
C CPU-bound tasks, I I/O-bound tasks, m cores, d disks -- and a host profile (service
rates) go in; the distribution of the time the host takes to service one network
interrupt comes out, by the tagged-customer method:

1. The steady-state SRN (the paper's Fig. 1a): the I/O tasks circulate between the
   processor (processor sharing, each of the n = C + i tasks present gets
   ``min(1, m / n)`` of a core) and the disks (FCFS, ``mu_disk`` per busy disk, each
   visit to a disk picked uniformly among the d).  Its stationary distribution is the
   state an interrupt finds on arrival (Poisson arrivals see time averages).
2. The tagged-customer SRN (Fig. 1b): the same net plus the interrupt, which adds one
   task to the processor (n = C + i + 1) and completes at ``mu_net * min(1, m / n)``.
   Completion is absorbing; the time to absorption from the carried-over steady state
   is the interrupt service time, a phase-type distribution ``(alpha, T)``.

Both nets are built with the SRN engine (:class:`srn.Net`).  Every rate is a net
parameter -- the service rates, and also C and m, which enter only through the
processor-sharing factor -- so one compiled net and one reachability graph serve every
profile, every C and every m of a given (I, d).  Those are cached in a bounded LRU.  For
the small chains of a typical request, the shape also holds what evaluates the edge
rates in a few vector operations instead of through the expression engine (checked
against the engine, bit for bit, when the shape is built), and the result defers what
only some callers read (quantiles, the CDF grid, T as a sparse matrix) to first access.

The disks are exchangeable (each visit picks one uniformly, all serve at the same
rate), so the marking records the disk queue lengths as a multiset, held in places
``io_disk_1 >= io_disk_2 >= ... >= io_disk_d`` (sorted queue lengths) rather than as an
ordered tuple.  Lumping the ordered chain by disk permutations is exact (its generator
commutes with every permutation), and it shrinks the state space by up to d!.  The
marking is then i (I/O tasks at the processor) and a partition of I - i into at most d
parts, so the chain has ``sum_{k<=I} p(k, <=d)`` states: I + 1 for one disk, about
(I + 2)^2 / 4 for two, about I^d / (d!)^2 in general; C and m do not change it.

Both chains are reversible (a closed BCMP network whose routing is reversible), which
the solution exploits and checks at run time: detailed balance gives the steady state
in logs, exact componentwise even where probabilities underflow, and it symmetrises T,
so ``P(X > t) = sum_k c_k exp(lam_k t)`` with real ``lam_k`` from a symmetric eigen-
decomposition (dense, tridiagonal for one disk, or Lanczos for large chains).  The CDF
on any grid is then one vectorised expression, and quantiles a few Newton steps.
"""

from __future__ import annotations

import dataclasses
import functools
import itertools
import math
import numbers
import re
import threading
from collections import OrderedDict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any

import numpy as np
import scipy.linalg as la
import scipy.sparse as sp
import scipy.sparse.csgraph as csgraph
from numpy.typing import ArrayLike, NDArray

from ._compiled import CompiledNet, compile_net
from .errors import WorkloadError
from .net import Limits, Net, Transition, timed
from .reachability import ReachabilityGraph
from .solvers import AbsorptionTime, steady_state, time_to_absorption

__all__ = [
    "DEFAULT_PROFILE",
    "HOST_PROFILES",
    "MAX_CORES",
    "MAX_DISKS",
    "MAX_TASKS",
    "EndSystemOccupancy",
    "HostProfile",
    "InterruptServiceTime",
    "Workload",
    "end_system_nets",
    "end_system_state_count",
    "host_profile",
    "interrupt_service_time",
]

#: Largest workload accepted: cores m, tasks C + I, disks d.
MAX_CORES = 256
MAX_TASKS = 1_000
MAX_DISKS = 16

# Service rates must lie in this range (1/s): far wider than any host, narrow enough
# that every time, moment and rate ratio of the model stays well inside double range.
_RATE_MIN = 1e-6
_RATE_MAX = 1e12
_MAX_BUFFER_PACKETS = 1 << 20
_MAX_PAYLOAD_BYTES = 65_535
_MAX_LINE_RATE_BPS = 1e15
_PROFILE_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}")

#: Limits of the end-system nets when the caller gives none.  The state count depends on
#: I and d only (see :func:`end_system_state_count`); beyond this it is refused up front.
DEFAULT_LIMITS = Limits(max_states=300_000)

_MAX_GRID_POINTS = 100_000
# Dense LAPACK on the phase-type generator up to this many transient states; beyond it
# the d = 1 chain uses its tridiagonal form and d >= 2 chains sparse Lanczos.
_DENSE_MAX = 400
# Below this many states NumPy's dense routines beat the tridiagonal ones on overhead.
_SMALL = 64
_SYMMETRY_TOL = 1e-9


def _require_real(value: Any, name: str) -> float:
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise WorkloadError(f"{name} must be a number, got {value!r}", field=name)
    v = float(value)
    if not math.isfinite(v):
        raise WorkloadError(f"{name} must be finite, got {value!r}", field=name)
    return v


def _require_rate(value: Any, name: str) -> float:
    v = _require_real(value, name)
    if v <= 0:
        raise WorkloadError(
            f"{name} must be a positive rate in events per second, got {v}", field=name
        )
    if not _RATE_MIN <= v <= _RATE_MAX:
        raise WorkloadError(
            f"{name} = {v} events/s is outside the accepted range [{_RATE_MIN:g}, {_RATE_MAX:g}]",
            field=name,
            limit="rate_range",
            maximum=_RATE_MAX,
            reached=v,
        )
    return v


def _require_count(
    value: Any, name: str, *, minimum: int, maximum: int | None = None, limit: str | None = None
) -> int:
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise WorkloadError(f"{name} must be a whole number, got {value!r}", field=name)
    v = int(value)
    if v < minimum:
        raise WorkloadError(f"{name} must be at least {minimum}, got {v}", field=name)
    if maximum is not None and v > maximum:
        raise WorkloadError(
            f"{name} = {v} exceeds the limit {limit} = {maximum}",
            field=name,
            limit=limit,
            maximum=maximum,
            reached=v,
        )
    return v


# -- host profiles ------------------------------------------------------------------


@dataclass(frozen=True)
class HostProfile:
    """A receiving host: its service rates, NIC buffer and coalescing, line and packets.

    Attributes
    ----------
    name : str
        Profile name (1-64 letters, digits, ``.``, ``_`` or ``-``).
    mu_io_cpu : float
        Rate (1/s) at which one I/O-bound task alone on a core finishes its processor
        burst and moves to a disk (the paper's mu_P_I/O).
    mu_disk : float
        Service rate (1/s) of one busy disk (mu_D).
    mu_net : float
        Rate (1/s) at which an interrupt alone on a core is serviced (mu_P_Net).
    buffer_packets : int
        NIC buffer K in packets, counting those in service.
    coalesce_packets : int
        Interrupt coalescing batch N in packets (N <= K).
    line_rate_bps : float
        Line rate in bit/s.
    packet_payload_bytes : int
        Payload per packet S_pkt in bytes.

    Raises
    ------
    WorkloadError
        On construction, naming the field: a rate that is not a finite positive number
        in [1e-6, 1e12] per second, a non-integer or non-positive packet count, N > K.

    Examples
    --------
    >>> fast = host_profile("sx280-2007").replace(name="fast-host", mu_net=83_200.0)
    >>> fast.mu_net, fast.mu_disk
    (83200.0, 1010.0)
    """

    name: str
    mu_io_cpu: float
    mu_disk: float
    mu_net: float
    buffer_packets: int
    coalesce_packets: int
    line_rate_bps: float
    packet_payload_bytes: int

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or _PROFILE_NAME.fullmatch(self.name) is None:
            raise WorkloadError(
                "profile name must be 1-64 letters, digits, '.', '_' or '-', starting with a "
                f"letter or digit; got {self.name!r}",
                field="name",
            )
        for rate in ("mu_io_cpu", "mu_disk", "mu_net"):
            object.__setattr__(self, rate, _require_rate(getattr(self, rate), rate))
        k = _require_count(
            self.buffer_packets,
            "buffer_packets",
            minimum=1,
            maximum=_MAX_BUFFER_PACKETS,
            limit="max_buffer_packets",
        )
        n = _require_count(self.coalesce_packets, "coalesce_packets", minimum=1)
        if n > k:
            raise WorkloadError(
                f"coalesce_packets N = {n} cannot exceed buffer_packets K = {k}",
                field="coalesce_packets",
            )
        line = _require_real(self.line_rate_bps, "line_rate_bps")
        if not 0 < line <= _MAX_LINE_RATE_BPS:
            raise WorkloadError(
                f"line_rate_bps must lie in (0, {_MAX_LINE_RATE_BPS:g}] bit/s, got {line}",
                field="line_rate_bps",
            )
        payload = _require_count(
            self.packet_payload_bytes,
            "packet_payload_bytes",
            minimum=1,
            maximum=_MAX_PAYLOAD_BYTES,
            limit="max_packet_payload_bytes",
        )
        object.__setattr__(self, "buffer_packets", k)
        object.__setattr__(self, "coalesce_packets", n)
        object.__setattr__(self, "line_rate_bps", line)
        object.__setattr__(self, "packet_payload_bytes", payload)

    def replace(self, **overrides: Any) -> HostProfile:
        """A validated copy with some fields changed (the name is kept unless given).

        Parameters
        ----------
        **overrides
            New values by field name, in the units of the attributes.

        Raises
        ------
        WorkloadError
            If a name is not a profile field, or a new value is invalid.
        """
        known = {f.name for f in dataclasses.fields(self)}
        for key in overrides:
            if key not in known:
                raise WorkloadError(
                    f"unknown host profile field {key!r}; the fields are {sorted(known)}",
                    field=key,
                )
        return dataclasses.replace(self, **overrides)

    def to_dict(self) -> dict[str, Any]:
        """The profile as a JSON-ready dict (SI units), fields in declaration order."""
        # Not dataclasses.asdict: it deep-copies every scalar, and this is on the path of
        # every GET /bottleneck-rate.
        return {
            "name": self.name,
            "mu_io_cpu": self.mu_io_cpu,
            "mu_disk": self.mu_disk,
            "mu_net": self.mu_net,
            "buffer_packets": self.buffer_packets,
            "coalesce_packets": self.coalesce_packets,
            "line_rate_bps": self.line_rate_bps,
            "packet_payload_bytes": self.packet_payload_bytes,
        }


#: Built-in host profiles.  ``sx280-2007`` is the paper's Table II (Dell SX280, BCM5700
#: NIC) in SI units: mu_io_cpu 4.6/ms, mu_disk 1.01/ms, mu_net 41.6/ms, K = 64, N = 6.
HOST_PROFILES: Mapping[str, HostProfile] = MappingProxyType(
    {
        "sx280-2007": HostProfile(
            name="sx280-2007",
            mu_io_cpu=4_600.0,
            mu_disk=1_010.0,
            mu_net=41_600.0,
            buffer_packets=64,
            coalesce_packets=6,
            line_rate_bps=1e9,
            packet_payload_bytes=1_468,
        ),
    }
)

DEFAULT_PROFILE = "sx280-2007"


def host_profile(name: str) -> HostProfile:
    """The built-in host profile called ``name``.

    Raises
    ------
    WorkloadError
        With ``field="profile"`` when there is no such profile.

    Examples
    --------
    >>> host_profile("sx280-2007").mu_net
    41600.0
    """
    if not isinstance(name, str):
        raise WorkloadError(f"profile must be a profile name, got {name!r}", field="profile")
    try:
        return HOST_PROFILES[name]
    except KeyError:
        raise WorkloadError(
            f"unknown host profile {name!r}; known profiles: {sorted(HOST_PROFILES)}",
            field="profile",
        ) from None


# -- workloads ------------------------------------------------------------------------


@dataclass(frozen=True)
class Workload:
    """What runs on the receiving host besides the transfer.

    Attributes
    ----------
    cpu_tasks : int
        C, CPU-bound tasks; they never leave the processor.
    io_tasks : int
        I, I/O-bound tasks; they alternate between the processor and a disk.
    cores : int
        m, processor cores shared by all tasks present (1..256).
    disks : int
        d, disks; each visit to a disk picks one uniformly (1..16).

    Raises
    ------
    WorkloadError
        Naming the field: a count that is not a whole number (booleans and floats are
        refused), a negative count, no core or disk, or a size limit exceeded
        (``max_cores`` 256, ``max_tasks`` C + I <= 1000, ``max_disks`` 16).

    Examples
    --------
    >>> Workload(cpu_tasks=2, io_tasks=1).to_dict()
    {'cpu_tasks': 2, 'io_tasks': 1, 'cores': 1, 'disks': 1}
    """

    cpu_tasks: int
    io_tasks: int
    cores: int = 1
    disks: int = 1

    def __post_init__(self) -> None:
        c = _require_count(
            self.cpu_tasks, "cpu_tasks", minimum=0, maximum=MAX_TASKS, limit="max_tasks"
        )
        i = _require_count(
            self.io_tasks, "io_tasks", minimum=0, maximum=MAX_TASKS, limit="max_tasks"
        )
        m = _require_count(self.cores, "cores", minimum=1, maximum=MAX_CORES, limit="max_cores")
        d = _require_count(self.disks, "disks", minimum=1, maximum=MAX_DISKS, limit="max_disks")
        if c + i > MAX_TASKS:
            raise WorkloadError(
                f"cpu_tasks + io_tasks = {c + i} exceeds the limit max_tasks = {MAX_TASKS}",
                field="tasks",
                limit="max_tasks",
                maximum=MAX_TASKS,
                reached=c + i,
            )
        object.__setattr__(self, "cpu_tasks", c)
        object.__setattr__(self, "io_tasks", i)
        object.__setattr__(self, "cores", m)
        object.__setattr__(self, "disks", d)

    def to_dict(self) -> dict[str, int]:
        """The workload as a JSON-ready dict."""
        return {
            "cpu_tasks": self.cpu_tasks,
            "io_tasks": self.io_tasks,
            "cores": self.cores,
            "disks": self.disks,
        }


# -- the nets -------------------------------------------------------------------------

_PARAMETERS = ("mu_io_cpu", "mu_disk", "mu_net", "cpu_tasks", "cores")


def _disk(j: int) -> str:
    return f"io_disk_{j}"


def _io_transitions(disks: int, share: str) -> list[Transition]:
    """I/O tasks moving processor -> disk and back, disks as sorted queue lengths.

    Place ``io_disk_j`` holds the j-th longest disk queue.  A task joins a disk with
    queue length q with probability (number of disks with length q) / d; it is added to
    the *first* position holding q, so the order stays sorted.  A disk with length q
    finishes at ``mu_disk`` each, taken from the *last* position holding q.
    """
    move = f"#io_cpu * mu_io_cpu * {share}"
    out = []
    for j in range(1, disks + 1):
        same = "".join(f" + (#{_disk(k)} == #{_disk(j)})" for k in range(j + 1, disks + 1))
        out.append(
            timed(
                f"io_to_disk_{j}",
                move if disks == 1 else f"{move} * (1{same}) / {disks}",
                inputs={"io_cpu": 1},
                outputs={_disk(j): 1},
                guard=None if j == 1 else f"#{_disk(j - 1)} > #{_disk(j)}",
            )
        )
    for j in range(1, disks + 1):
        same = "".join(f" + (#{_disk(k)} == #{_disk(j)})" for k in range(1, j))
        out.append(
            timed(
                f"disk_done_{j}",
                "mu_disk" if j == 1 else f"mu_disk * (1{same})",
                inputs={_disk(j): 1},
                outputs={"io_cpu": 1},
                guard=None if j == disks else f"#{_disk(j)} > #{_disk(j + 1)}",
            )
        )
    return out


def _nets(io_tasks: int, disks: int, parameters: Mapping[str, float]) -> tuple[Net, Net]:
    places = {"io_cpu": io_tasks} | {_disk(j): 0 for j in range(1, disks + 1)}
    steady = Net(
        places,
        _io_transitions(disks, "min(1, cores / (cpu_tasks + #io_cpu))"),
        parameters,
    )
    # With the interrupt present n = C + i + 1.  Its completion moves every token to
    # `served`, so all absorbed markings collapse into the single marking A of Fig. 1b.
    share = "min(1, cores / (cpu_tasks + #io_cpu + #interrupt))"
    flush: dict[str, int | str] = {"interrupt": 1, "io_cpu": "#io_cpu"}
    flush.update({_disk(j): f"#{_disk(j)}" for j in range(1, disks + 1)})
    tagged = Net(
        places | {"interrupt": 1, "served": 0},
        [
            *_io_transitions(disks, share),
            timed("interrupt_done", f"mu_net * {share}", inputs=flush, outputs={"served": 1}),
        ],
        parameters,
    )
    return steady, tagged


def _parameters(workload: Workload, profile: HostProfile) -> dict[str, float]:
    return {
        "mu_io_cpu": profile.mu_io_cpu,
        "mu_disk": profile.mu_disk,
        "mu_net": profile.mu_net,
        "cpu_tasks": float(workload.cpu_tasks),
        "cores": float(workload.cores),
    }


def end_system_nets(
    workload: Workload, profile: HostProfile | str = DEFAULT_PROFILE
) -> tuple[Net, Net]:
    """The two SRNs of the workload: steady state (Fig. 1a) and tagged customer (Fig. 1b).

    Places: ``io_cpu`` (I/O tasks at the processor) and ``io_disk_1`` ... ``io_disk_d``
    (disk queue lengths, longest first; with one disk, ``io_disk_1`` is the disk
    queue).  The tagged net adds ``interrupt`` (1 token) and ``served`` (the absorbing
    marking).  The C CPU-bound tasks never move, so they appear as the parameter
    ``cpu_tasks`` in the processor-sharing factor; the parameters are ``mu_io_cpu``,
    ``mu_disk``, ``mu_net`` (1/s), ``cpu_tasks`` and ``cores``, set from the arguments.

    Parameters
    ----------
    workload : Workload
        C, I, m, d.
    profile : HostProfile or str
        The host, or the name of a built-in profile.

    Returns
    -------
    (Net, Net)
        The steady-state net, whose initial marking puts every I/O task at the
        processor, and the tagged net, whose initial marking is that plus the interrupt.
        :func:`interrupt_service_time` starts the tagged net from the steady state of
        the first instead.

    Examples
    --------
    >>> steady, tagged = end_system_nets(Workload(cpu_tasks=1, io_tasks=2))
    >>> [p.name for p in tagged.places]
    ['io_cpu', 'io_disk_1', 'interrupt', 'served']
    """
    if not isinstance(workload, Workload):
        raise WorkloadError("workload must be a Workload", field="workload")
    host = host_profile(profile) if isinstance(profile, str) else profile
    if not isinstance(host, HostProfile):
        raise WorkloadError("profile must be a HostProfile or a profile name", field="profile")
    return _nets(workload.io_tasks, workload.disks, _parameters(workload, host))


@functools.lru_cache(maxsize=1024)
def _state_count(io_tasks: int, disks: int) -> int:
    return sum(_partitions_at_most(io_tasks, disks))


def _partitions_at_most(total: int, parts: int) -> list[int]:
    """p(k, <= parts) for k = 0..total: partitions of k into at most ``parts`` parts."""
    # Conjugation: at most `parts` parts <=> every part at most `parts`.  Adding the
    # part sizes one at a time is a cumulative sum along each residue class.
    ways = np.zeros(total + 1, dtype=object)
    ways[0] = 1
    for size in range(1, min(parts, total) + 1):
        for r in range(size):
            ways[r::size] = np.cumsum(ways[r::size])
    return [int(w) for w in ways]


def end_system_state_count(workload: Workload) -> int:
    """Tangible markings of the steady-state net (Fig. 1a) of ``workload``.

    The marking is the number i of I/O tasks at the processor and the multiset of the
    d disk queue lengths, a partition of I - i into at most d parts, so the count is
    ``sum_{k=0..I} p(k, <= d)``: I + 1 for one disk, about (I + 2)^2 / 4 for two, and
    about I^d / (d!)^2 for large I.  It does not depend on C or m.  The tagged net has
    one state more (the absorbing marking).

    Examples
    --------
    >>> end_system_state_count(Workload(cpu_tasks=4, io_tasks=3))
    4
    >>> end_system_state_count(Workload(cpu_tasks=0, io_tasks=10, disks=16))
    139
    """
    if not isinstance(workload, Workload):
        raise WorkloadError("workload must be a Workload", field="workload")
    return _state_count(workload.io_tasks, workload.disks)


# -- the cached shape -----------------------------------------------------------------


class _DetailedBalance:
    """Log-weights of a reversible chain from its edge rates, by detailed balance.

    For a reversible chain w_j / w_i = r(i->j) / r(j->i) on every edge, so the logs
    ``g = log r(i->j) - log r(j->i)`` satisfy ``l_j - l_i = g`` on every edge.  Small
    chains solve the least-squares form of those equations through the graph Laplacian
    (grounded at state 0, factorised once per shape); large ones sum g along a
    breadth-first spanning tree, level by level, which costs O(edges) with no fill-in.
    Either way every edge is then checked (Kolmogorov's criterion), so a chain that is
    not reversible is reported (None) rather than given wrong weights.  Logs keep
    weights that span far more than the double range (hundreds of I/O tasks) exact
    componentwise.
    """

    def __init__(self, rows: NDArray[np.intp], cols: NDArray[np.intp], n: int) -> None:
        self.rows, self.cols, self.n = rows, cols, n
        key, rev_key = rows * n + cols, cols * n + rows
        order = np.argsort(key)
        at = np.minimum(np.searchsorted(key[order], rev_key), max(len(key) - 1, 0))
        paired = len(key) == 0 or bool(np.all(key[order][at] == rev_key))
        self.reverse: NDArray[np.intp] | None = order[at] if paired else None
        self.factor: Any = None
        self.levels: list[tuple[NDArray[np.intp], NDArray[np.intp], NDArray[np.intp]]] = []
        if self.reverse is None or n == 1:
            return
        if n <= _DENSE_MAX:
            ones = np.ones(len(rows))
            lap = np.zeros((n, n))
            np.add.at(lap, (rows, rows), ones)
            np.add.at(lap, (rows, cols), -ones)
            lap = lap + lap.T  # both directions of every edge, as in the normal equations
            grounded = lap[1:, 1:]
            if n <= _SMALL:
                self.factor = np.linalg.inv(grounded)  # a matvec beats a solve call
            else:
                self.factor = la.cho_factor(grounded, check_finite=False)
            return
        adjacency = sp.csr_array((np.ones(len(rows)), (rows, cols)), shape=(n, n))
        depth = csgraph.shortest_path(adjacency, unweighted=True, indices=0)
        _, parent = csgraph.breadth_first_order(adjacency, 0, return_predecessors=True)
        if not np.all(np.isfinite(depth)):
            self.reverse = None  # not irreducible: no detailed balance to speak of
            return
        nodes = np.argsort(depth, kind="stable")[1:]
        tree_key = parent[nodes].astype(np.intp) * n + nodes
        edge = order[np.searchsorted(key[order], tree_key)]
        bounds = np.searchsorted(depth[nodes], np.arange(1, int(depth.max()) + 2))
        self.levels = [
            (nodes[a:b], parent[nodes[a:b]].astype(np.intp), edge[a:b])
            for a, b in itertools.pairwise(bounds)
        ]

    def log_weights(self, rates: NDArray[np.float64]) -> NDArray[np.float64] | None:
        """log w (max 0) for these edge rates, or None if the chain is not reversible."""
        if self.reverse is None:
            return None
        if self.n == 1:
            return np.zeros(1)
        rows, cols, n = self.rows, self.cols, self.n
        g = np.log(rates) - np.log(rates[self.reverse])
        ell = np.zeros(n)
        if self.levels:
            for nodes, parents, edges in self.levels:
                ell[nodes] = ell[parents] + g[edges]
        else:
            rhs = np.bincount(cols, weights=g, minlength=n) - np.bincount(
                rows, weights=g, minlength=n
            )
            residual = rhs
            # Beyond a few dozen states, two rounds of iterative refinement: the Laplacian
            # of a long path has condition ~n^2, and the refined logs are exact to ulps.
            rounds = 1 if n <= _SMALL else 3
            for k in range(rounds):
                if isinstance(self.factor, np.ndarray):
                    ell[1:] += self.factor @ residual[1:]
                else:
                    ell[1:] += la.cho_solve(self.factor, residual[1:], check_finite=False)
                if k + 1 < rounds:
                    diff = ell[cols] - ell[rows]
                    residual = rhs - (
                        np.bincount(cols, weights=diff, minlength=n)
                        - np.bincount(rows, weights=diff, minlength=n)
                    )
        scale = max(1.0, float(np.max(np.abs(g), initial=0.0)))
        if np.max(np.abs(ell[cols] - ell[rows] - g), initial=0.0) > _SYMMETRY_TOL * scale:
            return None
        return np.asarray(ell - ell.max(), dtype=np.float64)


class _EdgeRates:
    """The edge rates of one end-system net as a function of the parameters, without the
    expression engine.

    The engine evaluates each transition's rate expression over its edges, a few dozen
    small array operations per net and call; for paper-sized workloads that was the
    largest part of a warm call.  The rates of these two nets are simple enough to be
    computed from per-edge data fixed by the shape (the transition, the I/O tasks at the
    processor, how many disk queues tie) in a handful of vector operations.  The formulas
    below follow the rate expressions of :func:`_io_transitions` and :func:`_nets`
    operation for operation, in the engine's (left-to-right) order, so they give the same
    doubles; :class:`_Shape` checks that against the engine when it is built and keeps
    using the engine should they ever differ.
    """

    def __init__(self, graph: ReachabilityGraph, disks: int, tagged: bool) -> None:
        src, dst = (e.astype(np.intp) for e in graph.edges)
        marks = graph.markings
        self.n_edges = len(src)
        self.disks = float(disks)
        delta = marks[dst] - marks[src]
        queues = marks[src, 1 : disks + 1]
        if tagged:
            served = marks[dst, graph.net.place_index["served"]] == 1
        else:
            served = np.zeros(len(src), dtype=bool)
        io_delta = np.where(served, 0, delta[:, 0])
        self.to_disk = np.flatnonzero(io_delta == -1)  # io_to_disk_j: processor -> disk j
        self.done = np.flatnonzero(io_delta == 1)  # disk_done_j: disk j -> processor
        self.interrupt = np.flatnonzero(served)  # interrupt_done (tagged net only)
        # Every edge is one of those three moves (else the caller keeps the engine).
        self.complete = len(self.to_disk) + len(self.done) + len(self.interrupt) == len(src)
        # Tasks sharing the processor besides the C CPU-bound ones: the I/O tasks there,
        # plus the interrupt in the tagged net.
        present = marks[src, 0].astype(float) + (1.0 if tagged else 0.0)
        # Which disk position j a move joins or leaves, and the multiplicity factor
        # (1 + the number of other positions holding the same queue length on the side
        # the expression counts: after j for a join, before j for a completion).
        j_in = np.argmax(delta[self.to_disk, 1 : disks + 1] == 1, axis=1)
        j_out = np.argmax(delta[self.done, 1 : disks + 1] == -1, axis=1)
        positions = np.arange(disks)
        q_in = queues[self.to_disk]
        same_after = (q_in == q_in[np.arange(len(j_in)), j_in][:, None]) & (
            positions > j_in[:, None]
        )
        q_out = queues[self.done]
        same_before = (q_out == q_out[np.arange(len(j_out)), j_out][:, None]) & (
            positions < j_out[:, None]
        )
        self.io_in = marks[src[self.to_disk], 0].astype(float)
        self.present_in = present[self.to_disk] if tagged else self.io_in
        self.ties_in = 1.0 + same_after.sum(axis=1)
        self.ties_out = 1.0 + same_before.sum(axis=1)
        self.present_interrupt = present[self.interrupt]

    def __call__(self, p: Mapping[str, float]) -> NDArray[np.float64]:
        """Rates (1/s) of every edge, in the graph's edge order."""
        c, m = p["cpu_tasks"], p["cores"]
        rates = np.empty(self.n_edges)
        # #io_cpu * mu_io_cpu * min(1, cores / (cpu_tasks + #io_cpu [+ #interrupt]))
        #   [* (1 + ties) / d  with d > 1; exact no-ops with one disk]
        share = np.minimum(1, m / (c + self.present_in))
        rates[self.to_disk] = self.io_in * p["mu_io_cpu"] * share * self.ties_in / self.disks
        # mu_disk [* (1 + ties)]
        rates[self.done] = p["mu_disk"] * self.ties_out
        # mu_net * min(1, cores / (cpu_tasks + #io_cpu + #interrupt))
        rates[self.interrupt] = p["mu_net"] * np.minimum(1, m / (c + self.present_interrupt))
        return rates


# Parameter values at which a new shape compares its direct edge rates with the engine's:
# not round, so that any difference in the order of operations shows up.
_RATE_CHECKS = (
    {"mu_io_cpu": 4_600.3, "mu_disk": 1_010.7, "mu_net": 41_600.9, "cpu_tasks": 3.0, "cores": 2.0},
    {"mu_io_cpu": 0.37, "mu_disk": 1.3e7, "mu_net": 7.1, "cpu_tasks": 0.0, "cores": 5.0},
    {"mu_io_cpu": 3.3e5, "mu_disk": 2.9, "mu_net": 1.7e9, "cpu_tasks": 11.0, "cores": 3.0},
)


def _direct_rates(
    graph_a: ReachabilityGraph, graph_b: ReachabilityGraph, disks: int
) -> tuple[_EdgeRates, _EdgeRates] | None:
    """:class:`_EdgeRates` of both nets, or None if they differ from the engine's at any
    of the check points (the caller then keeps the engine)."""
    rates_a = _EdgeRates(graph_a, disks, tagged=False)
    rates_b = _EdgeRates(graph_b, disks, tagged=True)
    if not (rates_a.complete and rates_b.complete):
        return None
    for check in _RATE_CHECKS:
        engine_a = graph_a.with_parameters(check).edge_rates()
        engine_b = graph_b.with_parameters(check).edge_rates()
        if not (
            np.array_equal(rates_a(check), engine_a) and np.array_equal(rates_b(check), engine_b)
        ):
            return None
    return rates_a, rates_b


class _Shape:
    """Compiled nets, reachability graphs and index maps for one (I, d): rate-free."""

    def __init__(self, io_tasks: int, disks: int, limits: Limits) -> None:
        base = {name: 1.0 for name in _PARAMETERS}
        steady_net, tagged_net = _nets(io_tasks, disks, base)
        self.io_tasks, self.disks = io_tasks, disks
        self.steady: CompiledNet = compile_net(steady_net, limits)
        self.tagged: CompiledNet = compile_net(tagged_net, limits)
        self.graph_a: ReachabilityGraph = self.steady.reachability_graph()
        marks = self.graph_a.markings
        n = marks.shape[0]
        self.n_states = n
        self.io_at_cpu = marks[:, 0].astype(float)
        self.busy_disks = np.count_nonzero(marks[:, 1:], axis=1).astype(float)
        a_src, a_dst = (e.astype(np.intp) for e in self.graph_a.edges)
        self.a_moving = np.flatnonzero(a_src != a_dst)
        self.a_src, self.a_dst = a_src[self.a_moving], a_dst[self.a_moving]
        self.balance_a = _DetailedBalance(self.a_src, self.a_dst, n)

        # The vanishing initial marking of Fig. 1b: every Fig. 1a marking plus the
        # interrupt, weighted per call by the Fig. 1a steady state.
        self.starts = np.column_stack(
            [marks, np.ones(n, dtype=marks.dtype), np.zeros(n, dtype=marks.dtype)]
        )
        graph_b = self.tagged.reachability_graph(initial_markings=self.starts)
        self.graph_b: ReachabilityGraph = graph_b
        served = graph_b.markings[:, graph_b.net.place_index["served"]]
        absorbed = np.flatnonzero(served == 1)
        assert len(absorbed) == 1 and list(graph_b.absorbing_states) == list(absorbed)
        self.transient = np.flatnonzero(served == 0)
        nt = len(self.transient)
        pos = np.full(graph_b.n_states, -1, dtype=np.intp)
        pos[self.transient] = np.arange(nt)
        # Which Fig. 1a state each transient state starts from (the starts are tangible).
        origin, ids, _ = graph_b.start_states
        self.b_from_a = np.empty(nt, dtype=np.intp)
        self.b_from_a[pos[ids]] = origin
        assert np.array_equal(
            graph_b.markings[self.transient, : marks.shape[1]], marks[self.b_from_a]
        )
        b_src, b_dst = (e.astype(np.intp) for e in graph_b.edges)
        self.b_exit = np.flatnonzero(b_dst == absorbed[0])
        self.b_exit_row = pos[b_src[self.b_exit]]
        self.b_inner = np.flatnonzero((b_dst != absorbed[0]) & (b_src != b_dst))
        rows, cols = pos[b_src[self.b_inner]], pos[b_dst[self.b_inner]]
        self.b_rows, self.b_cols = rows, cols
        # Every move of an I/O task has its reverse, so the chain of Fig. 1b before
        # absorption is reversible too (checked per call).
        self.balance_b = _DetailedBalance(rows, cols, nt)
        # The rates per call without the expression engine, if they agree with it: for
        # the chains solved densely, where the engine's per-call overhead is what counts
        # (larger chains spend their time in the solution and keep the engine's rates).
        direct = _direct_rates(self.graph_a, graph_b, disks) if n <= _DENSE_MAX else None
        self.rates_a: _EdgeRates | None = None if direct is None else direct[0]
        self.rates_b: _EdgeRates | None = None if direct is None else direct[1]
        self.tridiagonal = disks == 1 and nt > _SMALL
        # T's sparsity pattern in CSR order: the inner edges, then the diagonal.
        states = np.arange(nt)
        all_rows = np.concatenate([rows, states])
        all_cols = np.concatenate([cols, states])
        self.csr_order = np.lexsort((all_cols, all_rows))
        self.csr_indices = all_cols[self.csr_order].astype(np.int32)
        self.csr_indptr = np.searchsorted(all_rows[self.csr_order], np.arange(nt + 1)).astype(
            np.int32
        )
        if self.tridiagonal:
            # One disk: i -> i +- 1 only; ordering the states by i makes T tridiagonal.
            self.order = np.argsort(graph_b.markings[self.transient, 0], kind="stable")
            rank = np.empty(nt, dtype=np.intp)
            rank[self.order] = np.arange(nt)
            self.up = rank[cols] == rank[rows] + 1  # edge k -> k + 1 in that order
            self.up_at = rank[rows[self.up]]
            self.down_at = rank[cols[~self.up]]


class _ShapeCache:
    """Bounded LRU of :class:`_Shape`, by count and by total states held."""

    def __init__(self, max_entries: int = 32, max_states: int = 300_000) -> None:
        self.max_entries = max_entries
        self.max_states = max_states
        self._items: OrderedDict[tuple[int, int, Limits], _Shape] = OrderedDict()
        self._lock = threading.Lock()
        self.hits = 0
        self.misses = 0

    def get(self, io_tasks: int, disks: int, limits: Limits) -> _Shape:
        key = (io_tasks, disks, limits)
        with self._lock:
            shape = self._items.get(key)
            if shape is not None:
                self._items.move_to_end(key)
                self.hits += 1
                return shape
            self.misses += 1
        shape = _Shape(io_tasks, disks, limits)
        with self._lock:
            self._items[key] = shape
            self._items.move_to_end(key)
            while len(self._items) > 1 and (
                len(self._items) > self.max_entries
                or sum(s.n_states for s in self._items.values()) > self.max_states
            ):
                self._items.popitem(last=False)
        return shape

    def clear(self) -> None:
        with self._lock:
            self._items.clear()
            self.hits = self.misses = 0

    def __len__(self) -> int:
        return len(self._items)


_SHAPES = _ShapeCache()


# -- results --------------------------------------------------------------------------


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
    _distribution: AbsorptionTime | _SpectralDistribution = dataclasses.field(
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


# -- the analysis ---------------------------------------------------------------------


class _SpectralSurvival:
    """``P(X > t) = sum_k c_k exp(lam_k t)`` from the eigen-decomposition of T."""

    def __init__(self, lam: NDArray[np.float64], c: NDArray[np.float64]) -> None:
        self.lam = lam
        self.c = c

    def raw(self, t: NDArray[np.float64]) -> NDArray[np.float64]:
        return np.asarray(np.exp(np.multiply.outer(t, self.lam)) @ self.c)

    def __call__(self, t: NDArray[np.float64]) -> NDArray[np.float64]:
        t = np.asarray(t, dtype=float)
        # Nothing is absorbed at time 0 (the interrupt always needs service).
        return np.where(t == 0, 1.0, np.clip(self.raw(t), 0.0, 1.0))


class _SpectralDistribution:
    """What :attr:`InterruptServiceTime.absorption` needs beyond the mean and variance
    of a spectral solution: the quantiles, the CDF on its grid and T as a sparse matrix.

    The bottleneck rate needs only the mean, so these are built on first access.
    """

    def __init__(
        self,
        shape: _Shape,
        survival: _SpectralSurvival,
        mean: float,
        variance: float,
        error: float,
        grid: NDArray[np.float64] | None,
        levels: NDArray[np.float64],
        points: int,
        alpha: NDArray[np.float64],
        inner: NDArray[np.float64],
        out_rate: NDArray[np.float64],
    ) -> None:
        # The shape's index arrays, not the shape (which holds the compiled nets).
        self.csr = (shape.csr_order, shape.csr_indices, shape.csr_indptr)
        self.transient = shape.transient
        self.survival, self.mean, self.variance, self.error = survival, mean, variance, error
        self.grid, self.levels, self.points = grid, levels, points
        self.alpha, self.inner, self.out_rate = alpha, inner, out_rate

    def build(self) -> AbsorptionTime:
        """The full result: quantiles (safeguarded Newton), CDF on the grid, (alpha, T)."""
        # The default grid ends at the 99.9 % quantile, found with the others.
        found = _spectral_quantiles(self.survival, np.append(self.levels, 0.999), self.mean)
        grid = np.linspace(0.0, found[-1], self.points) if self.grid is None else self.grid
        order, indices, indptr = self.csr
        nt = len(self.alpha)
        data = np.concatenate([self.inner, -self.out_rate])[order]
        T = sp.csr_array((data, indices, indptr), shape=(nt, nt))
        return AbsorptionTime(
            times=grid,
            cdf=1.0 - self.survival(grid),
            mean=self.mean,
            variance=self.variance,
            quantiles={float(lv): float(q) for lv, q in zip(self.levels, found[:-1], strict=True)},
            alpha=self.alpha,
            T=T,
            transient_states=self.transient,
            atom=0.0,
            error_bound=self.error,
            _survival=self.survival,
        )


def _spectral_quantiles(
    survival: _SpectralSurvival, levels: NDArray[np.float64], mean: float
) -> NDArray[np.float64]:
    """Times at which P(X <= t) reaches each level: safeguarded Newton, all levels at once.

    Newton runs on log P(X > t), which is close to linear in t beyond the bulk (the
    slowest mode dominates), starting from the exponential guess -mean ln(1 - level).
    The bracket starts at [0, mean / (1 - level)] (Markov's inequality); a step that
    leaves it is replaced by bisection.  Stops when the survival function is within
    1e-13 (relative) of its target or the step is below 1e-13 of the time.
    """
    target = 1.0 - levels
    log_target = np.log(target)
    lo = np.zeros_like(target)
    hi = mean / target
    x = np.minimum(-mean * log_target, hi)
    lam, c, c_lam = survival.lam, survival.c, survival.c * survival.lam
    for _ in range(100):
        e = np.exp(np.multiply.outer(x, lam))
        surv = e @ c
        f = surv - target
        lo = np.where(f > 0, x, lo)
        hi = np.where(f < 0, x, hi)
        with np.errstate(divide="ignore", invalid="ignore"):
            nxt = x - (np.log(surv) - log_target) * surv / (e @ c_lam)
        nxt = np.where((nxt > lo) & (nxt < hi), nxt, 0.5 * (lo + hi))
        done = (np.abs(f) <= 1e-13 * target) | (np.abs(nxt - x) <= 1e-13 * x)
        x = np.where(done, x, nxt)
        if done.all():
            break
    return x


def _validate_request(
    times: ArrayLike | None, quantiles: Sequence[float], grid_points: int
) -> tuple[NDArray[np.float64] | None, NDArray[np.float64], int]:
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
    points = _require_count(
        grid_points, "grid_points", minimum=2, maximum=_MAX_GRID_POINTS, limit="max_grid_points"
    )
    return grid, np.array(levels, dtype=np.float64), points


def _steady_state(
    shape: _Shape, graph: ReachabilityGraph, edge_rates: NDArray[np.float64] | None = None
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


def _spectral(
    shape: _Shape,
    inner: NDArray[np.float64],
    out_rate: NDArray[np.float64],
    exit_rates: NDArray[np.float64],
    alpha: NDArray[np.float64],
    log_alpha: NDArray[np.float64],
    log_w: NDArray[np.float64],
) -> tuple[_SpectralSurvival, float, float, str, float] | None:
    """Survival function, mean and variance of (alpha, T) through a symmetrised T.

    With D the detailed-balance weights, S = D^(1/2) T D^(-1/2) is symmetric (its
    off-diagonal entries are sqrt(r(i->j) r(j->i))), so S = V diag(lam) V' with
    orthogonal V and P(X > t) = sum_k (alpha D^(-1/2) v_k)(v_k' D^(1/2) 1) exp(lam_k t).
    Mean and variance come from solving with T itself, an independent check.
    """
    nt = len(alpha)
    rows, cols = shape.b_rows, shape.b_cols
    reverse = shape.balance_b.reverse
    assert reverse is not None
    sym = np.sqrt(inner * inner[reverse])
    with np.errstate(under="ignore"):
        left = np.exp(log_alpha - 0.5 * log_w)  # alpha D^(-1/2), from logs: no overflow
        right = np.exp(0.5 * log_w)  # D^(1/2) 1
    if nt > _DENSE_MAX and not shape.tridiagonal:
        data = np.concatenate([sym, -out_rate])[shape.csr_order]
        S_sparse = sp.csr_array((data, shape.csr_indices, shape.csr_indptr), shape=(nt, nt))
        return _lanczos(S_sparse, left, right, float(exit_rates.min()))
    if shape.tridiagonal:
        order = shape.order
        off = np.empty(nt - 1)
        off[shape.up_at] = sym[shape.up]
        lam, v_sorted = la.eigh_tridiagonal(-out_rate[order], off, check_finite=False)
        V = np.empty_like(v_sorted)
        V[order] = v_sorted
        method = "spectral-tridiagonal"
        band = np.zeros((3, nt))  # -T in LAPACK band storage, states ordered by i
        band[0, 1:][shape.up_at] = -inner[shape.up]
        band[1] = out_rate[order]
        band[2, :-1][shape.down_at] = -inner[~shape.up]
        u = la.solve_banded((1, 1), band, np.ones(nt), check_finite=False)
        w = la.solve_banded((1, 1), band, u, check_finite=False)
        a = alpha[order]
        mean, second = float(a @ u), float(2.0 * a @ w)
    else:
        flat = rows * nt + cols
        # astype: bincount returns int64 when there are no edges (I = 0), and the float
        # diagonal assigned next would then be truncated (41600/3 -> 13866).
        S = np.bincount(flat, weights=sym, minlength=nt * nt).astype(float).reshape(nt, nt)
        S.flat[:: nt + 1] = -out_rate
        lam, V = np.linalg.eigh(S)
        method = "spectral"
        minus_T = np.bincount(flat, weights=-inner, minlength=nt * nt).astype(float).reshape(nt, nt)
        minus_T.flat[:: nt + 1] = out_rate
        u = np.linalg.solve(minus_T, np.ones(nt))
        w = np.linalg.solve(minus_T, u)
        mean, second = float(alpha @ u), float(2.0 * alpha @ w)
    c = (left @ V) * (right @ V)
    survival = _SpectralSurvival(lam, c)
    # A posteriori accuracy: the expansion must give S(0) = 1 and the solved mean.
    spectral_mean = float(c @ (-1.0 / lam))
    error = abs(float(c.sum()) - 1.0) + abs(spectral_mean - mean) / mean
    return survival, mean, second - mean * mean, method, error + 64 * float(np.finfo(float).eps)


def _lanczos(
    S: sp.csr_array, left: NDArray[np.float64], right: NDArray[np.float64], kill_min: float
) -> tuple[_SpectralSurvival, float, float, str, float] | None:
    """``left' exp(S t) right`` for a large sparse symmetric S, by Lanczos.

    Lanczos from ``right`` gives S ~ Q H Q' with H tridiagonal, and
    ``left' exp(S t) right ~ |right| (Q' left)' U exp(theta t) U' e_1`` with
    H = U diag(theta) U': a sum of exponentials, the same form as the dense case.  Only
    the projections ``q_j . left`` are kept (no basis), so memory is O(n); finite
    precision Lanczos still converges for functions of S (Greenbaum 1989).  Every 8
    steps the survival on [0, ln(1e4) / kill_min] (beyond the 99.9 % quantile, since
    every state is left at rate >= kill_min), the mean and the second moment are
    compared with the previous check; 1e-13 agreement is convergence.  Returns None if
    that does not happen within the step budget (the caller then uses the engine).
    """
    n = S.shape[0]
    beta0 = float(np.linalg.norm(right))
    q = right / beta0
    q_prev = np.zeros(n)
    diag: list[float] = []
    off: list[float] = []
    proj: list[float] = []
    check_t = np.linspace(0.0, math.log(1e4) / kill_min, 65)
    previous: tuple[NDArray[np.float64], float, float] | None = None
    max_steps = min(3 * n, 3_000)
    beta = 0.0
    for k in range(max_steps):
        proj.append(float(q @ left))
        v = S @ q - beta * q_prev
        a_k = float(q @ v)
        v -= a_k * q
        diag.append(a_k)
        beta = float(np.linalg.norm(v))
        exhausted = beta <= 1e-14 * abs(a_k)
        if exhausted or (k + 1) % 8 == 0 or k + 1 == max_steps:
            theta, U = la.eigh_tridiagonal(np.array(diag), np.array(off), check_finite=False)
            c = beta0 * U[0] * (np.array(proj) @ U)
            survival = _SpectralSurvival(theta, c)
            mean = float(c @ (-1.0 / theta))
            second = float(2.0 * (c @ theta**-2))
            current = (survival.raw(check_t), mean, second)
            if exhausted:
                return survival, mean, second - mean * mean, "spectral-lanczos", 1e-13
            if previous is not None:
                change = max(
                    float(np.max(np.abs(current[0] - previous[0]))),
                    abs(mean - previous[1]) / mean,
                    abs(second - previous[2]) / second,
                )
                if change <= 1e-13:
                    error = change + abs(float(c.sum()) - 1.0)
                    return survival, mean, second - mean * mean, "spectral-lanczos", error
            previous = current
        off.append(beta)
        q_prev, q = q, v / beta
    return None


def interrupt_service_time(
    workload: Workload,
    profile: HostProfile | str = DEFAULT_PROFILE,
    *,
    times: ArrayLike | None = None,
    quantiles: Sequence[float] = (0.5, 0.9, 0.99),
    grid_points: int = 101,
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

    shape = _SHAPES.get(workload.io_tasks, workload.disks, limits)
    values = _parameters(workload, host)

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
        spectral = _spectral(shape, inner, out_rate, exit_rates, alpha, log_alpha, log_w)
    distribution: AbsorptionTime | _SpectralDistribution
    if spectral is None:
        graph_b = tagged_graph()
        distribution = time_to_absorption(
            graph_b.generator(),
            graph_b.initial_distribution,
            times=grid,
            quantiles=tuple(levels),
            grid_points=points,
        )
        mean, variance = distribution.mean, distribution.variance
        method = "uniformization"
    else:
        survival, mean, variance, method, error = spectral
        distribution = _SpectralDistribution(
            shape, survival, mean, variance, error, grid, levels, points, alpha, inner, out_rate
        )
    return InterruptServiceTime(
        workload=workload,
        profile=host,
        mean_s=mean,
        variance_s2=variance,
        rate_per_s=1.0 / mean,
        occupancy=occupancy,
        n_states=shape.n_states,
        n_transient_states=nt,
        _distribution=distribution,
        method=method,
        steady_state_residual=residual,
    )


def _occupancy(
    shape: _Shape, pi: NDArray[np.float64], workload: Workload, host: HostProfile
) -> EndSystemOccupancy:
    io_cpu = float(pi @ shape.io_at_cpu)
    busy = float(pi @ shape.busy_disks)
    present = workload.cpu_tasks + shape.io_at_cpu
    cores = float(pi @ np.minimum(present, workload.cores))
    marginal = np.bincount(
        shape.io_at_cpu.astype(np.intp), weights=pi, minlength=workload.io_tasks + 1
    )
    return EndSystemOccupancy(
        cpu_tasks_at_processor=float(workload.cpu_tasks),
        io_tasks_at_processor=io_cpu,
        io_tasks_at_disks=workload.io_tasks - io_cpu,
        processor_utilisation=cores / workload.cores,
        disk_utilisation=busy / workload.disks,
        io_throughput_per_s=host.mu_disk * busy,
        io_at_processor_distribution=tuple(float(p) for p in marginal),
    )
