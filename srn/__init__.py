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

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ._compiled import CompiledNet, compile_net, reachability_graph
    from .errors import (
        AbsorptionError,
        ConvergenceError,
        EvaluationError,
        ExpressionError,
        LimitExceededError,
        NetDefinitionError,
        NotErgodicError,
        SRNError,
        VanishingLoopError,
    )
    from .kernel_warmup import load_kernels
    from .net import Limits, Net, Place, Transition, immediate, timed
    from .pnml import PnmlError, PnmlLimits, read_pnml, read_pnml_ids, write_pnml
    from .progress import ExplorationProgress
    from .reachability import ReachabilityGraph
    from .rewards import (
        AccumulatedReward,
        CumulativeSolution,
        Reward,
        accumulated_reward,
        cumulative_transient,
        reward_rate,
    )
    from .solvers import AbsorptionTime, TransientSolution, time_to_absorption, transient
    from .stationary import SolveProgress, SolverAttempt, SteadyState, steady_state

__all__ = [
    "AbsorptionError",
    "AbsorptionTime",
    "AccumulatedReward",
    "CompiledNet",
    "ConvergenceError",
    "CumulativeSolution",
    "EvaluationError",
    "ExplorationProgress",
    "ExpressionError",
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
    "SolveProgress",
    "SolverAttempt",
    "SteadyState",
    "TransientSolution",
    "Transition",
    "VanishingLoopError",
    "accumulated_reward",
    "compile_net",
    "cumulative_transient",
    "immediate",
    "load_kernels",
    "reachability_graph",
    "read_pnml",
    "read_pnml_ids",
    "reward_rate",
    "steady_state",
    "time_to_absorption",
    "timed",
    "transient",
    "write_pnml",
]


# Each public name's module, imported when the name is first used (PEP 562), so that
# importing one light part (the errors, the profiles) does not load the solvers, SciPy
# and the compiled kernels of the rest.
_LAZY: dict[str, str] = {
    "CompiledNet": "_compiled",
    "compile_net": "_compiled",
    "reachability_graph": "_compiled",
    "AbsorptionError": "errors",
    "ConvergenceError": "errors",
    "EvaluationError": "errors",
    "ExpressionError": "errors",
    "LimitExceededError": "errors",
    "NetDefinitionError": "errors",
    "NotErgodicError": "errors",
    "SRNError": "errors",
    "VanishingLoopError": "errors",
    "load_kernels": "kernel_warmup",
    "Limits": "net",
    "Net": "net",
    "Place": "net",
    "Transition": "net",
    "immediate": "net",
    "timed": "net",
    "PnmlError": "pnml",
    "PnmlLimits": "pnml",
    "read_pnml": "pnml",
    "read_pnml_ids": "pnml",
    "write_pnml": "pnml",
    "ExplorationProgress": "progress",
    "ReachabilityGraph": "reachability",
    "AccumulatedReward": "rewards",
    "CumulativeSolution": "rewards",
    "Reward": "rewards",
    "accumulated_reward": "rewards",
    "cumulative_transient": "rewards",
    "reward_rate": "rewards",
    "AbsorptionTime": "solvers",
    "TransientSolution": "solvers",
    "time_to_absorption": "solvers",
    "transient": "solvers",
    "SolveProgress": "stationary",
    "SolverAttempt": "stationary",
    "SteadyState": "stationary",
    "steady_state": "stationary",
}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    from importlib import import_module

    value = getattr(import_module(f"{__name__}.{module}"), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *_LAZY})
