"""Payer portal benchmark: p50 server time of the web portal's pages and the REST surface.

    uv run python bench/bench_portal.py [--repeat 200] [--rows 200]

Builds a run in-process on the embedded default (SQLite in a temporary data dir): a portal dataset
with its payer and N prior-auth rows, one started task run. A signed-in session then times, through
the ASGI app (no network): the member-lookup page (GET), the eligibility summary (POST lookup), a
prior-auth status page, the prior-auth form submission (POST → 303, a determination and a row
write each), and the REST `GET …/portal/prior_auth_requests/{key}`. The peer is a bare FastAPI
route answering the same status page's HTML from memory, in the same process and run: its p50 is
what the framework and the test client cost, so each ratio is the portal's own work.
"""

from __future__ import annotations

import argparse
import os
import platform
import re
import statistics
import tempfile
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

from fastapi import FastAPI
from fastapi.responses import HTMLResponse
from fastapi.testclient import TestClient

from assay.service.app import create_app
from assay.service.settings import Settings

KEY = "vk_bench_" + uuid.uuid4().hex
PAYER = {
    "payer": {"id": "ACME01", "name": "Acme Health"},
    "members": [
        {"member_id": f"M{i:04d}", "first_name": "Ann", "last_name": f"Lee{i}", "birth_date": "1980-04-02",
         "plan": "Gold PPO", "benefits": [{"service_type": "30", "coverage": "active", "copay": 25}]}
        for i in range(200)
    ],
    "authorization_rules": [{"procedure_code": "70551", "determination": "approved"}],
}  # fmt: skip


def _timed(call: Callable[[], Any], repeat: int, status: int = 200) -> list[float]:
    samples = []
    for _ in range(repeat):
        started = time.perf_counter()
        response = call()
        samples.append((time.perf_counter() - started) * 1000)
        assert response.status_code == status, response.text[:300]
    return samples


def _ok(response: Any, status: int = 200) -> Any:
    assert response.status_code == status, response.text[:300]
    return response.json()


def _started(client: TestClient, rows: int) -> tuple[str, str, Any]:
    seeded = [
        {"request_id": f"PA{i:06d}", "patient": {"member_id": f"M{i % 200:04d}"}, "provider": {"npi": "1"},
         "procedure_code": "70551", "status": "approved", "auth_number": f"AUTH{i:06d}"}
        for i in range(rows)
    ]  # fmt: skip
    data = {"payer": PAYER, "resources": {"prior_auth_requests": {"rows": seeded}}}
    dataset = _ok(client.post("/datasets", json={"name": "bench", "type": "portal", "data": data}), 201)
    environment = _ok(client.post("/environments", json={"name": "e", "dataset_ids": [dataset["id"]]}), 201)
    benchmark = _ok(client.post("/benchmarks", json={"name": "b", "environment_id": environment["id"]}), 201)
    _ok(client.post("/tasks", json={"benchmark_id": benchmark["id"], "name": "t"}), 201)
    run = _ok(client.post("/v1/benchmark-runs", json={"benchmark_id": benchmark["id"]}), 201)
    token, task_run_id = run["bearer_token"], run["task_runs"][0]["id"]
    started = _ok(
        client.post(f"/v1/task-runs/{task_run_id}/start", headers={"Authorization": f"Bearer {token}"})
    )
    return token, task_run_id, started["credentials"]["portal"]


def _csrf(page: Any) -> str:
    found = re.search(r'name="csrf_token" value="([^"]+)"', page.text)
    assert found is not None
    return found.group(1)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeat", type=int, default=200)
    parser.add_argument("--rows", type=int, default=200)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as data_dir:
        settings = Settings(data_dir=Path(data_dir), bootstrap_api_key=KEY, sweep_interval=0)
        with TestClient(create_app(settings), headers={"Authorization": f"Bearer {KEY}"}) as client:
            token, task_run_id, portal = _started(client, args.rows)
            web = portal["portal_url"]
            csrf = _csrf(client.get(f"{web}/login"))
            login = {"username": portal["username"], "password": portal["password"], "csrf_token": csrf}
            assert client.post(f"{web}/login", data=login, follow_redirects=False).status_code == 303
            csrf = _csrf(client.get(f"{web}/members"))
            lookup = {"member_id": "M0007", "birth_date": "1980-04-02", "csrf_token": csrf}
            form = {"member_id": "M0007", "provider_npi": "1234567893", "procedure_code": "70551",
                    "csrf_token": csrf}  # fmt: skip
            status_page = client.get(f"{web}/prior-auth/PA000007")
            html = status_page.text
            rest = {"Authorization": f"Bearer {token}"}
            n = args.repeat
            timings = {
                "member lookup page (GET)": _timed(lambda: client.get(f"{web}/members"), n),
                "eligibility summary (POST lookup)": _timed(lambda: client.post(f"{web}/members", data=lookup), n),
                "prior-auth status page (GET)": _timed(lambda: client.get(f"{web}/prior-auth/PA000007"), n),
                "prior-auth form submit (POST → 303)": _timed(
                    lambda: client.post(f"{web}/prior-auth", data=form, follow_redirects=False), n, 303
                ),
                "REST GET prior_auth_requests/{key}": _timed(
                    lambda: client.get(
                        f"/v1/task-runs/{task_run_id}/portal/prior_auth_requests/PA000007", headers=rest
                    ),
                    n,
                ),
            }  # fmt: skip
        bare = FastAPI()
        bare.get("/page")(lambda: HTMLResponse(html))
        with TestClient(bare) as peer:
            hello = _timed(lambda: peer.get("/page"), n)
    peer_p50 = statistics.median(hello)
    print(
        f"machine: {platform.processor() or platform.machine()}, {os.cpu_count()} CPUs; load {os.getloadavg()}"
    )
    print(f"{args.rows} prior-auth rows, 200 members, {n} requests each (in-process ASGI, SQLite)")
    print(f"{'bare FastAPI HTML page (peer)':40s} p50 {peer_p50:7.2f} ms")
    for name, samples in timings.items():
        p50 = statistics.median(samples)
        p99 = sorted(samples)[int(len(samples) * 0.99) - 1]
        print(f"{name:40s} p50 {p50:7.2f} ms  p99 {p99:7.2f} ms  x{p50 / peer_p50:5.1f} the peer")


if __name__ == "__main__":
    main()
