"""FHIR errors as OperationOutcome, with the HTTP status docs/sandboxes.md gives each kind.

Tree::

    FhirError(status, code, diagnostics)   -> OperationOutcome with `status`
    ├── 400 bad syntax, unknown search parameter, malformed patch
    ├── 404 unknown type or id              410 deleted
    ├── 409 version conflict in a transaction
    ├── 412 If-Match / conditional create precondition failed
    └── 422 invalid resource (not an object, unknown resourceType, id rules, type/URL mismatch)

Actions raise `FhirError`; the router turns it into a response in one place.
"""

from __future__ import annotations

from typing import Any

__all__ = ["FhirError", "operation_outcome"]

_ISSUE_CODES = {
    400: "invalid",
    404: "not-found",
    409: "conflict",
    410: "deleted",
    412: "conflict",
    422: "processing",
}


class FhirError(Exception):
    """A FHIR interaction that fails with `status`; `diagnostics` names the input and the cause."""

    def __init__(
        self,
        status: int,
        diagnostics: str,
        code: str | None = None,
        issues: list[dict[str, Any]] | None = None,
    ):
        super().__init__(diagnostics)
        self.status = status
        self.diagnostics = diagnostics
        self.code = code or _ISSUE_CODES.get(status, "exception")
        self.issues = issues
        """One OperationOutcome issue per offending element (strict validation), when known."""

    def outcome(self) -> dict[str, Any]:
        if self.issues:
            return {"resourceType": "OperationOutcome", "issue": list(self.issues)}
        return operation_outcome(self.diagnostics, self.code)


def operation_outcome(diagnostics: str, code: str = "processing", severity: str = "error") -> dict[str, Any]:
    return {
        "resourceType": "OperationOutcome",
        "issue": [{"severity": severity, "code": code, "diagnostics": diagnostics}],
    }
