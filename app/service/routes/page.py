"""The web page at ``/``: a form, the answer, the plots, a what-if table and a sweep view.

Plain HTML, CSS and JavaScript shipped in the package (``app/service/static``), no build step and
no CDN: the page talks to the same endpoints as every other client.  Its address carries
its inputs (``/?cpu_tasks=2&io_tasks=1&file_size=500MB&propagation_delay=100ms``), so a
result can be shared as a link.
"""

from __future__ import annotations

from importlib import resources

from fastapi import APIRouter
from starlette.responses import Response

from app.schemas.problems import FieldProblem, ProblemError

router = APIRouter(include_in_schema=False)

# The only files served: a fixed table, so no path from the request reaches the disk.
_ASSETS = {
    "app.js": "text/javascript; charset=utf-8",
    "style.css": "text/css; charset=utf-8",
    "favicon.svg": "image/svg+xml",
}


def _asset(name: str) -> bytes:
    return resources.files("app.service").joinpath("static", name).read_bytes()


@router.get("/")
async def page() -> Response:
    """The planner's page."""
    return Response(
        _asset("index.html"),
        media_type="text/html; charset=utf-8",
        headers={"Cache-Control": "no-cache"},
    )


@router.get("/static/{name}")
async def asset(name: str) -> Response:
    """A file of the page."""
    media_type = _ASSETS.get(name)
    if media_type is None:
        raise ProblemError(
            "not-found", f"no static file {name[:64]!r}", [FieldProblem("path.name", "unknown")]
        )
    return Response(_asset(name), media_type=media_type, headers={"Cache-Control": "no-cache"})
