"""FHIR R4: the search-parameter table, a search engine over in-memory resources, bundles.

Modules, bottom up: `parameters` (the generated R4 table), `fhirpath` (fhirpathpy, strict and
cached), `extract` (expressions compiled to Python), `dates`/`references`/`values` (what each
parameter type indexes), `query` (parsing and per-type matching), `index`, `store` (`FhirStore`),
`bundles` (dataset loading in docs/sandboxes.md). `formats` imports nothing else from `assay`.
"""

from assay.formats.fhir.bundles import BundleLoader, copy_json, resources_from_bundle
from assay.formats.fhir.errors import FhirPathError, InvalidSearch, UnknownSearchParameter
from assay.formats.fhir.fhirpath import compile_fhirpath, evaluate_fhirpath
from assay.formats.fhir.parameters import SearchParameter, is_resource_type, search_parameter
from assay.formats.fhir.query import check_search_keys, parse_search, parse_search_key
from assay.formats.fhir.references import ReferenceTarget, parse_reference
from assay.formats.fhir.search_terms import Criterion, ParsedSearch, SortKey
from assay.formats.fhir.store import FhirStore

__all__ = [
    "BundleLoader",
    "Criterion",
    "FhirPathError",
    "FhirStore",
    "InvalidSearch",
    "ParsedSearch",
    "ReferenceTarget",
    "SearchParameter",
    "SortKey",
    "UnknownSearchParameter",
    "check_search_keys",
    "compile_fhirpath",
    "copy_json",
    "evaluate_fhirpath",
    "is_resource_type",
    "parse_reference",
    "parse_search",
    "parse_search_key",
    "resources_from_bundle",
    "search_parameter",
]
