"""The host model: the receiving end system as the paper's first stage sees it.

A :class:`Workload` (C CPU-bound tasks, I I/O-bound tasks, m cores, d disks) and a
:class:`HostProfile` (service rates, NIC ring and coalescing, line rate, payload) give
the distribution of the time the host takes to service one network interrupt, through
two stochastic reward nets solved with the :mod:`srn` engine (the paper's Fig. 1a and
Fig. 1b, SPEC sections 1 and 2)::

    r = interrupt_service_time(Workload(cpu_tasks=2, io_tasks=1), "sx280-2007")
    r.rate_per_s, r.quantiles_s, r.phase_type()

    interrupt_service_rate(Workload(cpu_tasks=2, io_tasks=1), "sx280-2007")  # the rate alone

The conventions (units, processor-sharing shares) are in ``docs/conventions.md``.
"""

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .errors import WorkloadError
    from .nets import end_system_nets, end_system_state_count
    from .profiles import DEFAULT_PROFILE, HOST_PROFILES, HostProfile, host_profile
    from .service_rate import interrupt_service_rate
    from .service_time import EndSystemOccupancy, InterruptServiceTime, interrupt_service_time
    from .store import ProfileStore, ProfileStoreError, StoredProfile
    from .workload import MAX_CORES, MAX_DISKS, MAX_TASKS, Workload

__all__ = [
    "DEFAULT_PROFILE",
    "HOST_PROFILES",
    "MAX_CORES",
    "MAX_DISKS",
    "MAX_TASKS",
    "EndSystemOccupancy",
    "HostProfile",
    "InterruptServiceTime",
    "ProfileStore",
    "ProfileStoreError",
    "StoredProfile",
    "Workload",
    "WorkloadError",
    "end_system_nets",
    "end_system_state_count",
    "host_profile",
    "interrupt_service_rate",
    "interrupt_service_time",
]


# Each public name's module, imported when the name is first used (PEP 562), so that
# importing one light part (the errors, the profiles) does not load the solvers, SciPy
# and the compiled kernels of the rest.
_LAZY: dict[str, str] = {
    "WorkloadError": "errors",
    "end_system_nets": "nets",
    "end_system_state_count": "nets",
    "DEFAULT_PROFILE": "profiles",
    "HOST_PROFILES": "profiles",
    "HostProfile": "profiles",
    "host_profile": "profiles",
    "interrupt_service_rate": "service_rate",
    "EndSystemOccupancy": "service_time",
    "InterruptServiceTime": "service_time",
    "interrupt_service_time": "service_time",
    "ProfileStore": "store",
    "ProfileStoreError": "store",
    "StoredProfile": "store",
    "MAX_CORES": "workload",
    "MAX_DISKS": "workload",
    "MAX_TASKS": "workload",
    "Workload": "workload",
}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    from importlib import import_module

    value = getattr(import_module(f"{__name__}.{module}"), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *_LAZY})
