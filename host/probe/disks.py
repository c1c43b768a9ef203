"""The disks of the host: the model's d.

A block device in ``/sys/block`` counts as a disk when

* it has a ``device`` link, i.e. it is backed by a device on a bus (SCSI/SATA, NVMe,
  virtio, MMC...).  This leaves out the devices the kernel makes up, which live under
  ``/sys/devices/virtual/block``: ``loop`` (files seen as disks), ``ram`` and ``zram``
  (memory), ``dm-*`` (device-mapper: LVM, dm-crypt) and ``md*`` (software RAID).  These
  are layers over the real disks (or over memory); counting them would count the same
  spindles twice, and a memory device never makes a task wait for a disk;
* and its size is non-zero (an empty CD drive or card reader is not a disk).

Partitions are not in ``/sys/block``, so each physical disk counts once.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .readings import Reading, under_root

__all__ = ["DiskInfo", "real_disks"]


@dataclass(frozen=True)
class DiskInfo:
    """One block device and whether it counts as a disk.

    Attributes
    ----------
    name : str
        Kernel name (``sda``, ``nvme0n1``, ``vda``, ``loop0``...).
    counted : bool
        True when it counts as a disk.
    source : str
        The files the decision was made from, and the reason when not counted.
    size_bytes : int or None
        Capacity (512-byte sectors of ``size`` times 512).
    rotational : bool or None
        ``queue/rotational``: True for a spinning disk.
    """

    name: str
    counted: bool
    source: str
    size_bytes: int | None = None
    rotational: bool | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "counted": self.counted,
            "source": self.source,
            "size_bytes": self.size_bytes,
            "rotational": self.rotational,
        }


def _int(path: Path) -> int | None:
    try:
        return int(path.read_text().strip())
    except (OSError, ValueError):
        return None


def real_disks(root: str | Path = "/") -> tuple[Reading, list[DiskInfo]]:
    """The number of disks (see the module notes) and every block device examined.

    The count is unread (and the model's default of one disk named) when
    ``/sys/block`` cannot be listed or holds no disk.
    """
    block = under_root(root, "/sys/block")
    try:
        names = sorted(os.listdir(block))
    except OSError as exc:
        reason = f"/sys/block unreadable: {exc.strerror or exc}"
        return Reading.defaulted(1, "1 disk (SPEC section 1)", reason), []
    devices: list[DiskInfo] = []
    for name in names:
        entry = block / name
        where = f"/sys/block/{name}"
        target = os.path.realpath(entry)
        size = _int(entry / "size")
        size_bytes = None if size is None else size * 512
        rotational = _int(entry / "queue" / "rotational")
        rot = None if rotational is None else bool(rotational)
        if "/devices/virtual/" in target or not (entry / "device").exists():
            devices.append(
                DiskInfo(name, False, f"{where}: virtual device (no device link)", size_bytes, rot)
            )
        elif not size_bytes:
            devices.append(DiskInfo(name, False, f"{where}/size: empty (0 sectors)", 0, rot))
        else:
            devices.append(DiskInfo(name, True, f"{where}/device, {where}/size", size_bytes, rot))
    counted = [d.name for d in devices if d.counted]
    if not counted:
        return (
            Reading.defaulted(1, "1 disk (SPEC section 1)", "no disk in /sys/block"),
            devices,
        )
    return Reading(len(counted), "/sys/block: " + ", ".join(counted)), devices
