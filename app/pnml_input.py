"""PNML in requests: turn the ``pnml`` field of an SRN request into the engine's JSON net.

The document is parsed by :func:`srn.read_pnml` (defusedxml, no DTD or entities, bounded
bytes, elements and depth); every refusal becomes a problem naming ``body.pnml``, the
element and its line, and the limit when one was reached.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import srn

from .problems import FieldProblem, ProblemError

__all__ = ["net_from_pnml", "with_net"]

# The library's limit names -> the service's (settings, or a fixed ceiling of the API).
_SETTING_OF = {
    "max_bytes": "max_body_bytes",
    "max_elements": "max_pnml_elements",
    "max_depth": "max_pnml_depth",
}


def net_from_pnml(
    document: str | bytes, limits: srn.PnmlLimits, field: str = "body.pnml"
) -> dict[str, Any]:
    """The JSON net (see :meth:`srn.Net.to_dict`) of a PNML document.

    Raises
    ------
    ProblemError
        ``limit-exceeded`` naming the limit, or ``invalid-model`` naming the element and
        line, always for ``field``.
    """
    try:
        return srn.read_pnml(document, limits=limits).to_dict()
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


def with_net(request: Mapping[str, Any], limits: srn.PnmlLimits) -> Mapping[str, Any]:
    """The request with ``net`` filled in from ``pnml`` when the net came as PNML."""
    document = request.get("pnml")
    if document is None:
        return request
    return {**request, "net": net_from_pnml(document, limits), "pnml": None}
