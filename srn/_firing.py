"""The firing rules of a net, compiled for evaluation over many markings at once.

This is the lowest layer of the engine above the net definition: it parses every
expression once and answers, for a whole array of markings, which transitions are
enabled and what firing them gives.  Exploration (:mod:`srn.reachability`) builds on
it, and :class:`srn.CompiledNet` (in :mod:`srn._compiled`) adds the graph cache on top,
so imports run one way: ``net -> _firing -> reachability -> _compiled``.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import NDArray

from ._expressions import Columns, Expression, RowError, compile_expression
from .errors import EvaluationError, NetDefinitionError
from .net import Limits, Net

__all__ = ["MARKING_DTYPE", "FiringRules"]

MARKING_DTYPE = np.int32
_MARKING_MAX = np.iinfo(MARKING_DTYPE).max


@dataclass(frozen=True)
class _Arc:
    place: int
    constant: int | None
    expression: Expression | None


@dataclass(frozen=True)
class _CompiledTransition:
    name: str
    index: int
    timed: bool
    rate: Expression
    weight: Expression
    priority: int
    inputs: tuple[_Arc, ...]
    outputs: tuple[_Arc, ...]
    inhibitors: tuple[_Arc, ...]
    guard: Expression | None
    # Token change when every arc multiplicity is a constant; None otherwise.
    delta: NDArray[np.int64] | None


class FiringRules:
    """A net whose expressions are parsed and checked, evaluated a batch of markings at a time.

    Semantics (those of SPNP): a transition is enabled in a marking when every input
    place holds at least the input multiplicity, every inhibitor place holds fewer
    tokens than a non-zero inhibitor multiplicity, and its guard is true; a *timed*
    transition must moreover have a positive rate there: a rate that evaluates to 0
    disables it, so it neither fires nor keeps the marking from being dead.

    Attributes
    ----------
    net : Net
        The source net.
    limits : Limits
        The size limits in force.
    place_names : tuple of str
        Place names in column order of every marking array.
    transition_names : tuple of str
        Transition names in index order.
    structural_parameters : frozenset of str
        Parameters that change the reachability graph itself (read by arc
        multiplicities, guards and immediate weights).
    rate_parameters : frozenset of str
        Parameters read by rates; they change the graph only where a rate is 0.
    """

    def __init__(self, net: Net, limits: Limits | None = None) -> None:
        self.net = net
        self.limits = limits or Limits()
        if len(net.places) > self.limits.max_places:
            raise self.limits.exceeded("max_places", len(net.places), "places")
        if len(net.transitions) > self.limits.max_transitions:
            raise self.limits.exceeded("max_transitions", len(net.transitions), "transitions")
        self.place_names = tuple(p.name for p in net.places)
        self.place_index = {name: i for i, name in enumerate(self.place_names)}
        self.initial_marking = np.array([p.tokens for p in net.places], dtype=np.int64)
        if np.any(self.initial_marking > _MARKING_MAX):
            raise NetDefinitionError(f"initial tokens exceed {_MARKING_MAX}", field="places")
        self.transition_names = tuple(t.name for t in net.transitions)
        self.transitions = tuple(self._compile(i) for i in range(len(net.transitions)))
        self.timed = tuple(t for t in self.transitions if t.timed)
        self.immediate = tuple(t for t in self.transitions if not t.timed)
        structural: set[str] = set()
        rate_params: set[str] = set()
        for t in self.transitions:
            exprs = [a.expression for a in (*t.inputs, *t.outputs, *t.inhibitors)]
            exprs.append(t.guard)
            if not t.timed:
                exprs.append(t.weight)
            for e in exprs:
                if e is not None:
                    structural |= e.parameters
            rate_params |= t.rate.parameters
        self.structural_parameters = frozenset(structural)
        self.rate_parameters = frozenset(rate_params)

    # -- compilation -------------------------------------------------------
    def _expr(self, source: Any, field: str) -> Expression:
        return compile_expression(
            source,
            places=self.place_index,
            parameters=self.net.parameters,
            max_length=self.limits.max_expression_length,
            field=field,
        )

    def _arcs(self, arcs: Mapping[str, Any], tname: str, label: str) -> tuple[_Arc, ...]:
        out = []
        for place, mult in arcs.items():
            field = f"transitions.{tname}.{label}.{place}"
            expr = self._expr(mult, field)
            if expr.constant is not None:
                value = expr.constant
                if not math.isfinite(value) or value < 0 or value != int(value):
                    raise NetDefinitionError(
                        f"arc multiplicity must be a non-negative integer, got {value!r}",
                        field=field,
                    )
                if value > _MARKING_MAX:
                    raise NetDefinitionError(
                        f"arc multiplicity exceeds {_MARKING_MAX}", field=field
                    )
                out.append(_Arc(self.place_index[place], int(value), None))
            else:
                out.append(_Arc(self.place_index[place], None, expr))
        return tuple(out)

    def _compile(self, i: int) -> _CompiledTransition:
        t = self.net.transitions[i]
        prefix = f"transitions.{t.name}"
        inputs = self._arcs(t.inputs, t.name, "inputs")
        outputs = self._arcs(t.outputs, t.name, "outputs")
        inhibitors = self._arcs(t.inhibitors, t.name, "inhibitors")
        rate = self._expr(t.rate if t.kind == "timed" else 0.0, f"{prefix}.rate")
        weight = self._expr(t.weight if t.kind == "immediate" else 1.0, f"{prefix}.weight")
        for expr, what in ((rate, "rate"), (weight, "weight")):
            if expr.constant is not None and not 0 <= expr.constant < math.inf:
                raise NetDefinitionError(
                    f"{what} of transition {t.name!r} must be finite and non-negative, "
                    f"got {expr.constant}",
                    field=f"{prefix}.{what}",
                )
        guard = None if t.guard is None else self._expr(t.guard, f"{prefix}.guard")
        delta: NDArray[np.int64] | None = None
        if all(a.constant is not None for a in (*inputs, *outputs)):
            delta = np.zeros(len(self.place_names), dtype=np.int64)
            for a in inputs:
                delta[a.place] -= a.constant or 0
            for a in outputs:
                delta[a.place] += a.constant or 0
        return _CompiledTransition(
            t.name,
            i,
            t.kind == "timed",
            rate,
            weight,
            t.priority,
            inputs,
            outputs,
            inhibitors,
            guard,
            delta,
        )

    # -- parameters ----------------------------------------------------------
    def parameters_with(self, overrides: Mapping[str, float] | None = None) -> dict[str, float]:
        """The net's parameter values with ``overrides`` applied and checked.

        Raises
        ------
        NetDefinitionError
            If an override names an unknown parameter or is not a finite number.
        """
        values = {k: float(v) for k, v in self.net.parameters.items()}
        for name, value in (overrides or {}).items():
            if name not in values:
                raise NetDefinitionError(
                    f"unknown parameter {name!r}; the net defines {sorted(values)}",
                    field=f"parameters.{name}",
                )
            if isinstance(value, bool) or not isinstance(value, int | float):
                raise NetDefinitionError(
                    f"parameter {name!r} must be a number", field=f"parameters.{name}"
                )
            if not math.isfinite(value):
                raise NetDefinitionError(
                    f"parameter {name!r} must be finite", field=f"parameters.{name}"
                )
            values[name] = float(value)
        return values

    # -- batch semantics -----------------------------------------------------
    def marking_dict(self, marking: NDArray[Any]) -> dict[str, int]:
        """A marking as ``{place: tokens}``."""
        return {name: int(v) for name, v in zip(self.place_names, marking, strict=True)}

    def _values(
        self,
        expr: Expression,
        markings: NDArray[Any],
        rows: NDArray[np.intp] | None,
        params: Mapping[str, float],
        t: _CompiledTransition,
    ) -> NDArray[np.float64]:
        try:
            return expr.evaluate(Columns(markings, rows), params)
        except RowError as exc:
            row = exc.row if rows is None else int(rows[exc.row])
            raise EvaluationError(
                f"{exc.reason} in {expr.text!r}",
                transition=t.name,
                marking=self.marking_dict(markings[row]),
                field=f"transitions.{t.name}",
            ) from None

    def _multiplicity(
        self,
        arc: _Arc,
        markings: NDArray[Any],
        rows: NDArray[np.intp] | None,
        params: Mapping[str, float],
        t: _CompiledTransition,
    ) -> NDArray[np.int64]:
        assert arc.expression is not None
        values = self._values(arc.expression, markings, rows, params, t)
        bad = ~np.isfinite(values) | (values < 0) | (values != np.round(values))
        bad |= values > _MARKING_MAX
        if np.any(bad):
            i = int(np.flatnonzero(bad)[0])
            row = i if rows is None else int(rows[i])
            raise EvaluationError(
                f"arc multiplicity {arc.expression.text!r} must be a non-negative integer, "
                f"got {values[i]!r}",
                transition=t.name,
                marking=self.marking_dict(markings[row]),
                field=f"transitions.{t.name}",
            )
        return values.astype(np.int64)

    def enabled(
        self,
        t: _CompiledTransition,
        markings: NDArray[Any],
        params: Mapping[str, float],
    ) -> NDArray[np.bool_]:
        """Mask of the markings (rows) in which ``t`` is enabled."""
        n = markings.shape[0]
        mask = np.ones(n, dtype=bool)
        for arc in t.inputs:
            col = markings[:, arc.place]
            if arc.constant is not None:
                if arc.constant > 0:
                    mask &= col >= arc.constant
            else:
                mask &= col >= self._multiplicity(arc, markings, None, params, t)
        for arc in t.inhibitors:
            col = markings[:, arc.place]
            if arc.constant is not None:
                if arc.constant > 0:
                    mask &= col < arc.constant
            else:
                mult = self._multiplicity(arc, markings, None, params, t)
                mask &= (mult == 0) | (col < mult)
        if t.guard is not None and np.any(mask):
            # Only evaluate the guard where the arcs allow firing, so a guard such as
            # "1 / #p > 0" guarded by an input arc on p never divides by zero.
            rows = np.flatnonzero(mask)
            ok = self._values(t.guard, markings, rows, params, t) != 0
            mask[rows[~ok]] = False
        return mask

    def timed_enabled(
        self,
        t: _CompiledTransition,
        markings: NDArray[Any],
        params: Mapping[str, float],
    ) -> tuple[NDArray[np.intp], int]:
        """Rows in which timed ``t`` is enabled, and how many more a zero rate disabled.

        A timed transition whose rate evaluates to 0 at a marking is not enabled there
        (SPNP semantics): it cannot fire, and a marking where only such transitions
        have their arcs satisfied is dead.

        Raises
        ------
        EvaluationError
            If the rate is negative, not finite, or fails to evaluate where the arcs
            and guard enable ``t``.
        """
        rows = np.flatnonzero(self.enabled(t, markings, params))
        if t.rate.constant is not None:
            return (rows, 0) if t.rate.constant > 0 else (rows[:0], len(rows))
        if not len(rows):
            return rows, 0
        positive = self.positive_values(t.rate, markings, rows, params, t, "rate") > 0
        if positive.all():
            return rows, 0
        return rows[positive], int(len(rows) - positive.sum())

    def fire(
        self,
        t: _CompiledTransition,
        markings: NDArray[Any],
        params: Mapping[str, float],
    ) -> NDArray[Any]:
        """Successor markings after firing ``t`` in each row (all rows must enable it)."""
        if t.delta is not None:
            succ = markings.astype(np.int64) + t.delta
        else:
            succ = markings.astype(np.int64)
            for arc in t.inputs:
                mult = arc.constant
                if mult is None:
                    succ[:, arc.place] -= self._multiplicity(arc, markings, None, params, t)
                else:
                    succ[:, arc.place] -= mult
            for arc in t.outputs:
                mult = arc.constant
                if mult is None:
                    succ[:, arc.place] += self._multiplicity(arc, markings, None, params, t)
                else:
                    succ[:, arc.place] += mult
        if succ.size and succ.max() > _MARKING_MAX:
            i = int(np.flatnonzero(succ.max(axis=1) > _MARKING_MAX)[0])
            raise EvaluationError(
                f"a place would hold more than {_MARKING_MAX} tokens",
                transition=t.name,
                marking=self.marking_dict(markings[i]),
                field=f"transitions.{t.name}",
            )
        return succ.astype(MARKING_DTYPE)

    def positive_values(
        self,
        expr: Expression,
        markings: NDArray[Any],
        rows: NDArray[np.intp] | None,
        params: Mapping[str, float],
        t: _CompiledTransition,
        what: str,
    ) -> NDArray[np.float64]:
        """Evaluate a rate or weight and check that it is finite and non-negative."""
        values = self._values(expr, markings, rows, params, t)
        bad = ~np.isfinite(values) | (values < 0)
        if np.any(bad):
            i = int(np.flatnonzero(bad)[0])
            row = i if rows is None else int(rows[i])
            raise EvaluationError(
                f"{what} {expr.text!r} is {values[i]!r}; it must be finite and non-negative",
                transition=t.name,
                marking=self.marking_dict(markings[row]),
                field=f"transitions.{t.name}.{what}",
            )
        return np.ascontiguousarray(values, dtype=float)
