"""Assay: a verification engine for healthcare AI-agent benchmarks.

This package's top level is the offline library API — score a captured sandbox state against
typed criteria without a server::

    from assay import CriterionSpec, open_snapshot, verify_task

    state = open_snapshot("snapshot.tar.gz")
    result = verify_task([CriterionSpec({"assert": "voice-transcript", "contains": ["member ID"]})], state)
    print(result.score.verdict)

The names below are the stable surface (guarded by `tests/test_exported_members.py`); everything
else lives in its subpackage (`assay.checks`, `assay.core`, `assay.snapshot`, …).
"""

from __future__ import annotations

from importlib.metadata import PackageNotFoundError as _PackageNotFoundError
from importlib.metadata import version as _version

from assay.core.assertions import parse_assertion
from assay.core.results import CriterionResult
from assay.core.scoring import score_task
from assay.core.state import SandboxState
from assay.snapshot import open_snapshot, write_snapshot
from assay.verify import CriterionSpec, TaskVerification, verify_task

try:
    __version__ = _version("assay")
except _PackageNotFoundError:  # running from a source tree that was never installed
    __version__ = "0.0.0"

__all__ = [
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
]
