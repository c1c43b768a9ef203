"""The end-system model against an independent dense reference chain.

The reference is written here from SPEC sections 1 and 2 alone, without the SRN engine:
it enumerates every state (i, q_1, ..., q_d) -- I/O tasks at the processor and the
queue of *each* disk, an ordered tuple, no lumping -- builds the Fig. 1a generator and
the Fig. 1b sub-generator T with the SPEC rates, solves pi Q = 0 densely and evaluates
P(service > t) = pi exp(T t) 1 with ``scipy.linalg.expm``.  Agreement checks at once the
nets, the lumping of exchangeable disks into sorted queue lengths, the carried-over
initial distribution and every numerical path of the model (dense spectral,
tridiagonal, Lanczos, and the engine's uniformisation fallback).

Tolerances: expm (Pade, scaling and squaring) and LU are accurate to ~1e-14 relative
here; CDF values absolute 1e-12, means and variances relative 1e-11, quantiles
relative 1e-10 (root of the CDF), Lanczos (stopped at 1e-13 changes) the same.
"""

from __future__ import annotations

import itertools
import pickle

import numpy as np
import pytest
import scipy.linalg as la

from host import HostProfile, Workload, _shape, host_profile, interrupt_service_time
from host.service_time import DEFAULT_LIMITS

SX280 = host_profile("sx280-2007")
SLOW_DISK = SX280.replace(name="slow-disk", mu_disk=120.0, mu_io_cpu=9_000.0)


def reference_chain(w: Workload, p: HostProfile):
    """pi over states, T, and per-state i, by enumeration (per-disk queues)."""
    C, io, m, d = w.cpu_tasks, w.io_tasks, w.cores, w.disks
    states = [
        (i, *q)
        for i in range(io + 1)
        for q in itertools.product(range(io - i + 1), repeat=d)
        if sum(q) == io - i
    ]
    index = {s: k for k, s in enumerate(states)}
    n = len(states)

    def generator(extra: int) -> np.ndarray:
        Q = np.zeros((n, n))
        for s in states:
            i, q = s[0], s[1:]
            share = min(1.0, m / (C + i + extra)) if C + i + extra else 0.0
            for j in range(d):
                if i > 0:  # processor -> disk j, each disk picked with probability 1/d
                    t = (i - 1, *(q[k] + (k == j) for k in range(d)))
                    Q[index[s], index[t]] += i * p.mu_io_cpu * share / d
                if q[j] > 0:  # disk j -> processor at mu_disk
                    t = (i + 1, *(q[k] - (k == j) for k in range(d)))
                    Q[index[s], index[t]] += p.mu_disk
        return Q

    Qa = generator(0)
    Qa[np.diag_indices(n)] = -Qa.sum(axis=1)
    A = np.vstack([Qa.T[:-1], np.ones(n)])
    pi = la.solve(A, np.eye(n)[-1])
    T = generator(1)
    kill = np.array([p.mu_net * min(1.0, m / (C + s[0] + 1)) for s in states])
    T[np.diag_indices(n)] = -T.sum(axis=1) - kill
    return pi, T, np.array([s[0] for s in states])


def reference_survival(pi, T, times):
    return np.array([pi @ la.expm(T * t) @ np.ones(len(pi)) for t in times])


CASES = [
    (Workload(2, 2), SX280),
    (Workload(1, 3, cores=2), SX280),
    (Workload(3, 3, cores=1, disks=2), SX280),
    (Workload(0, 4, cores=2, disks=3), SLOW_DISK),
    (Workload(2, 5, cores=3, disks=2), SLOW_DISK),
    (Workload(1, 3, cores=1, disks=4), SX280),
]


def check_against_reference(r, w: Workload, p: HostProfile) -> None:
    pi, T, i = reference_chain(w, p)
    minus_T = -T
    u = la.solve(minus_T, np.ones(len(pi)))
    mean = pi @ u
    variance = 2 * pi @ la.solve(minus_T, u) - mean**2
    assert r.mean_s == pytest.approx(mean, rel=1e-11)
    assert r.variance_s2 == pytest.approx(variance, rel=1e-11)
    assert r.rate_per_s == pytest.approx(1 / mean, rel=1e-11)
    times = r.times_s[::10]
    np.testing.assert_allclose(
        r.cdf[::10], 1 - reference_survival(pi, T, times), rtol=0, atol=1e-12
    )
    for level, q in r.quantiles_s.items():
        assert 1 - reference_survival(pi, T, [q])[0] == pytest.approx(level, abs=1e-10)
    marginal = np.bincount(i, weights=pi, minlength=w.io_tasks + 1)
    np.testing.assert_allclose(r.occupancy.io_at_processor_distribution, marginal, atol=1e-13)


@pytest.mark.parametrize(("w", "p"), CASES)
def test_model_matches_the_unlumped_reference(w: Workload, p: HostProfile) -> None:
    r = interrupt_service_time(w, p)
    assert r.method == "spectral"
    check_against_reference(r, w, p)
    # The lumped chain is smaller than the per-disk one whenever d > 1.
    pi, _, _ = reference_chain(w, p)
    assert r.n_states <= len(pi)


@pytest.mark.parametrize(
    ("w", "p", "method", "dense_max", "small"),
    [
        (Workload(2, 5, cores=3, disks=2), SLOW_DISK, "spectral-lanczos", 4, 64),
        (Workload(1, 3, cores=1, disks=4), SX280, "spectral-lanczos", 4, 64),
        (Workload(2, 6, cores=1), SLOW_DISK, "spectral-tridiagonal", 400, 2),
    ],
)
def test_large_chain_paths_match_the_reference(w, p, method, dense_max, small, monkeypatch):
    """Shrink the size thresholds so that small chains take the large-chain paths."""
    monkeypatch.setattr(_shape, "DENSE_MAX", dense_max)
    monkeypatch.setattr(_shape, "SMALL", small)
    _shape.SHAPES.clear()
    try:
        r = interrupt_service_time(w, p)
        assert r.method == method
        check_against_reference(r, w, p)
    finally:
        _shape.SHAPES.clear()


@pytest.mark.parametrize("small", [64, 2])
def test_engine_fallback_matches_the_reference(small, monkeypatch):
    """A chain that fails the detailed-balance check goes to the engine's
    uniformisation, from the compiled small-chain solve (SMALL = 64) and from the NumPy
    path (SMALL = 2) alike.  A negative tolerance fails the check on every edge."""
    monkeypatch.setattr(_shape, "SYMMETRY_TOL", -1.0)
    monkeypatch.setattr(_shape, "SMALL", small)
    _shape.SHAPES.clear()
    try:
        w, p = Workload(1, 3, cores=1, disks=2), SLOW_DISK
        shape = _shape.SHAPES.get(w.io_tasks, w.disks, DEFAULT_LIMITS)
        assert (shape.small_chain is not None) == (small == 64)
        r = interrupt_service_time(w, p)
        assert r.method == "uniformization"
        check_against_reference(r, w, p)
    finally:
        _shape.SHAPES.clear()


@pytest.mark.parametrize(
    ("w", "p", "method", "dense_max", "small"),
    [
        (Workload(2, 3, cores=1, disks=2), SX280, "spectral", 4_000, 64),
        (Workload(2, 5, cores=3, disks=2), SLOW_DISK, "spectral-lanczos", 4, 64),
        (Workload(2, 6, cores=1), SLOW_DISK, "spectral-tridiagonal", 400, 2),
    ],
)
def test_results_pickle_before_and_after_the_distribution(
    w, p, method, dense_max, small, monkeypatch
):
    """The distribution is computed on first access; the result must still cross a
    process boundary (multiprocessing, Dask) either way, with the same answers."""
    monkeypatch.setattr(_shape, "DENSE_MAX", dense_max)
    monkeypatch.setattr(_shape, "SMALL", small)
    _shape.SHAPES.clear()
    try:
        r = interrupt_service_time(w, p)
        assert r.method == method
        early = pickle.loads(pickle.dumps(r))
        quantiles = r.quantiles_s  # computes the eigen-decomposition
        late = pickle.loads(pickle.dumps(r))
        for copy in (early, late):
            assert copy.mean_s == r.mean_s
            assert copy.quantiles_s == quantiles
            np.testing.assert_array_equal(copy.cdf, r.cdf)
    finally:
        _shape.SHAPES.clear()
