"""The probe on a fake host written by hand (conftest.py): parsing and classification.

Every expected count is derived in conftest.py beside the numbers it comes from.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from fake_host import (
    EXPECTED_CPU,
    EXPECTED_IO,
    OWN_PID,
    SAMPLES,
    TASKS,
    WINDOW_S,
    FakeTime,
    make_fake_root,
    write,
)

from host import WorkloadError, host_profile
from host.probe import EthtoolCoalesce, EthtoolRing, EthtoolUnavailable, probe_host
from host.probe.classify import classify_tasks
from host.probe.cores import cgroup_cpu_quota, effective_cores
from host.probe.disks import real_disks
from host.probe.nic import probe_nic
from host.probe.tasks import snapshot_tasks


@pytest.fixture
def fake_root(tmp_path: Path) -> Path:
    return make_fake_root(tmp_path)


@pytest.fixture
def fake_time(fake_root: Path) -> FakeTime:
    return FakeTime(fake_root)


def ring(rx: int = 512) -> EthtoolRing:
    return EthtoolRing(rx, 4096, "fake ring")


def coalesce(frames: int = 32, usecs: int = 0, adaptive: bool = False) -> EthtoolCoalesce:
    return EthtoolCoalesce(frames, usecs, adaptive, "fake coalesce")


def run_probe(root: Path, time: FakeTime, **options: object):  # type: ignore[no-untyped-def]
    return probe_host(
        root,
        interval_s=WINDOW_S,
        samples=SAMPLES,
        sleep=time.sleep,
        clock=time.clock,
        ring_reader=lambda name: ring(),
        coalesce_reader=lambda name: coalesce(),
        **options,  # type: ignore[arg-type]
    )


def test_counts_and_every_verdict(fake_root: Path, fake_time: FakeTime) -> None:
    probe = run_probe(fake_root, fake_time)
    assert fake_time.sleeps == SAMPLES + 1
    assert probe.window_s == pytest.approx(WINDOW_S)
    assert probe.cpu_tasks.value == EXPECTED_CPU
    assert probe.io_tasks.value == EXPECTED_IO
    assert "schedstat" in probe.cpu_tasks.source
    kinds = {v.tid: v.kind for v in probe.tasks}
    for t in TASKS:
        if t.expected == "excluded":
            assert t.tid not in kinds, t.comm
        else:
            assert kinds[t.tid] == t.expected, (t.comm, probe.verdict(t.pid))
    # kworker, this process and its child are left out (newcomer was never in the start).
    assert probe.excluded_tasks == 3
    # The comm with a blank and a parenthesis was parsed up to the last ')'.
    assert probe.verdict(100)[0].comm == "spin (x)"
    reader = probe.verdict(102)[0]
    assert (reader.voluntary, reader.nonvoluntary, reader.d_samples) == (3000, 10, 4)
    assert reader.storage_bytes == 12_000_000
    assert reader.runnable_fraction == pytest.approx(0.55)
    assert probe.workload().to_dict() == {"cpu_tasks": 5, "io_tasks": 4, "cores": 3, "disks": 2}


def test_kernel_threads_on_request(fake_root: Path, fake_time: FakeTime) -> None:
    probe = run_probe(fake_root, fake_time, include_kernel_threads=True)
    assert probe.cpu_tasks.value == EXPECTED_CPU + 1
    assert probe.verdict(2)[0].kind == "cpu"


def test_named_exclusions_replace_the_process_tree(fake_root: Path, fake_time: FakeTime) -> None:
    # Leaving out only the spinner: this process and its child are now counted (both
    # busy), so C = 5 - 1 + 2.
    probe = run_probe(fake_root, fake_time, exclude_pids={100})
    assert probe.cpu_tasks.value == EXPECTED_CPU - 1 + 2
    assert {v.pid for v in probe.tasks if v.kind == "cpu"} >= {OWN_PID, OWN_PID + 1}


def test_to_dict_gives_value_and_source_of_everything(fake_root: Path, fake_time: FakeTime) -> None:
    body = run_probe(fake_root, fake_time).to_dict(tasks=True)
    for name in ("cpu_tasks", "io_tasks", "cores", "disks"):
        assert set(body["workload"][name]) == {"value", "source"}
    for reading in body["nic"].values():
        assert reading["source"]
    assert {t["tid"] for t in body["tasks"]} == {
        t.tid for t in TASKS if t.expected in ("cpu", "io")
    }


def test_snapshot_parses_the_counters(fake_root: Path) -> None:
    snap = snapshot_tasks(fake_root)
    t = snap[102]
    assert (t.pid, t.comm, t.state, t.ppid) == (102, "reader", "R", 1)
    assert (t.run_ns, t.wait_ns, t.timeslices) == (5_000_000_000, 3_000_000_000, 1000)
    assert (t.voluntary, t.nonvoluntary) == (100, 50)
    assert (t.storage_bytes, t.io_syscalls, t.cpu_ticks, t.blkio_ticks) == (4096, 15, 1500, 7)
    assert snap[2].kernel_thread and not t.kernel_thread
    assert snap[108].run_ns is None
    assert snap[109].storage_bytes is None


def test_classify_refuses_an_empty_window() -> None:
    with pytest.raises(ValueError, match="window_s"):
        classify_tasks({}, {}, [], 0.0)


def test_interval_and_samples_are_bounded(fake_root: Path) -> None:
    with pytest.raises(WorkloadError) as err:
        probe_host(fake_root, interval_s=0)
    assert err.value.field == "interval"
    assert err.value.limit == "max_probe_interval_s"
    with pytest.raises(WorkloadError) as many:
        probe_host(fake_root, interval_s=1, samples=10_000)
    assert many.value.field == "samples"


# -- cores -------------------------------------------------------------------------------


def test_cores_take_the_parent_cgroup_quota_rounded_up(fake_root: Path) -> None:
    cores, affinity, quota = effective_cores(fake_root)
    assert affinity.value == 8  # Cpus_allowed_list 0-7
    assert quota.cpus == pytest.approx(2.5)
    assert quota.source == "/sys/fs/cgroup/user.slice/cpu.max"
    assert cores.value == 3  # min(8, ceil(2.5))
    assert "2.5" in cores.source


def _v1_root(tmp_path: Path, quota: str, mount_root: str = "/", cgroup: str = "/") -> Path:
    root = tmp_path / "v1"
    write(root, "/proc/self/status", "Cpus_allowed_list:\t0-3,6\n")
    write(root, "/proc/self/cgroup", f"5:memory:/x\n3:cpu,cpuacct:{cgroup}\n0::/\n")
    write(
        root,
        "/proc/self/mountinfo",
        f"40 31 0:37 {mount_root} /sys/fs/cgroup/cpu,cpuacct rw - cgroup cgroup rw,cpu,cpuacct\n"
        "41 31 0:38 / /sys/fs/cgroup/memory rw - cgroup cgroup rw,memory\n",
    )
    write(root, "/sys/fs/cgroup/cpu,cpuacct/cpu.cfs_quota_us", f"{quota}\n")
    write(root, "/sys/fs/cgroup/cpu,cpuacct/cpu.cfs_period_us", "100000\n")
    return root


def test_cgroup_v1_quota(tmp_path: Path) -> None:
    cores, affinity, quota = effective_cores(_v1_root(tmp_path, "150000"))
    assert affinity.value == 5
    assert quota.cpus == pytest.approx(1.5)
    assert quota.source.endswith("cpu.cfs_quota_us")
    assert cores.value == 2


def test_cgroup_v1_no_quota_leaves_the_affinity(tmp_path: Path) -> None:
    cores, _, quota = effective_cores(_v1_root(tmp_path, "-1"))
    assert quota.cpus is None
    assert cores.value == 5


def test_container_sees_its_own_subtree(tmp_path: Path) -> None:
    # Inside a container the mount's root is the container's cgroup, and the path in
    # /proc/self/cgroup is the same: the quota file is at the mount point itself.
    root = _v1_root(tmp_path, "400000", mount_root="/docker/abc", cgroup="/docker/abc")
    assert cgroup_cpu_quota(root).cpus == pytest.approx(4.0)


def test_no_cgroup_files_is_reported(tmp_path: Path) -> None:
    root = tmp_path / "bare"
    write(root, "/proc/self/status", "Cpus_allowed_list:\t0\n")
    quota = cgroup_cpu_quota(root)
    assert quota.cpus is None and quota.unread
    cores, _, _ = effective_cores(root)
    assert cores.value == 1


# -- disks -------------------------------------------------------------------------------


def test_disks_leave_out_virtual_and_empty_devices(fake_root: Path) -> None:
    count, devices = real_disks(fake_root)
    assert count.value == 2
    assert count.source == "/sys/block: nvme0n1, sda"
    counted = {d.name: d.counted for d in devices}
    assert counted == {
        "dm-0": False,
        "loop0": False,
        "nvme0n1": True,
        "sda": True,
        "sr0": False,
        "zram0": False,
    }
    sda = next(d for d in devices if d.name == "sda")
    assert sda.size_bytes == 1953525168 * 512 and sda.rotational is True


def test_no_disk_names_the_default(tmp_path: Path) -> None:
    (tmp_path / "sys/block").mkdir(parents=True)
    count, _ = real_disks(tmp_path)
    assert count.value == 1 and count.unread == "no disk in /sys/block"
    assert count.source.startswith("default: ")


# -- NIC ---------------------------------------------------------------------------------


def test_nic_of_the_default_route(fake_root: Path) -> None:
    nic = probe_nic(
        fake_root, ring_reader=lambda n: ring(1024), coalesce_reader=lambda n: coalesce(8)
    )
    assert nic.interface.value == "eth0"  # metric 100 beats eth1's 600
    assert nic.line_rate_bps.value == 10e9
    assert (nic.mtu_bytes.value, nic.packet_payload_bytes.value) == (9000, 8968)
    assert (nic.buffer_packets.value, nic.coalesce_packets.value) == (1024, 8)
    assert nic.profile_overrides() == {
        "line_rate_bps": 10e9,
        "packet_payload_bytes": 8968,
        "buffer_packets": 1024,
        "coalesce_packets": 8,
    }


def test_unread_nic_values_name_the_profile_default(fake_root: Path) -> None:
    nic = probe_nic(fake_root, "eth1")  # fake root: the driver cannot be asked
    sx = host_profile("sx280-2007")
    assert nic.line_rate_bps.value == sx.line_rate_bps
    assert nic.line_rate_bps.source == "default: profile sx280-2007"
    assert "speed = -1" in (nic.line_rate_bps.unread or "")
    assert nic.packet_payload_bytes.value == 1468  # 1500 - 32, read
    assert nic.buffer_packets.value == 64 and nic.buffer_packets.unread
    assert nic.coalesce_packets.value == 6 and nic.coalesce_packets.unread
    assert nic.profile_overrides() == {"packet_payload_bytes": 1468}


def test_unsupported_driver_is_unread(fake_root: Path) -> None:
    def refuse(name: str) -> EthtoolRing:
        raise EthtoolUnavailable(95, "ETHTOOL_GRINGPARAM: EOPNOTSUPP")

    nic = probe_nic(fake_root, "lo", ring_reader=refuse, coalesce_reader=lambda n: coalesce())
    assert "EOPNOTSUPP" in (nic.buffer_packets.unread or "")
    assert nic.line_rate_bps.unread  # empty speed file
    assert nic.packet_payload_bytes.value == 65_504


@pytest.mark.parametrize(
    ("setting", "expected", "read"),
    [
        (coalesce(frames=0, usecs=0), 1, True),  # no coalescing: one interrupt per packet
        (coalesce(frames=0, usecs=50), 6, False),  # by time only: no fixed batch
        (coalesce(frames=16, adaptive=True), 6, False),  # adaptive: no fixed batch
        (coalesce(frames=4096), 512, True),  # larger than the ring: capped at K
    ],
)
def test_coalescing_rules(
    fake_root: Path, setting: EthtoolCoalesce, expected: int, read: bool
) -> None:
    nic = probe_nic(fake_root, ring_reader=lambda n: ring(512), coalesce_reader=lambda n: setting)
    assert nic.coalesce_packets.value == expected
    assert nic.coalesce_packets.was_read is read


def test_unknown_interface_is_refused(fake_root: Path) -> None:
    with pytest.raises(WorkloadError) as err:
        probe_nic(fake_root, "wlan9")
    assert err.value.field == "interface"


def test_root_path_is_used_for_everything(fake_root: Path, fake_time: FakeTime) -> None:
    # Nothing of the real host leaks in: the fake host's 8 CPUs are not this machine's.
    probe = run_probe(fake_root, fake_time)
    assert probe.affinity.value == 8 and probe.affinity.source.startswith("/proc/self/status")


def test_workload_on_counts_the_tasks_that_compete_for_those_cpus(
    fake_root: Path, fake_time: FakeTime
) -> None:
    # Every CPU-bound task pinned to CPU 0, every I/O-bound one free on CPUs 0-3: on
    # CPU 0 alone they count C and I/4; on CPU 1 only the I/O share remains.
    probe = run_probe(fake_root, fake_time)
    kinds = {v.tid: v.kind for v in probe.tasks}

    def affinity(tid: int) -> set[int]:
        return {0} if kinds[tid] == "cpu" else {0, 1, 2, 3}

    on_0 = probe.workload_on({0}, affinity=affinity)
    assert on_0.to_dict() == {
        "cpu_tasks": EXPECTED_CPU,
        "io_tasks": round(EXPECTED_IO / 4),
        "cores": 1,
        "disks": 2,
    }
    on_1 = probe.workload_on({1}, affinity=affinity)
    assert (on_1.cpu_tasks, on_1.io_tasks, on_1.cores) == (0, round(EXPECTED_IO / 4), 1)
    everywhere = probe.workload_on({0, 1, 2, 3}, affinity=affinity)
    assert (everywhere.cpu_tasks, everywhere.io_tasks) == (EXPECTED_CPU, EXPECTED_IO)

    def gone(tid: int) -> set[int]:
        raise ProcessLookupError(tid)

    assert probe.workload_on({0}, affinity=gone).cpu_tasks == 0
    with pytest.raises(WorkloadError):
        probe.workload_on(set())
