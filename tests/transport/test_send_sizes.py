"""The time-slice model with the sender's send sizes (:mod:`transport.send_sizes`).

References:

* closed forms: a send at rate R carries ``R t / (8 S)`` datagrams, between 1 and the
  sender's largest send, 1 at the line; K is linear in the send size between two
  measured sizes; a backlogged wake-up takes ``N + (s - 1) / 2``; a wake-up of n costs
  ``a + n b``;
* a second method: the model solved at one rate on a profile whose K, N and mu_net were
  set to that rate's by hand (exact equality: the same chain);
* the model without send sizes, which the model with them must equal where every send is
  one datagram (exact equality).
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from datamover import sender
from host import HostProfile, Workload
from transport import (
    MAX_SEND_DATAGRAMS,
    SendSizes,
    TransportParameterError,
    time_slice_bottleneck_rate,
    time_slice_costs,
    time_slice_terms,
)

A, B = 100e-6, 2e-6  # a wake-up's cost and a datagram's (s)
PROFILE = HostProfile(
    name="test",
    mu_io_cpu=14_000.0,
    mu_disk=11_000.0,
    mu_net=1.0 / (A + 8 * B),
    buffer_packets=1_000,
    coalesce_packets=8,
    line_rate_bps=1e9,
    packet_payload_bytes=1_440,
)
TABLE = ((1, 1_000), (2, 1_200), (4, 1_400), (8, 1_500), (32, 1_550))
BITS = 8.0 * PROFILE.packet_payload_bytes
COSTS = {"time_slice_s": 3e-3, "kernel_s_per_datagram": 2e-6, "settle_s": 0.002, "wakeup_s": A}
W = Workload(cpu_tasks=2, io_tasks=0, cores=1)


def test_the_largest_send_is_the_senders_burst() -> None:
    assert MAX_SEND_DATAGRAMS == sender.MAX_BURST_PACKETS


def test_a_send_carries_what_the_rate_sends_in_the_senders_call_time() -> None:
    sends = SendSizes(100e-6, TABLE)
    assert sends.send_size(500e6, 1e9, 1_440) == pytest.approx(500e6 * 100e-6 / BITS)
    assert sends.send_size(50e6, 1e9, 1_440) == 1.0  # never below one datagram
    assert SendSizes(5e-3, TABLE).send_size(900e6, 1e9, 1_440) == 32  # never above the burst
    assert sends.send_size(1e9, 1e9, 1_440) == 1.0  # the shaper splits sends at the line
    # From what the sender sends back to back up, every call is a catch-up burst, which
    # the shaper splits too.
    behind = SendSizes(100e-6, TABLE, sender_max_bps=900e6)
    assert behind.send_size(899e6, 1e9, 1_440) == pytest.approx(899e6 * 100e-6 / BITS)
    assert behind.send_size(900e6, 1e9, 1_440) == 1.0
    assert behind.top_bps(1e9) == 900e6 and behind.top_bps(8e8) == 8e8


def test_the_buffer_and_the_intake_follow_the_send_size() -> None:
    sends = SendSizes(100e-6, TABLE)
    assert sends.at(PROFILE, 4 * BITS / 100e-6) == (1_400, round(8 + 3 / 2))
    # Between two measured sizes K is linear; beyond the last, the last.
    assert sends.at(PROFILE, 3 * BITS / 100e-6)[0] == round((1_200 + 1_400) / 2)
    assert sends.buffer_packets(64) == 1_550
    assert sends.largest(PROFILE) == sends.at(PROFILE, 0.998 * PROFILE.line_rate_bps)


def test_each_rate_is_the_model_at_that_rates_k_n_and_mu() -> None:
    sends = SendSizes(100e-6, TABLE)
    rates = np.array([120e6, 350e6, 600e6, 900e6])
    got = time_slice_terms(W, PROFILE, rates_bps=rates, send_sizes=sends, **_terms_costs())
    for i, rate in enumerate(rates):
        k, n = sends.at(PROFILE, float(rate))
        by_hand = PROFILE.replace(buffer_packets=k, coalesce_packets=n, mu_net=1 / (A + n * B))
        want = time_slice_terms(W, by_hand, rates_bps=rates[i : i + 1], **_terms_costs())
        assert (got.buffer_packets[i], got.batch_packets[i]) == (k, n)
        assert got.stationary_loss[i] == pytest.approx(want.stationary_loss[0], rel=1e-9)
        assert got.shift[i] == pytest.approx(want.shift[0], rel=1e-9, abs=1e-12)
        assert got.backlog[i] == pytest.approx(want.backlog[0], rel=1e-9, abs=1e-12)


def test_with_single_datagram_sends_it_is_the_model_without_them() -> None:
    sends = SendSizes(1e-6, ((1, PROFILE.buffer_packets), (32, 2_000)))  # s < 1 below the line
    kw = {"file_size_bytes": 20_000_000, "propagation_delay_s": 0.01, **COSTS}
    got = time_slice_bottleneck_rate(W, PROFILE, send_sizes=sends, **kw)
    want = time_slice_bottleneck_rate(W, PROFILE, **kw)
    assert got.rate_bps == want.rate_bps
    assert got.transfer_time_s == want.transfer_time_s
    assert got.inputs["send_sizes"] == sends.to_dict()


def test_larger_sends_hold_more_and_lose_less_in_the_first_blast() -> None:
    # The mechanism the send sizes add: at 600 Mbit/s sends of ~5 datagrams, a socket of
    # 1,450 rather than 1,000 and wake-ups of 10 rather than 8.
    kw = {"file_size_bytes": 20_000_000, "propagation_delay_s": 0.01, **COSTS}
    rate = np.array([600e6])
    single = time_slice_bottleneck_rate(W, PROFILE, rates_bps=rate, **kw)
    grouped = time_slice_bottleneck_rate(
        W, PROFILE, rates_bps=rate, send_sizes=SendSizes(100e-6, TABLE), **kw
    )
    assert grouped.curve.first_round_loss[0] < single.curve.first_round_loss[0]


@settings(max_examples=60, deadline=None)
@given(
    t_send=st.floats(1e-6, 1e-3),
    rate=st.floats(1e6, 1e9),
    payload=st.integers(64, 9_000),
)
def test_the_send_size_is_bounded_and_grows_with_the_rate_below_the_line(
    t_send: float, rate: float, payload: int
) -> None:
    sends = SendSizes(t_send, TABLE)
    s = sends.send_size(rate, 1e9, payload)
    assert 1.0 <= s <= MAX_SEND_DATAGRAMS
    if rate < 0.99e9:
        assert sends.send_size(rate * 1.01, 1e9, payload) >= s
    k = sends.buffer_packets(s)
    assert TABLE[0][1] <= k <= TABLE[-1][1]


def test_the_dict_form_round_trips_and_bad_fields_are_named() -> None:
    sends = SendSizes(100e-6, TABLE, max_send=16, sender_max_bps=9e8)
    assert SendSizes.from_dict(sends.to_dict()) == sends
    for bad, field in (
        ({"seconds_per_send": 0.0, "buffer_by_send": {"1": 5}}, "send_sizes.seconds_per_send"),
        ({"seconds_per_send": 1e-4, "buffer_by_send": {}}, "send_sizes.buffer_by_send"),
        ({"seconds_per_send": 1e-4, "buffer_by_send": {"x": 5}}, "send_sizes.buffer_by_send"),
        ({"seconds_per_send": 1e-4, "buffer_by_send": {"1": True}}, "send_sizes.buffer_by_send"),
        (
            {"seconds_per_send": 1e-4, "buffer_by_send": {"1": 5}, "max_send": 0},
            "send_sizes.max_send",
        ),
        (
            {"seconds_per_send": 1e-4, "buffer_by_send": {"1": 5}, "sender_max_bps": -1},
            "send_sizes.sender_max_bps",
        ),
        ([1, 2], "send_sizes"),
    ):
        with pytest.raises(TransportParameterError) as err:
            SendSizes.from_dict(bad)  # type: ignore[arg-type]
        assert err.value.parameter == field


def test_a_stored_table_counts_only_for_its_own_socket() -> None:
    stored = {"send_sizes": SendSizes(100e-6, TABLE).to_dict()}
    assert time_slice_costs(stored, PROFILE).send_sizes == SendSizes(100e-6, TABLE)
    # Another K: another socket, whose table this is not.
    assert time_slice_costs(stored, PROFILE.replace(buffer_packets=90)).send_sizes is None
    # ... unless the receiver measured its own socket's.
    own = {1: 90, 4: 120}
    got = time_slice_costs(stored, PROFILE.replace(buffer_packets=90), buffer_by_send=own)
    assert got.send_sizes == SendSizes(100e-6, ((1, 90), (4, 120)))
    # A malformed one is no table.
    assert time_slice_costs({"send_sizes": {"seconds_per_send": "x"}}, PROFILE).send_sizes is None
    assert time_slice_costs(None, PROFILE).send_sizes is None


def test_work_beyond_the_bound_at_the_largest_send_is_refused() -> None:
    big = PROFILE.replace(buffer_packets=40_000, coalesce_packets=8)
    sends = SendSizes(1e-3, ((1, 40_000), (32, 60_000)))
    with pytest.raises(TransportParameterError) as err:
        time_slice_terms(W, big, rates_bps=np.array([900e6]), send_sizes=sends)
    assert err.value.parameter == "send_sizes"


def _terms_costs() -> dict[str, float]:
    return {k: v for k, v in COSTS.items() if k != "settle_s"}
