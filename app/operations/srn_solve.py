"""Solve a posted SRN: the work behind ``POST /srn/solve`` and ``blastrate solve``.

:func:`solve_srn` takes the validated request as plain JSON data and returns the response
as plain JSON data, so the same function runs in the request's process (small chains) and
in a worker process of :class:`app.runtime.pool.SolvePool` (large ones, where the wall-time limit
can stop it).  :class:`SolveTooLarge` tells the caller that a chain outgrew the in-process
budget and must move to the pool.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, fields
from typing import TYPE_CHECKING, Any

import numpy as np

import srn
from app.schemas.problems import FieldProblem, ProblemError, problem_from_exception
from app.settings import Settings

from .pnml_input import with_file_ids, with_net

if TYPE_CHECKING:
    # For annotations only: scipy.sparse (0.15 s) stays out of the service's start.
    import scipy.sparse as sp

__all__ = [
    "SolveBudget",
    "SolveEstimate",
    "SolveTooLarge",
    "check_srn_request",
    "estimate_srn_solve",
    "solve_budget",
    "solve_srn",
]


@dataclass(frozen=True)
class SolveBudget:
    """Limits one solve is held to.

    Attributes
    ----------
    max_states, max_edges, max_transitions, max_places, max_expression_length : int
        Model size limits (see :class:`srn.Limits`).
    max_time_points : int
        Entries of ``times``.
    max_distribution_states : int
        Largest chain whose distribution may be returned.
    max_work : float or None
        Estimated sparse matrix-vector work (products x non-zeros) above which
        :class:`SolveTooLarge` is raised; None for no estimate (in the worker pool).
    time_limit_s : float or None
        Wall-time budget handed to the iterative steady-state solver.
    in_process : bool
        True when a ``max_states``, ``max_edges`` or ``max_vanishing`` overrun means "move
        to the pool" rather than "too large".
    max_vanishing : int
        Vanishing markings the exploration may meet (``max_vanishing``).
    """

    max_states: int
    max_edges: int
    max_transitions: int
    max_places: int
    max_expression_length: int
    max_time_points: int
    max_distribution_states: int
    max_vanishing: int
    max_work: float | None = None
    time_limit_s: float | None = None
    in_process: bool = False
    max_pnml_elements: int = 100_000
    max_pnml_bytes: int = 5_000_000

    def limits(self) -> srn.Limits:
        """The engine's limits for this budget."""
        extra: dict[str, int] = {}
        if "max_vanishing" in _ENGINE_LIMITS:
            extra["max_vanishing"] = self.max_vanishing
        return srn.Limits(
            max_states=self.max_states,
            max_edges=self.max_edges,
            max_transitions=self.max_transitions,
            max_places=self.max_places,
            max_expression_length=self.max_expression_length,
            **extra,
        )


def solve_budget(settings: Settings, time_limit_s: float) -> SolveBudget:
    """The budget of one solve under ``settings``: the same limits for ``/srn/solve``,
    the jobs and the command line, each read from its ``BLASTRATE_*`` setting.

    Parameters
    ----------
    settings : Settings
        The service's (or the command line's) settings.
    time_limit_s : float
        Wall time of this kind of solve (``solve_timeout_s``, ``job_timeout_s``, or the
        command line's ``--timeout``), in seconds.
    """
    return SolveBudget(
        max_states=settings.max_states,
        max_edges=settings.max_edges,
        max_transitions=settings.max_transitions,
        max_places=settings.max_places,
        max_expression_length=settings.max_expression_length,
        max_time_points=settings.max_time_points,
        max_distribution_states=settings.max_distribution_states,
        max_vanishing=settings.max_vanishing,
        time_limit_s=time_limit_s,
        max_pnml_elements=settings.max_pnml_elements,
        max_pnml_bytes=settings.max_body_bytes,
    )


# The engine's limit names (``max_vanishing`` arrives with the engine that counts them).
_ENGINE_LIMITS = frozenset(f.name for f in fields(srn.Limits))

# Limits whose overrun in the server process means "solve it in the pool".
_MOVE_TO_POOL = ("max_states", "max_edges", "max_vanishing")


@dataclass(frozen=True)
class SolveEstimate:
    """What a solve may cost, estimated from the request before any work starts.

    Attributes
    ----------
    transitions : int
        Transitions of the net (0 for a PNML document, which always goes to the pool).
    immediate : int
        Immediate transitions: an upper bound on how many can be enabled together.  Each
        one that can fire independently of the others doubles the vanishing markings
        between two tangible ones (k concurrent ones give 2**k orders of firing).
    work : float
        Exploration work if the chain fills the in-process state limit:
        ``max_states * transitions * 2**immediate`` (transition tests).
    in_process : bool
        Whether the work is cheap enough for the server process.
    """

    transitions: int
    immediate: int
    work: float
    in_process: bool


def estimate_srn_solve(
    request: Mapping[str, Any], max_states: int, max_work: float
) -> SolveEstimate:
    """Decide, before solving, whether a ``POST /srn/solve`` may run in the server process.

    Parameters
    ----------
    request : dict
        The validated request body.
    max_states : int
        The in-process state limit (tangible markings).
    max_work : float
        The in-process work budget (``inprocess_max_work``, transition tests).

    Returns
    -------
    SolveEstimate

    Examples
    --------
    >>> net = {"places": {"p": 1}, "transitions": [{"name": "t", "rate": 1.0}]}
    >>> estimate_srn_solve({"net": net}, 2_000, 2e7).in_process
    True
    """
    net = request.get("net")
    if not isinstance(net, Mapping):
        # A PNML document: its size is only known once parsed, which is work too.
        return SolveEstimate(0, 0, float("inf"), False)
    transitions = net["transitions"]
    immediate = sum(1 for t in transitions if t.get("kind") == "immediate")
    work = float(max(max_states, 1)) * max(len(transitions), 1) * 2.0 ** min(immediate, 64)
    return SolveEstimate(len(transitions), immediate, work, work <= max_work)


class SolveTooLarge(Exception):
    """The chain outgrew the in-process budget; solve it in the worker pool."""


def _expression_fields(request: Mapping[str, Any]) -> list[tuple[str, Any]]:
    """Every expression of the request with its dotted location."""
    out: list[tuple[str, Any]] = []
    for t in request["net"]["transitions"]:
        where = f"net.transitions.{t['name']}"
        out.append((f"{where}.rate", t.get("rate")))
        out.append((f"{where}.weight", t.get("weight")))
        out.append((f"{where}.guard", t.get("guard")))
        for label in ("inputs", "outputs", "inhibitors"):
            for place, mult in (t.get(label) or {}).items():
                out.append((f"{where}.{label}.{place}", mult))
    measures = request.get("measures") or {}
    for group in ("rewards", "probabilities"):
        for name, expr in (measures.get(group) or {}).items():
            if isinstance(expr, Mapping):
                expr = expr.get("rate")
                out.append((f"measures.{group}.{name}.rate", expr))
            else:
                out.append((f"measures.{group}.{name}", expr))
    out.append(("absorbing", request.get("absorbing")))
    return out


def _check_sizes(request: Mapping[str, Any], budget: SolveBudget) -> None:
    """Request-level limits, reported with the field and the limit by name."""
    for where, value in _expression_fields(request):
        if isinstance(value, str) and len(value) > budget.max_expression_length:
            raise ProblemError(
                "limit-exceeded",
                f"expression at {where} is {len(value)} characters long; "
                f"max_expression_length={budget.max_expression_length}",
                [
                    FieldProblem(
                        "body." + where,
                        "expression too long",
                        "max_expression_length",
                        budget.max_expression_length,
                        len(value),
                    )
                ],
            )
    times = request.get("times") or []
    if len(times) > budget.max_time_points:
        raise ProblemError(
            "limit-exceeded",
            f"{len(times)} times given; max_time_points={budget.max_time_points}",
            [
                FieldProblem(
                    "body.times",
                    "too many time points",
                    "max_time_points",
                    budget.max_time_points,
                    len(times),
                )
            ],
        )
    if request.get("analysis") == "transient" and not times:
        raise ProblemError(
            "validation-error",
            "a transient analysis needs a non-empty list of times",
            [FieldProblem("body.times", "required for analysis 'transient'")],
        )
    grid = int(request.get("grid_points", 101))
    if request.get("analysis") == "absorption" and not times and grid > budget.max_time_points:
        raise ProblemError(
            "limit-exceeded",
            f"grid_points={grid} exceeds max_time_points={budget.max_time_points}",
            [
                FieldProblem(
                    "body.grid_points", "too many", "max_time_points", budget.max_time_points, grid
                )
            ],
        )
    for name, n, limit in (
        ("places", len(request["net"]["places"]), budget.max_places),
        ("transitions", len(request["net"]["transitions"]), budget.max_transitions),
    ):
        if n > limit:
            raise ProblemError(
                "limit-exceeded",
                f"the net has {n} {name}; max_{name}={limit}",
                [FieldProblem(f"body.net.{name}", f"too many {name}", f"max_{name}", limit, n)],
            )


def _initial_arrays(
    initial: Mapping[str, Any], place_names: tuple[str, ...]
) -> tuple[np.ndarray, np.ndarray | None]:
    index = {name: i for i, name in enumerate(place_names)}
    rows = np.zeros((len(initial["markings"]), len(place_names)), dtype=np.int64)
    for r, marking in enumerate(initial["markings"]):
        for place, tokens in marking.items():
            if place not in index:
                raise ProblemError(
                    "invalid-model",
                    f"initial marking {r} names unknown place {place!r}",
                    [FieldProblem(f"body.initial.markings[{r}].{place}", "unknown place")],
                )
            rows[r, index[place]] = tokens
    probabilities = initial.get("probabilities")
    if probabilities is not None and len(probabilities) != len(rows):
        raise ProblemError(
            "invalid-model",
            f"{len(probabilities)} probabilities for {len(rows)} initial markings",
            [FieldProblem("body.initial.probabilities", "one probability per marking")],
        )
    return rows, None if probabilities is None else np.asarray(probabilities, dtype=float)


def _json(values: Any) -> Any:
    """Numbers and arrays as JSON-safe Python values (non-finite -> None)."""
    arr = np.asarray(values, dtype=float)
    if arr.ndim == 0:
        x = float(arr)
        return x if np.isfinite(x) else None
    obj = arr.astype(object)
    obj[~np.isfinite(arr)] = None
    return obj.tolist()


def _rewards(graph: srn.ReachabilityGraph, spec: Mapping[str, Any]) -> dict[str, srn.Reward]:
    rewards = {}
    for name, value in (spec.get("rewards") or {}).items():
        where = f"measures.rewards.{name}"
        if isinstance(value, Mapping):
            # The validated model fills in nulls; the engine's JSON form omits them.
            value = {k: v for k, v in value.items() if v is not None}
        reward = srn.Reward.from_json(value, field=where)
        reward.check(graph, field=where)
        rewards[name] = reward
    return rewards


def _measures(
    graph: srn.ReachabilityGraph,
    probabilities: np.ndarray,
    spec: Mapping[str, Any],
    integrals: np.ndarray | None = None,
) -> dict[str, Any]:
    rewards = _rewards(graph, spec)
    out: dict[str, Any] = {
        "rewards": {
            name: _json(srn.reward_rate(graph, reward, probabilities))
            for name, reward in rewards.items()
        },
        "accumulated_rewards": None
        if integrals is None
        else {
            name: _json(srn.reward_rate(graph, reward, integrals))
            for name, reward in rewards.items()
        },
        "probabilities": {
            name: _json(graph.probability(expr, probabilities))
            for name, expr in (spec.get("probabilities") or {}).items()
        },
        "mean_tokens": None,
        "throughput": None,
    }
    if spec.get("mean_tokens", True):
        out["mean_tokens"] = {k: _json(v) for k, v in graph.mean_tokens(probabilities).items()}
    if spec.get("throughput", True):
        out["throughput"] = {k: _json(v) for k, v in graph.throughput(probabilities).items()}
    return out


def _too_large(budget: SolveBudget, work: float) -> None:
    if budget.max_work is not None and work > budget.max_work:
        raise SolveTooLarge


def _max_exit_rate(Q: sp.csr_array) -> float:
    return float(np.max(-Q.diagonal())) if Q.shape[0] else 0.0


def _api_field(field: str | None) -> str:
    """The request field an engine error points at (the engine names net-relative paths)."""
    if not field:
        return "body.net"
    head = field.split(".", 1)[0].split("[", 1)[0]
    if head in ("places", "transitions", "parameters"):
        return "body.net." + field
    if head == "reward":
        return "body.measures"
    if head.startswith("initial"):
        return "body.initial"
    if head.startswith("max_") or head == "solve_seconds":
        return "body.net"
    return "body." + field


@contextmanager
def _engine_errors() -> Iterator[None]:
    try:
        yield
    except srn.SRNError as exc:
        problem = problem_from_exception(exc)
        if problem is None:  # pragma: no cover - every SRNError translates
            raise
        for i, entry in enumerate(problem.errors):
            problem.errors[i] = FieldProblem(
                _api_field(getattr(exc, "field", None)),
                entry.reason,
                entry.limit,
                entry.allowed,
                entry.actual,
            )
        raise problem from exc


def check_srn_request(request: Mapping[str, Any], budget: SolveBudget) -> None:
    """Refuse, before any solving, what :func:`solve_srn` would refuse before solving:
    the request-level limits, a transient analysis without times, and a net that does
    not compile (an unknown place or function in an expression, a bad arc).

    ``POST /srn/jobs`` calls it so that such a body is a 422 at once rather than a job
    that fails later.  It costs a compilation of the net (milliseconds), not a state.

    Parameters
    ----------
    request : dict
        The validated request body, its net in JSON form (PNML already read).
    budget : SolveBudget
        The limits the solve will run under.

    Raises
    ------
    ProblemError
        Naming the field and the reason, as :func:`solve_srn` would.
    """
    _check_sizes(request, budget)
    with _engine_errors():
        srn.compile_net(srn.Net.from_dict(request["net"]), budget.limits())


def solve_srn(
    request: Mapping[str, Any],
    budget: SolveBudget,
    progress: Callable[[dict[str, Any]], None] | None = None,
) -> dict[str, Any]:
    """Solve one ``POST /srn/solve`` request.

    Parameters
    ----------
    request : dict
        The validated request body (see :class:`app.schemas.bodies.SrnSolveRequest`).
    budget : SolveBudget
        Limits to apply.
    progress : callable, optional
        Called with ``{"stage": ..., "states": ..., "edges": ..., "iterations": ...,
        "residual": ...}`` (the keys known so far) as the solve moves on; the jobs of
        ``/srn/jobs`` report it.

    Returns
    -------
    dict
        The response body without ``solved_in`` (JSON-safe).

    Raises
    ------
    SolveTooLarge
        With an in-process budget, when the chain or the estimated work is over it.
    ProblemError, srn.SRNError
        On an invalid model or a limit reached.
    """
    request, renamed = with_net(
        request,
        srn.PnmlLimits(max_bytes=budget.max_pnml_bytes, max_elements=budget.max_pnml_elements),
    )
    _check_sizes(request, budget)
    with _engine_errors():
        return with_file_ids(_solve(request, budget, progress or (lambda _: None)), renamed)


def _solve(
    request: Mapping[str, Any],
    budget: SolveBudget,
    progress: Callable[[dict[str, Any]], None],
) -> dict[str, Any]:
    progress({"stage": "exploring"})
    net = srn.Net.from_dict(request["net"])
    compiled = srn.compile_net(net, budget.limits())
    initial = request.get("initial")
    starts, start_probabilities = (
        _initial_arrays(initial, compiled.place_names) if initial else (None, None)
    )
    try:
        graph = compiled.reachability_graph(
            request.get("parameters") or None,
            initial_markings=starts,
            initial_probabilities=start_probabilities,
            progress=lambda report: progress(
                {"stage": "exploring", "states": report.states, "edges": report.edges}
            ),
        )
    except srn.LimitExceededError as exc:
        if budget.in_process and exc.limit in _MOVE_TO_POOL:
            raise SolveTooLarge from exc
        raise
    progress({"stage": "solving", "states": graph.n_states, "edges": graph.n_edges})
    Q = graph.generator()
    analysis = request.get("analysis", "steady-state")
    measures_spec = request.get("measures") or {}
    result: dict[str, Any] = {
        "analysis": analysis,
        "n_states": graph.n_states,
        "n_edges": graph.n_edges,
        "n_vanishing": int(graph.n_vanishing),
        "n_dead_states": len(graph.dead_states),
        "n_absorbing_states": len(graph.absorbing_states),
        "steady_state": None,
        "transient": None,
        "absorption": None,
        "distribution": None,
    }
    want_distribution = (
        request.get("include_distribution", False)
        and graph.n_states <= budget.max_distribution_states
    )
    if analysis == "steady-state":

        def solving(report: srn.SolveProgress) -> None:
            # The engine reports each route's start and every 10 iterations.
            progress(
                {
                    "stage": "solving",
                    "method": report.method,
                    "iterations": report.iterations,
                    "residual": report.residual if math.isfinite(report.residual) else None,
                }
            )

        solution = srn.steady_state(Q, time_limit=budget.time_limit_s, progress=solving)
        progress(
            {
                "stage": "measures",
                "iterations": int(solution.iterations),
                "residual": float(solution.residual),
            }
        )
        pi = solution.probabilities
        result["steady_state"] = {
            "residual": float(solution.residual),
            "method": solution.method,
            "iterations": int(solution.iterations),
            "note": solution.attempts[-1].note if solution.attempts else "",
            "measures": _measures(graph, pi, measures_spec),
        }
        distribution: Any = pi
    elif analysis == "transient":
        times = np.asarray(request["times"], dtype=float)
        # Accumulated rewards take a second, cumulative pass of uniformisation.
        passes = 2 if measures_spec.get("rewards") else 1
        _too_large(
            budget, passes * _max_exit_rate(Q) * float(times.max(initial=0.0)) * max(Q.nnz, 1)
        )
        sol = srn.transient(Q, times, graph.initial_distribution)
        integrals = None
        if measures_spec.get("rewards"):
            integrals = srn.cumulative_transient(Q, times, graph.initial_distribution).integrals
        result["transient"] = {
            "times": sol.times.tolist(),
            "error_bound": _json(sol.error_bound),
            "method": sol.method,
            "measures": _measures(graph, sol.probabilities, measures_spec, integrals),
        }
        distribution = sol.probabilities
    else:
        absorbing: Any = None
        condition = request.get("absorbing")
        if condition is not None:
            absorbing = graph.reward(condition) != 0
        levels = [float(q) for q in request.get("quantiles", (0.5, 0.9, 0.99))]
        grid = request.get("times")
        if budget.max_work is not None:
            # The survival series is summed up to the largest time asked for; by Markov's
            # inequality a quantile p lies below mean / (1 - p).  The mean costs one solve.
            probe = srn.time_to_absorption(
                Q, graph.initial_distribution, absorbing=absorbing, times=[0.0], quantiles=()
            )
            top = max([*levels, 0.999 if grid is None else 0.0])
            horizon = max(max(grid or [0.0]), probe.mean / (1.0 - top))
            _too_large(budget, _max_exit_rate(Q) * horizon * max(Q.nnz, 1))
        sol_abs = srn.time_to_absorption(
            Q,
            graph.initial_distribution,
            absorbing=absorbing,
            times=grid,
            quantiles=levels,
            grid_points=int(request.get("grid_points", 101)),
        )
        result["absorption"] = {
            "mean_s": float(sol_abs.mean),
            "variance_s2": float(sol_abs.variance),
            "quantiles": [
                {"level": level, "seconds": float(value)}
                for level, value in sol_abs.quantiles.items()
            ],
            "times_s": sol_abs.times.tolist(),
            "cdf": _json(sol_abs.cdf),
            "atom": float(sol_abs.atom),
            "n_transient_states": len(sol_abs.transient_states),
            "error_bound": float(sol_abs.error_bound),
        }
        distribution = None
    if want_distribution and distribution is not None:
        result["distribution"] = {
            "place_names": list(graph.place_names),
            "markings": graph.markings.tolist(),
            "probabilities": _json(distribution),
        }
    return result
