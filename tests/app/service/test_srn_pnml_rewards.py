"""POST /srn/solve with a PNML net and with impulse rewards."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

DATA = Path(__file__).parents[2] / "srn" / "data"
CLASSIC = (DATA / "pipe-ClassicGSPN.xml").read_text(encoding="iso-8859-1")

MACHINE = {
    "places": {"up": 1, "down": 0},
    "transitions": [
        {"name": "fail", "rate": 0.5, "inputs": {"up": 1}, "outputs": {"down": 1}},
        {"name": "repair", "rate": 2.0, "inputs": {"down": 1}, "outputs": {"up": 1}},
    ],
}


def test_pnml_net_solves_like_its_json_form(client: TestClient) -> None:
    """PIPE's ClassicGSPN: product form gives throughput 1/2 for every transition
    (see tests/srn/test_srn_pnml.py); the JSON form of the same net answers the same."""
    import srn

    r = client.post("/srn/solve", json={"pnml": CLASSIC})
    assert r.status_code == 200, r.text
    body = r.json()
    assert body["n_states"] == 6
    thr = body["steady_state"]["measures"]["throughput"]
    assert thr == pytest.approx({"T0": 0.5, "T1": 0.5, "T2": 0.5}, rel=1e-12)
    as_json = client.post("/srn/solve", json={"net": srn.read_pnml(CLASSIC).to_dict()}).json()
    assert as_json["steady_state"]["measures"] == body["steady_state"]["measures"]


def test_exactly_one_of_net_and_pnml(client: TestClient, problem_of: Any) -> None:
    body = problem_of(client.post("/srn/solve", json={"net": MACHINE, "pnml": CLASSIC}), 422)
    assert "exactly one" in body["errors"][0]["reason"]


@pytest.mark.parametrize(
    ("doc", "words"),
    [
        (
            '<?xml version="1.0"?><!DOCTYPE p [<!ENTITY a "aaaa"><!ENTITY b "&a;&a;&a;">]>'
            '<pnml><net id="n"><place id="p"><name><value>&b;</value></name></place></net></pnml>',
            "forbidden XML construct",
        ),
        (
            '<?xml version="1.0"?><!DOCTYPE p [<!ENTITY s SYSTEM "file:///etc/passwd">]>'
            "<pnml><net id='n'><place id='p'><name><value>&s;</value></name></place></net></pnml>",
            "forbidden XML construct",
        ),
        ("<pnml><net id='n'><place id='p'>", "not well-formed"),
        (
            "<pnml><net id='n'>\n<place id='p'><capacity><value>2</value></capacity></place>"
            "</net></pnml>",
            "<capacity> at line 2",
        ),
    ],
)
def test_bad_pnml_is_a_problem_naming_the_field(
    client: TestClient, problem_of: Any, doc: str, words: str
) -> None:
    body = problem_of(client.post("/srn/solve", json={"pnml": doc}), 422)
    assert body["errors"][0]["field"] == "body.pnml"
    assert words in body["errors"][0]["reason"]


def test_pnml_element_limit_is_named(make_client: Any, problem_of: Any) -> None:
    small = make_client(max_pnml_elements=30)
    body = problem_of(small.post("/srn/solve", json={"pnml": CLASSIC}), 422)
    assert body["type"] == "/problems/limit-exceeded"
    error = body["errors"][0]
    assert (error["field"], error["limit"], error["allowed"]) == (
        "body.pnml",
        "max_pnml_elements",
        30,
    )


def test_impulse_reward_in_steady_state(client: TestClient) -> None:
    """Machine with lam = 0.5, mu = 2, revenue 1/s while up, each repair costs 3:
    P(up) - 3 lam mu / (lam + mu) = 0.8 - 1.2 = -0.4 (derivation in
    tests/srn/test_srn_rewards.py)."""
    r = client.post(
        "/srn/solve",
        json={
            "net": MACHINE,
            "measures": {
                "rewards": {
                    "profit": {"rate": "#up", "impulse": {"repair": -3.0}},
                    "repairs": {"impulse": {"repair": 1.0}},
                    "up": "#up",
                }
            },
        },
    )
    assert r.status_code == 200, r.text
    rewards = r.json()["steady_state"]["measures"]["rewards"]
    assert rewards == pytest.approx({"profit": -0.4, "repairs": 0.4, "up": 0.8}, rel=1e-12)


def test_accumulated_rewards_in_transient(client: TestClient) -> None:
    """From up: expected repairs over [0, t] = mu D(t), D(t) = lam/s t - lam/s^2 (1 - e^{-st}),
    s = lam + mu.  At t = 1: D = 0.2 - 0.08 (1 - e^{-2.5})."""
    import math

    r = client.post(
        "/srn/solve",
        json={
            "net": MACHINE,
            "analysis": "transient",
            "times": [1.0],
            "measures": {"rewards": {"repairs": {"impulse": {"repair": 1.0}}}},
        },
    )
    assert r.status_code == 200, r.text
    measures = r.json()["transient"]["measures"]
    D = 0.2 - 0.08 * (1 - math.exp(-2.5))
    assert measures["accumulated_rewards"]["repairs"] == pytest.approx([2.0 * D], rel=1e-11)
    # The instantaneous rate at t: mu P(down, t) = 2 * 0.2 (1 - e^{-2.5}).
    assert measures["rewards"]["repairs"] == pytest.approx([0.4 * (1 - math.exp(-2.5))], rel=1e-11)


def test_impulse_on_unknown_transition_names_the_field(client: TestClient, problem_of: Any) -> None:
    body = problem_of(
        client.post(
            "/srn/solve",
            json={"net": MACHINE, "measures": {"rewards": {"x": {"impulse": {"nope": 1.0}}}}},
        ),
        422,
    )
    assert body["errors"][0]["field"] == "body.measures.rewards.x.impulse.nope"
