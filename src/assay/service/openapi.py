"""The OpenAPI document, with `assertion` shown as what it is: a union discriminated by `assert`.

The request models keep `assertion: dict` and the service validates it with `parse_assertion`
(so an unknown `assert` stays today's precise 422, keyed `assertion.assert`, and an assertion
stored before a schema change still reads back). Only the published schema changes: each
`assertion` property becomes `oneOf` the registered assertion models (`ASSERTION_MODELS`, so a new
type joins by itself) with a `discriminator` on `assert`, and the models land in
`components.schemas`, where `/docs` renders their fields and docstrings.
"""

from __future__ import annotations

from typing import Any

from fastapi import FastAPI
from fastapi.openapi.utils import get_openapi

from assay.core.assertions.schema import assertion_schema
from assay.sandboxes import SURFACES

__all__ = ["ASSERTION_SCHEMAS", "install_openapi"]

ASSERTION_SCHEMAS = ("CriterionCreate", "CriterionPatch", "CriterionOut")
"""The component schemas whose `assertion` property is the union."""

_REF = "#/components/schemas/{model}"


def _assertion_union() -> tuple[dict[str, Any], dict[str, Any]]:
    """(the union schema, the component schemas it refers to)."""
    return assertion_schema(_REF)


def _with_union(document: dict[str, Any]) -> dict[str, Any]:
    union, definitions = _assertion_union()
    schemas = document.setdefault("components", {}).setdefault("schemas", {})
    for name, definition in definitions.items():
        schemas.setdefault(name, definition)
    for name in ASSERTION_SCHEMAS:
        properties = schemas.get(name, {}).get("properties", {})
        if "assertion" not in properties:
            continue
        nullable = name == "CriterionPatch"
        properties["assertion"] = {"anyOf": [union, {"type": "null"}]} if nullable else dict(union)
    return document


def install_openapi(app: FastAPI) -> None:
    """Serve the amended document at `/openapi.json` (built once, on first request)."""

    def openapi() -> dict[str, Any]:
        if app.openapi_schema is None:
            document = get_openapi(
                title=app.title,
                version=app.version,
                summary=app.summary,
                description=app.description,
                routes=app.routes,
            )
            schemas = document.setdefault("components", {}).setdefault("schemas", {})
            for surface in SURFACES.values():  # what the surfaces' answers refer to
                schemas.update(surface.openapi_schemas)
            app.openapi_schema = _with_union(document)
        return app.openapi_schema

    app.openapi = openapi  # type: ignore[method-assign]
