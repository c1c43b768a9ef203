"""Malformed nets, hostile or broken expressions and exceeded limits give clear errors.

Every error is an :class:`srn.SRNError` (a ``ValueError``) that names what is wrong:
the field (``.field``), the transition and marking (``.transition``, ``.marking``), or
the limit and the count reached (``.limit``, ``.maximum``, ``.reached``).
"""

from __future__ import annotations

import json

import numpy as np
import pytest

from srn import (
    EvaluationError,
    ExpressionError,
    LimitExceededError,
    Limits,
    Net,
    NetDefinitionError,
    Place,
    SRNError,
    Transition,
    VanishingLoopError,
    compile_net,
    immediate,
    reachability_graph,
    steady_state,
    timed,
)


def queue(rate="mu", K=4, **extra):
    """M/M/1/K with a configurable service rate expression."""
    return Net(
        {"q": 0},
        [
            timed("arrive", "lam", outputs={"q": 1}, inhibitors={"q": K}),
            timed("serve", rate, inputs={"q": 1}, **extra),
        ],
        parameters={"lam": 1.0, "mu": 2.0},
    )


# -- expressions ----------------------------------------------------------------------

HOSTILE = [
    "__import__('os')",
    "__import__('os').system('true')",
    "mu.__class__",
    "().__class__.__bases__",
    "lambda: 1",
    "'abc'",
    '"abc"',
    "eval('1')",
    "exec('1')",
    "open('/etc/passwd')",
    "getattr(mu, 'real')",
    "[1, 2]",
    "{1: 2}",
    "mu if 1 else 2",
    "mu; 1",
    "mu = 1",
    "#q[0]",
    "`1`",
    "\\x41",
    "mu @ 2",
    "__builtins__",
]


@pytest.mark.parametrize("text", HOSTILE)
def test_hostile_expressions_are_rejected_by_the_parser(text):
    with pytest.raises(ExpressionError) as info:
        compile_net(queue(text))
    assert info.value.field == "transitions.serve.rate"
    assert info.value.text == text
    assert "expression" in str(info.value)


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        ("#nowhere", "unknown place 'nowhere'"),
        ("mu * nope", "unknown name 'nope'"),
        ("q * mu", "did you mean '#q'"),
        ("sqrt(#q)", "unknown function 'sqrt'"),
        ("min()", "unexpected"),
        ("if(1, 2)", "if() takes 3"),
        ("abs(1, 2)", "abs() takes 1"),
        ("(mu", "expected ')'"),
        ("mu +", "unexpected"),
        ("1 < 2 < 3", "chained comparisons"),
        ("and", "keyword"),
        ("   ", "empty expression"),
        ("(" * 70 + "1" + ")" * 70, "nested deeper than"),
        ("1 / 0", "division by zero"),
    ],
)
def test_malformed_expressions_name_the_problem(text, reason):
    with pytest.raises(ExpressionError, match=reason.replace("(", r"\(").replace(")", r"\)")) as e:
        compile_net(queue(text))
    assert e.value.field == "transitions.serve.rate"


def test_unknown_place_in_expression_reports_its_position():
    with pytest.raises(ExpressionError) as info:
        compile_net(queue("mu * #ghost"))
    assert info.value.position == 5


def test_too_long_expression_names_the_limit():
    limits = Limits(max_expression_length=20)
    compile_net(queue("mu + " * 3 + "1"), limits)  # 16 characters: fine
    with pytest.raises(ExpressionError, match="max_expression_length=20") as info:
        compile_net(queue("mu + " * 5 + "1"), limits)
    assert info.value.field == "transitions.serve.rate"
    with pytest.raises(ExpressionError, match="max_expression_length=1000"):
        compile_net(queue("1+" * 600 + "1"))


def test_reward_expressions_are_checked_too():
    graph = reachability_graph(queue())
    with pytest.raises(ExpressionError) as info:
        graph.reward("__import__('os')")
    assert info.value.field == "reward"
    with pytest.raises(ExpressionError, match="unknown place"):
        graph.expected_reward("#ghost", np.ones(graph.n_states) / graph.n_states)
    with pytest.raises(EvaluationError, match="division by zero"):
        graph.reward("1 / #q")


# -- evaluation at reachable markings --------------------------------------------------


def test_division_by_zero_at_a_reachable_marking_names_transition_and_marking():
    # Rates are evaluated while exploring (a zero rate disables a transition), so the
    # error comes from exploration, at the first marking where serve is enabled.
    with pytest.raises(EvaluationError, match="division by zero") as info:
        reachability_graph(queue("1 / (#q - 1)"))
    assert info.value.transition == "serve"
    assert info.value.marking == {"q": 1}
    assert "'serve'" in str(info.value) and "{'q': 1}" in str(info.value)


def test_division_by_zero_in_a_guard_is_reported_during_exploration():
    with pytest.raises(EvaluationError) as info:
        reachability_graph(queue(guard="1 / (#q - 3) > 0"))
    assert info.value.transition == "serve"
    assert info.value.marking == {"q": 3}


@pytest.mark.parametrize(
    ("rate", "marking", "words"),
    [
        ("3 - #q", {"q": 4}, "-1.0"),
        ("10 ** (#q * 200)", {"q": 2}, "inf"),
        ("mu * (#q - 3)", {"q": 1}, "-4.0"),
    ],
)
def test_negative_or_non_finite_rate_at_a_reachable_marking(rate, marking, words):
    with pytest.raises(EvaluationError, match="finite and non-negative") as info:
        reachability_graph(queue(rate))
    assert info.value.transition == "serve"
    assert info.value.marking == marking
    assert info.value.field == "transitions.serve.rate"
    assert words in str(info.value)


@pytest.mark.parametrize("rate", [-1.0, "-2", "2 - 3", "10 ** 400", "(-1) ** 0.5"])
def test_negative_or_non_finite_constant_rate_is_rejected_at_compile_time(rate):
    with pytest.raises(NetDefinitionError, match="finite and non-negative") as info:
        compile_net(queue(rate))
    assert info.value.field == "transitions.serve.rate"


def test_new_parameter_values_are_checked_at_each_solve():
    compiled = compile_net(queue("mu * #q"))
    compiled.reachability_graph({"mu": 2.0})
    with pytest.raises(EvaluationError, match="finite and non-negative"):
        compiled.reachability_graph({"mu": -1.0}).generator()
    with pytest.raises(NetDefinitionError) as info:
        compiled.reachability_graph({"speed": 1.0})
    assert info.value.field == "parameters.speed"
    for bad in (float("nan"), float("inf"), "fast", True):
        with pytest.raises(NetDefinitionError) as info:
            compiled.reachability_graph({"mu": bad})
        assert info.value.field == "parameters.mu"


def test_negative_weight_at_a_reachable_marking():
    net = Net(
        {"p": 1, "v": 0, "a": 0, "b": 0},
        [
            timed("go", 1.0, inputs={"p": 1}, outputs={"v": 1}),
            immediate("left", weight="#a - 1", inputs={"v": 1}, outputs={"a": 1}),
            immediate("right", inputs={"v": 1}, outputs={"b": 1}),
            timed("back_a", 1.0, inputs={"a": 1}, outputs={"p": 1}),
            timed("back_b", 1.0, inputs={"b": 1}, outputs={"p": 1}),
        ],
    )
    with pytest.raises(EvaluationError, match="weight") as info:
        reachability_graph(net)
    assert info.value.transition == "left"
    assert info.value.field == "transitions.left.weight"


def test_all_zero_weights_are_reported():
    net = Net(
        {"p": 1, "q": 0},
        [
            immediate("i", weight=0, inputs={"p": 1}, outputs={"q": 1}),
            timed("t", 1.0, inputs={"q": 1}, outputs={"p": 1}),
        ],
    )
    with pytest.raises(EvaluationError, match="weight 0") as info:
        reachability_graph(net)
    assert info.value.marking == {"p": 1, "q": 0}


# -- vanishing loops and limits --------------------------------------------------------


def test_vanishing_loop_is_reported_not_looped_on():
    net = Net(
        {"s": 1, "x": 0, "y": 0},
        [
            timed("start", 1.0, inputs={"s": 1}, outputs={"x": 1}),
            immediate("xy", inputs={"x": 1}, outputs={"y": 1}),
            immediate("yx", inputs={"y": 1}, outputs={"x": 1}),
        ],
    )
    with pytest.raises(VanishingLoopError) as info:
        reachability_graph(net)
    assert {"s": 0, "x": 1, "y": 0} in info.value.markings or {
        "s": 0,
        "x": 0,
        "y": 1,
    } in info.value.markings


def test_vanishing_initial_marking_loop_is_reported():
    net = Net(
        {"x": 1, "y": 0},
        [
            immediate("xy", inputs={"x": 1}, outputs={"y": 1}),
            immediate("yx", inputs={"y": 1}, outputs={"x": 1}),
        ],
    )
    with pytest.raises(VanishingLoopError):
        reachability_graph(net)


def test_immediate_transitions_that_fire_forever_hit_the_depth_limit():
    # Every firing makes a new marking, so there is no loop to detect: the depth limit
    # stops it.
    net = Net({"p": 1, "q": 0}, [immediate("grow", inputs={"p": 1}, outputs={"p": 1, "q": 1})])
    with pytest.raises(LimitExceededError) as info:
        reachability_graph(net, limits=Limits(max_vanishing_depth=40))
    assert info.value.limit == "max_vanishing_depth"
    assert info.value.maximum == 40


def test_state_space_limit_names_the_limit_and_the_count():
    unbounded = Net({"p": 0}, [timed("make", 1.0, outputs={"p": 1})])
    with pytest.raises(LimitExceededError, match="max_states=500") as info:
        reachability_graph(unbounded, limits=Limits(max_states=500))
    err = info.value
    assert (err.limit, err.maximum, err.field) == ("max_states", 500, "max_states")
    assert err.reached > 500
    # A bounded net below the limit is fine.
    assert reachability_graph(queue(K=499), limits=Limits(max_states=500)).n_states == 500


def test_edge_transition_and_place_limits():
    with pytest.raises(LimitExceededError) as info:
        reachability_graph(queue(K=50), limits=Limits(max_edges=20))
    assert info.value.limit == "max_edges"
    with pytest.raises(LimitExceededError) as info:
        compile_net(queue(), Limits(max_transitions=1))
    assert (info.value.limit, info.value.maximum, info.value.reached) == ("max_transitions", 1, 2)
    with pytest.raises(LimitExceededError) as info:
        compile_net(Net({f"p{i}": 0 for i in range(5)}, []), Limits(max_places=4))
    assert (info.value.limit, info.value.reached) == ("max_places", 5)


def test_token_overflow_is_reported():
    net = Net({"p": 1}, [timed("double", 1.0, outputs={"p": "2 ** 30"})])
    with pytest.raises(EvaluationError, match="more than") as info:
        reachability_graph(net)
    assert info.value.transition == "double"


# -- net structure -----------------------------------------------------------------------


def test_unknown_place_in_an_arc():
    with pytest.raises(NetDefinitionError, match="unknown place 'ghost'") as info:
        Net({"p": 1}, [timed("t", 1.0, inputs={"p": 1}, outputs={"ghost": 1})])
    assert info.value.field == "transitions.t.outputs.ghost"


@pytest.mark.parametrize("mult", [-1, 1.5, True, float("nan"), float("inf"), [1], None])
def test_bad_constant_arc_multiplicity(mult):
    with pytest.raises(NetDefinitionError) as info:
        Net({"p": 1}, [timed("t", 1.0, inputs={"p": mult})])
    assert info.value.field == "transitions.t.inputs.p"


@pytest.mark.parametrize("mult", ["-1", "1 / 2", "10 ** 400", "(-1) ** 0.5"])
def test_bad_constant_arc_expression_is_rejected_at_compile_time(mult):
    with pytest.raises(NetDefinitionError, match="multiplicity") as info:
        compile_net(Net({"p": 1}, [timed("t", 1.0, inhibitors={"p": mult})]))
    assert info.value.field == "transitions.t.inhibitors.p"


@pytest.mark.parametrize("mult", ["#p - 2", "#p / 2"])
def test_bad_arc_multiplicity_at_a_reachable_marking(mult):
    net = Net({"p": 3, "q": 0}, [timed("t", 1.0, inputs={"p": 1}, outputs={"q": mult})])
    with pytest.raises(EvaluationError, match="multiplicity") as info:
        reachability_graph(net)
    assert info.value.transition == "t"
    assert info.value.marking["p"] in (1, 3)


@pytest.mark.parametrize("tokens", [-1, 1.5, True, "3", None])
def test_bad_initial_tokens(tokens):
    with pytest.raises(NetDefinitionError) as info:
        Net({"p": tokens}, [])
    assert info.value.field == "places.p.tokens"


def test_too_many_initial_tokens():
    with pytest.raises(NetDefinitionError, match="exceed"):
        compile_net(Net({"p": 2**40}, []))


@pytest.mark.parametrize("name", ["", "1abc", "a-b", "a b", "x" * 129, "#p", "é"])
def test_bad_names(name):
    with pytest.raises(NetDefinitionError, match="name"):
        Net([Place(name, 0)], [])
    with pytest.raises(NetDefinitionError, match="name"):
        Net({"p": 0}, [timed(name, 1.0)])
    with pytest.raises(NetDefinitionError, match="name"):
        Net({"p": 0}, [], parameters={name: 1.0})


def test_duplicate_names():
    with pytest.raises(NetDefinitionError, match="duplicate place 'p'") as info:
        Net([Place("p", 0), Place("p", 1)], [])
    assert info.value.field == "places.p"
    with pytest.raises(NetDefinitionError, match="duplicate transition 't'") as info:
        Net({"p": 0}, [timed("t", 1.0), timed("t", 2.0)])
    assert info.value.field == "transitions.t"


@pytest.mark.parametrize(
    ("transition", "field"),
    [
        (Transition("t", kind="delayed"), "transitions.t.kind"),
        (Transition("t", kind="immediate", priority=1.5), "transitions.t.priority"),
        (Transition("t", kind="immediate", priority=True), "transitions.t.priority"),
    ],
)
def test_bad_kind_and_priority(transition, field):
    with pytest.raises(NetDefinitionError) as info:
        Net({"p": 0}, [transition])
    assert info.value.field == field


@pytest.mark.parametrize("value", [float("nan"), float("inf"), True, "1.0", None])
def test_bad_parameter_values(value):
    with pytest.raises(NetDefinitionError) as info:
        Net({"p": 0}, [], parameters={"k": value})
    assert info.value.field == "parameters.k"


def test_non_place_and_non_transition_objects():
    with pytest.raises(NetDefinitionError) as info:
        Net(["p"], [])
    assert info.value.field == "places[0]"
    with pytest.raises(NetDefinitionError) as info:
        Net({"p": 0}, [{"name": "t"}])
    assert info.value.field == "transitions[0]"


def test_errors_are_value_errors():
    for cls in (EvaluationError, ExpressionError, LimitExceededError, NetDefinitionError):
        assert issubclass(cls, SRNError) and issubclass(cls, ValueError)


# -- JSON form -------------------------------------------------------------------------


def full_featured_net() -> Net:
    return Net(
        {"idle": 2, "busy": 0, "v": 0, "done": 0},
        [
            timed("start", "lam * #idle", inputs={"idle": 1}, outputs={"v": 1}),
            immediate(
                "fast",
                weight="w",
                priority=2,
                inputs={"v": 1},
                outputs={"busy": 1},
                guard="#busy < 1",
            ),
            immediate("slow", weight=1, inputs={"v": 1}, outputs={"done": 1}),
            timed(
                "finish", "mu", inputs={"busy": 1}, outputs={"idle": 1}, inhibitors={"done": "K"}
            ),
            timed(
                "flush", 0.5, inputs={"done": "#done"}, outputs={"idle": "#done"}, guard="#done > 0"
            ),
        ],
        parameters={"lam": 1.5, "mu": 2.0, "w": 3.0, "K": 2},
    )


def test_to_dict_from_dict_round_trip_through_json():
    net = full_featured_net()
    text = json.dumps(net.to_dict())
    again = Net.from_dict(json.loads(text))
    assert again == net
    assert again.to_dict() == net.to_dict()
    # The two solve to the same answer.
    pis = []
    for candidate in (net, again):
        graph = reachability_graph(candidate)
        pis.append(steady_state(graph.generator()).probabilities)
    np.testing.assert_array_equal(pis[0], pis[1])


def test_from_dict_accepts_a_list_of_places():
    net = Net.from_dict(
        {
            "places": [{"name": "p", "tokens": 1}, {"name": "q"}],
            "transitions": [{"name": "t", "rate": 2.0, "inputs": {"p": 1}, "outputs": {"q": 1}}],
        }
    )
    assert net.places == (Place("p", 1), Place("q", 0))
    assert net.transitions[0].kind == "timed"


@pytest.mark.parametrize(
    ("data", "field"),
    [
        ({"places": 3}, "places"),
        ({"places": [{"tokens": 1}]}, "places[0]"),
        ({"places": ["p"]}, "places[0]"),
        ({"places": {"p": -2}}, "places.p.tokens"),
        ({"places": {"p": 1}, "transitions": 5}, "transitions"),
        ({"places": {"p": 1}, "transitions": None}, "transitions"),
        ({"places": {"p": 1}, "transitions": "t"}, "transitions"),
        ({"places": {"p": 1}, "transitions": [{"rate": 1}]}, "transitions[0]"),
        ({"places": {"p": 1}, "transitions": [{"name": "t", "speed": 1}]}, "transitions[0]"),
        (
            {"places": {"p": 1}, "transitions": [{"name": "t", "inputs": [1]}]},
            "transitions[0].inputs",
        ),
        (
            {"places": {"p": 1}, "transitions": [{"name": "t", "inputs": {"x": 1}}]},
            "transitions.t.inputs.x",
        ),
        (
            {"places": {"p": 1}, "transitions": [{"name": "t", "kind": "slow"}]},
            "transitions.t.kind",
        ),
        ({"places": {"p": 1}, "parameters": [1]}, "parameters"),
        ({"places": {"p": 1}, "parameters": {"a": "x"}}, "parameters.a"),
    ],
)
def test_from_dict_errors_name_the_field(data, field):
    with pytest.raises(NetDefinitionError) as info:
        Net.from_dict(data)
    assert info.value.field == field


def test_from_dict_rejects_a_non_object():
    with pytest.raises(NetDefinitionError, match="JSON object"):
        Net.from_dict([1, 2])


def test_from_dict_expression_errors_surface_at_compile_time_with_the_field():
    net = Net.from_dict(
        {"places": {"p": 1}, "transitions": [{"name": "t", "rate": "__import__('os')"}]}
    )
    with pytest.raises(ExpressionError) as info:
        compile_net(net)
    assert info.value.field == "transitions.t.rate"


@pytest.mark.parametrize(
    ("generator", "words"),
    [
        # The diagonal is not minus the row's other rates: routes would answer different
        # chains (GTH and the LU's refinement read only the off-diagonal rates).
        ([[-1.0, 1.0], [2.0, -2.000001]], "row 1 of the generator sums to"),
        ([[-1.0, 1.0], [-2.0, 2.0]], "negative rate -2 from state 1 to state 0"),
        ([[-1.0, 1.0], [np.inf, -np.inf]], "non-finite rate in row 1"),
    ],
)
def test_a_matrix_that_is_not_a_generator_is_refused_by_every_solver(generator, words):
    from srn import time_to_absorption, transient

    Q = np.array(generator)
    for solve in (
        lambda: steady_state(Q),
        lambda: transient(Q, [1.0], [1.0, 0.0]),
        lambda: time_to_absorption(Q, [1.0, 0.0]),
    ):
        with pytest.raises(SRNError, match=words):
            solve()


def test_rounding_in_a_generator_row_is_accepted():
    # Rates spanning 12 decades, the diagonal summed in double: a few units in the 16th
    # digit of the row's total, far inside the check's 1e-9.
    rates = np.array([1e-6, 3.3, 7e5, 0.1])
    Q = np.diag(rates[:-1], 1) + np.diag(rates[1:] / 3, -1)
    np.fill_diagonal(Q, -Q.sum(axis=1))
    assert steady_state(Q).residual < 1e-9
