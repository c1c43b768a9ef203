"""Compile (or load from numba's on-disk cache) the engine's kernels before they are needed.

A compiled kernel costs seconds the first time a process calls it with new argument
types, and milliseconds once numba has cached it on disk.  A service that only solved its
own small nets at start-up left the kernels of large chains (the iterative routes, the
transient and absorption solvers) to the first request that needed them, and that request
paid for the compile out of its own time limit.  :func:`load_kernels` runs a small chain
through every route once, so that the compile happens at start-up and later solves, in
this process or in any other that shares the cache, do not pay for it.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator

import numpy as np

from . import reachability, stationary
from ._compiled import reachability_graph
from .errors import SRNError
from .net import Net, immediate, timed
from .solvers import time_to_absorption, transient
from .stationary import steady_state

__all__ = ["STEADY_STATE_ROUTES", "TRANSIENT_METHODS", "load_kernels"]

#: The steady-state routes :func:`load_kernels` runs (the cascade's and the iterative ones).
STEADY_STATE_ROUTES = (
    "dense",
    "direct",
    "sparse-lu",
    "iad",
    "gauss-seidel",
    "bicgstab-gs",
    "gmres-ilu",
    "sor",
)
#: The transient methods it runs.
TRANSIENT_METHODS = ("uniformization", "expm")


def _ring(tokens: int, *, absorbing: bool = False) -> Net:
    # Three stations in a ring: C(tokens + 2, 2) states.  With ``absorbing`` the third
    # station keeps what it gets, so the chain ends with every token there.
    stations = ("s0", "s1", "s2")
    moves = [
        timed(f"move{i}", rate, inputs={stations[i]: 1}, outputs={stations[(i + 1) % 3]: 1})
        for i, rate in enumerate((1.0, 1.3, 0.7))
        if not (absorbing and i == 2)
    ]
    return Net({"s0": tokens, "s1": 0, "s2": 0}, moves)


def _diamond() -> Net:
    # Two immediate transitions enabled together after each timed one: their paths meet
    # in one marking, which the vanishing-marking elimination merges (compiled hashing).
    return Net(
        {"idle": 1, "a": 0, "b": 0, "a_done": 0, "b_done": 0},
        [
            timed("start", 2.0, inputs={"idle": 1}, outputs={"a": 1, "b": 1}),
            immediate("finish_a", inputs={"a": 1}, outputs={"a_done": 1}),
            immediate("finish_b", inputs={"b": 1}, outputs={"b_done": 1}),
            timed("reset", 1.0, inputs={"a_done": 1, "b_done": 1}, outputs={"idle": 1}),
        ],
    )


@contextlib.contextmanager
def _compiled_paths_for_small_chains() -> Iterator[None]:
    # The engine switches to its compiled paths only on large chains (exploration from
    # 50,000 states, assembly from 500,000 edges, connectivity from 100,000 states,
    # threads from 200,000).  Lowered for a moment, a chain of a few hundred states takes
    # them all, with the argument types of a large one.  Start-up only: a solve running
    # in another thread meanwhile would take the compiled paths too (same answers).
    lowered = [
        (reachability, "_COMPILED_FROM_STATES", 100),
        (reachability, "_COMPILED_ASSEMBLY_FROM_EDGES", 100),
        (stationary, "_COMPILED_CONNECTIVITY_FROM", 100),
        (stationary, "_THREADED_FROM", 100),
    ]
    saved = [(module, name, getattr(module, name)) for module, name, _ in lowered]
    try:
        for module, name, value in lowered:
            setattr(module, name, value)
        yield
    finally:
        for module, name, value in saved:
            setattr(module, name, value)


def load_kernels() -> float:
    """Run every compiled kernel of the engine once, on small chains.

    Meant for start-up, before any solve runs in another thread of the process.

    Returns
    -------
    float
        Seconds it took (s): tens with nothing cached, about one once cached.
    """
    start = time.perf_counter()
    with _compiled_paths_for_small_chains():
        _run_every_route()
    return time.perf_counter() - start


def _run_every_route() -> None:
    graph = reachability_graph(_ring(30))  # 496 states
    Q = graph.generator()
    pi = None
    for route in STEADY_STATE_ROUTES:
        # A route that does not suit this chain (iad needs blocks) still compiles what it
        # reaches; its refusal is not an error here.
        with contextlib.suppress(SRNError, ValueError, MemoryError):
            pi = steady_state(Q, method=route).probabilities
    if pi is not None:
        graph.throughput(pi)
    start_vector = np.zeros(Q.shape[0])
    start_vector[0] = 1.0
    for method in TRANSIENT_METHODS:
        with contextlib.suppress(SRNError, ValueError):
            transient(Q, [0.5, 50.0], start_vector, method=method)
    steady_state(reachability_graph(_diamond()).generator())
    ending = reachability_graph(_ring(12, absorbing=True))
    initial = np.zeros(ending.n_states)
    initial[0] = 1.0
    time_to_absorption(ending.generator(), initial)
