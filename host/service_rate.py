"""The interrupt service rate alone, ``mu = 1 / E[S]``, by direct elimination in NumPy.

The paper's model with the exponential NIC service needs one number from the first
stage: the rate ``mu`` of the NIC queue.  :func:`host.interrupt_service_time` gives it
with the whole distribution, through the SRN engine and its compiled kernels, which a
one-shot command pays for in load time (about half a second) before any arithmetic.
Here the two chains of the paper's Fig. 1a and Fig. 1b are written down directly:

* a state is ``i``, the I/O tasks at the processor, and the d disk queue lengths as a
  multiset (longest first), a partition of ``I - i`` into at most ``d`` parts;
* an I/O task leaves the processor at ``i * mu_io_cpu * min(1, m / (C + i [+ 1]))`` and
  joins each disk with probability ``1 / d`` (the ``+ 1`` is the interrupt, present in
  Fig. 1b only); each busy disk completes at ``mu_disk``; in Fig. 1b the interrupt
  completes at ``mu_net * min(1, m / (C + i + 1))``.

The disks are interchangeable, so summing the moves of every disk position from a
state's representative gives the lumped chain's rates exactly.  The steady state of
Fig. 1a comes from the Grassmann-Taksar-Heyman elimination and the mean time to
absorption of Fig. 1b from the same subtraction-free elimination of ``-T`` (each pivot
is the sum of the remaining outflow rates, never a difference), so both are accurate to
a few units in the last place whatever the spread of the rates.  The cost is
``O(n^3)`` in ``n`` NumPy steps: below a millisecond at the paper's sizes.

The result agrees with the engine's solutions to 1e-12 relative (``tests/host/
test_service_rate.py``), and :func:`host.interrupt_service_time` reports this E[S] for
every chain of up to :data:`DIRECT_MAX_STATES` states, so that all paths give the same
``mu`` to the last bit.  Larger chains are handed to :func:`host.interrupt_service_time`.
"""

from __future__ import annotations

from ._direct_chain import DIRECT_MAX_STATES, direct_mean_service_time
from .errors import WorkloadError
from .nets import end_system_state_count
from .profiles import DEFAULT_PROFILE, HostProfile, host_profile
from .workload import Workload

__all__ = ["DIRECT_MAX_STATES", "interrupt_service_rate"]


def interrupt_service_rate(
    workload: Workload, profile: HostProfile | str = DEFAULT_PROFILE
) -> float:
    """The rate ``mu = 1 / E[S]`` (1/s) at which the host services network interrupts.

    The same number as ``interrupt_service_time(workload, profile).rate_per_s`` (to
    1e-12 relative), without the distribution, the SRN engine or its compiled kernels
    for chains of up to :data:`DIRECT_MAX_STATES` states.

    Parameters
    ----------
    workload : Workload
        C CPU-bound tasks, I I/O-bound tasks, m cores, d disks.
    profile : HostProfile or str, default "sx280-2007"
        The host's service rates (1/s), or the name of a built-in profile.

    Returns
    -------
    float
        Interrupts serviced per second of a busy host (1/s).

    Raises
    ------
    WorkloadError
        Naming the field, as :func:`host.interrupt_service_time`.

    Examples
    --------
    One CPU-bound task and nothing else: the interrupt gets half of the core.

    >>> interrupt_service_rate(Workload(cpu_tasks=1, io_tasks=0))
    20800.0
    >>> round(1e6 / interrupt_service_rate(Workload(cpu_tasks=2, io_tasks=2)), 3)
    87.383
    """
    if not isinstance(workload, Workload):
        raise WorkloadError("workload must be a Workload", field="workload")
    host = host_profile(profile) if isinstance(profile, str) else profile
    if not isinstance(host, HostProfile):
        raise WorkloadError("profile must be a HostProfile or a profile name", field="profile")
    if end_system_state_count(workload) > DIRECT_MAX_STATES:
        from .service_time import interrupt_service_time

        return interrupt_service_time(workload, host).rate_per_s
    return 1.0 / direct_mean_service_time(workload, host)
