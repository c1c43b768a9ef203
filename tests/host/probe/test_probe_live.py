"""The probe on this machine: start k busy loops and l disk readers, see them counted.

The loads are bounded (each exits by itself after at most 30 s) and killed at the end of
the test.  The readers do real blocking reads: 4 KiB at random offsets of a 32 MiB
file opened with O_DIRECT, so the page cache cannot answer them.  Other load on the
machine changes the totals, so the test checks each spawned process's own verdict
and that the totals include them.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from host.probe import HostProbe, probe_host

pytestmark = pytest.mark.skipif(
    not sys.platform.startswith("linux"), reason="the probe reads Linux /proc and /sys"
)

BUSY = """
import sys, time
end = time.monotonic() + 30
print("ready", flush=True)
while time.monotonic() < end:
    pass
"""

READER = """
import mmap, os, random, sys, time
fd = os.open(sys.argv[1], os.O_RDONLY | os.O_DIRECT)
buf = mmap.mmap(-1, 4096)  # page-aligned, as O_DIRECT needs
blocks = os.fstat(fd).st_size // 4096
end = time.monotonic() + 30
os.preadv(fd, [buf], 0)
print("ready", flush=True)
while time.monotonic() < end:
    os.preadv(fd, [buf], random.randrange(blocks) * 4096)
"""

K_BUSY = 2
L_READERS = 2


def _direct_io_file(folder: Path) -> Path:
    path = folder / "blocks.bin"
    with open(path, "wb") as f:
        for _ in range(32):
            f.write(os.urandom(1 << 20))
        f.flush()
        os.fsync(f.fileno())
    try:
        fd = os.open(path, os.O_RDONLY | os.O_DIRECT)
    except OSError as exc:  # tmpfs and some others refuse O_DIRECT
        pytest.skip(f"O_DIRECT not supported on {folder}: {exc}")
    os.close(fd)
    return path


@contextmanager
def running_loads(folder: Path) -> Iterator[tuple[list[int], list[int]]]:
    """Start K_BUSY busy loops and L_READERS O_DIRECT readers; kill them on exit."""
    data = _direct_io_file(folder)
    procs: list[subprocess.Popen[str]] = []
    try:
        busy = [
            subprocess.Popen([sys.executable, "-c", BUSY], stdout=subprocess.PIPE, text=True)
            for _ in range(K_BUSY)
        ]
        procs += busy
        readers = [
            subprocess.Popen(
                [sys.executable, "-c", READER, str(data)], stdout=subprocess.PIPE, text=True
            )
            for _ in range(L_READERS)
        ]
        procs += readers
        for p in procs:
            assert p.stdout is not None
            assert p.stdout.readline().strip() == "ready"
        yield [p.pid for p in busy], [p.pid for p in readers]
    finally:
        for p in procs:
            p.kill()
        for p in procs:
            p.wait(timeout=10)
            if p.stdout is not None:
                p.stdout.close()


def test_spawned_loads_are_counted(tmp_path: Path) -> None:
    me = os.getpid()
    # This process is left out, its children (the loads) are not.
    before = probe_host(interval_s=2.0, exclude_pids={me})
    with running_loads(tmp_path) as (busy, readers):
        during = probe_host(interval_s=2.0, exclude_pids={me})
    for pid in busy:
        verdicts = during.verdict(pid)
        assert [v.kind for v in verdicts] == ["cpu"], verdicts
    for pid in readers:
        verdicts = during.verdict(pid)
        assert [v.kind for v in verdicts] == ["io"], verdicts
    assert not during.verdict(me)
    # The totals rise by k and l, apart from the other tasks' own changes between the
    # two windows (the machine is shared), which are measured from the verdicts.
    spawned = set(busy) | set(readers)

    def others(probe: HostProbe, kind: str) -> int:
        return sum(1 for v in probe.tasks if v.kind == kind and v.pid not in spawned)

    drift_cpu = others(during, "cpu") - others(before, "cpu")
    drift_io = others(during, "io") - others(before, "io")
    assert during.cpu_tasks.value - before.cpu_tasks.value == K_BUSY + drift_cpu
    assert during.io_tasks.value - before.io_tasks.value == L_READERS + drift_io
