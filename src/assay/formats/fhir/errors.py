"""Errors of the FHIR search engine.

Tree::

    ValueError
    ├── InvalidSearch              a search that cannot run: bad value, bad prefix, bad `_count`
    │   └── UnknownSearchParameter an unknown, composite, chained or `_has` parameter, or a
    │                              modifier this engine does not implement (docs/assertions.md: unsupported)
    └── FhirPathError              a FHIRPath expression that does not compile or fails to evaluate

fhirpathpy raises bare `Exception`s (and ANTLR recovers silently from syntax errors); they are
translated to `FhirPathError` once, in `fhirpath.py`.
"""

from __future__ import annotations

__all__ = ["FhirPathError", "InvalidSearch", "UnknownSearchParameter"]


class InvalidSearch(ValueError):
    """A search that cannot run; the message names the parameter and the bad value."""


class UnknownSearchParameter(InvalidSearch):
    """A parameter the resource type does not have, or one this engine does not support.

    The message is exactly `unknown search parameter <p>` (docs/assertions.md).
    """

    def __init__(self, name: str):
        self.name = name
        super().__init__(f"unknown search parameter {name}")


class FhirPathError(ValueError):
    """A FHIRPath expression that does not compile, or that fails on a resource."""
