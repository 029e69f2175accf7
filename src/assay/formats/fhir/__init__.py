"""FHIR R4: search-parameter table, search engine over in-memory resources, bundles.

PLACEHOLDER until the FHIR search work lands: `FhirStore` keeps resources and answers searches
with no parameters only.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

__all__ = ["FhirStore", "InvalidSearch", "UnknownSearchParameter"]


class InvalidSearch(ValueError):
    pass


class UnknownSearchParameter(InvalidSearch):
    pass


class FhirStore:
    def __init__(self, resources: Iterable[dict[str, Any]]):
        self.by_type: dict[str, list[dict[str, Any]]] = {}
        for resource in resources:
            self.by_type.setdefault(resource["resourceType"], []).append(resource)

    def search(self, resource_type: str, params: Mapping[str, Any]) -> list[dict[str, Any]]:
        for name in params:
            raise UnknownSearchParameter(f"unknown search parameter {name}")
        return list(self.by_type.get(resource_type, []))
