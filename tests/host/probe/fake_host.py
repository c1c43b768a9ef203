"""A fake host under a temporary root: /proc and /sys files written by hand (helpers
of test_probe_fake_root.py).

The expected counts of every test are derived from the numbers written here; each task
of :data:`TASKS` says which rule of :mod:`host.probe.classify` it exercises and what it
must be classified as.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from host.probe.tasks import PF_KTHREAD

WINDOW_S = 2.0
SAMPLES = 10
OWN_PID = os.getpid()


@dataclass(frozen=True)
class FakeTask:
    """A task's counters at the start and growth over the window, and its states."""

    pid: int
    tid: int
    comm: str
    expected: str  # "cpu", "io", "idle" or "excluded"
    states: str  # one letter per sample
    run_s: float = 0.0  # growth of time on a core (s)
    wait_s: float = 0.0  # growth of run-queue wait (s)
    voluntary: int = 0
    nonvoluntary: int = 0
    storage_bytes: int = 0
    blkio_ticks: int = 0
    ppid: int = 1
    kernel: bool = False
    schedstat: bool = True
    io_readable: bool = True
    born: bool = False  # appears only at the end of the window


# Each line: the rule it exercises (window W = 2 s, 10 samples).
TASKS = [
    # runnable (0.4 + 1.2) / 2 = 0.8 >= 0.5, never blocks -> CPU-bound
    FakeTask(100, 100, "spin", "cpu", "RRRRRRRRRR", 0.4, 1.2, 0, 200),
    # runnable (0.1 + 0.95) / 2 = 0.525: little time on a core, still CPU-bound
    FakeTask(101, 101, "starved", "cpu", "RRRRRSRRRR", 0.1, 0.95, 2, 90),
    # runnable 0.55 but 3000 voluntary >> 10 non-voluntary, D in 4/10, 12 MB read -> I/O
    FakeTask(102, 102, "reader", "io", "RDRDSRDRDR", 0.2, 0.9, 3000, 10, 12_000_000),
    # fsync writer: 200 wake-ups (100/s), blkio 30 ticks = 0.3 s = 15% of W -> I/O
    FakeTask(103, 103, "syncer", "io", "SSDSSSSSSS", 0.02, 0.01, 200, 2, 0, 30),
    # sleeper: 20 wake-ups, no storage, runnable 0.5% -> idle
    FakeTask(104, 104, "sleeper", "idle", "SSSSSSSSSS", 0.005, 0.005, 20, 0),
    # socket waiter: 5000 wake-ups, but state S and no storage bytes -> idle
    FakeTask(105, 105, "netwait", "idle", "SSSSSSRSSS", 0.1, 0.05, 5000, 3),
    # logger: 200 kB to storage (100 kB/s) but 4 wake-ups = 2/s < 5/s -> idle
    FakeTask(106, 106, "logger", "idle", "SSSSSSSSSS", 0.001, 0.0, 4, 0, 200_000),
    # compiler: storage bytes and 50 wake-ups, but preempted more (300) -> CPU (0.9)
    FakeTask(107, 107, "cc1", "cpu", "RRRRRRRRRR", 0.6, 1.2, 50, 300, 1_000_000),
    # no schedstat (kernel without SCHED_INFO): R in 8/10 samples -> CPU by states
    FakeTask(108, 108, "nosched", "cpu", "RRRRSRRRSR", schedstat=False),
    # io unreadable (another user's task): D in 5/10 and 400 wake-ups -> I/O
    FakeTask(109, 109, "otheruser", "io", "DSDSDSDSDS", 0.05, 0.05, 400, 1, io_readable=False),
    # a process with three threads: an idle main thread, a busy one and a reader
    FakeTask(200, 200, "app", "idle", "SSSSSSSSSS", 0.001, 0.0, 10, 0),
    FakeTask(200, 201, "app-worker", "cpu", "RRRRRRRRRR", 1.0, 0.9, 1, 50),
    FakeTask(200, 202, "app-io", "io", "DDSDDSDDSD", 0.1, 0.2, 900, 5, 8_000_000),
    # a kernel thread, busy: left out unless kernel threads are asked for
    FakeTask(2, 2, "kworker/0:1", "excluded", "RRRRRRRRRR", 1.5, 0.3, 0, 10, kernel=True),
    # the probing process itself and its child (a pool worker): left out by default
    FakeTask(OWN_PID, OWN_PID, "probe", "excluded", "RRRRRRRRRR", 1.8, 0.1, 0, 5, ppid=1),
    FakeTask(
        OWN_PID + 1, OWN_PID + 1, "worker", "excluded", "RRRRRRRRRR", 1.7, 0.2, 0, 5, ppid=OWN_PID
    ),
    # started during the window: its counters do not cover the window -> not counted
    FakeTask(400, 400, "newcomer", "excluded", "RRRRRRRRRR", 1.0, 0.5, born=True),
]
EXPECTED_CPU = sum(1 for t in TASKS if t.expected == "cpu")  # 100 101 107 108 201 = 5
EXPECTED_IO = sum(1 for t in TASKS if t.expected == "io")  # 102 103 109 202 = 4
assert (EXPECTED_CPU, EXPECTED_IO) == (5, 4)


def write(root: Path, path: str, text: str) -> Path:
    target = root / path.lstrip("/")
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(text)
    return target


def stat_line(t: FakeTask, state: str, end: bool) -> str:
    ticks = round(100 * t.run_s) if end else 0
    utime, stime = 1000 + ticks, 500
    blkio = 7 + (t.blkio_ticks if end else 0)
    flags = 0x400040 | (PF_KTHREAD if t.kernel else 0)
    fields = [state, t.ppid, t.pid, t.pid, 0, -1, flags, 10, 0, 0, 0, utime, stime]
    fields += [0, 0, 20, 0, 1, 0, 12345, 1_000_000, 100] + [0] * 17 + [blkio]
    fields += [0] * 10
    # A command name with a blank and a parenthesis, as /proc allows: parsed up to the
    # last ')'.
    comm = t.comm if t.pid != 100 else "spin (x)"
    return f"{t.tid} ({comm}) " + " ".join(str(f) for f in fields) + "\n"


def write_task(root: Path, t: FakeTask, state: str, end: bool) -> None:
    folder = f"/proc/{t.pid}/task/{t.tid}"
    write(root, f"{folder}/stat", stat_line(t, state, end))
    if t.tid == t.pid:
        write(root, f"/proc/{t.pid}/stat", stat_line(t, state, end))
    run = 5_000_000_000 + (round(t.run_s * 1e9) if end else 0)
    wait = 3_000_000_000 + (round(t.wait_s * 1e9) if end else 0)
    if t.schedstat:
        write(root, f"{folder}/schedstat", f"{run} {wait} {1000 + (500 if end else 0)}\n")
    vol = 100 + (t.voluntary if end else 0)
    nonvol = 50 + (t.nonvoluntary if end else 0)
    write(
        root,
        f"{folder}/status",
        f"Name:\t{t.comm}\nState:\t{state}\nvoluntary_ctxt_switches:\t{vol}\n"
        f"nonvoluntary_ctxt_switches:\t{nonvol}\n",
    )
    read = 4096 + (t.storage_bytes if end else 0)
    io = f"rchar: 1\nwchar: 1\nsyscr: 10\nsyscw: 5\nread_bytes: {read}\nwrite_bytes: 0\n"
    if t.io_readable:
        write(root, f"{folder}/io", io)


def build_static(root: Path) -> None:
    """Everything but the tasks: CPUs, cgroups, disks, network."""
    write(root, "/proc/self/status", "Name:\tprobe\nCpus_allowed_list:\t0-7\n")
    # cgroup v2 only: this process in /user.slice/app.scope; the parent slice has a quota
    # of 2.5 CPUs, the scope none -> ceil(2.5) = 3 cores, min(8, 3) = 3.
    write(root, "/proc/self/cgroup", "0::/user.slice/app.scope\n")
    write(
        root,
        "/proc/self/mountinfo",
        "22 1 8:1 / / rw,relatime - ext4 /dev/sda1 rw\n"
        "30 22 0:26 / /sys/fs/cgroup rw,nosuid - cgroup2 cgroup2 rw,nsdelegate\n",
    )
    write(root, "/sys/fs/cgroup/cpu.max", "max 100000\n")
    write(root, "/sys/fs/cgroup/user.slice/cpu.max", "250000 100000\n")
    write(root, "/sys/fs/cgroup/user.slice/app.scope/cpu.max", "max 100000\n")
    # Block devices: sda and nvme0n1 are disks; loop0, dm-0, zram0 are virtual; sr0 is
    # an empty optical drive -> 2 disks.
    devices = {
        "sda": ("pci0000:00/0000:00:1f.2/ata1/host0/target0:0:0/0:0:0:0/block/sda", 1953525168),
        "nvme0n1": ("pci0000:00/0000:00:1d.0/nvme/nvme0/nvme0n1", 1000215216),
        "sr0": ("pci0000:00/0000:00:1f.2/ata2/host1/target1:0:0/1:0:0:0/block/sr0", 0),
        "loop0": ("virtual/block/loop0", 0),
        "dm-0": ("virtual/block/dm-0", 41943040),
        "zram0": ("virtual/block/zram0", 8388608),
    }
    (root / "sys/block").mkdir(parents=True)
    for name, (where, size) in devices.items():
        real = root / "sys/devices" / where
        write(root, f"/sys/devices/{where}/size", f"{size}\n")
        write(root, f"/sys/devices/{where}/queue/rotational", "1\n" if name == "sda" else "0\n")
        if not where.startswith("virtual"):
            (real / "device").mkdir()
        os.symlink(os.path.relpath(real, root / "sys/block"), root / "sys/block" / name)
    # Network: eth0 at 10 Gb/s with jumbo frames carries the default route.
    write(
        root,
        "/proc/net/route",
        "Iface\tDestination\tGateway \tFlags\tRefCnt\tUse\tMetric\tMask\t\tMTU\tWindow\tIRTT\n"
        "eth1\t00000000\t0101A8C0\t0003\t0\t0\t600\t00000000\t0\t0\t0\n"
        "eth0\t0000A8C0\t00000000\t0001\t0\t0\t0\t00FFFFFF\t0\t0\t0\n"
        "eth0\t00000000\t0100A8C0\t0003\t0\t0\t100\t00000000\t0\t0\t0\n",
    )
    write(root, "/sys/class/net/eth0/speed", "10000\n")
    write(root, "/sys/class/net/eth0/mtu", "9000\n")
    write(root, "/sys/class/net/eth1/speed", "-1\n")
    write(root, "/sys/class/net/eth1/mtu", "1500\n")
    write(root, "/sys/class/net/lo/mtu", "65536\n")
    write(root, "/sys/class/net/lo/speed", "")


def build_start(root: Path) -> None:
    """The tasks as they are at the start of the window."""
    for t in TASKS:
        if not t.born:
            write_task(root, t, t.states[0], end=False)


def make_fake_root(tmp_path: Path) -> Path:
    """A fake host at the start of the window, under ``tmp_path``."""
    root = tmp_path / "host"
    build_static(root)
    build_start(root)
    return root


class FakeTime:
    """A clock that moves only when slept on; each sleep moves the fake host on.

    Sleep k < SAMPLES writes the tasks' states of sample k; the last sleep writes the
    counters at the end of the window.
    """

    def __init__(self, root: Path) -> None:
        self.root = root
        self.now = 1000.0
        self.sleeps = 0

    def clock(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        assert seconds > 0
        self.now += seconds
        k = self.sleeps
        self.sleeps += 1
        for t in TASKS:
            if k < SAMPLES and not t.born:
                write_task(self.root, t, t.states[k], end=False)
            elif k == SAMPLES:
                write_task(self.root, t, t.states[-1], end=True)
