"""JSON Patch (RFC 6902) and FHIRPath Patch bodies applied to a resource, with a precise 422 naming
the operation that failed."""

from __future__ import annotations

import copy
import re
from collections.abc import Mapping
from typing import Any

import jsonpatch  # type: ignore[import-untyped]
import jsonpointer  # type: ignore[import-untyped]

from assay.sandboxes.fhir.fhirpath_patch import apply_fhirpath_patch, is_fhirpath_patch
from assay.sandboxes.fhir.outcomes import FhirError
from assay.sandboxes.fhir.validation import repeats

__all__ = ["apply_json_patch", "apply_patch"]


def apply_json_patch(operations: Any, resource: dict[str, Any], label: str = "") -> dict[str, Any]:
    """`resource` with RFC 6902 `operations` applied (a copy): 400 when they are not a JSON Patch,
    422 when one cannot be applied. Shared by PATCH and transaction/batch PATCH entries.

    Operations run one at a time so a failure names its index, op and path. The reason is our own
    sentence, not jsonpatch's: its messages hold the whole document ("{document} is not equal to
    tested value", "member 'a' not found in {document}"), which a diagnostics line must not echo.
    """
    where = f"{label}: " if label else ""
    if not isinstance(operations, list):
        raise FhirError(400, f"{where}a JSON Patch body must be a JSON array of operations")
    steps = []
    for index, operation in enumerate(operations):
        try:
            steps.append(jsonpatch.JsonPatch([operation]))
        except (jsonpatch.InvalidJsonPatch, jsonpointer.JsonPointerException, TypeError) as exc:
            raise FhirError(400, f"{where}invalid JSON Patch: operation {index}: {_clip(str(exc))}") from None
    patched = copy.deepcopy(resource)
    for index, (operation, step) in enumerate(zip(operations, steps, strict=True)):
        try:
            patched = step.apply(patched, in_place=True, atomic=True)
        except (jsonpatch.InvalidJsonPatch, TypeError) as exc:
            raise FhirError(400, f"{where}invalid JSON Patch: operation {index}: {_clip(str(exc))}") from None
        except (jsonpatch.JsonPatchException, jsonpointer.JsonPointerException) as exc:
            reason = _patch_failure(operation, patched, exc)
            raise FhirError(
                422,
                f"{where}JSON Patch operation {index} ({_describe(operation)}) cannot be applied: {reason}",
            ) from None
    return patched


_MAX_ECHO = 100
"""Characters of client-sent text (an op, a path) a diagnostics line repeats."""


_MISSING = object()


def _clip(text: str) -> str:
    return text if len(text) <= _MAX_ECHO else text[:_MAX_ECHO] + "…"


def _describe(operation: Mapping[str, Any]) -> str:
    """`replace '/active'`, or `move '/a' to '/b'` for the ops that take `from`."""
    op, path = operation.get("op"), _clip(repr(operation.get("path")))
    if op in ("move", "copy"):
        return f"{op} {_clip(repr(operation.get('from')))} to {path}"
    return f"{op} {path}"


def _resolves(document: Any, pointer: Any) -> bool:
    try:
        return jsonpointer.JsonPointer(pointer).resolve(document, _MISSING) is not _MISSING
    except (jsonpointer.JsonPointerException, TypeError, AttributeError):
        return False


def _patch_failure(operation: Mapping[str, Any], document: Any, exc: Exception) -> str:
    """Why `operation` could not be applied to `document`, without quoting `document`."""
    op, path = operation.get("op"), operation.get("path")
    if isinstance(exc, jsonpatch.JsonPatchTestFailed) and _resolves(document, path):
        return f"the value at {_clip(repr(path))} is not the tested value"
    needed = [operation.get("from")] if op in ("move", "copy") else []
    needed.append(str(path).rpartition("/")[0] if op in ("add", "move", "copy") else path)
    for pointer in needed:
        if not _resolves(document, pointer):
            return f"{_clip(repr(pointer))} does not exist in the resource"
    return _clip(str(exc))  # the rest ("can't insert outside of list", …) quote no document


def apply_patch(operations: Any, resource: dict[str, Any], label: str = "") -> dict[str, Any]:
    """A JSON Patch (a list) or a FHIRPath Patch (a Parameters resource) applied to a copy."""
    if is_fhirpath_patch(operations):
        kind = str(resource.get("resourceType"))

        def is_list(_: dict[str, Any], path: str, name: str) -> bool:
            names = [step for step in re.findall(r"\.([A-Za-z]\w*)(?!\()", path[len(kind) :])]
            return repeats(kind, [*names, name])

        try:
            return apply_fhirpath_patch(operations, resource, is_list)
        except FhirError as error:
            if label:
                raise FhirError(error.status, f"{label}: {error.diagnostics}") from None
            raise
    return apply_json_patch(operations, resource, label)
