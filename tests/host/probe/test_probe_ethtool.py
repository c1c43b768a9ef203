"""The ethtool ioctls on this machine's interfaces (struct layouts of linux/ethtool.h)."""

from __future__ import annotations

import sys

import pytest

from host.probe.ethtool import EthtoolUnavailable, read_coalesce, read_ring
from host.probe.nic import default_interface

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="Linux ioctls")


def test_loopback_has_no_ring() -> None:
    # The loopback driver implements no ethtool ring or coalescing operations.
    with pytest.raises(EthtoolUnavailable):
        read_ring("lo")
    with pytest.raises(EthtoolUnavailable):
        read_coalesce("lo")


def test_unknown_interface_is_unavailable() -> None:
    with pytest.raises(EthtoolUnavailable):
        read_ring("nosuchif0")


def test_default_interface_ring_is_consistent() -> None:
    name = default_interface().value
    if name is None:
        pytest.skip("no default route on this machine")
    try:
        ring = read_ring(name)
    except EthtoolUnavailable as exc:
        pytest.skip(f"{name}: {exc}")
    # With the words of struct ethtool_ringparam in the right places, the current rx
    # size never exceeds the driver's maximum, and both are plausible ring sizes.
    assert 0 < ring.rx_pending <= ring.rx_max_pending <= 1 << 20
    try:
        co = read_coalesce(name)
    except EthtoolUnavailable as exc:
        pytest.skip(f"{name}: {exc}")
    assert co.rx_frames <= 1 << 16 and co.rx_usecs <= 10_000_000
