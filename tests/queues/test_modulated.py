"""The time-slice (Markov-modulated) bulk-service queue against independent references.

References and tolerances:
* M/M/1/K closed form (Kleinrock, *Queueing Systems* vol. 1, eq. 3.45): a receiver that
  is never away and takes one datagram per wake-up; rtol 1e-10.
* The paper's own queue solver (:func:`queues.loss_probability`) cannot serve as the
  reference for N > 1 (its batch rule differs), so N > 1 is checked against an
  event-driven simulation with a 99 % confidence interval (a second method that shares
  no code with the solver).
* The blast-loss asymptote against the transient integrated by ``expm_multiply``
  (a second method), for blasts 50 times the buffer or longer: rtol 1e-6.
* Faster service while a full batch waits (``backlogged_rates``): with N = 1 every busy
  level is backlogged, so the M/M/1/K closed form at the backlogged rate holds (rtol
  1e-8); for N > 1, the simulation above (99 % interval) and a generator written out
  state by state in the test (rtol 1e-9).
* The lag account (``lag_environment``, ``idle_environment``, ``fixed_cost_fraction``):
  backlogged, the share 1 / (1 + c) in closed form (rtol 1e-12); a generator written out
  state by state (rtol 1e-9); the simulation above (99 % interval); the blast asymptote
  against ``expm_multiply`` (rtol 1e-6).
* The blast shift D against the dense group-inverse form (a second method that fixes no
  state): 1e-9 datagrams absolute, 1e-8 relative.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from queues import QueueParameterError
from queues.modulated import (
    ModulatedQueue,
    blast_loss,
    blast_loss_exact,
    blast_loss_terms,
    lag_environment,
    modulated_loss,
    time_slice_environment,
)


def _queue(
    c: float,
    slice_s: float,
    mu: float,
    K: int,
    N: int,
    idle_holds: bool = False,
    backlogged_speedup: float = 1.0,
) -> ModulatedQueue:
    env, rates = time_slice_environment(c, slice_s, mu)
    return ModulatedQueue(
        env, rates, K, N, idle_holds=idle_holds, backlogged_rates=rates * backlogged_speedup
    )


@pytest.mark.parametrize("rho", [0.3, 0.8, 1.0 + 1e-9, 1.7])
def test_never_away_single_datagram_is_mm1k(rho: float) -> None:
    K, mu = 25, 1000.0
    q = _queue(0, 1e-3, mu, K, 1)
    lam = rho * mu
    expected = (1 - rho) * rho**K / (1 - rho ** (K + 1))
    assert modulated_loss(q, [lam])[0] == pytest.approx(expected, rel=1e-8)


def test_the_receiver_holds_the_cpu_one_share_in_c_plus_one() -> None:
    # Long-run capacity = mu * N / (1 + c): the processor-sharing average is kept.
    q = _queue(2, 3e-3, 5000.0, 100, 8)
    assert q.mean_capacity() == pytest.approx(5000.0 * 8 / 3, rel=1e-12)


def test_fast_slices_approach_processor_sharing() -> None:
    # Slices far shorter than an inter-arrival time: the receiver looks like one that
    # serves at mu / (1 + c) all the time (the paper's processor sharing).
    K, N, mu, c = 40, 4, 3000.0, 1.0
    shared = _queue(0, 1.0, mu / (1 + c), K, N)
    sliced = _queue(c, 1e-8, mu, K, N)
    lam = np.array([2000.0, 5500.0, 9000.0])
    np.testing.assert_allclose(modulated_loss(sliced, lam), modulated_loss(shared, lam), rtol=1e-4)


def test_slices_lose_more_than_processor_sharing_with_a_small_buffer() -> None:
    # The mechanism this model exists for: 92 datagrams cannot hold a 6 ms vacation at
    # 17,000 datagrams/s although the average drain (40,000/s) is far above it.
    sliced = _queue(2, 3e-3, 15_000.0, 92, 8)
    shared = _queue(0, 1.0, 5_000.0, 92, 8)
    assert modulated_loss(sliced, [17_000.0])[0] > 0.02
    assert modulated_loss(shared, [17_000.0])[0] < 1e-6


def _simulate_loss(q: ModulatedQueue, lam: float, events: int, seed: int) -> tuple[float, float]:
    """Event-driven simulation of the queue: loss fraction and its standard error (batch
    means over 20 batches)."""
    rng = np.random.default_rng(seed)
    busy_env, mu, fast = q.environment, q.service_rates, q.backlogged_rates
    assert fast is not None
    idle_env = busy_env if q.idle_environment is None else q.idle_environment
    if q.idle_holds:
        idle_env = busy_env * (mu <= 0)[:, None]
    K, N, f = q.buffer_packets, q.batch, q.fixed_cost_fraction
    # Each phase's exits as cumulative probabilities, and every uniform drawn up front:
    # the loop then does scalar arithmetic only (rng.choice per event took 25 us).
    # (A phase that never moves has 0/0 there, and is never left.)
    with np.errstate(invalid="ignore", divide="ignore"):
        exits = {
            id(env): np.cumsum(np.clip(env, 0, None), axis=1) / -np.diag(env)[:, None]
            for env in (busy_env, idle_env)
        }
    uniforms = rng.random((events, 2))
    phase, n = 0, 0
    arrivals = np.zeros(20)
    lost = np.zeros(20)
    for i in range(events):
        b = i * 20 // events
        env = idle_env if n == 0 else busy_env
        moving = -env[phase, phase]
        if n == 0:
            serve = 0.0
        elif n >= N:
            serve = fast[phase]
        else:  # a wake-up that takes n < N costs f + (1 - f) n / N of a full one
            serve = mu[phase] / (f + (1 - f) * n / N)
        u = uniforms[i, 0] * (lam + serve + moving)
        if u < lam:
            arrivals[b] += 1
            if n == K:
                lost[b] += 1
            else:
                n += 1
        elif u < lam + serve:
            n -= min(n, N)
        else:
            row = exits[id(env)][phase]
            phase = min(
                int(np.searchsorted(row, uniforms[i, 1] * row[-1], side="right")), len(row) - 1
            )
    per_batch = lost / np.maximum(arrivals, 1)
    return float(lost.sum() / arrivals.sum()), float(per_batch.std(ddof=1) / np.sqrt(20))


@pytest.mark.parametrize(("idle_holds", "speedup"), [(False, 1.0), (True, 1.0), (False, 1.6)])
def test_loss_matches_a_simulation_within_its_confidence_interval(
    idle_holds: bool, speedup: float
) -> None:
    q = _queue(1, 2e-3, 4000.0, 30, 4, idle_holds, speedup)
    lam = 9000.0
    mean, se = _simulate_loss(q, lam, 200_000, seed=7)
    exact = modulated_loss(q, [lam])[0]
    assert abs(mean - exact) < 2.58 * se + 1e-3, (mean, se, exact)


def test_a_receiver_that_keeps_its_turn_while_idle_loses_less_at_low_load() -> None:
    # The receiver is rarely busy at 4,000 datagrams/s: with its slice held while it
    # sleeps it is seldom sent away; with independent vacations it is away 2/3 of the time.
    held = _queue(2, 3e-3, 15_000.0, 40, 8, idle_holds=True)
    independent = _queue(2, 3e-3, 15_000.0, 40, 8)
    low, high = modulated_loss(held, [4_000.0]), modulated_loss(independent, [4_000.0])
    assert low[0] < 0.7 * high[0]
    # Saturated, the receiver is always busy and the two agree.
    np.testing.assert_allclose(
        modulated_loss(held, [200_000.0]), modulated_loss(independent, [200_000.0]), rtol=1e-3
    )
    # With no competitor there is nothing to hold.
    alone = _queue(0, 3e-3, 15_000.0, 40, 8, idle_holds=True)
    np.testing.assert_allclose(
        modulated_loss(alone, [9e4]), modulated_loss(_queue(0, 3e-3, 15_000.0, 40, 8), [9e4])
    )


@pytest.mark.parametrize("idle_holds", [False, True])
@pytest.mark.parametrize("lam", [8_000.0, 13_000.0, 20_000.0])
def test_blast_asymptote_matches_the_transient(lam: float, idle_holds: bool) -> None:
    # Near capacity (13,333/s) the transient mixes slowest: 50 buffers' worth is needed.
    q = _queue(2, 3e-3, 5000.0, 60, 8, idle_holds)
    for n in (3_000, 6_000):
        asymptote, _ = blast_loss(q, [lam], [n])
        assert asymptote[0] == pytest.approx(blast_loss_exact(q, lam, n), rel=1e-6, abs=1e-6)


def test_a_blast_that_fits_the_buffer_loses_nothing_when_the_receiver_is_never_away() -> None:
    q = _queue(0, 1e-3, 100.0, 500, 1)
    assert blast_loss_exact(q, 1e5, 400) < 1e-4  # Poisson counts rarely pass 500
    lost, p_k = blast_loss(q, [1e5], [400])
    assert lost[0] == 0.0 and p_k[0] > 0.99


@settings(max_examples=25, deadline=None)
@given(
    lam=st.floats(1e3, 5e4),
    c=st.sampled_from([0.0, 0.5, 1.0, 3.0]),
    K=st.integers(5, 120),
    N=st.integers(1, 16),
)
def test_loss_grows_with_the_rate_and_falls_with_the_buffer(
    lam: float, c: float, K: int, N: int
) -> None:
    small = _queue(c, 2e-3, 3000.0, K, N)
    big = _queue(c, 2e-3, 3000.0, K + 10, N)
    low, high = modulated_loss(small, [lam, 1.5 * lam])
    assert 0.0 <= low <= high + 1e-12 <= 1.0 + 1e-12
    assert modulated_loss(big, [lam])[0] <= low + 1e-12


def test_bad_parameters_name_themselves() -> None:
    with pytest.raises(QueueParameterError) as err:
        time_slice_environment(-1, 1e-3, 10.0)
    assert err.value.parameter == "competitors"
    env, rates = time_slice_environment(1, 1e-3, 10.0)
    with pytest.raises(QueueParameterError) as err:
        ModulatedQueue(env, rates, 10_000_000, 4)
    assert err.value.parameter == "buffer_packets"
    with pytest.raises(QueueParameterError) as err:
        modulated_loss(ModulatedQueue(env, rates, 10, 4), [0.0])
    assert err.value.parameter == "arrival_rates"


def test_idle_holds_solves_a_chain_whose_first_phase_does_not_serve() -> None:
    # Found by review: the stationary solve was anchored on an unreachable state.
    env = np.array([[-100.0, 100.0], [200.0, -200.0]])
    q = ModulatedQueue(env, np.array([0.0, 5000.0]), 20, 4, idle_holds=True)
    swapped = ModulatedQueue(env[::-1, ::-1], np.array([5000.0, 0.0]), 20, 4, idle_holds=True)
    np.testing.assert_allclose(modulated_loss(q, [3000.0]), modulated_loss(swapped, [3000.0]))


@pytest.mark.parametrize("rho", [0.4, 1.0 + 1e-9, 1.9])
def test_backlogged_service_with_single_datagrams_is_mm1k_at_the_backlogged_rate(
    rho: float,
) -> None:
    # N = 1: every busy level holds a full batch, so only the backlogged rate serves.
    K, slow, fast = 25, 700.0, 1000.0
    q = ModulatedQueue(np.zeros((1, 1)), np.array([slow]), K, 1, backlogged_rates=[fast])
    lam = rho * fast
    expected = (1 - rho) * rho**K / (1 - rho ** (K + 1))
    assert modulated_loss(q, [lam])[0] == pytest.approx(expected, rel=1e-8)
    assert q.mean_capacity() == fast


def test_backlogged_service_matches_a_generator_written_out_state_by_state() -> None:
    # Two phases (serving, away), K = 9, N = 3: levels 1-2 at the slow rate, 3-9 fast.
    K, N, lam, slow, fast, leave, back = 9, 3, 2500.0, 600.0, 900.0, 300.0, 500.0
    env = np.array([[-leave, leave], [back, -back]])
    q = ModulatedQueue(env, np.array([slow, 0.0]), K, N, backlogged_rates=[fast, 0.0])
    size = 2 * (K + 1)
    dense = np.zeros((size, size))
    for n in range(K + 1):
        for j in range(2):
            i = 2 * n + j
            if n < K:
                dense[i, 2 * (n + 1) + j] += lam
            dense[i, 2 * n + (1 - j)] += env[j, 1 - j]
            if j == 0 and n > 0:
                dense[i, 2 * (n - min(n, N))] += fast if n >= N else slow
    np.fill_diagonal(dense, -dense.sum(axis=1))
    a = np.vstack([dense.T, np.ones(size)])
    pi = np.linalg.lstsq(a, np.r_[np.zeros(size), 1.0], rcond=None)[0]
    assert modulated_loss(q, [lam])[0] == pytest.approx(pi[2 * K] + pi[2 * K + 1], rel=1e-9)


def test_faster_backlogged_service_loses_less_and_drains_faster() -> None:
    slow = _queue(2, 3e-3, 5000.0, 200, 8)
    fast = _queue(2, 3e-3, 5000.0, 200, 8, backlogged_speedup=1.3)
    lam = np.array([8_000.0, 14_000.0, 30_000.0])
    assert np.all(modulated_loss(fast, lam) < modulated_loss(slow, lam))
    assert fast.mean_capacity() == pytest.approx(1.3 * slow.mean_capacity(), rel=1e-12)


def test_backlogged_rates_must_serve_where_the_receiver_serves() -> None:
    env, rates = time_slice_environment(1, 2e-3, 4000.0)
    for bad in (rates[:-1], rates * -1, rates + 1.0, np.where(rates > 0, np.nan, 0.0)):
        with pytest.raises(QueueParameterError) as info:
            ModulatedQueue(env, rates, 30, 4, backlogged_rates=bad)
        assert info.value.parameter == "backlogged_rates"


def _lag_queue(c: float, slice_s: float, mu: float, K: int, N: int, f: float) -> ModulatedQueue:
    env, idle, rates, start = lag_environment(c, slice_s, mu)
    return ModulatedQueue(
        env, rates, K, N, idle_environment=idle, fixed_cost_fraction=f, start=start
    )


@pytest.mark.parametrize("c", [0.5, 1.0, 3.0])
def test_a_backlogged_receiver_gets_its_share_under_the_lag_account(c: float) -> None:
    # Closed form: a slice of s, then a vacation of c s: capacity mu N / (1 + c).
    q = _lag_queue(c, 4e-3, 5000.0, 100, 8, 0.2)
    assert q.mean_capacity() == pytest.approx(5000.0 * 8 / (1 + c), rel=1e-12)


def _lag_by_hand(c: float, s: float, k: int) -> tuple[np.ndarray, np.ndarray]:
    """The lag account as docs/conventions.md section 5 words it, written out here rather
    than taken from ``lag_environment``: k credit phases (0 a full account), then k
    vacation stages."""
    M = 2 * k
    busy, idle = np.zeros((M, M)), np.zeros((M, M))
    for j in range(k):
        busy[j, j + 1] = k / s  # running: a full account lasts a slice
    for j in range(k, M):
        busy[j, (j + 1) % M] = k / (c * s)  # a vacation of c slices, then a full account
        idle[j] = busy[j]
    for j in range(1, k):
        idle[j, j - 1] = k / (c * s)  # asleep: the account fills back up in c slices
    np.fill_diagonal(busy, -busy.sum(axis=1))
    np.fill_diagonal(idle, -idle.sum(axis=1))
    return busy, idle


@pytest.mark.parametrize("lam", [300.0, 1_800.0])  # below and above the capacity, 1,120/s
def test_the_lag_account_matches_a_generator_written_out_state_by_state(lam: float) -> None:
    # c = 2 (the sleeper's refill and the slice's run-down differ), 3 stages, K = 7, N = 3.
    K, N, mu, f, c, s = 7, 3, 700.0, 0.4, 2.0, 2e-3
    q = _lag_queue(c, s, mu, K, N, f)
    env, idle = _lag_by_hand(c, s, 3)
    np.testing.assert_allclose(q.environment, env, rtol=1e-15)
    assert q.idle_environment is not None
    np.testing.assert_allclose(q.idle_environment, idle, rtol=1e-15)
    M = 6
    np.testing.assert_array_equal(q.service_rates, np.r_[np.full(3, mu), np.zeros(3)])
    size = M * (K + 1)
    dense = _generator_by_hand(q, lam)
    a = np.vstack([dense.T, np.ones(size)])
    pi = np.linalg.lstsq(a, np.r_[np.zeros(size), 1.0], rcond=None)[0]
    assert modulated_loss(q, [lam])[0] == pytest.approx(pi[M * K : M * (K + 1)].sum(), rel=1e-9)


@pytest.mark.parametrize("lam", [6_000.0, 11_000.0])
def test_the_lag_account_matches_a_simulation_within_its_confidence_interval(lam: float) -> None:
    # c = 2; 6,000/s: the receiver needs about half its share; 11,000/s: more than all of it.
    q = _lag_queue(2.0, 2e-3, 6000.0, 30, 4, 0.3)
    mean, se = _simulate_loss(q, lam, 200_000, seed=11)
    exact = modulated_loss(q, [lam])[0]
    assert abs(mean - exact) < 2.58 * se + 1e-3, (mean, se, exact)


@pytest.mark.parametrize("lam", [8_000.0, 20_000.0])
def test_the_lag_account_blast_asymptote_matches_the_transient(lam: float) -> None:
    q = _lag_queue(2.0, 3e-3, 5000.0, 60, 8, 0.25)
    for n in (3_000, 6_000):
        asymptote, _ = blast_loss(q, [lam], [n])
        assert asymptote[0] == pytest.approx(blast_loss_exact(q, lam, n), rel=1e-6, abs=1e-6)


def _deviation_by_group_inverse(q: ModulatedQueue, lam: float) -> float:
    """D from the dense group-inverse form, a second method that fixes no state: with
    A = 1 pi - Q (nonsingular for a chain with one closed class), h = -A^-1 g solves
    Q h = g with pi h = 0, and D = (start - pi) h (Kemeny and Snell, *Finite Markov
    Chains*, the fundamental matrix)."""
    dense = q.generator(lam).toarray()
    size = dense.shape[0]
    a = np.vstack([dense.T, np.ones(size)])
    pi = np.linalg.lstsq(a, np.r_[np.zeros(size), 1.0], rcond=None)[0]
    full = q.full_states()
    g = np.full(size, pi[full].sum())
    g[full] -= 1.0
    h = -np.linalg.solve(np.outer(np.ones(size), pi) - dense, g)
    return float((q.empty_start() - pi) @ h)


@pytest.mark.parametrize(
    ("c", "mu", "K", "N", "f", "load"),
    [
        # The chain of the sweep point I = 1, C = 2, K = 128, 50 ms on the built-in
        # profile, at 10 % of the line rate: fixed at a full buffer, which this load
        # almost never reaches (p_K 7e-20), the banded Poisson solve was singular to
        # working precision, and LAPACK refused it on an AMD EPYC.
        (2.0, 35_253.17220543806, 128, 6, 0.0, 2_660.933242506812 / 35_253.17220543806),
        (0.5, 20_800.0, 64, 1, 1.0, 0.3),
        (3.0, 20_800.0, 16, 6, 0.4, 0.9),
        (1.0, 20_800.0, 128, 6, 0.0, 1.2),
    ],
)
def test_the_blast_shift_matches_the_group_inverse(
    c: float, mu: float, K: int, N: int, f: float, load: float
) -> None:
    # load: lambda in units of mu (the first case's rate as the sweep point gave it).
    env, idle, rates, start = lag_environment(c, 1.5e-3, mu)
    q = ModulatedQueue(env, rates, K, N, idle_environment=idle, fixed_cost_fraction=f, start=start)
    lam = load * mu
    p_k, deviation, _ = blast_loss_terms(q, [lam])
    expected = _deviation_by_group_inverse(q, lam)
    # In datagrams a blast loses (lambda D): 1e-9 absolute, where both methods' rounding
    # is (below 1e-11 over 480 lag chains); 1e-8 relative where the shift is material.
    assert lam * deviation[0] == pytest.approx(lam * expected, rel=1e-8, abs=1e-9)
    assert np.isfinite(p_k[0])


def test_a_receiver_under_its_share_is_rarely_sent_away_under_the_lag_account() -> None:
    # The traced behaviour (benchmarks/slice_trace.py --rate): a receiver that needs 14 %
    # of the CPU, under half its share, is mostly served as it wakes, so 92 datagrams
    # hold; the rotation sends it away for 2 slices in every 3 and a 6 ms vacation
    # (102 arrivals) overflows them.  The same wake-up costs (f = 0) on both sides.  (The
    # account's 3 exponential steps still run it dry now and then: 1.5 % against 19.5 %.)
    lag = _lag_queue(2.0, 3e-3, 15_000.0, 92, 8, 0.0)
    env, rates = time_slice_environment(2.0, 3e-3, 15_000.0)
    rotation = ModulatedQueue(env, rates, 92, 8, fixed_cost_fraction=0.0)
    assert modulated_loss(lag, [17_000.0])[0] < 0.1 * modulated_loss(rotation, [17_000.0])[0]
    # Backlogged both alternate a slice with c others', so both drain 40,000/s.  At 1.5
    # times that, a buffer that never runs dry loses the fluid 1/3 under both; 92 datagrams
    # run dry within the rotation's slices (idle CPU it then loses), not under the account.
    assert lag.mean_capacity() == pytest.approx(rotation.mean_capacity(), rel=1e-12)
    lag_big = _lag_queue(2.0, 3e-3, 15_000.0, 2_000, 8, 0.0)
    rotation_big = ModulatedQueue(env, rates, 2_000, 8, fixed_cost_fraction=0.0)
    for q in (lag_big, rotation_big):
        assert modulated_loss(q, [60_000.0])[0] == pytest.approx(1 / 3, rel=1e-5)
    assert modulated_loss(lag, [60_000.0])[0] < modulated_loss(rotation, [60_000.0])[0]


def test_the_empty_anchor_is_a_reachable_state() -> None:
    # Found by review: anchored on an empty buffer in a vacation phase (unreachable under
    # the lag account), the solve answered 0.  The stationary loss does not depend on the
    # start, so a start in a vacation phase must give the same answer as a full account.
    env, idle, rates, start = lag_environment(2.0, 3e-3, 5000.0)
    away = np.roll(start, 3)  # all its mass on the first vacation stage
    normal = ModulatedQueue(env, rates, 40, 8, idle_environment=idle, start=start)
    odd = ModulatedQueue(env, rates, 40, 8, idle_environment=idle, start=away)
    lam = [4000.0, 9000.0]
    assert modulated_loss(normal, lam)[0] > 1e-4
    np.testing.assert_allclose(modulated_loss(odd, lam), modulated_loss(normal, lam), rtol=1e-9)
    # The idle_holds environment given as an idle_environment, phases ordered so that
    # phase 0 is a vacation: the same answer as idle_holds itself.
    ts_env, ts_rates = time_slice_environment(2.0, 3e-3, 5000.0)
    order = np.r_[3:6, 0:3]
    moved_env, moved_rates = ts_env[np.ix_(order, order)], ts_rates[order]
    held = ModulatedQueue(moved_env, moved_rates, 40, 8, idle_holds=True)
    given = ModulatedQueue(
        moved_env, moved_rates, 40, 8, idle_environment=moved_env * (moved_rates <= 0)[:, None]
    )
    assert modulated_loss(held, [4000.0])[0] > 1e-4
    np.testing.assert_allclose(modulated_loss(given, [4000.0]), modulated_loss(held, [4000.0]))


def test_cheap_small_wake_ups_lose_less() -> None:
    # f = 1: every wake-up costs a full one (the paper); f = 0: a wake-up costs its datagrams.
    lam = np.array([3_000.0, 9_000.0])
    full = modulated_loss(_lag_queue(1.0, 2e-3, 2000.0, 40, 8, 1.0), lam)
    cheap = modulated_loss(_lag_queue(1.0, 2e-3, 2000.0, 40, 8, 0.0), lam)
    assert np.all(cheap < full)


def test_the_lag_account_refuses_bad_parameters_by_name() -> None:
    env, idle, rates, start = lag_environment(1.0, 2e-3, 4000.0)
    assert lag_environment(0.0, 2e-3, 4000.0)[0].shape == (1, 1)
    bad: list[tuple[dict[str, object], str]] = [
        ({"idle_environment": idle, "idle_holds": True}, "idle_environment"),
        ({"idle_environment": idle[:-1, :-1]}, "idle_environment"),
        ({"idle_environment": -idle}, "idle_environment"),
        ({"fixed_cost_fraction": 1.5}, "fixed_cost_fraction"),
        ({"fixed_cost_fraction": float("nan")}, "fixed_cost_fraction"),
        ({"idle_environment": "x"}, "idle_environment"),
        ({"fixed_cost_fraction": "abc"}, "fixed_cost_fraction"),
        ({"fixed_cost_fraction": None}, "fixed_cost_fraction"),
        ({"fixed_cost_fraction": True}, "fixed_cost_fraction"),
        ({"fixed_cost_fraction": np.array([0.5])}, "fixed_cost_fraction"),
        ({"start": start[:-1]}, "start"),
        ({"start": 2 * start}, "start"),
        ({"start": start * (1 + 1e-6)}, "start"),
        ({"start": "abc"}, "start"),
    ]
    for changes, name in bad:
        with pytest.raises(QueueParameterError) as info:
            ModulatedQueue(env, rates, 30, 4, **changes)  # type: ignore[arg-type]
        assert info.value.parameter == name
    with pytest.raises(QueueParameterError) as info:
        lag_environment(float("inf"), 2e-3, 4000.0)
    assert info.value.parameter == "competitors"


def _generator_by_hand(q: ModulatedQueue, lam: float) -> np.ndarray:
    """The module docstring's chain written out state by state (level-major), dense."""
    K, N, M, f = q.buffer_packets, q.batch, q.phases, q.fixed_cost_fraction
    assert q.backlogged_rates is not None
    idle = q.idle_environment
    if q.idle_holds:
        idle = q.environment * (q.service_rates <= 0)[:, None]
    dense = np.zeros((M * (K + 1), M * (K + 1)))
    for n in range(K + 1):
        moves = idle if (n == 0 and idle is not None) else q.environment
        for j in range(M):
            i = M * n + j
            if n < K:
                dense[i, M * (n + 1) + j] += lam
            for k in range(M):
                if k != j:
                    dense[i, M * n + k] += moves[j, k]
            if n > 0:
                took = min(n, N)
                rate = q.backlogged_rates[j] if n >= N else q.service_rates[j]
                speed = 1.0 if n >= N else 1.0 / (f + (1 - f) * took / N)
                dense[i, M * (n - took) + j] += rate * speed
    np.fill_diagonal(dense, 0.0)
    np.fill_diagonal(dense, -dense.sum(axis=1))
    return dense


@settings(max_examples=60, deadline=None)
@given(
    c=st.sampled_from([0.0, 0.5, 2.0]),
    k=st.integers(1, 12),
    n=st.integers(1, 14),
    stages=st.integers(1, 3),
    f=st.floats(0.0, 0.9),
    form=st.sampled_from(["lag", "rotation", "rotation-idle-holds"]),
    lam=st.floats(10.0, 1e5),
)
def test_the_generator_is_the_chain_written_out_state_by_state(
    c: float, k: int, n: int, stages: int, f: float, form: str, lam: float
) -> None:
    # The generator is assembled from index arrays for speed; this builds the same chain
    # entry by entry from the module's description (reference: exact, up to rounding in
    # the diagonal's sums, rtol 1e-12).
    if form == "lag":
        env, idle, rates, start = lag_environment(c, 2e-3, 3000.0, stages=stages)
        q = ModulatedQueue(
            env,
            rates,
            k,
            n,
            idle_environment=idle,
            fixed_cost_fraction=f,
            start=start,
            backlogged_rates=rates * 1.25,
        )
    else:
        env, rates = time_slice_environment(c, 2e-3, 3000.0, stages=stages)
        q = ModulatedQueue(env, rates, k, n, idle_holds=form == "rotation-idle-holds")
    np.testing.assert_allclose(
        q.generator(lam).toarray(), _generator_by_hand(q, lam), rtol=1e-12, atol=1e-9
    )
