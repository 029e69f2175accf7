"""`_summary` and `_elements` (R4 search.html §3.1.1.5.8–9): subsets of each returned resource.

- `_summary=true`: the elements R4 marks "summary" (`isSummary`), as the fhir.resources R4B models
  flag them (`summary_element_property`); `text`: `text`, `id`, `meta` and the top-level mandatory
  elements; `data`: everything but `text`; `count`: no entries (the search layer); `false`: all.
- `_elements=a,b`: those top-level elements (a choice element by its name without the type,
  `value` for `valueQuantity`), plus `resourceType`, `id` and `meta` (HAPI's rule too).

A subsetted resource carries the `SUBSETTED` tag in `meta.tag` (R4: "the server SHALL mark the
resource with the tag SUBSETTED"), so no client stores it back as if it were whole; the stored
resource is never changed (a copy is made).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from functools import cache
from typing import Any

from assay.sandboxes.fhir.outcomes import FhirError

__all__ = ["SUBSETTED", "Subset", "parse_subset"]

SUBSETTED = {"system": "http://terminology.hl7.org/CodeSystem/v3-ObservationValue", "code": "SUBSETTED"}
_ALWAYS = ("resourceType", "id", "meta")
_SUMMARIES = ("true", "text", "data", "count", "false")


@dataclass(frozen=True, slots=True)
class Subset:
    """What `_summary` / `_elements` ask of each resource."""

    summary: str | None = None
    elements: frozenset[str] | None = None

    @property
    def count_only(self) -> bool:
        return self.summary == "count"

    def apply(self, resource: dict[str, Any]) -> dict[str, Any]:
        """A copy of `resource` cut to the subset and tagged SUBSETTED, or `resource` unchanged."""
        kind = str(resource.get("resourceType"))
        if self.elements is not None:
            keep = lambda key: key in _ALWAYS or _base_name(key) in self.elements  # noqa: E731
        elif self.summary == "true":
            names = _summary_elements(kind)
            keep = lambda key: key in _ALWAYS or key in names  # noqa: E731
        elif self.summary == "text":
            names = _mandatory_elements(kind)
            keep = lambda key: key in _ALWAYS or key == "text" or key in names  # noqa: E731
        elif self.summary == "data":
            keep = lambda key: key != "text"  # noqa: E731
        else:
            return resource
        subset = {key: value for key, value in resource.items() if keep(key)}
        meta = dict(subset.get("meta") or {})
        tags = [t for t in meta.get("tag") or [] if t != SUBSETTED]
        meta["tag"] = [*tags, SUBSETTED]
        subset["meta"] = meta
        return subset


def _base_name(key: str) -> str:
    """`valueQuantity` → `value` (a choice element's name), other keys unchanged."""
    for index in range(1, len(key)):
        if key[index].isupper() and key[:index] in _CHOICE_NAMES:
            return key[:index]
    return key


_CHOICE_NAMES = frozenset(
    {"value", "effective", "onset", "abatement", "deceased", "multipleBirth", "occurrence", "medication",
     "performed", "timing", "serviced", "product", "born", "age", "reported", "asNeeded", "item", "subject",
     "defaultValue", "fixed", "pattern", "minValue", "maxValue", "answer", "allowed", "used", "content"}
)  # fmt: skip


@cache
def _fields(kind: str) -> list[tuple[str, dict[str, Any], bool]]:
    from fhir.resources.R4B import get_fhir_model_class

    try:
        model = get_fhir_model_class(kind)
    except (KeyError, ValueError, AttributeError):  # R4 types R4B dropped
        return []
    return [
        (field.alias or name, dict(field.json_schema_extra or {}), field.is_required())  # type: ignore[arg-type]
        for name, field in model.model_fields.items()
    ]


@cache
def _summary_elements(kind: str) -> frozenset[str]:
    return frozenset(name for name, extra, _ in _fields(kind) if extra.get("summary_element_property"))


@cache
def _mandatory_elements(kind: str) -> frozenset[str]:
    return frozenset(
        name for name, extra, required in _fields(kind) if extra.get("element_required") or required
    )


def parse_subset(pairs: Sequence[tuple[str, str]]) -> Subset:
    """`_summary` and `_elements` of a request; 400 for an unknown `_summary` value or both at once."""
    summary: str | None = None
    elements: set[str] | None = None
    for name, value in pairs:
        if name == "_summary":
            if value not in _SUMMARIES:
                raise FhirError(400, f"_summary takes {', '.join(_SUMMARIES)}, not {value!r}")
            summary = None if value == "false" else value
        elif name == "_elements":
            elements = (elements or set()) | {v.strip() for v in value.split(",") if v.strip()}
    if summary is not None and summary != "count" and elements is not None:
        raise FhirError(400, "_summary and _elements cannot be combined")
    return Subset(summary, frozenset(elements) if elements is not None else None)
