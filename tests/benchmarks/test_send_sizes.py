"""The validation's ``timeslice-send-size`` model (``benchmarks/validate_transfer.py``).

References: closed forms (a send at rate R carries R t / (8 S) datagrams; a backlogged
wake-up takes N + (s - 1) / 2; mu = 1 / (a + n b)), and the default model itself, which
the variant must equal where every send is one datagram.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from host import HostProfile, Workload
from transport.timeslice import time_slice_bottleneck_rate

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "benchmarks"))
_spec = importlib.util.spec_from_file_location(
    "validate_transfer", ROOT / "benchmarks" / "validate_transfer.py"
)
assert _spec is not None and _spec.loader is not None
vt = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(vt)

PROFILE = HostProfile(
    name="test",
    mu_io_cpu=14_000.0,
    mu_disk=11_000.0,
    mu_net=1.0 / (100e-6 + 8 * 2e-6),
    buffer_packets=1_000,
    coalesce_packets=8,
    line_rate_bps=1e9,
    packet_payload_bytes=vt.PAYLOAD,
)
TABLE = {1: 1_000, 2: 1_200, 4: 1_400, 8: 1_500, 32: 1_550}


def _sends(seconds_per_send: float = 100e-6, table: dict[int, int] = TABLE) -> Any:
    return vt.SendSizes(seconds_per_send, table, 100e-6, 2e-6, max_burst=32)


def test_a_send_carries_what_the_rate_sends_in_the_senders_call_time() -> None:
    sends = _sends()
    bits = 8.0 * vt.PAYLOAD
    assert sends.send_size(500e6, 1e9) == pytest.approx(500e6 * 100e-6 / bits)
    assert sends.send_size(50e6, 1e9) == 1.0  # never below one datagram
    assert sends.send_size(0.999e9 - 1, 1e9) == pytest.approx(min(32, 0.999e9 * 1e-4 / bits), 1e-6)
    assert _sends(10e-3).send_size(900e6, 1e9) == 32  # never above the burst
    assert sends.send_size(1e9, 1e9) == 1.0  # the line's tbf splits the sends


def test_the_buffer_and_the_intake_follow_the_send_size() -> None:
    sends = _sends()
    bits = 8.0 * vt.PAYLOAD
    rate = 4 * bits / 100e-6  # sends of exactly 4 datagrams
    p = sends.profile_at(PROFILE, rate)
    assert p.buffer_packets == TABLE[4]
    assert p.coalesce_packets == round(8 + 3 / 2)
    assert p.mu_net == pytest.approx(1.0 / (100e-6 + p.coalesce_packets * 2e-6))
    # Between two measured sizes K is interpolated linearly.
    p = sends.profile_at(PROFILE, 3 * bits / 100e-6)
    assert p.buffer_packets == round((TABLE[2] + TABLE[4]) / 2)


def test_with_single_datagram_sends_the_variant_is_the_default_model() -> None:
    sends = _sends(table={1: PROFILE.buffer_packets, 32: 2_000})
    w = Workload(cpu_tasks=2, io_tasks=0, cores=1)
    costs = {"time_slice_s": 3e-3, "kernel_s_per_datagram": 2e-6, "settle_s": 0.002}
    rate = 100e6  # 0.87 datagrams a call: sends of one
    got = sends.curve(w, PROFILE, 20_000_000, 0.01, costs, rate)
    want = time_slice_bottleneck_rate(
        w,
        PROFILE,
        file_size_bytes=20_000_000,
        propagation_delay_s=0.01,
        rates_bps=np.array([rate]),
        **costs,
    ).curve
    assert got.first_round_loss[0] == want.first_round_loss[0]
    assert got.transfer_time_s[0] == want.transfer_time_s[0]
