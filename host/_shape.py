"""What one (I, d) shares across calls: the compiled nets, their reachability graphs,
index maps, the edge-rate evaluators and, for small chains, the compiled solve
(:class:`SmallChain`), held in a bounded LRU.

Every rate of the end-system nets is a parameter, so none of this depends on the
profile, C or m; a call with a cached shape only re-evaluates rates and solves.
"""

from __future__ import annotations

import itertools
import threading
from collections import OrderedDict
from collections.abc import Mapping
from typing import Any, NamedTuple

import numpy as np
import scipy.linalg as la
import scipy.sparse as sp
import scipy.sparse.csgraph as csgraph
from numpy.typing import NDArray

from srn import CompiledNet, Limits, ReachabilityGraph, compile_net

from ._small_chain import solve_small_chain
from .nets import NET_PARAMETERS, build_nets

__all__ = [
    "DENSE_MAX",
    "SHAPES",
    "SMALL",
    "SYMMETRY_TOL",
    "DetailedBalance",
    "EdgeRates",
    "Shape",
    "ShapeCache",
    "SmallChain",
    "SmallChainSolution",
]

# Dense LAPACK on the phase-type generator up to this many transient states; beyond it
# the d = 1 chain uses its tridiagonal form and d >= 2 chains sparse Lanczos.
DENSE_MAX = 400
# Below this many states NumPy's dense routines beat the tridiagonal ones on overhead.
SMALL = 64
#: Relative tolerance of the detailed-balance check on every edge (Kolmogorov).
SYMMETRY_TOL = 1e-9


class DetailedBalance:
    """Log-weights of a reversible chain from its edge rates, by detailed balance.

    For a reversible chain w_j / w_i = r(i->j) / r(j->i) on every edge, so the logs
    ``g = log r(i->j) - log r(j->i)`` satisfy ``l_j - l_i = g`` on every edge.  Small
    chains solve the least-squares form of those equations through the graph Laplacian
    (grounded at state 0, factorised once per shape); large ones sum g along a
    breadth-first spanning tree, level by level, which costs O(edges) with no fill-in.
    Either way every edge is then checked (Kolmogorov's criterion), so a chain that is
    not reversible is reported (None) rather than given wrong weights.  Logs keep
    weights that span far more than the double range (hundreds of I/O tasks) exact
    componentwise.
    """

    def __init__(self, rows: NDArray[np.intp], cols: NDArray[np.intp], n: int) -> None:
        self.rows, self.cols, self.n = rows, cols, n
        key, rev_key = rows * n + cols, cols * n + rows
        order = np.argsort(key)
        at = np.minimum(np.searchsorted(key[order], rev_key), max(len(key) - 1, 0))
        paired = len(key) == 0 or bool(np.all(key[order][at] == rev_key))
        self.reverse: NDArray[np.intp] | None = order[at] if paired else None
        self.factor: Any = None
        self.levels: list[tuple[NDArray[np.intp], NDArray[np.intp], NDArray[np.intp]]] = []
        if self.reverse is None or n == 1:
            return
        if n <= DENSE_MAX:
            ones = np.ones(len(rows))
            lap = np.zeros((n, n))
            np.add.at(lap, (rows, rows), ones)
            np.add.at(lap, (rows, cols), -ones)
            lap = lap + lap.T  # both directions of every edge, as in the normal equations
            grounded = lap[1:, 1:]
            if n <= SMALL:
                self.factor = np.linalg.inv(grounded)  # a matvec beats a solve call
            else:
                self.factor = la.cho_factor(grounded, check_finite=False)
            return
        adjacency = sp.csr_array((np.ones(len(rows)), (rows, cols)), shape=(n, n))
        depth = csgraph.shortest_path(adjacency, unweighted=True, indices=0)
        _, parent = csgraph.breadth_first_order(adjacency, 0, return_predecessors=True)
        if not np.all(np.isfinite(depth)):
            self.reverse = None  # not irreducible: no detailed balance to speak of
            return
        nodes = np.argsort(depth, kind="stable")[1:]
        tree_key = parent[nodes].astype(np.intp) * n + nodes
        edge = order[np.searchsorted(key[order], tree_key)]
        bounds = np.searchsorted(depth[nodes], np.arange(1, int(depth.max()) + 2))
        self.levels = [
            (nodes[a:b], parent[nodes[a:b]].astype(np.intp), edge[a:b])
            for a, b in itertools.pairwise(bounds)
        ]

    def log_weights(self, rates: NDArray[np.float64]) -> NDArray[np.float64] | None:
        """log w (max 0) for these edge rates, or None if the chain is not reversible."""
        if self.reverse is None:
            return None
        if self.n == 1:
            return np.zeros(1)
        rows, cols, n = self.rows, self.cols, self.n
        g = np.log(rates) - np.log(rates[self.reverse])
        ell = np.zeros(n)
        if self.levels:
            for nodes, parents, edges in self.levels:
                ell[nodes] = ell[parents] + g[edges]
        else:
            rhs = np.bincount(cols, weights=g, minlength=n) - np.bincount(
                rows, weights=g, minlength=n
            )
            residual = rhs
            # Beyond a few dozen states, two rounds of iterative refinement: the Laplacian
            # of a long path has condition ~n^2, and the refined logs are exact to ulps.
            rounds = 1 if n <= SMALL else 3
            for k in range(rounds):
                if isinstance(self.factor, np.ndarray):
                    ell[1:] += self.factor @ residual[1:]
                else:
                    ell[1:] += la.cho_solve(self.factor, residual[1:], check_finite=False)
                if k + 1 < rounds:
                    diff = ell[cols] - ell[rows]
                    residual = rhs - (
                        np.bincount(cols, weights=diff, minlength=n)
                        - np.bincount(rows, weights=diff, minlength=n)
                    )
        scale = max(1.0, float(np.max(np.abs(g), initial=0.0)))
        if np.max(np.abs(ell[cols] - ell[rows] - g), initial=0.0) > SYMMETRY_TOL * scale:
            return None
        return np.asarray(ell - ell.max(), dtype=np.float64)


class EdgeRates:
    """The edge rates of one end-system net as a function of the parameters, without the
    expression engine.

    The engine evaluates each transition's rate expression over its edges, a few dozen
    small array operations per net and call; for paper-sized workloads that was the
    largest part of a warm call.  The rates of these two nets are simple enough to be
    computed from per-edge data fixed by the shape (the transition, the I/O tasks at the
    processor, how many disk queues tie) in a handful of vector operations.  The formulas
    below follow the rate expressions of :func:`_io_transitions` and :func:`_nets`
    operation for operation, in the engine's (left-to-right) order, so they give the same
    doubles; :class:`Shape` checks that against the engine when it is built and keeps
    using the engine should they ever differ.
    """

    def __init__(self, graph: ReachabilityGraph, disks: int, tagged: bool) -> None:
        src, dst = (e.astype(np.intp) for e in graph.edges)
        marks = graph.markings
        self.n_edges = len(src)
        self.disks = float(disks)
        delta = marks[dst] - marks[src]
        queues = marks[src, 1 : disks + 1]
        if tagged:
            served = marks[dst, graph.net.place_index["served"]] == 1
        else:
            served = np.zeros(len(src), dtype=bool)
        io_delta = np.where(served, 0, delta[:, 0])
        self.to_disk = np.flatnonzero(io_delta == -1)  # io_to_disk_j: processor -> disk j
        self.done = np.flatnonzero(io_delta == 1)  # disk_done_j: disk j -> processor
        self.interrupt = np.flatnonzero(served)  # interrupt_done (tagged net only)
        # Every edge is one of those three moves (else the caller keeps the engine).
        self.complete = len(self.to_disk) + len(self.done) + len(self.interrupt) == len(src)
        # Tasks sharing the processor besides the C CPU-bound ones: the I/O tasks there,
        # plus the interrupt in the tagged net.
        present = marks[src, 0].astype(float) + (1.0 if tagged else 0.0)
        # Which disk position j a move joins or leaves, and the multiplicity factor
        # (1 + the number of other positions holding the same queue length on the side
        # the expression counts: after j for a join, before j for a completion).
        j_in = np.argmax(delta[self.to_disk, 1 : disks + 1] == 1, axis=1)
        j_out = np.argmax(delta[self.done, 1 : disks + 1] == -1, axis=1)
        positions = np.arange(disks)
        q_in = queues[self.to_disk]
        same_after = (q_in == q_in[np.arange(len(j_in)), j_in][:, None]) & (
            positions > j_in[:, None]
        )
        q_out = queues[self.done]
        same_before = (q_out == q_out[np.arange(len(j_out)), j_out][:, None]) & (
            positions < j_out[:, None]
        )
        self.io_in = marks[src[self.to_disk], 0].astype(float)
        self.present_in = present[self.to_disk] if tagged else self.io_in
        self.ties_in = 1.0 + same_after.sum(axis=1)
        self.ties_out = 1.0 + same_before.sum(axis=1)
        self.present_interrupt = present[self.interrupt]

    def __call__(self, p: Mapping[str, float]) -> NDArray[np.float64]:
        """Rates (1/s) of every edge, in the graph's edge order."""
        c, m = p["cpu_tasks"], p["cores"]
        rates = np.empty(self.n_edges)
        # #io_cpu * mu_io_cpu * min(1, cores / (cpu_tasks + #io_cpu [+ #interrupt]))
        #   [* (1 + ties) / d  with d > 1; exact no-ops with one disk]
        share = np.minimum(1, m / (c + self.present_in))
        rates[self.to_disk] = self.io_in * p["mu_io_cpu"] * share * self.ties_in / self.disks
        # mu_disk [* (1 + ties)]
        rates[self.done] = p["mu_disk"] * self.ties_out
        # mu_net * min(1, cores / (cpu_tasks + #io_cpu + #interrupt))
        rates[self.interrupt] = p["mu_net"] * np.minimum(1, m / (c + self.present_interrupt))
        return rates


# Parameter values at which a new shape compares its direct edge rates with the engine's:
# not round, so that any difference in the order of operations shows up.
_RATE_CHECKS = (
    {"mu_io_cpu": 4_600.3, "mu_disk": 1_010.7, "mu_net": 41_600.9, "cpu_tasks": 3.0, "cores": 2.0},
    {"mu_io_cpu": 0.37, "mu_disk": 1.3e7, "mu_net": 7.1, "cpu_tasks": 0.0, "cores": 5.0},
    {"mu_io_cpu": 3.3e5, "mu_disk": 2.9, "mu_net": 1.7e9, "cpu_tasks": 11.0, "cores": 3.0},
)


def direct_rates(
    graph_a: ReachabilityGraph, graph_b: ReachabilityGraph, disks: int
) -> tuple[EdgeRates, EdgeRates] | None:
    """:class:`EdgeRates` of both nets, or None if they differ from the engine's at any
    of the check points (the caller then keeps the engine)."""
    rates_a = EdgeRates(graph_a, disks, tagged=False)
    rates_b = EdgeRates(graph_b, disks, tagged=True)
    if not (rates_a.complete and rates_b.complete):
        return None
    for check in _RATE_CHECKS:
        engine_a = graph_a.with_parameters(check).edge_rates()
        engine_b = graph_b.with_parameters(check).edge_rates()
        if not (
            np.array_equal(rates_a(check), engine_a) and np.array_equal(rates_b(check), engine_b)
        ):
            return None
    return rates_a, rates_b


class SmallChainSolution(NamedTuple):
    """What one compiled solve returns (rates in 1/s, times in s).

    ``io_at_processor``, ``busy_disks`` and ``busy_cores`` are steady-state means of
    Fig. 1a; ``io_distribution`` is P(i = k), k = 0..I.  ``alpha``, ``inner`` and
    ``out_rate`` describe the tagged chain's T as :class:`host._spectral.
    SpectralDistribution` takes them; ``left``, ``right`` and ``S`` are the
    symmetrised form :class:`host._spectral.Spectrum` takes.  ``second`` is E[X^2].
    """

    residual: float
    io_at_processor: float
    busy_disks: float
    busy_cores: float
    io_distribution: NDArray[np.float64]
    alpha: NDArray[np.float64]
    inner: NDArray[np.float64]
    out_rate: NDArray[np.float64]
    left: NDArray[np.float64]
    right: NDArray[np.float64]
    S: NDArray[np.float64]
    mean: float
    second: float


def _rate_data(rates: EdgeRates) -> tuple[Any, ...]:
    """What the kernel's ``_edge_rates`` takes of an :class:`EdgeRates`, in its order."""
    return (
        rates.n_edges,
        rates.to_disk.astype(np.intp),
        rates.done.astype(np.intp),
        rates.interrupt.astype(np.intp),
        *(
            np.ascontiguousarray(x, dtype=np.float64)
            for x in (
                rates.io_in,
                rates.present_in,
                rates.ties_in,
                rates.ties_out,
                rates.present_interrupt,
            )
        ),
    )


class SmallChain:
    """One compiled solve of both chains of a small :class:`Shape`
    (:func:`host._small_chain.solve_small_chain`).

    Build it with :meth:`of`, which returns None for a shape it does not cover.  It holds
    the shape's index arrays in the kernel's argument order (plain arrays: no compiled
    nets), so each call passes them without further work.
    """

    def __init__(self, arguments: tuple[Any, ...]) -> None:
        self.arguments = arguments

    @classmethod
    def of(cls, shape: Shape, small: int, tolerance: float) -> SmallChain | None:
        """The compiled solve of ``shape``, or None unless both chains have at most
        ``small`` states, have direct edge rates and pair every edge with its reverse.

        ``tolerance`` is the relative tolerance of the detailed-balance check.
        """
        a, b = shape.balance_a, shape.balance_b
        if (
            shape.rates_a is None
            or shape.rates_b is None
            or a.reverse is None
            or b.reverse is None
            or a.n > small
            or b.n > small
        ):
            return None
        inverse_a = a.factor if isinstance(a.factor, np.ndarray) else np.zeros((0, 0))
        inverse_b = b.factor if isinstance(b.factor, np.ndarray) else np.zeros((0, 0))
        if (a.n > 1 and inverse_a.shape != (a.n - 1, a.n - 1)) or (
            b.n > 1 and inverse_b.shape != (b.n - 1, b.n - 1)
        ):
            return None
        return cls(
            (
                float(shape.disks),
                float(tolerance),
                *_rate_data(shape.rates_a),
                shape.a_moving,
                shape.a_src,
                shape.a_dst,
                a.reverse.astype(np.intp),
                np.ascontiguousarray(inverse_a, dtype=np.float64),
                np.ascontiguousarray(shape.io_at_cpu, dtype=np.float64),
                np.ascontiguousarray(shape.busy_disks, dtype=np.float64),
                *_rate_data(shape.rates_b),
                shape.b_from_a,
                shape.b_inner,
                shape.b_exit,
                shape.b_exit_row,
                shape.b_rows,
                shape.b_cols,
                b.reverse.astype(np.intp),
                np.ascontiguousarray(inverse_b, dtype=np.float64),
            )
        )

    def solve(self, values: Mapping[str, float]) -> SmallChainSolution | None:
        """Both chains at these parameter values (:func:`host.nets.net_parameters`),
        or None if either fails its reversibility check.

        Parameters
        ----------
        values : mapping
            ``cpu_tasks``, ``cores``, and the rates ``mu_io_cpu``, ``mu_disk``,
            ``mu_net`` (1/s).
        """
        params = np.array(
            [
                values["cpu_tasks"],
                values["cores"],
                values["mu_io_cpu"],
                values["mu_disk"],
                values["mu_net"],
            ]
        )
        ok, *rest = solve_small_chain(params, *self.arguments)
        return SmallChainSolution(*rest) if ok else None


class Shape:
    """Compiled nets, reachability graphs and index maps for one (I, d): rate-free."""

    def __init__(self, io_tasks: int, disks: int, limits: Limits) -> None:
        base = {name: 1.0 for name in NET_PARAMETERS}
        steady_net, tagged_net = build_nets(io_tasks, disks, base)
        self.io_tasks, self.disks = io_tasks, disks
        self.steady: CompiledNet = compile_net(steady_net, limits)
        self.tagged: CompiledNet = compile_net(tagged_net, limits)
        self.graph_a: ReachabilityGraph = self.steady.reachability_graph()
        marks = self.graph_a.markings
        n = marks.shape[0]
        self.n_states = n
        self.io_at_cpu = marks[:, 0].astype(float)
        self.busy_disks = np.count_nonzero(marks[:, 1:], axis=1).astype(float)
        a_src, a_dst = (e.astype(np.intp) for e in self.graph_a.edges)
        self.a_moving = np.flatnonzero(a_src != a_dst)
        self.a_src, self.a_dst = a_src[self.a_moving], a_dst[self.a_moving]
        self.balance_a = DetailedBalance(self.a_src, self.a_dst, n)

        # The vanishing initial marking of Fig. 1b: every Fig. 1a marking plus the
        # interrupt, weighted per call by the Fig. 1a steady state.
        self.starts = np.column_stack(
            [marks, np.ones(n, dtype=marks.dtype), np.zeros(n, dtype=marks.dtype)]
        )
        graph_b = self.tagged.reachability_graph(initial_markings=self.starts)
        self.graph_b: ReachabilityGraph = graph_b
        served = graph_b.markings[:, graph_b.net.place_index["served"]]
        absorbed = np.flatnonzero(served == 1)
        assert len(absorbed) == 1 and list(graph_b.absorbing_states) == list(absorbed)
        self.transient = np.flatnonzero(served == 0)
        nt = len(self.transient)
        pos = np.full(graph_b.n_states, -1, dtype=np.intp)
        pos[self.transient] = np.arange(nt)
        # Which Fig. 1a state each transient state starts from (the starts are tangible).
        origin, ids, _ = graph_b.start_states
        self.b_from_a = np.empty(nt, dtype=np.intp)
        self.b_from_a[pos[ids]] = origin
        assert np.array_equal(
            graph_b.markings[self.transient, : marks.shape[1]], marks[self.b_from_a]
        )
        b_src, b_dst = (e.astype(np.intp) for e in graph_b.edges)
        self.b_exit = np.flatnonzero(b_dst == absorbed[0])
        self.b_exit_row = pos[b_src[self.b_exit]]
        self.b_inner = np.flatnonzero((b_dst != absorbed[0]) & (b_src != b_dst))
        rows, cols = pos[b_src[self.b_inner]], pos[b_dst[self.b_inner]]
        self.b_rows, self.b_cols = rows, cols
        # Every move of an I/O task has its reverse, so the chain of Fig. 1b before
        # absorption is reversible too (checked per call).
        self.balance_b = DetailedBalance(rows, cols, nt)
        # The rates per call without the expression engine, if they agree with it: for
        # the chains solved densely, where the engine's per-call overhead is what counts
        # (larger chains spend their time in the solution and keep the engine's rates).
        direct = direct_rates(self.graph_a, graph_b, disks) if n <= DENSE_MAX else None
        self.rates_a: EdgeRates | None = None if direct is None else direct[0]
        self.rates_b: EdgeRates | None = None if direct is None else direct[1]
        self.tridiagonal = disks == 1 and nt > SMALL
        # T's sparsity pattern in CSR order: the inner edges, then the diagonal.
        states = np.arange(nt)
        all_rows = np.concatenate([rows, states])
        all_cols = np.concatenate([cols, states])
        self.csr_order = np.lexsort((all_cols, all_rows))
        self.csr_indices = all_cols[self.csr_order].astype(np.int32)
        self.csr_indptr = np.searchsorted(all_rows[self.csr_order], np.arange(nt + 1)).astype(
            np.int32
        )
        if self.tridiagonal:
            # One disk: i -> i +- 1 only; ordering the states by i makes T tridiagonal.
            self.order = np.argsort(graph_b.markings[self.transient, 0], kind="stable")
            rank = np.empty(nt, dtype=np.intp)
            rank[self.order] = np.arange(nt)
            self.up = rank[cols] == rank[rows] + 1  # edge k -> k + 1 in that order
            self.up_at = rank[rows[self.up]]
            self.down_at = rank[cols[~self.up]]
        # Both chains in one compiled call when they are this small (None otherwise).
        self.small_chain: SmallChain | None = SmallChain.of(self, SMALL, SYMMETRY_TOL)


class ShapeCache:
    """Bounded LRU of :class:`Shape`, by count and by total states held."""

    def __init__(self, max_entries: int = 32, max_states: int = 300_000) -> None:
        self.max_entries = max_entries
        self.max_states = max_states
        self._items: OrderedDict[tuple[int, int, Limits], Shape] = OrderedDict()
        self._lock = threading.Lock()
        self.hits = 0
        self.misses = 0

    def get(self, io_tasks: int, disks: int, limits: Limits) -> Shape:
        key = (io_tasks, disks, limits)
        with self._lock:
            shape = self._items.get(key)
            if shape is not None:
                self._items.move_to_end(key)
                self.hits += 1
                return shape
            self.misses += 1
        shape = Shape(io_tasks, disks, limits)
        with self._lock:
            self._items[key] = shape
            self._items.move_to_end(key)
            while len(self._items) > 1 and (
                len(self._items) > self.max_entries
                or sum(s.n_states for s in self._items.values()) > self.max_states
            ):
                self._items.popitem(last=False)
        return shape

    def clear(self) -> None:
        with self._lock:
            self._items.clear()
            self.hits = self.misses = 0

    def __len__(self) -> int:
        return len(self._items)


SHAPES = ShapeCache()
