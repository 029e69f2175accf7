"""What each search-parameter type indexes from an element (FHIR R4 search §3.1.1.4).

One function per parameter type turns the extracted elements (`Typed`) into comparable index
values: token → `(system, code)` pairs, string → the raw texts of every part (all parts of a
HumanName or Address), reference → `ReferenceTarget`s, date → `DateRange`s, number → `Decimal`s,
quantity → `QuantityValue`s, uri → strings. The element's FHIR type decides when known; shape
decides when the value came from the fhirpathpy fallback.
"""

from __future__ import annotations

import unicodedata
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation
from typing import Any

from assay.formats.fhir.dates import DateRange, date_range_of
from assay.formats.fhir.extract import Typed
from assay.formats.fhir.references import ReferenceTarget, parse_reference

__all__ = [
    "INDEXERS",
    "PRIMITIVE_CODE",
    "QuantityValue",
    "Token",
    "normalize_text",
    "to_decimal",
]

Token = tuple["str | None", str]
"""(system, code); system is None when the element has none, `PRIMITIVE_CODE` for a `code`."""
PRIMITIVE_CODE = ""
"""The system of a `code` primitive (`Patient.gender`): it has none in the data, but its required
binding's code system is implied, so `gender=http://hl7.org/fhir/administrative-gender|male`
finds it (HAPI indexes such codes with that system); see `index.py`."""

_NAME_PARTS = ("family", "given", "prefix", "suffix", "text")
_ADDRESS_PARTS = ("line", "city", "district", "state", "postalCode", "country", "text")


@dataclass(frozen=True, slots=True)
class QuantityValue:
    low: Decimal | None
    """None is −∞ (a Range without `low`)."""
    high: Decimal | None
    system: str | None = None
    code: str | None = None
    unit: str | None = None


def normalize_text(text: str) -> str:
    """Case- and accent-insensitive form for string search (docs/assertions.md)."""
    decomposed = unicodedata.normalize("NFKD", text)
    return "".join(c for c in decomposed if not unicodedata.combining(c)).casefold()


def to_decimal(value: Any) -> Decimal | None:
    if isinstance(value, bool) or value is None:
        return None
    try:
        return Decimal(str(value)) if isinstance(value, int | float | str) else None
    except InvalidOperation:
        return None


def _strings(value: Any, keys: Iterable[str]) -> list[str]:
    found: list[str] = []
    for key in keys:
        part = value.get(key)
        if isinstance(part, str):
            found.append(part)
        elif isinstance(part, list):
            found.extend(p for p in part if isinstance(p, str))
    return found


def _token(typed: Typed) -> list[Token]:
    value, kind = typed.value, typed.fhir_type
    if isinstance(value, bool):
        return [(None, "true" if value else "false")]
    if isinstance(value, str) and kind == "code":
        return [(PRIMITIVE_CODE, value)]
    if isinstance(value, str | int | float):
        return [(None, str(value))]
    if not isinstance(value, dict):
        return []
    if kind == "CodeableConcept" or (kind is None and ("coding" in value or "text" in value)):
        codings = value.get("coding")
        if not isinstance(codings, list):  # stored as given: a malformed element indexes nothing
            return []
        return [t for coding in codings for t in _token(Typed(coding, "Coding"))]
    if kind == "Identifier" or kind == "ContactPoint" or (kind is None and "value" in value):
        code = value.get("value")
        return [(_str_or_none(value.get("system")), str(code))] if code is not None else []
    code = value.get("code")
    return [(_str_or_none(value.get("system")), str(code))] if code is not None else []


def _str_or_none(value: Any) -> str | None:
    return value if isinstance(value, str) and value else None


def _string(typed: Typed) -> list[str]:
    value, kind = typed.value, typed.fhir_type
    if isinstance(value, str):
        return [value]
    if not isinstance(value, dict):
        return []
    if kind == "HumanName":
        return _strings(value, _NAME_PARTS)
    if kind == "Address":
        return _strings(value, _ADDRESS_PARTS)
    return _strings(value, value.keys())


def _reference(typed: Typed) -> list[ReferenceTarget]:
    value = typed.value
    if isinstance(value, str):
        return [parse_reference(value.split("|", 1)[0])]
    if isinstance(value, dict) and isinstance(value.get("reference"), str):
        return [parse_reference(value["reference"])]
    return []


def _date(typed: Typed) -> list[DateRange]:
    return date_range_of(typed.value, typed.fhir_type)


def _number(typed: Typed) -> list[Decimal]:
    found = to_decimal(typed.value)
    return [found] if found is not None else []


def _quantity(typed: Typed) -> list[QuantityValue]:
    value = typed.value
    if not isinstance(value, dict):
        number = to_decimal(value)
        return [QuantityValue(number, number)] if number is not None else []
    if "low" in value or "high" in value:
        low, high = (part if isinstance(part, dict) else {} for part in (value.get("low"), value.get("high")))
        unit_of = low if low else high
        return [
            QuantityValue(
                to_decimal(low.get("value")) if low else None,
                to_decimal(high.get("value")) if high else None,
                _str_or_none(unit_of.get("system")),
                _str_or_none(unit_of.get("code")),
                _str_or_none(unit_of.get("unit")),
            )
        ]
    number = to_decimal(value.get("value"))
    if number is None:
        return []
    code = _str_or_none(value.get("code")) or _str_or_none(value.get("currency"))
    return [
        QuantityValue(
            number, number, _str_or_none(value.get("system")), code, _str_or_none(value.get("unit"))
        )
    ]


def _uri(typed: Typed) -> list[str]:
    return [typed.value] if isinstance(typed.value, str) else []


INDEXERS: dict[str, Callable[[Typed], list[Any]]] = {
    "token": _token,
    "string": _string,
    "reference": _reference,
    "date": _date,
    "number": _number,
    "quantity": _quantity,
    "uri": _uri,
}
"""Parameter type → element → index values."""
