"""The NIC queue built as a stochastic Petri net in the SRN engine, against ``queues``.

Issue #4 asks for the paper's Fig. 2 net -- an arrival transition with an inhibitor arc of
multiplicity K on the buffer, and a service transition with an input arc of multiplicity
N (the fixed-batch rule: enabled only when >= N packets are present, takes exactly N) --
solved by the SRN engine (``srn.reachability_graph`` + ``srn.steady_state``), to agree
with the dedicated solver ``queues.bulk_service_queue`` to 1e-12.  The general rule
[a, b] and phase-type service need the server state in the chain; they are built here
as SRNs too (an ``idle`` place, a ``batch`` place holding the packets in service, and one
place per service phase), so the engine constructs the chain, not the test.

The two sides share no code: the engine generates the reachability graph from the net
and solves the generator by LU; ``queues`` solves the chain with a cut recursion (fixed
batch), level censoring (phase type) or a reduced sparse system ([a, b]).

Tolerances: 1e-12 absolute on every probability (distribution, loss, busy probability),
and 1e-12 relative on rates and means (throughput, interrupt rate, mean occupancy,
mean batch), the level the issue sets.  Both solvers are backward stable on chains of at
most a few hundred states, so the differences seen are ~1e-15.
"""

from __future__ import annotations

import numpy as np
import pytest

from queues import bulk_service_queue
from srn import Net, ReachabilityGraph, compile_net, immediate, steady_state, timed

MU = 20_800.0  # interrupts/s: the docs/conventions.md §2 check value (C = 1, I = 0, sx280-2007)
PKT = 1468  # bytes (docs/conventions.md §3)
PAPER_LAMBDA = 1e9 / (8 * PKT)  # packets/s at the paper's 1 Gbps line rate

# (K, N, lambda, mu): the paper's NIC (K = 64, N = 6) at 1 Gbps and at 500 Mbps; an
# M/M/1/K (N = 1); K = N (a service empties the buffer); a light load with tiny loss; a
# heavy overload; modest numbers far from the paper's scale.
FIXED_POINTS = [
    (64, 6, PAPER_LAMBDA, MU),
    (64, 6, PAPER_LAMBDA / 2, MU),
    (16, 1, 3.0, 2.0),
    (12, 12, 7.0, 1.0),
    (40, 7, 0.3, 1.0),
    (30, 4, 500.0, 20.0),
    (9, 2, 1.0, 1.0),
]


def fig2_net(K: int, N: int) -> Net:
    """The paper's Fig. 2: M/M[N]/1/K as a Petri net with one place.

    ``arrive`` (rate lam) adds a packet unless the inhibitor arc of multiplicity K sees a
    full buffer; ``serve`` (rate mu) has an input arc of multiplicity N, so it is enabled
    only when at least N packets are present and removes exactly N.
    """
    return Net(
        {"buffer": 0},
        [
            timed("arrive", "lam", outputs={"buffer": 1}, inhibitors={"buffer": K}),
            timed("serve", "mu", inputs={"buffer": N}),
        ],
        parameters={"lam": 1.0, "mu": 1.0},
    )


def general_rule_net(
    K: int, a: int, b: int, alpha: np.ndarray | None = None, T: np.ndarray | None = None
) -> Net:
    """The rule [a, b] (docs/conventions.md §3) with exponential (rate mu) or phase-type service.

    Places: ``waiting`` (packets not yet taken), ``batch`` (packets of the batch in
    service, 0 when idle), ``idle`` (1 when no interrupt is being served), and with
    phase-type service one place ``ph<k>`` per phase.  The buffer holds
    ``#waiting + #batch`` packets, so an arrival is blocked by a guard at K.  The
    immediate ``start`` fires as soon as the server is idle and >= a packets wait, moving
    ``min(#waiting, b)`` tokens into ``batch`` (multiplicities evaluated in the marking
    before firing, so the batch is fixed when the service starts) and, with phases, one
    token into phase k with weight alpha_k.  ``done`` returns all ``#batch`` tokens'
    worth of service: it empties ``batch`` and marks the server idle.
    """
    take = f"min(#waiting, {b})"
    places = {"waiting": 0, "batch": 0, "idle": 1}
    transitions = [timed("arrive", "lam", outputs={"waiting": 1}, guard=f"#waiting + #batch < {K}")]
    if alpha is None or T is None:
        transitions += [
            immediate(
                "start",
                inputs={"idle": 1, "waiting": take},
                outputs={"batch": take},
                guard=f"#waiting >= {a}",
            ),
            timed(
                "done", "mu", inputs={"batch": "#batch"}, outputs={"idle": 1}, guard="#batch > 0"
            ),
        ]
        return Net(places, transitions, parameters={"lam": 1.0, "mu": 1.0})
    m = alpha.size
    exits = -T.sum(axis=1)
    places |= {f"ph{k}": 0 for k in range(m)}
    for k in range(m):
        if alpha[k] > 0:
            transitions.append(
                immediate(
                    f"start{k}",
                    weight=float(alpha[k]),
                    inputs={"idle": 1, "waiting": take},
                    outputs={"batch": take, f"ph{k}": 1},
                    guard=f"#waiting >= {a}",
                )
            )
        if exits[k] > 0:
            transitions.append(
                timed(
                    f"done{k}",
                    float(exits[k]),
                    inputs={f"ph{k}": 1, "batch": "#batch"},
                    outputs={"idle": 1},
                )
            )
        transitions += [
            timed(f"move{k}_{j}", float(T[k, j]), inputs={f"ph{k}": 1}, outputs={f"ph{j}": 1})
            for j in range(m)
            if j != k and T[k, j] > 0
        ]
    return Net(places, transitions, parameters={"lam": 1.0})


def occupancy(graph: ReachabilityGraph, pi: np.ndarray, K: int, expression: str) -> np.ndarray:
    """P(buffer holds n packets), n = 0..K, from the SRN's states."""
    level = graph.reward(expression).astype(np.int64)
    return np.bincount(level, weights=pi, minlength=K + 1)


def assert_same_queue(
    graph: ReachabilityGraph, level: str, busy: str, service_transitions: list[str], sol, K: int
) -> None:
    """Compare the engine's solution (rates taken from ``graph.parameters``) with ``sol``
    (a one-rate BulkQueueSolution), measure by measure."""
    Q = graph.generator()
    ss = steady_state(Q)
    assert ss.residual < 1e-12 * float(np.abs(Q.diagonal()).max())
    pi = ss.probabilities
    dist = occupancy(graph, pi, K, level)
    lam = graph.parameters["lam"]
    np.testing.assert_allclose(sol.occupancy_distribution[0], dist, rtol=0, atol=1e-12)
    assert sol.loss_probability[0] == pytest.approx(dist[K], abs=1e-12)
    assert sol.busy_probability[0] == pytest.approx(graph.probability(busy, pi), abs=1e-12)
    assert sol.mean_occupancy[0] == pytest.approx(graph.expected_reward(level, pi), rel=1e-12)
    flows = graph.throughput(pi)
    # The engine's firing rate of "arrive" is the accepted packet rate: an independent
    # route to the throughput (not lam * (1 - P(K)), which the solver itself uses).
    assert sol.throughput_pps[0] == pytest.approx(flows["arrive"], rel=1e-12)
    assert sol.throughput_bps[0] == pytest.approx(8 * PKT * flows["arrive"], rel=1e-12)
    completions = sum(flows[name] for name in service_transitions)
    assert sol.interrupt_rate[0] == pytest.approx(completions, rel=1e-12)
    assert flows["arrive"] == pytest.approx(lam * (1 - dist[K]), rel=1e-12)


@pytest.mark.parametrize(("K", "N", "lam", "mu"), FIXED_POINTS)
def test_fig2_net_matches_fixed_batch_solver(K: int, N: int, lam: float, mu: float) -> None:
    graph = compile_net(fig2_net(K, N)).reachability_graph({"lam": lam, "mu": mu})
    # The engine finds the K + 1 occupancy levels 0..K and no dead or absorbing marking.
    assert graph.n_states == K + 1
    assert sorted(graph.reward("#buffer").astype(int)) == list(range(K + 1))
    assert graph.dead_states.size == 0
    sol = bulk_service_queue(lam, mu, K, N, packet_bytes=PKT)
    assert sol.method == "cut-recursion"
    assert_same_queue(graph, "#buffer", f"#buffer >= {N}", ["serve"], sol, K)
    # Fixed batch: every interrupt takes exactly N packets.
    pi = steady_state(graph.generator()).probabilities
    assert sol.mean_batch[0] == N
    assert graph.throughput(pi)["serve"] * N == pytest.approx(sol.throughput_pps[0], rel=1e-12)


def test_fig2_graph_is_reused_across_arrival_rates() -> None:
    # One graph, re-solved for new parameter values (the engine's with_parameters), against
    # one vectorised call of the dedicated solver over the same rates.
    K, N = 64, 6
    graph = compile_net(fig2_net(K, N)).reachability_graph({"lam": 1.0, "mu": MU})
    lams = np.linspace(0.2, 1.2, 6) * PAPER_LAMBDA
    sol = bulk_service_queue(lams, MU, K, N)
    for i, lam in enumerate(lams):
        g = graph.with_parameters({"lam": float(lam), "mu": MU})
        pi = steady_state(g.generator()).probabilities
        dist = occupancy(g, pi, K, "#buffer")
        np.testing.assert_allclose(sol.occupancy_distribution[i], dist, rtol=0, atol=1e-12)
        assert sol.loss_probability[i] == pytest.approx(dist[K], abs=1e-12)


@pytest.mark.parametrize(
    ("K", "a", "b", "lam", "mu"),
    [
        (20, 1, 6, 8.0, 2.0),  # take whatever waits, up to 6
        (64, 2, 6, PAPER_LAMBDA, MU),  # the paper's NIC with a minimum batch of 2
        (25, 3, 4, 1.5, 1.0),
        (12, 1, 12, 5.0, 1.0),  # b = K
        (30, 6, 6, 10.0, 2.0),  # a = b: the fixed-batch chain through the general rule
    ],
)
def test_general_rule_net_matches_solver(K: int, a: int, b: int, lam: float, mu: float) -> None:
    graph = compile_net(general_rule_net(K, a, b)).reachability_graph({"lam": lam, "mu": mu})
    # The start is immediate, so "idle with >= a waiting" is vanishing and eliminated.
    assert graph.n_vanishing > 0
    sol = bulk_service_queue(lam, mu, K, b, min_batch=a, packet_bytes=PKT)
    assert_same_queue(graph, "#waiting + #batch", "#idle == 0", ["done"], sol, K)
    pi = steady_state(graph.generator()).probabilities
    # Mean batch per interrupt: completions weighted by the batch they release.
    released = mu * graph.expected_reward("#batch", pi)
    assert sol.mean_batch[0] == pytest.approx(released / graph.throughput(pi)["done"], rel=1e-12)


def test_general_rule_with_a_equal_b_is_fig2() -> None:
    # Two nets, two state spaces (one place vs three), the same queue: [N, N] is the
    # paper's fixed batch.  Tolerance 1e-12 absolute per probability.
    K, N, lam, mu = 40, 5, 9.0, 2.0
    fig2 = compile_net(fig2_net(K, N)).reachability_graph({"lam": lam, "mu": mu})
    rule = compile_net(general_rule_net(K, N, N)).reachability_graph({"lam": lam, "mu": mu})
    d1 = occupancy(fig2, steady_state(fig2.generator()).probabilities, K, "#buffer")
    d2 = occupancy(rule, steady_state(rule.generator()).probabilities, K, "#waiting + #batch")
    np.testing.assert_allclose(d1, d2, rtol=0, atol=1e-12)


def erlang2(mu: float) -> tuple[np.ndarray, np.ndarray]:
    """Erlang-2 with mean 1/mu."""
    return np.array([1.0, 0.0]), np.array([[-2 * mu, 2 * mu], [0.0, -2 * mu]])


def coxian3(mu: float) -> tuple[np.ndarray, np.ndarray]:
    """A 3-phase distribution with mean 1/mu, two entry phases and a feedback move
    (phase 2 -> 0), so that T is not triangular."""
    alpha = np.array([0.6, 0.4, 0.0])
    T = mu * np.array([[-3.0, 2.0, 0.5], [0.0, -4.0, 3.0], [1.0, 0.0, -5.0]])
    mean = float(alpha @ np.linalg.solve(-T, np.ones(3)))
    return alpha, T * mean * mu  # rescale to mean 1/mu


@pytest.mark.parametrize("service", [erlang2, coxian3])
@pytest.mark.parametrize(
    ("K", "a", "b", "lam"),
    [(30, 4, 4, 6.0), (64, 6, 6, PAPER_LAMBDA / 20_000), (20, 1, 5, 4.0), (18, 2, 4, 0.7)],
)
def test_phase_type_net_matches_solver(service, K: int, a: int, b: int, lam: float) -> None:
    # Phase-type service (docs/conventions.md §3, "phase-type service taken from part 2"): fixed
    # batch goes through level censoring, a < b through the reduced sparse system.
    mu = 1.0
    alpha, T = service(mu)
    net = general_rule_net(K, a, b, alpha, T)
    graph = compile_net(net).reachability_graph({"lam": lam})
    done = [t.name for t in net.transitions if t.name.startswith("done")]
    min_batch = None if a == b else a
    sol = bulk_service_queue(
        lam, None, K, b, min_batch=min_batch, phase_type=(alpha, T), packet_bytes=PKT
    )
    assert_same_queue(graph, "#waiting + #batch", "#idle == 0", done, sol, K)


def test_phase_type_with_one_phase_is_exponential() -> None:
    # (alpha, T) = ([1], [[-mu]]) through the engine's phase net equals the Fig. 2 net.
    K, N, lam, mu = 64, 6, PAPER_LAMBDA, MU
    phase = general_rule_net(K, N, N, np.array([1.0]), np.array([[-mu]]))
    g1 = compile_net(phase).reachability_graph({"lam": lam})
    g2 = compile_net(fig2_net(K, N)).reachability_graph({"lam": lam, "mu": mu})
    d1 = occupancy(g1, steady_state(g1.generator()).probabilities, K, "#waiting + #batch")
    d2 = occupancy(g2, steady_state(g2.generator()).probabilities, K, "#buffer")
    np.testing.assert_allclose(d1, d2, rtol=0, atol=1e-12)
