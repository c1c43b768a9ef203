"""The handshake and the protected control channel: both ends prove the secret, and a
frame altered, replayed or reordered on the wire stops the exchange.

Reference: HMAC (RFC 2104) with SHA-256 as the pseudorandom function (RFC 6234); the
keys are derived as in HKDF's expand step with one block (RFC 5869 section 2.3), so the
properties tested are those of a PRF: other inputs give unrelated outputs.
"""

from __future__ import annotations

import socket
import struct
import threading
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from datamover import SessionKeys, load_secret
from datamover.control import CONTROL_TAG_BYTES, ControlChannel, ControlError, MessageKind
from datamover.handshake import (
    MIN_SECRET_BYTES,
    SecretError,
    answer_challenge,
    challenge,
    session_keys,
)

SECRET = b"handshake-test-secret"


def _pair(timeout_s: float = 10.0) -> tuple[ControlChannel, ControlChannel]:
    a, b = socket.socketpair()
    return (
        ControlChannel(a, max_bitmap_bytes=64, timeout_s=timeout_s),
        ControlChannel(b, max_bitmap_bytes=64, timeout_s=timeout_s),
    )


def _handshake(
    receiver_secret: bytes | None, sender_secret: bytes | None
) -> tuple[Any, Any, ControlChannel, ControlChannel]:
    """Run both sides; each result is SessionKeys or the ControlError it raised."""
    rx, tx = _pair()
    out: dict[str, Any] = {}

    def receiver() -> None:
        try:
            out["rx"] = challenge(rx, receiver_secret)
        except ControlError as exc:
            out["rx"] = exc

    t = threading.Thread(target=receiver, daemon=True)
    t.start()
    try:
        sent: Any = answer_challenge(tx, sender_secret)
    except ControlError as exc:
        sent = exc
        tx.close()  # as the sender does: the receiver then sees the connection end
    t.join(10)
    assert not t.is_alive()
    return out["rx"], sent, rx, tx


def test_both_ends_with_the_secret_derive_the_same_keys() -> None:
    got_rx, got_tx, rx, tx = _handshake(SECRET, SECRET)
    assert isinstance(got_rx, SessionKeys) and got_rx == got_tx
    # The channels are protected from here on, and talk.
    tx.send_json(MessageKind.HELLO, {"x": 1})
    assert rx.expect_json(MessageKind.HELLO)[1] == {"x": 1}
    rx.send_json(MessageKind.ACCEPT, {"y": 2})
    assert tx.expect_json(MessageKind.ACCEPT)[1] == {"y": 2}
    rx.close()
    tx.close()


def test_a_sender_with_another_secret_is_refused_and_told() -> None:
    got_rx, got_tx, rx, _ = _handshake(SECRET, b"another-secret-entirely")
    assert isinstance(got_rx, ControlError) and got_rx.field == "secret"
    assert isinstance(got_tx, ControlError) and got_tx.field == "secret"
    assert "authentication failed" in got_tx.reason
    rx.close()


def test_a_sender_without_a_secret_is_refused_before_it_proves_anything() -> None:
    got_rx, got_tx, rx, _ = _handshake(SECRET, None)
    assert isinstance(got_tx, ControlError) and got_tx.field == "secret"
    assert "requires a shared secret" in got_tx.reason
    assert isinstance(got_rx, ControlError)  # the sender hung up
    rx.close()


def test_a_sender_with_a_secret_refuses_an_insecure_receiver() -> None:
    """An insecure receiver cannot prove who it is, so a sender with a secret does not
    send to it: it might be an impostor on the receiver's address."""
    _, got_tx, rx, _ = _handshake(None, SECRET)
    assert isinstance(got_tx, ControlError) and got_tx.field == "secret"
    assert "--insecure" in got_tx.reason
    rx.close()


def test_insecure_on_both_ends_still_runs_the_exchange() -> None:
    got_rx, got_tx, rx, tx = _handshake(None, None)
    assert isinstance(got_rx, SessionKeys) and got_rx == got_tx
    rx.close()
    tx.close()


def test_a_receiver_that_does_not_hold_the_secret_is_caught_by_the_sender() -> None:
    """An impostor receiver that accepts any proof (it cannot check it) still cannot
    make the sender's check pass."""
    rx, tx = _pair()

    def impostor() -> None:
        rx.send_json(MessageKind.CHALLENGE, {"version": 2, "nonce": "00" * 16, "auth": "secret"})
        rx.expect_json(MessageKind.AUTH)
        rx.send_json(MessageKind.AUTH_OK, {"proof": "ab" * 32})

    t = threading.Thread(target=impostor, daemon=True)
    t.start()
    with pytest.raises(ControlError) as err:
        answer_challenge(tx, SECRET)
    t.join(10)
    assert err.value.field == "secret" and "could not prove" in err.value.reason
    rx.close()
    tx.close()


def _raw_frames(sock: socket.socket, count: int) -> list[bytes]:
    frames = []
    for _ in range(count):
        head = sock.recv(5, socket.MSG_WAITALL)
        _, length = struct.unpack("!BI", head)
        frames.append(head + sock.recv(length, socket.MSG_WAITALL))
    return frames


def _protected_pair() -> tuple[ControlChannel, socket.socket, ControlChannel, socket.socket]:
    """A sender channel whose frames reach the test raw, and a receiver channel the
    test feeds raw: a man in the middle."""
    keys = session_keys(SECRET, bytes(16), bytes(16))
    tx_sock, mitm_in = socket.socketpair()
    mitm_out, rx_sock = socket.socketpair()
    tx = ControlChannel(tx_sock, max_bitmap_bytes=64, timeout_s=5)
    rx = ControlChannel(rx_sock, max_bitmap_bytes=64, timeout_s=5)
    tx.protect(send_key=keys.sender_key, receive_key=keys.receiver_key)
    rx.protect(send_key=keys.receiver_key, receive_key=keys.sender_key)
    return tx, mitm_in, rx, mitm_out


@pytest.mark.parametrize("attack", ["alter", "replay", "reorder", "drop", "strip"])
def test_a_man_in_the_middle_cannot_alter_replay_reorder_or_drop_a_frame(attack: str) -> None:
    tx, mitm_in, rx, mitm_out = _protected_pair()
    tx.send_json(MessageKind.HELLO, {"name": "a.bin"})
    tx.send_json(MessageKind.BLAST_END, {"round": 1, "sent": 5})
    first, second = _raw_frames(mitm_in, 2)
    if attack == "alter":
        forged = first.replace(b"a.bin", b"b.bin")
        frames = [forged]
    elif attack == "replay":
        frames = [first, first]
    elif attack == "reorder":
        frames = [second, first]
    elif attack == "drop":
        frames = [second]
    else:  # strip the tag and fix the length
        body = first[5:-CONTROL_TAG_BYTES]
        frames = [struct.pack("!BI", first[0], len(body)) + body]
    mitm_out.sendall(b"".join(frames))
    with pytest.raises(ControlError) as err:
        for _ in frames:
            rx.receive()
    assert err.value.field in {"tag", "frame"}
    for c in (tx, rx):
        c.close()
    mitm_in.close()
    mitm_out.close()


@given(st.binary(min_size=1, max_size=64), st.binary(min_size=16, max_size=16))
def test_keys_depend_on_every_input(secret: bytes, nonce: bytes) -> None:
    base = session_keys(secret, nonce, nonce)
    flipped = bytes([nonce[0] ^ 1]) + nonce[1:]
    for other in (
        session_keys(secret + b"x", nonce, nonce),
        session_keys(secret, flipped, nonce),
        session_keys(secret, nonce, flipped),
    ):
        assert other.data_key != base.data_key and other.session != base.session
    assert len({base.data_key, base.sender_key[:32], base.receiver_key[:32]}) == 3


def test_load_secret_from_a_file_or_the_environment(tmp_path: Path) -> None:
    f = tmp_path / "key"
    f.write_text("s" * MIN_SECRET_BYTES + "\n")
    assert load_secret(f) == b"s" * MIN_SECRET_BYTES  # the final newline is not part of it
    assert load_secret(None, {"BLASTRATE_SECRET": "e" * 20}) == b"e" * 20
    assert load_secret(None, {}) is None
    f.write_text("short")
    with pytest.raises(SecretError) as err:
        load_secret(f)
    assert err.value.field == "--secret-file" and "at least 16" in err.value.reason
    with pytest.raises(SecretError) as err:
        load_secret(None, {"BLASTRATE_SECRET": "tiny"})
    assert err.value.field == "BLASTRATE_SECRET"
    with pytest.raises(SecretError) as err:
        load_secret(tmp_path / "missing")
    assert err.value.field == "--secret-file"
