"""The datagram and control formats: round trips, and rejection of every mutation the
checks are meant to catch.

Reference for the mutation property: the tag is keyed BLAKE2b, a pseudorandom function
(Aumasson, Neves, Wilcox-O'Hearn and Winnerlein, "BLAKE2: simpler, smaller, fast as
MD5", ACNS 2013, and RFC 7693 section 2.5 on its keyed mode).  A changed datagram passes
only if its 96-bit tag is guessed: probability 2**-96 per trial, so "every mutation is
rejected" holds for any number of examples a test can draw.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from datamover import DatagramCodec, WireError
from datamover.control import ControlError, decode_bitmap, encode_bitmap
from datamover.wire import HEADER_BYTES, KEY_BYTES


@st.composite
def datagrams(draw):
    payload_bytes = draw(st.integers(1, 2000))
    size = draw(st.integers(1, 50 * payload_bytes))
    codec = DatagramCodec(
        draw(st.integers(0, 2**64 - 1)),
        draw(st.binary(min_size=KEY_BYTES, max_size=KEY_BYTES)),
        size,
        payload_bytes,
    )
    seq = draw(st.integers(0, codec.packet_count - 1))
    payload = draw(
        st.binary(min_size=codec.payload_length(seq), max_size=codec.payload_length(seq))
    )
    round_ = draw(st.integers(0, 2**16 - 1))
    return codec, seq, round_, payload


@given(datagrams())
def test_round_trip(case) -> None:
    codec, seq, round_, payload = case
    d = codec.encode(seq, round_, payload)
    assert len(d) == HEADER_BYTES + len(payload)
    got = codec.decode(d)
    assert got is not None
    assert got[0] == seq and bytes(got[1]) == payload


@given(datagrams(), st.data())
def test_any_burst_of_up_to_four_bytes_is_rejected(case, data) -> None:
    codec, seq, round_, payload = case
    d = bytearray(codec.encode(seq, round_, payload))
    start = data.draw(st.integers(0, len(d) - 1))
    width = data.draw(st.integers(1, min(4, len(d) - start)))
    mask = data.draw(st.binary(min_size=width, max_size=width).filter(any))
    for i, m in enumerate(mask):
        d[start + i] ^= m
    assert codec.decode(d) is None


@given(datagrams(), st.data())
def test_truncated_or_extended_is_rejected(case, data) -> None:
    codec, seq, round_, payload = case
    d = codec.encode(seq, round_, payload)
    cut = data.draw(st.integers(0, len(d) - 1))
    assert codec.decode(d[:cut]) is None
    assert codec.decode(d + data.draw(st.binary(min_size=1, max_size=8))) is None


@given(datagrams())
def test_other_session_or_token_is_rejected(case) -> None:
    codec, seq, round_, payload = case
    d = codec.encode(seq, round_, payload)
    other_session = DatagramCodec(
        codec.session ^ 1, codec.key, codec.file_size, codec.payload_bytes
    )
    other_key = DatagramCodec(
        codec.session, bytes(b ^ 0xFF for b in codec.key), codec.file_size, codec.payload_bytes
    )
    assert other_session.decode(d) is None
    assert other_key.decode(d) is None


@given(st.binary(max_size=3000))
def test_random_bytes_never_raise(junk: bytes) -> None:
    codec = DatagramCodec(1, bytes(KEY_BYTES), 10_000, 1468)
    assert codec.decode(junk) is None


def test_codec_parameters_checked() -> None:
    with pytest.raises(WireError) as e:
        DatagramCodec(1, b"short", 10, 10)
    assert e.value.field == "key"
    with pytest.raises(WireError) as e:
        DatagramCodec(1, bytes(KEY_BYTES), 10, 0)
    assert e.value.field == "payload_bytes"
    with pytest.raises(WireError) as e:
        DatagramCodec(1, bytes(KEY_BYTES), 2**32 * 10 + 1, 10)
    assert e.value.field == "file_size"
    codec = DatagramCodec(1, bytes(KEY_BYTES), 10, 4)
    with pytest.raises(WireError) as e:
        codec.encode(2, 1, b"abc")  # the last packet carries 2 bytes
    assert e.value.field == "payload"


@settings(max_examples=200)
@given(st.lists(st.booleans(), max_size=200))
def test_bitmap_round_trip(bits: list[bool]) -> None:
    mask = np.array(bits, dtype=bool)
    assert np.array_equal(decode_bitmap(encode_bitmap(mask), mask.size), mask)


def test_bitmap_rejects_padding_bits_and_wrong_length() -> None:
    with pytest.raises(ControlError):
        decode_bitmap(b"\x80", 7)  # bit 7 is beyond 7 packets
    with pytest.raises(ControlError):
        decode_bitmap(b"\x00\x00", 7)


def test_control_frames_over_the_limit_or_unknown_are_refused() -> None:
    import socket
    import struct

    from datamover.control import MAX_JSON_BYTES, ControlChannel, MessageKind

    a, b = socket.socketpair()
    rx = ControlChannel(b, max_bitmap_bytes=16, timeout_s=2)
    try:
        a.sendall(struct.pack("!BI", MessageKind.HELLO, MAX_JSON_BYTES + 1))
        with pytest.raises(ControlError) as e:
            rx.receive()
        assert e.value.field == "frame"
        a.sendall(struct.pack("!BI", 99, 0))
        with pytest.raises(ControlError) as e:
            rx.receive()
        assert "unknown" in e.value.reason
        a.sendall(struct.pack("!BI", MessageKind.MISSING, 17))
        with pytest.raises(ControlError):
            rx.receive()
        a.sendall(struct.pack("!BI", MessageKind.HELLO, 3) + b"[1]")
        with pytest.raises(ControlError) as e:
            rx.expect_json(MessageKind.HELLO)
        assert "object" in e.value.reason
        a.sendall(struct.pack("!BI", MessageKind.HELLO, 10))  # and then silence
        with pytest.raises(ControlError) as e:
            rx.receive(timeout_s=0.2)
        assert e.value.field == "timeout_s"
    finally:
        a.close()
        rx.close()


def test_the_data_movers_default_datagram_is_the_models_packet() -> None:
    # Two homes for one packet size (the wire keeps its own so that a sender does not
    # load the models): the default datagram with UDP and IPv4 headers is the model's
    # 1,500-byte packet (S_pkt + its 32 bytes of overhead), which fits an Ethernet MTU.
    import subprocess
    import sys

    from datamover.wire import DEFAULT_PAYLOAD_BYTES
    from transport import DEFAULT_HEADER_BYTES, DEFAULT_PACKET_PAYLOAD_BYTES

    ip_packet = DEFAULT_PAYLOAD_BYTES + HEADER_BYTES + 8 + 20
    assert ip_packet == DEFAULT_PACKET_PAYLOAD_BYTES + DEFAULT_HEADER_BYTES == 1500
    # And moving a file does not load them: a fresh interpreter imports the sender and
    # the receiver without host, transport or numba.
    loaded = subprocess.run(
        [
            sys.executable,
            "-c",
            "import sys, datamover.sender, datamover.receiver; "
            "print(sorted({'host', 'transport', 'numba', 'srn'} & set(sys.modules)))",
        ],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    assert loaded == "[]"


@given(datagrams(), st.data())
def test_the_batch_check_agrees_with_the_single_one(case, data) -> None:
    """check_segments (array operations over a batch) and decode (one datagram) are two
    implementations of one rule: on any datagram, mutated or not, they must agree."""
    codec, seq, round_, payload = case
    d = bytearray(codec.encode(seq, round_, payload))
    if data.draw(st.booleans()):
        at = data.draw(st.integers(0, len(d) - 1))
        d[at] ^= data.draw(st.integers(1, 255))
    row = np.frombuffer(bytes(d), np.uint8).reshape(1, -1)
    seqs, rows = codec.check_segments(row)
    single = codec.decode(d)
    assert (single is None) == (seqs.size == 0)
    if single is not None:
        assert seqs.tolist() == [single[0]] and rows.tolist() == [0]


def _batch(codec: DatagramCodec, round_: int, n: int):
    """n random full packets of a random file, encoded as one batch."""
    source = np.frombuffer(np.random.default_rng(n).bytes(codec.file_size), np.uint8)
    seqs = np.random.default_rng(n).integers(0, codec.full_packets, n)
    out = np.empty((n, codec.datagram_bytes), np.uint8)
    codec.encode_full(seqs, round_, source, out)
    return source, seqs, out


@given(datagrams(), st.integers(1, 8))
def test_a_batch_encodes_as_its_datagrams_do(case, n) -> None:
    codec, _, round_, _ = case
    if codec.full_packets == 0:
        return
    source, seqs, out = _batch(codec, round_, n)
    p = codec.payload_bytes
    for row, seq in zip(out, seqs.tolist(), strict=True):
        assert row.tobytes() == codec.encode(seq, round_, source[seq * p : (seq + 1) * p].tobytes())


@given(datagrams(), st.integers(1, 12), st.data())
def test_a_batch_with_forgeries_anywhere_keeps_exactly_the_genuine_rows(case, n, data) -> None:
    """Forged rows (first, last, several in a row) are refused one by one and every
    genuine row is kept: the batch check equals decode applied row by row."""
    codec, _, round_, _ = case
    if codec.full_packets == 0:
        return
    _, seqs, out = _batch(codec, round_, n)
    forged = data.draw(st.sets(st.integers(0, n - 1)))
    for row in forged:
        out[row, data.draw(st.integers(0, codec.datagram_bytes - 1))] ^= 1
    got_seqs, rows = codec.check_segments(out)
    expected = [r for r in range(n) if codec.decode(out[r].tobytes()) is not None]
    assert rows.tolist() == expected and set(expected).isdisjoint(forged)
    assert got_seqs.tolist() == seqs[expected].tolist()


def test_the_batch_check_refuses_a_strided_view() -> None:
    codec = DatagramCodec(1, bytes(KEY_BYTES), 10_000, 100)
    wide = np.zeros((4, 2 * codec.datagram_bytes), np.uint8)
    with pytest.raises(WireError):
        codec.check_segments(wide[:, : codec.datagram_bytes])
