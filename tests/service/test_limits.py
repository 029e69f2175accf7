"""Limits (SPEC §5): per-token rate limits (off by default; when configured, 429 `RATE_LIMITED`
with `Retry-After`, counted per token, on every endpoint the token calls) and the request body cap
(413 in the envelope)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from assay.service.limits import RateLimiter
from assay.service.settings import Settings
from assay.store.tokens import ensure_org, mint_key

from .builders import error, ok
from .conftest import BOOTSTRAP_KEY, _serve


def _service(tmp_path_factory: pytest.TempPathFactory, **limits: Any) -> Iterator[tuple[str, Any]]:
    """The service with `limits` set (Settings fields), on a fresh data folder."""
    data_dir = Path(tmp_path_factory.mktemp("limits"))
    settings = Settings(
        data_dir=data_dir,
        bootstrap_api_key=BOOTSTRAP_KEY,
        sweep_interval=0,
        **limits,
    ).with_free_ports()
    yield from _serve(settings)


@pytest.fixture(scope="module")
def limited(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, Any]]:
    yield from _service(tmp_path_factory, rate_limit=0.01, rate_limit_burst=3)


def _new_org_key(app: Any, name: str) -> str:
    """A key of a new org: its own bucket, untouched by the other tests of the module."""
    with app.state.database.transaction() as session:
        return str(mint_key(session, ensure_org(session, name).id).token)


def test_limit_per_token(limited: tuple[str, Any]) -> None:
    url, app = limited
    other_key = _new_org_key(app, "other")
    with httpx.Client(base_url=url, headers={"Authorization": f"Bearer {BOOTSTRAP_KEY}"}) as client:
        for _ in range(3):
            ok(client.get("/benchmarks"))
        response = client.get("/benchmarks")
        details = error(response, 429, "RATE_LIMITED")
        assert int(response.headers["Retry-After"]) >= 1 and details["retry_after"] > 0
        ok(client.get("/benchmarks", headers={"Authorization": f"Bearer {other_key}"}))


def test_bucket_refills() -> None:
    limiter = RateLimiter(rate=1000, burst=1)
    assert limiter.acquire("k") == 0
    assert limiter.acquire("other") == 0
    wait = limiter.acquire("k")
    assert 0 <= wait <= 0.001


def test_the_fhir_surface_counts_against_the_run_token(limited: tuple[str, Any]) -> None:
    """The FHIR surface resolved the run token itself and skipped the limiter, so an agent's FHIR
    traffic (most of what a run token sends) was never limited."""
    url, app = limited
    with httpx.Client(base_url=url, headers={"Authorization": f"Bearer {_new_org_key(app, 'fhir')}"}) as org:
        benchmark = ok(org.post("/benchmarks", json={"name": "limited"}), 201)
        ok(org.post("/tasks", json={"benchmark_id": benchmark["id"], "name": "t"}), 201)
        run = ok(org.post("/v1/benchmark-runs", json={"benchmark_id": benchmark["id"]}), 201)
    with httpx.Client(base_url=url, headers={"Authorization": f"Bearer {run['bearer_token']}"}) as agent:
        fhir = ok(agent.post(run["task_runs"][0]["start_url"]))["endpoints"]["fhir"]
        statuses = [agent.get(f"{fhir}/metadata").status_code for _ in range(3)]
        assert statuses == [200, 200, 429]
        refused = agent.get(f"/v1/benchmark-runs/{run['benchmark_run_id']}/fhir/metadata")
        assert refused.status_code == 429 and int(refused.headers["Retry-After"]) >= 1
        assert refused.json()["issue"][0]["code"] == "throttled"  # an OperationOutcome, as FHIR errors are


@pytest.fixture(scope="module")
def small_bodies(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, Any]]:
    yield from _service(tmp_path_factory, max_body_bytes=2000)


def test_body_over_the_limit_is_413(small_bodies: tuple[str, Any]) -> None:
    url, _ = small_bodies
    with httpx.Client(base_url=url, headers={"Authorization": f"Bearer {BOOTSTRAP_KEY}"}) as client:
        ok(client.post("/benchmarks", json={"name": "small"}), 201)
        big = {"name": "d", "type": "voice", "data": {"turns": [{"speaker": "agent", "text": "x" * 3000}]}}
        error(client.post("/datasets", json=big), 413, "PAYLOAD_TOO_LARGE")


def test_a_chunked_body_over_the_limit_is_413_and_stores_nothing(small_bodies: tuple[str, Any]) -> None:
    """A body sent without Content-Length (chunked) was read whole, whatever its size: the cap only
    looked at the declared length. It is refused once the bytes received pass the cap."""
    url, _ = small_bodies
    big = json.dumps({"name": "chunked", "type": "voice", "data": {"turns": [{"text": "x" * 5000}]}})

    def chunks() -> Iterator[bytes]:
        data = big.encode()
        for start in range(0, len(data), 500):
            yield data[start : start + 500]

    with httpx.Client(base_url=url, headers={"Authorization": f"Bearer {BOOTSTRAP_KEY}"}) as client:
        sent = client.post("/datasets", content=chunks(), headers={"Content-Type": "application/json"})
        assert "content-length" not in {k.lower() for k in sent.request.headers}
        error(sent, 413, "PAYLOAD_TOO_LARGE")
        names = [d["name"] for d in ok(client.get("/datasets", params={"limit": 100}))["data"]]
        assert "chunked" not in names
        small = json.dumps({"name": "fits", "type": "voice", "data": {"turns": []}}).encode()
        ok(
            client.post(
                "/datasets",
                content=iter([small[:10], small[10:]]),
                headers={"Content-Type": "application/json"},
            ),
            201,
        )


def test_limits_are_read_from_the_environment() -> None:
    settings = Settings.from_env(
        {"ASSAY_MAX_BODY_BYTES": "2000", "ASSAY_RATE_LIMIT": "2.5", "ASSAY_RATE_LIMIT_BURST": "", "X": "1"}
    )
    assert (settings.max_body_bytes, settings.rate_limit, settings.rate_limit_burst) == (2000, 2.5, None)
    assert Settings.from_env({}) == Settings()


def test_a_malformed_number_in_the_environment_names_its_variable() -> None:
    with pytest.raises(ValueError, match="ASSAY_MAX_BODY_BYTES must be an integer, got '50MB'"):
        Settings.from_env({"ASSAY_MAX_BODY_BYTES": "50MB"})
    with pytest.raises(ValueError, match="ASSAY_SWEEP_INTERVAL must be a number"):
        Settings.from_env({"ASSAY_SWEEP_INTERVAL": "soon"})
    with pytest.raises(ValueError, match="ASSAY_BOOTSTRAP_API_KEY must be an org key starting with vk_"):
        Settings.from_env({"ASSAY_BOOTSTRAP_API_KEY": "secret"})
