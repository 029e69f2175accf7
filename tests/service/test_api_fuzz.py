"""Property: no operation in the OpenAPI document answers 5xx to hostile input (SPEC §5).

Every operation the app publishes — the internal API, `/v1` and the FHIR sandbox routes — gets a
fixed, derandomized handful of requests over real HTTP: hostile raw bodies (unparseable, wrong
JSON types, absurd nesting, invalid UTF-8), the operation's own body keys set to values of the
wrong type or size, hostile query values, and path ids that are real, unknown or malformed.
Errors must be the SPEC §5 envelope (OperationOutcome on FHIR routes). Hand-picked values through
hypothesis rather than schemathesis' generator keep it deterministic and well under a minute; the
open-ended schemathesis and hostile-body runs found the cases pinned in `test_api_bad_input.py`.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from assay.service.app import create_app
from assay.service.settings import Settings

from .builders import catalog_of_every_kind, ok, one_patient_bundle, start_run
from .conftest import BOOTSTRAP_KEY, Server

Json = dict[str, Any]

_DOCUMENT: Json = create_app(Settings(data_dir=Path("unused"))).openapi()
OPERATIONS = sorted(
    (method.upper(), path)
    for path, item in _DOCUMENT["paths"].items()
    for method in item
    if method in ("get", "post", "put", "patch", "delete")
)


def _nested(depth: int) -> bytes:
    return b"[" * depth + b"]" * depth


RAW_BODIES = [
    b"",
    b"{",
    b"null",
    b"[]",
    b"1",
    b'"text"',
    b"{}",
    b'{"name": NaN}',
    b"\xff\xfe\x00",
    _nested(900),
    _nested(5000),
    b'{"resourceType": "Bundle", "type": "transaction", "entry": [{"request": {"method": "POST", '
    b'"url": "Patient", "ifNoneExist": 5}}]}',
    b'[{"op": "replace", "path": "", "value": 1}]',
    b'{"resourceType": "Patient", "extension": ' + _nested(900) + b"}",
    b'{"resourceType": "Bundle", "type": "transaction", "entry": [{"request": {"method": "POST", '
    b'"url": "Patient"}, "resource": {"resourceType": "Patient", "extension": ' + _nested(900) + b"}}]}",
    b'[{"op": "add", "path": "/extension", "value": ' + _nested(900) + b"}]",
]
DEEP = _nested(900)
"""Parses, but recursing over it (copying, serializing the stored value back) exhausts the stack."""
VALUES: list[Any] = [
    None,
    True,
    0,
    -1,
    2**64 + 1,
    1e308,
    "",
    "x" * 5000,
    "\x00",
    "../../etc/passwd",
    "slug@99999999999999999999",
    [],
    [None],
    {},
    {"entity_id": 5},
    ["ds_00000000000000000000000000"],
]
QUERY_VALUES = ["", "-1", "abc", "99999999999999999999", "\x00", "x" * 3000, "ge2020-13-45", "A" * 40]
MEDIA_TYPES = ["application/json", "application/fhir+json", "application/json-patch+json", "text/plain", None]


def _body_keys(method: str, path: str) -> list[str]:
    body = _DOCUMENT["paths"][path][method.lower()].get("requestBody", {})
    schema = body.get("content", {}).get("application/json", {}).get("schema", {})
    if "$ref" in schema:
        schema = _DOCUMENT["components"]["schemas"][schema["$ref"].rsplit("/", 1)[1]]
    return [*sorted(schema.get("properties", {})), "unexpected"]


def _query_names(method: str, path: str) -> list[str]:
    parameters = _DOCUMENT["paths"][path][method.lower()].get("parameters", [])
    names = [p["name"] for p in parameters if p["in"] == "query"]
    return names or ["_count", "limit", "cursor", "name"]


@pytest.fixture(scope="module")
def targets(server: Server) -> Iterator[tuple[Json, str]]:
    """Real ids for every path parameter, and a run token for `/v1`.

    Two runs: FHIR routes use one that stays started, every other operation (complete, cancel,
    rescore, …) a second one, so no fuzzed call takes the FHIR surface away from the others.
    """
    with server.client() as api:
        made = catalog_of_every_kind(api, one_patient_bundle("Fuzz"))
        fhir_run, other_run = (start_run(api, made["benchmark_id"]) for _ in range(2))
        for run in (fhir_run, other_run):
            task_run = run.task_runs[0]["id"]
            with server.client(run.token) as client:
                started = ok(client.post(f"/v1/task-runs/{task_run}/start"))
                if run is other_run:
                    ok(client.post(f"/v1/task-runs/{task_run}/complete"))
        criterion_run = ok(api.get("/criterion-runs", params={"task_run_id": other_run.task_runs[0]["id"]}))
    ids = {
        **made,
        "benchmark_run_id": other_run.id,
        "task_run_id": other_run.task_runs[0]["id"],
        "criterion_run_id": criterion_run["data"][0]["id"],
        "playground_id": started["playground_id"],
        "sandbox_id": started["playground_id"],
        "resource_type": "Patient",
        "resource_id": "p1",
        "version_id": "1",
        "resource": "prior_auth_requests",
        "key": "PA0000000000",
        "patient_id": "p1",  # Patient/{patient_id}/$everything
        "compartment": "Patient",  # {compartment}/{owner_id}/{resource_type}
        "owner_id": "p1",
        "path": "inbox/fuzz.txt",
        "name": "task_read",  # /v1/task-runs/{id}/tools/{name}
        "call_id": "current",  # voice/calls/{call_id}: the run's latest call
        "fhir:benchmark_run_id": fhir_run.id,
        "fhir:task_run_id": fhir_run.task_runs[0]["id"],
        "token": other_run.token,
        "fhir:token": fhir_run.token,
    }
    yield ids, server.url


def _path_value(ids: Json, name: str, fhir: bool, method: str, draw: Any) -> str:
    """The real id (most of the time), or an unknown or malformed one; `draw` None: the real id."""
    real = str(ids.get(f"fhir:{name}", ids[name]) if fhir else ids[name])
    if method == "DELETE" and not fhir:
        real = "ds_00000000000000000000000000"  # deleting the shared fixtures would blind other cases
    if draw is None:
        return real
    return str(draw(st.sampled_from([real] * 6 + ["nope", real + "%2F..", "%00"])))


def _assert_handled(response: httpx.Response, fhir: bool, request: object) -> None:
    """Below 500, and every error body is the SPEC §5 envelope (an OperationOutcome on FHIR routes)."""
    assert response.status_code < 500, (request, response.text[:500])
    if response.status_code >= 400 and response.content:
        error = response.json()
        if fhir and error.get("resourceType") == "OperationOutcome":
            assert error["issue"], error
        else:
            assert set(error) == {"error"} and set(error["error"]) == {"code", "message", "details"}, error


@pytest.mark.parametrize(("method", "path"), OPERATIONS, ids=[f"{m} {p}" for m, p in OPERATIONS])
def test_hostile_input_never_answers_5xx(targets: tuple[Json, str], method: str, path: str) -> None:
    """Each raw hostile body once against the operation with real ids, then a derandomized
    hypothesis run mixing hostile path ids, query values, bodies and media types."""
    ids, url = targets
    fhir = "/fhir" in path
    token = ids["fhir:token" if fhir else "token"] if path.startswith("/v1/") else BOOTSTRAP_KEY
    names = [part[1:-1] for part in path.split("/") if part.startswith("{")]
    with httpx.Client(base_url=url, timeout=60, headers={"Authorization": f"Bearer {token}"}) as client:

        def send(concrete: str, query: dict[str, str], body: bytes, headers: dict[str, str]) -> None:
            response = client.request(method, concrete, params=query, content=body, headers=headers)
            _assert_handled(response, fhir, (method, concrete, query, body[:200], headers))

        if method in ("POST", "PUT", "PATCH"):
            real = path
            for name in names:
                real = real.replace("{" + name + "}", _path_value(ids, name, fhir, method, None))
            deep_fields = [b'{"%s": %s}' % (key.encode(), DEEP) for key in _body_keys(method, path)]
            for raw in RAW_BODIES + deep_fields:
                send(real, {}, raw, {"Content-Type": "application/json"})

        @settings(
            max_examples=8,
            derandomize=True,
            database=None,
            deadline=None,
            suppress_health_check=[HealthCheck.too_slow],
        )
        @given(data=st.data())
        def fuzz(data: Any) -> None:
            concrete = path
            for name in names:
                concrete = concrete.replace("{" + name + "}", _path_value(ids, name, fhir, method, data.draw))
            query_names = st.sampled_from(_query_names(method, path))
            query = data.draw(st.dictionaries(query_names, st.sampled_from(QUERY_VALUES)))
            body = b""
            headers: dict[str, str] = {}
            if method in ("POST", "PUT", "PATCH"):
                keys = st.sampled_from(_body_keys(method, path))
                keyed = st.dictionaries(keys, st.sampled_from(VALUES), min_size=1)
                body = data.draw(
                    st.one_of(
                        st.sampled_from(RAW_BODIES), keyed.map(lambda value: json.dumps(value).encode())
                    )
                )
                media_type = data.draw(st.sampled_from(MEDIA_TYPES))
                if media_type:
                    headers["Content-Type"] = media_type
            send(concrete, query, body, headers)

        fuzz()
