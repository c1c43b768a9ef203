"""The sender's time per paced call (:mod:`datamover.send_calibration`), measured with the
real sender and receiver over loopback.

References: the closed form ``t_send = datagrams per read * 8 * S_pkt / R`` for each
paced transfer, and socket(7)'s byte budget for the socket's fills (checked in
tests/host/test_calibration.py).
"""

from __future__ import annotations

import os
import statistics

import pytest

from datamover.send_calibration import measure_send_sizes
from datamover.sender import MAX_BURST_PACKETS
from transport import SendSizes

pytestmark = pytest.mark.skipif(
    len(os.sched_getaffinity(0)) < 2, reason="the two ends need a core each"
)


def test_the_time_per_call_is_what_the_receivers_reads_say() -> None:
    cpus = sorted(os.sched_getaffinity(0))
    got = measure_send_sizes(
        payload_bytes=1_440,
        buffer_packets=90,
        rate_bps=400e6,
        receiver_cpu=cpus[0],
        sender_cpu=cpus[1],
    )
    rows = got["rates"]
    assert [r["rate_bps"] for r in rows] == pytest.approx([120e6, 200e6, 280e6])
    for r in rows:
        assert r["datagrams"] == -(-8_000_000 // 1_440)  # every datagram taken, once
        assert r["datagrams_per_read"] == r["datagrams"] / r["reads"] >= 1.0
        assert r["seconds_per_send"] == pytest.approx(
            r["datagrams_per_read"] * 8 * 1_440 / r["rate_bps"]
        )
    assert got["seconds_per_send"] == statistics.median(r["seconds_per_send"] for r in rows)
    assert got["buffer_by_send"]["1"] == 90  # the profile's K for single datagrams
    assert got["max_send"] == MAX_BURST_PACKETS
    # Back to back, the sender does more than the paced rates asked (they were below it).
    assert got["sender_max_bps"] > 280e6
    # What a calibration stores is what the model takes.
    sends = SendSizes.from_dict(got)
    assert sends.seconds_per_send == got["seconds_per_send"]


def test_rates_must_be_positive() -> None:
    from datamover.send_calibration import measure_seconds_per_send

    with pytest.raises(ValueError, match="rates_bps"):
        measure_seconds_per_send((0.0,), payload_bytes=1_440)
