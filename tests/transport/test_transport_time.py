"""The RBUDP transfer-time formula (SPEC section 4), term by term, on hand-computed cases.

Every expected value below is a hand computation whose arithmetic is written out in the
comment next to it; none calls the code under test to produce a reference.
"""

from __future__ import annotations

import json
import math

import mpmath
import numpy as np
import pytest

from transport import (
    DEFAULT_HEADER_BYTES,
    DEFAULT_PACKET_PAYLOAD_BYTES,
    TransferTime,
    TransportParameterError,
    total_size_bytes,
    transfer_time,
)

# A round-number case used throughout: S_pkt = 1000 B, header 24 B, 1000 full packets.
#   S = 1000 * 1000 + 1000 * 24 = 1,024,000 B
#   B_send = 81.92 Mbit/s -> B = 81.92e6 / 8 = 10.24e6 B/s, so S / B = 0.1 s
#   bitmap = S / (8 * S_pkt) = 1,024,000 / 8000 = 128 B, and 128 / 10.24e6 = 1.25e-5 s
#   T_prop = 0.05 s
FILE = 1_000_000
PKT = 1000
HDR = 24
RATE = 81.92e6
DELAY = 0.05


def hand(loss: float | list[float]) -> TransferTime:
    return transfer_time(RATE, loss, FILE, DELAY, packet_payload_bytes=PKT, header_bytes=HDR)


# --- S_total ---------------------------------------------------------------------------


def test_total_size_default_header_is_the_papers_32_bytes() -> None:
    # Hand computation: 500 MB = 500,000,000 B in packets of 1468 B:
    #   1468 * 340,599 = 499,999,332 < 5e8 <= 1468 * 340,600 = 500,000,800 -> 340,600 packets
    #   S = 500,000,000 + 340,600 * 32 = 500,000,000 + 10,899,200 = 510,899,200 B
    assert DEFAULT_PACKET_PAYLOAD_BYTES == 1468 and DEFAULT_HEADER_BYTES == 32
    assert DEFAULT_HEADER_BYTES == 1500 - 1468  # UDP 8 + IP 24, the paper's overhead
    assert total_size_bytes(500_000_000) == 510_899_200
    assert transfer_time(1e9, 0.0, 500_000_000, 0.1).total_bytes == 510_899_200


def test_total_size_header_zero_is_the_file_size() -> None:
    assert total_size_bytes(500_000_000, header_bytes=0) == 500_000_000
    # Hand computation: a 1-byte file is one packet: 1 + 1 * 32 = 33 B.
    assert total_size_bytes(1) == 33
    # Hand computation: 1469 B is two packets (1468 + 1): 1469 + 2 * 32 = 1533 B.
    assert total_size_bytes(1469) == 1533
    # Integral floats (e.g. "500MB" parsed to 5e8) are accepted and exact.
    assert total_size_bytes(5e8, packet_payload_bytes=1468.0, header_bytes=32.0) == 510_899_200


# --- l = 0 ----------------------------------------------------------------------------


def test_zero_loss_term_by_term() -> None:
    t = hand(0.0)
    assert t.total_bytes == 1_024_000
    # first blast: T_prop + S / B = 0.05 + 0.1 = 0.15 s
    assert float(t.first_blast_s) == pytest.approx(0.15, rel=1e-15)
    # no resend: N_resend = 0, the sum is empty
    assert float(t.n_resend) == 0.0
    assert float(t.resend_s) == 0.0
    # feedback: (0 + 1) * (1.25e-5 + 0.05) = 0.0500125 s
    assert float(t.feedback_s) == pytest.approx(0.0500125, rel=1e-15)
    # total: 0.15 + 0 + 0.0500125 = 0.2000125 s
    assert float(t.total_s) == pytest.approx(0.2000125, rel=1e-15)
    assert float(t.rounds) == 1.0
    assert bool(t.completes)


def test_zero_loss_is_prop_plus_payload_plus_bitmap_plus_prop() -> None:
    # SPEC: l = 0 gives T = T_prop + S/B + S/(8 S_pkt B) + T_prop, for any rate and size.
    rates = np.array([1e6, 123.4e6, 950e6, 10e9])
    t = transfer_time(rates, 0.0, 500_000_000, 0.1)
    S, B = 510_899_200, rates / 8
    expected = 0.1 + S / B + S / (8 * 1468 * B) + 0.1
    np.testing.assert_allclose(t.total_s, expected, rtol=1e-14)
    assert t.total_s.shape == (4,)
    assert np.all(t.rounds == 1.0)


# --- 0 < l < 1 ------------------------------------------------------------------------


def test_half_loss_term_by_term() -> None:
    t = hand(0.5)
    # N_resend = ln(S_pkt / S) / ln(l) = ln(1000 / 1,024,000) / ln(1/2) = ln(2^-10) / ln(2^-1)
    #          = 10 exactly: 10 resend rounds, 11 rounds in all.
    assert float(t.n_resend) == pytest.approx(10.0, rel=1e-15)
    assert float(t.rounds) == 11.0
    # resent bytes: sum_{i=1..10} l * S_{i-1} = S * (1/2 + 1/4 + ... + 1/1024)
    #             = 1,024,000 * 1023/1024 = 1,023,000 B;  1,023,000 / 10.24e6 = 0.09990234375 s
    # second term: 10 * 0.05 + 0.09990234375 = 0.59990234375 s
    assert float(t.resend_s) == pytest.approx(0.59990234375, rel=1e-14)
    # third term: (10 + 1) * (1.25e-5 + 0.05) = 11 * 0.0500125 = 0.5501375 s
    assert float(t.feedback_s) == pytest.approx(0.5501375, rel=1e-14)
    # total: 0.15 + 0.59990234375 + 0.5501375 = 1.30003984375 s
    assert float(t.total_s) == pytest.approx(1.30003984375, rel=1e-14)


def test_integer_n_resend_is_not_pushed_into_an_extra_round_by_rounding() -> None:
    # Hand computation: S_pkt = 8 B, S = 1000 B (header 0), l = 0.2:
    #   N_resend = ln(8/1000) / ln(0.2) = ln(0.2^3) / ln(0.2) = 3 exactly, but the float
    #   ratio of logs is 3.0000000000000004; ceil must still give 3 resend rounds.
    #   resent bytes = 1000 * (0.2 + 0.04 + 0.008) = 248 B  (a 4th round would add 1.6 B)
    #   B = 8000 bit/s / 8 = 1000 B/s, T_prop = 1 s
    #   resend term = 3 * 1 + 248 / 1000 = 3.248 s
    t = transfer_time(8000.0, 0.2, 1000, 1.0, packet_payload_bytes=8, header_bytes=0)
    assert float(t.rounds) == 4.0
    assert float(t.resend_s) == pytest.approx(3.248, rel=1e-13)


def test_tiny_loss_has_one_resend_round_with_fractional_n() -> None:
    t = hand(1e-12)
    # N_resend = ln(2^-10) / ln(1e-12) = (10 ln 2) / (12 ln 10)
    #          = 6.931471805599453 / 27.631021115928547 = 0.250858329719984...  (< 1)
    n = 10 * math.log(2) / (12 * math.log(10))
    assert float(t.n_resend) == pytest.approx(n, rel=1e-14)
    # ceil(0.2509) = 1 resend round: rounds = 2
    assert float(t.rounds) == 2.0
    # resent bytes = l * S_0 = 1e-12 * 1,024,000 B -> 1.024e-6 / 10.24e6 = 1e-13 s
    # second term = 0.25086 * 0.05 + 1e-13
    assert float(t.resend_s) == pytest.approx(n * 0.05 + 1e-13, rel=1e-14)
    # third term = (0.25086 + 1) * 0.0500125
    assert float(t.feedback_s) == pytest.approx((n + 1) * 0.0500125, rel=1e-14)
    assert float(t.total_s) == pytest.approx(0.15 + n * 0.05 + 1e-13 + (n + 1) * 0.0500125)


def test_loss_tending_to_zero_tends_to_the_zero_loss_time() -> None:
    # N_resend = ln(S_pkt/S)/ln(l) -> 0 as l -> 0 (slowly), and so does the resend term:
    # the smallest positive double (5e-324, ln = -744.44) gives N = 6.93/744.4 = 0.0093.
    t = hand([0.0, 1e-300, 5e-324])
    assert np.all(t.completes)
    assert np.all(np.diff(t.total_s[[0, 2, 1]]) > 0)  # T(0) < T(5e-324) < T(1e-300)
    assert float(t.n_resend[2]) == pytest.approx(10 * math.log(2) / 744.4400719213812, rel=1e-12)


def test_single_packet_file_needs_no_resend_round() -> None:
    # Hand computation: 1000 B file, default S_pkt = 1468: S = 1000 + 1 * 32 = 1032 B
    #   ln(S_pkt / S) = ln(1468 / 1032) > 0, so eq. 3 gives N <= 0: taken as 0.
    #   B = 8.256e6 / 8 = 1.032e6 B/s: S / B = 1e-3 s; bitmap = 1032 / 11744 B
    #   T = 0.01 + 1e-3 + (1032 / 11744) / 1.032e6 + 0.01 = 0.021 + 1/11744e3 s
    t = transfer_time(8.256e6, [0.0, 0.3, 0.99], 1000, 0.01)
    np.testing.assert_array_equal(t.n_resend, 0.0)
    np.testing.assert_array_equal(t.rounds, 1.0)
    np.testing.assert_allclose(t.total_s, 0.021 + 1 / 11_744_000, rtol=1e-14)


def test_loss_close_to_one_is_finite_and_matches_high_precision() -> None:
    # l = 0.999: N = ln(2^-10) / ln(0.999) = -6.931471805599453 / -0.0010005003335835344
    #          = 6927.99...  -> 6928 resend rounds; compare with an explicit sum.
    t = hand(0.999)
    n = math.log(PKT / 1_024_000) / math.log(0.999)
    rounds = math.ceil(n)
    resent = sum(0.999 * 1_024_000 * 0.999 ** (i - 1) for i in range(1, rounds + 1))
    assert float(t.rounds) == rounds + 1
    assert float(t.resend_s) == pytest.approx(n * DELAY + resent / 10.24e6, rel=1e-11)

    # l = 1 - 2^-50: about 7.8e15 rounds; the closed form must keep its digits, checked
    # against the same sum evaluated with 60 significant digits.
    loss = 1.0 - 2.0**-50
    t = hand(loss)
    with mpmath.workdps(60):
        L = mpmath.mpf(loss)
        n_mp = mpmath.log(mpmath.mpf(PKT) / 1_024_000) / mpmath.log(L)
        k = mpmath.ceil(n_mp)
        resent_mp = 1_024_000 * L * (1 - L**k) / (1 - L)
        resend_mp = n_mp * DELAY + resent_mp / mpmath.mpf(10.24e6)
        total_mp = (
            DELAY
            + mpmath.mpf(0.1)
            + resend_mp
            + (n_mp + 1) * (mpmath.mpf(128) / mpmath.mpf(10.24e6) + DELAY)
        )
    assert bool(t.completes)
    assert float(t.n_resend) == pytest.approx(float(n_mp), rel=1e-12)
    assert float(t.resend_s) == pytest.approx(float(resend_mp), rel=1e-10)
    assert float(t.total_s) == pytest.approx(float(total_mp), rel=1e-10)
    assert math.isfinite(float(t.total_s))


def test_time_grows_with_loss() -> None:
    losses = np.concatenate(([0.0], np.logspace(-300, -1, 200), np.linspace(0.1, 1 - 1e-15, 200)))
    t = transfer_time(1e9, losses, 500_000_000, 0.1)
    assert np.all(np.diff(t.total_s) >= 0)


# --- l >= 1: never completes ----------------------------------------------------------


def test_loss_one_or_more_never_completes() -> None:
    t = transfer_time(1e9, [0.5, 1.0, 1.5, np.inf], 500_000_000, 0.1)
    assert t.completes.tolist() == [True, False, False, False]
    assert np.all(np.isinf(t.total_s[1:]))  # internal representation only
    assert np.all(np.isfinite(t.first_blast_s))  # the first blast itself is well defined


def test_to_dict_never_leaks_infinity_or_nan() -> None:
    t = transfer_time([5e8, 1e9, 1e9], [0.01, 1.0, 2.0], 500_000_000, 0.1)
    d = t.to_dict()
    text = json.dumps(d, allow_nan=False)  # raises on inf / NaN
    assert d["completes"] == [True, False, False]
    for key in ("total_s", "resend_s", "feedback_s", "n_resend", "rounds"):
        assert d[key][1] is None and d[key][2] is None, key
        assert isinstance(d[key][0], float if key != "rounds" else int)
    assert "Infinity" not in text and "NaN" not in text


def test_scalar_inputs_give_0d_arrays_and_scalar_json() -> None:
    t = transfer_time(1e9, 0.0, 500_000_000, 0.1)
    assert t.total_s.shape == ()
    assert isinstance(t.to_dict()["total_s"], float)
    assert t.to_dict()["rounds"] == 1


def test_broadcasting_and_read_only_arrays() -> None:
    t = transfer_time([[5e8], [1e9]], [0.0, 0.1, 1.0], 10_000_000, 0.02)
    assert t.total_s.shape == (2, 3)
    assert t.completes.tolist() == [[True, True, False], [True, True, False]]
    with pytest.raises(ValueError):
        t.total_s[0, 0] = 1.0


# --- validation -----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("kwargs", "parameter"),
    [
        ({"send_rate_bps": 0.0}, "send_rate_bps"),
        ({"send_rate_bps": -1e9}, "send_rate_bps"),
        ({"send_rate_bps": [1e9, math.nan]}, "send_rate_bps"),
        ({"send_rate_bps": math.inf}, "send_rate_bps"),
        ({"send_rate_bps": []}, "send_rate_bps"),
        ({"send_rate_bps": "fast"}, "send_rate_bps"),
        ({"loss": math.nan}, "loss"),
        ({"loss": -0.1}, "loss"),
        ({"loss": [0.1, 0.2, 0.3]}, "loss"),  # does not broadcast against 2 rates
        ({"file_size_bytes": 0}, "file_size_bytes"),
        ({"file_size_bytes": -5}, "file_size_bytes"),
        ({"file_size_bytes": 1.5}, "file_size_bytes"),
        ({"file_size_bytes": math.nan}, "file_size_bytes"),
        ({"file_size_bytes": 2**60}, "file_size_bytes"),
        ({"file_size_bytes": True}, "file_size_bytes"),
        ({"propagation_delay_s": 0.0}, "propagation_delay_s"),
        ({"propagation_delay_s": -0.1}, "propagation_delay_s"),
        ({"propagation_delay_s": math.nan}, "propagation_delay_s"),
        ({"propagation_delay_s": math.inf}, "propagation_delay_s"),
        ({"packet_payload_bytes": 0}, "packet_payload_bytes"),
        ({"header_bytes": -1}, "header_bytes"),
    ],
)
def test_invalid_inputs_name_the_parameter(kwargs: dict[str, object], parameter: str) -> None:
    args: dict[str, object] = {
        "send_rate_bps": [5e8, 1e9],
        "loss": 0.01,
        "file_size_bytes": 500_000_000,
        "propagation_delay_s": 0.1,
    }
    args.update(kwargs)
    with pytest.raises(TransportParameterError) as info:
        transfer_time(**args)  # type: ignore[arg-type]
    assert info.value.parameter == parameter
    assert str(info.value).startswith(f"{parameter}: ")
    assert isinstance(info.value, ValueError)
