"""The curated public surface (style.md, after httpx's `tests/test_exported_members.py`).

`assay.__all__` lists exactly the offline library API, sorted, and every public module's
`__all__` names things that exist, so a rename cannot silently drop a public name.
"""

from __future__ import annotations

import importlib
import pkgutil
import types

import pytest

import assay

OFFLINE_API = {
    "CriterionResult",
    "CriterionSpec",
    "SandboxState",
    "TaskVerification",
    "__version__",
    "open_snapshot",
    "parse_assertion",
    "score_task",
    "verify_task",
    "write_snapshot",
}


def test_all_imports_are_exported() -> None:
    public = {
        name
        for name, value in vars(assay).items()
        if (not name.startswith("_") or name == "__version__")
        and not isinstance(value, types.ModuleType)
        and name != "annotations"
    }
    assert set(assay.__all__) == public
    assert assay.__all__ == sorted(assay.__all__)


def test_offline_api_is_exactly_the_documented_names() -> None:
    assert set(assay.__all__) == OFFLINE_API
    assert isinstance(assay.__version__, str) and assay.__version__


def _public_modules() -> list[str]:
    """Every module under `assay` with no `_private` part; migrations run code on import."""
    names = []
    for info in pkgutil.walk_packages(assay.__path__, "assay."):
        parts = info.name.split(".")
        if any(part.startswith("_") for part in parts) or "migrations" in parts:
            continue
        names.append(info.name)
    return sorted(names)


_OPTIONAL = {"inspect_ai"}
"""Packages only an optional extra installs (`uv sync --extra inspect`; `.ci/run` installs it)."""


@pytest.mark.parametrize("module_name", _public_modules())
def test_module_all_names_exist(module_name: str) -> None:
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as missing:  # an optional extra's module (`inspect`), not installed
        if missing.name not in _OPTIONAL:
            raise
        pytest.skip(f"{module_name} needs {missing.name} (an optional extra)")
    exported = getattr(module, "__all__", None)
    if exported is None:
        return
    assert len(exported) == len(set(exported)), f"{module_name}.__all__ has duplicates"
    missing = [name for name in exported if not hasattr(module, name)]
    assert not missing, f"{module_name}.__all__ names missing attributes: {missing}"
