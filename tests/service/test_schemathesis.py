"""schemathesis over the app's own `/openapi.json` (issue 9): every operation, bounded examples,
with the server-error, status-code, content-type and response-schema checks, 0 failures.

It reaches real handlers, not 401s: API operations carry an org key, `/v1` run operations a run
token, and every path parameter is a real id from `targets` (generated values would only ever find
404s). Two benchmark runs keep the cases apart: the sandbox surfaces use one whose task run stays
started (so they answer as they do for an agent), everything else (start, complete, cancel,
rescore…) a second one; DELETE operations get throwaway objects of their own, so deleting never
blinds the other cases. Hand-picked hostile values are `test_api_fuzz.py`'s; this is the generator
reading the documented schemas, which is what keeps the documentation honest.

Bounded: the examples and fuzzing phases, a few examples per operation, derandomized, on SQLite
(the backends share every handler; `test_unstorable_text.py` and the fuzz test cover both).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import schemathesis
from schemathesis.checks import not_a_server_error
from schemathesis.config import SchemathesisConfig
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    response_schema_conformance,
    status_code_conformance,
)

from assay.service.app import create_app
from assay.service.settings import Settings

from .builders import catalog_of_every_kind, ok, one_patient_bundle, start_run
from .conftest import Server

Json = dict[str, Any]

CHECKS = [not_a_server_error, status_code_conformance, content_type_conformance, response_schema_conformance]
CONFIG = SchemathesisConfig.from_dict(
    {
        "seed": 9,
        "phases": {"coverage": {"enabled": False}, "stateful": {"enabled": False}},
        "generation": {"max-examples": 6, "deterministic": True, "database": "none"},
    }
)
SCHEMA = schemathesis.openapi.from_dict(
    create_app(Settings(data_dir=Path("unused"))).openapi(), config=CONFIG
)


@pytest.fixture(scope="module")
def targets(server: Server) -> Iterator[Json]:
    with server.client() as api:
        ids = catalog_of_every_kind(api, one_patient_bundle("Schema"))
        throwaway = catalog_of_every_kind(api, one_patient_bundle("Schema"))
        surfaces, other = (start_run(api, ids["benchmark_id"]) for _ in range(2))
        for run in (surfaces, other):
            with server.client(run.token) as agent:
                started = ok(agent.post(f"/v1/task-runs/{run.task_runs[0]['id']}/start"))
                if run is other:
                    ok(agent.post(f"/v1/task-runs/{run.task_runs[0]['id']}/complete"))
        other_task_run = other.task_runs[0]["id"]
        criterion_run = ok(api.get("/criterion-runs", params={"task_run_id": other_task_run}))["data"]
    ids |= {
        "benchmark_run_id": other.id,
        "task_run_id": other_task_run,
        "criterion_run_id": criterion_run[0]["id"] if criterion_run else "cr_none",
        "playground_id": started["playground_id"],
        "sandbox_id": started["playground_id"],
        "resource_type": "Patient",
        "resource_id": "p1",
        "version_id": "1",
        "patient_id": "p1",
        "compartment": "Patient",
        "owner_id": "p1",
        "resource": "patients",
        "key": "M1001",
        "path": "inbox/schema.txt",
    }
    yield {
        "ids": ids,
        "throwaway": throwaway,
        "surface": {"benchmark_run_id": surfaces.id, "task_run_id": surfaces.task_runs[0]["id"]},
        "surface_token": surfaces.token,
        "run_token": other.token,
        "url": server.url,
        "org_key": server.org_key,
    }


def _surface(path: str) -> bool:
    """A sandbox surface route: `/v1/<task-runs|benchmark-runs>/{id}/<surface>/…`."""
    parts = path.split("/")
    return path.startswith("/v1/") and len(parts) > 4


@pytest.mark.parametrize("server", ["sqlite"], indirect=True)
@SCHEMA.parametrize()
def test_the_api_conforms_to_its_own_schema(case: Any, targets: Json) -> None:
    path, method = case.operation.path, case.method.upper()
    surface = _surface(path)
    ids = targets["throwaway"] if method == "DELETE" and not path.startswith("/v1/") else targets["ids"]
    if surface:
        ids = {**ids, **targets["surface"]}
    for name in list(case.path_parameters or {}):
        if name in ids:
            case.path_parameters[name] = ids[name]
    if surface:
        token = targets["surface_token"]
    elif path.startswith("/v1/") and path != "/v1/benchmark-runs":
        token = targets["run_token"]
    else:
        token = targets["org_key"]
    case.call_and_validate(
        base_url=targets["url"], headers={"Authorization": f"Bearer {token}"}, checks=CHECKS, timeout=60
    )
