"""Bad input gets the SPEC §5 envelope: 400 for unparseable JSON or query values, 422 naming the
key for a well-formed body that fails validation, never a 500."""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from .builders import error, make_benchmark


def test_malformed_json_is_400(api: httpx.Client) -> None:
    response = api.post("/benchmarks", content=b'{"name": "x",', headers={"Content-Type": "application/json"})
    error(response, 400, "BAD_REQUEST")


@pytest.mark.parametrize(
    ("path", "body", "key"),
    [
        ("/benchmarks", {"name": 123}, "name"),
        ("/benchmarks", {"name": "x", "timeout": "60"}, "timeout"),
        ("/benchmarks", {"name": "x", "concurrency": 0}, "concurrency"),
        ("/benchmarks", {}, "name"),
        ("/datasets", {"name": "d", "type": "dicom", "data": {}}, "type"),
        (
            "/datasets",
            {"name": "d", "type": "fhir", "data": {"resourceType": "Bundle", "type": "searchset"}},
            "data.type",
        ),
        ("/datasets", {"name": "d", "type": "files", "data": {"files": [{"path": 1}]}}, "data.files.0.path"),
        ("/solvers", {"name": ["a"]}, "name"),
        ("/v1/benchmark-runs", {"benchmark": "x", "scored": "yes"}, "scored"),
        ("/v1/benchmark-runs", {}, "benchmark"),
    ],
)
def test_wrong_types_are_422_naming_the_key(
    api: httpx.Client, path: str, body: dict[str, object], key: str
) -> None:
    assert key in error(api.post(path, json=body), 422, "VALIDATION_ERROR")


def test_criterion_weight_must_be_a_number(api: httpx.Client) -> None:
    task_id = make_benchmark(api, [[]]).task_ids[0]
    assertion = {"assert": "voice-transcript", "contains": ["hi"]}
    for weight in ("2", -1, True, None):
        body = {"task_id": task_id, "label": "x", "assertion": assertion, "weight": weight}
        assert "weight" in error(api.post("/criteria", json=body), 422, "VALIDATION_ERROR")
    assert "assertion" in error(
        api.post("/criteria", json={"task_id": task_id, "label": "x", "assertion": [1]}),
        422,
        "VALIDATION_ERROR",
    )


def test_body_of_the_wrong_shape(api: httpx.Client) -> None:
    error(api.post("/benchmarks", json=[1, 2]), 422, "VALIDATION_ERROR")
    error(
        api.post("/benchmarks", content=b"", headers={"Content-Type": "application/json"}),
        422,
        "VALIDATION_ERROR",
    )


def test_bad_query_values_are_400(api: httpx.Client) -> None:
    assert "limit" in error(api.get("/criteria", params={"limit": "many"}), 400, "BAD_REQUEST")
    assert "cursor" in error(api.get("/criteria", params={"cursor": "not-a-cursor"}), 400, "BAD_REQUEST")


def test_unknown_things(api: httpx.Client) -> None:
    error(api.get("/nothing-here"), 404, "NOT_FOUND")
    error(api.get("/benchmarks/bm_01J00000000000000000000000"), 404, "NOT_FOUND")


def test_tokens(server: object, api: httpx.Client) -> None:
    base = str(api.base_url)
    for header in (
        {},
        {"Authorization": "Bearer vk_wrong"},
        {"Authorization": "Basic abc"},
        {"Authorization": "Bearer vrl_run_nope"},
        {"Authorization": "Bearer something"},
    ):
        with httpx.Client(base_url=base, headers=header) as client:
            error(client.get("/benchmarks"), 401, "UNAUTHORIZED")


def test_delete_referenced_is_409(api: httpx.Client) -> None:
    dataset = api.post("/datasets", json={"name": "d", "type": "voice", "data": {"turns": []}}).json()
    environment = api.post("/environments", json={"name": "e", "dataset_ids": [dataset["id"]]}).json()
    benchmark = api.post("/benchmarks", json={"name": "b", "environment_id": environment["id"]}).json()
    error(api.delete(f"/datasets/{dataset['id']}"), 409, "CONFLICT")
    error(api.delete(f"/environments/{environment['id']}"), 409, "CONFLICT")
    assert api.delete(f"/benchmarks/{benchmark['id']}").status_code == 204
    assert api.delete(f"/environments/{environment['id']}").status_code == 204
    assert api.delete(f"/datasets/{dataset['id']}").status_code == 204
    bench = make_benchmark(api, [[]])
    error(api.delete(f"/benchmarks/{bench.benchmark_id}"), 409, "CONFLICT")


def test_values_the_database_cannot_hold_are_422(api: httpx.Client) -> None:
    assert "timeout" in error(
        api.post("/benchmarks", json={"name": "x", "timeout": 10**30}), 422, "VALIDATION_ERROR"
    )
    task_id = make_benchmark(api, [[]]).task_ids[0]
    assertion = {"assert": "voice-transcript", "contains": ["hi"]}
    for weight in (b"1e309", b"NaN", b"-Infinity"):
        body = (
            b'{"task_id": "%s", "label": "x", "weight": %s, "assertion": {"assert": "voice-transcript"}}'
            % (
                task_id.encode(),
                weight,
            )
        )
        response = api.post("/criteria", content=body, headers={"Content-Type": "application/json"})
        assert "weight" in error(response, 422, "VALIDATION_ERROR")
    body = {"task_id": task_id, "label": "x", "assertion": assertion, "axis": "a" * 500}
    assert "axis" in error(api.post("/criteria", json=body), 422, "VALIDATION_ERROR")
    error(
        api.post(
            "/benchmarks", content=b"[" * 5000 + b"]" * 5000, headers={"Content-Type": "application/json"}
        ),
        400,
        "BAD_REQUEST",
    )


def test_postgres_out_of_connection_slots_is_503_with_retry_after() -> None:
    """`max_connections` reached (SQLSTATE 53300) is the shared database saturated: 503 and
    Retry-After, like an empty pool, not a 500 (seen under 200 clients on 2 workers in CI)."""
    from fastapi import FastAPI
    from fastapi.testclient import TestClient
    from sqlalchemy.exc import OperationalError

    from assay.service.errors import install_error_handlers

    app = FastAPI()
    install_error_handlers(app)

    @app.get("/full")
    def full() -> None:
        refused = Exception("connection failed: FATAL:  sorry, too many clients already")
        raise OperationalError("connect", {}, refused)

    @app.get("/lost")
    def lost() -> None:
        raise OperationalError("select 1", {}, Exception("server closed the connection unexpectedly"))

    with TestClient(app, raise_server_exceptions=False) as client:
        answer = client.get("/full")
        assert answer.status_code == 503 and answer.headers["retry-after"] == "1"
        assert answer.json()["error"]["code"] == "UNAVAILABLE"
        assert client.get("/lost").status_code == 500


def test_a_dependency_down_is_503_service_unavailable_and_a_full_disk_507() -> None:
    """What the drivers raise when PostgreSQL is down or restarting, read-only, or a disk is full:
    503 `SERVICE_UNAVAILABLE` naming the database, with `Retry-After`, or 507 — not a 500. A bug
    that merely mentions a connection stays a 500."""
    import errno
    import sqlite3

    import psycopg
    from fastapi import FastAPI
    from fastapi.testclient import TestClient
    from psycopg import errors as pg
    from sqlalchemy.exc import InterfaceError, InternalError, OperationalError

    from assay.service.errors import install_error_handlers

    app = FastAPI()
    install_error_handlers(app)
    raised = {
        "refused": OperationalError(
            "connect", {}, psycopg.OperationalError("connection failed: Connection refused")
        ),
        "shutdown": OperationalError(
            "select", {}, pg.AdminShutdown("terminating connection due to administrator")
        ),
        "closed": InterfaceError("select", {}, psycopg.InterfaceError("the connection is closed")),
        "read-only": InternalError("insert", {}, pg.ReadOnlySqlTransaction("read-only transaction")),
        "sqlite full": OperationalError("insert", {}, sqlite3.OperationalError("database or disk is full")),
        "enospc": OSError(errno.ENOSPC, "No space left on device"),
        "bug": OperationalError("select", {}, Exception("server closed the connection unexpectedly")),
    }

    def failing(exc: Exception) -> Any:
        def fail() -> None:
            raise exc

        return fail

    for name, exc in raised.items():
        app.add_api_route(f"/{name}", failing(exc))

    with TestClient(app, raise_server_exceptions=False) as client:
        for name in ("refused", "shutdown", "closed", "read-only"):
            answer = client.get(f"/{name}")
            assert answer.status_code == 503 and answer.headers["retry-after"] == "1", (name, answer.text)
            error = answer.json()["error"]
            assert error["code"] == "SERVICE_UNAVAILABLE" and error["details"]["dependency"] == "database"
        for name in ("sqlite full", "enospc"):
            answer = client.get(f"/{name}")
            assert answer.status_code == 507 and answer.json()["error"]["code"] == "INSUFFICIENT_STORAGE"
        assert client.get("/bug").status_code == 500
