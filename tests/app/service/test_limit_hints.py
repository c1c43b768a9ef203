"""A limit error says how to raise the limit: ``raise_with`` names the setting."""

from __future__ import annotations

from typing import Any

from app.schemas.problems import FieldProblem, ProblemError, limit_setting
from app.settings import Settings


def _cycle(tokens: int) -> dict[str, Any]:
    # Three places in a cycle: (tokens + 1)(tokens + 2) / 2 markings.
    return {
        "places": {"a": tokens, "b": 0, "c": 0},
        "transitions": [
            {"name": "ab", "rate": 1.0, "inputs": {"a": 1}, "outputs": {"b": 1}},
            {"name": "bc", "rate": 2.0, "inputs": {"b": 1}, "outputs": {"c": 1}},
            {"name": "ca", "rate": 3.0, "inputs": {"c": 1}, "outputs": {"a": 1}},
        ],
    }


def test_max_states_problem_names_its_setting(client: Any, problem_of: Any) -> None:
    # 120 tokens: 121 * 122 / 2 = 7381 markings, over the test limit of 5000.
    body = problem_of(client.post("/srn/solve", json={"net": _cycle(120)}), 422)
    entry = body["errors"][0]
    assert entry["limit"] == "max_states"
    assert entry["allowed"] == 5_000
    assert entry["raise_with"] == "BLASTRATE_MAX_STATES"


def test_every_setting_limit_has_its_variable() -> None:
    for name in Settings.model_fields:
        assert limit_setting(name) == f"BLASTRATE_{name.upper()}"
    assert limit_setting("max_tasks") is None  # a bound of the model, not a setting
    assert limit_setting(None) is None


def test_raise_with_survives_a_round_trip() -> None:
    problem = ProblemError(
        "limit-exceeded", "too many", [FieldProblem("body.net", "too many", "max_edges", 10, 11)]
    )
    body = problem.to_dict("/srn/solve")
    assert body["errors"][0]["raise_with"] == "BLASTRATE_MAX_EDGES"
    again = ProblemError.from_dict(body)  # as a worker process sends it back
    assert again.to_dict("/srn/solve") == body
    plain = FieldProblem("query.cpu_tasks", "must be an integer").to_dict()
    assert "raise_with" not in plain  # only limit entries carry it
