"""Move a real file with RBUDP: UDP blasts, a TCP control channel, SHA-256 at the end.

The data mover acts on what :mod:`transport` predicts: a receiver advises the rate from
its own host (:mod:`datamover.advice`), a sender blasts at it.  Both ends share a
secret; the receiver accepts only senders that prove they hold it
(:mod:`datamover.handshake`), and every control frame and datagram carries a tag keyed
from the session::

    from datamover import Receiver, load_secret, send_file

    secret = load_secret("blastrate.key")          # or $BLASTRATE_SECRET
    with Receiver("incoming/", secret=secret, host="0.0.0.0", port=9000) as rx:
        rx.serve()                                  # until rx.close(); serve_one() for one
    send_file("data.bin", "receiver.example", 9000, rate_bps=800e6, secret=secret)

Modules: :mod:`~datamover.wire` (the datagram), :mod:`~datamover.control` (framed
control messages), :mod:`~datamover.handshake` (the secret, proved both ways),
:mod:`~datamover.sender`, :mod:`~datamover.receiver`, :mod:`~datamover.receive_path` (one
wake-up of the receiver, also what the calibration measures),
:mod:`~datamover.running_digest` (the file's SHA-256 while it arrives),
:mod:`~datamover.advice` (the receiver's rate advice) and
:mod:`~datamover.advice_keeper` (that advice kept ready in the background).  The
advice modules load the models (:mod:`host`, :mod:`transport`) and are imported on first
use, so that moving a file starts in a fraction of a second.
"""

from typing import TYPE_CHECKING, Any

from .control import ControlError
from .handshake import (
    MIN_SECRET_BYTES,
    SECRET_ENV,
    SecretError,
    SessionKeys,
    load_secret,
    new_secret,
)
from .receiver import (
    DeterministicDrop,
    ReceiveError,
    Receiver,
    ReceiveReport,
    ReceiverLimits,
    ServeSummary,
    remove_stale_partials,
    safe_file_name,
)
from .sender import RoundReport, SendError, SendReport, send_file, tcp_round_trip_s
from .wire import HEADER_BYTES, DatagramCodec, WireError

__all__ = [
    "HEADER_BYTES",
    "MIN_SECRET_BYTES",
    "SECRET_ENV",
    "AdviceError",
    "ControlError",
    "DatagramCodec",
    "DeterministicDrop",
    "RateAdvice",
    "ReceiveError",
    "ReceiveReport",
    "Receiver",
    "ReceiverAdvisor",
    "ReceiverLimits",
    "RoundReport",
    "SecretError",
    "SendError",
    "SendReport",
    "ServeSummary",
    "SessionKeys",
    "WireError",
    "load_secret",
    "new_secret",
    "parse_advice_request",
    "remove_stale_partials",
    "safe_file_name",
    "send_file",
    "tcp_round_trip_s",
]

if TYPE_CHECKING:
    from .advice import AdviceError, RateAdvice, ReceiverAdvisor, parse_advice_request

_ADVICE = ("AdviceError", "RateAdvice", "ReceiverAdvisor", "parse_advice_request")


def __getattr__(name: str) -> Any:
    # The advice brings in the models and their compiled kernels (about a second):
    # loaded when first asked for, not by every sender.
    if name in _ADVICE:
        from . import advice

        return getattr(advice, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
