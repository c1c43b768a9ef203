"""The two stochastic reward nets of the end system (the paper's Fig. 1a and Fig. 1b).

Fig. 1a is the workload alone: the I/O tasks circulate between the processor
(processor sharing: each of the n = C + i tasks present gets ``min(1, m / n)`` of a
core) and the disks (FCFS, ``mu_disk`` per busy disk, each visit picking one disk
uniformly).  Fig. 1b adds the tagged interrupt, one more task at the processor that
completes at ``mu_net * min(1, m / n)`` into an absorbing marking.

The disks are exchangeable, so a marking holds the disk queue lengths as a multiset:
places ``io_disk_1 >= io_disk_2 >= ... >= io_disk_d``.  Lumping the ordered chain by
disk permutations is exact (its generator commutes with every permutation) and shrinks
it by up to d!.  Every rate is a net parameter, C and m included, so one net serves
every profile, C and m of a given (I, d).
"""

from __future__ import annotations

import functools
from collections.abc import Mapping

import numpy as np

from srn import Net, Transition, timed

from .errors import WorkloadError
from .profiles import DEFAULT_PROFILE, HostProfile, host_profile
from .workload import Workload

__all__ = [
    "NET_PARAMETERS",
    "build_nets",
    "end_system_nets",
    "end_system_state_count",
    "net_parameters",
]

NET_PARAMETERS: tuple[str, ...] = ("mu_io_cpu", "mu_disk", "mu_net", "cpu_tasks", "cores")


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


def build_nets(io_tasks: int, disks: int, parameters: Mapping[str, float]) -> tuple[Net, Net]:
    """The Fig. 1a and Fig. 1b nets of I = ``io_tasks`` on d = ``disks``.

    Parameters
    ----------
    io_tasks, disks : int
        I and d, already validated (see :class:`host.Workload`).
    parameters : mapping of str to float
        A value for each of :data:`NET_PARAMETERS`: the service rates (1/s), C and m.

    Returns
    -------
    (Net, Net)
        The steady-state net and the tagged net (see :func:`end_system_nets`).
    """
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


def net_parameters(workload: Workload, profile: HostProfile) -> dict[str, float]:
    """The values of :data:`NET_PARAMETERS` for a workload on a host (rates in 1/s)."""
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
    return build_nets(workload.io_tasks, workload.disks, net_parameters(workload, host))


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
