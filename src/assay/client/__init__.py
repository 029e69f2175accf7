"""The Assay Python SDK (docs/sdk.md): `from assay.client import Assay, AsyncAssay`.

httpx and pydantic only: this package never imports the service, the store or the sandboxes
(an import-linter contract holds it to that), so an agent harness can use it against a remote
Assay without the server's dependencies mattering.
"""

from __future__ import annotations

from assay.client._client import DEFAULT_BASE_URL, Assay, AsyncAssay
from assay.client._errors import (
    APIConnectionError,
    APIStatusError,
    AssayError,
    AuthenticationError,
    BadRequestError,
    ConflictError,
    InternalServerError,
    NotFoundError,
    PermissionDeniedError,
    RateLimitError,
    ValidationError,
)
from assay.client._models import (
    ApiKey,
    Benchmark,
    BenchmarkRun,
    BenchmarkRunCreated,
    BenchmarkRunSummary,
    BenchmarkVersion,
    Check,
    Completion,
    Criterion,
    CriterionRun,
    CriterionRunSummary,
    Dataset,
    DatasetEntity,
    Environment,
    Playground,
    RunTaskRun,
    SandboxEvent,
    Solver,
    StartedTaskRun,
    Task,
    TaskRun,
    TaskView,
)

__all__ = [
    "DEFAULT_BASE_URL",
    "APIConnectionError",
    "APIStatusError",
    "ApiKey",
    "Assay",
    "AssayError",
    "AsyncAssay",
    "AuthenticationError",
    "BadRequestError",
    "Benchmark",
    "BenchmarkRun",
    "BenchmarkRunCreated",
    "BenchmarkRunSummary",
    "BenchmarkVersion",
    "Check",
    "Completion",
    "ConflictError",
    "Criterion",
    "CriterionRun",
    "CriterionRunSummary",
    "Dataset",
    "DatasetEntity",
    "Environment",
    "InternalServerError",
    "NotFoundError",
    "PermissionDeniedError",
    "Playground",
    "RateLimitError",
    "RunTaskRun",
    "SandboxEvent",
    "Solver",
    "StartedTaskRun",
    "Task",
    "TaskRun",
    "TaskView",
    "ValidationError",
]
