"""`portal` datasets (docs/sandboxes.md): checked at create, loaded into a playground's portal at start.

Shape: `{slug?, payer?, resources: {<name>: {key?, rows: [{...}]}}}`. `slug` names the portal the
rows belong to, so one playground can hold two payers' portals (a dataset per slug); without it the
rows go to the default portal. `payer` is that portal's payer definition (docs/sandboxes.md, checked by
`assay.sandboxes.payer.parse_payer`); a portal without one decides with the playground's `x12`
payer. `key` is required for a custom resource; the built-in resources
(`patients`, `providers`, `prior_auth_requests`) have fixed keys (docs/sandboxes.md), which `key` may
repeat but not change. Datasets load in order; a row whose key value an earlier row of the same
resource already has replaces it (the last write wins, as for FHIR), and a row without one gets
a generated key, as a POST does.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from assay.sandboxes.payer import PayerDefinitionInvalid, parse_payer
from assay.sandboxes.portal.store import BUILT_IN_KEYS, key_text

__all__ = ["RESERVED", "SeedPlan", "check_portal_dataset", "is_portal_name", "plan_seed"]

_NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]{0,63}")
"""A slug or resource name: it becomes a folder or file name of the snapshot (docs/snapshots.md)."""
_DATASET_KEYS = frozenset({"slug", "payer", "resources"})
RESERVED = frozenset({"web"})
"""Resource names the surface's own paths take (`…/portal/web` is the web portal)."""
_RESOURCE_KEYS = frozenset({"key", "rows"})


def is_portal_name(value: Any) -> bool:
    return isinstance(value, str) and _NAME.fullmatch(value) is not None


def check_portal_dataset(data: Any) -> dict[str, list[str]]:
    """Problems by key path relative to the dataset's `data` (empty when it can be loaded)."""
    if not isinstance(data, dict):
        return {"": ["a portal dataset is an object {slug?, resources: {<name>: {key, rows}}}"]}
    errors: dict[str, list[str]] = {key: ["unknown key"] for key in data if key not in _DATASET_KEYS}
    slug = data.get("slug")
    if slug is not None and not is_portal_name(slug):
        errors["slug"] = ["must be 1-64 letters, digits, '_', '.' or '-' (not starting with '.' or '-')"]
    if data.get("payer") is not None:
        try:
            parse_payer(data["payer"])
        except PayerDefinitionInvalid as exc:
            errors.update({".".join(filter(None, ("payer", k))): v for k, v in exc.errors.items()})
    resources = data.get("resources")
    if not isinstance(resources, dict):
        errors["resources"] = ["must be an object {<name>: {key, rows}}"]
        return errors
    for name, spec in resources.items():
        errors.update(_check_resource(name, spec))
    return errors


def _check_resource(name: str, spec: Any) -> dict[str, list[str]]:
    where = f"resources.{name}"
    if not is_portal_name(name):
        return {where: ["a resource name is 1-64 letters, digits, '_', '.' or '-'"]}
    if name in RESERVED:
        return {where: [f"{name} is the path of the web portal, not a resource name"]}
    if not isinstance(spec, dict):
        return {where: ["must be an object {key, rows}"]}
    errors = {f"{where}.{key}": ["unknown key"] for key in spec if key not in _RESOURCE_KEYS}
    key = spec.get("key")
    built_in = BUILT_IN_KEYS.get(name)
    if key is None and built_in is None:
        errors[f"{where}.key"] = ["required for a custom resource: the field that identifies a row"]
    elif key is not None and not (isinstance(key, str) and key):
        errors[f"{where}.key"] = ["must be a non-empty string"]
    elif built_in is not None and key not in (None, built_in):
        errors[f"{where}.key"] = [f"the key of {name} is {built_in}"]
    rows = spec.get("rows", [])
    if not isinstance(rows, list):
        errors[f"{where}.rows"] = ["must be an array of objects"]
        return errors
    key = built_in or key
    seen: set[str] = set()
    for i, row in enumerate(rows):
        if not isinstance(row, dict):
            errors[f"{where}.rows.{i}"] = ["must be an object"]
            continue
        if not isinstance(key, str) or row.get(key) is None:
            continue
        text = key_text(row[key])
        if text is None or text == "":
            errors[f"{where}.rows.{i}.{key}"] = ["a key value is a non-empty string or a number"]
        elif text in seen:
            errors[f"{where}.rows.{i}.{key}"] = [f"{key} {text!r} appears twice in {name}"]
        else:
            seen.add(text)
    return errors


@dataclass
class SeedPlan:
    """What to load into one playground's portal store, in order."""

    keys: dict[str, dict[str, str]] = field(default_factory=dict)
    rows: list[tuple[str, str, dict[str, Any]]] = field(default_factory=list)
    """(slug, resource, row) in load order."""
    payers: dict[str, Any] = field(default_factory=dict)
    """`{slug: payer definition}` of the portals whose dataset gives one."""


def plan_seed(datasets: Sequence[Mapping[str, Any]]) -> SeedPlan:
    """The portals, rows and payer definitions of a playground's `portal` datasets (checked)."""
    plan = SeedPlan()
    for dataset in datasets:
        data = dataset.get("data") or {}
        slug = data.get("slug") or ""
        keys = plan.keys.setdefault(slug, dict(BUILT_IN_KEYS))
        if data.get("payer") is not None:
            plan.payers[slug] = data["payer"]
        for name, spec in (data.get("resources") or {}).items():
            keys.setdefault(name, spec.get("key") or BUILT_IN_KEYS.get(name, ""))
            plan.rows.extend((slug, name, dict(row)) for row in spec.get("rows") or [])
    if not plan.keys:
        plan.keys[""] = dict(BUILT_IN_KEYS)
    return plan
