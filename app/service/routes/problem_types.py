"""Documentation of the problem types, at the URIs their ``type`` member names."""

from __future__ import annotations

from fastapi import APIRouter
from fastapi.responses import JSONResponse

from app.schemas.bodies import ProblemTypeModel
from app.schemas.problems import PROBLEM_TYPES, ProblemError

from .common import problem_responses

router = APIRouter(tags=["problems"])


@router.get(
    "/problems/{slug}",
    operation_id="get_problem_type",
    summary="What a problem type means",
    response_model=ProblemTypeModel,
    responses=problem_responses(404),
)
async def get_problem_type(slug: str) -> JSONResponse:
    """The status, title and meaning of the problem type `/problems/{slug}`."""
    kind = PROBLEM_TYPES.get(slug)
    if kind is None:
        raise ProblemError(
            "not-found",
            f"no problem type {slug[:64]!r}; known: {', '.join(sorted(PROBLEM_TYPES))}",
        )
    return JSONResponse(
        {
            "type": f"/problems/{kind.slug}",
            "slug": kind.slug,
            "status": kind.status,
            "title": kind.title,
            "description": kind.description,
        }
    )
