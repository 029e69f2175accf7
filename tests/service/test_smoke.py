"""The smallest vertical slice: auth, one resource, the envelope."""

from __future__ import annotations

import httpx

from .conftest import Server


def test_criteria_need_a_key(server: Server) -> None:
    with server.client("") as anonymous:
        response = anonymous.get("/criteria")
    assert response.status_code == 401
    assert response.json()["error"]["code"] == "UNAUTHORIZED"


def test_create_and_read_benchmark(api: httpx.Client) -> None:
    created = api.post("/benchmarks", json={"name": "smoke"})
    assert created.status_code == 201, created.text
    body = created.json()
    assert body["id"].startswith("bm_") and body["created_at"].endswith("Z")
    assert api.get(f"/benchmarks/{body['id']}").json() == body
