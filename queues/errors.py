"""Exceptions raised by the NIC queue solvers.

Every error derives from :class:`ValueError`, so ``except ValueError`` is enough for a
caller that only wants "the parameters are wrong"; :class:`QueueParameterError` also
carries the offending parameter's name in :attr:`QueueParameterError.parameter`, so the
HTTP layer can point at the field without parsing the message.
"""

from __future__ import annotations

__all__ = ["QueueParameterError"]


class QueueParameterError(ValueError):
    """A queue parameter is out of range, of the wrong type or inconsistent with another.

    Attributes
    ----------
    parameter : str
        Name of the offending keyword argument, e.g. ``"capacity"`` or ``"phase_type"``.
    """

    def __init__(self, parameter: str, reason: str) -> None:
        super().__init__(f"{parameter}: {reason}")
        self.parameter = parameter
