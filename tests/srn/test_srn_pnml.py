"""PNML reading and writing, on model files published by PIPE and Storm (tests/srn/data).

Answers are cross-checked against a closed form (PIPE's ClassicGSPN, tiny01 by hand) or
against an independent GSPN solver written here from the GSPN semantics (dense
matrices, vanishing markings eliminated by solving (I - P_VV) X = P_VT), which shares no
code with the engine beyond the parsed :class:`srn.Net` itself.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest
import scipy.linalg as la
from hypothesis import given, settings
from hypothesis import strategies as st

import srn
from srn.pnml import PnmlError, PnmlLimits, read_pnml, write_pnml

DATA = Path(__file__).parent / "data"


def _load(name: str) -> srn.Net:
    return read_pnml((DATA / name).read_bytes())


# -- an independent GSPN solver ------------------------------------------------------------


def _enabled(t: dict[str, Any], m: dict[str, int]) -> bool:
    return all(m[p] >= k for p, k in t.get("inputs", {}).items()) and all(
        m[p] < k for p, k in t.get("inhibitors", {}).items() if k > 0
    )


def _fire(t: dict[str, Any], m: dict[str, int]) -> dict[str, int]:
    out = dict(m)
    for p, k in t.get("inputs", {}).items():
        out[p] -= k
    for p, k in t.get("outputs", {}).items():
        out[p] += k
    return out


def independent_gspn(net: srn.Net) -> dict[str, Any]:
    """Steady state of a GSPN with constant rates and weights, from its definition.

    Tangible markings enable no immediate transition; in a vanishing marking the enabled
    immediate transitions of the highest priority fire with probability proportional to
    their weights.  Returns tangible markings, pi, mean tokens and throughputs.
    """
    d = net.to_dict()
    places = list(d["places"])
    ts = d["transitions"]
    start = dict(d["places"])
    key = lambda m: tuple(m[p] for p in places)  # noqa: E731
    index: dict[tuple[int, ...], int] = {}
    markings: list[dict[str, int]] = []
    todo = [start]
    index[key(start)] = 0
    markings.append(start)
    while todo:
        m = todo.pop()
        for t in ts:
            if _enabled(t, m):
                nxt = _fire(t, m)
                if key(nxt) not in index:
                    index[key(nxt)] = len(markings)
                    markings.append(nxt)
                    todo.append(nxt)
    n = len(markings)

    def choices(m: dict[str, int]) -> list[tuple[dict[str, Any], float]]:
        imm = [t for t in ts if t["kind"] == "immediate" and _enabled(t, m)]
        if imm:
            top = max(t["priority"] for t in imm)
            imm = [t for t in imm if t["priority"] == top]
            total = sum(float(t["weight"]) for t in imm)
            return [(t, float(t["weight"]) / total) for t in imm]
        return [(t, float(t["rate"])) for t in ts if t["kind"] == "timed" and _enabled(t, m)]

    vanishing = np.array(
        [any(t["kind"] == "immediate" and _enabled(t, m) for t in ts) for m in markings]
    )
    A = np.zeros((n, n))  # rates out of tangible rows, probabilities out of vanishing rows
    for i, m in enumerate(markings):
        for t, w in choices(m):
            A[i, index[key(_fire(t, m))]] += w
    T, V = np.flatnonzero(~vanishing), np.flatnonzero(vanishing)
    absorb = la.solve(np.eye(len(V)) - A[np.ix_(V, V)], A[np.ix_(V, T)]) if len(V) else None
    R = A[np.ix_(T, T)] + (A[np.ix_(T, V)] @ absorb if len(V) else 0.0)
    np.fill_diagonal(R, 0.0)
    Q = R - np.diag(R.sum(axis=1))
    M = np.vstack([Q.T, np.ones(len(T))])
    b = np.zeros(len(T) + 1)
    b[-1] = 1.0
    pi = la.lstsq(M, b)[0]
    # Throughput: timed firings from tangible markings; immediate firings weighted by the
    # expected visits to each vanishing marking per unit time, x_V = y (I - P_VV)^-1.
    thr: dict[str, float] = {t["name"]: 0.0 for t in ts}
    y = np.zeros(len(V))
    for a, i in enumerate(T):
        m = markings[i]
        for t, rate in choices(m):
            thr[t["name"]] += pi[a] * rate
            j = index[key(_fire(t, m))]
            if vanishing[j]:
                y[np.searchsorted(V, j)] += pi[a] * rate
    if len(V):
        visits = la.solve((np.eye(len(V)) - A[np.ix_(V, V)]).T, y)
        for b_, i in enumerate(V):
            for t, p in choices(markings[i]):
                thr[t["name"]] += visits[b_] * p
    tangible = [markings[i] for i in T]
    mean = {p: float(sum(pi[a] * m[p] for a, m in enumerate(tangible))) for p in places}
    return {"n_tangible": len(T), "pi": pi, "mean_tokens": mean, "throughput": thr}


def _engine(net: srn.Net) -> tuple[srn.ReachabilityGraph, np.ndarray]:
    g = srn.reachability_graph(net)
    return g, srn.steady_state(g.generator()).probabilities


# -- real files ----------------------------------------------------------------------------


def test_pipe_classic_gspn_closed_form() -> None:
    """PIPE's ClassicGSPN.xml: a closed cyclic network P0 -> T0 -> P1 -> T1 -> P2 -> T2 ->
    P0 with 2 tokens and rate 1 everywhere.  By the product form of closed Gordon-Newell
    networks with equal single-server rates, the 6 markings (compositions of 2 into 3) are
    equally likely; a station is empty in 3 of them, so every transition fires at 1/2 per
    second and every place holds 2/3 token on average."""
    net = _load("pipe-ClassicGSPN.xml")
    g, pi = _engine(net)
    assert g.n_states == 6
    np.testing.assert_allclose(pi, 1 / 6, rtol=1e-12)
    for value in g.throughput(pi).values():
        assert value == pytest.approx(0.5, rel=1e-12)
    for value in g.mean_tokens(pi).values():
        assert value == pytest.approx(2 / 3, rel=1e-12)


@pytest.mark.parametrize(
    ("name", "n_tangible"),
    [
        ("pipe-gspn1.xml", 3),
        ("pipe-complex_gspn.xml", 6),
        ("storm-workflow_cluster.pnml", 81),
    ],
)
def test_real_gspn_files_against_independent_solver(name: str, n_tangible: int) -> None:
    """PIPE's gspn1 (old PIPE format, immediate weights 1-3), PIPE 5's complex_gspn test net
    ('Default,1' markings) and Storm's workflow_cluster availability model (30 vanishing
    markings, rates 2e-4 to 1): mean tokens and every throughput agree with the
    independent dense solver to 1e-9 relative (its lstsq solve is the weaker link)."""
    net = _load(name)
    g, pi = _engine(net)
    ref = independent_gspn(net)
    assert g.n_states == ref["n_tangible"] == n_tangible
    means = g.mean_tokens(pi)
    for place, value in ref["mean_tokens"].items():
        assert means[place] == pytest.approx(value, rel=1e-9, abs=1e-13), place
    thr = g.throughput(pi)
    for t, value in ref["throughput"].items():
        assert thr[t] == pytest.approx(value, rel=1e-9, abs=1e-13), t


def test_storm_tiny01_by_hand() -> None:
    """Storm's tiny01.pnml (immediate t1, t2, t3 with weights 1, 2, 3 read from <rate>;
    timed l1 rate 4, l2 rate 5).  From {p1, p2}: t1 (1/3) then t3 (3/5) leads to {p4};
    every other path ends in {p3, p5}.  So the chain starts in {p4} w.p. 1/5 and in
    {p3, p5} w.p. 4/5, and is absorbed after Exp(4) or Exp(5): mean time to absorption
    = 1/5 * 1/4 + 4/5 * 1/5 = 0.21 s; 4 tangible markings, 2 of them dead."""
    net = _load("storm-tiny01.pnml")
    kinds = {
        t.name: (t.kind, t.weight if t.kind == "immediate" else t.rate) for t in net.transitions
    }
    assert kinds == {
        "t1": ("immediate", 1.0),
        "t2": ("immediate", 2.0),
        "t3": ("immediate", 3.0),
        "l1": ("timed", 4.0),
        "l2": ("timed", 5.0),
    }
    g = srn.reachability_graph(net)
    assert (g.n_states, len(g.dead_states)) == (4, 2)
    assert g.initial_distribution[g.index({"p4": 1})] == pytest.approx(0.2, rel=1e-14)
    absorption = srn.time_to_absorption(g.generator(), g.initial_distribution)
    assert absorption.mean == pytest.approx(0.21, rel=1e-13)


def _reachable_count(net: srn.Net) -> int:
    """Reachable markings by plain breadth-first search over dictionaries."""
    d = net.to_dict()
    places = list(d["places"])
    seen = {tuple(d["places"][p] for p in places)}
    todo = [dict(d["places"])]
    while todo:
        m = todo.pop()
        for t in d["transitions"]:
            if _enabled(t, m):
                nxt = _fire(t, m)
                k = tuple(nxt[p] for p in places)
                if k not in seen:
                    seen.add(k)
                    todo.append(nxt)
    return len(seen)


def test_storm_ibm319_iso_pt_net_with_page() -> None:
    """IBM319.pnml (ISO/IEC 15909-2 P/T net inside a <page>, namespaced, <text> labels;
    shipped with Storm): 253 places and 178 transitions, every transition timed at rate 1;
    the engine's state count matches a plain breadth-first search of the parsed net."""
    net = _load("storm-IBM319.pnml")
    assert (len(net.places), len(net.transitions)) == (253, 178)
    assert all(t.kind == "timed" and t.rate == 1.0 for t in net.transitions)
    g = srn.reachability_graph(net)
    assert g.n_states == _reachable_count(net) == 2482


@pytest.mark.parametrize(
    "name",
    ["pipe-gspn1.xml", "pipe-complex_gspn.xml", "storm-tiny01.pnml", "storm-workflow_cluster.pnml"],
)
@pytest.mark.parametrize("dialect", ["pipe", "storm"])
def test_round_trip_through_pnml(name: str, dialect: Any) -> None:
    net = _load(name)
    again = read_pnml(write_pnml(net, dialect=dialect))
    assert again.to_dict() == net.to_dict()


def test_json_to_pnml_and_back_with_inhibitors_and_parameters() -> None:
    net = srn.Net(
        {"q": 0, "spare": 2},
        [
            srn.timed("arrive", "lam", outputs={"q": 1}, inhibitors={"q": 4}),
            srn.timed("serve", 3.0, inputs={"q": 2, "spare": 1}, outputs={"spare": 1}),
            srn.immediate("drop", weight=2.5, priority=3, inputs={"q": 1}, inhibitors={"spare": 1}),
        ],
        parameters={"lam": 1.5},
    )
    text = write_pnml(net, dialect="storm")
    assert 'value="inhibition"' in text
    back = read_pnml(text).to_dict()
    expected = net.to_dict()
    expected["transitions"][0]["rate"] = 1.5  # the parameter is written as its value
    expected["parameters"] = {}
    assert back == expected


def test_writer_refuses_expressions_and_guards() -> None:
    with pytest.raises(srn.NetDefinitionError) as err:
        write_pnml(srn.Net({"q": 1}, [srn.timed("t", "2 * #q", inputs={"q": 1})]))
    assert err.value.field == "transitions.t.rate"
    with pytest.raises(srn.NetDefinitionError) as err:
        write_pnml(srn.Net({"q": 1}, [srn.timed("t", 1.0, inputs={"q": 1}, guard="#q > 0")]))
    assert err.value.field == "transitions.t.guard"


def test_infinite_server_multiplies_by_enabling_degree() -> None:
    """<infiniteServer>true</infiniteServer>: rate times the enabling degree floor(#p / m).
    Three tokens leaving independently at rate 2 each: an M/M/inf pure death process, whose
    mean time to empty is sum_{k=1..3} 1/(2k) = 11/12 s."""
    doc = """<pnml><net id="n"><place id="p"><initialMarking><value>Default,3</value>
    </initialMarking></place><place id="done"/><transition id="go"><rate><value>2</value></rate>
    <timed><value>true</value></timed><infiniteServer><value>true</value></infiniteServer>
    </transition><arc id="a" source="p" target="go"><inscription><value>Default,1</value>
    </inscription></arc><arc id="b" source="go" target="done"/></net></pnml>"""
    net = read_pnml(doc)
    g = srn.reachability_graph(net)
    r = srn.time_to_absorption(g.generator(), g.initial_distribution)
    assert r.mean == pytest.approx(11 / 12, rel=1e-13)
    # Written back as an infinite-server transition, and read again unchanged.
    text = write_pnml(net)
    assert "<infiniteServer><value>true</value></infiniteServer>" in text
    assert read_pnml(text).to_dict() == net.to_dict()


# -- refusals ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("doc", "element", "line", "words"),
    [
        (
            '<pnml>\n<net id="n" type="http://www.pnml.org/version-2009/grammar/symmetricnet">'
            "</net></pnml>",
            "net",
            2,
            "not supported",
        ),
        (
            '<pnml><net id="n">\n<place id="p">\n<initialMarking><value>Default,1,Red,2</value>'
            "</initialMarking></place></net></pnml>",
            "initialMarking",
            3,
            "coloured",
        ),
        (
            '<pnml><net id="n"><place id="p"/>\n<transition id="t"><rate><value>2*#(p)</value>'
            "</rate></transition></net></pnml>",
            "rate",
            2,
            "not a number",
        ),
        (
            '<pnml><net id="n"><place id="p"/><transition id="t"/>\n\n<arc id="a" source="p" '
            'target="t"><type value="reset"/></arc></net></pnml>',
            "arc",
            3,
            "reset",
        ),
        (
            '<pnml><net id="n"><page id="g">\n<referencePlace id="r" ref="p"/></page></net></pnml>',
            "referencePlace",
            2,
            "not supported",
        ),
        (
            '<pnml><net id="n"><place id="p">\n<capacity><value>3</value></capacity></place>'
            "</net></pnml>",
            "capacity",
            2,
            "capacities",
        ),
        (
            '<pnml><net id="n"><place id="p"/><transition id="t"/>\n<arc id="a" source="t" '
            'target="p"><type value="inhibitor"/></arc></net></pnml>',
            "arc",
            2,
            "place to a transition",
        ),
        (
            '<pnml><net id="n"><place id="p"/>\n<arc id="a" source="p" target="q"/></net></pnml>',
            "arc",
            2,
            "must join",
        ),
    ],
)
def test_unsupported_constructs_name_element_and_line(
    doc: str, element: str, line: int, words: str
) -> None:
    with pytest.raises(PnmlError) as err:
        read_pnml(doc)
    assert err.value.element == element
    assert err.value.line == line
    assert words in str(err.value)
    assert f"<{element}> at line {line}" in str(err.value)


def test_coloured_net_from_the_model_checking_contest_is_refused() -> None:
    doc = (
        '<?xml version="1.0"?>\n<pnml xmlns="http://www.pnml.org/version-2009/grammar/pnml">\n'
        '<net id="x" type="http://www.pnml.org/version-2009/grammar/symmetricnet"><page id="g">'
        "</page></net></pnml>"
    )
    with pytest.raises(PnmlError, match="symmetricnet"):
        read_pnml(doc)


BILLION_LAUGHS = """<?xml version="1.0"?>
<!DOCTYPE lolz [
 <!ENTITY lol "lol">
 <!ENTITY lol2 "&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;">
 <!ENTITY lol3 "&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;">
 <!ENTITY lol4 "&lol3;&lol3;&lol3;&lol3;&lol3;&lol3;&lol3;&lol3;&lol3;&lol3;">
]>
<pnml><net id="n"><place id="p"><name><value>&lol4;</value></name></place></net></pnml>"""

EXTERNAL_ENTITY = """<?xml version="1.0"?>
<!DOCTYPE pnml [<!ENTITY secret SYSTEM "file:///etc/passwd">]>
<pnml><net id="n"><place id="p"><name><value>&secret;</value></name></place></net></pnml>"""

EXTERNAL_DTD = """<?xml version="1.0"?>
<!DOCTYPE pnml SYSTEM "http://127.0.0.1:9/pnml.dtd">
<pnml><net id="n"/></pnml>"""


@pytest.mark.parametrize("doc", [BILLION_LAUGHS, EXTERNAL_ENTITY, EXTERNAL_DTD])
def test_hostile_xml_is_refused(doc: str) -> None:
    with pytest.raises(PnmlError, match="forbidden XML construct"):
        read_pnml(doc)


def test_size_element_and_depth_limits_are_named() -> None:
    doc = _load_text("pipe-ClassicGSPN.xml")
    with pytest.raises(PnmlError) as err:
        read_pnml(doc, limits=PnmlLimits(max_bytes=1_000))
    assert err.value.limit == "max_bytes"
    assert "max_bytes=1000" in str(err.value)
    with pytest.raises(PnmlError) as err:
        read_pnml(doc, limits=PnmlLimits(max_elements=20))
    assert err.value.limit == "max_elements"
    deep = "<pnml>" + "<page>" * 100 + "</page>" * 100 + "</pnml>"
    with pytest.raises(PnmlError) as err:
        read_pnml(deep)
    assert err.value.limit == "max_depth"
    with pytest.raises(PnmlError, match="not well-formed"):
        read_pnml("<pnml><net id='n'>")


def test_overlong_labels_are_refused_not_truncated() -> None:
    digits = "1" + "0" * 2_000
    doc = f'<pnml><net id="n">\n<place id="p"><initialMarking><text>{digits}</text>'
    doc += "</initialMarking></place></net></pnml>"
    with pytest.raises(PnmlError, match="longer than 1000 characters") as err:
        read_pnml(doc)
    assert (err.value.element, err.value.line) == ("text", 2)
    # A long name is never read, so it does no harm.
    long_name = f'<pnml><net id="n"><place id="p"><name><text>{"x" * 5_000}</text></name>'
    assert read_pnml(long_name + "</place></net></pnml>").places[0].name == "p"


def _load_text(name: str) -> str:
    return (DATA / name).read_text(encoding="iso-8859-1")


def test_ids_that_are_not_engine_names_are_rewritten_uniquely() -> None:
    doc = (
        '<pnml><net id="n"><place id="p-1"/><place id="2x"/><transition id="t.a"/>'
        '<arc id="a" source="p-1" target="t.a"/></net></pnml>'
    )
    net = read_pnml(doc)
    assert [p.name for p in net.places] == ["p_1", "n_2x"]
    assert net.transitions[0].name == "t_a"
    clash = '<pnml><net id="n"><place id="a-b"/><place id="a.b"/></net></pnml>'
    with pytest.raises(PnmlError, match="both become"):
        read_pnml(clash)


def test_storm_workflow_cluster_against_stormpy() -> None:
    """Storm's own answer for its workflow_cluster model: long-run probability that the
    backbone, the repair unit and the left workstation are up.  Produced by stormpy 2.0.0
    (the ``bench`` extra) with ``python benchmarks/stormpy_pnml_reference.py``; Storm builds
    the 111-state Markov automaton (81 tangible + 30 vanishing markings) and answers
    ``LRAmax=? [BackboneUp>0]`` etc. by value iteration to its default precision 1e-6, which
    is the tolerance here (the engine's own answer is exact to ~1e-15)."""
    net = _load("storm-workflow_cluster.pnml")
    g, pi = _engine(net)
    storm = {
        "#BackboneUp > 0": 0.9984005144311047,
        "#RepairUnitAvailable > 0": 0.9944064050102674,
        "#LeftWorkStationUp > 0": 0.9989586538751917,
    }
    for condition, value in storm.items():
        assert g.probability(condition, pi) == pytest.approx(value, rel=1e-6), condition
    # tiny01: Storm's `Tmax=? [F p6+p7>0]` gives 0.21, as derived by hand above.


names = st.from_regex(r"[a-z][a-z0-9_]{0,6}", fullmatch=True)


@st.composite
def numeric_nets(draw: Any) -> srn.Net:
    """Nets with numeric rates, weights and multiplicities (what PNML can hold)."""
    place_names = draw(st.lists(names, min_size=1, max_size=5, unique=True))
    places = {p: draw(st.integers(0, 5)) for p in place_names}
    # Distinct from the places' names: PNML ids are unique across places and transitions
    # (a shared name is refused, see test_a_name_shared_by_a_place_and_a_transition_...).
    transition_names = draw(
        st.lists(
            names.map(lambda s: "t" + s).filter(lambda s: s not in place_names),
            min_size=1,
            max_size=5,
            unique=True,
        )
    )
    arcs = st.dictionaries(st.sampled_from(place_names), st.integers(1, 3), max_size=3)
    transitions = []
    for name in transition_names:
        if draw(st.booleans()):
            rate = draw(st.floats(1e-6, 1e6, allow_nan=False))
            transitions.append(
                srn.timed(name, rate, inputs=draw(arcs), outputs=draw(arcs), inhibitors=draw(arcs))
            )
        else:
            transitions.append(
                srn.immediate(
                    name,
                    weight=draw(st.floats(1e-3, 1e3, allow_nan=False)),
                    priority=draw(st.integers(-5, 5)),
                    inputs=draw(arcs),
                    outputs=draw(arcs),
                    inhibitors=draw(arcs),
                )
            )
    return srn.Net(places, transitions)


@settings(max_examples=60, deadline=None)
@given(net=numeric_nets(), dialect=st.sampled_from(["pipe", "storm"]))
def test_any_numeric_net_survives_a_pnml_round_trip(net: srn.Net, dialect: Any) -> None:
    """Invariant: write_pnml then read_pnml gives back the same net (numbers exactly)."""
    assert read_pnml(write_pnml(net, dialect=dialect)).to_dict() == net.to_dict()


def test_a_name_shared_by_a_place_and_a_transition_is_refused_not_written() -> None:
    # Found by the round-trip property: a Net keeps place and transition names apart, but
    # PNML has one id space, so the document would be unreadable (duplicate id).
    net = srn.Net(
        {"tq": 1, "p": 0},
        [srn.timed("tq", 1.0, inputs={"tq": 1}, outputs={"p": 1})],
    )
    with pytest.raises(srn.NetDefinitionError) as caught:
        write_pnml(net)
    assert caught.value.field == "transitions.tq"
