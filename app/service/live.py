"""The live probe of the host that runs the service.

A probe blocks for its whole sampling window, so the service never probes in a request:
a :class:`host.probe.ProbeSampler` thread probes back to back (settings
``probe_enabled``, ``probe_interval_s``, ``probe_interface``) and requests read the
latest completed window (``GET /host``, ``GET /bottleneck-rate?workload=live``).  The
service's own process and its descendants (the solver pool) are left out of the counts.
"""

from __future__ import annotations

import math
from typing import Any

from app.schemas.problems import FieldProblem, ProblemError
from host.probe import HostProbe, ProbeSampler

from .state import ServiceState

__all__ = ["latest_probe", "live_host_overrides", "live_workload", "start_probe", "stop_probe"]


def start_probe(state: ServiceState) -> ProbeSampler | None:
    """Start the background sampler when ``probe_enabled`` (returns it, or None)."""
    settings = state.settings
    if not settings.probe_enabled:
        return None
    sampler = ProbeSampler(settings.probe_interval_s, interface=settings.probe_interface)
    state.extras["probe"] = sampler
    sampler.start()
    return sampler


def stop_probe(state: ServiceState) -> None:
    """Stop the sampler, if one runs (blocks up to one window: call from a thread)."""
    sampler = state.extras.get("probe")
    if isinstance(sampler, ProbeSampler):
        sampler.stop()


def latest_probe(state: ServiceState, field: str = "workload") -> HostProbe:
    """The latest completed probe window.

    Raises
    ------
    ProblemError
        404 ``probe-disabled`` when the probe is disabled; 503 ``probe-unavailable``
        when it has no window yet (``Retry-After`` = one window) or its attempts failed.
    """
    sampler = state.extras.get("probe")
    if not isinstance(sampler, ProbeSampler):
        raise ProblemError(
            "probe-disabled",
            "the live probe is disabled on this service (probe_enabled=false)",
            [FieldProblem(field, "live probe disabled", "probe_enabled")],
        )
    probe = sampler.latest()
    if probe is None:
        retry = max(1, math.ceil(sampler.interval_s))
        detail = (
            f"the live probe failed: {sampler.error}"
            if sampler.error
            else f"the first {sampler.interval_s:g} s probe window has not finished yet"
        )
        raise ProblemError(
            "probe-unavailable",
            detail,
            [FieldProblem(field, "no probe window yet")],
            headers={"Retry-After": str(retry)},
        )
    return probe


def live_workload(
    probe: HostProbe,
    cpu_tasks: int | None = None,
    io_tasks: int | None = None,
    cores: int | None = None,
    disks: int | None = None,
) -> dict[str, int]:
    """The workload of the method from a probe; each value given overrides the probe's
    (as every field of the query does), so none is silently dropped."""
    return {
        "cpu_tasks": int(probe.cpu_tasks.value) if cpu_tasks is None else cpu_tasks,
        "io_tasks": int(probe.io_tasks.value) if io_tasks is None else io_tasks,
        "cores": int(probe.cores.value) if cores is None else cores,
        "disks": int(probe.disks.value) if disks is None else disks,
    }


def live_host_overrides(probe: HostProbe) -> dict[str, Any]:
    """Host profile fields the probe read from the NIC (unread ones are left to the
    profile: the probe's defaults are the default profile's, not necessarily the
    requested one's)."""
    return probe.nic.profile_overrides()
