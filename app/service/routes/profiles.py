"""Host profiles: the built-in ones (read-only) and those stored in the profile database.

Every computation that names a profile resolves it to its values before anything is
cached, so replacing a stored profile can never serve an answer computed from its old
values (the cache is keyed on the values, and ``GET /bottleneck-rate`` files only
built-in profiles in its raw-query index).
"""

from __future__ import annotations

from typing import Any

import anyio.to_thread
from fastapi import APIRouter, Depends, Request
from fastapi.responses import JSONResponse
from starlette.responses import Response

from app.schemas.bodies import ProfileBody, ProfileList, StoredProfileModel
from app.schemas.problems import FieldProblem, ProblemError, translated_errors
from app.service.state import service
from app.service.stored_profiles import profile_store
from host import DEFAULT_PROFILE, HOST_PROFILES, HostProfile, WorkloadError
from host.store import StoredProfile

from .access import require_token
from .common import problem_responses

router = APIRouter()

_NAME_FIELDS = {"name": "path.name", "provenance": "body.provenance"}


def _entry_dict(entry: StoredProfile) -> dict[str, Any]:
    out: dict[str, Any] = {**entry.profile.to_dict(), "built_in": entry.built_in}
    if entry.provenance is not None:
        out["provenance"] = entry.provenance
    if entry.updated_at is not None:
        out["updated_at"] = entry.updated_at.isoformat()
    return out


def _not_found(name: str, known: list[str]) -> ProblemError:
    return ProblemError(
        "not-found",
        f"no host profile {name[:64]!r}; known: {', '.join(known[:20])}",
        [FieldProblem("path.name", "unknown profile")],
    )


def _read_only(name: str, verb: str) -> ProblemError:
    return ProblemError(
        "profile-read-only",
        f"{name!r} is a built-in profile and cannot be {verb}; use another name",
        [FieldProblem("path.name", "built-in profile")],
    )


@router.get(
    "/profiles",
    operation_id="list_profiles",
    summary="The named host profiles",
    tags=["profiles"],
    response_model=ProfileList,
    response_model_exclude_none=True,
    responses=problem_responses(503),
)
async def list_profiles(request: Request) -> JSONResponse:
    """Every host profile, in SI units: the built-in ones, then the stored ones (with
    their provenance), and the default's name."""
    store = profile_store(service(request))

    def read() -> tuple[str, list[Any]]:
        return store.default_name() or DEFAULT_PROFILE, store.entries()

    default, entries = await anyio.to_thread.run_sync(read)
    return JSONResponse({"default": default, "profiles": [_entry_dict(e) for e in entries]})


@router.get(
    "/profiles/{name}",
    operation_id="get_profile",
    summary="One host profile",
    tags=["profiles"],
    response_model=StoredProfileModel,
    response_model_exclude_none=True,
    responses=problem_responses(404, 503),
)
async def get_profile(name: str, request: Request) -> JSONResponse:
    """The host profile called `name`: service rates (1/s), NIC buffer and coalescing
    (packets), line rate (bit/s) and packet payload (bytes), and for a stored profile
    its provenance."""
    store = profile_store(service(request))
    try:
        entry = await anyio.to_thread.run_sync(store.entry, name)
    except WorkloadError:
        names = [p.name for p in await anyio.to_thread.run_sync(store.list)]
        raise _not_found(name, names) from None
    return JSONResponse(_entry_dict(entry))


@router.put(
    "/profiles/{name}",
    operation_id="put_profile",
    summary="Store a host profile",
    tags=["profiles"],
    response_model=StoredProfileModel,
    response_model_exclude_none=True,
    status_code=200,
    dependencies=[Depends(require_token)],
    responses={
        201: {"description": "Created", "model": StoredProfileModel},
        **problem_responses(400, 401, 409, 415, 422, 503),
    },
)
async def put_profile(name: str, body: ProfileBody, request: Request) -> JSONResponse:
    """Store the profile `name` (every field, SI units): 201 when new, 200 when it
    replaced a stored one.  Built-in names are refused (409).  Answers computed with the
    old values are never served for the new ones."""
    if name in HOST_PROFILES:
        raise _read_only(name, "replaced")
    if body.name is not None and body.name != name:
        raise ProblemError(
            "invalid-parameter",
            f"body.name {body.name[:64]!r} differs from the name in the path {name[:64]!r}",
            [FieldProblem("body.name", "must equal the path's name")],
        )
    values = body.model_dump(exclude={"name", "provenance"})
    store = profile_store(service(request))
    with translated_errors({**_NAME_FIELDS, **{f: f"body.{f}" for f in values}}):
        profile = HostProfile(name=name, **values)
        # The reply is what this request stored, even if another one changed it since.
        entry, created = await anyio.to_thread.run_sync(
            lambda: store.put_entry(profile, provenance=body.provenance)
        )
    headers = {"Location": f"/profiles/{name}"} if created else {}
    return JSONResponse(_entry_dict(entry), status_code=201 if created else 200, headers=headers)


@router.delete(
    "/profiles/{name}",
    operation_id="delete_profile",
    summary="Delete a stored host profile",
    tags=["profiles"],
    status_code=204,
    response_class=Response,
    dependencies=[Depends(require_token)],
    responses=problem_responses(401, 404, 409, 503),
)
async def delete_profile(name: str, request: Request) -> Response:
    """Remove the stored profile `name` (204).  Built-in profiles cannot be deleted
    (409); an unknown name is 404."""
    if name in HOST_PROFILES:
        raise _read_only(name, "deleted")
    store = profile_store(service(request))
    if not await anyio.to_thread.run_sync(store.delete, name):
        names = [p.name for p in await anyio.to_thread.run_sync(store.list)]
        raise _not_found(name, names)
    return Response(status_code=204)
