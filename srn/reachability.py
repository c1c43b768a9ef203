"""Tangible reachability graph of an SRN, generated a whole frontier at a time.

Markings are rows of an integer array.  Each breadth-first level fires every timed
transition on every frontier marking with NumPy, eliminates vanishing markings on the
fly (immediate transitions, by priority then weight), and deduplicates successors
against the visited set through packed integer keys and a sorted index.  Nothing loops
in Python over markings.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, replace
from typing import Any

import numpy as np
import scipy.sparse as sp
from numpy.typing import ArrayLike, NDArray

from ._expressions import Columns, RowError
from ._firing import MARKING_DTYPE, FiringRules
from .errors import (
    EvaluationError,
    LimitExceededError,
    NetDefinitionError,
    VanishingLoopError,
)
from .net import Limits
from .progress import ExplorationProgress, ExplorationReporter

__all__ = ["ReachabilityGraph", "explore"]

# Nets with constant firing rules switch to the compiled explorer past this many states.
_COMPILED_FROM_STATES = 50_000
# Graphs with this many edges assemble their generator with the compiled kernel (below
# it, SciPy's COO route costs less than importing Numba in a fresh worker).
_COMPILED_ASSEMBLY_FROM_EDGES = 500_000
# Frontier rows processed together: large enough to amortise NumPy call overhead,
# small enough that per-transition temporaries stay within a few hundred MB.
_CHUNK = 1 << 17


class _KeyCodec:
    """Packs markings into sortable keys: uint64 bit fields, or raw bytes when too wide.

    Field widths grow when a place's count outgrows them; the owner re-encodes its
    visited keys when :attr:`version` changes.
    """

    def __init__(self, initial: NDArray[Any]) -> None:
        self.bits = np.array([max(2, int(v).bit_length() + 1) for v in initial], dtype=np.int64)
        self.version = 0
        self._layout()

    def _layout(self) -> None:
        self.packed = int(self.bits.sum()) <= 64
        self.shifts = np.concatenate(([0], np.cumsum(self.bits)[:-1])).astype(np.uint64)
        self.capacity = (1 << np.minimum(self.bits, 62)) - 1

    def fits(self, markings: NDArray[Any]) -> bool:
        if not self.packed or markings.shape[0] == 0:
            return True
        return bool(np.all(markings.max(axis=0) <= self.capacity))

    def grow(self, markings: NDArray[Any]) -> None:
        top = markings.max(axis=0)
        over = top > self.capacity
        needed = np.array([int(v).bit_length() for v in top], dtype=np.int64)
        self.bits = np.where(over, np.maximum(self.bits + 2, needed + 1), self.bits)
        self.version += 1
        self._layout()

    def encode(self, markings: NDArray[Any]) -> NDArray[Any]:
        if self.packed:
            keys = np.zeros(markings.shape[0], dtype=np.uint64)
            for p in range(markings.shape[1]):
                if self.bits[p]:
                    keys |= markings[:, p].astype(np.uint64) << self.shifts[p]
            return keys
        rows = np.ascontiguousarray(markings, dtype=MARKING_DTYPE)
        return rows.view(np.dtype((np.void, rows.dtype.itemsize * rows.shape[1]))).ravel()


def _narrowest(markings: NDArray[Any]) -> NDArray[Any]:
    """``markings`` in the narrowest signed integer type that holds them (signed, so
    that differences of two markings do not wrap around)."""
    top = int(markings.max(initial=0))
    for dtype in (np.int8, np.int16):
        if top <= np.iinfo(dtype).max:
            if markings.dtype == dtype:
                return markings
            narrow = markings.astype(dtype)
            # Graphs are shared (cached, cloned by with_parameters): read-only stays so.
            narrow.flags.writeable = markings.flags.writeable
            return narrow
    return markings


def _void_rows(markings: NDArray[Any]) -> NDArray[Any]:
    """Rows as comparable byte strings (one void scalar per row, no copy when contiguous)."""
    rows = np.ascontiguousarray(markings)
    return rows.view(np.dtype((np.void, rows.dtype.itemsize * rows.shape[1]))).ravel()


def _group_rows(
    markings: NDArray[Any], origin: NDArray[np.intp]
) -> tuple[NDArray[np.intp], NDArray[np.intp]]:
    """Group equal ``(origin, marking)`` pairs: the first row of each group and each row's group.

    Rows are sorted by a 64-bit hash, and equal hashes are checked to be equal rows,
    so the grouping is exact; on a hash collision between different rows (never seen
    in practice) the rows are sorted as byte strings instead.  Sorting byte strings
    directly costs several times more (NumPy compares them element by element).
    """
    from ._kernels import row_hash, same_as_previous

    n = len(origin)
    markings = np.ascontiguousarray(markings)
    origin = np.ascontiguousarray(origin, dtype=np.intp)
    h = row_hash(markings, origin)
    order = np.argsort(h)
    hs = h[order]
    same_hash = hs[1:] == hs[:-1]
    same_row = same_as_previous(markings, origin, order)
    if np.any(same_hash & ~same_row):
        keyed = np.column_stack([origin.astype(np.int64), markings.astype(np.int64)])
        order = np.argsort(_void_rows(keyed), kind="stable")
        ks = keyed[order]
        same_row = np.all(ks[1:] == ks[:-1], axis=1)
    starts = np.ones(n, dtype=bool)
    starts[1:] = ~same_row
    group = np.cumsum(starts) - 1
    inverse = np.empty(n, dtype=np.intp)
    inverse[order] = group
    return order[starts], inverse


def _sorted_unique(keys: NDArray[Any]) -> tuple[NDArray[Any], NDArray[np.intp]]:
    """Sorted unique keys and the inverse map (``np.unique`` is slow on NumPy 2.3+ ints)."""
    order = np.argsort(keys, kind="stable")
    s = keys[order]
    first = np.ones(len(s), dtype=bool)
    first[1:] = s[1:] != s[:-1]
    group = np.cumsum(first) - 1
    inverse = np.empty(len(keys), dtype=np.intp)
    inverse[order] = group
    return s[first], inverse


@dataclass
class _Resolved:
    """Tangible outcomes of a batch of firings, after vanishing elimination."""

    origin: NDArray[np.intp]  # index of the originating firing
    markings: NDArray[Any]
    probability: NDArray[np.float64] | None  # None: every outcome has probability 1
    # Immediate-firing mass per originating firing (for throughput of immediates).
    imm_origin: NDArray[np.intp]
    imm_transition: NDArray[np.intp]
    imm_mass: NDArray[np.float64]
    vanishing: NDArray[Any]  # distinct vanishing markings met (void keys)


class _Explorer:
    def __init__(
        self,
        net: FiringRules,
        params: Mapping[str, float],
        starts: NDArray[Any],
        reporter: ExplorationReporter | None = None,
    ) -> None:
        self.net = net
        self.starts = starts
        self.params = params
        self.reporter = reporter
        self.limits: Limits = net.limits
        self.priorities = np.array([t.priority for t in net.immediate], dtype=np.int64)

    # -- vanishing elimination ---------------------------------------------
    def _immediate_choice(
        self, markings: NDArray[Any]
    ) -> tuple[NDArray[np.bool_], NDArray[np.float64] | None]:
        """Which rows are vanishing, and the firing probability of each immediate transition."""
        n = markings.shape[0]
        imm = self.net.immediate
        if not imm or n == 0:
            return np.zeros(n, dtype=bool), None
        enabled = np.column_stack([self.net.enabled(t, markings, self.params) for t in imm])
        vanishing: NDArray[np.bool_] = np.asarray(enabled.any(axis=1), dtype=bool)
        if not vanishing.any():
            return vanishing, None
        prio = np.where(enabled, self.priorities[None, :], np.iinfo(np.int64).min)
        top = prio.max(axis=1, keepdims=True)
        chosen = enabled & (prio == top)
        weights = np.zeros(enabled.shape, dtype=float)
        for j, t in enumerate(imm):
            rows = np.flatnonzero(chosen[:, j])
            if len(rows):
                weights[rows, j] = self.net.positive_values(
                    t.weight, markings, rows, self.params, t, "weight"
                )
        total = weights.sum(axis=1)
        dead = vanishing & (total <= 0)
        if np.any(dead):
            i = int(np.flatnonzero(dead)[0])
            raise EvaluationError(
                "every enabled immediate transition of the highest priority has weight 0",
                marking=self.net.marking_dict(markings[i]),
            )
        with np.errstate(invalid="ignore", divide="ignore"):
            probs = np.where(vanishing[:, None], weights / total[:, None], 0.0)
        return vanishing, probs

    def resolve(self, markings: NDArray[Any]) -> _Resolved:
        """Follow immediate transitions from each row until only tangible markings remain."""
        vanishing, probs = self._immediate_choice(markings)
        empty_i = np.zeros(0, dtype=np.intp)
        if probs is None:
            return _Resolved(
                np.arange(markings.shape[0]),
                markings,
                None,
                empty_i,
                empty_i,
                np.zeros(0),
                _void_rows(markings[:0]),
            )
        done_origin = [np.flatnonzero(~vanishing)]
        done_markings = [markings[~vanishing]]
        done_prob = [np.ones(len(done_origin[0]))]
        imm_o: list[NDArray[np.intp]] = []
        imm_t: list[NDArray[np.intp]] = []
        imm_m: list[NDArray[np.float64]] = []
        rows = np.flatnonzero(vanishing)
        origin = rows
        cur = markings[rows]
        mass = np.ones(len(rows))
        probs = probs[rows]
        seen = _void_rows(cur[:0])
        depth = 0
        while True:
            seen = np.union1d(seen, _void_rows(cur))
            if len(seen) > self.limits.max_vanishing:
                raise self.limits.exceeded(
                    "max_vanishing", self.limits.max_vanishing + 1, "vanishing markings"
                )
            depth += 1
            if depth > len(seen):
                # Every surviving path has visited `depth` vanishing markings, more than
                # exist among those met: by pigeonhole one repeats, so a loop exists.
                sample = [self.net.marking_dict(m) for m in cur[:5]]
                raise VanishingLoopError(sample)
            if depth > self.limits.max_vanishing_depth:
                raise self.limits.exceeded(
                    "max_vanishing_depth", depth, "immediate firings in a row"
                )
            next_o, next_m, next_p = [], [], []
            for j, t in enumerate(self.net.immediate):
                sel = np.flatnonzero(probs[:, j] > 0)
                if not len(sel):
                    continue
                p = mass[sel] * probs[sel, j]
                next_o.append(origin[sel])
                next_m.append(self.net.fire(t, cur[sel], self.params))
                next_p.append(p)
                imm_o.append(origin[sel])
                imm_t.append(np.full(len(sel), j, dtype=np.intp))
                imm_m.append(p)
            origin = np.concatenate(next_o)
            cur = np.concatenate(next_m)
            mass = np.concatenate(next_p)
            # Merge paths that reach the same marking from the same firing, so that
            # diamonds of independent immediate transitions do not multiply paths.
            first, inverse = _group_rows(cur, origin)
            if len(first) < len(cur):
                mass = np.bincount(inverse, weights=mass, minlength=len(first)).astype(float)
                origin = origin[first]
                cur = cur[first]
            vanishing, probs_next = self._immediate_choice(cur)
            tangible = ~vanishing
            done_origin.append(origin[tangible])
            done_markings.append(cur[tangible])
            done_prob.append(mass[tangible])
            if probs_next is None or not vanishing.any():
                break
            keep = np.flatnonzero(vanishing)
            origin, cur, mass, probs = origin[keep], cur[keep], mass[keep], probs_next[keep]
        return _Resolved(
            np.concatenate(done_origin),
            np.concatenate(done_markings),
            np.concatenate(done_prob),
            np.concatenate(imm_o) if imm_o else empty_i,
            np.concatenate(imm_t) if imm_t else empty_i,
            np.concatenate(imm_m) if imm_m else np.zeros(0),
            seen,
        )

    # -- breadth-first exploration -------------------------------------------
    def run(self) -> ReachabilityGraph:
        net = self.net
        n_places = len(net.place_names)
        start = self.resolve(self.starts)
        codec = _KeyCodec(self.starts.max(axis=0))

        capacity = 1024
        store = np.empty((capacity, n_places), dtype=MARKING_DTYPE)
        n_states = 0
        sorted_keys = codec.encode(store[:0])
        sorted_ids = np.zeros(0, dtype=np.int64)
        vanishing_seen = [start.vanishing]

        def add(markings: NDArray[Any]) -> NDArray[np.int64]:
            """Ids of ``markings`` (distinct rows), appending the new ones to the store."""
            nonlocal store, capacity, n_states, sorted_keys, sorted_ids
            if not codec.fits(markings):
                codec.grow(markings)
                sorted_keys = codec.encode(store[:n_states])
                order = np.argsort(sorted_keys, kind="stable")
                sorted_keys, sorted_ids = sorted_keys[order], order.astype(np.int64)
            keys = codec.encode(markings)
            uniq, inverse = _sorted_unique(keys)
            pos = np.searchsorted(sorted_keys, uniq)
            hit = pos < len(sorted_keys)
            hit[hit] = sorted_keys[pos[hit]] == uniq[hit]
            ids = np.empty(len(uniq), dtype=np.int64)
            ids[hit] = sorted_ids[pos[hit]]
            new = np.flatnonzero(~hit)
            if len(new):
                if n_states + len(new) > self.limits.max_states:
                    # Stop at the limit: the states past it are not stored, and the
                    # frontier was cut to the room left (below), so little is wasted.
                    raise self.limits.exceeded(
                        "max_states", self.limits.max_states + 1, "tangible markings"
                    )
                ids[new] = np.arange(n_states, n_states + len(new))
                first = np.zeros(len(uniq), dtype=np.intp)
                first[inverse[::-1]] = np.arange(len(keys))[::-1]
                while n_states + len(new) > capacity:
                    capacity *= 2
                    grown = np.empty((capacity, n_places), dtype=MARKING_DTYPE)
                    grown[:n_states] = store[:n_states]
                    store = grown
                store[n_states : n_states + len(new)] = markings[first[new]]
                n_states += len(new)
                sorted_keys = np.insert(sorted_keys, pos[new], uniq[new])
                sorted_ids = np.insert(sorted_ids, pos[new], ids[new])
            return ids[inverse]

        start_ids = add(start.markings)
        start_prob = np.ones(len(start_ids)) if start.probability is None else start.probability
        start_map = (start.origin, start_ids, start_prob, len(self.starts))

        # Edges are filed by transition as they are found, so that the final arrays come
        # out grouped without a global sort (which would hold three extra copies of them).
        n_transitions = len(net.transitions)
        by_transition: list[list[tuple[NDArray[Any], NDArray[Any], NDArray[Any] | None]]] = [
            [] for _ in range(n_transitions)
        ]
        has_prob = False
        imm_src: list[NDArray[Any]] = []
        imm_tt: list[NDArray[Any]] = []
        imm_j: list[NDArray[Any]] = []
        imm_mass: list[NDArray[Any]] = []
        n_edges = 0
        enabled_any = np.zeros(0, dtype=bool)
        lo = 0
        zero_rate_firings = 0
        while lo < n_states:
            if self.reporter is not None:
                # Between chunks the counts agree: every edge out of the first lo states.
                self.reporter(n_states, n_edges, lo)
            # Expand no more of the frontier than there is room left for new states, so
            # a net that outgrows max_states stops near the limit, not a chunk past it.
            room = self.limits.max_states - n_states
            hi = min(n_states, lo + min(_CHUNK, max(room, 1024)))
            frontier = store[lo:hi]
            ids = np.arange(lo, hi, dtype=np.int64)
            succ, src, tid = [], [], []
            fired = np.zeros(hi - lo, dtype=bool)
            for t in net.timed:
                rows, zero_rate = net.timed_enabled(t, frontier, self.params)
                zero_rate_firings += zero_rate
                if not len(rows):
                    continue
                fired[rows] = True
                succ.append(net.fire(t, frontier[rows], self.params))
                src.append(ids[rows])
                tid.append(np.full(len(rows), t.index, dtype=np.int32))
            enabled_any = np.concatenate([enabled_any, fired])
            lo = hi
            if not succ:
                continue
            all_succ = np.concatenate(succ)
            all_src = np.concatenate(src)
            all_tid = np.concatenate(tid)
            res = self.resolve(all_succ)
            vanishing_seen.append(res.vanishing)
            if len(vanishing_seen) > 8:
                # Merge now and then: the count must be of distinct markings, and the
                # pieces would otherwise hold every duplicate until the end.
                vanishing_seen = [np.unique(np.concatenate(vanishing_seen))]
                if len(vanishing_seen[0]) > self.limits.max_vanishing:
                    raise self.limits.exceeded(
                        "max_vanishing", self.limits.max_vanishing + 1, "vanishing markings"
                    )
            dst = add(res.markings)
            e_src = all_src[res.origin]
            n_edges += len(dst)
            if n_edges > self.limits.max_edges:
                raise self.limits.exceeded("max_edges", n_edges, "CTMC transitions")
            e_tid = all_tid[res.origin]
            order = np.argsort(e_tid, kind="stable")
            bounds = np.searchsorted(e_tid[order], np.arange(n_transitions + 1))
            has_prob = has_prob or res.probability is not None
            for found in np.flatnonzero(np.diff(bounds)):
                part = order[bounds[found] : bounds[found + 1]]
                by_transition[found].append(
                    (
                        e_src[part].astype(np.int32),
                        dst[part].astype(np.int32),
                        None if res.probability is None else res.probability[part],
                    )
                )
            if len(res.imm_origin):
                imm_src.append(all_src[res.imm_origin])
                imm_tt.append(all_tid[res.imm_origin])
                imm_j.append(res.imm_transition)
                imm_mass.append(res.imm_mass)

        markings = store[:n_states].copy()
        markings.flags.writeable = False
        src_all = np.empty(n_edges, dtype=np.int32)
        dst_all = np.empty(n_edges, dtype=np.int32)
        tid_all = np.empty(n_edges, dtype=np.int32)
        prob_all = np.ones(n_edges) if has_prob else None
        at = 0
        for t_index, pieces in enumerate(by_transition):
            for piece_src, e_dst, e_prob in pieces:
                stop = at + len(piece_src)
                src_all[at:stop] = piece_src
                dst_all[at:stop] = e_dst
                tid_all[at:stop] = t_index
                if prob_all is not None and e_prob is not None:
                    prob_all[at:stop] = e_prob
                at = stop
            by_transition[t_index] = []
        vanishing: NDArray[np.int64] | list[int] = (
            np.unique(np.concatenate(vanishing_seen)) if vanishing_seen else []
        )
        if len(vanishing) > self.limits.max_vanishing:
            raise self.limits.exceeded(
                "max_vanishing", self.limits.max_vanishing + 1, "vanishing markings"
            )
        return ReachabilityGraph(
            net=net,
            markings=markings,
            src=src_all,
            dst=dst_all,
            transition=tid_all,
            probability=prob_all,
            start_map=start_map,
            dead=np.flatnonzero(~enabled_any),
            immediate_flow=(
                _cat(imm_src, np.int64),
                _cat(imm_tt, np.int32),
                _cat(imm_j, np.intp),
                _cat(imm_mass, np.float64),
            ),
            n_vanishing=len(vanishing),
            zero_rate_firings=zero_rate_firings,
            parameters=dict(self.params),
            sorted_keys=sorted_keys,
            sorted_ids=sorted_ids,
            codec=codec,
        )


def _cat(chunks: list[NDArray[Any]], dtype: Any) -> NDArray[Any]:
    return np.concatenate(chunks).astype(dtype, copy=False) if chunks else np.zeros(0, dtype)


def explore(
    net: FiringRules,
    params: Mapping[str, float],
    starts: NDArray[Any],
    progress: Callable[[ExplorationProgress], None] | None = None,
) -> ReachabilityGraph:
    """Explore the tangible reachability graph of ``net`` from the markings ``starts``.

    Parameters
    ----------
    net : FiringRules
        The compiled net (usually a :class:`srn.CompiledNet`).
    params : dict of str to float
        Every parameter's value.
    starts : ndarray of int32, shape (k, n_places)
        Initial markings (the initial distribution is uniform over them).
    progress : callable, optional
        Called with an :class:`~srn.progress.ExplorationProgress` about every half
        second, and once at the end; an exception it raises stops the exploration.

    Returns
    -------
    ReachabilityGraph

    Raises
    ------
    LimitExceededError
        When a count passes ``max_states``, ``max_edges``, ``max_vanishing`` or
        ``max_vanishing_depth`` of ``net.limits``.
    VanishingLoopError, EvaluationError
        See :func:`srn.reachability_graph`.
    """
    reporter = None if progress is None else ExplorationReporter(progress)
    if _constant_rules(net) and net.limits.max_states > _COMPILED_FROM_STATES:
        # Small nets stay on the NumPy explorer: importing Numba and loading the kernel
        # costs more than they take, in every fresh worker process.  Past the threshold
        # the compiled explorer starts over, having lost at most that much work.
        probe = _Explorer(net, params, starts, reporter)
        probe.limits = replace(net.limits, max_states=_COMPILED_FROM_STATES)
        try:
            graph = probe.run()
        except LimitExceededError as exc:
            if exc.limit != "max_states":
                raise
            graph = _explore_constant(net, params, starts, reporter)
    else:
        graph = _Explorer(net, params, starts, reporter).run()
    if reporter is not None:
        reporter(graph.n_states, graph.n_edges, graph.n_states, done=True)
    return graph


def _run_watched(
    kernels: Any, arguments: tuple[Any, ...], reporter: ExplorationReporter | None
) -> Any:
    """``kernels.explore_constant(*arguments, watch)``, reporting its counts as it runs."""
    watch = np.zeros(4, dtype=np.int64)
    call = (*arguments, watch)
    if reporter is None:
        return kernels.explore_constant(*call)
    with ThreadPoolExecutor(1, thread_name_prefix="srn-explore") as pool:
        running = pool.submit(kernels.explore_constant, *call)
        try:
            while True:
                try:
                    return running.result(timeout=reporter.every)
                except TimeoutError:
                    # The kernel writes states, edges, then expanded, and may write again
                    # between these reads; reading in the reverse order pairs an expanded
                    # count with a states count at least as new, so expanded <= states.
                    expanded = int(watch[kernels.WATCH_EXPANDED])
                    edges = int(watch[kernels.WATCH_EDGES])
                    states = int(watch[kernels.WATCH_STATES])
                    reporter(states, edges, expanded)
        except BaseException:
            # The kernel reads this within a few thousand states; leaving the pool's
            # block waits for it, so nothing runs on after the exception.
            watch[kernels.WATCH_STOP] = 1
            raise


def _constant_rules(net: FiringRules) -> bool:
    """Whether every firing rule is a constant (see :mod:`srn._exploration_kernels`)."""
    return not net.immediate and all(
        t.delta is not None
        and t.guard is None
        and all(a.constant is not None for a in t.inhibitors)
        and t.rate.constant is not None
        and t.rate.constant > 0
        for t in net.timed
    )


def _explore_constant(
    net: FiringRules,
    params: Mapping[str, float],
    starts: NDArray[Any],
    reporter: ExplorationReporter | None = None,
) -> ReachabilityGraph:
    """Exploration by the compiled kernel; the same graph as :class:`_Explorer` gives.

    With a ``reporter``, the kernel runs in a thread of its own (it releases the GIL)
    while this one reads its counts and reports them; an exception from the report asks
    the kernel to stop, waits for it, and propagates.
    """
    from . import _exploration_kernels as kernels

    n_places = len(net.place_names)
    shape = (len(net.timed), n_places)
    needs = np.zeros(shape, dtype=np.int32)
    inhibit = np.zeros(shape, dtype=np.int32)
    delta = np.zeros(shape, dtype=np.int32)
    for row, t in enumerate(net.timed):
        for arc in t.inputs:
            needs[row, arc.place] = max(needs[row, arc.place], arc.constant or 0)
        for arc in t.inhibitors:
            if arc.constant:
                current = inhibit[row, arc.place]
                inhibit[row, arc.place] = min(current, arc.constant) if current else arc.constant
        assert t.delta is not None
        delta[row] = t.delta
    limits = net.limits
    # Markings packed into one 64-bit key when every place fits its share of the bits
    # (4 bits each for up to 16 places); otherwise, or when a count outgrows its field,
    # the kernel compares whole rows.
    bits = 64 // n_places if n_places else 0
    for attempt_bits in [bits, 0] if bits >= 2 else [0]:
        arguments = (
            np.ascontiguousarray(starts, dtype=np.int32),
            needs,
            inhibit,
            delta,
            limits.max_states,
            limits.max_edges,
            min(attempt_bits, 31),
        )
        status, markings, start_ids, src, dst, tid, enabled = _run_watched(
            kernels, arguments, reporter
        )
        if status != kernels.REPACK:
            break
    if status == kernels.STATES_EXCEEDED:
        raise limits.exceeded("max_states", limits.max_states + 1, "tangible markings")
    if status == kernels.EDGES_EXCEEDED:
        raise limits.exceeded("max_edges", limits.max_edges + 1, "CTMC transitions")
    if status == kernels.STOPPED:
        # Only a report that raised asks the kernel to stop, and that exception is on its
        # way up; a partial graph must never pass for a whole one.
        raise RuntimeError("the compiled explorer stopped before the graph was complete")
    if status == kernels.OVERFLOW:
        # The NumPy explorer finds the same overflow and names the transition and marking.
        return _Explorer(net, params, starts, reporter).run()
    # Only timed transitions, so the kernel's row numbers are the transition indices.
    src, dst, tid = kernels.group_by_transition(src, dst, tid, len(net.transitions))
    markings.flags.writeable = False
    empty = np.zeros(0)
    return ReachabilityGraph(
        net=net,
        markings=markings,
        src=src,
        dst=dst,
        transition=tid,
        probability=None,
        start_map=(
            np.arange(len(starts)),
            start_ids.astype(np.int64),
            np.ones(len(starts)),
            len(starts),
        ),
        dead=np.flatnonzero(~enabled),
        immediate_flow=(
            empty.astype(np.int64),
            empty.astype(np.int32),
            empty.astype(np.intp),
            empty,
        ),
        n_vanishing=0,
        zero_rate_firings=0,
        parameters=dict(params),
        sorted_keys=None,
        sorted_ids=None,
        codec=None,
    )


class ReachabilityGraph:
    """The tangible reachability graph of a net, and the CTMC it defines.

    Built by :func:`reachability_graph` or :meth:`CompiledNet.reachability_graph`.

    Attributes
    ----------
    markings : ndarray of int8, int16 or int32, shape (n_states, n_places)
        Tangible markings; row ``i`` is state ``i`` of the CTMC.  Stored in the narrowest
        signed type that holds the largest count (int8 up to 127 tokens a place): a
        Kanban N = 7 graph keeps 16 bytes a state of markings where int32 took 64.
        Cast before arithmetic that could leave that range.
    place_names : tuple of str
        Column names of ``markings``.
    initial_distribution : ndarray, shape (n_states,)
        Distribution over tangible markings reached from the initial marking (a
        vanishing initial marking spreads over several).
    dead_states : ndarray of int
        States in which no transition is enabled.
    absorbing_states : ndarray of int
        States with no transition to another state (dead states included).
    n_vanishing : int
        Distinct vanishing markings met and eliminated.
    zero_rate_firings : int
        Firings dropped during exploration because the timed transition's rate was 0
        at the marking (such a transition is not enabled there).
    parameters : dict
        Parameter values the rates are evaluated with.
    """

    def __init__(
        self,
        *,
        net: FiringRules,
        markings: NDArray[Any],
        src: NDArray[np.int32],
        dst: NDArray[np.int32],
        transition: NDArray[np.int32],
        probability: NDArray[np.float64] | None,
        start_map: tuple[NDArray[np.intp], NDArray[np.int64], NDArray[np.float64], int],
        dead: NDArray[np.intp],
        immediate_flow: tuple[NDArray[Any], NDArray[Any], NDArray[Any], NDArray[Any]],
        n_vanishing: int,
        zero_rate_firings: int,
        parameters: dict[str, float],
        sorted_keys: NDArray[Any] | None,
        sorted_ids: NDArray[np.int64] | None,
        codec: _KeyCodec | None,
    ) -> None:
        self.net = net
        self.markings = _narrowest(markings)
        self.place_names = net.place_names
        # ``transition`` is only needed for the slices below: not kept (4 bytes an edge).
        self._src, self._dst, self._prob = src, dst, probability
        self._start_map = start_map
        n_starts = start_map[3]
        self.initial_distribution = self._spread(np.full(n_starts, 1.0 / n_starts))
        self.dead_states = dead
        self._immediate_flow = immediate_flow
        self.n_vanishing = n_vanishing
        self.zero_rate_firings = zero_rate_firings
        self.parameters = parameters
        self._sorted_keys, self._sorted_ids, self._codec = sorted_keys, sorted_ids, codec
        # Same dtype on both sides, or searchsorted copies the whole edge array.
        bounds = np.searchsorted(
            transition, np.arange(len(net.transitions) + 1, dtype=transition.dtype)
        )
        self._slices = {
            t.index: slice(int(bounds[t.index]), int(bounds[t.index + 1])) for t in net.timed
        }
        self._rates: NDArray[np.float64] | None = None
        moving = src != dst
        leaves = np.zeros(len(markings), dtype=bool)
        leaves[src[moving]] = True
        self.absorbing_states = np.flatnonzero(~leaves)

    def with_parameters(self, parameters: Mapping[str, float]) -> ReachabilityGraph:
        """This graph with rates evaluated for other parameter values (structure shared).

        The structure is not re-explored: if the new values make a rate 0 on an edge,
        that edge stays with rate 0 (the transition would not be enabled there).
        :meth:`srn.CompiledNet.reachability_graph` re-explores in that case instead.
        """
        if dict(parameters) == self.parameters:
            return self
        clone = object.__new__(ReachabilityGraph)
        clone.__dict__.update(self.__dict__)
        clone.parameters = dict(parameters)
        clone._rates = None
        return clone

    def _spread(self, start_probabilities: NDArray[np.float64]) -> NDArray[np.float64]:
        origin, ids, prob, _ = self._start_map
        weights = start_probabilities[origin] * prob
        return np.bincount(ids, weights=weights, minlength=self.n_states).astype(float)

    def with_initial(self, probabilities: ArrayLike) -> ReachabilityGraph:
        """This graph with another distribution over the initial markings it was built from.

        Parameters
        ----------
        probabilities : array, shape (k,)
            Probability of each of the ``k`` initial markings; must sum to 1.

        Raises
        ------
        NetDefinitionError
            If the vector has the wrong length, negative entries or does not sum to 1.
        """
        p = np.asarray(probabilities, dtype=float)
        k = self._start_map[3]
        if p.shape != (k,) or not np.all(np.isfinite(p)) or np.any(p < 0):
            raise NetDefinitionError(
                f"initial probabilities must be {k} finite non-negative numbers",
                field="initial_probabilities",
            )
        if abs(p.sum() - 1.0) > 1e-9:
            raise NetDefinitionError(
                f"initial probabilities must sum to 1, got {p.sum()!r}",
                field="initial_probabilities",
            )
        clone = object.__new__(ReachabilityGraph)
        clone.__dict__.update(self.__dict__)
        clone.initial_distribution = self._spread(p)
        return clone

    # -- sizes and lookup ------------------------------------------------------
    @property
    def n_states(self) -> int:
        """Number of tangible markings."""
        return int(self.markings.shape[0])

    @property
    def n_edges(self) -> int:
        """Number of timed firings between tangible markings (self-loops included)."""
        return len(self._src)

    @property
    def edges(self) -> tuple[NDArray[np.int32], NDArray[np.int32]]:
        """Source and target state of every edge, in the order of :meth:`edge_rates`.

        Edges are grouped by transition; a firing that ends in vanishing markings gives
        one edge per tangible marking reached.  The arrays are read-only views.
        """
        src, dst = self._src.view(), self._dst.view()
        src.flags.writeable = dst.flags.writeable = False
        return src, dst

    @property
    def start_states(self) -> tuple[NDArray[np.intp], NDArray[np.int64], NDArray[np.float64]]:
        """Where each initial marking starts the chain: ``(initial, state, probability)``.

        Row ``r`` says that initial marking ``initial[r]`` (an index into the markings
        the graph was built from) leads to tangible ``state[r]`` with ``probability[r]``;
        a tangible initial marking has one row with probability 1, a vanishing one a
        row per tangible marking its immediate transitions can reach.
        """
        origin, ids, prob, _ = self._start_map
        return origin, ids, prob

    def index(self, marking: Mapping[str, int] | ArrayLike) -> int:
        """State index of a tangible marking.

        Parameters
        ----------
        marking : dict of str to int, or array of int
            The marking, by place name (missing places count 0) or in place order.

        Raises
        ------
        KeyError
            If the marking is not a reachable tangible marking.
        """
        row = self._as_row(marking)
        codec, sorted_keys, sorted_ids = self._lookup()
        if not codec.fits(row[None, :]):
            raise KeyError(f"marking {self.net.marking_dict(row)} is not reachable")
        key = codec.encode(row[None, :])
        pos = int(np.searchsorted(sorted_keys, key)[0])
        if pos < len(sorted_keys) and sorted_keys[pos] == key[0]:
            return int(sorted_ids[pos])
        raise KeyError(f"marking {self.net.marking_dict(row)} is not a reachable tangible marking")

    def _lookup(self) -> tuple[_KeyCodec, NDArray[Any], NDArray[np.int64]]:
        """The sorted key index of the markings, built on first use when exploration had none."""
        if self._codec is None or self._sorted_keys is None or self._sorted_ids is None:
            codec = _KeyCodec(self.markings.max(axis=0, initial=0))
            keys = codec.encode(self.markings)
            order = np.argsort(keys, kind="stable")
            self._codec, self._sorted_keys = codec, keys[order]
            self._sorted_ids = order.astype(np.int64)
        return self._codec, self._sorted_keys, self._sorted_ids

    def _as_row(self, marking: Mapping[str, int] | ArrayLike) -> NDArray[Any]:
        if isinstance(marking, Mapping):
            row = np.zeros(len(self.place_names), dtype=np.int64)
            for name, value in marking.items():
                if name not in self.net.place_index:
                    raise NetDefinitionError(f"unknown place {name!r}", field=f"marking.{name}")
                row[self.net.place_index[name]] = int(value)
        else:
            row = np.asarray(marking, dtype=np.int64)
            if row.shape != (len(self.place_names),):
                raise NetDefinitionError(
                    f"a marking needs {len(self.place_names)} entries, got shape {row.shape}"
                )
        if np.any(row < 0):
            raise NetDefinitionError("a marking cannot hold negative tokens")
        if np.any(row > np.iinfo(MARKING_DTYPE).max):
            # No reachable marking holds this many; the cast below would wrap it around.
            raise KeyError(f"marking {self.net.marking_dict(row)} is not reachable")
        return row.astype(MARKING_DTYPE)

    def marking(self, state: int) -> dict[str, int]:
        """The marking of state ``state`` as ``{place: tokens}``."""
        return self.net.marking_dict(self.markings[state])

    # -- the CTMC ------------------------------------------------------------
    def edge_rates(self) -> NDArray[np.float64]:
        """Rate (1/s) of every edge, in edge order: firing rate times branching probability.

        Raises
        ------
        EvaluationError
            If a rate is negative or not finite at a reachable marking, or its
            expression divides by zero there.
        """
        if self._rates is not None:
            return self._rates
        rates = np.empty(len(self._src))
        for t in self.net.timed:
            s = self._slices[t.index]
            if s.start == s.stop:
                continue
            if t.rate.constant is not None:
                rates[s] = t.rate.constant
            else:
                rows = self._src[s].astype(np.intp)
                rates[s] = self.net.positive_values(
                    t.rate, self.markings, rows, self.parameters, t, "rate"
                )
        if self._prob is not None:
            rates *= self._prob
        # Rates that depend on the marking cost an evaluation: kept.  Constant ones refill
        # faster than a cache is worth, which would hold 8 bytes an edge for the graph's
        # life (3.6 GB at Kanban N = 7, through the whole steady-state solve).
        if self._prob is not None or any(t.rate.constant is None for t in self.net.timed):
            self._rates = rates
        return rates

    def generator(self) -> sp.csr_array:
        """The infinitesimal generator Q as a CSR matrix (rows sum to zero).

        Returns
        -------
        scipy.sparse.csr_array, shape (n_states, n_states)
            ``Q[i, j]`` is the rate from state ``i`` to state ``j``; the diagonal
            holds minus the total outflow.
        """
        n = self.n_states
        src, dst, val = self._src, self._dst, self.edge_rates()
        if len(src) >= _COMPILED_ASSEMBLY_FROM_EDGES:
            from ._assembly import generator_csr

            indptr, indices, data = generator_csr(n, src, dst, val)
            if indptr[-1] <= np.iinfo(np.int32).max:
                indptr = indptr.astype(np.int32)
            return sp.csr_array((data, indices, indptr), shape=(n, n))
        moving = src != dst
        if not moving.all():
            src, dst, val = src[moving], dst[moving], val[moving]
        out = np.bincount(src, weights=val, minlength=n)
        diag = np.arange(n, dtype=np.int32)
        q = sp.coo_array(
            (
                np.concatenate([val, -out]),
                (np.concatenate([src, diag]), np.concatenate([dst, diag])),
            ),
            shape=(n, n),
        ).tocsr()
        q.sum_duplicates()
        return q

    # -- reward measures -------------------------------------------------------
    def reward(self, expression: str | float) -> NDArray[np.float64]:
        """Reward rate of each state, from an expression over the marking.

        Parameters
        ----------
        expression : str or float
            E.g. ``"#busy > 0"`` or ``"2 * #queue"``; comparisons count as 0/1.
        """
        from ._expressions import compile_expression

        expr = compile_expression(
            expression,
            places=self.net.place_index,
            parameters=self.parameters,
            max_length=self.net.limits.max_expression_length,
            field="reward",
        )
        try:
            values = expr.evaluate(Columns(self.markings), self.parameters)
        except RowError as exc:
            raise EvaluationError(
                f"{exc.reason} in reward {expr.text!r}",
                marking=self.marking(exc.row),
                field="reward",
            ) from None
        bad = ~np.isfinite(values)
        if np.any(bad):
            row = int(np.flatnonzero(bad)[0])
            raise EvaluationError(
                f"reward {expr.text!r} is not finite", marking=self.marking(row), field="reward"
            )
        return np.array(values, dtype=float)

    def expected_reward(self, expression: str | float, probabilities: ArrayLike) -> Any:
        """Expected reward rate under a distribution (or each row of a stack of them).

        Parameters
        ----------
        expression : str or float
            Reward rate as a function of the marking.
        probabilities : array, shape (n_states,) or (k, n_states)
            A steady-state or transient distribution.

        Returns
        -------
        float or ndarray of shape (k,)
        """
        return np.asarray(probabilities) @ self.reward(expression)

    def probability(self, condition: str, probabilities: ArrayLike) -> Any:
        """Probability that ``condition`` (an expression of the marking) holds."""
        return np.asarray(probabilities) @ (self.reward(condition) != 0).astype(float)

    def mean_tokens(self, probabilities: ArrayLike) -> dict[str, Any]:
        """Expected number of tokens in each place."""
        means = np.asarray(probabilities) @ self.markings.astype(float)
        return {name: means[..., i] for i, name in enumerate(self.place_names)}

    def throughput(self, probabilities: ArrayLike) -> dict[str, Any]:
        """Expected firing rate (1/s) of every transition, timed and immediate.

        Immediate transitions are credited with the timed flow that passes through
        them during vanishing elimination.
        """
        pi = np.asarray(probabilities, dtype=float)
        rates = self.edge_rates()
        flow = pi[..., self._src] * rates
        result: dict[str, Any] = {}
        for t in self.net.timed:
            s = self._slices[t.index]
            result[t.name] = flow[..., s].sum(axis=-1)
        imm_src, imm_tt, imm_j, imm_mass = self._immediate_flow
        if len(self.net.immediate):
            # Firing rate of the originating timed transition at its source marking.
            origin_rate = np.empty(len(imm_src))
            for t in self.net.timed:
                sel = np.flatnonzero(imm_tt == t.index)
                if not len(sel):
                    continue
                if t.rate.constant is not None:
                    origin_rate[sel] = t.rate.constant
                else:
                    origin_rate[sel] = self.net.positive_values(
                        t.rate, self.markings, imm_src[sel], self.parameters, t, "rate"
                    )
            contrib = pi[..., imm_src] * (origin_rate * imm_mass)
            for j, t in enumerate(self.net.immediate):
                result[t.name] = contrib[..., imm_j == j].sum(axis=-1)
        return result
