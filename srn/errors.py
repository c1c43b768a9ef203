"""Exceptions raised by the SRN engine.

Every exception derives from :class:`SRNError`, itself a :class:`ValueError`, so a
caller that only wants "the model is wrong" can catch one type.  Each carries
structured attributes (the transition, the marking, the limit) so that the HTTP
layer can name the offending field without parsing messages.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

__all__ = [
    "AbsorptionError",
    "ConvergenceError",
    "EvaluationError",
    "ExpressionError",
    "LimitExceededError",
    "NetDefinitionError",
    "NotErgodicError",
    "SRNError",
    "VanishingLoopError",
]


class SRNError(ValueError):
    """Base class of every error the engine reports about a model."""

    #: Dotted location of the offending item, e.g. ``"transitions.t1.rate"``.
    field: str | None = None

    def __init__(self, message: str, *, field: str | None = None) -> None:
        super().__init__(message)
        self.field = field


class NetDefinitionError(SRNError):
    """The net is malformed: an unknown place, a negative multiplicity, a duplicate name."""


class ExpressionError(SRNError):
    """An expression cannot be parsed, or uses a name or construct that is not allowed.

    Attributes
    ----------
    text : str
        The expression text.
    position : int or None
        Zero-based character offset of the problem, when known.
    """

    def __init__(
        self,
        message: str,
        *,
        text: str = "",
        position: int | None = None,
        field: str | None = None,
    ) -> None:
        where = f" at position {position}" if position is not None else ""
        super().__init__(f"{message}{where} in expression {text!r}", field=field)
        self.text = text
        self.position = position
        self.reason = message


class EvaluationError(SRNError):
    """An expression gave an invalid value at a reachable marking.

    Attributes
    ----------
    transition : str or None
        Name of the transition whose expression failed.
    marking : dict of str to int
        The marking at which it failed.
    """

    def __init__(
        self,
        message: str,
        *,
        transition: str | None = None,
        marking: Mapping[str, int] | None = None,
        field: str | None = None,
    ) -> None:
        self.transition = transition
        self.marking = dict(marking) if marking is not None else {}
        parts = [message]
        if transition is not None:
            parts.append(f"transition {transition!r}")
        if marking is not None:
            parts.append(f"marking {self.marking}")
        super().__init__("; ".join(parts), field=field)


class LimitExceededError(SRNError):
    """A model exceeds one of the configured size limits.

    Attributes
    ----------
    limit : str
        Name of the limit, e.g. ``"max_states"``.
    maximum : int
        The configured value of the limit.
    reached : int
        The count that was reached when the engine stopped.  Exploration stops as
        soon as the count passes the limit, so for ``max_states`` and
        ``max_vanishing`` this is ``maximum + 1``: "more than the limit".
    hint : str or None
        How to raise the limit (for example ``"srn.Limits(max_states=...)"``), when
        it is a setting of the engine.
    summary : str
        The message without that hint, for a program that offers its own way to raise
        the limit (a service setting, a command-line option).
    """

    def __init__(
        self, limit: str, maximum: int, reached: int, what: str = "", *, hint: str | None = None
    ) -> None:
        self.limit = limit
        self.maximum = maximum
        self.reached = reached
        self.hint = hint
        detail = f" ({what})" if what else ""
        self.summary = f"limit {limit}={maximum} exceeded: reached {reached}{detail}"
        advice = f"; to allow more, raise it with {hint}" if hint else ""
        super().__init__(self.summary + advice, field=limit)


class VanishingLoopError(SRNError):
    """Immediate transitions can fire forever without reaching a tangible marking.

    Attributes
    ----------
    markings : list of dict
        Vanishing markings that lie on the loop (a sample when it is large).
    """

    def __init__(self, markings: Sequence[Mapping[str, int]]) -> None:
        self.markings = [dict(m) for m in markings]
        super().__init__(
            "loop of vanishing markings: immediate transitions can fire forever; "
            f"markings on the loop include {self.markings[:5]}"
        )


class NotErgodicError(SRNError):
    """The CTMC has more than one closed communicating class, so no unique steady state exists.

    Attributes
    ----------
    classes : list of numpy.ndarray
        The closed (recurrent) classes, as arrays of state indices.
    """

    def __init__(self, classes: Sequence[Any], message: str | None = None) -> None:
        self.classes = list(classes)
        sizes = [len(c) for c in self.classes]
        super().__init__(
            message
            or (
                f"the CTMC is not ergodic: it has {len(self.classes)} closed classes "
                f"of sizes {sizes[:10]}; the steady state depends on the initial marking "
                "(ask for the transient solution at chosen times, or the time to "
                "absorption, instead)"
            )
        )


class ConvergenceError(SRNError):
    """No steady-state route reached the residual target within its budgets.

    Attributes
    ----------
    attempts : list
        Every route tried, as :class:`srn.SolverAttempt` records (method, residual
        reached, iterations, seconds, note), in the order tried.
    best_residual : float
        The smallest residual ``||pi Q||_1`` any route reached (``inf`` if none
        produced a usable vector).
    target : float
        The residual that was asked for.
    """

    def __init__(self, attempts: Sequence[Any], target: float) -> None:
        self.attempts = list(attempts)
        self.target = target
        self.best_residual = min((a.residual for a in self.attempts), default=float("inf"))
        tried = "; ".join(
            f"{a.method}: residual {a.residual:.3g} after {a.iterations} iterations"
            + (f" ({a.note})" if a.note else "")
            for a in self.attempts
        )
        super().__init__(
            f"no steady-state solver reached the residual target {target:.3g}; best residual "
            f"{self.best_residual:.3g}; tried {tried}",
            field="method",
        )


class AbsorptionError(SRNError):
    """Time to absorption is undefined: absorption is not certain, or nothing absorbs."""
