"""Whitelisted expressions over markings and parameters, compiled to vectorised NumPy.

The grammar is deliberately small, and the text is tokenised and parsed here: it is
never handed to ``eval``, ``sympify``, ``parse_expr`` or ``lambdify``.

::

    expr    := or
    or      := and (("or" | "||") and)*
    and     := not (("and" | "&&") not)*
    not     := ("not" | "!") not | compare
    compare := sum (("<" | "<=" | ">" | ">=" | "==" | "!=") sum)?
    sum     := product (("+" | "-") product)*
    product := unary (("*" | "/") unary)*
    unary   := ("-" | "+") unary | power
    power   := atom (("**" | "^") unary)?
    atom    := NUMBER | "#" NAME | NAME | NAME "(" expr ("," expr)* ")" | "(" expr ")"

``#p`` is the number of tokens in place ``p``; a bare ``NAME`` is a parameter.  The
functions are ``min``, ``max``, ``abs``, ``floor``, ``ceil`` and ``if(c, a, b)``.
A compiled expression evaluates on a whole batch of markings at once.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from numpy.typing import NDArray

from .errors import ExpressionError

__all__: list[str] = []

_MAX_DEPTH = 64

_TOKEN = re.compile(
    r"""
    (?P<ws>\s+)
  | (?P<number>(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?)
  | (?P<place>\#[A-Za-z_][A-Za-z0-9_]*)
  | (?P<name>[A-Za-z_][A-Za-z0-9_]*)
  | (?P<op>\*\*|<=|>=|==|!=|&&|\|\||[-+*/^<>(),!])
    """,
    re.VERBOSE,
)

_FUNCTIONS: dict[str, tuple[int, int | None]] = {
    # name: (minimum arity, maximum arity or None for variadic)
    "min": (1, None),
    "max": (1, None),
    "abs": (1, 1),
    "floor": (1, 1),
    "ceil": (1, 1),
    "if": (3, 3),
}
_KEYWORDS = {"and", "or", "not"}


class RowError(Exception):
    """Raised during evaluation when one row (marking) of a batch is invalid."""

    def __init__(self, reason: str, row: int) -> None:
        super().__init__(reason)
        self.reason = reason
        self.row = row


class Columns:
    """A batch of markings, handed to compiled expressions column by column.

    Parameters
    ----------
    markings : ndarray of int, shape (n, n_places)
        The markings; only the columns an expression names are read.
    rows : ndarray of int, optional
        A subset of rows to evaluate on, so callers need not copy markings.
    """

    __slots__ = ("_cache", "_markings", "_rows", "n")

    def __init__(self, markings: NDArray[Any], rows: NDArray[np.intp] | None = None) -> None:
        self._markings = markings
        self._rows = rows
        self.n = len(rows) if rows is not None else markings.shape[0]
        self._cache: dict[int, NDArray[Any]] = {}

    def column(self, place: int) -> NDArray[Any]:
        col = self._cache.get(place)
        if col is None:
            col = self._markings[:, place]
            if self._rows is not None:
                col = col[self._rows]
            # Graphs store markings in the narrowest type that holds them (int8 for a
            # net of at most 127 tokens a place): expressions compute in int64, so
            # ``#p * 1000`` cannot wrap around.
            self._cache[place] = col = col.astype(np.int64, copy=False)
        return col

    def subset(self, rows: NDArray[np.intp]) -> Columns:
        """The same batch restricted to ``rows`` (indices into this batch)."""
        return Columns(self._markings, rows if self._rows is None else self._rows[rows])


_Evaluator = Callable[[Columns, Mapping[str, float]], Any]


@dataclass(frozen=True)
class Expression:
    """A parsed, compiled expression.

    Attributes
    ----------
    text : str
        The source text.
    places : frozenset of str
        Places whose marking the expression reads.
    parameters : frozenset of str
        Parameters it reads.
    constant : float or None
        The value, when the expression depends on neither markings nor parameters.
    """

    text: str
    places: frozenset[str]
    parameters: frozenset[str]
    constant: float | None
    _fn: _Evaluator = field(repr=False, compare=False)

    def evaluate(self, columns: Columns, parameters: Mapping[str, float]) -> NDArray[Any]:
        """Evaluate on every marking of ``columns``; returns an array of length ``columns.n``."""
        if self.constant is not None:
            return np.full(columns.n, self.constant)
        with np.errstate(all="ignore"):
            value = self._fn(columns, parameters)
        return np.broadcast_to(np.asarray(value, dtype=float), (columns.n,))

    def scalar(self, parameters: Mapping[str, float]) -> float:
        """Evaluate an expression that reads no marking."""
        if self.constant is not None:
            return self.constant
        cols = Columns(np.zeros((1, 0), dtype=np.int64))
        return float(self.evaluate(cols, parameters)[0])


@dataclass
class _Token:
    kind: str
    text: str
    pos: int


def _tokenise(text: str) -> list[_Token]:
    tokens: list[_Token] = []
    pos = 0
    while pos < len(text):
        m = _TOKEN.match(text, pos)
        if m is None:
            raise ExpressionError(f"unexpected character {text[pos]!r}", text=text, position=pos)
        kind = m.lastgroup or ""
        if kind != "ws":
            tokens.append(_Token(kind, m.group(), pos))
        pos = m.end()
    tokens.append(_Token("end", "", len(text)))
    return tokens


class _Parser:
    """Recursive-descent parser that emits evaluator closures directly."""

    def __init__(
        self,
        text: str,
        place_index: Mapping[str, int],
        parameter_names: frozenset[str],
    ) -> None:
        self.text = text
        self.tokens = _tokenise(text)
        self.i = 0
        self.depth = 0
        self.place_index = place_index
        self.parameter_names = parameter_names
        self.places: set[str] = set()
        self.parameters: set[str] = set()

    # -- token helpers -------------------------------------------------
    def _peek(self) -> _Token:
        return self.tokens[self.i]

    def _next(self) -> _Token:
        tok = self.tokens[self.i]
        self.i += 1
        return tok

    def _accept(self, *texts: str) -> _Token | None:
        tok = self.tokens[self.i]
        if tok.kind in ("op", "name") and tok.text in texts:
            self.i += 1
            return tok
        return None

    def _error(self, message: str, tok: _Token | None = None) -> ExpressionError:
        tok = tok or self._peek()
        return ExpressionError(message, text=self.text, position=tok.pos)

    def _expect(self, text: str) -> None:
        if self._accept(text) is None:
            found = self._peek().text or "end of expression"
            raise self._error(f"expected {text!r}, found {found!r}")

    def _enter(self) -> None:
        self.depth += 1
        if self.depth > _MAX_DEPTH:
            raise self._error(f"expression nested deeper than {_MAX_DEPTH} levels")

    # -- grammar ---------------------------------------------------------
    def parse(self) -> _Evaluator:
        fn = self._or()
        if self._peek().kind != "end":
            raise self._error(f"unexpected {self._peek().text!r}")
        return fn

    def _or(self) -> _Evaluator:
        left = self._and()
        while self._accept("or", "||"):
            right = self._and()
            left = _choose(left, _one, _truth(right))
        return left

    def _and(self) -> _Evaluator:
        left = self._not()
        while self._accept("and", "&&"):
            right = self._not()
            left = _choose(left, _truth(right), _zero)
        return left

    def _not(self) -> _Evaluator:
        if self._accept("not", "!"):
            self._enter()
            inner = self._not()
            self.depth -= 1
            return lambda c, p: np.logical_not(inner(c, p))
        return self._compare()

    _COMPARE: dict[str, Callable[[Any, Any], Any]] = {  # noqa: RUF012
        "<": np.less,
        "<=": np.less_equal,
        ">": np.greater,
        ">=": np.greater_equal,
        "==": np.equal,
        "!=": np.not_equal,
    }

    def _compare(self) -> _Evaluator:
        left = self._sum()
        tok = self._accept(*self._COMPARE)
        if tok is not None:
            right = self._sum()
            left = _binary(self._COMPARE[tok.text], left, right)
            if self._peek().text in self._COMPARE:
                raise self._error("chained comparisons are not allowed; use 'and'")
        return left

    def _sum(self) -> _Evaluator:
        left = self._product()
        while True:
            tok = self._accept("+", "-")
            if tok is None:
                return left
            right = self._product()
            left = _binary(np.add if tok.text == "+" else np.subtract, left, right)

    def _product(self) -> _Evaluator:
        left = self._unary()
        while True:
            tok = self._accept("*", "/")
            if tok is None:
                return left
            right = self._unary()
            left = _binary(np.multiply, left, right) if tok.text == "*" else _divide(left, right)

    def _unary(self) -> _Evaluator:
        tok = self._accept("-", "+")
        if tok is not None:
            self._enter()
            inner = self._unary()
            self.depth -= 1
            if tok.text == "+":
                return inner
            return lambda c, p: np.negative(inner(c, p))
        return self._power()

    def _power(self) -> _Evaluator:
        base = self._atom()
        if self._accept("**", "^"):
            self._enter()
            exponent = self._unary()
            self.depth -= 1
            return _binary(np.power, _as_float(base), exponent)
        return base

    def _atom(self) -> _Evaluator:
        tok = self._next()
        if tok.kind == "number":
            value = float(tok.text)
            if not math.isfinite(value):
                raise self._error("number is not finite", tok)
            return lambda c, p: value
        if tok.kind == "place":
            name = tok.text[1:]
            index = self.place_index.get(name)
            if index is None:
                raise self._error(f"unknown place {name!r}", tok)
            self.places.add(name)
            return lambda c, p: c.column(index)
        if tok.kind == "name":
            if tok.text in _KEYWORDS:
                raise self._error(f"unexpected keyword {tok.text!r}", tok)
            if self._peek().text == "(":
                return self._call(tok)
            return self._parameter(tok)
        if tok.kind == "op" and tok.text == "(":
            self._enter()
            inner = self._or()
            self.depth -= 1
            self._expect(")")
            return inner
        found = tok.text or "end of expression"
        raise self._error(f"unexpected {found!r}", tok)

    def _parameter(self, tok: _Token) -> _Evaluator:
        name = tok.text
        if name not in self.parameter_names:
            hint = f"; did you mean '#{name}'?" if name in self.place_index else ""
            raise self._error(f"unknown name {name!r}{hint}", tok)
        self.parameters.add(name)
        return lambda c, p: p[name]

    def _call(self, tok: _Token) -> _Evaluator:
        name = tok.text
        if name not in _FUNCTIONS:
            raise self._error(f"unknown function {name!r}", tok)
        self._expect("(")
        self._enter()
        args = [self._or()]
        while self._accept(","):
            args.append(self._or())
        self.depth -= 1
        self._expect(")")
        lo, hi = _FUNCTIONS[name]
        if len(args) < lo or (hi is not None and len(args) > hi):
            expected = str(lo) if hi == lo else f"at least {lo}"
            raise self._error(f"{name}() takes {expected} argument(s), got {len(args)}", tok)
        if name in ("min", "max"):
            reducer = np.minimum if name == "min" else np.maximum
            first, *rest = args

            def reduce(c: Columns, p: Mapping[str, float]) -> Any:
                value = first(c, p)
                for arg in rest:
                    value = reducer(value, arg(c, p))
                return value

            return reduce
        if name == "if":
            cond, then, other = args
            return _choose(cond, then, other)
        unary = {"abs": np.abs, "floor": np.floor, "ceil": np.ceil}[name]
        (arg,) = args
        return lambda c, p: unary(arg(c, p))


def _binary(op: Callable[[Any, Any], Any], left: _Evaluator, right: _Evaluator) -> _Evaluator:
    return lambda c, p: op(left(c, p), right(c, p))


def _truth(fn: _Evaluator) -> _Evaluator:
    return lambda c, p: np.asarray(fn(c, p)) != 0


def _one(c: Columns, p: Mapping[str, float]) -> Any:
    return 1.0


def _zero(c: Columns, p: Mapping[str, float]) -> Any:
    return 0.0


def _choose(cond: _Evaluator, then: _Evaluator, other: _Evaluator) -> _Evaluator:
    # Each branch is evaluated only on the markings that select it, so that
    # "if(#q > 0, 1 / #q, 0)" guards its division instead of failing at #q = 0; "and"
    # and "or" short-circuit the same way ("#q > 0 and 2 / #q < 1").
    def choose(c: Columns, p: Mapping[str, float]) -> Any:
        chosen = np.broadcast_to(np.asarray(cond(c, p)) != 0, (c.n,))
        out = np.empty(c.n)
        for mask, branch in ((chosen, then), (~chosen, other)):
            rows = np.flatnonzero(mask)
            if len(rows) == c.n:
                out[:] = branch(c, p)
            elif len(rows):
                try:
                    out[rows] = branch(c.subset(rows), p)
                except RowError as exc:
                    raise RowError(exc.reason, int(rows[exc.row])) from None
        return out

    return choose


def _as_float(fn: _Evaluator) -> _Evaluator:
    # Integer powers of integer markings would overflow silently or reject negative
    # exponents; floats give inf, which the callers' finiteness checks report.
    return lambda c, p: np.asarray(fn(c, p), dtype=float)


def _divide(num: _Evaluator, den: _Evaluator) -> _Evaluator:
    def divide(c: Columns, p: Mapping[str, float]) -> Any:
        d = np.asarray(den(c, p), dtype=float)
        zero = d == 0
        if np.any(zero):
            row = int(np.flatnonzero(np.broadcast_to(zero, (c.n,)))[0]) if c.n else 0
            raise RowError("division by zero", row)
        return np.true_divide(num(c, p), d)

    return divide


def compile_expression(
    source: str | float | int,
    *,
    places: Mapping[str, int],
    parameters: frozenset[str] | set[str] | Mapping[str, Any],
    max_length: int,
    field: str | None = None,
) -> Expression:
    """Parse and compile ``source`` against the given place index and parameter names.

    Numbers pass straight through as constants.  Raises :class:`ExpressionError`
    (with ``field`` set) when the text is too long, malformed or names unknown symbols.
    """
    if isinstance(source, bool):
        source = float(source)
    if isinstance(source, int | float):
        value = float(source)
        if not math.isfinite(value):
            raise ExpressionError("number is not finite", text=str(source), field=field)
        return Expression(str(source), frozenset(), frozenset(), value, lambda c, p: value)
    if not isinstance(source, str):
        raise ExpressionError(
            f"expected a number or an expression string, got {type(source).__name__}",
            text=repr(source),
            field=field,
        )
    if len(source) > max_length:
        raise ExpressionError(
            f"expression is {len(source)} characters long; limit max_expression_length="
            f"{max_length}",
            text=source[:40] + "...",
            field=field,
        )
    if not source.strip():
        raise ExpressionError("empty expression", text=source, field=field)
    names = frozenset(parameters)
    try:
        parser = _Parser(source, places, names)
        fn = parser.parse()
    except ExpressionError as exc:
        exc.field = field
        raise
    constant: float | None = None
    if not parser.places and not parser.parameters:
        try:
            with np.errstate(all="ignore"):
                constant = float(np.asarray(fn(Columns(np.zeros((1, 0), np.int64)), {}), float))
        except RowError as exc:
            raise ExpressionError(exc.reason, text=source, field=field) from None
    return Expression(source, frozenset(parser.places), frozenset(parser.parameters), constant, fn)
