"""Dataset loading (SPEC §5.1), shared layers, isolation between playgrounds and captures (§6).

Samples: Synthea bundles from tests/fixtures/fhir/synthea (provenance in tests/fixtures/SOURCES.md):
smart-2019 bundles reference each other by `urn:uuid`; hiv-2021 bundles carry conditional
references to organizations and practitioners that are not included.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

import httpx
import pytest
from sqlalchemy import Engine, event, func, select

from assay.sandboxes.fhir import EmbeddedFhir, FhirError, actions
from assay.sandboxes.fhir import layers as layers_module
from assay.sandboxes.fhir import store as fhir_store
from assay.sandboxes.fhir.layers import LayerSource
from assay.sandboxes.fhir.tables import FhirLayer, FhirLayerResource, FhirVersion
from tests.sandboxes.conftest import at_once

if TYPE_CHECKING:
    from tests.sandboxes.conftest import FhirServer

SYNTHEA = Path(__file__).parents[2] / "fixtures" / "fhir" / "synthea"
LIZ = SYNTHEA / "smart-2019" / "Liz_Conn_27c911c6-f045-4ffa-af5d-6eba57ac94b2.json"
LIZ_ID = "ee9f8dd8-72d2-4769-8020-89e504b1504b"
BOB = SYNTHEA / "hiv-2021" / "Bob965_Keeling57_3f6fd0bb-6cd3-eb3f-4401-cd38ace25f2b.json"


def _bundle(path: Any) -> dict[str, Any]:
    return json.loads(path.read_text())


def _all_references(value: Any) -> list[str]:
    if isinstance(value, dict):
        found = [value["reference"]] if isinstance(value.get("reference"), str) else []
        return found + [r for item in value.values() for r in _all_references(item)]
    if isinstance(value, list):
        return [r for item in value for r in _all_references(item)]
    return []


def test_urn_uuid_references_are_resolved_and_searchable(fhir_server: FhirServer) -> None:
    fhir_server.fhir.provision("pg_liz", [_bundle(LIZ)])
    base = fhir_server.base("pg_liz")
    patients = httpx.get(f"{base}/Patient").json()
    assert patients["total"] == 1
    patient = patients["entry"][0]["resource"]
    assert patient["id"] == "ee9f8dd8-72d2-4769-8020-89e504b1504b"
    assert patient["meta"]["versionId"] == "1" and patient["meta"]["lastUpdated"].endswith("Z")
    encounters = httpx.get(f"{base}/Encounter", params={"patient": f"Patient/{patient['id']}"}).json()
    assert encounters["total"] > 0
    everything = httpx.get(f"{base}/Encounter", params={"_count": "1000"}).json()["entry"]
    assert not [r for e in everything for r in _all_references(e["resource"]) if r.startswith("urn:uuid:")]


def test_unresolvable_conditional_references_are_left_verbatim(fhir_server: FhirServer) -> None:
    fhir_server.fhir.provision("pg_bob", [_bundle(BOB)])
    base = fhir_server.base("pg_bob")
    encounter = httpx.get(f"{base}/Encounter", params={"_count": "1"}).json()["entry"][0]["resource"]
    assert encounter["serviceProvider"]["reference"].startswith("Organization?identifier=")
    assert encounter["subject"]["reference"] == "Patient/3f6fd0bb-6cd3-eb3f-4401-cd38ace25f2b"


def test_datasets_load_in_order_and_the_last_write_wins(engine: Engine) -> None:
    fhir = EmbeddedFhir(engine)
    first = {"resourceType": "Bundle", "type": "collection", "entry": [
        {"resource": {"resourceType": "Patient", "id": "p", "gender": "male"}},
        {"resource": {"resourceType": "Patient", "id": "kept", "meta": {"versionId": "7", "lastUpdated": "2020-01-01T00:00:00Z"}}},
    ]}  # fmt: skip
    second = {"resourceType": "Bundle", "type": "batch", "entry": [
        {"resource": {"resourceType": "Patient", "id": "p", "gender": "female"}, "request": {"method": "PUT", "url": "Patient/p"}},
        {"resource": {"resourceType": "Patient", "id": "skipped"}, "request": {"method": "DELETE", "url": "Patient/skipped"}},
    ]}  # fmt: skip
    fhir.provision("pg_order", [first, second])
    with fhir.reading("pg_order") as index:
        assert index.current(("Patient", "p")).resource["gender"] == "female"  # type: ignore[union-attr]
        kept = index.current(("Patient", "kept"))
        assert kept is not None and kept.version_id == "7"
        assert index.current(("Patient", "skipped")) is None


def test_playgrounds_share_one_layer_and_stay_isolated(fhir_server: FhirServer, engine: Engine) -> None:
    bundles = [_bundle(LIZ)]
    fhir_server.fhir.provision("pg_iso_1", bundles)
    fhir_server.fhir.provision("pg_iso_2", bundles)
    with engine.connect() as conn:
        layers = conn.execute(select(func.count()).select_from(FhirLayer)).scalar()
    one, two = fhir_server.base("pg_iso_1"), fhir_server.base("pg_iso_2")
    patient = httpx.get(f"{one}/Patient").json()["entry"][0]["resource"]

    httpx.put(f"{one}/Patient/{patient['id']}", json={**patient, "gender": "other"})
    httpx.post(
        f"{one}/Appointment", json={"resourceType": "Appointment", "status": "booked", "participant": []}
    )
    httpx.delete(f"{one}/Encounter/{httpx.get(f'{one}/Encounter').json()['entry'][0]['resource']['id']}")

    assert httpx.get(f"{two}/Patient/{patient['id']}").json()["gender"] == patient["gender"]
    assert httpx.get(f"{two}/Patient", params={"gender": "other"}).json()["total"] == 0
    assert httpx.get(f"{two}/Appointment").json()["total"] == 0
    assert httpx.get(f"{one}/Encounter").json()["total"] == httpx.get(f"{two}/Encounter").json()["total"] - 1
    assert httpx.get(f"{one}/Patient", params={"gender": "other"}).json()["total"] == 1
    with engine.connect() as conn:
        assert conn.execute(select(func.count()).select_from(FhirLayer)).scalar() == layers
        written = conn.execute(select(func.count()).where(FhirVersion.store_id == "pg_iso_1")).scalar()
    assert written == 3  # only the changes since loading are stored


def test_a_second_worker_sees_writes_through_the_database(engine: Engine) -> None:
    worker_a, worker_b = EmbeddedFhir(engine), EmbeddedFhir(engine)
    worker_a.provision("pg_workers", [_bundle(LIZ)])
    with worker_b.reading("pg_workers") as index:
        before = len(index.search_index.search("Patient", {}))
    with worker_a.writing("pg_workers") as tx:
        tx.put({"resourceType": "Patient", "gender": "female"}, "new-patient")
    with worker_b.reading("pg_workers") as index:
        assert len(index.search_index.search("Patient", {"gender": "female"})) >= 1
        assert len(index.search_index.search("Patient", {})) == before + 1


def test_a_capture_pins_the_state_at_its_sequence(engine: Engine) -> None:
    fhir = EmbeddedFhir(engine)
    fhir.provision("pg_capture")
    with fhir.writing("pg_capture") as tx:
        tx.put({"resourceType": "Patient", "active": True}, "a")
    seq = fhir.capture("pg_capture")
    with fhir.writing("pg_capture") as tx:
        tx.put({"resourceType": "Patient", "active": False}, "a")
        tx.put({"resourceType": "Patient"}, "b")
    pinned = fhir.state_at("pg_capture", seq)
    assert [(r["id"], r["active"]) for r in pinned.search("Patient", {})] == [("a", True)]
    assert len(EmbeddedFhir(engine).state_at("pg_capture", seq).search("Patient", {})) == 1
    assert len(fhir.state_at("pg_capture", fhir.capture("pg_capture")).search("Patient", {})) == 2


def test_if_match_races_across_workers_are_serialized_by_the_database(engine: Engine) -> None:
    """Two workers (two `EmbeddedFhir` over one database), many racing `If-Match` updates."""
    workers = [EmbeddedFhir(engine), EmbeddedFhir(engine)]
    workers[0].provision("pg_race")
    with workers[0].writing("pg_race") as tx:
        tx.put({"resourceType": "Patient"}, "p")

    def write(n: int) -> int:
        try:
            body = {"resourceType": "Patient", "id": "p", "gender": "other"}
            return actions.update(workers[n % 2], "pg_race", "", "Patient", "p", body, 'W/"1"').status
        except FhirError as error:
            return error.status

    assert sorted(at_once(8, write)) == [200] + [412] * 7
    with workers[1].reading("pg_race") as index:
        assert index.current(("Patient", "p")).version_id == "2"  # type: ignore[union-attr]


def test_evicted_indexes_are_rebuilt_from_the_database(
    engine: Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(fhir_store, "MAX_INDEXES", 1)
    fhir = EmbeddedFhir(engine)
    stores = ["pg_evict_" + uuid.uuid4().hex[:8] for _ in range(3)]
    for n, store in enumerate(stores):
        fhir.provision(store, [_bundle(LIZ)])
        with fhir.writing(store) as tx:
            tx.put({"resourceType": "Patient", "gender": "other"}, f"extra-{n}")
    for n, store in enumerate(stores):
        with fhir.reading(store) as index:
            assert [r["id"] for r in index.search_index.search("Patient", {"gender": "other"})] == [
                f"extra-{n}"
            ]
            assert index.current(("Patient", LIZ_ID)) is not None


def test_a_built_layer_keeps_load_order_whatever_order_its_rows_are_written_in(
    engine: Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`LayerCache.build` writes the rows in primary-key order, a few at a time (SQLite's B-tree
    pages then stay neighbours), each with its load-order position: another worker reading the
    layer back gets the load order. On SQLite each chunk is written as multi-row statements (of
    two rows here, and one for the odd row) and checkpointed after its commit, and the
    connection's own automatic checkpoints are back on afterwards."""
    monkeypatch.setattr(layers_module, "_INSERT_CHUNK", 3)
    monkeypatch.setattr(layers_module, "_SQLITE_ROWS", 2)
    tag = uuid.uuid4().hex[:8]
    keys = [
        ("Patient", f"{tag}-z"),
        ("Observation", f"{tag}-b"),
        ("Patient", f"{tag}-y"),
        ("Patient", f"{tag}-a"),
        ("Encounter", f"{tag}-x"),
    ]
    bundle = {"resourceType": "Bundle", "type": "collection", "entry": [
        {"resource": {"resourceType": kind, "id": ident}} for kind, ident in keys
    ]}  # fmt: skip
    chunks: list[list[tuple[str, str, int]]] = []
    checkpoints: list[str] = []
    real_chunks, real_checkpointing = layers_module._row_chunks, layers_module._checkpointing_after_each

    def recording(layer: Any) -> Iterator[list[dict[str, Any]]]:
        for chunk in real_chunks(layer):
            chunks.append([(row["resource_type"], row["resource_id"], row["position"]) for row in chunk])
            yield chunk

    @contextmanager
    def counting(conn: Any) -> Iterator[Callable[[], None]]:
        sqlite = conn.dialect.name == "sqlite"
        raw = conn.connection.dbapi_connection
        with real_checkpointing(conn) as checkpoint:
            if sqlite:
                assert raw.execute("PRAGMA wal_autocheckpoint").fetchone() == (0,)

            def counted() -> None:
                checkpoints.append("after a chunk")
                checkpoint()

            yield counted
        if sqlite:
            assert raw.execute("PRAGMA wal_autocheckpoint").fetchone() == (1000,)

    monkeypatch.setattr(layers_module, "_row_chunks", recording)
    monkeypatch.setattr(layers_module, "_checkpointing_after_each", counting)
    builder = EmbeddedFhir(engine)
    source = LayerSource.of([bundle])
    builder.layers.build(source)
    written = [row for chunk in chunks for row in chunk]
    assert [len(chunk) for chunk in chunks] == [3, 2]
    assert written == sorted((kind, ident, keys.index((kind, ident))) for kind, ident in keys)
    assert checkpoints == ["after a chunk"] * 2
    with engine.connect() as conn:
        reread = EmbeddedFhir(engine).layers.get(source.key, conn)
        assert list(reread.by_key) == keys
        assert reread.by_key == builder.layers.get(source.key, conn).by_key  # what the builder kept


def test_layer_rows_keep_every_character_their_text_holds(engine: Engine) -> None:
    """On PostgreSQL the rows go as a COPY payload built by hand (`_copy_lines`): backslashes in
    JSON escapes, escaped tabs, newlines, CR and NUL, quotes, non-ASCII and astral characters,
    and a Windows-style path all come back as written; SQLite takes the same rows as text."""
    tag = uuid.uuid4().hex[:8]
    tricky = 'back\\slash "quoted" tab\there\nnew line\r\u0000 NUL é ∑ 😀 C:\\temp\\n'
    patient = {
        "resourceType": "Patient",
        "id": f"{tag}-tricky",
        "name": [{"text": tricky, "family": "O'Brien\\"}],
        "extension": [{"url": "http://x/\\t", "valueString": "\\\\\\"}],
    }
    odd_id = {"resourceType": "Patient", "id": f"{tag}-tab\there\nand\rthere"}  # a file name, oddly
    entries = [{"resource": patient}, {"resource": odd_id}]
    source = LayerSource.of([{"resourceType": "Bundle", "type": "collection", "entry": entries}])
    builder = EmbeddedFhir(engine)
    builder.layers.build(source)
    with engine.connect() as conn:
        (body,) = conn.execute(
            select(FhirLayerResource.body).where(
                FhirLayerResource.layer_hash == source.key, FhirLayerResource.resource_id == f"{tag}-tricky"
            )
        ).one()
        reread = EmbeddedFhir(engine).layers.get(source.key, conn)
    stored = json.loads(body)
    assert stored["name"] == patient["name"] and stored["extension"] == patient["extension"]
    assert reread.by_key[("Patient", f"{tag}-tricky")]["name"][0]["text"] == tricky
    assert reread.by_key[("Patient", odd_id["id"])] == {
        **odd_id,
        "meta": reread.by_key[("Patient", odd_id["id"])]["meta"],
    }


def test_a_failed_row_write_fails_the_build_and_the_next_build_completes_the_layer(
    engine: Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The rows are written on a thread of their own (`_RowWriter`): its error is the build's, no
    `fhir_layers` row is written (the layer does not exist half-built), and the next build writes
    what is missing — on PostgreSQL its `COPY` of the first chunks meets the rows already there
    and those chunks go by the INSERT that skips them."""
    monkeypatch.setattr(layers_module, "_INSERT_CHUNK", 2)
    tag = uuid.uuid4().hex[:8]
    bundle = {"resourceType": "Bundle", "type": "collection", "entry": [
        {"resource": {"resourceType": "Patient", "id": f"{tag}-{n}"}} for n in range(7)
    ]}  # fmt: skip
    source = LayerSource.of([bundle])
    written: list[int] = []
    real_writer = layers_module._RowWriter._writer

    def failing_third(self: Any, conn: Any) -> Callable[[list[dict[str, Any]]], None]:
        write = real_writer(self, conn)

        def failing(chunk: list[dict[str, Any]]) -> None:
            written.append(len(chunk))
            if len(written) == 3:
                raise RuntimeError("the disk is full")
            write(chunk)

        return failing

    with monkeypatch.context() as patched:
        patched.setattr(layers_module._RowWriter, "_writer", failing_third)
        with pytest.raises(RuntimeError, match="the disk is full"):
            EmbeddedFhir(engine).layers.build(source)
    assert written == [2, 2, 2]  # the chunk queued behind the failed one was dropped
    with engine.connect() as conn:
        assert conn.execute(select(FhirLayer.hash).where(FhirLayer.hash == source.key)).first() is None
        stored = conn.execute(
            select(func.count())
            .select_from(FhirLayerResource)
            .where(FhirLayerResource.layer_hash == source.key)
        ).scalar()
    assert stored == 4
    copies: list[str] = []

    def record(_conn: Any, _cursor: Any, statement: str, *_: Any) -> None:
        if "INSERT INTO fhir_layer_resources" in statement:
            copies.append("insert")

    event.listen(engine, "before_cursor_execute", record)
    try:
        EmbeddedFhir(engine).layers.build(source)
    finally:
        event.remove(engine, "before_cursor_execute", record)
    if engine.dialect.name == "postgresql":
        assert copies == ["insert", "insert"]  # the two chunks that were there; the rest copied
    with engine.connect() as conn:
        assert conn.execute(select(FhirLayer.hash).where(FhirLayer.hash == source.key)).first() is not None
        assert list(EmbeddedFhir(engine).layers.get(source.key, conn).by_key) == [
            ("Patient", f"{tag}-{n}") for n in range(7)
        ]
