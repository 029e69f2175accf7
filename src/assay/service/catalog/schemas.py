"""Request bodies (docs/api.md, validated strictly: `"2"` is not a number) and response shapes.

Unknown top-level keys are ignored, so an object read from the API can be sent back as a PATCH;
unknown keys inside `assertion` are rejected by the assertion models themselves (docs/assertions.md).
"""

from __future__ import annotations

import base64
import binascii
import json
from typing import Annotated, Any, Literal

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, field_validator, model_validator

from assay.sandboxes.registry import DATASET_TYPES
from assay.store import iso
from assay.store.json_values import json_bytes
from assay.store.models import (
    ApiKey,
    Benchmark,
    BenchmarkVersion,
    Criterion,
    Dataset,
    DatasetEntity,
    Environment,
    Solver,
    Task,
)

__all__ = [
    "BenchmarkCreate",
    "BenchmarkPatch",
    "CriterionCreate",
    "CriterionOut",
    "CriterionPatch",
    "DatasetCreate",
    "DatasetPatch",
    "EntityCreate",
    "EnvironmentCreate",
    "EnvironmentPatch",
    "KeyCreate",
    "PublishBody",
    "SelfTestOut",
    "SolverCreate",
    "SolverPatch",
    "TaskCreate",
    "TaskEntityLink",
    "TaskPatch",
    "VersionOut",
    "benchmark_json",
    "criterion_json",
    "dataset_bytes",
    "dataset_json",
    "entity_json",
    "entity_reference",
    "environment_json",
    "key_json",
    "solver_json",
    "task_json",
    "version_json",
]


def _loadable(kind: str) -> str:
    if kind not in DATASET_TYPES:
        raise ValueError(f"dataset type {kind!r} is not one of {', '.join(sorted(DATASET_TYPES))}")
    return kind


DatasetType = Annotated[
    str,
    AfterValidator(_loadable),
    Field(json_schema_extra=lambda schema: schema.update(enum=sorted(DATASET_TYPES))),
]
"""A dataset type some registered surface loads (`sandboxes.registry.DATASET_TYPES`)."""
Name = Annotated[str, Field(min_length=1, max_length=200)]
Short = Annotated[str, Field(max_length=200)]


def _positive_number(value: Any) -> int | float:
    """A finite JSON number > 0, kept as sent (an int stays an int on the way out)."""
    if isinstance(value, bool) or not isinstance(value, int | float) or not 0 < value < 1e15:
        raise ValueError("weight must be a number > 0 (and below 10^15)")
    return value


Weight = Annotated[
    Any, AfterValidator(_positive_number), Field(description="Relative weight, > 0 (default 1).")
]
Seconds = Annotated[int, Field(gt=0, le=10 * 365 * 86400, description="Seconds (at most ten years).")]


class _Body(BaseModel):
    model_config = ConfigDict(strict=True, extra="ignore", use_attribute_docstrings=True)


class EntityCreate(_Body):
    kind: Name
    key: Short | None = None
    data: dict[str, Any] = {}


class DatasetCreate(_Body):
    name: Name
    type: DatasetType
    data: dict[str, Any]
    """By type: a FHIR Bundle; `{files: [...]}`; `{resources: {...}}`; `{inbox: [...]}`; a payer; `{turns}`."""
    entities: list[EntityCreate] = []


class DatasetPatch(_Body):
    name: Name | None = None
    data: dict[str, Any] | None = None


class EnvironmentCreate(_Body):
    name: Name
    description: str | None = None
    dataset_ids: list[str] = []
    settings: dict[str, Any] = {}


class EnvironmentPatch(EnvironmentCreate):
    name: Name | None = None  # type: ignore[assignment]
    dataset_ids: list[str] | None = None  # type: ignore[assignment]
    settings: dict[str, Any] | None = None  # type: ignore[assignment]


class BenchmarkCreate(_Body):
    name: Name
    description: str | None = None
    environment_id: str | None = None
    timeout: Seconds | None = None
    """Default deadline of each task run, seconds (a task's own `timeout` wins; else 3600)."""
    concurrency: Annotated[int, Field(ge=1, le=10_000)] | None = None
    """How many task runs of one benchmark run may be started at once (default 1)."""
    vocabulary: list[Any] | None = None
    """Lexicon entries `{terms, source, id?, ambiguous?}` the voice vocabulary tier adds to its
    built-in healthcare-administration lexicon for this benchmark's criteria (docs/scoring.md)."""


class BenchmarkPatch(BenchmarkCreate):
    name: Name | None = None  # type: ignore[assignment]


class PublishBody(_Body):
    slug: Annotated[str, Field(pattern=r"^[a-z0-9][a-z0-9-]*$", max_length=100)] | None = None
    force: bool = False
    """Publish even when a task's self-test finds problems (an idle agent scores, a reference
    solution fails); the refusal otherwise lists each criterion with its evidence."""


class ReferenceAction(BaseModel):
    """One request of a reference solution, sent as the agent would: relative to the task run's
    surfaces (`fhir/Appointment`, `voice/turns`, `x12/270`, `files/outbound/a.pdf`, `portal/…`)."""

    model_config = ConfigDict(strict=True, extra="forbid", use_attribute_docstrings=True)

    method: Literal["GET", "POST", "PUT", "PATCH", "DELETE"]
    path: Annotated[str, Field(min_length=1, max_length=2000)]
    """Relative to `/v1/task-runs/{id}/`; no leading `/`, no `..` segment."""
    json_body: Any = Field(default=None, alias="json")
    """A JSON body."""
    body: str | None = None
    """A raw text body (ER7, X12), sent as is."""
    content_type: Annotated[str, Field(max_length=200)] | None = None

    @field_validator("path")
    @classmethod
    def _inside_the_task_run(cls, path: str) -> str:
        if path.startswith("/") or ".." in path.split("?")[0].split("/") or "\\" in path:
            raise ValueError("must be relative to the task run (no leading /, no .. segment)")
        return path


class SnapshotFileBody(BaseModel):
    """One file of a reference snapshot: its path in the snapshot layout and its bytes."""

    model_config = ConfigDict(strict=True, extra="forbid", use_attribute_docstrings=True)

    path: Annotated[str, Field(min_length=1, max_length=1000)]
    """Relative to the snapshot's root (`manifest.json`, `fhir/Patient/p1.json`, `files/out/a.pdf`)."""
    content: str | None = None
    """The file as UTF-8 text."""
    content_base64: str | None = None
    """The file's bytes as base64 (for a file that is not UTF-8 text)."""

    @field_validator("path")
    @classmethod
    def _inside_the_snapshot(cls, path: str) -> str:
        parts = path.split("/")
        if path.startswith("/") or any(p in ("", ".", "..") for p in parts) or "\\" in path or "\x00" in path:
            raise ValueError("must be a relative path inside the snapshot (no leading /, no . or .. segment)")
        return path

    @model_validator(mode="after")
    def _one_content(self) -> SnapshotFileBody:
        if (self.content is None) == (self.content_base64 is None):
            raise ValueError("give exactly one of content and content_base64")
        if self.content_base64 is not None:
            try:
                base64.b64decode(self.content_base64, validate=True)
            except binascii.Error:
                raise ValueError("content_base64 must be base64 text") from None
        return self

    def data(self) -> bytes:
        if self.content_base64 is not None:
            return base64.b64decode(self.content_base64)
        return (self.content or "").encode("utf-8")


class ReferenceSnapshot(BaseModel):
    """The final state a correct agent leaves, as a snapshot (what `GET
    /task-runs/{id}/state` downloads, unpacked): the self-test judges it offline with the same
    `verify_task` as `complete` and `assay verify`."""

    model_config = ConfigDict(strict=True, extra="forbid")

    files: Annotated[list[SnapshotFileBody], Field(min_length=1, max_length=100_000)]

    @field_validator("files")
    @classmethod
    def _readable(cls, files: list[SnapshotFileBody]) -> list[SnapshotFileBody]:
        seen: set[str] = set()
        for item in files:
            if item.path in seen:
                raise ValueError(f"{item.path!r} is given twice")
            seen.add(item.path)
            if item.path.removeprefix("snapshot/") in ("manifest.json", "baseline.json"):
                try:
                    value = json.loads(item.data())
                except (ValueError, UnicodeDecodeError):
                    value = None
                if not isinstance(value, dict):
                    raise ValueError(f"{item.path} must be a JSON object")
        return files


class TaskReference(BaseModel):
    """A reference solution, one of: `actions`, which the self-test replays on a fresh
    playground, or `snapshot`, the final state it judges offline. Either must pass every criterion."""

    model_config = ConfigDict(strict=True, extra="forbid")

    actions: Annotated[list[ReferenceAction], Field(min_length=1, max_length=500)] | None = None
    snapshot: ReferenceSnapshot | None = None

    @model_validator(mode="after")
    def _one_form(self) -> TaskReference:
        if (self.actions is None) == (self.snapshot is None):
            raise ValueError("a reference solution has exactly one of actions and snapshot")
        return self


class TaskCreate(_Body):
    benchmark_id: str
    name: Name
    task_item: Any = None
    scenario: list[dict[str, Any]] | None = None
    tags: list[str] = []
    timeout: Seconds | None = None
    dataset_ids: list[str] = []
    input_entity: dict[str, Any] | None = None
    """An inline object, or `{"entity_id": "ent_…"}`."""
    reference: TaskReference | None = None
    """A reference solution the self-test replays; never shown to agents."""


class TaskPatch(_Body):
    name: Name | None = None
    task_item: Any = None
    scenario: list[dict[str, Any]] | None = None
    tags: list[str] | None = None
    timeout: Seconds | None = None
    dataset_ids: list[str] | None = None
    input_entity: dict[str, Any] | None = None
    reference: TaskReference | None = None


def entity_reference(input_entity: Any) -> str | None:
    """The entity id when a task's `input_entity` is a reference `{"entity_id": "ent_…"}`; None for
    an inline object or none at all. Create and PATCH check it, freezing resolves it, a run skips it."""
    if isinstance(input_entity, dict) and set(input_entity) == {"entity_id"}:
        return str(input_entity["entity_id"])
    return None


class TaskEntityLink(_Body):
    entity_id: str


class CriterionCreate(_Body):
    task_id: str
    label: Annotated[str, Field(min_length=1)]
    assertion: dict[str, Any]
    """Typed assertion spec, a union on `assert` (docs/assertions.md); stored exactly as sent."""
    weight: Weight = 1
    axis: Short | None = None
    input_entity_id: Short | None = None
    required: bool = False
    """A gate: unless this criterion passes, the task run scores 0 and fails (docs/scoring.md)."""
    idle_ok: bool = False
    """Passing with no agent action is intended (e.g. "never said X"): self-tests do not flag it."""


class CriterionPatch(_Body):
    label: Annotated[str, Field(min_length=1)] | None = None
    assertion: dict[str, Any] | None = None
    weight: Weight = None
    axis: Short | None = None
    input_entity_id: Short | None = None
    required: bool | None = None
    idle_ok: bool | None = None


class SolverCreate(_Body):
    name: Name
    description: str | None = None
    version: Annotated[str, Field(max_length=100)] | None = None


class SolverPatch(SolverCreate):
    name: Name | None = None  # type: ignore[assignment]


class KeyCreate(_Body):
    name: Short | None = None


# -- responses ----------------------------------------------------------------------------------


class VersionOut(BaseModel):
    """`POST /benchmarks/{id}/publish`: the immutable `slug@version` just frozen."""

    benchmark_id: str
    slug: str
    version: int
    name: str
    created_at: str


class SelfTrialOut(BaseModel):
    """One scripted trial of a self-test: an idle agent, or the task's reference solution."""

    benchmark_run_id: str | None
    task_run_id: str | None
    score: float | None
    verdict: str | None
    failure: str | None
    actions: list[dict[str, Any]]
    checks: list[dict[str, Any]]


class SelfTestOut(BaseModel):
    """`POST /tasks/{id}/self-test`: `ok` unless `problems` lists what an idle agent or the
    reference solution revealed."""

    task_id: str
    name: str
    ok: bool
    problems: list[dict[str, Any]]
    idle: SelfTrialOut
    reference: SelfTrialOut | None


class CriterionOut(BaseModel):
    """The Criterion object, plus `updated_at` (documentation of the wire shape; docs/api.md)."""

    model_config = ConfigDict(use_attribute_docstrings=True)

    id: str
    task_id: str
    """Parent task."""
    input_entity_id: str | None
    """Optional dataset entity the criterion is scoped to."""
    label: str
    assertion: dict[str, Any]
    """Typed assertion spec; shape depends on `assertion.assert` (docs/assertions.md). Passed through
    unchanged."""
    weight: float
    """Relative weight for task scoring; higher means more important."""
    axis: str | None
    """Optional scoring axis for the per-axis breakdown."""
    required: bool
    """A gate: unless it passes, the task run scores 0 (docs/scoring.md)."""
    idle_ok: bool
    """Passing with no agent action is intended; self-tests do not flag it."""
    created_at: str
    updated_at: str


def _row_json(
    row: Any, *fields: str, stamps: tuple[str, ...] = ("created_at", "updated_at")
) -> dict[str, Any]:
    """`fields` of `row` as stored, then its time `stamps` as ISO-8601: every catalog object's shape."""
    return {
        **{field: getattr(row, field) for field in fields},
        **{stamp: iso(getattr(row, stamp)) for stamp in stamps},
    }


def entity_json(row: DatasetEntity) -> dict[str, Any]:
    return _row_json(row, "id", "dataset_id", "kind", "key", "data", stamps=("created_at",))


def dataset_json(row: Dataset, entities: list[DatasetEntity] | None = None) -> dict[str, Any]:
    body = _row_json(row, "id", "name", "type", "data")
    if entities is not None:
        body["entities"] = [entity_json(entity) for entity in entities]
    return body


def dataset_bytes(row: Dataset, entities: list[DatasetEntity] | None, data: bytes) -> bytes:
    """`dataset_json` as JSON, its `data` the JSON text `data` as it is (the bytes just stored),
    not rendered again."""
    fields = dataset_json(row, entities)
    members = (
        json_bytes(key) + b":" + (data if key == "data" else json_bytes(value))
        for key, value in fields.items()
    )
    return b"{" + b",".join(members) + b"}"


def environment_json(row: Environment) -> dict[str, Any]:
    return _row_json(row, "id", "name", "description", "dataset_ids", "settings")


def benchmark_json(row: Benchmark) -> dict[str, Any]:
    return _row_json(
        row, "id", "name", "description", "environment_id", "timeout", "concurrency", "slug", "vocabulary"
    )


def version_json(row: BenchmarkVersion) -> dict[str, Any]:
    return _row_json(row, "benchmark_id", "slug", "version", "name", stamps=("created_at",))


def criterion_json(row: Criterion) -> dict[str, Any]:
    """Exactly the Criterion object, plus `updated_at` (docs/api.md)."""
    return _row_json(
        row, "id", "task_id", "input_entity_id", "label", "assertion", "weight", "axis", "required", "idle_ok"
    )


def task_json(row: Task, criteria: list[Criterion] | None = None) -> dict[str, Any]:
    body = _row_json(
        row,
        "id",
        "benchmark_id",
        "name",
        "task_item",
        "scenario",
        "tags",
        "timeout",
        "dataset_ids",
        "input_entity",
        "reference",
    )
    if criteria is not None:
        body["criteria"] = [criterion_json(criterion) for criterion in criteria]
    return body


def solver_json(row: Solver) -> dict[str, Any]:
    return _row_json(row, "id", "name", "description", "version")


def key_json(row: ApiKey, token: str | None = None) -> dict[str, Any]:
    """Key metadata; the plaintext `key` only in the response that created it (right after `id`)."""
    secret = {"key": token} if token is not None else {}
    return {
        "id": row.id,
        **secret,
        **_row_json(row, "prefix", "suffix", "name", "solver_id", stamps=("created_at",)),
    }
