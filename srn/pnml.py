"""Read and write nets in PNML: the GSPN dialect of PIPE and Storm, and the ISO P/T core.

Two dialects are read:

* the GSPN dialect that PIPE writes and Storm and GreatSPN read: initial markings and
  arc inscriptions as ``<value>Default,3</value>`` (or a bare number), transitions with
  ``<rate>``, ``<timed>``, ``<priority>``, ``<weight>`` and ``<infiniteServer>``, and
  ``<type value="normal|inhibitor"/>`` on arcs (Storm spells it ``inhibition``);
* the place/transition core of ISO/IEC 15909-2: ``<initialMarking><text>3</text>``,
  ``<inscription><text>2</text>`` and nested ``<page>`` elements.  A P/T transition has
  no rate; it becomes a timed transition of rate 1/s.

Everything else -- coloured tokens, reference nodes, rate expressions, place
capacities, reset or transport arcs -- is refused with :class:`PnmlError`, which names
the element and its line.  Graphics, names, orientation, arc paths and tool-specific
blocks carry no semantics and are skipped.

Input is treated as hostile: parsing goes through :mod:`defusedxml` with DTDs, entities
and external references forbidden, and the byte size, the element count and the nesting
depth are bounded before any of it reaches the engine.

Places and transitions are named by their PNML ``id``; an id that is not a valid engine
name (letters, digits, ``_``) is rewritten (``P-1`` -> ``P_1``) and the rewrite must stay
unique.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal
from xml.sax.saxutils import escape, quoteattr

from defusedxml import DefusedXmlException
from defusedxml.ElementTree import DefusedXMLParser, ParseError

from .errors import NetDefinitionError
from .net import Net, Place, Transition

__all__ = ["PnmlError", "PnmlLimits", "read_pnml", "read_pnml_ids", "write_pnml"]


class PnmlError(NetDefinitionError):
    """A PNML document that cannot be read, with the element and line at fault.

    Attributes
    ----------
    element : str or None
        Tag of the offending element (without namespace).
    line : int or None
        Line number of that element in the document (1-based).
    limit : str or None
        Name of the limit reached, when the document was too large.
    maximum, reached : int or None
        The limit's value and how far the document went (``reached`` is a lower bound
        when parsing stopped at the limit).
    """

    def __init__(
        self,
        message: str,
        *,
        element: str | None = None,
        line: int | None = None,
        limit: str | None = None,
        maximum: int | None = None,
        reached: int | None = None,
        field: str | None = "pnml",
    ) -> None:
        where = ""
        if element is not None:
            where = f"<{element}>"
            if line is not None:
                where += f" at line {line}"
            where += ": "
        super().__init__(where + message, field=field)
        self.element = element
        self.line = line
        self.limit = limit
        self.maximum = maximum
        self.reached = reached


@dataclass(frozen=True)
class PnmlLimits:
    """Bounds on a PNML document, checked while it is parsed.

    Attributes
    ----------
    max_bytes : int
        Size of the document (bytes, UTF-8).
    max_elements : int
        XML elements in the document.
    max_depth : int
        Nesting depth of elements (pages may nest).
    """

    max_bytes: int = 5_000_000
    max_elements: int = 200_000
    max_depth: int = 64


@dataclass
class _Node:
    tag: str
    attrib: dict[str, str]
    line: int
    children: list[_Node] = field(default_factory=list)
    text: str = ""
    overlong: bool = False

    def child(self, tag: str) -> _Node | None:
        for c in self.children:
            if c.tag == tag:
                return c
        return None


class _Builder:
    """Parser target building :class:`_Node` trees, with line numbers and limits."""

    def __init__(self, limits: PnmlLimits) -> None:
        self.limits = limits
        self.stack: list[_Node] = []
        self.root: _Node | None = None
        self.count = 0
        self.parser: Any = None

    def _line(self) -> int:
        return int(self.parser.parser.CurrentLineNumber) if self.parser is not None else 0

    def start(self, tag: str, attrib: dict[str, str]) -> None:
        local = tag.rsplit("}", 1)[-1]
        self.count += 1
        if self.count > self.limits.max_elements:
            raise PnmlError(
                f"the document has more than max_elements={self.limits.max_elements} elements",
                element=local,
                line=self._line(),
                limit="max_elements",
                maximum=self.limits.max_elements,
                reached=self.count,
            )
        if len(self.stack) >= self.limits.max_depth:
            raise PnmlError(
                f"elements nest deeper than max_depth={self.limits.max_depth}",
                element=local,
                line=self._line(),
                limit="max_depth",
                maximum=self.limits.max_depth,
                reached=len(self.stack) + 1,
            )
        node = _Node(local, {k.rsplit("}", 1)[-1]: v for k, v in attrib.items()}, self._line())
        if self.stack:
            self.stack[-1].children.append(node)
        else:
            self.root = node
        self.stack.append(node)

    def end(self, tag: str) -> None:
        self.stack.pop()

    def data(self, text: str) -> None:
        if self.stack:
            node = self.stack[-1]
            # Only short labels (numbers, booleans) are ever read; keep no more than that.
            if len(node.text) + len(text) <= _MAX_TEXT:
                node.text += text
            else:
                node.overlong = True

    def close(self) -> _Node | None:
        return self.root


def _parse(document: str | bytes, limits: PnmlLimits) -> _Node:
    data = document.encode("utf-8") if isinstance(document, str) else bytes(document)
    if len(data) > limits.max_bytes:
        raise PnmlError(
            f"the document is {len(data)} bytes; max_bytes={limits.max_bytes}",
            limit="max_bytes",
            maximum=limits.max_bytes,
            reached=len(data),
        )
    builder = _Builder(limits)
    parser = DefusedXMLParser(
        target=builder, forbid_dtd=True, forbid_entities=True, forbid_external=True
    )
    builder.parser = parser
    try:
        parser.feed(data)
        root = parser.close()
    except PnmlError:
        raise
    except DefusedXmlException as exc:
        raise PnmlError(
            f"forbidden XML construct ({type(exc).__name__}): DTDs, entities and external "
            "references are not accepted",
            line=builder._line() or None,
        ) from None
    except ParseError as exc:
        line = exc.position[0] if getattr(exc, "position", None) else None
        raise PnmlError(f"not well-formed XML: {exc}", line=line) from None
    if root is None:
        raise PnmlError("the document is empty")
    return root


# -- reading --------------------------------------------------------------------------

_NAME_RE = re.compile(r"[^A-Za-z0-9_]")
_MAX_TEXT = 1_000  # characters of a label's text that are ever read
_IGNORED = frozenset({"graphics", "name", "toolspecific", "orientation", "arcpath", "tagged"})
_PT_TYPES = ("", "P/T net", "http://www.pnml.org/version-2009/grammar/ptnet")


def _engine_name(pnml_id: str, node: _Node, used: dict[str, str]) -> str:
    name = _NAME_RE.sub("_", pnml_id)[:128]
    if not name or name[0].isdigit():
        name = ("n_" + name)[:128]
    if name in used and used[name] != pnml_id:
        raise PnmlError(
            f"id {pnml_id!r} and id {used[name]!r} both become the name {name!r}",
            element=node.tag,
            line=node.line,
        )
    used[name] = pnml_id
    return name


def _value_text(node: _Node) -> str:
    """The text of a label: its ``<text>`` or ``<value>`` child (ISO or GSPN dialect)."""
    for tag in ("text", "value"):
        c = node.child(tag)
        if c is not None:
            return _short(c)
    if "value" in node.attrib:
        return node.attrib["value"].strip()[:_MAX_TEXT]
    return _short(node)


def _short(node: _Node) -> str:
    if node.overlong:
        raise PnmlError(
            f"the text is longer than {_MAX_TEXT} characters", element=node.tag, line=node.line
        )
    return node.text.strip()


def _count(node: _Node, what: str) -> int:
    """A token count: ``3`` or ``Default,3`` (empty means 0)."""
    text = _value_text(node)
    if text == "":
        return 0
    parts = [p.strip() for p in text.split(",")]
    if len(parts) == 2 and parts[0] == "Default":
        text = parts[1]
    elif len(parts) != 1:
        raise PnmlError(
            f"{what} {text!r} uses coloured tokens; only the 'Default' token is supported",
            element=node.tag,
            line=node.line,
        )
    try:
        value = int(text)
    except ValueError:
        raise PnmlError(
            f"{what} {text!r} is not a non-negative integer", element=node.tag, line=node.line
        ) from None
    if value < 0 or value > 2**31 - 1:
        raise PnmlError(
            f"{what} {value} is out of range [0, 2^31 - 1]", element=node.tag, line=node.line
        )
    return value


def _number(node: _Node, what: str) -> float:
    text = _value_text(node)
    try:
        value = float(text)
    except ValueError:
        raise PnmlError(
            f"{what} {text!r} is not a number (rate expressions are not supported)",
            element=node.tag,
            line=node.line,
        ) from None
    if not math.isfinite(value) or value < 0:
        raise PnmlError(
            f"{what} {text!r} must be finite and non-negative", element=node.tag, line=node.line
        )
    return value


def _boolean(node: _Node) -> bool:
    text = _value_text(node).lower()
    if text not in ("true", "false"):
        raise PnmlError(f"expected true or false, got {text!r}", element=node.tag, line=node.line)
    return text == "true"


def _unsupported(node: _Node, where: str) -> PnmlError:
    return PnmlError(f"is not supported inside <{where}>", element=node.tag, line=node.line)


@dataclass
class _RawTransition:
    node: _Node
    name: str
    rate: float = 1.0
    weight: float | None = None
    timed: bool = True
    priority: int = 1
    infinite_server: bool = False


def _enabling_degree(inputs: Mapping[str, Any]) -> str:
    """How many times the input arcs could fire at once: ``min_p floor(#p / m_p)``."""
    terms = [f"floor(#{p} / {m})" for p, m in inputs.items() if m > 0]
    return terms[0] if len(terms) == 1 else f"min({', '.join(terms)})"


def _infinite_server_rate(t: Transition) -> float | None:
    """The base rate of a rate written as ``rate * enabling degree`` (as read), else None."""
    if not isinstance(t.rate, str) or not t.inputs:
        return None
    if not all(isinstance(m, int) and not isinstance(m, bool) for m in t.inputs.values()):
        return None
    head, sep, tail = t.rate.partition(" * ")
    if not sep or tail != _enabling_degree(t.inputs):
        return None
    try:
        return float(head)
    except ValueError:
        return None


def _read_place(node: _Node, used: dict[str, str]) -> tuple[str, Place]:
    pid = node.attrib.get("id")
    if not pid:
        raise PnmlError("a place needs an 'id' attribute", element=node.tag, line=node.line)
    tokens = 0
    for c in node.children:
        if c.tag == "initialMarking":
            tokens = _count(c, "initial marking")
        elif c.tag == "capacity":
            if _count(c, "capacity") != 0:
                raise PnmlError(
                    "place capacities are not supported (0, unbounded, is); model a bound "
                    "with an inhibitor arc",
                    element=c.tag,
                    line=c.line,
                )
        elif c.tag not in _IGNORED:
            raise _unsupported(c, "place")
    return pid, Place(_engine_name(pid, node, used), tokens)


def _read_transition(node: _Node, used: dict[str, str]) -> tuple[str, _RawTransition]:
    tid = node.attrib.get("id")
    if not tid:
        raise PnmlError("a transition needs an 'id' attribute", element=node.tag, line=node.line)
    raw = _RawTransition(node, _engine_name(tid, node, used))
    for c in node.children:
        if c.tag == "rate":
            raw.rate = _number(c, "rate")
        elif c.tag == "weight":
            raw.weight = _number(c, "weight")
        elif c.tag == "timed":
            raw.timed = _boolean(c)
        elif c.tag == "infiniteServer":
            raw.infinite_server = _boolean(c)
        elif c.tag == "priority":
            text = _value_text(c)
            try:
                raw.priority = int(text)
            except ValueError:
                raise PnmlError(
                    f"priority {text!r} is not an integer", element=c.tag, line=c.line
                ) from None
        elif c.tag not in _IGNORED:
            raise _unsupported(c, "transition")
    return tid, raw


def _collect(
    container: _Node,
    places: dict[str, tuple[_Node, Place]],
    transitions: dict[str, _RawTransition],
    arcs: list[_Node],
    used: dict[str, str],
) -> None:
    for node in container.children:
        if node.tag == "page":
            _collect(node, places, transitions, arcs, used)
        elif node.tag == "place":
            pid, place = _read_place(node, used)
            if pid in places or pid in transitions:
                raise PnmlError(f"duplicate id {pid!r}", element=node.tag, line=node.line)
            places[pid] = (node, place)
        elif node.tag == "transition":
            tid, raw = _read_transition(node, used)
            if tid in places or tid in transitions:
                raise PnmlError(f"duplicate id {tid!r}", element=node.tag, line=node.line)
            transitions[tid] = raw
        elif node.tag == "arc":
            arcs.append(node)
        elif node.tag == "token":
            if node.attrib.get("id", "Default") != "Default":
                raise PnmlError(
                    f"token colour {node.attrib.get('id')!r}: only 'Default' is supported",
                    element=node.tag,
                    line=node.line,
                )
        elif node.tag not in _IGNORED and node.tag != "labels":  # labels: PIPE's notes
            raise _unsupported(node, container.tag)


def read_pnml(document: str | bytes, *, limits: PnmlLimits | None = None) -> Net:
    """Read a net from a PNML document (see :func:`read_pnml_ids` for the ids it renamed).

    Parameters
    ----------
    document : str or bytes
        The PNML text (bytes are decoded as the XML declaration says, UTF-8 by default).
    limits : PnmlLimits, optional
        Bounds on the document's size, element count and nesting depth.

    Returns
    -------
    Net
        Timed transitions carry their ``rate`` (1/s; times the enabling degree when
        ``infiniteServer`` is true); immediate ones their ``weight`` (the ``<weight>``
        element, else ``<rate>``, as PIPE and Storm store it) and ``priority``.

    Raises
    ------
    PnmlError
        If the document is not well-formed, uses a forbidden XML construct (DTD, entity),
        exceeds a limit, or uses a PNML feature outside the supported dialects; the
        message names the element and its line.

    Examples
    --------
    >>> net = read_pnml('''<pnml><net id="n" type="http://www.pnml.org/version-2009/grammar/ptnet">
    ... <page id="g"><place id="p"><initialMarking><text>2</text></initialMarking></place>
    ... <transition id="t"/><arc id="a" source="p" target="t"/></page></net></pnml>''')
    >>> net.places[0].tokens, net.transitions[0].rate, dict(net.transitions[0].inputs)
    (2, 1.0, {'p': 1})
    """
    return read_pnml_ids(document, limits=limits)[0]


def read_pnml_ids(
    document: str | bytes, *, limits: PnmlLimits | None = None
) -> tuple[Net, dict[str, str]]:
    """Read a net from a PNML document, and the ids it had to rename.

    The engine names a place or transition by its PNML id.  An id that is not an
    identifier of the engine's expressions (letters, digits and ``_``, not starting with
    a digit; ``.`` and ``-`` are legal in a PNML id) is renamed: every other character
    becomes ``_``, and ``n_`` is put before a leading digit.

    Returns
    -------
    net : Net
        As :func:`read_pnml`.
    renamed : dict
        PNML id -> engine name, for the ids that were renamed only (empty when none was):
        what to key results by the file's own ids with, and the names that expressions
        (``#name``) use for those places.

    Examples
    --------
    >>> net, renamed = read_pnml_ids('''<pnml><net id="n" type="P/T net"><page id="g">
    ... <place id="p.Request"/><transition id="t-1"/><arc id="a" source="p.Request"
    ... target="t-1"/></page></net></pnml>''')
    >>> renamed
    {'p.Request': 'p_Request', 't-1': 't_1'}
    """
    root = _parse(document, limits or PnmlLimits())
    if root.tag != "pnml":
        raise PnmlError("the root element must be <pnml>", element=root.tag, line=root.line)
    nets = [c for c in root.children if c.tag == "net"]
    for c in root.children:
        if c.tag != "net" and c.tag not in _IGNORED:
            raise _unsupported(c, "pnml")
    if len(nets) != 1:
        raise PnmlError(
            f"expected exactly one <net>, found {len(nets)}", element=root.tag, line=root.line
        )
    net_node = nets[0]
    net_type = net_node.attrib.get("type", "")
    if net_type not in _PT_TYPES:
        raise PnmlError(
            f"net type {net_type!r} is not supported (place/transition nets and GSPNs only)",
            element=net_node.tag,
            line=net_node.line,
        )
    places: dict[str, tuple[_Node, Place]] = {}
    transitions: dict[str, _RawTransition] = {}
    arc_nodes: list[_Node] = []
    _collect(net_node, places, transitions, arc_nodes, {})
    arcs: dict[str, dict[str, dict[str, int]]] = {
        tid: {"inputs": {}, "outputs": {}, "inhibitors": {}} for tid in transitions
    }
    for node in arc_nodes:
        source, target = node.attrib.get("source", ""), node.attrib.get("target", "")
        kind = "normal"
        multiplicity = 1
        for c in node.children:
            if c.tag == "inscription":
                multiplicity = _count(c, "inscription")
            elif c.tag == "type":
                kind = (c.attrib.get("value") or _value_text(c)).strip()
            elif c.tag not in _IGNORED:
                raise _unsupported(c, "arc")
        if kind not in ("normal", "inhibitor", "inhibition"):
            raise PnmlError(
                f"arc type {kind!r} is not supported (normal or inhibitor only)",
                element=node.tag,
                line=node.line,
            )
        if source in places and target in transitions:
            label = "inputs" if kind == "normal" else "inhibitors"
            place_name, tid = places[source][1].name, target
        elif source in transitions and target in places:
            if kind != "normal":
                raise PnmlError(
                    "an inhibitor arc must go from a place to a transition",
                    element=node.tag,
                    line=node.line,
                )
            label, place_name, tid = "outputs", places[target][1].name, source
        else:
            raise PnmlError(
                f"arc from {source!r} to {target!r} must join a place and a transition "
                "defined in this net",
                element=node.tag,
                line=node.line,
            )
        table = arcs[tid][label]
        if place_name in table:
            raise PnmlError(
                f"a second {label[:-1]} arc between {source!r} and {target!r}",
                element=node.tag,
                line=node.line,
            )
        table[place_name] = multiplicity
    built = []
    for tid, raw in transitions.items():
        a = arcs[tid]
        if raw.timed:
            rate: float | str = raw.rate
            if raw.infinite_server:
                if not any(m > 0 for m in a["inputs"].values()):
                    raise PnmlError(
                        "an infinite-server transition needs an input arc",
                        element=raw.node.tag,
                        line=raw.node.line,
                    )
                rate = f"{raw.rate!r} * {_enabling_degree(a['inputs'])}"
            built.append(Transition(raw.name, "timed", rate=rate, **a))  # type: ignore[arg-type]
        else:
            weight = raw.weight if raw.weight is not None else raw.rate
            built.append(
                Transition(
                    raw.name,
                    "immediate",
                    weight=weight,
                    priority=raw.priority,
                    **a,  # type: ignore[arg-type]
                )
            )
    renamed = {pid: node_place.name for pid, (_, node_place) in places.items()}
    renamed |= {tid: raw.name for tid, raw in transitions.items()}
    renamed = {pnml_id: name for pnml_id, name in renamed.items() if pnml_id != name}
    try:
        return Net([p for _, p in places.values()], built), renamed
    except PnmlError:
        raise
    except NetDefinitionError as exc:
        raise PnmlError(str(exc), element=net_node.tag, line=net_node.line) from None


# -- writing --------------------------------------------------------------------------


def _constant(value: Any, parameters: Mapping[str, float], where: str) -> float:
    if isinstance(value, bool):
        raise NetDefinitionError("expected a number", field=where)
    if isinstance(value, int | float):
        return float(value)
    if isinstance(value, str) and value.strip() in parameters:
        return float(parameters[value.strip()])
    try:
        return float(value)
    except (TypeError, ValueError):
        raise NetDefinitionError(
            f"{value!r} is an expression; PNML holds only numbers (or a bare parameter name, "
            "written as its value)",
            field=where,
        ) from None


def _number_text(x: float) -> str:
    return str(int(x)) if x == int(x) and abs(x) < 2**53 else repr(x)


def write_pnml(
    net: Net | Mapping[str, Any],
    *,
    net_id: str = "net",
    dialect: Literal["pipe", "storm"] = "pipe",
) -> str:
    """Write a net as PNML in the GSPN dialect read by PIPE and Storm.

    Parameters
    ----------
    net : Net or dict
        The net, or its JSON form (see :meth:`Net.to_dict`).
    net_id : str
        The ``id`` of the ``<net>`` element.
    dialect : {"pipe", "storm"}
        Spelling of inhibitor arcs: ``inhibitor`` (PIPE) or ``inhibition`` (Storm).

    Returns
    -------
    str
        The document (UTF-8 text with an XML declaration).

    Raises
    ------
    NetDefinitionError
        If the net uses what PNML cannot hold: a name shared by a place and a transition
        (PNML ids are unique across both), a guard, a rate, weight or multiplicity
        that is an expression (a bare parameter name is written as its value, and a rate
        of the form ``r * floor(#p / m)`` that :func:`read_pnml` makes of an
        infinite-server transition is written back as one).  The error's ``field`` names
        the item.
    """
    if not isinstance(net, Net):
        net = Net.from_dict(net)
    inhibitor = {"pipe": "inhibitor", "storm": "inhibition"}[dialect]
    # PNML has one id space for places and transitions (read_pnml refuses a document
    # that repeats an id), while a Net keeps them apart: a shared name cannot be written.
    places = {p.name for p in net.places}
    for t in net.transitions:
        if t.name in places:
            raise NetDefinitionError(
                f"{t.name!r} names both a place and a transition; PNML ids must be unique "
                "across places and transitions",
                field=f"transitions.{t.name}",
            )
    params = dict(net.parameters)
    out = [
        '<?xml version="1.0" encoding="UTF-8"?>',
        "<pnml>",
        f'  <net id={quoteattr(net_id)} type="P/T net">',
        '    <token id="Default" enabled="true" red="0" green="0" blue="0"/>',
    ]
    for p in net.places:
        out += [
            f"    <place id={quoteattr(p.name)}>",
            f"      <name><value>{escape(p.name)}</value></name>",
            f"      <initialMarking><value>Default,{p.tokens}</value></initialMarking>",
            "      <capacity><value>0</value></capacity>",
            "    </place>",
        ]
    arcs = []
    for t in net.transitions:
        where = f"transitions.{t.name}"
        if t.guard is not None:
            raise NetDefinitionError("PNML has no guards", field=f"{where}.guard")
        base = _infinite_server_rate(t) if t.kind == "timed" else None
        infinite = base is not None
        if base is not None:
            value = base
        elif t.kind == "timed":
            value = _constant(t.rate, params, f"{where}.rate")
        else:
            value = _constant(t.weight, params, f"{where}.weight")
        priority = t.priority if t.kind == "immediate" else 1
        out += [
            f"    <transition id={quoteattr(t.name)}>",
            f"      <name><value>{escape(t.name)}</value></name>",
            f"      <rate><value>{_number_text(value)}</value></rate>",
            f"      <timed><value>{'true' if t.kind == 'timed' else 'false'}</value></timed>",
            f"      <infiniteServer><value>{'true' if infinite else 'false'}</value>"
            "</infiniteServer>",
            f"      <priority><value>{priority}</value></priority>",
            "    </transition>",
        ]
        for label, kind in (("inputs", "normal"), ("inhibitors", inhibitor), ("outputs", "normal")):
            for place, mult in getattr(t, label).items():
                m = _constant(mult, params, f"{where}.{label}.{place}")
                if m != int(m) or m < 0:
                    raise NetDefinitionError(
                        "multiplicity must be a non-negative integer",
                        field=f"{where}.{label}.{place}",
                    )
                if m == 0:
                    continue
                source, target = (t.name, place) if label == "outputs" else (place, t.name)
                arc_id = f"{source} to {target}" + (" (inhibitor)" if label == "inhibitors" else "")
                arcs += [
                    f"    <arc id={quoteattr(arc_id)} source={quoteattr(source)} "
                    f"target={quoteattr(target)}>",
                    f"      <inscription><value>Default,{int(m)}</value></inscription>",
                    f'      <type value="{kind}"/>',
                    "    </arc>",
                ]
    out += arcs
    out += ["  </net>", "</pnml>", ""]
    return "\n".join(out)
