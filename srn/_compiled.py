"""A compiled net: its firing rules plus a cache of the reachability graphs explored.

This module sits on top of :mod:`srn.reachability` (which only knows
:class:`~srn._firing.FiringRules`), so the layering reads one way.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import numpy as np
from numpy.typing import ArrayLike

from ._firing import MARKING_DTYPE, FiringRules
from .errors import NetDefinitionError
from .net import Limits, Net
from .progress import ExplorationProgress
from .reachability import ReachabilityGraph, explore

__all__ = ["CompiledNet", "compile_net", "reachability_graph"]

# Graphs kept per compiled net (one per structural parameter set and start).
_CACHED_GRAPHS = 16


class CompiledNet(FiringRules):
    """A net whose expressions are parsed and checked, ready to explore and solve.

    Build it with :func:`compile_net`.  It caches reachability graphs keyed on the
    values of the parameters that change the graph's structure (those read by arc
    multiplicities, guards and immediate weights), so re-solving for new rates
    reuses the graph.  Rates change the structure only where they are 0 (a timed
    transition with rate 0 is not enabled): a cached graph is reused for new rate
    values only when no edge's rate becomes 0 and no firing was dropped for a zero
    rate when it was explored; otherwise the net is explored again.

    Attributes
    ----------
    net : Net
        The source net.
    limits : Limits
        The size limits in force.
    place_names : tuple of str
        Place names in column order of every marking array.
    transition_names : tuple of str
        Transition names in index order.
    structural_parameters : frozenset of str
        Parameters that change the reachability graph itself.
    """

    def __init__(self, net: Net, limits: Limits | None = None) -> None:
        super().__init__(net, limits)
        self._graphs: dict[tuple[Any, ...], ReachabilityGraph] = {}

    def reachability_graph(
        self,
        parameters: Mapping[str, float] | None = None,
        *,
        initial_markings: ArrayLike | None = None,
        initial_probabilities: ArrayLike | None = None,
        progress: Callable[[ExplorationProgress], None] | None = None,
    ) -> ReachabilityGraph:
        """The tangible reachability graph for these parameter values (cached).

        Parameters
        ----------
        parameters : dict of str to float, optional
            Overrides of the net's parameters.
        initial_markings : array of int, shape (k, n_places), optional
            Start from these markings instead of the net's initial marking.  Together
            with ``initial_probabilities`` this is the paper's vanishing initial
            marking that branches to a given distribution over markings.
        initial_probabilities : array, shape (k,), optional
            Probability of each initial marking (uniform when omitted).
        progress : callable, optional
            Called with an :class:`~srn.progress.ExplorationProgress` about every half
            second while exploring, and once when done (not at all when the graph comes
            from the cache).  An exception it raises stops the exploration and
            propagates.

        Returns
        -------
        ReachabilityGraph
            Cached on the structural parameter values and the initial markings; rates
            are re-evaluated for the given parameters without re-exploring, unless a
            rate is 0 somewhere (see the class notes).
        """
        values = self.parameters_with(parameters)
        if initial_markings is None:
            starts = self.initial_marking[None, :]
        else:
            starts = np.asarray(initial_markings)
            if starts.ndim != 2 or starts.shape[1] != len(self.place_names):
                raise NetDefinitionError(
                    f"initial markings need shape (k, {len(self.place_names)}), got {starts.shape}",
                    field="initial_markings",
                )
            top = np.iinfo(MARKING_DTYPE).max
            if starts.shape[0] == 0 or np.any(starts < 0) or np.any(starts > top):
                raise NetDefinitionError(
                    "initial markings must be a non-empty array of non-negative token counts",
                    field="initial_markings",
                )
        starts = np.ascontiguousarray(starts, dtype=MARKING_DTYPE)
        key = (
            tuple(sorted((k, values[k]) for k in self.structural_parameters)),
            starts.shape,
            starts.tobytes(),
        )
        graph = self._graphs.get(key)
        if graph is not None:
            graph = self._reusable(graph, values)
        if graph is None:
            graph = explore(self, values, starts, progress)
            self._graphs.pop(key, None)
            if len(self._graphs) >= _CACHED_GRAPHS:
                self._graphs.pop(next(iter(self._graphs)))
            self._graphs[key] = graph
        graph = graph.with_parameters(values)
        if initial_probabilities is not None:
            graph = graph.with_initial(initial_probabilities)
        return graph

    def _reusable(
        self, graph: ReachabilityGraph, values: Mapping[str, float]
    ) -> ReachabilityGraph | None:
        """``graph`` for rate values ``values``, or None when zero rates change its structure."""
        if graph.zero_rate_firings and any(
            values[p] != graph.parameters[p] for p in self.rate_parameters
        ):
            return None
        candidate = graph.with_parameters(values)
        if candidate is not graph and np.any(candidate.edge_rates() == 0):
            return None
        return candidate


def compile_net(net: Net, limits: Limits | None = None) -> CompiledNet:
    """Parse and check every expression of ``net`` once, for repeated solution.

    Parameters
    ----------
    net : Net
        The net.
    limits : Limits, optional
        Size limits; the defaults of :class:`Limits` when omitted.

    Returns
    -------
    CompiledNet

    Raises
    ------
    NetDefinitionError, ExpressionError, LimitExceededError
        If the net is malformed, an expression is invalid, or a limit is exceeded.

    Examples
    --------
    >>> from srn import Net, timed, compile_net
    >>> net = Net({"p": 1}, [timed("t", "lam", inputs={"p": 1}, outputs={"p": 1})],
    ...           parameters={"lam": 2.0})
    >>> compile_net(net).reachability_graph().n_states
    1
    """
    return CompiledNet(net, limits)


def reachability_graph(
    net: Net | CompiledNet,
    parameters: Mapping[str, float] | None = None,
    *,
    limits: Limits | None = None,
    initial_markings: ArrayLike | None = None,
    initial_probabilities: ArrayLike | None = None,
    progress: Callable[[ExplorationProgress], None] | None = None,
) -> ReachabilityGraph:
    """Generate the tangible reachability graph of a net.

    A timed transition is enabled where its arcs and guard allow it *and* its rate
    is positive: a rate that evaluates to 0 at a marking disables it there (SPNP
    semantics).  Immediate transitions fire before timed ones, by priority, then
    with probability proportional to their weights; their vanishing markings are
    eliminated on the fly.

    Parameters
    ----------
    net : Net or CompiledNet
        The net (compiled on the fly when a :class:`Net`).
    parameters : dict, optional
        Overrides of the net's parameter values.
    limits : Limits, optional
        Size limits, when ``net`` is not compiled yet.
    initial_markings, initial_probabilities : array, optional
        Start from a distribution over markings (see
        :meth:`CompiledNet.reachability_graph`).
    progress : callable, optional
        Called with an :class:`~srn.progress.ExplorationProgress` (states found, edges,
        states expanded, seconds) about every half second while exploring, and once
        when done; an exception it raises stops the exploration and propagates.

    Returns
    -------
    ReachabilityGraph

    Raises
    ------
    LimitExceededError
        When the graph exceeds ``max_states``, ``max_edges``, ``max_vanishing`` or
        ``max_vanishing_depth``; exploration stops as soon as a count passes its
        limit, and the message names the :class:`Limits` field to raise.
    VanishingLoopError
        When immediate transitions can fire forever.
    EvaluationError
        When an expression is invalid at a reachable marking.

    Examples
    --------
    >>> from srn import Net, timed, reachability_graph
    >>> net = Net({"q": 0}, [timed("arrive", 1.0, outputs={"q": 1}, inhibitors={"q": 3}),
    ...                      timed("serve", 2.0, inputs={"q": 1})])
    >>> reachability_graph(net).n_states
    4

    A rate of 0 disables a transition: ``go`` cannot fire while ``a`` holds a token.

    >>> net = Net({"a": 1, "b": 0}, [
    ...     timed("go", "if(#a > 0, 0, 1)", inputs={"a": 1}, outputs={"b": 1}),
    ...     timed("back", 1.0, inputs={"b": 1}, outputs={"a": 1})])
    >>> reachability_graph(net).n_states
    1
    """
    compiled = net if isinstance(net, CompiledNet) else CompiledNet(net, limits)
    return compiled.reachability_graph(
        parameters,
        initial_markings=initial_markings,
        initial_probabilities=initial_probabilities,
        progress=progress,
    )
