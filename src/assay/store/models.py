"""Tables (SQLAlchemy 2, typed `Mapped[...]`); the Alembic scripts in `migrations/` create them.

Every row carries `org_id`, so a repository can scope any query by the caller's organization
(a foreign id is a 404 by construction). There are no ORM relationships: children are
read by query (`catalog.repository.criteria_of`), and deleting a parent leaves its owned children
to the schema's `ON DELETE CASCADE`.

Scores are stored as exact fractions in text (`"9/10"`), weights as the JSON number the user sent,
so the arithmetic of docs/scoring.md never passes through a binary float.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from sqlalchemy import (
    JSON,
    Boolean,
    DateTime,
    ForeignKey,
    Index,
    Integer,
    String,
    Text,
    UniqueConstraint,
    false,
)
from sqlalchemy.engine import Dialect
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column
from sqlalchemy.types import TypeDecorator

__all__ = [
    "ApiKey",
    "Base",
    "Benchmark",
    "BenchmarkRun",
    "BenchmarkVersion",
    "BenchmarkVersionDataset",
    "Criterion",
    "CriterionRun",
    "Dataset",
    "DatasetEntity",
    "Environment",
    "Lease",
    "Organization",
    "Playground",
    "Sandbox",
    "SandboxEvent",
    "Solver",
    "Task",
    "TaskEntity",
    "TaskRun",
    "UtcDateTime",
]


class UtcDateTime(TypeDecorator[datetime]):
    """Aware UTC datetimes on every backend (SQLite keeps no zone; we store naive UTC)."""

    impl = DateTime
    cache_ok = True

    def process_bind_param(self, value: datetime | None, dialect: Dialect) -> datetime | None:
        if value is None:
            return None
        return value.astimezone(UTC).replace(tzinfo=None) if value.tzinfo else value

    def process_result_value(self, value: datetime | None, dialect: Dialect) -> datetime | None:
        if value is None:
            return None
        return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)


_ID = String(40)


def _org() -> Mapped[str]:
    return mapped_column(_ID, ForeignKey("organizations.id", ondelete="CASCADE"), index=True)


class Base(DeclarativeBase):
    type_annotation_map = {datetime: UtcDateTime(), dict[str, Any]: JSON, Any: JSON}


class Organization(Base):
    __tablename__ = "organizations"
    id: Mapped[str] = mapped_column(_ID, primary_key=True)
    name: Mapped[str] = mapped_column(String(200), unique=True)
    is_default: Mapped[bool] = mapped_column(Boolean, default=False)
    created_at: Mapped[datetime]


class ApiKey(Base):
    """An org key (`vk_`) or a Solver key (`vrl_slv_`); only the sha256 of the token is kept."""

    __tablename__ = "api_keys"
    id: Mapped[str] = mapped_column(_ID, primary_key=True)
    org_id: Mapped[str] = _org()
    kind: Mapped[str] = mapped_column(String(16))
    solver_id: Mapped[str | None] = mapped_column(
        _ID, ForeignKey("solvers.id", ondelete="CASCADE"), index=True
    )
    name: Mapped[str | None] = mapped_column(String(200))
    token_hash: Mapped[str] = mapped_column(String(64), unique=True)
    prefix: Mapped[str] = mapped_column(String(32))
    suffix: Mapped[str] = mapped_column(String(8))
    created_at: Mapped[datetime]


class Solver(Base):
    __tablename__ = "solvers"
    id: Mapped[str] = mapped_column(_ID, primary_key=True)
    org_id: Mapped[str] = _org()
    name: Mapped[str] = mapped_column(String(200))
    description: Mapped[str | None] = mapped_column(Text)
    version: Mapped[str | None] = mapped_column(String(100))
    created_at: Mapped[datetime]
    updated_at: Mapped[datetime]


class Dataset(Base):
    __tablename__ = "datasets"
    id: Mapped[str] = mapped_column(_ID, primary_key=True)
    org_id: Mapped[str] = _org()
    name: Mapped[str] = mapped_column(String(200))
    type: Mapped[str] = mapped_column(String(16))
    data: Mapped[Any]
    content_hash: Mapped[str | None] = mapped_column(String(64))
    """`json_values.content_hash(data)`, set whenever `data` is; `start` keys dataset layers by it
    (NULL on rows stored before migration 0007: hashed at `start`)."""
    created_at: Mapped[datetime]
    updated_at: Mapped[datetime]


class DatasetEntity(Base):
    __tablename__ = "dataset_entities"
    id: Mapped[str] = mapped_column(_ID, primary_key=True)
    org_id: Mapped[str] = _org()
    dataset_id: Mapped[str] = mapped_column(_ID, ForeignKey("datasets.id", ondelete="CASCADE"), index=True)
    kind: Mapped[str] = mapped_column(String(100))
    key: Mapped[str | None] = mapped_column(String(200))
    data: Mapped[Any]
    created_at: Mapped[datetime]


class Environment(Base):
    __tablename__ = "environments"
    id: Mapped[str] = mapped_column(_ID, primary_key=True)
    org_id: Mapped[str] = _org()
    name: Mapped[str] = mapped_column(String(200))
    description: Mapped[str | None] = mapped_column(Text)
    dataset_ids: Mapped[Any]
    settings: Mapped[Any]
    created_at: Mapped[datetime]
    updated_at: Mapped[datetime]


class Benchmark(Base):
    __tablename__ = "benchmarks"
    id: Mapped[str] = mapped_column(_ID, primary_key=True)
    org_id: Mapped[str] = _org()
    name: Mapped[str] = mapped_column(String(200))
    description: Mapped[str | None] = mapped_column(Text)
    environment_id: Mapped[str | None] = mapped_column(_ID, ForeignKey("environments.id"), index=True)
    timeout: Mapped[int | None] = mapped_column(Integer)
    concurrency: Mapped[int | None] = mapped_column(Integer)
    slug: Mapped[str | None] = mapped_column(String(200))
    vocabulary: Mapped[Any | None]
    """Lexicon entries for the voice vocabulary tier, added to the built-in ones (checks/vocabulary)."""
    created_at: Mapped[datetime]
    updated_at: Mapped[datetime]


class BenchmarkVersion(Base):
    """An immutable `slug@version`: tasks, criteria, environment and dataset contents, frozen."""

    __tablename__ = "benchmark_versions"
    __table_args__ = (UniqueConstraint("org_id", "slug", "version"),)
    id: Mapped[str] = mapped_column(_ID, primary_key=True)
    org_id: Mapped[str] = _org()
    benchmark_id: Mapped[str] = mapped_column(
        _ID, ForeignKey("benchmarks.id", ondelete="CASCADE"), index=True
    )
    slug: Mapped[str] = mapped_column(String(200))
    version: Mapped[int] = mapped_column(Integer)
    name: Mapped[str] = mapped_column(String(200))
    frozen: Mapped[Any]
    created_at: Mapped[datetime]


class BenchmarkVersionDataset(Base):
    """One dataset's content as frozen with a published version, a row per dataset.

    The version's `frozen` keeps each dataset's id, name, type, content hash and entities; the
    content lives here so that creating a run or starting one never decodes every dataset of the
    version (262 MB at 1,024 patients), and `start` reads only the contents its surfaces
    ask for — none for a FHIR dataset whose layer exists. Versions published before migration
    0008 keep `data` inline in `frozen` and are read as before."""

    __tablename__ = "benchmark_version_datasets"
    version_id: Mapped[str] = mapped_column(
        _ID, ForeignKey("benchmark_versions.id", ondelete="CASCADE"), primary_key=True
    )
    dataset_id: Mapped[str] = mapped_column(_ID, primary_key=True)
    data: Mapped[Any]


class Task(Base):
    __tablename__ = "tasks"
    id: Mapped[str] = mapped_column(_ID, primary_key=True)
    org_id: Mapped[str] = _org()
    benchmark_id: Mapped[str] = mapped_column(_ID, ForeignKey("benchmarks.id"), index=True)
    name: Mapped[str] = mapped_column(String(200))
    task_item: Mapped[Any | None]
    scenario: Mapped[Any | None]
    tags: Mapped[Any]
    timeout: Mapped[int | None] = mapped_column(Integer)
    dataset_ids: Mapped[Any]
    input_entity: Mapped[Any | None]
    reference: Mapped[Any | None]
    """A reference solution, `{"actions": [...]}` (replayed) or `{"snapshot": {"files": [...]}}` (judged
    offline): what the self-test checks."""
    created_at: Mapped[datetime]
    updated_at: Mapped[datetime]


class TaskEntity(Base):
    __tablename__ = "task_entities"
    task_id: Mapped[str] = mapped_column(_ID, ForeignKey("tasks.id", ondelete="CASCADE"), primary_key=True)
    entity_id: Mapped[str] = mapped_column(
        _ID, ForeignKey("dataset_entities.id", ondelete="CASCADE"), primary_key=True
    )
    org_id: Mapped[str] = _org()
    created_at: Mapped[datetime]


class Criterion(Base):
    __tablename__ = "criteria"
    id: Mapped[str] = mapped_column(_ID, primary_key=True)
    org_id: Mapped[str] = _org()
    task_id: Mapped[str] = mapped_column(_ID, ForeignKey("tasks.id", ondelete="CASCADE"), index=True)
    label: Mapped[str] = mapped_column(Text)
    assertion: Mapped[Any]
    weight: Mapped[Any]
    axis: Mapped[str | None] = mapped_column(String(200))
    input_entity_id: Mapped[str | None] = mapped_column(_ID)
    required: Mapped[bool] = mapped_column(Boolean, default=False, server_default=false())
    idle_ok: Mapped[bool] = mapped_column(Boolean, default=False, server_default=false())
    created_at: Mapped[datetime]
    updated_at: Mapped[datetime]


class BenchmarkRun(Base):
    __tablename__ = "benchmark_runs"
    id: Mapped[str] = mapped_column(_ID, primary_key=True)
    org_id: Mapped[str] = _org()
    benchmark_id: Mapped[str] = mapped_column(_ID, ForeignKey("benchmarks.id"), index=True)
    version_id: Mapped[str | None] = mapped_column(_ID, ForeignKey("benchmark_versions.id"))
    benchmark_ref: Mapped[Any]
    solver_id: Mapped[str | None] = mapped_column(_ID, ForeignKey("solvers.id"), index=True)
    agent: Mapped[Any | None]
    scored: Mapped[bool] = mapped_column(Boolean)
    phase: Mapped[str] = mapped_column(String(16))
    status: Mapped[str] = mapped_column(String(16), index=True)
    score: Mapped[str | None] = mapped_column(String(80))
    verdict: Mapped[str | None] = mapped_column(String(16))
    concurrency: Mapped[int] = mapped_column(Integer)
    trials: Mapped[int] = mapped_column(Integer, default=1, server_default="1")
    task_runs_total: Mapped[int] = mapped_column(Integer, default=0, server_default="0")
    task_runs_ended: Mapped[int] = mapped_column(Integer, default=0, server_default="0")
    """Task runs in a terminal status: the run is finalized by the change that makes it the total."""
    task_runs_running: Mapped[int] = mapped_column(Integer, default=0, server_default="0")
    """Task runs started and not ended: the concurrency slots in use (`lifecycle.take_slot`)."""
    token_hash: Mapped[str] = mapped_column(String(64), unique=True)
    token_expires_at: Mapped[datetime]
    created_at: Mapped[datetime]
    started_at: Mapped[datetime | None]
    completed_at: Mapped[datetime | None]


class TaskRun(Base):
    __tablename__ = "task_runs"
    __table_args__ = (Index("ix_task_runs_status_deadline", "status", "deadline_at"),)
    id: Mapped[str] = mapped_column(_ID, primary_key=True)
    org_id: Mapped[str] = _org()
    benchmark_run_id: Mapped[str] = mapped_column(
        _ID, ForeignKey("benchmark_runs.id", ondelete="CASCADE"), index=True
    )
    task_id: Mapped[str] = mapped_column(_ID)
    name: Mapped[str] = mapped_column(String(200))
    position: Mapped[int] = mapped_column(Integer)
    trial: Mapped[int] = mapped_column(Integer, default=0, server_default="0")
    playground_id: Mapped[str | None] = mapped_column(_ID)
    phase: Mapped[str] = mapped_column(String(16))
    status: Mapped[str] = mapped_column(String(16))
    verdict: Mapped[str | None] = mapped_column(String(16))
    score: Mapped[str | None] = mapped_column(String(80))
    axes: Mapped[Any | None]
    gate: Mapped[Any | None]
    """`{position, label, ungated_score}` when a required criterion zeroed the score."""
    snapshot: Mapped[Any]
    entities: Mapped[Any]
    timeout_seconds: Mapped[int] = mapped_column(Integer)
    capture: Mapped[Any | None]
    failure_reason: Mapped[str | None] = mapped_column(Text)
    created_at: Mapped[datetime]
    started_at: Mapped[datetime | None]
    completed_at: Mapped[datetime | None]
    deadline_at: Mapped[datetime | None]


class CriterionRun(Base):
    __tablename__ = "criterion_runs"
    id: Mapped[str] = mapped_column(_ID, primary_key=True)
    org_id: Mapped[str] = _org()
    task_run_id: Mapped[str] = mapped_column(_ID, ForeignKey("task_runs.id", ondelete="CASCADE"), index=True)
    criterion_id: Mapped[str | None] = mapped_column(_ID)
    position: Mapped[int] = mapped_column(Integer)
    label: Mapped[str] = mapped_column(Text)
    axis: Mapped[str | None] = mapped_column(String(200))
    weight: Mapped[Any]
    status: Mapped[str] = mapped_column(String(16))
    passed: Mapped[bool] = mapped_column(Boolean)
    score: Mapped[str] = mapped_column(String(80))
    details: Mapped[str] = mapped_column(Text)
    evidence: Mapped[Any]
    override: Mapped[Any | None]
    """A person's verdict (services/runs/overrides.py); `status`/`passed`/`score` then hold it."""
    superseded: Mapped[bool] = mapped_column(Boolean, default=False)
    created_at: Mapped[datetime]
    started_at: Mapped[datetime]
    completed_at: Mapped[datetime]


class Playground(Base):
    __tablename__ = "playgrounds"
    id: Mapped[str] = mapped_column(_ID, primary_key=True)
    org_id: Mapped[str] = _org()
    task_run_id: Mapped[str] = mapped_column(_ID, ForeignKey("task_runs.id", ondelete="CASCADE"), index=True)
    status: Mapped[str] = mapped_column(String(16))
    created_at: Mapped[datetime]
    updated_at: Mapped[datetime]


class Sandbox(Base):
    __tablename__ = "sandboxes"
    id: Mapped[str] = mapped_column(_ID, primary_key=True)
    org_id: Mapped[str] = _org()
    playground_id: Mapped[str] = mapped_column(
        _ID, ForeignKey("playgrounds.id", ondelete="CASCADE"), index=True
    )
    type: Mapped[str] = mapped_column(String(16))
    status: Mapped[str] = mapped_column(String(16))
    credentials: Mapped[Any | None]
    created_at: Mapped[datetime]


class SandboxEvent(Base):
    __tablename__ = "sandbox_events"
    __table_args__ = (UniqueConstraint("sandbox_id", "seq"),)
    id: Mapped[str] = mapped_column(_ID, primary_key=True)
    org_id: Mapped[str] = _org()
    sandbox_id: Mapped[str] = mapped_column(_ID, ForeignKey("sandboxes.id", ondelete="CASCADE"), index=True)
    seq: Mapped[int] = mapped_column(Integer)
    type: Mapped[str] = mapped_column(String(32))
    method: Mapped[str | None] = mapped_column(String(16))
    path: Mapped[str | None] = mapped_column(Text)
    status: Mapped[int | None] = mapped_column(Integer)
    request: Mapped[Any | None]
    response: Mapped[Any | None]
    truncated: Mapped[bool] = mapped_column(Boolean, default=False)
    created_at: Mapped[datetime]


class Lease(Base):
    """A named lease row: whoever holds an unexpired one does the job (the sweeper, docs/api.md)."""

    __tablename__ = "leases"
    name: Mapped[str] = mapped_column(String(64), primary_key=True)
    holder: Mapped[str] = mapped_column(String(64))
    expires_at: Mapped[datetime]


class TrajectoryStep(Base):
    """One step of a task run's trajectory: a message the agent's harness posted (`source`
    `agent`: role, content, tool calls) or a tool call the service executed for it (`tool`: the
    tool's name, arguments and result or error envelope). Ordered by `id` (time-ordered)."""

    __tablename__ = "trajectory_steps"
    id: Mapped[str] = mapped_column(_ID, primary_key=True)
    org_id: Mapped[str] = _org()
    task_run_id: Mapped[str] = mapped_column(_ID, ForeignKey("task_runs.id", ondelete="CASCADE"), index=True)
    source: Mapped[str] = mapped_column(String(16))
    step: Mapped[Any]
    created_at: Mapped[datetime]
