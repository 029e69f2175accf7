"""Initial schema: organizations, keys, catalog, runs, playgrounds, sandboxes, events, leases.

Revision ID: 0001
Revises: (none)
Create Date: 2026-11-25 22:21:46.518356
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None


def upgrade() -> None:

    op.create_table(
        "leases",
        sa.Column("name", sa.String(length=64), nullable=False),
        sa.Column("holder", sa.String(length=64), nullable=False),
        sa.Column("expires_at", sa.DateTime(), nullable=False),
        sa.PrimaryKeyConstraint("name"),
    )
    op.create_table(
        "organizations",
        sa.Column("id", sa.String(length=40), nullable=False),
        sa.Column("name", sa.String(length=200), nullable=False),
        sa.Column("is_default", sa.Boolean(), nullable=False),
        sa.Column("created_at", sa.DateTime(), nullable=False),
        sa.PrimaryKeyConstraint("id"),
        sa.UniqueConstraint("name"),
    )
    op.create_table(
        "datasets",
        sa.Column("id", sa.String(length=40), nullable=False),
        sa.Column("org_id", sa.String(length=40), nullable=False),
        sa.Column("name", sa.String(length=200), nullable=False),
        sa.Column("type", sa.String(length=16), nullable=False),
        sa.Column("data", sa.JSON(), nullable=False),
        sa.Column("created_at", sa.DateTime(), nullable=False),
        sa.Column("updated_at", sa.DateTime(), nullable=False),
        sa.ForeignKeyConstraint(["org_id"], ["organizations.id"], ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("id"),
    )
    with op.batch_alter_table("datasets", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_datasets_org_id"), ["org_id"], unique=False)

    op.create_table(
        "environments",
        sa.Column("id", sa.String(length=40), nullable=False),
        sa.Column("org_id", sa.String(length=40), nullable=False),
        sa.Column("name", sa.String(length=200), nullable=False),
        sa.Column("description", sa.Text(), nullable=True),
        sa.Column("dataset_ids", sa.JSON(), nullable=False),
        sa.Column("settings", sa.JSON(), nullable=False),
        sa.Column("created_at", sa.DateTime(), nullable=False),
        sa.Column("updated_at", sa.DateTime(), nullable=False),
        sa.ForeignKeyConstraint(["org_id"], ["organizations.id"], ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("id"),
    )
    with op.batch_alter_table("environments", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_environments_org_id"), ["org_id"], unique=False)

    op.create_table(
        "solvers",
        sa.Column("id", sa.String(length=40), nullable=False),
        sa.Column("org_id", sa.String(length=40), nullable=False),
        sa.Column("name", sa.String(length=200), nullable=False),
        sa.Column("description", sa.Text(), nullable=True),
        sa.Column("version", sa.String(length=100), nullable=True),
        sa.Column("created_at", sa.DateTime(), nullable=False),
        sa.Column("updated_at", sa.DateTime(), nullable=False),
        sa.ForeignKeyConstraint(["org_id"], ["organizations.id"], ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("id"),
    )
    with op.batch_alter_table("solvers", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_solvers_org_id"), ["org_id"], unique=False)

    op.create_table(
        "api_keys",
        sa.Column("id", sa.String(length=40), nullable=False),
        sa.Column("org_id", sa.String(length=40), nullable=False),
        sa.Column("kind", sa.String(length=16), nullable=False),
        sa.Column("solver_id", sa.String(length=40), nullable=True),
        sa.Column("name", sa.String(length=200), nullable=True),
        sa.Column("token_hash", sa.String(length=64), nullable=False),
        sa.Column("prefix", sa.String(length=32), nullable=False),
        sa.Column("suffix", sa.String(length=8), nullable=False),
        sa.Column("created_at", sa.DateTime(), nullable=False),
        sa.ForeignKeyConstraint(["org_id"], ["organizations.id"], ondelete="CASCADE"),
        sa.ForeignKeyConstraint(["solver_id"], ["solvers.id"], ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("id"),
        sa.UniqueConstraint("token_hash"),
    )
    with op.batch_alter_table("api_keys", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_api_keys_org_id"), ["org_id"], unique=False)
        batch_op.create_index(batch_op.f("ix_api_keys_solver_id"), ["solver_id"], unique=False)

    op.create_table(
        "benchmarks",
        sa.Column("id", sa.String(length=40), nullable=False),
        sa.Column("org_id", sa.String(length=40), nullable=False),
        sa.Column("name", sa.String(length=200), nullable=False),
        sa.Column("description", sa.Text(), nullable=True),
        sa.Column("environment_id", sa.String(length=40), nullable=True),
        sa.Column("timeout", sa.Integer(), nullable=True),
        sa.Column("concurrency", sa.Integer(), nullable=True),
        sa.Column("slug", sa.String(length=200), nullable=True),
        sa.Column("created_at", sa.DateTime(), nullable=False),
        sa.Column("updated_at", sa.DateTime(), nullable=False),
        sa.ForeignKeyConstraint(
            ["environment_id"],
            ["environments.id"],
        ),
        sa.ForeignKeyConstraint(["org_id"], ["organizations.id"], ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("id"),
    )
    with op.batch_alter_table("benchmarks", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_benchmarks_environment_id"), ["environment_id"], unique=False)
        batch_op.create_index(batch_op.f("ix_benchmarks_org_id"), ["org_id"], unique=False)

    op.create_table(
        "dataset_entities",
        sa.Column("id", sa.String(length=40), nullable=False),
        sa.Column("org_id", sa.String(length=40), nullable=False),
        sa.Column("dataset_id", sa.String(length=40), nullable=False),
        sa.Column("kind", sa.String(length=100), nullable=False),
        sa.Column("key", sa.String(length=200), nullable=True),
        sa.Column("data", sa.JSON(), nullable=False),
        sa.Column("created_at", sa.DateTime(), nullable=False),
        sa.ForeignKeyConstraint(["dataset_id"], ["datasets.id"], ondelete="CASCADE"),
        sa.ForeignKeyConstraint(["org_id"], ["organizations.id"], ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("id"),
    )
    with op.batch_alter_table("dataset_entities", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_dataset_entities_dataset_id"), ["dataset_id"], unique=False)
        batch_op.create_index(batch_op.f("ix_dataset_entities_org_id"), ["org_id"], unique=False)

    op.create_table(
        "benchmark_versions",
        sa.Column("id", sa.String(length=40), nullable=False),
        sa.Column("org_id", sa.String(length=40), nullable=False),
        sa.Column("benchmark_id", sa.String(length=40), nullable=False),
        sa.Column("slug", sa.String(length=200), nullable=False),
        sa.Column("version", sa.Integer(), nullable=False),
        sa.Column("name", sa.String(length=200), nullable=False),
        sa.Column("frozen", sa.JSON(), nullable=False),
        sa.Column("created_at", sa.DateTime(), nullable=False),
        sa.ForeignKeyConstraint(["benchmark_id"], ["benchmarks.id"], ondelete="CASCADE"),
        sa.ForeignKeyConstraint(["org_id"], ["organizations.id"], ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("id"),
        sa.UniqueConstraint("org_id", "slug", "version"),
    )
    with op.batch_alter_table("benchmark_versions", schema=None) as batch_op:
        batch_op.create_index(
            batch_op.f("ix_benchmark_versions_benchmark_id"), ["benchmark_id"], unique=False
        )
        batch_op.create_index(batch_op.f("ix_benchmark_versions_org_id"), ["org_id"], unique=False)

    op.create_table(
        "tasks",
        sa.Column("id", sa.String(length=40), nullable=False),
        sa.Column("org_id", sa.String(length=40), nullable=False),
        sa.Column("benchmark_id", sa.String(length=40), nullable=False),
        sa.Column("name", sa.String(length=200), nullable=False),
        sa.Column("task_item", sa.JSON(), nullable=True),
        sa.Column("scenario", sa.JSON(), nullable=True),
        sa.Column("tags", sa.JSON(), nullable=False),
        sa.Column("timeout", sa.Integer(), nullable=True),
        sa.Column("dataset_ids", sa.JSON(), nullable=False),
        sa.Column("input_entity", sa.JSON(), nullable=True),
        sa.Column("created_at", sa.DateTime(), nullable=False),
        sa.Column("updated_at", sa.DateTime(), nullable=False),
        sa.ForeignKeyConstraint(
            ["benchmark_id"],
            ["benchmarks.id"],
        ),
        sa.ForeignKeyConstraint(["org_id"], ["organizations.id"], ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("id"),
    )
    with op.batch_alter_table("tasks", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_tasks_benchmark_id"), ["benchmark_id"], unique=False)
        batch_op.create_index(batch_op.f("ix_tasks_org_id"), ["org_id"], unique=False)

    op.create_table(
        "benchmark_runs",
        sa.Column("id", sa.String(length=40), nullable=False),
        sa.Column("org_id", sa.String(length=40), nullable=False),
        sa.Column("benchmark_id", sa.String(length=40), nullable=False),
        sa.Column("version_id", sa.String(length=40), nullable=True),
        sa.Column("benchmark_ref", sa.JSON(), nullable=False),
        sa.Column("solver_id", sa.String(length=40), nullable=True),
        sa.Column("agent", sa.JSON(), nullable=True),
        sa.Column("scored", sa.Boolean(), nullable=False),
        sa.Column("phase", sa.String(length=16), nullable=False),
        sa.Column("status", sa.String(length=16), nullable=False),
        sa.Column("score", sa.String(length=80), nullable=True),
        sa.Column("verdict", sa.String(length=16), nullable=True),
        sa.Column("concurrency", sa.Integer(), nullable=False),
        sa.Column("token_hash", sa.String(length=64), nullable=False),
        sa.Column("token_expires_at", sa.DateTime(), nullable=False),
        sa.Column("created_at", sa.DateTime(), nullable=False),
        sa.Column("started_at", sa.DateTime(), nullable=True),
        sa.Column("completed_at", sa.DateTime(), nullable=True),
        sa.ForeignKeyConstraint(
            ["benchmark_id"],
            ["benchmarks.id"],
        ),
        sa.ForeignKeyConstraint(["org_id"], ["organizations.id"], ondelete="CASCADE"),
        sa.ForeignKeyConstraint(
            ["solver_id"],
            ["solvers.id"],
        ),
        sa.ForeignKeyConstraint(
            ["version_id"],
            ["benchmark_versions.id"],
        ),
        sa.PrimaryKeyConstraint("id"),
        sa.UniqueConstraint("token_hash"),
    )
    with op.batch_alter_table("benchmark_runs", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_benchmark_runs_benchmark_id"), ["benchmark_id"], unique=False)
        batch_op.create_index(batch_op.f("ix_benchmark_runs_org_id"), ["org_id"], unique=False)
        batch_op.create_index(batch_op.f("ix_benchmark_runs_solver_id"), ["solver_id"], unique=False)
        batch_op.create_index(batch_op.f("ix_benchmark_runs_status"), ["status"], unique=False)

    op.create_table(
        "criteria",
        sa.Column("id", sa.String(length=40), nullable=False),
        sa.Column("org_id", sa.String(length=40), nullable=False),
        sa.Column("task_id", sa.String(length=40), nullable=False),
        sa.Column("label", sa.Text(), nullable=False),
        sa.Column("assertion", sa.JSON(), nullable=False),
        sa.Column("weight", sa.JSON(), nullable=False),
        sa.Column("axis", sa.String(length=200), nullable=True),
        sa.Column("input_entity_id", sa.String(length=40), nullable=True),
        sa.Column("created_at", sa.DateTime(), nullable=False),
        sa.Column("updated_at", sa.DateTime(), nullable=False),
        sa.ForeignKeyConstraint(["org_id"], ["organizations.id"], ondelete="CASCADE"),
        sa.ForeignKeyConstraint(["task_id"], ["tasks.id"], ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("id"),
    )
    with op.batch_alter_table("criteria", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_criteria_org_id"), ["org_id"], unique=False)
        batch_op.create_index(batch_op.f("ix_criteria_task_id"), ["task_id"], unique=False)

    op.create_table(
        "task_entities",
        sa.Column("task_id", sa.String(length=40), nullable=False),
        sa.Column("entity_id", sa.String(length=40), nullable=False),
        sa.Column("org_id", sa.String(length=40), nullable=False),
        sa.Column("created_at", sa.DateTime(), nullable=False),
        sa.ForeignKeyConstraint(["entity_id"], ["dataset_entities.id"], ondelete="CASCADE"),
        sa.ForeignKeyConstraint(["org_id"], ["organizations.id"], ondelete="CASCADE"),
        sa.ForeignKeyConstraint(["task_id"], ["tasks.id"], ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("task_id", "entity_id"),
    )
    with op.batch_alter_table("task_entities", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_task_entities_org_id"), ["org_id"], unique=False)

    op.create_table(
        "task_runs",
        sa.Column("id", sa.String(length=40), nullable=False),
        sa.Column("org_id", sa.String(length=40), nullable=False),
        sa.Column("benchmark_run_id", sa.String(length=40), nullable=False),
        sa.Column("task_id", sa.String(length=40), nullable=False),
        sa.Column("name", sa.String(length=200), nullable=False),
        sa.Column("position", sa.Integer(), nullable=False),
        sa.Column("playground_id", sa.String(length=40), nullable=True),
        sa.Column("phase", sa.String(length=16), nullable=False),
        sa.Column("status", sa.String(length=16), nullable=False),
        sa.Column("verdict", sa.String(length=16), nullable=True),
        sa.Column("score", sa.String(length=80), nullable=True),
        sa.Column("axes", sa.JSON(), nullable=True),
        sa.Column("snapshot", sa.JSON(), nullable=False),
        sa.Column("entities", sa.JSON(), nullable=False),
        sa.Column("timeout_seconds", sa.Integer(), nullable=False),
        sa.Column("capture", sa.JSON(), nullable=True),
        sa.Column("failure_reason", sa.Text(), nullable=True),
        sa.Column("created_at", sa.DateTime(), nullable=False),
        sa.Column("started_at", sa.DateTime(), nullable=True),
        sa.Column("completed_at", sa.DateTime(), nullable=True),
        sa.Column("deadline_at", sa.DateTime(), nullable=True),
        sa.ForeignKeyConstraint(["benchmark_run_id"], ["benchmark_runs.id"], ondelete="CASCADE"),
        sa.ForeignKeyConstraint(["org_id"], ["organizations.id"], ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("id"),
    )
    with op.batch_alter_table("task_runs", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_task_runs_benchmark_run_id"), ["benchmark_run_id"], unique=False)
        batch_op.create_index(batch_op.f("ix_task_runs_org_id"), ["org_id"], unique=False)
        batch_op.create_index("ix_task_runs_status_deadline", ["status", "deadline_at"], unique=False)

    op.create_table(
        "criterion_runs",
        sa.Column("id", sa.String(length=40), nullable=False),
        sa.Column("org_id", sa.String(length=40), nullable=False),
        sa.Column("task_run_id", sa.String(length=40), nullable=False),
        sa.Column("criterion_id", sa.String(length=40), nullable=True),
        sa.Column("position", sa.Integer(), nullable=False),
        sa.Column("label", sa.Text(), nullable=False),
        sa.Column("axis", sa.String(length=200), nullable=True),
        sa.Column("weight", sa.JSON(), nullable=False),
        sa.Column("status", sa.String(length=16), nullable=False),
        sa.Column("passed", sa.Boolean(), nullable=False),
        sa.Column("score", sa.String(length=80), nullable=False),
        sa.Column("details", sa.Text(), nullable=False),
        sa.Column("evidence", sa.JSON(), nullable=False),
        sa.Column("superseded", sa.Boolean(), nullable=False),
        sa.Column("created_at", sa.DateTime(), nullable=False),
        sa.Column("started_at", sa.DateTime(), nullable=False),
        sa.Column("completed_at", sa.DateTime(), nullable=False),
        sa.ForeignKeyConstraint(["org_id"], ["organizations.id"], ondelete="CASCADE"),
        sa.ForeignKeyConstraint(["task_run_id"], ["task_runs.id"], ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("id"),
    )
    with op.batch_alter_table("criterion_runs", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_criterion_runs_org_id"), ["org_id"], unique=False)
        batch_op.create_index(batch_op.f("ix_criterion_runs_task_run_id"), ["task_run_id"], unique=False)

    op.create_table(
        "playgrounds",
        sa.Column("id", sa.String(length=40), nullable=False),
        sa.Column("org_id", sa.String(length=40), nullable=False),
        sa.Column("task_run_id", sa.String(length=40), nullable=False),
        sa.Column("status", sa.String(length=16), nullable=False),
        sa.Column("created_at", sa.DateTime(), nullable=False),
        sa.Column("updated_at", sa.DateTime(), nullable=False),
        sa.ForeignKeyConstraint(["org_id"], ["organizations.id"], ondelete="CASCADE"),
        sa.ForeignKeyConstraint(["task_run_id"], ["task_runs.id"], ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("id"),
    )
    with op.batch_alter_table("playgrounds", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_playgrounds_org_id"), ["org_id"], unique=False)
        batch_op.create_index(batch_op.f("ix_playgrounds_task_run_id"), ["task_run_id"], unique=False)

    op.create_table(
        "sandboxes",
        sa.Column("id", sa.String(length=40), nullable=False),
        sa.Column("org_id", sa.String(length=40), nullable=False),
        sa.Column("playground_id", sa.String(length=40), nullable=False),
        sa.Column("type", sa.String(length=16), nullable=False),
        sa.Column("status", sa.String(length=16), nullable=False),
        sa.Column("credentials", sa.JSON(), nullable=True),
        sa.Column("created_at", sa.DateTime(), nullable=False),
        sa.ForeignKeyConstraint(["org_id"], ["organizations.id"], ondelete="CASCADE"),
        sa.ForeignKeyConstraint(["playground_id"], ["playgrounds.id"], ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("id"),
    )
    with op.batch_alter_table("sandboxes", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_sandboxes_org_id"), ["org_id"], unique=False)
        batch_op.create_index(batch_op.f("ix_sandboxes_playground_id"), ["playground_id"], unique=False)

    op.create_table(
        "sandbox_events",
        sa.Column("id", sa.String(length=40), nullable=False),
        sa.Column("org_id", sa.String(length=40), nullable=False),
        sa.Column("sandbox_id", sa.String(length=40), nullable=False),
        sa.Column("seq", sa.Integer(), nullable=False),
        sa.Column("type", sa.String(length=32), nullable=False),
        sa.Column("method", sa.String(length=16), nullable=True),
        sa.Column("path", sa.Text(), nullable=True),
        sa.Column("status", sa.Integer(), nullable=True),
        sa.Column("request", sa.JSON(), nullable=True),
        sa.Column("response", sa.JSON(), nullable=True),
        sa.Column("truncated", sa.Boolean(), nullable=False),
        sa.Column("created_at", sa.DateTime(), nullable=False),
        sa.ForeignKeyConstraint(["org_id"], ["organizations.id"], ondelete="CASCADE"),
        sa.ForeignKeyConstraint(["sandbox_id"], ["sandboxes.id"], ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("id"),
        sa.UniqueConstraint("sandbox_id", "seq"),
    )
    with op.batch_alter_table("sandbox_events", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_sandbox_events_org_id"), ["org_id"], unique=False)
        batch_op.create_index(batch_op.f("ix_sandbox_events_sandbox_id"), ["sandbox_id"], unique=False)


def downgrade() -> None:

    with op.batch_alter_table("sandbox_events", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_sandbox_events_sandbox_id"))
        batch_op.drop_index(batch_op.f("ix_sandbox_events_org_id"))

    op.drop_table("sandbox_events")
    with op.batch_alter_table("sandboxes", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_sandboxes_playground_id"))
        batch_op.drop_index(batch_op.f("ix_sandboxes_org_id"))

    op.drop_table("sandboxes")
    with op.batch_alter_table("playgrounds", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_playgrounds_task_run_id"))
        batch_op.drop_index(batch_op.f("ix_playgrounds_org_id"))

    op.drop_table("playgrounds")
    with op.batch_alter_table("criterion_runs", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_criterion_runs_task_run_id"))
        batch_op.drop_index(batch_op.f("ix_criterion_runs_org_id"))

    op.drop_table("criterion_runs")
    with op.batch_alter_table("task_runs", schema=None) as batch_op:
        batch_op.drop_index("ix_task_runs_status_deadline")
        batch_op.drop_index(batch_op.f("ix_task_runs_org_id"))
        batch_op.drop_index(batch_op.f("ix_task_runs_benchmark_run_id"))

    op.drop_table("task_runs")
    with op.batch_alter_table("task_entities", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_task_entities_org_id"))

    op.drop_table("task_entities")
    with op.batch_alter_table("criteria", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_criteria_task_id"))
        batch_op.drop_index(batch_op.f("ix_criteria_org_id"))

    op.drop_table("criteria")
    with op.batch_alter_table("benchmark_runs", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_benchmark_runs_status"))
        batch_op.drop_index(batch_op.f("ix_benchmark_runs_solver_id"))
        batch_op.drop_index(batch_op.f("ix_benchmark_runs_org_id"))
        batch_op.drop_index(batch_op.f("ix_benchmark_runs_benchmark_id"))

    op.drop_table("benchmark_runs")
    with op.batch_alter_table("tasks", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_tasks_org_id"))
        batch_op.drop_index(batch_op.f("ix_tasks_benchmark_id"))

    op.drop_table("tasks")
    with op.batch_alter_table("benchmark_versions", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_benchmark_versions_org_id"))
        batch_op.drop_index(batch_op.f("ix_benchmark_versions_benchmark_id"))

    op.drop_table("benchmark_versions")
    with op.batch_alter_table("dataset_entities", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_dataset_entities_org_id"))
        batch_op.drop_index(batch_op.f("ix_dataset_entities_dataset_id"))

    op.drop_table("dataset_entities")
    with op.batch_alter_table("benchmarks", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_benchmarks_org_id"))
        batch_op.drop_index(batch_op.f("ix_benchmarks_environment_id"))

    op.drop_table("benchmarks")
    with op.batch_alter_table("api_keys", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_api_keys_solver_id"))
        batch_op.drop_index(batch_op.f("ix_api_keys_org_id"))

    op.drop_table("api_keys")
    with op.batch_alter_table("solvers", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_solvers_org_id"))

    op.drop_table("solvers")
    with op.batch_alter_table("environments", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_environments_org_id"))

    op.drop_table("environments")
    with op.batch_alter_table("datasets", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_datasets_org_id"))

    op.drop_table("datasets")
    op.drop_table("organizations")
    op.drop_table("leases")
