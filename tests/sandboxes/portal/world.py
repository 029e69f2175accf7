"""A payer portal world for the tests: a portal dataset with its payer definition, a benchmark whose
task asks for a prior authorization, and helpers to run it through the public API.

The payer, members and codes are made up for these tests (CPT 70551 is MRI of the brain without
contrast, 27447 total knee arthroplasty; ICD-10 G43.909 migraine, M17.11 knee osteoarthritis).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import httpx

from tests.service.builders import ok, unique
from tests.service.conftest import Server

Json = dict[str, Any]

PAYER: Json = {
    "payer": {"name": "Acme Health", "id": "ACME01", "id_qualifier": "PI"},
    "members": [
        {
            "member_id": "M1001",
            "first_name": "Ann",
            "last_name": "Lee",
            "birth_date": "1980-04-02",
            "group_number": "G-77",
            "plan": "Acme Gold PPO",
            "coverage": {"start": "2026-01-01", "end": "2026-12-31"},
            "benefits": [
                {"service_type": "30", "coverage": "active", "in_network": True, "copay": "25.00",
                 "deductible": "1500", "deductible_remaining": "600", "auth_required": False},
                {"service_type": "MRI", "coverage": "active", "in_network": True, "coinsurance": "0.2",
                 "auth_required": True, "message": "Prior authorization required for advanced imaging"},
            ],
        },
        {"member_id": "M1002", "first_name": "Bo", "last_name": "Diaz", "birth_date": "1975-11-30"},
    ],
    "authorization_rules": [
        {"procedure_code": "70551", "determination": "approved"},
        {"procedure_code": "27447", "determination": "denied", "reason": "conservative therapy not documented"},
    ],
    "default_determination": {"determination": "pended", "reason": "clinical review"},
}  # fmt: skip

PORTAL: Json = {
    "payer": PAYER,
    "resources": {
        "patients": {"rows": [{"member_id": "M1001", "name": "Ann Lee", "birth_date": "1980-04-02"}]},
        "providers": {"rows": [{"npi": "1234567893", "name": "Dr. Rivera"}]},
        "prior_auth_requests": {"rows": []},
        "referrals": {"key": "referral_id", "rows": [{"referral_id": "R1", "member_id": "M1001"}]},
    },
}

SUBMISSION: Json = {
    "patient": {"member_id": "M1001", "birth_date": "1980-04-02"},
    "provider": {"npi": "1234567893", "name": "Dr. Rivera"},
    "procedure_code": "70551",
    "diagnosis_codes": ["G43.909"],
    "service_date": "2026-12-01",
}
"""A prior authorization request for the seeded member M1001 that the payer's rules approve."""

MRI_APPROVED = {
    "assert": "portal-state-match",
    "correlate_by": {"resource": "prior_auth_requests", "key": "patient.member_id", "value": "M1001"},
    "assertions": [
        {"path": "procedure_code", "expected": "70551"},
        {"path": "status", "expected": "approved"},
        {"path": "provider.npi", "expected": "1234567893"},
    ],
    "match": "any",
}


@dataclass
class Started:
    server: Server
    run_token: str
    task_run_id: str
    body: Json

    def agent(self) -> httpx.Client:
        return self.server.client(self.run_token)

    @property
    def portal(self) -> str:
        return f"/v1/task-runs/{self.task_run_id}/portal"

    @property
    def web(self) -> str:
        return self.server.url + self.body["credentials"]["portal"]["portal_url"]

    @property
    def credentials(self) -> Json:
        creds: Json = self.body["credentials"]["portal"]
        return creds


def dataset(api: httpx.Client, kind: str, data: Json) -> str:
    return str(ok(api.post("/datasets", json={"name": unique(kind), "type": kind, "data": data}), 201)["id"])


def start_portal_task(
    server: Server,
    api: httpx.Client,
    criteria: list[Json],
    *,
    datasets: list[str] | None = None,
    scenario: list[Json] | None = None,
) -> Started:
    """A one-task benchmark over the payer and portal datasets, created, run and started."""
    ids = datasets if datasets is not None else [dataset(api, "portal", PORTAL)]
    environment = ok(api.post("/environments", json={"name": unique("env"), "dataset_ids": ids}), 201)
    benchmark = ok(
        api.post("/benchmarks", json={"name": unique("portal"), "environment_id": environment["id"]}), 201
    )
    task: Json = {"benchmark_id": benchmark["id"], "name": "prior auth"}
    if scenario:
        task["scenario"] = scenario
    task_id = ok(api.post("/tasks", json=task), 201)["id"]
    for i, assertion in enumerate(criteria):
        ok(api.post("/criteria", json={"task_id": task_id, "label": f"c{i}", "assertion": assertion}), 201)
    created = ok(api.post("/v1/benchmark-runs", json={"benchmark_id": benchmark["id"]}), 201)
    token, task_run_id = created["bearer_token"], created["task_runs"][0]["id"]
    with server.client(token) as agent:
        body = ok(agent.post(f"/v1/task-runs/{task_run_id}/start"))
    return Started(server, token, task_run_id, body)


def complete(started: Started) -> Json:
    with started.agent() as agent:
        return ok(agent.post(f"/v1/task-runs/{started.task_run_id}/complete"))
