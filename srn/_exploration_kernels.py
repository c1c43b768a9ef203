"""Compiled breadth-first exploration for nets whose firing rules are all constants.

When every arc multiplicity is a constant, no transition has a guard, every rate is a
positive constant and there are no immediate transitions, enabling and firing reduce
to comparisons and additions on integer rows.  This kernel then explores the whole
graph in one compiled pass with an open-addressing hash table of state ids, instead of
the frontier-at-a-time NumPy pipeline (which sorts and merges keys at every step and
makes several passes over every successor array).  Imported lazily, like Numba itself.
"""

from __future__ import annotations

import numpy as np
from numba import njit
from numpy.typing import NDArray

# Status codes returned by :func:`explore_constant`.
DONE = 0
STATES_EXCEEDED = 1
EDGES_EXCEEDED = 2
OVERFLOW = 3
REPACK = 4


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
def _rehash_packed(
    size: int, keys: NDArray[np.uint64], ids: NDArray[np.int32]
) -> tuple[NDArray[np.uint64], NDArray[np.int32]]:
    new_keys = np.zeros(size, dtype=np.uint64)
    new_ids = np.full(size, -1, dtype=np.int32)
    for slot in range(ids.shape[0]):
        if ids[slot] >= 0:
            at, _ = _find_packed(new_keys, new_ids, keys[slot])
            new_keys[at] = keys[slot]
            new_ids[at] = ids[slot]
    return new_keys, new_ids


@njit(cache=True, nogil=True)
def _pack(row: NDArray[np.int32], bits: int) -> np.uint64:
    key = np.uint64(0)
    for p in range(row.shape[0]):
        key |= np.uint64(row[p]) << np.uint64(p * bits)
    return key


@njit(cache=True, nogil=True)
def _find_packed(
    keys: NDArray[np.uint64], ids: NDArray[np.int32], key: np.uint64
) -> tuple[int, int]:
    """(slot, id) of a packed key: one probe sequence, no access to the marking rows."""
    mask = keys.shape[0] - 1
    # splitmix64's finaliser: every key bit affects the low bits used as the slot.
    z = key + np.uint64(0x9E3779B97F4A7C15)
    z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    z ^= z >> np.uint64(31)
    slot = np.int64(z & np.uint64(mask))
    while True:
        sid = ids[slot]
        if sid < 0:
            return int(slot), -1
        if keys[slot] == key:
            return int(slot), int(sid)
        slot = (slot + 1) & mask


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
    keys: NDArray[np.uint64],
    needs: NDArray[np.int32],
    inhibit: NDArray[np.int32],
    delta: NDArray[np.int32],
    succ: NDArray[np.int32],
    bits: int,
    top: int,
    max_states: int,
    max_edges: int,
) -> tuple[int, int, int]:
    """Fire every enabled transition in state ``head``; the arrays have room for it."""
    width = markings.shape[1]
    for t in range(needs.shape[0]):
        ok = True
        for p in range(width):
            v = markings[head, p]
            if v < needs[t, p] or (inhibit[t, p] > 0 and v >= inhibit[t, p]):
                ok = False
                break
        if not ok:
            continue
        enabled_any[head] = True
        for p in range(width):
            s = np.int64(markings[head, p]) + np.int64(delta[t, p])
            if s > top:
                return n, e, (OVERFLOW if bits == 0 else REPACK)
            succ[p] = np.int32(s)
        if bits > 0:
            key = _pack(succ, bits)
            slot, sid = _find_packed(keys, table, key)
        else:
            key = np.uint64(0)
            slot, sid = _find(table, markings, succ)
        if sid < 0:
            if n >= max_states:
                return n, e, STATES_EXCEEDED
            markings[n] = succ
            table[slot] = n
            if bits > 0:
                keys[slot] = key
            sid = n
            n += 1
        if e >= max_edges:
            return n, e, EDGES_EXCEEDED
        src[e] = head
        dst[e] = sid
        tid[e] = t
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

    Returns
    -------
    status : int
        DONE, STATES_EXCEEDED, EDGES_EXCEEDED or OVERFLOW (a count above int32).
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
    table = np.full(4096, -1, dtype=np.int32)
    keys = np.zeros(4096 if bits > 0 else 1, dtype=np.uint64)
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
            slot, sid = _find_packed(keys, table, key)
        else:
            key = np.uint64(0)
            slot, sid = _find(table, markings, starts[r])
        if sid < 0:
            markings[n] = starts[r]
            table[slot] = n
            keys[slot if bits > 0 else 0] = key
            sid = n
            n += 1
        start_ids[r] = sid
    succ = np.empty(width, dtype=np.int32)
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
        if 2 * (n + n_trans) > table.shape[0]:
            if bits > 0:
                keys, table = _rehash_packed(2 * table.shape[0], keys, table)
            else:
                table = _rehash(2 * table.shape[0], markings, n)
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
            keys,
            needs,
            inhibit,
            delta,
            succ,
            bits,
            top,
            max_states,
            max_edges,
        )
        head += 1
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
