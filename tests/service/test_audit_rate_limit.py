"""SPEC §5: per-token rate limits, when configured, cover every endpoint a token calls. The FHIR
surface resolved the run token itself and skipped the limiter, so an agent's FHIR traffic (most of
what a run token sends) was never limited."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from assay.service.settings import Settings

from .builders import error, ok
from .conftest import BOOTSTRAP_KEY, _serve


@pytest.fixture(scope="module")
def limited(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, Any]]:
    settings = Settings(
        data_dir=Path(tmp_path_factory.mktemp("limited-fhir")),
        bootstrap_api_key=BOOTSTRAP_KEY,
        sweep_interval=0,
        rate_limit=0.01,
        rate_limit_burst=4,
    )
    yield from _serve(settings)


def test_the_fhir_surface_counts_against_the_run_token(limited: tuple[str, Any]) -> None:
    url, _ = limited
    with httpx.Client(base_url=url, headers={"Authorization": f"Bearer {BOOTSTRAP_KEY}"}) as org:
        benchmark = ok(org.post("/benchmarks", json={"name": "limited"}), 201)
        ok(org.post("/tasks", json={"benchmark_id": benchmark["id"], "name": "t"}), 201)
        run = ok(org.post("/v1/benchmark-runs", json={"benchmark_id": benchmark["id"]}), 201)
    with httpx.Client(base_url=url, headers={"Authorization": f"Bearer {run['bearer_token']}"}) as agent:
        fhir = ok(agent.post(run["task_runs"][0]["start_url"]))["endpoints"]["fhir"]
        statuses = [agent.get(f"{fhir}/metadata").status_code for _ in range(4)]
        assert statuses == [200, 200, 200, 429]
        refused = agent.get(f"/v1/benchmark-runs/{run['benchmark_run_id']}/fhir/metadata")
        assert error(refused, 429, "RATE_LIMITED")["retry_after"] > 0
        assert int(refused.headers["Retry-After"]) >= 1
