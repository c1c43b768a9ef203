"""The NIC receive buffer as an M/M[N]/1/K bulk-service queue (docs/conventions.md §3).

Packets arrive as a Poisson process of rate ``lam`` (packets/s).  The buffer holds at
most ``K`` packets, counting those being served; an arrival that finds ``K`` is lost.
Interrupt coalescing is bulk service: by default (the paper's rule) a service starts
only when at least ``N`` packets are present and takes exactly ``N``; service times are
exponential with rate ``mu`` (interrupts/s).  Also offered: the general rule ``[a, b]``
(start when at least ``a`` packets wait, take ``min(waiting, b)``, the batch fixed when
the service starts) and phase-type service times ``(alpha, T)``.

Every measure is exact (a stationary distribution, not a simulation) and computed for a
whole vector of arrival rates at once.  The loss probability is ``P(n = K)``: Poisson
arrivals see time averages (PASTA).
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray

from . import _validation as check
from ._fixed import fixed_batch_distribution, fixed_batch_loss
from .errors import QueueParameterError

__all__ = ["BulkQueueSolution", "bulk_service_queue", "loss_probability"]


@dataclass(frozen=True)
class BulkQueueSolution:
    """Stationary measures of the NIC queue, one entry per arrival rate.

    All arrays are read-only.  ``R`` is the number of arrival rates (1 for a scalar
    input) and ``K`` the capacity.

    Attributes
    ----------
    arrival_rate : ndarray, shape (R,)
        Packet arrival rates lam (packets/s), as given.
    loss_probability : ndarray, shape (R,)
        Probability that an arriving packet is dropped, ``P(n = K)`` (dimensionless).
    throughput_pps : ndarray, shape (R,)
        Accepted (and, in steady state, served) packets per second,
        ``lam * (1 - loss_probability)``.
    throughput_bps : ndarray, shape (R,) or None
        ``8 * packet_bytes * throughput_pps`` (bit/s); None when no ``packet_bytes`` was
        given.
    mean_occupancy : ndarray, shape (R,)
        Mean number of packets in the buffer, those in service included (packets).
    busy_probability : ndarray, shape (R,)
        Probability that an interrupt service is running (dimensionless).  For the
        fixed-batch rule this is ``P(n >= N)``.
    occupancy_distribution : ndarray, shape (R, K + 1)
        ``[i, n]``: probability of ``n`` packets in the buffer at rate ``i``, marginal over
        the server and phase state; each row sums to 1.
    interrupt_rate : ndarray, shape (R,)
        Completed interrupt services per second (interrupts/s), computed from the
        distribution of the server state.
    mean_batch : ndarray, shape (R,)
        Mean packets taken per interrupt (packets); ``N`` for the fixed-batch rule.
        Flow balance: ``throughput_pps == interrupt_rate * mean_batch``.
    capacity : int
        K (packets).
    batch : int
        N, or b of the rule [a, b] (packets).
    min_batch : int
        a of the rule [a, b]; equal to ``batch`` for the fixed-batch rule (packets).
    method : str
        The algorithm used: ``"cut-recursion"`` (fixed batch, exponential service),
        ``"level-censoring"`` (fixed batch, phase-type service or ``min_batch=batch``),
        ``"reduced-sparse-lu"`` (rule [a, b] with ``a < b``) or ``"saturation-limit"``
        (rule [a, b] with ``a < b`` when every rate exceeds the service rate by more than
        1e9 * K: the exact limit, ``loss = 1 - mu * clip(K/2, a, b) / lam``).
    """

    arrival_rate: NDArray[np.float64]
    loss_probability: NDArray[np.float64]
    throughput_pps: NDArray[np.float64]
    throughput_bps: NDArray[np.float64] | None
    mean_occupancy: NDArray[np.float64]
    busy_probability: NDArray[np.float64]
    occupancy_distribution: NDArray[np.float64]
    interrupt_rate: NDArray[np.float64]
    mean_batch: NDArray[np.float64]
    capacity: int
    batch: int
    min_batch: int
    method: str

    def __post_init__(self) -> None:
        for f in fields(self):
            value = getattr(self, f.name)
            if isinstance(value, np.ndarray):
                value.flags.writeable = False


def bulk_service_queue(
    arrival_rate: ArrayLike,
    service_rate: float | None,
    capacity: int,
    batch: int,
    *,
    min_batch: int | None = None,
    phase_type: tuple[ArrayLike, Any] | None = None,
    packet_bytes: float | None = None,
) -> BulkQueueSolution:
    """Exact stationary measures of the M/M[N]/1/K NIC queue for many arrival rates.

    Parameters
    ----------
    arrival_rate : float or array_like, shape (R,)
        Packet arrival rates lam (packets/s), each finite and > 0.  For a sending rate
        ``B_send`` (bit/s) and payload ``S_pkt`` (bytes), ``lam = B_send / (8 * S_pkt)``.
    service_rate : float or None
        Exponential interrupt service rate mu (interrupts/s), > 0.  Must be None when
        ``phase_type`` is given: the service time is then fully described by
        ``(alpha, T)`` and its rate ``1 / E[S]`` is implied, so a second value could only
        contradict it.
    capacity : int
        Buffer size K (packets), counting the packets in service; ``K >= batch``.
    batch : int
        Fixed-batch rule: the coalescing size N (packets per interrupt), >= 1.  With
        ``min_batch``: the maximum batch b of the rule [a, b].
    min_batch : int, optional
        a of the general rule [a, b] (packets), ``1 <= a <= batch``: a service starts when
        at least ``a`` packets wait and takes ``min(waiting, b)``, fixed at its start.
        None (default) is the paper's fixed-batch rule ``a = b = N``, solved by a fast
        exact recursion; ``min_batch=batch`` gives the same chain through the general
        solver (slower; useful as a cross-check).
    phase_type : (alpha, T), optional
        Phase-type service time instead of the exponential approximation: ``alpha`` (m,)
        initial phase probabilities summing to 1, ``T`` (m, m) sub-generator in 1/s
        (ndarray or SciPy sparse; exit rates ``t = -T 1``); absorption must be certain.
        ``alpha = [1], T = [[-mu]]`` is exponential service.
    packet_bytes : float, optional
        Packet payload size (bytes), > 0; when given ``throughput_bps`` is filled in.

    Returns
    -------
    BulkQueueSolution
        One entry per arrival rate (1-D arrays even for a scalar rate).

    Raises
    ------
    QueueParameterError
        (a ``ValueError``) naming the parameter and the reason: a non-positive or
        non-finite rate, a non-integer or out-of-range ``capacity``/``batch``/
        ``min_batch`` (``K < N`` included), ``service_rate`` given together with
        ``phase_type`` (or neither), an invalid ``(alpha, T)``, or a request whose
        occupancy matrix would exceed 50 million entries.

    Notes
    -----
    Fixed batch, exponential service: the chain on ``n = 0..K`` is solved by the cut
    equations ``lam * pi(n) = mu * sum_{j=n+1}^{min(n+N,K)} pi(j) [j >= N]`` run down from
    ``pi(K)``: all terms positive, O(K) vector operations over the rates, in the log
    domain when the values would leave the double range.  Fixed batch with phase-type
    service (m phases): level-by-level censoring from the top (GTH-style, positive
    rates), O(K * m^2 * N) array operations over the rates.  Rule [a, b] with ``a < b``:
    a reduced sparse system of about ``m * K`` unknowns, one sparse LU per rate, cost
    close to linear in K; its probabilities are accurate to ~1e-16 absolute (the other
    two methods keep relative accuracy even for tiny probabilities).  Where ``lam / mu``
    exceeds ``1e9 * K`` that system is numerically singular and the exact saturation
    limit is used instead (see :func:`queues._general.saturated_limit`).  Near
    saturation (loss > 1/2) the throughput is the service side of the flow balance,
    ``interrupt_rate * mean_batch``, and the loss is ``1 - throughput / lam``: the
    direct ``1 - P(K)`` would cancel to nothing.

    Examples
    --------
    >>> sol = bulk_service_queue([42_575.0, 85_150.0], 20_800.0, 64, 6, packet_bytes=1468)
    >>> sol.occupancy_distribution.shape
    (2, 65)
    >>> bool(sol.loss_probability[0] < sol.loss_probability[1])
    True
    """
    lam = check.positive_rates(arrival_rate, "arrival_rate")
    K = check.positive_integer(capacity, "capacity")
    b = check.positive_integer(batch, "batch")
    if b > K:
        raise QueueParameterError(
            "capacity", f"must be at least the batch size ({b} packets), got K = {K}"
        )
    a = b if min_batch is None else check.positive_integer(min_batch, "min_batch")
    if a > b:
        raise QueueParameterError(
            "min_batch", f"must not exceed the maximum batch b = {b}, got a = {a}"
        )
    if lam.size * (K + 1) > check.MAX_CELLS:
        raise QueueParameterError(
            "arrival_rate",
            f"{lam.size} rates x {K + 1} occupancy levels exceed {check.MAX_CELLS:,} "
            "entries; split the request",
        )
    bytes_per_packet = (
        None if packet_bytes is None else check.positive_scalar(packet_bytes, "packet_bytes")
    )

    if phase_type is not None:
        if service_rate is not None:
            raise QueueParameterError(
                "service_rate",
                "must be None when phase_type is given (the service rate is 1/E[S] of "
                "the phase-type distribution)",
            )
        alpha, T = check.phase_type(phase_type)
    else:
        if service_rate is None:
            raise QueueParameterError(
                "service_rate", "is required (interrupts/s) unless phase_type is given"
            )
        mu = check.positive_scalar(service_rate, "service_rate")

    if phase_type is None and min_batch is None:
        dist = fixed_batch_distribution(lam, mu, K, b).T
        busy = dist[:, b:].sum(axis=1)
        interrupt_rate = mu * busy
        mean_batch = np.full(lam.size, float(b))
        method = "cut-recursion"
    else:
        if phase_type is None:
            alpha, T = np.ones(1), np.array([[-mu]])
        from ._general import general_bulk_queue  # SciPy's sparse solvers: loaded here

        result = general_bulk_queue(lam, K, a, b, alpha, T)
        dist, busy = result.distribution, result.busy
        interrupt_rate, mean_batch = result.interrupt_rate, result.mean_batch
        method = result.method

    dist = np.ascontiguousarray(dist)
    loss = dist[:, K].copy()
    throughput = lam * (1.0 - loss)
    # Near saturation 1 - loss cancels catastrophically (lam = 4.6e11/s, mu = 1e-6/s:
    # the true 1 - loss is 5e-16, a few ulps of 1), so the throughput is taken from the
    # service side, which is a sum of positive terms there: flow balance says
    # lam * (1 - loss) = interrupt_rate * mean_batch.  The loss follows from it.
    saturated = loss > 0.5
    if saturated.any():
        served = interrupt_rate[saturated] * mean_batch[saturated]
        throughput[saturated] = served
        loss[saturated] = -np.expm1(np.log(served) - np.log(lam[saturated]))
    return BulkQueueSolution(
        arrival_rate=lam,
        loss_probability=loss,
        throughput_pps=throughput,
        throughput_bps=None if bytes_per_packet is None else 8.0 * bytes_per_packet * throughput,
        mean_occupancy=dist @ np.arange(K + 1, dtype=np.float64),
        busy_probability=np.clip(busy, 0.0, 1.0),
        occupancy_distribution=dist,
        interrupt_rate=interrupt_rate,
        mean_batch=mean_batch,
        capacity=K,
        batch=b,
        min_batch=a,
        method=method,
    )


def loss_probability(
    arrival_rate: ArrayLike, service_rate: float, capacity: int, batch: int
) -> NDArray[np.float64]:
    """Packet loss probability of the fixed-batch M/M[N]/1/K NIC queue (fast path).

    Parameters
    ----------
    arrival_rate : float or array_like
        Packet arrival rates lam (packets/s), > 0; a scalar or a 1-D array.
    service_rate : float
        Exponential interrupt service rate mu (interrupts/s), > 0.
    capacity : int
        Buffer size K (packets, including those in service), ``K >= batch``.
    batch : int
        Coalescing size N (packets per interrupt), >= 1.

    Returns
    -------
    ndarray
        Loss probability ``P(n = K)`` (dimensionless), with the shape of
        ``arrival_rate`` (0-d for a scalar).

    Raises
    ------
    QueueParameterError
        As :func:`bulk_service_queue`.

    Examples
    --------
    >>> float(loss_probability(1000.0, 1000.0, 4, 1))  # M/M/1/4 at rho = 1: 1/(K+1)
    0.2
    """
    shape = np.shape(arrival_rate)
    lam = check.positive_rates(arrival_rate, "arrival_rate")
    K = check.positive_integer(capacity, "capacity")
    N = check.positive_integer(batch, "batch")
    if N > K:
        raise QueueParameterError(
            "capacity", f"must be at least the batch size ({N} packets), got K = {K}"
        )
    mu = check.positive_scalar(service_rate, "service_rate")
    if lam.size * (K + 1) > check.MAX_CELLS:
        raise QueueParameterError(
            "arrival_rate",
            f"{lam.size} rates x {K + 1} occupancy levels exceed {check.MAX_CELLS:,} "
            "entries; split the request",
        )
    return fixed_batch_loss(lam, mu, K, N).reshape(shape)
