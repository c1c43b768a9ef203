"""Probe the live receiving host: the workload and NIC parameters of the model.

The paper (section III) takes the workload from the operating system, the service rates
from measurements and K and N from the NIC driver.  :func:`probe_host` reads, from
``/proc`` and ``/sys`` under a root path (``/`` for this host):

* C and I: each task classified CPU-bound, I/O-bound or idle from its scheduler
  statistics over a sampling window (:mod:`host.probe.classify` gives the rules);
* m: the CPU affinity and the cgroup CPU quota (:mod:`host.probe.cores`);
* d: the real disks in ``/sys/block`` (:mod:`host.probe.disks`);
* the NIC: line rate, MTU and payload, ring size K and coalescing N
  (:mod:`host.probe.nic`, :mod:`host.probe.ethtool`).

Every value is a :class:`Reading` with its source; a value that could not be read says
why and names the default used instead.  :class:`ProbeSampler` keeps the latest probe
from a background thread for a service.
"""

from .classify import TaskVerdict, classify_tasks
from .cores import CpuQuota, cgroup_cpu_quota, effective_cores
from .disks import DiskInfo, real_disks
from .ethtool import EthtoolCoalesce, EthtoolRing, EthtoolUnavailable
from .nic import UDP_IP_OVERHEAD_BYTES, NicReadings, probe_nic
from .probe import MAX_PROBE_INTERVAL_S, MAX_PROBE_SAMPLES, HostProbe, probe_host
from .readings import Reading
from .sampler import ProbeSampler
from .tasks import TaskSnapshot, snapshot_tasks

__all__ = [
    "MAX_PROBE_INTERVAL_S",
    "MAX_PROBE_SAMPLES",
    "UDP_IP_OVERHEAD_BYTES",
    "CpuQuota",
    "DiskInfo",
    "EthtoolCoalesce",
    "EthtoolRing",
    "EthtoolUnavailable",
    "HostProbe",
    "NicReadings",
    "ProbeSampler",
    "Reading",
    "TaskSnapshot",
    "TaskVerdict",
    "cgroup_cpu_quota",
    "classify_tasks",
    "effective_cores",
    "probe_host",
    "probe_nic",
    "real_disks",
    "snapshot_tasks",
]
