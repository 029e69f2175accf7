"""The write gate's system mode: the sandbox's own write is let through after the task run stops
taking the agent's writes, and still takes the sandbox's row (`sandboxes/gate.py`)."""

from __future__ import annotations

import httpx
import pytest
from sqlalchemy import select

from assay.sandboxes.gate import SandboxClosed, admit
from assay.store.models import Playground, Sandbox
from tests.sandboxes.voice.test_line import start_call_task
from tests.service.builders import ok
from tests.service.conftest import Server


def test_a_system_write_passes_the_gate_an_agents_write_does_not(server: Server, api: httpx.Client) -> None:
    task_run_id, token, _ = start_call_task(server, api)
    with server.database.transaction() as session:
        sandbox_id = session.execute(
            select(Sandbox.id)
            .join(Playground, Playground.id == Sandbox.playground_id)
            .where(Playground.task_run_id == task_run_id, Sandbox.type == "voice")
        ).scalar_one()
    with server.database.engine.begin() as conn:
        assert admit(conn, sandbox_id).task_run_phase == "started"
    with server.client(token) as agent:
        ok(agent.post(f"/v1/task-runs/{task_run_id}/complete"))
    with server.database.engine.begin() as conn:
        with pytest.raises(SandboxClosed, match="completed"):
            admit(conn, sandbox_id)
        row = admit(conn, sandbox_id, system=True)
        assert (row.task_run_id, row.task_run_phase) == (task_run_id, "completed")
        with pytest.raises(SandboxClosed, match="does not exist"):
            admit(conn, "sbx_none", system=True)
