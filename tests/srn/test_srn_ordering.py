"""The sparse LU route's AMD ordering: same answers as SuperLU's own, less fill.

Reference: a closed ring of single-server exponential stations has the product form of
Gordon and Newell ("Closed queuing systems with exponential servers", Operations
Research 15(2), 1967): ``pi(n) ~ prod_i (1 / mu_i)^n_i`` (every station is visited
equally often), computed here in logarithms, state by state, independently of the
engine.  The ring's probabilities span 70 decades, so the comparison is relative and
state by state, not a residual.
"""

from __future__ import annotations

import os

import numpy as np
import pytest
import scipy.sparse as sp
import scipy.sparse.linalg as spla

import srn.stationary
from srn import Net, reachability_graph, steady_state, timed
from srn._ordering import OrderingUnavailable, amd_order

RATES = {"s0": 1.0, "s1": 1.3, "s2": 0.7}
# SuperLU with diagonal pivots and two steps of refinement on this ring: 7e-14 relative
# at 193,131 states (benchmarks/srn_small_chains.py's ring-620); 1e-12 leaves room for
# rounding and nothing for a wrong ordering or a wrong permutation back.
RTOL = 1e-12


def ring(tokens: int) -> tuple[sp.csr_array, np.ndarray]:
    """Three stations in a ring with ``tokens`` jobs: the generator and the exact pi."""
    stations = list(RATES)
    net = Net(
        {s: (tokens if s == "s0" else 0) for s in stations},
        [
            timed(f"move{i}", RATES[s], inputs={s: 1}, outputs={stations[(i + 1) % 3]: 1})
            for i, s in enumerate(stations)
        ],
    )
    graph = reachability_graph(net)
    counts = np.asarray(graph.markings, dtype=float)
    log_weight = -sum(counts[:, graph.place_names.index(s)] * np.log(RATES[s]) for s in stations)
    exact = np.exp(log_weight - log_weight.max())
    return graph.generator(), exact / exact.sum()


def pinned_balance_equations(Q: sp.csr_array) -> sp.csc_array:
    """``Q^T`` without its first row and column: the matrix the LU route factorises."""
    At = sp.csr_array(Q.T)
    return sp.csc_array(At[1:][:, 1:])


def amd_missing() -> str | None:
    """Why AMD cannot order here, or None when it can."""
    try:
        amd_order(sp.csc_array(sp.eye(2)))
    except OrderingUnavailable as why:
        return str(why)
    return None


def test_amd_is_installed_where_ci_runs():
    # scripts/_venv.sh installs Debian's libamd; without it the route is only slower,
    # so elsewhere this is a skip, never a failure.
    missing = amd_missing()
    if missing:
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail(f"{missing}: scripts/_venv.sh should have installed it")
        pytest.skip(missing)


def test_amd_order_is_a_permutation_with_less_fill_than_superlus_own():
    Q, _ = ring(80)  # 3,321 states
    B = pinned_balance_equations(Q)
    if amd_missing():
        pytest.skip("libamd is not installed")
    order = amd_order(B)
    assert np.array_equal(np.sort(order), np.arange(B.shape[0]))
    ours = spla.splu(sp.csc_array(B[order][:, order]), permc_spec="NATURAL", diag_pivot_thresh=0)
    theirs = spla.splu(B, permc_spec="MMD_AT_PLUS_A", diag_pivot_thresh=0)
    assert ours.L.nnz + ours.U.nnz < theirs.L.nnz + theirs.U.nnz


@pytest.mark.parametrize("amd", [True, False], ids=["amd", "superlu-ordering"])
def test_sparse_lu_matches_the_product_form_state_by_state(amd, monkeypatch):
    if not amd:

        def missing(matrix):
            raise OrderingUnavailable("libamd not found (as if)")

        monkeypatch.setattr(srn.stationary, "amd_order", missing)
    elif amd_missing():
        pytest.skip("libamd is not installed")
    Q, exact = ring(150)  # 11,476 states, probabilities down to 1e-38
    result = steady_state(Q, method="sparse-lu")
    np.testing.assert_allclose(result.probabilities, exact, rtol=RTOL, atol=0)
    note = result.attempts[-1].note
    assert ("AMD ordering" in note) if amd else ("libamd not found" in note)
