"""The endpoints every catalog collection has in the same shape: list, get by id, delete by id.

Each `add_*_route` registers one endpoint on `router` with the name, summary and OpenAPI operation
id a hand-written handler of that name would have (`get_environment`), and `routes.py` calls them in
the order of its sections, so the API reads the same as before. Create and patch stay hand-written:
their bodies and rules differ per collection.
"""

# No `from __future__ import annotations` here: FastAPI reads these handlers' annotations at run
# time, and the name of the path parameter (`{environment_id}`) is only known when a route is added
# (which is also why mypy, which sees `Ident` as a variable, is told to accept it as a type).

from collections.abc import Callable
from typing import Annotated, Any

from fastapi import APIRouter, Response
from fastapi import Path as PathParam

from assay.service.catalog import actions
from assay.service.deps import OrgCaller, PageDep, SessionDep
from assay.service.pages import list_json
from assay.store import Caller

__all__ = ["add_delete_route", "add_get_route", "add_list_route"]

Json = dict[str, Any]
Serializer = Callable[[Any], Json]


def _collection(path: str) -> str:
    """`/environments/{environment_id}` → `environments`: the collection is also the OpenAPI tag."""
    return path.strip("/").split("/")[0]


def _noun(path: str) -> str:
    """`/environments/{environment_id}` → `environment`: what one row of the collection is called."""
    return path.rsplit("{", 1)[1].removesuffix("_id}")


def _id_parameter(path: str) -> Any:
    """The path's trailing `{…_id}` as a string parameter of that name, whatever the handler calls it."""
    name = path.rsplit("{", 1)[1].rstrip("}")
    return Annotated[str, PathParam(alias=name, title=name.replace("_", " ").title())]


def add_list_route(router: APIRouter, path: str, model: type[Any], to_json: Serializer) -> None:
    """`GET /<collection>`: the caller's rows, newest first (pagination in docs/api.md)."""

    def list_rows(session: SessionDep, caller: OrgCaller, page: PageDep) -> Json:
        return list_json(session, actions.rows_listed(model, caller), model, page, to_json)

    tag = _collection(path)
    router.get(path, tags=[tag], name=f"list_{tag}")(list_rows)


def add_get_route(
    router: APIRouter, path: str, model: type[Any], to_json: Serializer, **options: Any
) -> None:
    """`GET /<collection>/{id}`: one of the caller's rows; another org's id is a 404."""
    Ident = _id_parameter(path)

    def get_row(ident: Ident, session: SessionDep, caller: OrgCaller) -> Json:  # type: ignore[valid-type]
        return to_json(actions.get_row(session, model, caller, ident))

    router.get(path, tags=[_collection(path)], name=f"get_{_noun(path)}", **options)(get_row)


def add_delete_route(
    router: APIRouter, path: str, delete: Callable[[Any, Caller, str], None], **options: Any
) -> None:
    """`DELETE /<collection>/{id}` → 204, through the collection's `actions.delete_*` (which owns
    the 409 reference rules); the route takes the action's name."""
    Ident = _id_parameter(path)

    def delete_row(ident: Ident, session: SessionDep, caller: OrgCaller) -> Response:  # type: ignore[valid-type]
        delete(session, caller, ident)
        return Response(status_code=204)

    name = delete.__name__
    router.delete(path, status_code=204, tags=[_collection(path)], name=name, **options)(delete_row)
