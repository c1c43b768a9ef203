"""Compiled breadth-first exploration for nets whose firing rules are all constants.

When every arc multiplicity is a constant, no transition has a guard, every rate is a
positive constant and there are no immediate transitions, enabling and firing reduce
to comparisons and additions on integer rows.  This kernel then explores the whole
graph in one compiled pass with an open-addressing hash table of state ids, instead of
the frontier-at-a-time NumPy pipeline (which sorts and merges keys at every step and
makes several passes over every successor array).  Imported lazily, like Numba itself.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from llvmlite import ir
from numba import njit, types
from numba.core import cgutils
from numba.extending import intrinsic
from numpy.typing import NDArray

# Status codes returned by :func:`explore_constant`.
DONE = 0
STATES_EXCEEDED = 1
EDGES_EXCEEDED = 2
OVERFLOW = 3
REPACK = 4
STOPPED = 5
# Slots of the ``watch`` array of :func:`explore_constant`.
WATCH_STATES, WATCH_EDGES, WATCH_EXPANDED, WATCH_STOP = 0, 1, 2, 3
# The counts in ``watch`` are refreshed (and the stop request read) every this many states.
_WATCH_EVERY = 4096


@njit(cache=True, nogil=True)
def _hash(row: NDArray[np.int32]) -> np.uint64:
    h = np.uint64(0xCBF29CE484222325)
    for v in row:
        h ^= np.uint64(v)
        h *= np.uint64(0x100000001B3)
        h ^= h >> np.uint64(31)
    return h


@njit(cache=True, nogil=True)
def _find(
    table: NDArray[np.int32], markings: NDArray[np.int32], row: NDArray[np.int32]
) -> tuple[int, int]:
    """(slot, id) of ``row``: id -1 when absent, and slot is where it would go."""
    mask = table.shape[0] - 1
    slot = np.int64(_hash(row) & np.uint64(mask))
    width = row.shape[0]
    while True:
        sid = table[slot]
        if sid < 0:
            return int(slot), -1
        same = True
        for p in range(width):
            if markings[sid, p] != row[p]:
                same = False
                break
        if same:
            return int(slot), int(sid)
        slot = (slot + 1) & mask


@njit(cache=True, nogil=True)
def _rehash(table_size: int, markings: NDArray[np.int32], n: int) -> NDArray[np.int32]:
    table = np.full(table_size, -1, dtype=np.int32)
    mask = table_size - 1
    for sid in range(n):
        slot = np.int64(_hash(markings[sid]) & np.uint64(mask))
        while table[slot] >= 0:
            slot = (slot + 1) & mask
        table[slot] = sid
    return table


@njit(cache=True, nogil=True)
def _rehash_packed(size: int, slots: NDArray[np.uint64]) -> NDArray[np.uint64]:
    grown = np.zeros((size, 2), dtype=np.uint64)
    for slot in range(slots.shape[0]):
        if slots[slot, 1] != 0:
            at, _ = _find_packed(grown, slots[slot, 0])
            grown[at, 0] = slots[slot, 0]
            grown[at, 1] = slots[slot, 1]
    return grown


@njit(cache=True, nogil=True)
def _pack(row: NDArray[np.int32], bits: int) -> np.uint64:
    key = np.uint64(0)
    for p in range(row.shape[0]):
        key |= np.uint64(row[p]) << np.uint64(p * bits)
    return key


@njit(cache=True, nogil=True)
def _home(key: np.uint64) -> np.uint64:
    """splitmix64's finaliser: every key bit affects the low bits used as the slot."""
    z = key + np.uint64(0x9E3779B97F4A7C15)
    z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    return z ^ (z >> np.uint64(31))


@njit(cache=True, nogil=True)
def _find_packed(slots: NDArray[np.uint64], key: np.uint64) -> tuple[int, int]:
    """(slot, id) of a packed key: one probe sequence, no access to the marking rows.

    Row ``slot`` of ``slots`` holds a key and its state id plus one (0: empty), side by
    side so that a probe touches one cache line.
    """
    mask = slots.shape[0] - 1
    slot = np.int64(_home(key) & np.uint64(mask))
    while True:
        tag = slots[slot, 1]
        if tag == 0:
            return int(slot), -1
        if slots[slot, 0] == key:
            return int(slot), int(tag) - 1
        slot = (slot + 1) & mask


@njit(cache=True, nogil=True)
def _places_where(mask: NDArray[np.bool_]) -> tuple[NDArray[np.int64], NDArray[np.int64]]:
    """Row ``t`` of ``mask`` as a list of its true columns, in CSR form (pointers, columns)."""
    rows, cols = mask.shape
    ptr = np.zeros(rows + 1, dtype=np.int64)
    places = np.empty(rows * cols, dtype=np.int64)
    at = 0
    for t in range(rows):
        for p in range(cols):
            if mask[t, p]:
                places[at] = p
                at += 1
        ptr[t + 1] = at
    return ptr, places[:at]


@intrinsic
def _prefetch(typingctx: Any, array: Any, index: Any) -> Any:
    """Hint the processor to fetch ``array[index]`` (its first axis) into the cache."""

    def codegen(context: Any, builder: Any, signature: Any, args: Any) -> Any:
        array_type = signature.args[0]
        view = context.make_array(array_type)(context, builder, args[0])
        address = cgutils.get_item_pointer(context, builder, array_type, view, [args[1]])
        byte_ptr = ir.IntType(8).as_pointer()
        int32 = ir.IntType(32)
        hint = cgutils.get_or_insert_function(
            builder.module,
            ir.FunctionType(ir.VoidType(), [byte_ptr, int32, int32, int32]),
            "llvm.prefetch.p0",
        )
        # Read access, high temporal locality, data cache.
        builder.call(hint, [builder.bitcast(address, byte_ptr), int32(0), int32(3), int32(1)])
        return context.get_dummy_value()

    return types.void(array, index), codegen


@njit(cache=True, nogil=True)
def _expand(
    head: int,
    markings: NDArray[np.int32],
    n: int,
    enabled_any: NDArray[np.bool_],
    src: NDArray[np.int32],
    dst: NDArray[np.int32],
    tid: NDArray[np.int32],
    e: int,
    table: NDArray[np.int32],
    slots: NDArray[np.uint64],
    needs: NDArray[np.int32],
    inhibit: NDArray[np.int32],
    delta: NDArray[np.int32],
    guard_ptr: NDArray[np.int64],
    guard_place: NDArray[np.int64],
    change_ptr: NDArray[np.int64],
    change_place: NDArray[np.int64],
    succ: NDArray[np.int32],
    fired: NDArray[np.int64],
    pending: NDArray[np.uint64],
    bits: int,
    top: int,
    max_states: int,
    max_edges: int,
) -> tuple[int, int, int]:
    """Fire every enabled transition in state ``head``; the arrays have room for it.

    Two passes: the first computes every successor (rows of ``succ``, transitions in
    ``fired``, packed keys in ``pending``) and, in packed mode, prefetches each key's
    home slot; the second looks them up and inserts.  The table is far larger than the
    caches, so the misses of the prefetches, served together, replace one miss per
    lookup served in turn (about 25 % of the exploration time on Kanban N = 5).
    """
    width = markings.shape[1]
    mask = np.uint64(slots.shape[0] - 1)
    m = 0
    for t in range(needs.shape[0]):
        # Only the places with an input or inhibitor arc decide enabling, and only
        # those the firing changes differ in the successor.
        ok = True
        for k in range(guard_ptr[t], guard_ptr[t + 1]):
            p = guard_place[k]
            v = markings[head, p]
            if v < needs[t, p] or (inhibit[t, p] > 0 and v >= inhibit[t, p]):
                ok = False
                break
        if not ok:
            continue
        enabled_any[head] = True
        for p in range(width):
            succ[m, p] = markings[head, p]
        for k in range(change_ptr[t], change_ptr[t + 1]):
            p = change_place[k]
            s = np.int64(succ[m, p]) + np.int64(delta[t, p])
            if s > top:
                return n, e, (OVERFLOW if bits == 0 else REPACK)
            succ[m, p] = np.int32(s)
        if bits > 0:
            key = _pack(succ[m], bits)
            pending[m] = key
            _prefetch(slots, np.int64(_home(key) & mask))  # type: ignore[call-arg]
        fired[m] = t
        m += 1
    for q in range(m):
        if bits > 0:
            key = pending[q]
            slot, sid = _find_packed(slots, key)
        else:
            key = np.uint64(0)
            slot, sid = _find(table, markings, succ[q])
        if sid < 0:
            if n >= max_states:
                return n, e, STATES_EXCEEDED
            markings[n] = succ[q]
            if bits > 0:
                slots[slot, 0] = key
                slots[slot, 1] = np.uint64(n + 1)
            else:
                table[slot] = n
            sid = n
            n += 1
        if e >= max_edges:
            return n, e, EDGES_EXCEEDED
        src[e] = head
        dst[e] = sid
        tid[e] = fired[q]
        e += 1
    return n, e, DONE


@njit(cache=True, nogil=True)
def explore_constant(
    starts: NDArray[np.int32],
    needs: NDArray[np.int32],
    inhibit: NDArray[np.int32],
    delta: NDArray[np.int32],
    max_states: int,
    max_edges: int,
    bits: int,
    watch: NDArray[np.int64],
) -> tuple[
    int,
    NDArray[np.int32],
    NDArray[np.int32],
    NDArray[np.int32],
    NDArray[np.int32],
    NDArray[np.int32],
    NDArray[np.bool_],
]:
    """Explore from ``starts``; transitions are rows of ``needs``/``inhibit``/``delta``.

    Transition t is enabled in marking m when ``m >= needs[t]`` everywhere and
    ``m < inhibit[t]`` wherever ``inhibit[t] > 0``; firing adds ``delta[t]``.  With
    ``bits > 0`` markings are looked up by their packed ``bits``-per-place key (one
    memory access per lookup); a count that outgrows the field returns REPACK.

    Every few thousand states the kernel writes the states found, the edges and the
    states expanded into ``watch`` (slots WATCH_STATES, WATCH_EDGES, WATCH_EXPANDED) and
    returns STOPPED if ``watch[WATCH_STOP]`` is non-zero: another thread, which runs it
    without the GIL, can follow it and stop it.

    Returns
    -------
    status : int
        DONE, STATES_EXCEEDED, EDGES_EXCEEDED, OVERFLOW (a count above int32) or
        STOPPED.
    markings : (n, places) int32
    start_ids : (k,) int32
        State of each start row.
    src, dst, tid : (e,) int32
        Edges in discovery order (state-major).
    enabled_any : (n,) bool
        Whether any transition is enabled in each state.
    """
    k, width = starts.shape
    n_trans = needs.shape[0]
    cap = 1024
    markings = np.empty((cap, width), dtype=np.int32)
    # Row mode: state ids, rows compared in `markings`; packed mode: (key, id + 1) pairs.
    table = np.full(4096 if bits == 0 else 1, -1, dtype=np.int32)
    slots = np.zeros((4096 if bits > 0 else 1, 2), dtype=np.uint64)
    guard_ptr, guard_place = _places_where((needs > 0) | (inhibit > 0))
    change_ptr, change_place = _places_where(delta != 0)
    top = (1 << bits) - 1 if bits > 0 else 2147483647
    ecap = 4096
    src = np.empty(ecap, dtype=np.int32)
    dst = np.empty(ecap, dtype=np.int32)
    tid = np.empty(ecap, dtype=np.int32)
    start_ids = np.empty(k, dtype=np.int32)
    enabled_any = np.zeros(cap, dtype=np.bool_)
    n = 0
    e = 0
    status = DONE
    for r in range(k):
        for p in range(width):
            if starts[r, p] > top:
                return REPACK, markings[:0], start_ids, src[:0], dst[:0], tid[:0], enabled_any
        if bits > 0:
            key = _pack(starts[r], bits)
            slot, sid = _find_packed(slots, key)
        else:
            key = np.uint64(0)
            slot, sid = _find(table, markings, starts[r])
        if sid < 0:
            markings[n] = starts[r]
            if bits > 0:
                slots[slot, 0] = key
                slots[slot, 1] = np.uint64(n + 1)
            else:
                table[slot] = n
            sid = n
            n += 1
        start_ids[r] = sid
    succ = np.empty((n_trans, width), dtype=np.int32)
    fired = np.empty(n_trans, dtype=np.int64)
    pending = np.empty(n_trans, dtype=np.uint64)
    head = 0
    while head < n and status == DONE:
        # Room for every successor of this state first, so that the hot loop below
        # never reallocates (arrays reassigned inside it defeat Numba's optimiser).
        if n + n_trans > cap:
            cap *= 2
            grown = np.empty((cap, width), dtype=np.int32)
            grown[:n] = markings[:n]
            markings = grown
            flags = np.zeros(cap, dtype=np.bool_)
            flags[:n] = enabled_any[:n]
            enabled_any = flags
        if e + n_trans > ecap:
            ecap *= 2
            grown_src = np.empty(ecap, dtype=np.int32)
            grown_src[:e] = src[:e]
            src = grown_src
            grown_dst = np.empty(ecap, dtype=np.int32)
            grown_dst[:e] = dst[:e]
            dst = grown_dst
            grown_tid = np.empty(ecap, dtype=np.int32)
            grown_tid[:e] = tid[:e]
            tid = grown_tid
        size = slots.shape[0] if bits > 0 else table.shape[0]
        if 2 * (n + n_trans) > size:
            if bits > 0:
                slots = _rehash_packed(2 * size, slots)
            else:
                table = _rehash(2 * size, markings, n)
        n, e, status = _expand(
            head,
            markings,
            n,
            enabled_any,
            src,
            dst,
            tid,
            e,
            table,
            slots,
            needs,
            inhibit,
            delta,
            guard_ptr,
            guard_place,
            change_ptr,
            change_place,
            succ,
            fired,
            pending,
            bits,
            top,
            max_states,
            max_edges,
        )
        head += 1
        if head % _WATCH_EVERY == 0:
            watch[WATCH_STATES] = n
            watch[WATCH_EDGES] = e
            watch[WATCH_EXPANDED] = head
            if watch[WATCH_STOP] != 0 and status == DONE:
                status = STOPPED
    watch[WATCH_STATES] = n
    watch[WATCH_EDGES] = e
    watch[WATCH_EXPANDED] = head
    return status, markings[:n], start_ids, src[:e], dst[:e], tid[:e], enabled_any[:n]


@njit(cache=True, nogil=True)
def group_by_transition(
    src: NDArray[np.int32], dst: NDArray[np.int32], tid: NDArray[np.int32], n_trans: int
) -> tuple[NDArray[np.int32], NDArray[np.int32], NDArray[np.int32]]:
    """Edges reordered so that each transition's edges are contiguous (stable counting sort)."""
    counts = np.zeros(n_trans + 1, dtype=np.int64)
    for t in tid:
        counts[t + 1] += 1
    for t in range(n_trans):
        counts[t + 1] += counts[t]
    e = src.shape[0]
    out_src = np.empty(e, dtype=np.int32)
    out_dst = np.empty(e, dtype=np.int32)
    out_tid = np.empty(e, dtype=np.int32)
    for i in range(e):
        t = tid[i]
        at = counts[t]
        out_src[at] = src[i]
        out_dst[at] = dst[i]
        out_tid[at] = t
        counts[t] = at + 1
    return out_src, out_dst, out_tid
