"""The paper's two chains written down directly, and E[S] by subtraction-free elimination.

:func:`direct_mean_service_time` is what :func:`host.interrupt_service_rate` and
:func:`host.interrupt_service_time` both report as E[S] for chains of up to
:data:`DIRECT_MAX_STATES` states (the derivation is in :mod:`host.service_rate`).
"""

from __future__ import annotations

import numpy as np
from numpy.typing import NDArray

from .profiles import HostProfile
from .workload import Workload

__all__ = ["DIRECT_MAX_STATES", "direct_mean_service_time"]

#: Largest Fig. 1a chain (states) solved here; larger ones go to the engine.
DIRECT_MAX_STATES = 256


def _states(io_tasks: int, disks: int) -> NDArray[np.int64]:
    """Every Fig. 1a state as a row: the disk queue lengths, longest first (a partition
    of at most ``io_tasks`` into ``disks`` parts, zeros included)."""

    def partitions(left: int, parts: int, largest: int) -> list[tuple[int, ...]]:
        if parts == 0:
            return [()]
        return [
            (first, *rest)
            for first in range(min(left, largest), -1, -1)
            for rest in partitions(left - first, parts - 1, first)
        ]

    return np.array(partitions(io_tasks, disks, io_tasks), dtype=np.int64).reshape(-1, disks)


def _moves(
    queues: NDArray[np.int64], io_tasks: int
) -> tuple[NDArray[np.intp], NDArray[np.intp], NDArray[np.intp], NDArray[np.intp]]:
    """The I/O moves of every state to every disk position, as (from, to) index pairs:
    to a disk (``i > 0``), and a disk's completion (that queue busy).  Summing the
    rates of a state's moves over the positions gives the lumped chain's rates."""
    d = queues.shape[1]
    base = io_tasks + 1
    weights = base ** np.arange(d, dtype=np.int64)
    keys = queues @ weights
    order = np.argsort(keys)
    sorted_keys = keys[order]

    def index(rows: NDArray[np.int64]) -> NDArray[np.intp]:
        canonical = -np.sort(-rows, axis=1)  # longest first, as the states are kept
        return np.asarray(order[np.searchsorted(sorted_keys, canonical @ weights)], np.intp)

    at_cpu = io_tasks - queues.sum(axis=1)
    join_from, join_to, done_from, done_to = [], [], [], []
    for j in range(d):  # disk positions (at most 16); the states are batched
        step = np.zeros(d, dtype=np.int64)
        step[j] = 1
        src = np.flatnonzero(at_cpu > 0)
        join_from.append(src)
        join_to.append(index(queues[src] + step))
        src = np.flatnonzero(queues[:, j] > 0)
        done_from.append(src)
        done_to.append(index(queues[src] - step))
    return (
        np.concatenate(join_from),
        np.concatenate(join_to),
        np.concatenate(done_from),
        np.concatenate(done_to),
    )


def direct_mean_service_time(workload: Workload, host: HostProfile) -> float:
    """E[S] (s): Fig. 1b's mean time to absorption from Fig. 1a's steady state, by the
    eliminations below (any chain size; the callers keep it to small ones)."""
    c, m, d = float(workload.cpu_tasks), float(workload.cores), workload.disks
    queues = _states(workload.io_tasks, d)
    n = queues.shape[0]
    at_cpu = (workload.io_tasks - queues.sum(axis=1)).astype(np.float64)
    join_from, join_to, done_from, done_to = _moves(queues, workload.io_tasks)

    def rates(tagged: float) -> NDArray[np.float64]:
        # Processor sharing among C + i (+ the interrupt) tasks on m cores; with nobody
        # there the share is never used (the rate carries the factor i = 0).
        with np.errstate(divide="ignore"):
            share = np.minimum(1.0, m / (c + at_cpu + tagged))
        out = np.zeros((n, n))
        np.add.at(
            out,
            (join_from, join_to),
            at_cpu[join_from] * host.mu_io_cpu * share[join_from] / d,
        )
        np.add.at(out, (done_from, done_to), host.mu_disk)
        return out

    steady = _gth_steady_state(rates(0.0))
    inside = rates(1.0)
    exits = host.mu_net * np.minimum(1.0, m / (c + at_cpu + 1.0))
    return float(steady @ _mean_absorption_times(inside, exits))


def _gth_steady_state(rates: NDArray[np.float64]) -> NDArray[np.float64]:
    """Stationary distribution of the irreducible chain with off-diagonal ``rates``
    (Grassmann, Taksar and Heyman 1985: the pivots are sums of rates, not differences)."""
    a = rates.copy()
    n = a.shape[0]
    np.fill_diagonal(a, 0.0)
    for k in range(n - 1, 0, -1):
        pivot = a[k, :k].sum()
        a[:k, k] /= pivot
        a[:k, :k] += np.outer(a[:k, k], a[k, :k])
        a[np.arange(k), np.arange(k)] = 0.0  # returns to the same state are not moves
    pi = np.zeros(n)
    pi[0] = 1.0
    for k in range(1, n):
        pi[k] = pi[:k] @ a[:k, k]
    return pi / pi.sum()


def _mean_absorption_times(
    rates: NDArray[np.float64], exits: NDArray[np.float64]
) -> NDArray[np.float64]:
    """``x = (-T)^-1 1``: the mean time to absorption from each transient state, where
    ``-T = diag(rows of rates + exits) - rates``.

    Gaussian elimination from the last state, with each pivot formed as the remaining
    outflow (rates to the states left plus the exit rate, which the elimination folds
    the eliminated states into) rather than by subtraction: the chain's row sums stay
    its exit rates, so this is the same pivot, computed without cancellation.
    """
    a = rates.copy()
    n = a.shape[0]
    np.fill_diagonal(a, 0.0)
    out = exits.astype(np.float64, copy=True)
    b = np.ones(n)
    pivots = np.empty(n)
    for k in range(n - 1, -1, -1):
        pivots[k] = a[k, :k].sum() + out[k]
        if k == 0:
            break
        w = a[:k, k] / pivots[k]
        a[:k, :k] += np.outer(w, a[k, :k])
        a[np.arange(k), np.arange(k)] = 0.0
        out[:k] += w * out[k]
        b[:k] += w * b[k]
    x = np.empty(n)
    for k in range(n):
        x[k] = (b[k] + a[k, :k] @ x[:k]) / pivots[k]
    return x
