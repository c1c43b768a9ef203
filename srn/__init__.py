"""Stochastic Reward Net engine: nets, reachability graphs and CTMC solution.

Define a :class:`Net` once, compile it, and solve it for many parameter values::

    net = Net({"q": 0}, [timed("arrive", "lam", outputs={"q": 1}, inhibitors={"q": 10}),
                         timed("serve", "mu", inputs={"q": 1})],
              parameters={"lam": 1.0, "mu": 2.0})
    graph = reachability_graph(net)
    pi = steady_state(graph.generator()).probabilities
    graph.expected_reward("#q", pi)

The end-system model of the paper (SPEC sections 1-2) is built on it::

    r = interrupt_service_time(Workload(cpu_tasks=2, io_tasks=1), "sx280-2007")
    r.rate_per_s, r.quantiles_s, r.phase_type()
"""

from ._compiled import CompiledNet, compile_net
from .endsystem import (
    DEFAULT_PROFILE,
    HOST_PROFILES,
    EndSystemOccupancy,
    HostProfile,
    InterruptServiceTime,
    Workload,
    end_system_nets,
    end_system_state_count,
    host_profile,
    interrupt_service_time,
)
from .errors import (
    AbsorptionError,
    EvaluationError,
    ExpressionError,
    LimitExceededError,
    NetDefinitionError,
    NotErgodicError,
    SRNError,
    VanishingLoopError,
    WorkloadError,
)
from .net import Limits, Net, Place, Transition, immediate, timed
from .pnml import PnmlError, PnmlLimits, read_pnml, write_pnml
from .reachability import ReachabilityGraph, reachability_graph
from .rewards import (
    AccumulatedReward,
    CumulativeSolution,
    Reward,
    accumulated_reward,
    cumulative_transient,
    reward_rate,
)
from .solvers import (
    AbsorptionTime,
    SteadyState,
    TransientSolution,
    steady_state,
    time_to_absorption,
    transient,
)

__all__ = [
    "DEFAULT_PROFILE",
    "HOST_PROFILES",
    "AbsorptionError",
    "AbsorptionTime",
    "AccumulatedReward",
    "CompiledNet",
    "CumulativeSolution",
    "EndSystemOccupancy",
    "EvaluationError",
    "ExpressionError",
    "HostProfile",
    "InterruptServiceTime",
    "LimitExceededError",
    "Limits",
    "Net",
    "NetDefinitionError",
    "NotErgodicError",
    "Place",
    "PnmlError",
    "PnmlLimits",
    "ReachabilityGraph",
    "Reward",
    "SRNError",
    "SteadyState",
    "TransientSolution",
    "Transition",
    "VanishingLoopError",
    "Workload",
    "WorkloadError",
    "accumulated_reward",
    "compile_net",
    "cumulative_transient",
    "end_system_nets",
    "end_system_state_count",
    "host_profile",
    "immediate",
    "interrupt_service_time",
    "reachability_graph",
    "read_pnml",
    "reward_rate",
    "steady_state",
    "time_to_absorption",
    "timed",
    "transient",
    "write_pnml",
]
