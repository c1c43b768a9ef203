"""The receiver's wake-up (datamover.receive_path), as the receiver and the calibration
of mu_net both run it.

References: the datagrams' own payloads (what is stored must be what was sent, byte for
byte) and the codec's refusal of a forged tag (a datagram whose tag is wrong is never
stored nor counted as the sender's).
"""

from __future__ import annotations

import os
import socket
from collections.abc import Iterator

import pytest

from datamover import DatagramCodec
from datamover.receive_path import ReceivePath, calibration_receive_path


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
    udp_pair: tuple[socket.socket, socket.socket],
) -> None:
    rx, tx = udp_pair
    payload = 100
    data = os.urandom(10 * payload - 37)  # a short last datagram
    codec = DatagramCodec(11, os.urandom(32), len(data), payload)
    store = bytearray(len(data))
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
    assert bytes(store) == data
    assert all(path.have)
    assert path.take_valid() == taken and path.valid == 0


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
