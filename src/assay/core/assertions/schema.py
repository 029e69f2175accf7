"""The JSON Schema of an assertion: a union of the registered models, discriminated by `assert`.

One builder for every place that publishes it (the OpenAPI document, the MCP tools' input
schemas), so they show the same shapes, and each model carries its worked examples
(`examples.py`, the ones `docs/assertions.md` shows and the tests run).
"""

from __future__ import annotations

from typing import Any

from pydantic.json_schema import models_json_schema

from assay.core.assertions import ASSERTION_MODELS
from assay.core.assertions.examples import EXAMPLES

__all__ = ["assertion_schema"]

DESCRIPTION = "Typed assertion spec: one of the shapes below, chosen by `assert` (docs/assertions.md)."


def assertion_schema(ref_template: str) -> tuple[dict[str, Any], dict[str, Any]]:
    """(the union schema, the definitions it refers to through `ref_template`, by model name)."""
    models = list(ASSERTION_MODELS.values())
    _, top = models_json_schema([(model, "validation") for model in models], ref_template=ref_template)
    definitions: dict[str, Any] = top.get("$defs", {})
    for tag, model in ASSERTION_MODELS.items():
        definitions[model.__name__]["examples"] = [dict(example) for example in EXAMPLES.get(tag, ())]
    mapping = {tag: ref_template.format(model=model.__name__) for tag, model in ASSERTION_MODELS.items()}
    union = {
        "oneOf": [{"$ref": ref} for ref in mapping.values()],
        "discriminator": {"propertyName": "assert", "mapping": mapping},
        "description": DESCRIPTION,
    }
    return union, definitions
