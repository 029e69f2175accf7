"""Viewer benchmark: server time of the task-run page with 50 criteria and 2,000 events.

    uv run python bench/bench_viewer.py [--criteria 50] [--events 2000] [--repeat 20]

Builds a run in-process on the embedded default (SQLite in a temporary data dir): a task with N
criteria (voice and FHIR checks, some failing so their evidence tables render), one completed task
run, and M FHIR events with realistic bodies inserted into its sandbox. Then it renders
`GET /ui/task-runs/{id}` R times through the ASGI app (no network) and prints p50/p99. For scale it
also times the JSON drill-down `GET /task-runs/{id}` in the same run and prints the ratio.
Target: p50 < 300 ms server-side.
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

from fastapi.testclient import TestClient
from sqlalchemy import insert, select

from assay.service.app import create_app
from assay.service.settings import Settings
from assay.store import new_id, utcnow
from assay.store.models import Sandbox, SandboxEvent

KEY = "vk_bench_" + uuid.uuid4().hex
PATIENT = {"resourceType": "Patient", "id": "p1", "name": [{"family": "Smith", "given": ["John"]}]}


def _criteria(count: int) -> list[dict[str, Any]]:
    shapes = [
        {"assert": "voice-transcript", "speaker": "agent", "not_contains": ["social security number"]},
        {"assert": "voice-transcript", "speaker": "agent", "contains": ["member ID", "date of birth"]},
        {
            "assert": "fhir-resource-state",
            "resource_type": "Appointment",
            "search": {"status": "booked"},
            "fields": [{"path": "participant.0.actor.display", "expected": "Dr. Rivera"}],
        },
    ]
    return [
        {"label": f"criterion {i}", "assertion": shapes[i % len(shapes)], "weight": 1 + i % 3}
        for i in range(count)
    ]


def _timed(client: TestClient, path: str, repeat: int, headers: dict[str, str] | None = None) -> list[float]:
    samples = []
    for _ in range(repeat):
        started = time.perf_counter()
        response = client.get(path, headers=headers)
        samples.append((time.perf_counter() - started) * 1000)
        assert response.status_code == 200, response.text[:300]
    return samples


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--criteria", type=int, default=50)
    parser.add_argument("--events", type=int, default=2000)
    parser.add_argument("--repeat", type=int, default=20)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="assay-bench-viewer-") as folder:
        app = create_app(Settings(data_dir=Path(folder), bootstrap_api_key=KEY))
        with TestClient(app) as client:
            auth = {"Authorization": f"Bearer {KEY}"}
            benchmark = client.post("/benchmarks", json={"name": "viewer bench"}, headers=auth).json()
            task = client.post(
                "/tasks", json={"benchmark_id": benchmark["id"], "name": "t"}, headers=auth
            ).json()
            for body in _criteria(args.criteria):
                client.post(
                    "/criteria", json={"task_id": task["id"], **body}, headers=auth
                ).raise_for_status()
            run = client.post(
                "/v1/benchmark-runs", json={"benchmark_id": benchmark["id"]}, headers=auth
            ).json()
            token = {"Authorization": f"Bearer {run['bearer_token']}"}
            task_run = run["task_runs"][0]
            started = client.post(task_run["start_url"], headers=token).json()
            client.post(task_run["complete_url"], headers=token).raise_for_status()
            database = app.state.database
            with database.transaction() as session:
                sandbox = session.scalars(
                    select(Sandbox).where(Sandbox.playground_id == started["playground_id"])
                ).first()
                assert sandbox is not None
                now = utcnow()
                session.execute(
                    insert(SandboxEvent),
                    [
                        {
                            "id": new_id("evt_"),
                            "org_id": sandbox.org_id,
                            "sandbox_id": sandbox.id,
                            "seq": 10_000 + i,
                            "type": "fhir_request",
                            "method": "GET",
                            "path": f"/v1/task-runs/{task_run['id']}/fhir/Patient/p1",
                            "status": 200,
                            "request": None,
                            "response": PATIENT,
                            "truncated": False,
                            "created_at": now,
                        }
                        for i in range(args.events)
                    ],
                )
            client.cookies.set("assay_viewer", KEY, path="/ui")
            page = f"/ui/task-runs/{task_run['id']}"
            _timed(client, page, 2)  # warm-up: templates compiled, caches filled
            html = _timed(client, page, args.repeat)
            api = _timed(client, f"/task-runs/{task_run['id']}", args.repeat, auth)
    p50, p99 = (
        statistics.median(html),
        max(html) if len(html) < 100 else statistics.quantiles(html, n=100)[98],
    )
    print(f"machine: {platform.machine()}, {os.cpu_count()} cores, load {os.getloadavg()[0]:.2f}")
    print(
        f"task-run page, {args.criteria} criteria, {args.events} events: p50 {p50:.1f} ms, worst {p99:.1f} ms"
    )
    print(f"JSON drill-down GET /task-runs/{{id}} p50 {statistics.median(api):.1f} ms")
    print(
        f"page / JSON: x{p50 / statistics.median(api):.1f}; target p50 < 300 ms: {'met' if p50 < 300 else 'MISSED'}"
    )


if __name__ == "__main__":
    main()
