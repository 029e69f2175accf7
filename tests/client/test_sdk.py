"""`assay.client` against a live server: CRUD, every page, the /v1 run flow, errors and retries."""

from __future__ import annotations

import asyncio
import threading
import time
import uuid
from collections.abc import Iterator

import httpx
import pytest

from assay.client import (
    Assay,
    AssayError,
    AsyncAssay,
    AuthenticationError,
    ConflictError,
    Criterion,
    NotFoundError,
    RateLimitError,
    ValidationError,
    _http,
)
from assay.service.settings import Settings
from tests.service.conftest import BOOTSTRAP_KEY, Server, _serve

PASSES = {"assert": "voice-transcript", "speaker": "agent", "not_contains": ["social security number"]}
FAILS = {"assert": "voice-transcript", "speaker": "agent", "contains": ["member ID", "date of birth"]}


def _unique(name: str) -> str:
    return f"{name} {uuid.uuid4().hex[:8]}"


def test_criteria_crud_and_typed_models(assay: Assay) -> None:
    benchmark = assay.benchmarks.create(name=_unique("sdk"))
    task = assay.tasks.create(benchmark_id=benchmark.id, name="call the member", task_item={"goal": "x"})
    created = assay.criteria.create(task_id=task.id, label="disclosures", assertion=FAILS, weight=0.5)
    assert isinstance(created, Criterion)
    assert (created.task_id, created.weight, created.assertion) == (task.id, 0.5, FAILS)
    updated = assay.criteria.update(created.id, label="required disclosures", axis="compliance")
    assert (updated.label, updated.axis, updated.assertion) == ("required disclosures", "compliance", FAILS)
    assert assay.criteria.get(created.id) == updated
    fetched = assay.tasks.get(task.id)
    assert [c.id for c in fetched.criteria or []] == [created.id]
    assay.criteria.delete(created.id)
    with pytest.raises(NotFoundError) as missing:
        assay.criteria.get(created.id)
    assert (missing.value.status_code, missing.value.code) == (404, "NOT_FOUND")


def test_validation_error_carries_the_envelope(assay: Assay) -> None:
    benchmark = assay.benchmarks.create(name=_unique("sdk"))
    task = assay.tasks.create(benchmark_id=benchmark.id, name="t")
    bad = {**PASSES, "not_contains": ["ok"], "speeker": "agent"}
    with pytest.raises(ValidationError) as invalid:
        assay.criteria.create(task_id=task.id, label="typo", assertion=bad)
    error = invalid.value
    assert error.code == "VALIDATION_ERROR" and error.status_code == 422
    assert "assertion.speeker" in error.details, error.details
    assert error.retry_after is None
    assert isinstance(error, AssayError)


def test_list_iterates_every_page(assay: Assay, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_http, "PAGE_SIZE", 2)
    benchmark = assay.benchmarks.create(name=_unique("pages"))
    task = assay.tasks.create(benchmark_id=benchmark.id, name="t")
    made = [assay.criteria.create(task_id=task.id, label=f"c{i}", assertion=PASSES).id for i in range(5)]
    listed = [criterion.id for criterion in assay.criteria.list(task_id=task.id)]
    assert listed == made  # the task's order, across three pages


def test_run_flow_through_v1_and_the_drill_down(assay: Assay) -> None:
    benchmark = assay.benchmarks.create(name=_unique("flow"))
    task = assay.tasks.create(benchmark_id=benchmark.id, name="disclose")
    assay.criteria.create(task_id=task.id, label="no SSN", assertion=PASSES)
    assay.criteria.create(task_id=task.id, label="disclosures", assertion=FAILS)
    with pytest.raises(ConflictError) as refused:  # "no SSN" passes with an idle agent
        assay.benchmarks.publish(benchmark.id)
    assert "passes_idle" in str(refused.value.details)
    version = assay.benchmarks.publish(benchmark.id, force=True)
    assert version.version == 1

    run = assay.benchmark_runs.create(benchmark=f"{version.slug}@1", agent={"name": "sdk-test"})
    assert run.bearer_token.startswith("vrl_run_") and len(run.task_runs) == 1
    task_run_id = run.task_runs[0].id
    with pytest.raises(ConflictError):
        assay.task_runs.complete(task_run_id, run_token=run.bearer_token)
    started = assay.task_runs.start(task_run_id, run_token=run.bearer_token)
    assert started.phase == "started" and started.endpoints["fhir"].endswith("/fhir")
    assert started.task is not None and (started.task.id, started.task.name) == (task.id, "disclose")
    seen = assay.task_runs.task(task_run_id, run_token=run.bearer_token)
    assert seen == started.task and "criteria" not in seen.model_dump()
    result = assay.task_runs.complete(task_run_id, run_token=run.bearer_token)
    assert (result.verdict, result.score) == ("partial", 0.5)
    assert [check.passed for check in result.checks] == [True, False]
    assert result.checks[1].evidence is not None

    summary = assay.benchmark_runs.summary(run.benchmark_run_id, run_token=run.bearer_token)
    assert (summary.status, summary.score) == ("completed", 0.5)
    full = assay.benchmark_runs.get(run.benchmark_run_id)
    assert full.task_runs is not None and full.task_runs[0].id == task_run_id
    assert run.benchmark_run_id in [r.id for r in assay.benchmark_runs.list(benchmark_id=benchmark.id)]
    task_run = assay.task_runs.get(task_run_id)
    assert task_run.snapshot is not None and len(task_run.snapshot["criteria"]) == 2
    runs = list(assay.criterion_runs.list(task_run_id=task_run_id))
    detail = assay.criterion_runs.get(next(r.id for r in runs if not r.passed))
    assert detail.details and detail.evidence

    again = assay.task_runs.rescore(task_run_id)
    assert again.score == 0.5
    superseded = [r for r in assay.criterion_runs.list(task_run_id=task_run_id) if r.superseded]
    assert len(superseded) == 2
    assert assay.task_runs.state(task_run_id)[:2] == b"\x1f\x8b"  # a gzip archive


def test_bad_key_is_an_authentication_error(server: Server) -> None:
    with (
        Assay(api_key="vk_wrong", base_url=server.url) as client,
        pytest.raises(AuthenticationError) as denied,
    ):
        client.benchmarks.get("bm_01ARZ3NDEKTSV4RRFFQ69G5FAV")
    assert denied.value.code == "UNAUTHORIZED"


def test_health_needs_no_key(server: Server) -> None:
    with Assay(api_key="", base_url=server.url) as client:
        assert client.health()["status"] == "ok"


def test_environment_settings_reach_the_client(server: Server, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ASSAY_API_KEY", server.org_key)
    monkeypatch.setenv("ASSAY_BASE_URL", server.url + "/")
    with Assay() as client:
        assert client.base_url == server.url
        assert client.benchmarks.create(name=_unique("env")).id.startswith("bm_")


def test_async_client(server: Server) -> None:
    async def scenario() -> list[str]:
        async with AsyncAssay(api_key=server.org_key, base_url=server.url) as client:
            benchmark = await client.benchmarks.create(name=_unique("async"))
            task = await client.tasks.create(benchmark_id=benchmark.id, name="t")
            await client.criteria.create(task_id=task.id, label="a", assertion=PASSES)
            with pytest.raises(NotFoundError):
                await client.tasks.get("task_01ARZ3NDEKTSV4RRFFQ69G5FAV")
            return [criterion.label async for criterion in client.criteria.list(task_id=task.id)]

    assert asyncio.run(scenario()) == ["a"]


@pytest.fixture(scope="module")
def limited(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A server allowing each token 2 requests a second, a burst of 1: the second call in a row is a 429."""
    settings = Settings(
        data_dir=tmp_path_factory.mktemp("limited"),
        bootstrap_api_key=BOOTSTRAP_KEY,
        rate_limit=2,
        rate_limit_burst=1,
    )
    for url, _app in _serve(settings):
        yield url


def test_429_is_retried_after_retry_after(limited: str) -> None:
    waits: list[float] = []

    def sleep(seconds: float) -> None:
        waits.append(seconds)
        time.sleep(seconds)

    with Assay(api_key=BOOTSTRAP_KEY, base_url=limited, sleep=sleep) as client:
        first = client.benchmarks.create(name=_unique("rl"))
        second = client.benchmarks.get(first.id)
    assert second.id == first.id
    assert waits == [1.0]  # the server's Retry-After (whole seconds), not our own backoff


def test_429_after_the_retries_carries_retry_after(limited: str) -> None:
    client = Assay(api_key=BOOTSTRAP_KEY, base_url=limited, max_retries=0)
    with client, pytest.raises(RateLimitError) as limited_error:
        for _ in range(3):
            list(client.benchmarks.list())
    error = limited_error.value
    assert (error.code, error.status_code, error.retry_after) == ("RATE_LIMITED", 429, 1.0)
    assert error.details["retry_after"] > 0


def test_503_backs_off_and_then_succeeds() -> None:
    """A 503 without Retry-After (a proxy in front of Assay) gets exponential backoff."""
    answers = iter([503, 503, 200])
    seen: list[float] = []

    def handler(request: httpx.Request) -> httpx.Response:
        status = next(answers)
        if status == 503:
            return httpx.Response(
                503, json={"error": {"code": "UNAVAILABLE", "message": "busy", "details": {}}}
            )
        return httpx.Response(200, json={"status": "ok"})

    http = httpx.Client(base_url="http://assay.test", transport=httpx.MockTransport(handler))
    client = Assay(api_key="vk_x", http_client=http, backoff=0.1, sleep=seen.append)
    assert client.health() == {"status": "ok"}
    assert len(seen) == 2 and 0.05 <= seen[0] <= 0.1 and 0.1 <= seen[1] <= 0.2


def test_retry_after_longer_than_the_cap_is_raised_at_once() -> None:
    calls = threading.Semaphore(0)

    def handler(request: httpx.Request) -> httpx.Response:
        calls.release()
        return httpx.Response(
            503,
            headers={"Retry-After": "Wed, 21 Oct 2099 07:28:00 GMT"},
            json={"error": {"code": "UNAVAILABLE", "message": "maintenance", "details": {}}},
        )

    http = httpx.Client(base_url="http://assay.test", transport=httpx.MockTransport(handler))
    with pytest.raises(AssayError) as unavailable:
        Assay(api_key="vk_x", http_client=http, sleep=lambda _s: None).health()
    assert unavailable.value.code == "UNAVAILABLE" and (unavailable.value.retry_after or 0) > 1e6
    assert calls.acquire(blocking=False) and not calls.acquire(blocking=False)  # asked once


def test_connection_refused_is_a_connection_error() -> None:
    with socket_closed_port() as url, pytest.raises(AssayError) as refused:
        Assay(api_key="vk_x", base_url=url, max_retries=1, sleep=lambda _s: None).health()
    assert refused.value.code == "CONNECTION_ERROR"


class socket_closed_port:
    """A URL on a port nothing listens on (bound then closed)."""

    def __enter__(self) -> str:
        import socket

        sock = socket.socket()
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
        sock.close()
        return f"http://127.0.0.1:{port}"

    def __exit__(self, *_exc: object) -> None:
        return None


def test_publish_waits_for_the_self_tests_longer_than_other_calls() -> None:
    # Publishing self-tests every task inside the request: a 40-task benchmark on a busy
    # PostgreSQL server outlasted the client's default 60 s read timeout.
    read_timeouts: dict[str, float] = {}

    def handler(request: httpx.Request) -> httpx.Response:
        read_timeouts[request.url.path] = request.extensions["timeout"]["read"]
        if request.url.path.endswith("/publish"):
            return httpx.Response(
                409, json={"error": {"code": "CONFLICT", "message": "self-tests failed", "details": {}}}
            )
        return httpx.Response(200, json={"status": "ok"})

    http = httpx.Client(base_url="http://assay.test", transport=httpx.MockTransport(handler))
    client = Assay(api_key="vk_x", http_client=http, sleep=lambda _s: None)
    client.health()
    with pytest.raises(AssayError):
        client.benchmarks.publish("bm_1")
    publish = read_timeouts.pop("/benchmarks/bm_1/publish")
    assert publish == 600.0 and all(other < publish for other in read_timeouts.values())
