"""The files API of a started task run (SPEC §5.2), over HTTP against the real service."""

from __future__ import annotations

import hashlib
from collections.abc import Iterator

import httpx
import pytest

from tests.service.builders import error, make_benchmark, ok, start_run
from tests.service.conftest import Server


@pytest.fixture
def files(server: Server, api: httpx.Client) -> Iterator[tuple[httpx.Client, str, str]]:
    """(run-token client, files base, task run id) of a freshly started task run."""
    catalog = make_benchmark(api, [[]])
    run = start_run(api, catalog.benchmark_id)
    [task_run] = run.task_runs
    with server.client(run.token) as client:
        started = ok(client.post(task_run["start_url"]))
        yield client, started["endpoints"]["files"], task_run["id"]


def test_put_get_list_delete(files: tuple[httpx.Client, str, str], api: httpx.Client) -> None:
    client, base, task_run_id = files
    body = b'{"member_id": "M1"}'
    created = ok(
        client.put(f"{base}/outbox/referral.json", content=body, headers={"X-Assay-Meta-Source": "fax"}), 201
    )
    assert created["sha256"] == hashlib.sha256(body).hexdigest()
    assert created["content_type"] == "application/json" and created["metadata"] == {"source": "fax"}
    assert created["seeded"] is False and created["uploaded_at"].endswith("Z")
    replaced = ok(
        client.put(f"{base}/outbox/referral.json", content=b"{}", headers={"Content-Type": "text/plain"})
    )
    assert replaced["content_type"] == "text/plain" and replaced["size"] == 2
    got = client.get(f"{base}/outbox/referral.json")
    assert (
        got.status_code == 200
        and got.content == b"{}"
        and got.headers["content-type"].startswith("text/plain")
    )
    assert got.headers["etag"] == f'"{hashlib.sha256(b"{}").hexdigest()}"'
    listed = ok(client.get(base))["data"]
    assert [entry["path"] for entry in listed] == ["outbox/referral.json"]
    assert ok(client.get(f"{base}/outbox"))["data"] == listed
    assert ok(client.get(base, params={"prefix": "inbox"}))["data"] == []
    assert client.delete(f"{base}/outbox/referral.json").status_code == 204
    error(client.get(f"{base}/outbox/referral.json"), 404, "NOT_FOUND")
    error(client.delete(f"{base}/outbox/referral.json"), 404, "NOT_FOUND")
    events = ok(api.get(f"/task-runs/{task_run_id}/events", params={"limit": 100}))["data"]
    assert [(e["type"], e["method"], e["status"]) for e in events] == [
        ("file_upload", "PUT", 201),
        ("file_upload", "PUT", 200),
        ("file_download", "GET", 200),
        ("file_delete", "DELETE", 204),
        ("file_download", "GET", 404),
        ("file_delete", "DELETE", 404),
    ]
    assert events[0]["request"] == {
        "path": "outbox/referral.json",
        "size": len(body),
        "sha256": created["sha256"],
    }


def test_refusals_are_precise(files: tuple[httpx.Client, str, str]) -> None:
    client, base, _ = files
    # Percent-encoded dots reach the route as they are (a client normalises only literal `..`).
    climbing = client.get(f"{base}/a/%2e%2e/%2e%2e/etc/passwd")
    assert error(climbing, 400, "BAD_REQUEST") == {}
    assert (
        climbing.json()["error"]["message"]
        == "path 'a/../../etc/passwd' climbs above the root of the file tree"
    )
    error(client.put(f"{base}/a%00b", content=b"x"), 400, "BAD_REQUEST")
    ok(client.put(f"{base}/folder/a.txt", content=b"x"), 201)
    error(client.put(f"{base}/folder", content=b"x"), 409, "CONFLICT")
    error(client.put(f"{base}/folder/a.txt/b", content=b"x"), 409, "CONFLICT")
    error(client.delete(f"{base}/folder"), 409, "CONFLICT")
    assert [entry["path"] for entry in ok(client.get(base))["data"]] == ["folder/a.txt"]


def test_over_the_limit_is_413_and_stores_nothing(
    files: tuple[httpx.Client, str, str], server: Server
) -> None:
    client, base, _ = files
    limit = 25 * 1024 * 1024
    error(client.put(f"{base}/big.bin", content=b"z" * (limit + 1)), 413, "PAYLOAD_TOO_LARGE")

    def chunks():  # type: ignore[no-untyped-def]
        for _ in range(26):
            yield b"z" * (1024 * 1024)

    error(client.put(f"{base}/big.bin", content=chunks()), 413, "PAYLOAD_TOO_LARGE")
    assert ok(client.get(base))["data"] == []


def test_after_complete_the_files_refuse_traffic(files: tuple[httpx.Client, str, str]) -> None:
    client, base, task_run_id = files
    ok(client.put(f"{base}/a.txt", content=b"x"), 201)
    ok(client.post(f"/v1/task-runs/{task_run_id}/complete"))
    error(client.get(base), 409, "CONFLICT")
    error(client.put(f"{base}/b.txt", content=b"x"), 409, "CONFLICT")
