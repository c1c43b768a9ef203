"""The receiver's wake-up (datamover.receive_path), as the receiver and the calibration
of mu_net both run it.

References: the datagrams' own payloads (what is stored must be what was sent, byte for
byte) and the codec's refusal of a forged tag (a datagram whose tag is wrong is never
stored nor counted as the sender's).  With UDP GSO and GRO (Linux >= 5.0), a batch the
kernel coalesces must give exactly what the same datagrams give one by one.
"""

from __future__ import annotations

import os
import socket
from collections.abc import Iterator

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from datamover import DatagramCodec
from datamover.receive_path import ARRAY_MIN_SEGMENTS, ReceivePath, calibration_receive_path
from datamover.segments import enable_gro, enable_gso


@pytest.fixture
def store() -> Iterator[int]:
    fd = os.open(os.environ.get("TMPDIR", "/tmp"), os.O_TMPFILE | os.O_RDWR, 0o600)
    yield fd
    os.close(fd)


def _stored(fd: int, size: int) -> bytes:
    return os.pread(fd, size, 0)


@pytest.fixture
def udp_pair() -> Iterator[tuple[socket.socket, socket.socket]]:
    rx = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    tx = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    rx.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 1 << 20)
    rx.bind(("127.0.0.1", 0))
    tx.connect(rx.getsockname())
    yield rx, tx
    rx.close()
    tx.close()


def _wait_readable(sock: socket.socket) -> None:
    import selectors

    with selectors.DefaultSelector() as sel:
        sel.register(sock, selectors.EVENT_READ)
        assert sel.select(timeout=10.0), "nothing arrived on loopback within 10 s"


def test_a_wake_up_stores_what_was_sent_and_refuses_forgeries(
    udp_pair: tuple[socket.socket, socket.socket], store: int
) -> None:
    rx, tx = udp_pair
    payload = 100
    data = os.urandom(10 * payload - 37)  # a short last datagram
    codec = DatagramCodec(11, os.urandom(32), len(data), payload)
    path = ReceivePath(rx, codec, store)
    forged = bytearray(codec.encode(3, 1, data[3 * payload : 4 * payload]))
    forged[-1] ^= 1  # the tag no longer matches
    tx.send(bytes(forged))
    for seq in range(codec.packet_count):
        tx.send(codec.encode(seq, 1, data[seq * payload : (seq + 1) * payload]))
    tx.send(codec.encode(0, 1, data[:payload]))  # a repeat
    rx.setblocking(False)
    taken = 0
    while path.accepted + path.duplicates + path.rejected < codec.packet_count + 2:
        _wait_readable(rx)
        taken += path(4)
    assert taken == codec.packet_count + 1  # the forgery is not the sender's
    assert (path.accepted, path.duplicates, path.rejected) == (codec.packet_count, 1, 1)
    assert _stored(store, len(data)) == data
    assert all(path.have)
    assert path.take_valid() == taken and path.valid == 0
    assert path.reads == codec.packet_count + 2  # one datagram per read without GRO


@pytest.mark.skipif(
    enable_gro(socket.socket(socket.AF_INET, socket.SOCK_DGRAM)) is not None,
    reason="no UDP GRO on this kernel",
)
def test_a_coalesced_batch_gives_what_its_datagrams_give_one_by_one(
    udp_pair: tuple[socket.socket, socket.socket], store: int
) -> None:
    """A GSO send of packets 0..n-2 with one forged in the middle, then the short last
    packet: one read takes the batch, the forgery alone is refused (a bad segment does
    not invalidate its neighbours), and the file is the data."""
    rx, tx = udp_pair
    payload = 1000
    data = os.urandom(20 * payload - 1)
    codec = DatagramCodec(12, os.urandom(32), len(data), payload)
    assert enable_gso(tx, codec.datagram_bytes) is None and enable_gro(rx) is None
    full = np.arange(codec.full_packets, dtype=np.int64)
    rows = np.empty((full.size, codec.datagram_bytes), np.uint8)
    source = np.frombuffer(data, np.uint8)
    codec.encode_full(full, 1, source, rows)
    for seq in full.tolist():  # the batch form equals the one-at-a-time form
        sent = codec.encode(seq, 1, data[seq * payload : (seq + 1) * payload])
        assert rows[seq].tobytes() == sent
    rows[7, 300] ^= 1  # packet 7's payload no longer matches its tag
    path = ReceivePath(rx, codec, store)
    rx.setblocking(False)
    tx.send(rows.tobytes())
    tx.send(codec.encode(19, 1, data[19 * payload :]))
    while path.accepted + path.rejected < codec.packet_count:
        _wait_readable(rx)
        path(64)
    assert path.reads == 2 and (path.accepted, path.rejected) == (codec.packet_count - 1, 1)
    assert not path.have[7] and sum(path.have) == codec.packet_count - 1
    good = bytearray(data)
    good[7 * payload : 8 * payload] = bytes(payload)  # never written: the file's zeros
    os.ftruncate(store, len(data))
    assert _stored(store, len(data)) == bytes(good)


def test_the_calibration_path_checks_and_stores_round_and_round(
    udp_pair: tuple[socket.socket, socket.socket],
) -> None:
    rx, tx = udp_pair
    datagrams, path = calibration_receive_path(200, packets=8)
    rx.setblocking(False)
    wakeup = path(rx)
    for _ in range(3):  # the calibration's sender repeats its datagrams
        for d in datagrams:
            tx.send(d)
    taken = 0
    while taken < 3 * len(datagrams):
        _wait_readable(rx)
        taken += wakeup(5)
    assert taken == 24
    # Garbage is read but not taken.
    tx.send(b"\x00" * 232)
    _wait_readable(rx)
    assert wakeup(5) == 0


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(data=st.data())
def test_the_small_batch_form_gives_what_one_at_a_time_gives(data: st.DataObject) -> None:
    """Reference: :meth:`ReceivePath._one`, one datagram at a time (tested against the
    sent bytes above).  Over the same receive-buffer bytes, any mix of packets in any
    order, repeats, forgeries, another session's datagrams, a short last datagram (good
    or forged) and datagrams the drop hook takes, the small-batch form
    (DatagramCodec.check_rows, one pwritev per run) must count the same and store the
    same file."""
    payload = 64
    data_bytes = os.urandom(12 * payload - 9)  # packet 11 is short
    codec = DatagramCodec(21, os.urandom(32), len(data_bytes), payload)
    other = DatagramCodec(22, os.urandom(32), len(data_bytes), payload)
    m = codec.datagram_bytes
    full = st.integers(0, codec.full_packets - 1)
    kinds = st.sampled_from(["good", "good", "good", "forged", "other"])
    batch = data.draw(st.lists(st.tuples(full, kinds), min_size=1, max_size=ARRAY_MIN_SEGMENTS - 1))
    last = data.draw(st.sampled_from(["none", "good", "forged"]))
    before = data.draw(st.sets(full, max_size=3))  # stored by an earlier read
    # The test hook that drops valid datagrams (a lossy link): the short last one too.
    dropped = data.draw(st.sets(st.integers(0, codec.full_packets), max_size=3))
    datagrams = []
    for seq, kind in batch:
        chunk = data_bytes[seq * payload : (seq + 1) * payload]
        d = bytearray((other if kind == "other" else codec).encode(seq, 1, chunk))
        if kind == "forged":
            d[20] ^= 1
        datagrams.append(bytes(d))
    if last != "none":
        short = bytearray(codec.encode(11, 1, data_bytes[11 * payload :]))
        if last == "forged":
            short[-1] ^= 1  # the tag
        datagrams.append(bytes(short))
    raw = b"".join(datagrams)
    results = []
    for form in ("small batch", "one at a time"):
        fd = os.open(os.environ.get("TMPDIR", "/tmp"), os.O_TMPFILE | os.O_RDWR, 0o600)
        try:
            a, b = socket.socketpair(socket.AF_UNIX, socket.SOCK_DGRAM)
            path = ReceivePath(a, codec, fd, drop=lambda seq, _round: seq in dropped)
            for seq in before:
                path.have[seq] = 1
            path._buf[: len(raw)] = raw
            if form == "small batch":
                valid = path._few(len(raw), m)
            else:
                valid = sum(path._one(min(s + m, len(raw)), s) for s in range(0, len(raw), m))
            os.ftruncate(fd, len(data_bytes))
            results.append(
                (
                    valid,
                    path.accepted,
                    path.duplicates,
                    path.rejected,
                    path.dropped,
                    bytes(path.have),
                    os.pread(fd, len(data_bytes), 0),
                )
            )
            a.close()
            b.close()
        finally:
            os.close(fd)
    assert results[0] == results[1]


@pytest.mark.parametrize("size", [1, 8, 31, 32, 33, 100])
def test_a_small_batch_of_datagrams_of_no_sessions_size_is_refused_not_raised(size: int) -> None:
    """A GRO batch of datagrams too short for a header, or of a length no packet of this
    file has (a spoofed or broken peer), is refused datagram by datagram, as
    :meth:`ReceivePath._one` refuses each; nothing is stored and nothing raises."""
    codec = DatagramCodec(23, os.urandom(32), 10 * 64, 64)
    fd = os.open(os.environ.get("TMPDIR", "/tmp"), os.O_TMPFILE | os.O_RDWR, 0o600)
    a, b = socket.socketpair(socket.AF_UNIX, socket.SOCK_DGRAM)
    try:
        path = ReceivePath(a, codec, fd)
        raw = os.urandom(3 * size)
        path._buf[: len(raw)] = raw
        assert path._few(len(raw), size) == 0
        assert (path.accepted, path.rejected) == (0, 3)
        assert not any(path.have)
    finally:
        a.close()
        b.close()
        os.close(fd)


@pytest.mark.parametrize("n", [1, 5, ARRAY_MIN_SEGMENTS])
def test_a_packet_is_marked_stored_only_after_its_write_returns(
    n: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """datamover.running_digest hashes a packet once ``have`` marks it: every form (one
    at a time, small batch, array) must write before it marks.  Each write checks that
    the packets it writes are still unmarked."""
    payload = 64
    data = os.urandom(2 * ARRAY_MIN_SEGMENTS * payload)
    codec = DatagramCodec(24, os.urandom(32), len(data), payload)
    fd = os.open(os.environ.get("TMPDIR", "/tmp"), os.O_TMPFILE | os.O_RDWR, 0o600)
    a, b = socket.socketpair(socket.AF_UNIX, socket.SOCK_DGRAM)
    path = ReceivePath(a, codec, fd)
    writes: list[int] = []

    def checked(write, size_of):
        def call(store, what, offset):
            first, count = offset // payload, -(-size_of(what) // payload)
            assert not any(path.have[first : first + count]), "marked before written"
            writes.append(count)
            return write(store, what, offset)

        return call

    monkeypatch.setattr(os, "pwrite", checked(os.pwrite, len))
    monkeypatch.setattr(os, "pwritev", checked(os.pwritev, lambda v: sum(map(len, v))))
    try:
        m = codec.datagram_bytes
        rows = path._bytes[: n * m].reshape(n, m)
        codec.encode_full(np.arange(n, dtype=np.int64), 1, np.frombuffer(data, np.uint8), rows)
        if n == 1:
            path._one(m)
        elif n < ARRAY_MIN_SEGMENTS:
            path._few(n * m, m)
        else:
            path._take(rows)
        assert sum(writes) == n and sum(path.have) == n
    finally:
        a.close()
        b.close()
        os.close(fd)
