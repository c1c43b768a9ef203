"""Stochastic Reward Net definitions: places, transitions, arcs and parameters.

A :class:`Net` is plain, immutable data.  It is compiled once (expressions parsed,
names checked) by :func:`srn.compile_net` and can then be solved for many parameter
values.  Expressions are strings in the grammar of :mod:`srn._expressions`, or numbers.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from .errors import LimitExceededError, NetDefinitionError

__all__ = ["Limits", "Net", "Place", "Transition", "immediate", "timed"]

ExpressionLike = float | int | str
"""A number, or an expression over ``#place`` markings and parameters."""

_NAME_CHARS = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_")


def _check_name(name: object, what: str, field_: str) -> str:
    if not isinstance(name, str) or not name:
        raise NetDefinitionError(f"{what} name must be a non-empty string", field=field_)
    if name[0].isdigit() or not set(name) <= _NAME_CHARS or len(name) > 128:
        raise NetDefinitionError(
            f"{what} name {name!r} must be 1-128 letters, digits or '_' and not start with a digit",
            field=field_,
        )
    return name


@dataclass(frozen=True)
class Limits:
    """Size limits that every model is held to.

    Attributes
    ----------
    max_states : int
        Tangible markings in the reachability graph.
    max_edges : int
        Entries of the CTMC edge list (timed firings, after vanishing elimination).
    max_transitions : int
        Transitions in the net.
    max_places : int
        Places in the net.
    max_expression_length : int
        Characters in one expression.
    max_vanishing_depth : int
        Immediate firings in a row before the engine gives up on a chain of vanishing markings.
    max_vanishing : int
        Distinct vanishing markings met (and eliminated) while exploring.  They cost
        time and memory like tangible ones, but are not in ``max_states``.

    Examples
    --------
    >>> Limits(max_states=50_000).max_states
    50000
    """

    max_states: int = 3_000_000
    max_edges: int = 60_000_000
    max_transitions: int = 1_000
    max_places: int = 1_000
    max_expression_length: int = 1_000
    max_vanishing_depth: int = 10_000
    max_vanishing: int = 200_000

    def exceeded(self, name: str, reached: int, what: str = "") -> LimitExceededError:
        """The error for limit ``name`` (a field of this class) reached at ``reached``.

        Parameters
        ----------
        name : str
            Field name, e.g. ``"max_states"``.
        reached : int
            The count when the engine stopped.
        what : str
            What was counted, e.g. ``"tangible markings"``.

        Returns
        -------
        LimitExceededError
            Its message names the field and how to raise it.
        """
        return LimitExceededError(
            name, int(getattr(self, name)), reached, what, hint=f"srn.Limits({name}=...)"
        )


@dataclass(frozen=True)
class Place:
    """A place and its initial number of tokens."""

    name: str
    tokens: int = 0


@dataclass(frozen=True)
class Transition:
    """A timed or immediate transition with its arcs.

    Attributes
    ----------
    name : str
        Unique name.
    kind : {"timed", "immediate"}
        Timed transitions fire after an exponential delay of the given ``rate`` (1/s).
        Immediate transitions fire in zero time, before any timed transition.
    rate : float or str
        Firing rate in events per second (timed only); may depend on the marking.
    weight : float or str
        Relative probability among enabled immediate transitions of equal priority.
    priority : int
        Immediate transitions of the highest priority enabled in a marking fire first.
    inputs, outputs, inhibitors : dict of str to (int or str)
        Arc multiplicities by place.  A multiplicity may be an expression of the
        marking; a multiplicity of zero removes the arc in that marking.
    guard : str or None
        Enabling function; the transition is enabled only where it is true.
    """

    name: str
    kind: Literal["timed", "immediate"] = "timed"
    rate: ExpressionLike = 1.0
    weight: ExpressionLike = 1.0
    priority: int = 1
    inputs: Mapping[str, ExpressionLike] = field(default_factory=dict)
    outputs: Mapping[str, ExpressionLike] = field(default_factory=dict)
    inhibitors: Mapping[str, ExpressionLike] = field(default_factory=dict)
    guard: str | None = None


def timed(
    name: str,
    rate: ExpressionLike,
    *,
    inputs: Mapping[str, ExpressionLike] | None = None,
    outputs: Mapping[str, ExpressionLike] | None = None,
    inhibitors: Mapping[str, ExpressionLike] | None = None,
    guard: str | None = None,
) -> Transition:
    """Make a timed transition.

    Parameters
    ----------
    name : str
        Transition name.
    rate : float or str
        Firing rate in events per second, or an expression such as ``"mu * #p"``.
    inputs, outputs, inhibitors : dict, optional
        Arc multiplicities by place name.
    guard : str, optional
        Enabling condition, e.g. ``"#p + #q < 3"``.

    Examples
    --------
    >>> t = timed("serve", "mu * min(1, #queue)", inputs={"queue": 1})
    """
    return Transition(
        name,
        "timed",
        rate=rate,
        inputs=dict(inputs or {}),
        outputs=dict(outputs or {}),
        inhibitors=dict(inhibitors or {}),
        guard=guard,
    )


def immediate(
    name: str,
    *,
    weight: ExpressionLike = 1.0,
    priority: int = 1,
    inputs: Mapping[str, ExpressionLike] | None = None,
    outputs: Mapping[str, ExpressionLike] | None = None,
    inhibitors: Mapping[str, ExpressionLike] | None = None,
    guard: str | None = None,
) -> Transition:
    """Make an immediate transition.

    Parameters
    ----------
    name : str
        Transition name.
    weight : float or str
        Relative firing probability among the enabled immediate transitions of the
        same (highest) priority.
    priority : int
        Larger fires first.
    inputs, outputs, inhibitors : dict, optional
        Arc multiplicities by place name.
    guard : str, optional
        Enabling condition.
    """
    return Transition(
        name,
        "immediate",
        weight=weight,
        priority=priority,
        inputs=dict(inputs or {}),
        outputs=dict(outputs or {}),
        inhibitors=dict(inhibitors or {}),
        guard=guard,
    )


@dataclass(frozen=True)
class Net:
    """A Stochastic Reward Net.

    Parameters
    ----------
    places : dict of str to int, or iterable of Place
        Places with their initial tokens.
    transitions : iterable of Transition
        Timed and immediate transitions (see :func:`timed`, :func:`immediate`).
    parameters : dict of str to float, optional
        Named parameters with default values; expressions may use them by name, and
        a compiled net is re-solved for new values without being rebuilt.

    Examples
    --------
    >>> net = Net(
    ...     places={"up": 1, "down": 0},
    ...     transitions=[
    ...         timed("fail", "lam", inputs={"up": 1}, outputs={"down": 1}),
    ...         timed("repair", 2.0, inputs={"down": 1}, outputs={"up": 1}),
    ...     ],
    ...     parameters={"lam": 0.5},
    ... )
    """

    places: tuple[Place, ...]
    transitions: tuple[Transition, ...]
    parameters: Mapping[str, float]

    def __init__(
        self,
        places: Mapping[str, int] | Iterable[Place],
        transitions: Iterable[Transition],
        parameters: Mapping[str, float] | None = None,
    ) -> None:
        if isinstance(places, Mapping):
            place_list = tuple(Place(str(k), v) for k, v in places.items())
        else:
            place_list = tuple(places)
        object.__setattr__(self, "places", place_list)
        object.__setattr__(self, "transitions", tuple(transitions))
        object.__setattr__(self, "parameters", dict(parameters or {}))
        self._validate()

    def _validate(self) -> None:
        seen: set[str] = set()
        for i, place in enumerate(self.places):
            if not isinstance(place, Place):
                raise NetDefinitionError("places must be Place objects", field=f"places[{i}]")
            _check_name(place.name, "place", f"places.{place.name}")
            if place.name in seen:
                raise NetDefinitionError(
                    f"duplicate place {place.name!r}", field=f"places.{place.name}"
                )
            seen.add(place.name)
            tokens = place.tokens
            if isinstance(tokens, bool) or not isinstance(tokens, int) or tokens < 0:
                raise NetDefinitionError(
                    f"initial tokens of place {place.name!r} must be a non-negative integer, "
                    f"got {tokens!r}",
                    field=f"places.{place.name}.tokens",
                )
        names: set[str] = set()
        for i, t in enumerate(self.transitions):
            if not isinstance(t, Transition):
                raise NetDefinitionError(
                    "transitions must be Transition objects", field=f"transitions[{i}]"
                )
            _check_name(t.name, "transition", f"transitions.{t.name}")
            if t.name in names:
                raise NetDefinitionError(
                    f"duplicate transition {t.name!r}", field=f"transitions.{t.name}"
                )
            names.add(t.name)
            if t.kind not in ("timed", "immediate"):
                raise NetDefinitionError(
                    f"transition kind must be 'timed' or 'immediate', got {t.kind!r}",
                    field=f"transitions.{t.name}.kind",
                )
            if isinstance(t.priority, bool) or not isinstance(t.priority, int):
                raise NetDefinitionError(
                    "priority must be an integer", field=f"transitions.{t.name}.priority"
                )
            for arcs, label in (
                (t.inputs, "inputs"),
                (t.outputs, "outputs"),
                (t.inhibitors, "inhibitors"),
            ):
                for place_name, mult in arcs.items():
                    where = f"transitions.{t.name}.{label}.{place_name}"
                    if place_name not in seen:
                        raise NetDefinitionError(
                            f"transition {t.name!r} has an arc to unknown place {place_name!r}",
                            field=where,
                        )
                    if isinstance(mult, bool) or not isinstance(mult, int | float | str):
                        raise NetDefinitionError(
                            "arc multiplicity must be an integer or an expression", field=where
                        )
                    if isinstance(mult, int | float) and (
                        not math.isfinite(mult) or mult < 0 or mult != int(mult)
                    ):
                        raise NetDefinitionError(
                            f"arc multiplicity must be a non-negative integer, got {mult!r}",
                            field=where,
                        )
        for name, value in self.parameters.items():
            _check_name(name, "parameter", f"parameters.{name}")
            if (
                isinstance(value, bool)
                or not isinstance(value, int | float)
                or not math.isfinite(value)
            ):
                raise NetDefinitionError(
                    f"parameter {name!r} must be a finite number, got {value!r}",
                    field=f"parameters.{name}",
                )

    # -- JSON round trip ------------------------------------------------------
    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Net:
        """Build a net from its JSON form (see :meth:`to_dict`).

        Raises
        ------
        NetDefinitionError
            If the structure is not a valid net description.
        """
        if not isinstance(data, Mapping):
            raise NetDefinitionError("a net must be a JSON object")
        places = data.get("places", {})
        if isinstance(places, Mapping):
            place_objs = [Place(str(k), v) for k, v in places.items()]
        elif isinstance(places, list):
            place_objs = []
            for i, p in enumerate(places):
                if not isinstance(p, Mapping) or "name" not in p:
                    raise NetDefinitionError(
                        "each place needs a 'name' (and optional 'tokens')", field=f"places[{i}]"
                    )
                place_objs.append(Place(p["name"], p.get("tokens", 0)))
        else:
            raise NetDefinitionError("'places' must be an object or a list", field="places")
        transition_items = data.get("transitions", [])
        if not isinstance(transition_items, list | tuple):
            raise NetDefinitionError("'transitions' must be a list", field="transitions")
        transitions = []
        for i, t in enumerate(transition_items):
            if not isinstance(t, Mapping) or "name" not in t:
                raise NetDefinitionError(
                    "each transition needs a 'name'", field=f"transitions[{i}]"
                )
            allowed = {
                "name",
                "kind",
                "rate",
                "weight",
                "priority",
                "inputs",
                "outputs",
                "inhibitors",
                "guard",
            }
            unknown = set(t) - allowed
            if unknown:
                raise NetDefinitionError(
                    f"unknown transition field(s) {sorted(unknown)}", field=f"transitions[{i}]"
                )
            arcs = {}
            for label in ("inputs", "outputs", "inhibitors"):
                value = t.get(label, {}) or {}
                if not isinstance(value, Mapping):
                    raise NetDefinitionError(
                        f"'{label}' must map place names to multiplicities",
                        field=f"transitions[{i}].{label}",
                    )
                arcs[label] = dict(value)
            transitions.append(
                Transition(
                    name=t["name"],
                    kind=t.get("kind", "timed"),
                    rate=t.get("rate", 1.0),
                    weight=t.get("weight", 1.0),
                    priority=t.get("priority", 1),
                    guard=t.get("guard"),
                    **arcs,
                )
            )
        params = data.get("parameters", {}) or {}
        if not isinstance(params, Mapping):
            raise NetDefinitionError("'parameters' must be an object", field="parameters")
        return cls(place_objs, transitions, params)

    def to_dict(self) -> dict[str, Any]:
        """The JSON form of the net, accepted by :meth:`from_dict`."""
        transitions = []
        for t in self.transitions:
            item: dict[str, Any] = {"name": t.name, "kind": t.kind}
            if t.kind == "timed":
                item["rate"] = t.rate
            else:
                item["weight"] = t.weight
                item["priority"] = t.priority
            for label in ("inputs", "outputs", "inhibitors"):
                arcs = getattr(t, label)
                if arcs:
                    item[label] = dict(arcs)
            if t.guard is not None:
                item["guard"] = t.guard
            transitions.append(item)
        return {
            "places": {p.name: p.tokens for p in self.places},
            "transitions": transitions,
            "parameters": dict(self.parameters),
        }
