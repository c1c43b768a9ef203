"""The expression language, evaluated on every marking of a small net.

Each expression is compared, marking by marking, with the same formula written in
Python (booleans count as 0/1).  The engine parses the text itself; Python only
computes the reference.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from srn import EvaluationError, Net, compile_net, reachability_graph, timed


@pytest.fixture(scope="module")
def grid():
    """All markings (a, b) with 0 <= a <= 4 and 0 <= b <= 3."""
    net = Net(
        {"a": 0, "b": 0},
        [
            timed("add_a", 1.0, outputs={"a": 1}, inhibitors={"a": 4}),
            timed("add_b", 1.0, outputs={"b": 1}, inhibitors={"b": 3}),
        ],
        parameters={"k": 0.25, "n": 3.0},
    )
    graph = reachability_graph(net)
    assert graph.n_states == 20
    return graph


CASES = [
    ("#a + #b * 2", lambda a, b: a + b * 2),
    ("(#a + #b) * 2", lambda a, b: (a + b) * 2),
    ("#a - #b - 1", lambda a, b: a - b - 1),
    ("#a / 4 - #b", lambda a, b: a / 4 - b),
    ("2 ** 3 ** 2", lambda a, b: 2**9),  # right-associative
    ("-2 ** 2", lambda a, b: -4),  # unary minus binds looser than the power
    ("2 ^ #a", lambda a, b: 2**a),
    ("if(#a > 0, #a ** -1, 0)", lambda a, b: 1 / a if a else 0.0),
    ("--#a + +#b", lambda a, b: a + b),
    ("k * #a + n", lambda a, b: 0.25 * a + 3),
    ("1.5e1 + .5 + 3.", lambda a, b: 18.5),
    ("#a > #b", lambda a, b: a > b),
    ("#a <= #b", lambda a, b: a <= b),
    ("#a == 2", lambda a, b: a == 2),
    ("#a != 2", lambda a, b: a != 2),
    ("#a >= 2 and #b < 2 or not #a == 0", lambda a, b: (a >= 2 and b < 2) or a != 0),
    ("#a != 1 && #b == 1 || !(#a < 3)", lambda a, b: (a != 1 and b == 1) or a >= 3),
    ("not not #b", lambda a, b: bool(b)),
    ("min(#a, #b, 2)", lambda a, b: min(a, b, 2)),
    ("max(#a)", lambda a, b: a),
    ("max(#a, n) - min(#b, 1)", lambda a, b: max(a, 3) - min(b, 1)),
    ("abs(#b - #a)", lambda a, b: abs(b - a)),
    ("floor(#a / 3)", lambda a, b: a // 3),
    ("ceil(#a / 3)", lambda a, b: math.ceil(a / 3)),
    ("if(#a > #b, #a, #b)", lambda a, b: max(a, b)),
    # Branches are evaluated only where selected: no division by zero at a = 0.
    ("if(#a > 0, 12 / #a, -1)", lambda a, b: 12 / a if a > 0 else -1),
    (
        "if(#a > 1, if(#b > 0, 1 / #b, 2 / (#a - 1)), 0)",
        lambda a, b: (1 / b if b > 0 else 2 / (a - 1)) if a > 1 else 0,
    ),
    ("min(if(#b == 0, 1, 6 / #b), 4)", lambda a, b: min(1 if b == 0 else 6 / b, 4)),
    # "and" / "or" short-circuit like Python's: the right side is never divided by zero.
    ("#b > 0 and 3 / #b > 1", lambda a, b: b > 0 and 3 / b > 1),
    ("#a == 0 or 4 / #a >= 2", lambda a, b: a == 0 or 4 / a >= 2),
    ("(#a > 0 and #b > 0) + (#a > 1 or #b > 2)", lambda a, b: (a > 0 and b > 0) + (a > 1 or b > 2)),
]


@pytest.mark.parametrize(("text", "python"), CASES, ids=[c[0] for c in CASES])
def test_expression_values(grid, text, python):
    values = grid.reward(text)
    expected = [float(python(int(a), int(b))) for a, b in grid.markings]
    np.testing.assert_allclose(values, expected, rtol=1e-15, atol=0)


def test_division_by_zero_names_the_marking(grid):
    with pytest.raises(EvaluationError, match="division by zero") as info:
        grid.reward("#b / (#a - 3)")
    assert info.value.marking["a"] == 3


def test_non_finite_reward_is_rejected(grid):
    with pytest.raises(EvaluationError, match="not finite"):
        grid.reward("10 ** (#a * 100)")


def test_constant_expressions_are_folded_once():
    compiled = compile_net(Net({"p": 1}, [timed("t", "2 * 3 + max(1, 4)", inputs={"p": 1})]))
    assert compiled.transitions[0].rate.constant == 10.0
    parametric = compile_net(
        Net({"p": 1}, [timed("t", "lam * 2", inputs={"p": 1})], parameters={"lam": 1.0})
    )
    assert parametric.transitions[0].rate.constant is None
    assert parametric.rate_parameters == frozenset({"lam"})
    assert parametric.structural_parameters == frozenset()
