"""Stochastic Reward Net engine: nets, reachability graphs and CTMC solution.

Define a :class:`Net` once, compile it, and solve it for many parameter values::

    net = Net({"q": 0}, [timed("arrive", "lam", outputs={"q": 1}, inhibitors={"q": 10}),
                         timed("serve", "mu", inputs={"q": 1})],
              parameters={"lam": 1.0, "mu": 2.0})
    graph = reachability_graph(net)
    pi = steady_state(graph.generator()).probabilities
    graph.expected_reward("#q", pi)

The engine knows nothing of hosts or networks: the paper's end-system model is built
on it in the separate :mod:`host` package.
"""

from ._compiled import CompiledNet, compile_net
from .errors import (
    AbsorptionError,
    EvaluationError,
    ExpressionError,
    LimitExceededError,
    NetDefinitionError,
    NotErgodicError,
    SRNError,
    VanishingLoopError,
)
from .net import Limits, Net, Place, Transition, immediate, timed
from .reachability import ReachabilityGraph, reachability_graph
from .solvers import (
    AbsorptionTime,
    SteadyState,
    TransientSolution,
    steady_state,
    time_to_absorption,
    transient,
)

__all__ = [
    "AbsorptionError",
    "AbsorptionTime",
    "CompiledNet",
    "EvaluationError",
    "ExpressionError",
    "LimitExceededError",
    "Limits",
    "Net",
    "NetDefinitionError",
    "NotErgodicError",
    "Place",
    "ReachabilityGraph",
    "SRNError",
    "SteadyState",
    "TransientSolution",
    "Transition",
    "VanishingLoopError",
    "compile_net",
    "immediate",
    "reachability_graph",
    "steady_state",
    "time_to_absorption",
    "timed",
    "transient",
]
