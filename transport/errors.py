"""Exceptions raised by the transfer-time model and the bottleneck-rate search.

Every error derives from :class:`ValueError`, so ``except ValueError`` is enough for a
caller that only wants "the parameters are wrong"; :class:`TransportParameterError` also
carries the offending parameter's name in :attr:`TransportParameterError.parameter`, so
the HTTP layer can point at the field without parsing the message.
"""

from __future__ import annotations

from .curve import TransferCurve

__all__ = ["NoCompletingRateError", "TransportParameterError"]


class TransportParameterError(ValueError):
    """A transfer parameter is out of range, of the wrong type or inconsistent.

    Attributes
    ----------
    parameter : str
        Name of the offending argument, e.g. ``"file_size_bytes"`` or ``"loss"``.
    """

    def __init__(self, parameter: str, reason: str) -> None:
        super().__init__(f"{parameter}: {reason}")
        self.parameter = parameter


class NoCompletingRateError(TransportParameterError):
    """No sending rate in the scanned interval lets the transfer complete (loss >= 1).

    The search reports this plainly instead of returning a rate whose transfer time would
    be infinite (SPEC section 4: never report a transfer that never finishes as a number).
    The scanned curve is attached so that a caller can still plot it.

    Attributes
    ----------
    parameter : str
        Always ``"loss"``: the loss function is what rules every rate out.
    curve : TransferCurve
        The scanned curve; its ``completes`` mask is all False.
    """

    def __init__(self, reason: str, curve: TransferCurve) -> None:
        super().__init__("loss", reason)
        self.curve = curve
