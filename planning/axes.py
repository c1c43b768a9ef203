"""Sweep axes: the grammar of ``0..20``, ``1,2,4,8`` and ``100MB..1GB:100MB``.

An axis spec is a comma-separated list of items; each item is a single value or an
inclusive range ``a..b`` with an optional step ``a..b:step``.  Values are turned into
numbers by a parser the caller supplies (the CLI and the service pass their unit parsers,
so ``500MB`` or ``100ms`` work where a size or a delay is expected).  Nothing is ever
evaluated: the spec is split on ``,``, ``..`` and ``:`` and each piece parsed.

Integer inputs (task counts, cores, packets) default to a step of 1; other inputs need an
explicit step, because no default step suits both 1 ms and 1 s.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

from .errors import PlanningError

__all__ = ["axis_values"]

#: A parser of one value: (text, field name) -> number in SI units.
ValueParser = Callable[[str, str], float]

_MAX_SPEC_CHARS = 2_000


def _range_length(start: float, stop: float, step: float) -> int:
    if isinstance(start, int) and isinstance(stop, int) and isinstance(step, int):
        return (stop - start) // step + 1  # exact for whole inputs of any size
    # A small absolute slack on the quotient so that 0.1..0.3:0.1 keeps 0.3 despite
    # rounding (the quotient is at most max_values when the range is accepted).
    return math.floor((stop - start) / step + 1e-9) + 1


def axis_values(
    field: str,
    spec: str | float | int | Sequence[Any],
    parse: ValueParser | type[str] | None = None,
    *,
    integer: bool = False,
    max_values: int = 100_000,
) -> list[Any]:
    """The values of one sweep axis, in the order given, duplicates removed.

    Parameters
    ----------
    field : str
        The input's name, used in error messages (e.g. ``"io_tasks"``).
    spec : str, number or sequence
        ``"0..20"``, ``"0..20:5"``, ``"1,2,4,8"``, ``"64, 512..2048:512"``; a single
        number; or a list of values (each parsed the same way).
    parse : callable, optional
        ``parse(text, field) -> number`` for one value; ``float`` when omitted.  Strings
        that are not ranges are returned as they are when ``parse`` is ``str``.
    integer : bool, default False
        The input takes whole numbers: values must be integral and ranges step by 1 by
        default.
    max_values : int, default 100000
        The most values the axis may hold (a range is measured before it is built).

    Returns
    -------
    list
        The values (int when ``integer``), in SI units.

    Raises
    ------
    PlanningError
        ``field`` set to the axis; ``limit="max_points"`` when the axis alone is longer
        than ``max_values``.

    Examples
    --------
    >>> axis_values("io_tasks", "0..3", integer=True)
    [0, 1, 2, 3]
    >>> axis_values("propagation_delay", "0.1..0.3:0.1")
    [0.1, 0.2, 0.30000000000000004]
    >>> axis_values("cores", "1,2,4,8", integer=True)
    [1, 2, 4, 8]
    """
    parser: Any = parse or (lambda text, _field: float(text))
    items: list[Any]
    if isinstance(spec, bool):
        raise PlanningError(field, f"expected a number or a range, got {spec!r}")
    if isinstance(spec, int | float):
        items = [spec]
    elif isinstance(spec, str):
        if len(spec) > _MAX_SPEC_CHARS:
            raise PlanningError(field, f"a spec of at most {_MAX_SPEC_CHARS} characters")
        items = [part.strip() for part in spec.split(",")]
    elif isinstance(spec, Sequence):
        items = list(spec)
    else:
        raise PlanningError(field, f"expected a range, a list or a value, got {spec!r}")
    if not items:
        raise PlanningError(field, "an axis needs at least one value")
    out: list[Any] = []
    seen: set[Any] = set()

    def one(raw: Any) -> Any:
        if isinstance(raw, bool):
            raise PlanningError(field, f"expected a number, got {raw!r}")
        if parse is str:
            if not isinstance(raw, str) or not raw:
                raise PlanningError(field, f"expected a name, got {raw!r}")
            return raw
        try:
            value = parser(raw, field) if isinstance(raw, str) else float(raw)
        except PlanningError:
            raise
        except OverflowError:  # an integer of hundreds of digits: no float holds it
            raise PlanningError(field, f"{str(raw)[:40]}... is out of range") from None
        except (TypeError, ValueError) as exc:
            reason = getattr(exc, "reason", None) or str(exc)
            raise PlanningError(field, f"cannot read {raw!r}: {reason}") from None
        if not math.isfinite(value):
            raise PlanningError(field, f"{raw!r} is not finite")
        if integer:
            if value != int(value):
                raise PlanningError(field, f"{raw!r} is not a whole number")
            return int(value)
        return float(value)

    def add(value: Any) -> None:
        if value not in seen:
            seen.add(value)
            out.append(value)
            if len(out) > max_values:
                raise PlanningError(
                    field,
                    f"more than max_points={max_values} values",
                    limit="max_points",
                    maximum=max_values,
                    reached=len(out),
                )

    for item in items:
        if isinstance(item, str) and ".." in item and parse is not str:
            bounds, _, step_text = item.partition(":")
            start_text, _, stop_text = bounds.partition("..")
            if not start_text.strip() or not stop_text.strip():
                raise PlanningError(field, f"a range is a..b or a..b:step, got {item!r}")
            start, stop = one(start_text.strip()), one(stop_text.strip())
            if step_text.strip():
                step = one(step_text.strip())
            elif integer:
                step = 1
            else:
                raise PlanningError(
                    field, f"the range {item!r} needs a step (a..b:step): the input is not whole"
                )
            if step <= 0:
                raise PlanningError(field, f"the step of {item!r} must be > 0")
            if stop < start:
                raise PlanningError(field, f"the range {item!r} ends below its start")
            n = _range_length(start, stop, step)
            if n > max_values:
                count = f"{n}" if n < 10**12 else f"about {float(n):.3g}"
                raise PlanningError(
                    field,
                    f"the range {item!r} has {count} values, more than max_points={max_values}",
                    limit="max_points",
                    maximum=max_values,
                    reached=n,
                )
            for k in range(n):
                add(start + k * step if integer else float(start + k * step))
        else:
            if isinstance(item, str) and not item:
                raise PlanningError(field, "an empty item in the list")
            add(one(item))
    return out
