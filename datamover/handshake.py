"""Who may send: a shared secret, proved both ways, and the keys of one session.

Both ends hold the same secret (a file, or the ``BLASTRATE_SECRET`` environment variable).
The receiver opens with a challenge, a fresh random nonce; the sender answers with its
own nonce and an HMAC-SHA256 proof over both; the receiver checks it and answers with
its own proof, which the sender checks in turn.  Nothing secret crosses the wire, a
recorded exchange cannot be replayed (the other side's nonce is fresh), and neither side
talks to an impostor: a receiver that does not hold the secret cannot answer, so a
sender never sends a file to it.

Both ends then derive the session's keys from the secret and the two nonces
(:func:`session_keys`): one key per direction for the control channel's frame tags
(:meth:`datamover.control.ControlChannel.protect`), one for the data datagrams'
tags (:class:`datamover.wire.DatagramCodec`), and the 64-bit session id the datagrams
carry.

What the secret protects: who may write into the receiver's directory, and the
integrity of every control frame and datagram.  What it does not: confidentiality.
The file crosses the network in clear; encrypt it first, or use a VPN, if others can
read the path.

``insecure`` mode (``--insecure``) runs the same exchange with an empty secret, which
anyone can compute: the tags then catch accidents, not attackers.  A sender that holds a
secret refuses a receiver that runs insecure, since such a receiver cannot prove who it
is.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import hmac
import os
import re
import secrets
import struct
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from .control import ControlChannel, ControlError, MessageKind
from .wire import KEY_BYTES

__all__ = [
    "MIN_SECRET_BYTES",
    "PROTOCOL_VERSION",
    "SECRET_ENV",
    "SecretError",
    "SessionKeys",
    "answer_challenge",
    "challenge",
    "load_secret",
    "new_secret",
    "session_keys",
    "stretched_key",
]

#: The environment variable that holds the secret when no file is named.
SECRET_ENV = "BLASTRATE_SECRET"
#: Shortest secret accepted (bytes): 128 bits if it is random.
MIN_SECRET_BYTES = 16
#: Longest secret file read (bytes).
_MAX_SECRET_BYTES = 4096
#: The protocol version both the handshake and the HELLO carry.
PROTOCOL_VERSION = 2
_NONCE_BYTES = 16
_HEX_NONCE = re.compile(rf"[0-9a-f]{{{2 * _NONCE_BYTES}}}")
_HEX_PROOF = re.compile(r"[0-9a-f]{64}")


class SecretError(ValueError):
    """The secret could not be read or is too weak.

    Attributes
    ----------
    field : str
        Where it came from, as the user typed it: ``"--secret-file"`` or
        ``"BLASTRATE_SECRET"``.
    """

    def __init__(self, field: str, reason: str) -> None:
        super().__init__(f"{field}: {reason}")
        self.field = field
        self.reason = reason


def new_secret() -> str:
    """A fresh random secret: 32 bytes, URL-safe base64 (43 characters)."""
    return secrets.token_urlsafe(32)


def _checked(secret: bytes, field: str) -> bytes:
    secret = secret.strip()
    if len(secret) < MIN_SECRET_BYTES:
        raise SecretError(
            field,
            f"the secret is {len(secret)} bytes; at least {MIN_SECRET_BYTES} are needed "
            "(make one with: python3 -c 'import secrets; print(secrets.token_urlsafe(32))')",
        )
    return secret


def load_secret(
    path: str | Path | None = None, environ: Mapping[str, str] | None = None
) -> bytes | None:
    """The shared secret from ``path``, else from ``$BLASTRATE_SECRET``, else None.

    Surrounding white space (a file's final newline) is not part of the secret.

    Raises
    ------
    SecretError
        If the file cannot be read, is over 4 KiB, or the secret is shorter than
        :data:`MIN_SECRET_BYTES` bytes.
    """
    if path is not None:
        try:
            with open(path, "rb") as f:
                raw = f.read(_MAX_SECRET_BYTES + 1)
        except OSError as exc:
            raise SecretError(
                "--secret-file", f"cannot read {str(path)!r}: {exc.strerror}"
            ) from None
        if len(raw) > _MAX_SECRET_BYTES:
            raise SecretError("--secret-file", f"is over {_MAX_SECRET_BYTES} bytes")
        return _checked(raw, "--secret-file")
    value = (os.environ if environ is None else environ).get(SECRET_ENV)
    if value is None:
        return None
    return _checked(value.encode(), SECRET_ENV)


@dataclass(frozen=True)
class SessionKeys:
    """The keys of one authenticated session.

    Attributes
    ----------
    session : int
        64-bit session id that every data datagram carries.
    data_key : bytes
        Key of the datagrams' tags (:data:`datamover.wire.KEY_BYTES` bytes).
    sender_key, receiver_key : bytes
        Keys of the control frames each side sends (32 bytes each).
    """

    session: int
    data_key: bytes
    sender_key: bytes
    receiver_key: bytes


@functools.lru_cache(maxsize=8)
def stretched_key(secret: bytes | None) -> bytes:
    """The key both ends derive everything from: the secret through scrypt (N = 2**14,
    r = 8; about 50 ms and 16 MiB, once per process and secret), so that a captured
    handshake costs an offline guesser that much per guess of a weak secret.  Insecure
    mode: empty."""
    if secret is None:
        return b""
    return hashlib.scrypt(secret, salt=b"blastrate/2 secret", n=2**14, r=8, p=1, dklen=32)


def _mac(key: bytes, label: bytes, *parts: bytes) -> bytes:
    return hmac.new(key, b"blastrate/2 " + label + b"".join(parts), hashlib.sha256).digest()


def session_keys(secret: bytes, receiver_nonce: bytes, sender_nonce: bytes) -> SessionKeys:
    """Derive a session's keys from the secret and both nonces (HMAC-SHA256 as a KDF).

    Examples
    --------
    >>> a = session_keys(b"s" * 16, bytes(16), bytes(16))
    >>> b = session_keys(b"s" * 16, bytes(16), b"\\x01" + bytes(15))
    >>> a.session != b.session and a.data_key != b.data_key
    True
    """
    master = _mac(secret, b"session", receiver_nonce, sender_nonce)
    (session,) = struct.unpack("!Q", _mac(master, b"session id")[:8])
    return SessionKeys(
        session=session,
        data_key=_mac(master, b"data")[:KEY_BYTES],
        sender_key=_mac(master, b"control sender"),
        receiver_key=_mac(master, b"control receiver"),
    )


def _nonce(body: dict[str, object], field: str = "nonce") -> bytes:
    value = body.get(field)
    if not isinstance(value, str) or _HEX_NONCE.fullmatch(value) is None:
        raise ControlError("handshake", f"{field} must be {2 * _NONCE_BYTES} lower-case hex digits")
    return bytes.fromhex(value)


def challenge(channel: ControlChannel, secret: bytes | None) -> SessionKeys:
    """The receiver's side: challenge the peer, check its proof, prove the secret back.

    Parameters
    ----------
    channel : ControlChannel
        A fresh connection; its ``timeout_s`` bounds each message of the exchange.
    secret : bytes or None
        The shared secret; None = insecure mode (anyone passes).

    Returns
    -------
    SessionKeys
        The session's keys; the channel is protected from here on.

    Raises
    ------
    ControlError
        Field ``"secret"`` if the peer's proof is wrong (the peer is told), else
        whatever broke the exchange (``"handshake"``, ``"timeout_s"``, ...).
    """
    receiver_nonce = secrets.token_bytes(_NONCE_BYTES)
    channel.send_json(
        MessageKind.CHALLENGE,
        {
            "version": PROTOCOL_VERSION,
            "nonce": receiver_nonce.hex(),
            "auth": "none" if secret is None else "secret",
        },
    )
    # An ERROR from a peer that has not authenticated is not repeated: its words would
    # reach the receiver's log as if they meant something.
    kind, auth = channel.expect_json(MessageKind.AUTH, MessageKind.ERROR)
    if kind is MessageKind.ERROR:
        raise ControlError("handshake", "the peer sent an error instead of authenticating")
    if auth.get("version") != PROTOCOL_VERSION:
        raise ControlError("version", f"unsupported protocol version {auth.get('version')!r}")
    sender_nonce = _nonce(auth)
    proof = auth.get("proof")
    key = stretched_key(secret)
    expected = _mac(key, b"sender proof", receiver_nonce, sender_nonce)
    if (
        not isinstance(proof, str)
        or _HEX_PROOF.fullmatch(proof) is None
        or not hmac.compare_digest(bytes.fromhex(proof), expected)
    ):
        reason = "authentication failed: the sender does not hold this receiver's secret"
        with contextlib.suppress(ControlError):
            channel.send_json(MessageKind.ERROR, {"field": "secret", "reason": reason})
        raise ControlError("secret", reason)
    channel.send_json(
        MessageKind.AUTH_OK,
        {"proof": _mac(key, b"receiver proof", receiver_nonce, sender_nonce).hex()},
    )
    keys = session_keys(key, receiver_nonce, sender_nonce)
    channel.protect(send_key=keys.receiver_key, receive_key=keys.sender_key)
    return keys


def answer_challenge(channel: ControlChannel, secret: bytes | None) -> SessionKeys:
    """The sender's side: answer the receiver's challenge and check its proof.

    Parameters
    ----------
    channel : ControlChannel
        A fresh connection to the receiver.
    secret : bytes or None
        The shared secret; None = insecure mode, accepted only by a receiver that also
        runs insecure.

    Returns
    -------
    SessionKeys
        The session's keys; the channel is protected from here on.

    Raises
    ------
    ControlError
        Field ``"secret"`` if the receiver refused the proof, cannot prove the secret
        itself, or the two ends disagree on whether there is one.
    """
    _, offer = channel.expect_json(MessageKind.CHALLENGE)
    if offer.get("version") != PROTOCOL_VERSION:
        raise ControlError(
            "version",
            f"the receiver speaks protocol version {offer.get('version')!r}, "
            f"this sender {PROTOCOL_VERSION}",
        )
    receiver_nonce = _nonce(offer)
    mode = offer.get("auth")
    if mode not in ("none", "secret"):
        raise ControlError("handshake", f"unknown authentication mode {mode!r}")
    if mode == "secret" and secret is None:
        raise ControlError(
            "secret",
            "the receiver requires a shared secret: give --secret-file PATH or set "
            f"{SECRET_ENV} (a receiver started without one printed it)",
        )
    if mode == "none" and secret is not None:
        raise ControlError(
            "secret",
            "the receiver runs --insecure and cannot prove who it is; not sending to it "
            "with a secret (use --insecure on both ends, or a secret on both)",
        )
    key = stretched_key(secret)
    sender_nonce = secrets.token_bytes(_NONCE_BYTES)
    channel.send_json(
        MessageKind.AUTH,
        {
            "version": PROTOCOL_VERSION,
            "nonce": sender_nonce.hex(),
            "proof": _mac(key, b"sender proof", receiver_nonce, sender_nonce).hex(),
        },
    )
    _, ok = channel.expect_json(MessageKind.AUTH_OK)
    proof = ok.get("proof")
    expected = _mac(key, b"receiver proof", receiver_nonce, sender_nonce)
    if (
        not isinstance(proof, str)
        or _HEX_PROOF.fullmatch(proof) is None
        or not hmac.compare_digest(bytes.fromhex(proof), expected)
    ):
        raise ControlError("secret", "the receiver could not prove that it holds the secret")
    keys = session_keys(key, receiver_nonce, sender_nonce)
    channel.protect(send_key=keys.sender_key, receive_key=keys.receiver_key)
    return keys
