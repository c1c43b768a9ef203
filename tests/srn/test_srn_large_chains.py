"""The compiled paths that only large chains take: generator assembly and the
irreducibility check (the one-pass BiCGSTAB is tested on Kanban N = 3 in
test_srn_kanban.py).

Each is held to an independent reference on the same input (SciPy's sparse
constructors, a closed form, SciPy's strong components), stated per test.
"""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp

from srn import Net, NotErgodicError, reachability_graph, steady_state, timed


def tandem(K: int) -> Net:
    """Two queues in tandem with buffers of K (a feeds b, b blocks a)."""
    return Net(
        {"a": 0, "b": 0},
        [
            timed("arr", 1.0, outputs={"a": 1}, inhibitors={"a": K}),
            timed("mv", 1.5, inputs={"a": 1}, outputs={"b": 1}, inhibitors={"b": K}),
            timed("dep", 2.0, inputs={"b": 1}),
        ],
    )


def test_generator_of_a_large_graph_is_the_one_scipy_assembles():
    # 300 x 300 tandem: 90,601 states and about 270,000 edges is below the compiled
    # assembly's threshold, 500 x 500 (251,001 states, ~750,000 edges) above it.
    # Reference: the COO matrix SciPy builds from the public edge list and rates, with
    # the diagonal set to minus the row sums; every entry must be bitwise equal.
    graph = reachability_graph(tandem(500))
    assert graph.n_edges >= 500_000
    src, dst = graph.edges
    n = graph.n_states
    off = sp.coo_array((graph.edge_rates(), (src, dst)), shape=(n, n)).tocsr()
    off.setdiag(0.0)
    off.eliminate_zeros()
    reference = sp.csr_array(off - sp.diags_array(np.asarray(off.sum(axis=1)).ravel()))
    reference.sum_duplicates()
    Q = graph.generator()
    Q.sort_indices()
    assert Q.has_canonical_format
    np.testing.assert_array_equal(Q.indptr, reference.indptr)
    np.testing.assert_array_equal(Q.indices, reference.indices)
    np.testing.assert_array_equal(Q.data, reference.data)


def birth_death(n: int) -> sp.csr_array:
    """Birth-death chain on n states, birth rate 1 and death rate 2."""
    up = np.ones(n - 1)
    Q = sp.diags_array([up, 2.0 * up], offsets=[1, -1], shape=(n, n)).tocsr()
    return sp.csr_array(Q - sp.diags_array(np.asarray(Q.sum(axis=1)).ravel()))


def test_large_chain_with_a_transient_state_and_one_with_two_classes():
    # 150,000 states: above the compiled irreducibility check's threshold.  A state
    # that feeds the chain but is never re-entered is transient and gets probability
    # 0; the rest is the birth-death chain, pi_k proportional to 2^-k (detailed
    # balance), held to 1e-12 absolute.  Two copies side by side are two closed
    # classes: NotErgodicError, as SciPy's strong components find (reference).
    n = 150_000
    bd = birth_death(n)
    feed = sp.csr_array(([1.0, -1.0], ([n, n], [0, n])), shape=(n + 1, n + 1))
    Q = sp.csr_array(sp.block_diag([bd, sp.csr_array((1, 1))]) + feed)
    result = steady_state(Q, method="direct")
    assert result.transient_states == 1
    assert result.probabilities[n] == 0.0
    expected = 0.5 ** np.arange(60)
    np.testing.assert_allclose(result.probabilities[:60], expected / 2.0, rtol=0, atol=1e-12)
    with pytest.raises(NotErgodicError) as info:
        steady_state(sp.csr_array(sp.block_diag([bd, bd])), method="direct")
    assert len(info.value.classes) == 2


def test_bicgstab_gs_with_more_distinct_rates_than_it_can_code():
    # A random chain of 5,000 states, each with 15 random successors at rates
    # log-uniform in [0.1, 10]: 75,000 distinct rates, more than the 65,535 the
    # solver stores as 2-byte codes, so it keeps the values themselves.  Reference:
    # plain Gauss-Seidel sweeps (the "sor" route) on the same generator, 1e-12
    # absolute per state; both meet the residual target.
    rng = np.random.default_rng(3)
    n, k = 5_000, 15
    rows = np.repeat(np.arange(n), k)
    cols = (rows + rng.integers(1, n, n * k)) % n
    off = sp.coo_array((10 ** rng.uniform(-1, 1, n * k), (rows, cols)), shape=(n, n)).tocsr()
    Q = sp.csr_array(off - sp.diags_array(np.asarray(off.sum(axis=1)).ravel()))
    krylov = steady_state(Q, method="bicgstab-gs")
    assert krylov.method == "bicgstab-gs"
    sweeps = steady_state(Q, method="sor")
    np.testing.assert_allclose(krylov.probabilities, sweeps.probabilities, rtol=0, atol=1e-12)


@pytest.mark.parametrize("pinned", [0, 17, 49])
def test_gauss_seidel_preconditioner_is_the_forward_solve_with_d_plus_l(pinned):
    # The GMRES fallback of bicgstab-gs applies M^-1 with M = D + L of A = Q^T, row
    # `pinned` replaced by the identity.  Reference: NumPy's dense solve with that M,
    # to 1e-12 relative.
    from srn._bicgstab import SplitSystem

    rng = np.random.default_rng(pinned)
    n = 50
    dense = np.where(rng.random((n, n)) < 0.2, rng.uniform(0.1, 3.0, (n, n)), 0.0)
    np.fill_diagonal(dense, 0.0)
    np.fill_diagonal(dense, -dense.sum(axis=1))
    Q = sp.csr_array(dense)
    system = SplitSystem.from_generator(Q.indptr, Q.indices, Q.data, pinned)
    A = dense.T.copy()
    A[pinned] = 0.0
    A[pinned, pinned] = 1.0
    r = rng.random(n)
    np.testing.assert_allclose(system.precondition(r), np.linalg.solve(np.tril(A), r), rtol=1e-12)
