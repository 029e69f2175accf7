"""Audit of the FHIR REST surface against SPEC §5.2, through the real server: each test pins a
discrepancy found by driving it (status codes of bundle entries, history paging, PATCH diagnostics).
"""

from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import httpx
import pytest
from sqlalchemy import Engine, func, select, text

from assay.sandboxes.fhir.tables import FhirVersion
from tests.sandboxes.conftest import FhirServer

FHIR = {"Content-Type": "application/fhir+json"}
Json = dict[str, Any]


@pytest.fixture
def http(new_store: str) -> httpx.Client:
    with httpx.Client(base_url=new_store, headers=FHIR, timeout=30) as client:
        yield client


def _outcome(response: httpx.Response, status: int) -> str:
    """The diagnostics of an OperationOutcome answered with `status`."""
    assert response.status_code == status, response.text
    body: Json = response.json()
    assert body["resourceType"] == "OperationOutcome", body
    return str(body["issue"][0]["diagnostics"])


def _bundle(kind: str, *entries: Json) -> Json:
    return {"resourceType": "Bundle", "type": kind, "entry": list(entries)}


@pytest.mark.parametrize("method", ["POST", "PUT"])
def test_an_entry_resource_of_an_unknown_type_is_422(http: httpx.Client, method: str) -> None:
    """SPEC §5.2: an invalid resource is 422. An entry writing `{"resourceType": "Nonsense"}` to the
    url `Nonsense` answered 404 (the url's type was checked before the resource), in a transaction
    and as a batch entry's status; a plain `POST /Nonsense` stays 404 (no such endpoint)."""
    url = "Nonsense" if method == "POST" else "Nonsense/n1"
    entry = {"resource": {"resourceType": "Nonsense", "id": "n1"}, "request": {"method": method, "url": url}}
    diagnostics = _outcome(http.post("", json=_bundle("transaction", entry)), 422)
    assert diagnostics == "entry 0: unknown resourceType 'Nonsense'"
    batch = http.post("", json=_bundle("batch", entry))
    assert batch.status_code == 200, batch.text
    [answer] = batch.json()["entry"]
    assert answer["response"]["status"] == "422"
    assert answer["response"]["outcome"]["issue"][0]["code"] == "processing"


def test_an_entry_url_of_an_unknown_type_stays_404(http: httpx.Client) -> None:
    """An unknown type in an entry's url, with no resource to judge, is what the same request alone
    answers: 404 (FHIR http.html: the resource type is not supported)."""
    _outcome(http.post("/Nonsense", json={"resourceType": "Nonsense"}), 404)
    reads = [{"request": {"method": method, "url": "Nonsense/1"}} for method in ("GET", "DELETE")]
    batch = http.post("", json=_bundle("batch", *reads)).json()
    assert [e["response"]["status"] for e in batch["entry"]] == ["404", "404"]
    _outcome(http.post("", json=_bundle("transaction", reads[1])), 404)
    patient = {"resource": {"resourceType": "Patient"}, "request": {"method": "POST", "url": "Nonsense"}}
    _outcome(http.post("", json=_bundle("transaction", patient)), 404)


def _versions(http: httpx.Client, count: int) -> str:
    """A Patient written `count` times (create, then updates); its id."""
    pid = http.post("/Patient", json={"resourceType": "Patient", "active": False}).json()["id"]
    for version in range(2, count + 1):
        http.put(f"/Patient/{pid}", json={"resourceType": "Patient", "id": pid, "gender": str(version)})
    return str(pid)


def _page_of(bundle: Json) -> tuple[list[str], dict[str, str]]:
    """The ETags (`W/"<versionId>"`) of a history page's entries, and its links by relation."""
    versions = [e["response"]["etag"] for e in bundle["entry"]]
    return versions, {link["relation"]: link["url"] for link in bundle["link"]}


def test_instance_history_pages_over_http(http: httpx.Client, new_store: str) -> None:
    """SPEC §5.2 `_history` of a resource; instance history ignored `_count` and had no paging
    links, while type and system history page (`_count` default 50, max 1000, `_offset`, `next`)."""
    pid = _versions(http, 5)
    history = f"/Patient/{pid}/_history"

    def read(*pairs: tuple[str, str]) -> Json:
        response = http.get(history, params=list(pairs))
        assert response.status_code == 200, response.text
        body: Json = response.json()
        return body

    first = read(("_count", "2"))
    versions, links = _page_of(first)
    assert (first["type"], first["total"], versions) == ("history", 5, ['W/"5"', 'W/"4"'])
    assert links["next"] == f"{new_store}{history}?_count=2&_offset=2"
    assert "previous" not in links
    last = read(("_count", "2"), ("_offset", "4"))
    versions, links = _page_of(last)
    assert versions == ['W/"1"'] and "next" not in links and links["previous"].endswith("_offset=2")
    assert last["entry"][0]["request"]["method"] == "POST"
    assert len(read(("_count", "5000"))["entry"]) == 5
    everything = read()
    assert len(everything["entry"]) == 5 and [link["relation"] for link in everything["link"]] == ["self"]
    since = everything["entry"][1]["response"]["lastModified"]
    assert read(("_since", since))["total"] >= 2
    assert read(("_since", "2999-01-01T00:00:00Z"))["total"] == 0
    _outcome(http.get(history, params={"_count": "-1"}), 400)
    _outcome(http.get(history, params={"_at": "2020"}), 400)


MARKER = "Featherstonehaugh-" * 20
"""A long family name: diagnostics that echo the stored resource carry it."""


@pytest.mark.parametrize(
    ("operations", "expected"),
    [
        (
            [{"op": "add", "path": "/active", "value": True}, {"op": "test", "path": "", "value": {}}],
            "JSON Patch operation 1 (test '') cannot be applied: the value at '' is not the tested value",
        ),
        (
            [{"op": "test", "path": "/name/0", "value": {"family": "x"}}],
            "JSON Patch operation 0 (test '/name/0') cannot be applied: "
            "the value at '/name/0' is not the tested value",
        ),
        (
            [{"op": "add", "path": "/contact/0/name", "value": {}}],
            "JSON Patch operation 0 (add '/contact/0/name') cannot be applied: "
            "'/contact/0' does not exist in the resource",
        ),
        (
            [{"op": "replace", "path": "/name/0/family/x", "value": 1}],
            "JSON Patch operation 0 (replace '/name/0/family/x') cannot be applied: "
            "'/name/0/family/x' does not exist in the resource",
        ),
        (
            [{"op": "copy", "from": "/photo", "path": "/x"}],
            "JSON Patch operation 0 (copy '/photo' to '/x') cannot be applied: "
            "'/photo' does not exist in the resource",
        ),
    ],
    ids=["test-root", "test-member", "add-below-missing", "below-a-string", "copy-from-missing"],
)
def test_patch_diagnostics_name_the_operation_not_the_resource(
    http: httpx.Client, operations: list[Json], expected: str
) -> None:
    """OperationOutcome diagnostics of a failed PATCH echoed the whole stored resource (jsonpatch's
    "{document} is not equal to tested value …", jsonpointer's "member 'a' not found in
    {document}"); they name the failing operation, its path and the reason."""
    patient = {"resourceType": "Patient", "id": "p1", "name": [{"family": MARKER}]}
    assert http.put("/Patient/p1", json=patient).status_code == 201
    patched = http.patch(
        "/Patient/p1", json=operations, headers={"Content-Type": "application/json-patch+json"}
    )
    assert _outcome(patched, 422) == expected
    entry = {"resource": operations, "request": {"method": "PATCH", "url": "Patient/p1"}}
    in_transaction = _outcome(http.post("", json=_bundle("transaction", entry)), 422)
    assert in_transaction == f"entry 0: Patient/p1: {expected}"
    assert http.get("/Patient/p1").json()["meta"]["versionId"] == "1"


def test_a_malformed_patch_names_the_operation(http: httpx.Client) -> None:
    assert http.put("/Patient/p1", json={"resourceType": "Patient", "id": "p1"}).status_code == 201
    operations = [{"op": "add", "path": "/active", "value": True}, {"op": "bogus" * 100, "path": "/a"}]
    patched = http.patch(
        "/Patient/p1", json=operations, headers={"Content-Type": "application/json-patch+json"}
    )
    diagnostics = _outcome(patched, 400)
    assert diagnostics.startswith("invalid JSON Patch: operation 1: Unknown operation 'bogusbogus")
    assert len(diagnostics) < 200


def test_dropping_a_store_while_a_write_commits_leaves_no_versions(
    fhir_server: FhirServer, new_store: str
) -> None:
    """`EmbeddedFhir.drop` deleted the store's versions and then its row, while a write locks the
    row and then inserts versions: on PostgreSQL a write in flight committed its versions after
    the drop had deleted the others, and they outlived their store (a store created again under
    that id collides with them). The row goes first now, so the drop waits for the write."""
    engine = fhir_server.fhir.engine
    if engine.dialect.name != "postgresql":
        pytest.skip("SQLite's BEGIN IMMEDIATE runs the drop wholly before or after the write")
    store_id = new_store.rsplit("/", 2)[-2]
    with ThreadPoolExecutor(1) as pool, fhir_server.fhir.writing(store_id) as tx:
        tx.put({"resourceType": "Patient"}, "p1")
        dropped = pool.submit(fhir_server.fhir.drop, store_id)
        _await_a_lock_wait(engine)
    assert dropped.result(timeout=30)
    with engine.connect() as conn:
        left = conn.execute(select(func.count()).where(FhirVersion.store_id == store_id)).scalar()
    assert left == 0


def _await_a_lock_wait(engine: Engine) -> None:
    """Return once some PostgreSQL backend waits for a row lock (the drop, behind the write)."""
    waiting = text("SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock'")
    for _ in range(500):
        with engine.connect() as conn:
            if conn.execute(waiting).scalar():
                return
        time.sleep(0.02)
    raise AssertionError("the drop never waited for the write's lock")
