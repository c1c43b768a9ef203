"""PNML in requests: turn the ``pnml`` field of an SRN request into the engine's JSON net.

The document is parsed by :func:`srn.read_pnml` (defusedxml, no DTD or entities, bounded
bytes, elements and depth); every refusal becomes a problem naming ``body.pnml``, the
element and its line, and the limit when one was reached.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import srn
from app.schemas.problems import FieldProblem, ProblemError

__all__ = ["net_from_pnml", "with_file_ids", "with_net"]

# The library's limit names -> the service's (settings, or a fixed ceiling of the API).
_SETTING_OF = {
    "max_bytes": "max_body_bytes",
    "max_elements": "max_pnml_elements",
    "max_depth": "max_pnml_depth",
}


def net_from_pnml(
    document: str | bytes, limits: srn.PnmlLimits, field: str = "body.pnml"
) -> tuple[dict[str, Any], dict[str, str]]:
    """The JSON net (see :meth:`srn.Net.to_dict`) of a PNML document, and the ids that
    are not identifiers, each with the engine name it was given
    (:func:`srn.read_pnml_ids`).

    Raises
    ------
    ProblemError
        ``limit-exceeded`` naming the limit, or ``invalid-model`` naming the element and
        line, always for ``field``.
    """
    try:
        net, renamed = srn.read_pnml_ids(document, limits=limits)
        return net.to_dict(), renamed
    except srn.PnmlError as exc:
        if exc.limit is not None:
            name = _SETTING_OF.get(exc.limit, exc.limit)
            reason = str(exc).replace(f"{exc.limit}=", f"{name}=")
            raise ProblemError(
                "limit-exceeded",
                reason,
                [FieldProblem(field, reason, name, exc.maximum, exc.reached)],
            ) from None
        raise ProblemError("invalid-model", str(exc), [FieldProblem(field, str(exc))]) from None


def with_net(
    request: Mapping[str, Any], limits: srn.PnmlLimits
) -> tuple[Mapping[str, Any], dict[str, str]]:
    """The request with ``net`` filled in from ``pnml`` when the net came as PNML, and
    the PNML ids that were renamed (id -> engine name; empty for a JSON net)."""
    document = request.get("pnml")
    if document is None:
        return request, {}
    net, renamed = net_from_pnml(document, limits)
    return {**request, "net": net, "pnml": None}, renamed


def with_file_ids(result: dict[str, Any], renamed: Mapping[str, str]) -> dict[str, Any]:
    """A solve's answer keyed by the PNML file's own ids: ``mean_tokens``,
    ``throughput`` and the distribution's ``place_names`` use each renamed id again, and
    ``renamed`` (id -> the name its expressions use) says which ones were renamed."""
    if not renamed:
        return result
    back = {name: pnml_id for pnml_id, name in renamed.items()}
    for part in ("steady_state", "transient"):
        section = result.get(part)
        measures = section.get("measures") if isinstance(section, dict) else None
        if not isinstance(measures, dict):
            continue
        for key in ("mean_tokens", "throughput"):
            table = measures.get(key)
            if isinstance(table, dict):
                measures[key] = {back.get(k, k): v for k, v in table.items()}
    distribution = result.get("distribution")
    if isinstance(distribution, dict) and "place_names" in distribution:
        distribution["place_names"] = [back.get(n, n) for n in distribution["place_names"]]
    result["renamed"] = dict(renamed)
    return result
