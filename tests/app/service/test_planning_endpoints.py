"""POST /queues/nic, /transfer-time and /srn/solve against independent references."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pytest
import scipy.linalg as la
from fastapi.testclient import TestClient


def mm1k(rho: float, k: int) -> tuple[float, float]:
    """M/M/1/K blocking probability and mean number in system (Kleinrock, Queueing
    Systems vol. 1, sec. 3.6): p_n = (1 - rho) rho^n / (1 - rho^(K+1))."""
    p = np.array([rho**n for n in range(k + 1)])
    p /= p.sum()
    return float(p[k]), float(p @ np.arange(k + 1))


# -- NIC queue -----------------------------------------------------------------------------


def test_nic_queue_with_batch_one_is_mm1k(client: TestClient) -> None:
    mu, k = 20_000.0, 16
    lam = [5_000.0, 15_000.0, 19_000.0, 30_000.0]
    r = client.post(
        "/queues/nic",
        json={
            "arrival_rates_pps": lam,
            "service_rate_per_s": mu,
            "buffer_packets": k,
            "coalesce_packets": 1,
        },
    )
    assert r.status_code == 200, r.text
    body = r.json()
    for i, rate in enumerate(lam):
        loss, mean = mm1k(rate / mu, k)
        # Closed form vs the exact solver: agreement to rounding (1e-12 relative).
        assert body["loss_probability"][i] == pytest.approx(loss, rel=1e-12)
        assert body["mean_occupancy"][i] == pytest.approx(mean, rel=1e-12)
    # Send rates are arrival rates times 8 S_pkt (docs/conventions.md §3).
    assert body["send_rate_bps"][0] == pytest.approx(lam[0] * 8 * 1468)


def test_nic_queue_from_send_rates(client: TestClient) -> None:
    r = client.post(
        "/queues/nic",
        json={
            "send_rates_bps": [5e8, 1e9],
            "service_rate_per_s": 20_800.0,
            "buffer_packets": 64,
            "coalesce_packets": 6,
            "include_distribution": True,
        },
    )
    body = r.json()
    assert body["arrival_rate_pps"] == pytest.approx([5e8 / (8 * 1468), 1e9 / (8 * 1468)])
    dist = np.array(body["occupancy_distribution"])
    assert dist.shape == (2, 65)
    assert dist.sum(axis=1) == pytest.approx([1.0, 1.0], abs=1e-12)
    assert body["loss_probability"] == pytest.approx(dist[:, 64].tolist(), rel=1e-12)
    # Flow balance: accepted packets = interrupts x batch.
    assert body["throughput_pps"] == pytest.approx(
        np.multiply(body["interrupt_rate_per_s"], body["mean_batch"]).tolist(), rel=1e-9
    )


def test_nic_queue_buffer_smaller_than_batch_names_the_field(
    client: TestClient, problem_of: Any
) -> None:
    r = client.post(
        "/queues/nic",
        json={
            "arrival_rates_pps": [1e4],
            "service_rate_per_s": 2e4,
            "buffer_packets": 4,
            "coalesce_packets": 6,
        },
    )
    body = problem_of(r, 422)
    assert body["type"] == "/problems/invalid-parameter"
    assert body["errors"][0]["field"] == "body.buffer_packets"


def test_nic_queue_needs_exactly_one_rate_list(client: TestClient, problem_of: Any) -> None:
    r = client.post(
        "/queues/nic",
        json={"service_rate_per_s": 2e4, "buffer_packets": 64, "coalesce_packets": 6},
    )
    assert problem_of(r, 422)["type"] == "/problems/validation-error"


# -- transfer time -------------------------------------------------------------------------


def test_transfer_time_without_loss_is_the_hand_formula(client: TestClient) -> None:
    size, delay, payload = 500_000_000, 0.1, 1468
    r = client.post(
        "/transfer-time",
        json={
            "file_size_bytes": size,
            "propagation_delay_s": delay,
            "send_rates_bps": [2e8, 1e9],
            "loss_model": {"kind": "constant", "loss": 0.0},
        },
    )
    assert r.status_code == 200, r.text
    body = r.json()
    total = size + math.ceil(size / payload) * 32  # S with 32 B of UDP/IP per packet
    assert body["total_bytes"] == total
    for rate, t in zip([2e8, 1e9], body["curve"]["total_s"], strict=True):
        b = rate / 8
        # docs/conventions.md §4 with l = 0: one blast, one bitmap, two propagation delays.
        expected = delay + total / b + (total / (8 * payload * b) + delay)
        assert t == pytest.approx(expected, rel=1e-12)
    # Without loss, faster is always better: the optimum is the line rate.
    assert body["optimum"]["rate_bps"] == pytest.approx(1e9)
    assert body["optimum"]["limited_by"] == "line-rate"


def test_transfer_time_never_completes_is_null_not_infinity(client: TestClient) -> None:
    r = client.post(
        "/transfer-time",
        json={
            "file_size_bytes": 10_000_000,
            "propagation_delay_s": 0.01,
            "curve_points": 4,
            "loss_model": {"kind": "table", "send_rate_bps": [1e8, 1e9], "loss": [1.0, 1.0]},
        },
    )
    assert r.status_code == 200, r.text
    body = r.json()
    assert body["curve"]["completes"] == [False] * 4
    assert body["curve"]["total_s"] == [None] * 4
    assert body["optimum"] is None


def test_transfer_time_with_the_nic_queue_loss(client: TestClient) -> None:
    r = client.post(
        "/transfer-time",
        json={
            "file_size_bytes": 500_000_000,
            "propagation_delay_s": 0.1,
            "curve_points": 20,
            "loss_model": {
                "kind": "nic-queue",
                "service_rate_per_s": 20_800.0,
                "buffer_packets": 64,
                "coalesce_packets": 6,
            },
        },
    )
    body = r.json()
    best = body["optimum"]
    # T at the optimum is no larger than anywhere on the plotted curve.
    assert best["transfer_time_s"] <= min(t for t in body["curve"]["total_s"] if t) + 1e-12
    assert 0 < best["rate_bps"] <= 1e9


# -- general SRN ---------------------------------------------------------------------------


def queue_net(k: int, lam: float = 1.0, mu: float = 2.0) -> dict[str, Any]:
    return {
        "places": {"queue": 0},
        "transitions": [
            {"name": "arrive", "rate": "lam", "outputs": {"queue": 1}, "inhibitors": {"queue": k}},
            {"name": "serve", "rate": "mu", "inputs": {"queue": 1}},
        ],
        "parameters": {"lam": lam, "mu": mu},
    }


@pytest.mark.parametrize("k", [5, 120])  # 120 states: beyond inprocess_max_states=50
def test_srn_steady_state_is_mm1k(client: TestClient, k: int) -> None:
    r = client.post(
        "/srn/solve",
        json={
            "net": queue_net(k),
            "parameters": {"lam": 1.5},
            "measures": {"rewards": {"n": "#queue"}, "probabilities": {"full": f"#queue == {k}"}},
        },
    )
    assert r.status_code == 200, r.text
    body = r.json()
    assert body["n_states"] == k + 1
    assert body["solved_in"] == ("process" if k + 1 <= 50 else "worker-pool")
    loss, mean = mm1k(1.5 / 2.0, k)
    ss = body["steady_state"]
    assert ss["residual"] < 1e-10
    assert ss["measures"]["probabilities"]["full"] == pytest.approx(loss, rel=1e-9)
    assert ss["measures"]["rewards"]["n"] == pytest.approx(mean, rel=1e-9)
    assert ss["measures"]["throughput"]["serve"] == pytest.approx(1.5 * (1 - loss), rel=1e-9)


def test_srn_transient_matches_the_matrix_exponential(client: TestClient) -> None:
    lam, mu = 0.7, 1.3
    net = {
        "places": {"up": 1, "down": 0},
        "transitions": [
            {"name": "fail", "rate": lam, "inputs": {"up": 1}, "outputs": {"down": 1}},
            {"name": "repair", "rate": mu, "inputs": {"down": 1}, "outputs": {"up": 1}},
        ],
    }
    times = [0.0, 0.5, 2.0]
    r = client.post(
        "/srn/solve",
        json={
            "net": net,
            "analysis": "transient",
            "times": times,
            "measures": {"probabilities": {"up": "#up == 1"}},
            "include_distribution": True,
        },
    )
    assert r.status_code == 200, r.text
    body = r.json()["transient"]
    Q = np.array([[-lam, lam], [mu, -mu]])
    for t, p_up in zip(times, body["measures"]["probabilities"]["up"], strict=True):
        # scipy.linalg.expm as the independent reference; tolerance covers the reported
        # truncation bound.
        assert p_up == pytest.approx(float(la.expm(Q * t)[0, 0]), abs=1e-10)


def test_srn_absorption_is_erlang(client: TestClient) -> None:
    rate = 3.0
    net = {
        "places": {"stage": 3, "done": 0},
        "transitions": [
            {"name": "step", "rate": rate, "inputs": {"stage": 1}, "outputs": {"done": 1}}
        ],
    }
    times = [0.5, 1.0, 2.0]
    r = client.post("/srn/solve", json={"net": net, "analysis": "absorption", "times": times})
    assert r.status_code == 200, r.text
    body = r.json()["absorption"]
    # Erlang(3, rate): mean 3/rate, variance 3/rate^2, CDF 1 - sum_{k<3} e^{-rt}(rt)^k/k!.
    assert body["mean_s"] == pytest.approx(3 / rate, rel=1e-12)
    assert body["variance_s2"] == pytest.approx(3 / rate**2, rel=1e-12)
    for t, cdf in zip(times, body["cdf"], strict=True):
        x = rate * t
        expected = 1 - math.exp(-x) * (1 + x + x * x / 2)
        assert cdf == pytest.approx(expected, abs=1e-10)


def test_srn_results_do_not_depend_on_where_they_are_solved(make_client: Any) -> None:
    request = {"net": queue_net(80), "measures": {"rewards": {"n": "#queue"}}}
    in_process = make_client(inprocess_max_states=10_000).post("/srn/solve", json=request)
    in_pool = make_client(inprocess_max_states=10).post("/srn/solve", json=request)
    assert in_process.json()["solved_in"] == "process"
    assert in_pool.json()["solved_in"] == "worker-pool"
    a, b = in_process.json()["steady_state"], in_pool.json()["steady_state"]
    assert a == b


@pytest.mark.parametrize(
    ("mutate", "kind", "field"),
    [
        (
            lambda n: n["transitions"][0].update(rate="__import__('os')"),
            "invalid-model",
            "body.net.transitions.arrive.rate",
        ),
        (
            lambda n: n["transitions"][0].update(rate="nosuch * 2"),
            "invalid-model",
            "body.net.transitions.arrive.rate",
        ),
        (
            lambda n: n["transitions"][1]["inputs"].update(ghost=1),
            "invalid-model",
            "body.net.transitions.serve.inputs.ghost",
        ),
        (
            lambda n: n["transitions"].append({"name": "arrive"}),
            "invalid-model",
            "body.net.transitions.arrive",
        ),
    ],
)
def test_malformed_nets_name_the_field(
    client: TestClient, mutate: Any, kind: str, field: str, problem_of: Any
) -> None:
    net = queue_net(3)
    mutate(net)
    body = problem_of(client.post("/srn/solve", json={"net": net}), 422)
    assert body["type"] == f"/problems/{kind}"
    assert body["errors"][0]["field"] == field


def test_a_chain_that_is_not_ergodic_has_no_steady_state(
    client: TestClient, problem_of: Any
) -> None:
    net = {
        "places": {"start": 1, "left": 0, "right": 0},
        "transitions": [
            {"name": "go_left", "rate": 1.0, "inputs": {"start": 1}, "outputs": {"left": 1}},
            {"name": "go_right", "rate": 1.0, "inputs": {"start": 1}, "outputs": {"right": 1}},
        ],
    }
    body = problem_of(client.post("/srn/solve", json={"net": net}), 422)
    assert body["type"] == "/problems/unsolvable-model"


def test_transient_needs_times(client: TestClient, problem_of: Any) -> None:
    body = problem_of(
        client.post("/srn/solve", json={"net": queue_net(3), "analysis": "transient"}), 422
    )
    assert body["errors"][0]["field"] == "body.times"


def test_nic_queue_far_above_saturation_is_answered(client: TestClient) -> None:
    # Issue #13: this body was a 500 (SuperLU: "Factor is exactly singular").  The answer
    # is the saturation limit, 1 - loss = mu * clip(K/2, a, b) / lam (queues._general).
    body = {
        "buffer_packets": 243,
        "coalesce_packets": 243,
        "arrival_rates_pps": [4.6e11],
        "min_batch": 1,
        "service_rate_per_s": 1e-6,
    }
    r = client.post("/queues/nic", json=body)
    assert r.status_code == 200, r.text
    out = r.json()
    assert out["throughput_pps"][0] == pytest.approx(1e-6 * 121.5, rel=1e-9)
    assert 0.0 < 1.0 - out["loss_probability"][0] < 1e-15
