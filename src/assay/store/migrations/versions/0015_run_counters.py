"""Benchmark-run counters: how many task runs the run has, how many have ended, how many hold a
concurrency slot (`docs/decisions/service.md`, "Benchmark run aggregates").

`start` and `complete` keep them with one conditional UPDATE of the run's row instead of reading
and locking every task run of the run; existing runs are counted here from their task runs.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision, down_revision = "0015_run_counters", "0014_x12_interchange_control"  # written 2026-11-28
branch_labels = depends_on = None

_ENDED = ("completed", "cancelled", "failed", "timed_out")


def upgrade() -> None:
    for name in ("task_runs_total", "task_runs_ended", "task_runs_running"):
        op.add_column("benchmark_runs", sa.Column(name, sa.Integer(), nullable=False, server_default="0"))
    ended = ", ".join(f"'{status}'" for status in _ENDED)
    of_run = "FROM task_runs WHERE task_runs.benchmark_run_id = benchmark_runs.id"
    op.execute(
        "UPDATE benchmark_runs SET "
        f"task_runs_total = (SELECT count(*) {of_run}), "
        f"task_runs_ended = (SELECT count(*) {of_run} AND task_runs.status IN ({ended})), "
        f"task_runs_running = (SELECT count(*) {of_run} "
        "AND task_runs.phase = 'started' AND task_runs.status = 'active')"
    )


def downgrade() -> None:
    with op.batch_alter_table("benchmark_runs") as batch:
        for name in ("task_runs_running", "task_runs_ended", "task_runs_total"):
            batch.drop_column(name)
