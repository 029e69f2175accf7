"""Big datasets (issue 9): a dataset is hashed once when stored, `start` keys its FHIR layer by those
hashes, and a start whose layer exists reads no dataset content and builds nothing.

Counted, not timed: the SQL statements that read `datasets.data` and the layers this process built.
"""

from __future__ import annotations

import re
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import httpx
import pytest
from sqlalchemy import delete, select, update
from sqlalchemy.orm import Session

from assay.sandboxes.fhir import layers as layers_module
from assay.sandboxes.fhir.layers import layer_key
from assay.sandboxes.fhir.store import embedded_fhir
from assay.sandboxes.fhir.tables import FhirLayer, FhirLayerResource, FhirStoreRow
from assay.service.runs import actions
from assay.service.sandboxes import datasets as datasets_module
from assay.store.json_values import content_hash
from assay.store.models import BenchmarkVersion, BenchmarkVersionDataset, Dataset, TaskRun
from assay.store.write_queue import queue_of
from tests.listening import listening
from tests.service.builders import ok, unique
from tests.service.conftest import Server

_DATA_READ = re.compile(r"SELECT\s+(CAST\()?(benchmark_version_)?datasets\.data\b", re.IGNORECASE)
"""A read of a dataset's content: a draft's row or a published version's frozen copy."""


@contextmanager
def _data_reads(server: Server) -> Iterator[list[str]]:
    seen: list[str] = []

    def record(_conn: Any, _cursor: Any, statement: str, *_: Any) -> None:
        if _DATA_READ.search(statement):
            seen.append(statement)

    with listening(server.database.engine, "before_cursor_execute", record):
        yield seen


def _organization() -> dict[str, Any]:
    org = {"resourceType": "Organization", "id": unique("org").replace(" ", "-"), "identifier": []}
    org["identifier"].append({"system": "urn:test:org", "value": org["id"]})
    return org


def _bundle(*resources: dict[str, Any]) -> dict[str, Any]:
    return {"resourceType": "Bundle", "type": "transaction", "entry": [{"resource": r} for r in resources]}


def _benchmark(api: httpx.Client, dataset_ids: list[str]) -> str:
    environment = ok(api.post("/environments", json={"name": unique("e"), "dataset_ids": dataset_ids}), 201)
    benchmark = ok(
        api.post("/benchmarks", json={"name": unique("big"), "environment_id": environment["id"]}), 201
    )
    ok(api.post("/tasks", json={"benchmark_id": benchmark["id"], "name": "t"}), 201)
    return str(benchmark["id"])


def _start(server: Server, api: httpx.Client, benchmark_id: str, slug: str | None = None) -> tuple[str, str]:
    source = {"benchmark": slug} if slug else {"benchmark_id": benchmark_id}
    run = ok(api.post("/v1/benchmark-runs", json=source), 201)
    task_run = run["task_runs"][0]
    with server.client(run["bearer_token"]) as agent:
        ok(agent.post(task_run["start_url"]))
    return run["bearer_token"], task_run["id"]


def _layer_of(server: Server, task_run_id: str) -> str | None:
    with server.database.reading() as session:
        playground = session.get(TaskRun, task_run_id).playground_id  # type: ignore[union-attr]
        return session.execute(select(FhirStoreRow.layer_hash).where(FhirStoreRow.id == playground)).scalar()


def test_hash_stored_at_upload_keys_the_layer_and_a_second_start_reads_nothing(
    server: Server, api: httpx.Client
) -> None:
    organization = _organization()
    patient = {
        "resourceType": "Patient",
        "id": unique("p").replace(" ", "-"),
        "managingOrganization": {"reference": f"Organization?identifier=urn:test:org|{organization['id']}"},
    }
    first = ok(
        api.post("/datasets", json={"name": unique("orgs"), "type": "fhir", "data": _bundle(organization)}),
        201,
    )
    second = ok(
        api.post("/datasets", json={"name": unique("pts"), "type": "fhir", "data": _bundle(patient)}), 201
    )
    with server.database.reading() as session:
        stored = {
            row.id: row
            for row in session.scalars(select(Dataset).where(Dataset.id.in_([first["id"], second["id"]])))
        }
    assert stored[first["id"]].content_hash == content_hash(first["data"])
    assert stored[second["id"]].content_hash == content_hash(second["data"])
    benchmark_id = _benchmark(api, [first["id"], second["id"]])
    layers = embedded_fhir(server.database.engine).layers

    built = layers.builds
    with _data_reads(server) as reads:
        token, task_run_id = _start(server, api, benchmark_id)
    assert len(reads) == 2  # each dataset read once, to build the layer
    assert layers.builds == built + 1
    expected = layer_key([stored[first["id"]].content_hash, stored[second["id"]].content_hash])
    assert _layer_of(server, task_run_id) == expected

    # The conditional reference in the second dataset resolved to the first dataset's Organization.
    with server.client(token) as agent:
        read = ok(agent.get(f"/v1/task-runs/{task_run_id}/fhir/Patient/{patient['id']}"))
    assert read["managingOrganization"]["reference"] == f"Organization/{organization['id']}"

    with _data_reads(server) as reads:
        _, again = _start(server, api, benchmark_id)
    assert reads == []  # the layer exists: no dataset content read, decoded or hashed
    assert layers.builds == built + 1
    assert _layer_of(server, again) == expected


def test_the_next_datasets_are_read_ahead_while_one_is_decoded(
    server: Server, api: httpx.Client, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`start` reads the first dataset's text itself (the read-ahead ones may come first) and the
    following ones on the read-ahead threads (`sandboxes.read_ahead`), each once, and loads them in their order: the last write of
    the same id wins, as without reading ahead."""
    shared = unique("p").replace(" ", "-")
    patients = [{"resourceType": "Patient", "id": shared, "gender": gender} for gender in ("male", "female")]
    patients += [{"resourceType": "Patient", "id": unique("p").replace(" ", "-")} for _ in range(3)]
    ids = [
        ok(api.post("/datasets", json={"name": unique("d"), "type": "fhir", "data": _bundle(p)}), 201)["id"]
        for p in patients
    ]
    benchmark_id = _benchmark(api, ids)
    threads: list[str] = []
    # Decoding as slow as a big bundle's, so each read ahead has begun before its dataset is asked
    # for (one not begun yet is read by the asking thread: the next test).
    decode = datasets_module.load_json
    monkeypatch.setattr(datasets_module, "load_json", lambda text: (time.sleep(0.05), decode(text))[1])

    def record(_conn: Any, _cursor: Any, statement: str, *_: Any) -> None:
        if _DATA_READ.search(statement):
            threads.append(threading.current_thread().name)

    with listening(server.database.engine, "before_cursor_execute", record):
        token, task_run_id = _start(server, api, benchmark_id)
    assert len(threads) == len(ids)
    assert sorted(name.startswith("assay-dataset-read") for name in threads) == [False] + [True] * (
        len(ids) - 1
    )
    with server.client(token) as agent:
        assert ok(agent.get(f"/v1/task-runs/{task_run_id}/fhir/Patient/{shared}"))["gender"] == "female"
        for patient in patients[2:]:
            ok(agent.get(f"/v1/task-runs/{task_run_id}/fhir/Patient/{patient['id']}"))


def test_patching_data_rehashes_and_the_next_start_builds_a_new_layer(
    server: Server, api: httpx.Client
) -> None:
    patient = {"resourceType": "Patient", "id": unique("p").replace(" ", "-")}
    dataset = ok(
        api.post("/datasets", json={"name": unique("d"), "type": "fhir", "data": _bundle(patient)}), 201
    )
    benchmark_id = _benchmark(api, [dataset["id"]])
    _, before = _start(server, api, benchmark_id)
    changed = _bundle({**patient, "gender": "other"})
    ok(api.patch(f"/datasets/{dataset['id']}", json={"data": changed}))
    token, after = _start(server, api, benchmark_id)
    assert _layer_of(server, after) == layer_key([content_hash(changed)]) != _layer_of(server, before)
    with server.client(token) as agent:
        assert ok(agent.get(f"/v1/task-runs/{after}/fhir/Patient/{patient['id']}"))["gender"] == "other"


def test_the_layer_is_built_and_committed_before_the_start_transaction_opens(
    server: Server, api: httpx.Client, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The decoding and loading hold no lock: when `start`'s transaction (which holds the SQLite
    write lock, and on PostgreSQL the run's rows) begins, the layer is already stored whole, so the
    transaction only finds it."""
    patient = {"resourceType": "Patient", "id": unique("p").replace(" ", "-")}
    dataset = ok(
        api.post("/datasets", json={"name": unique("d"), "type": "fhir", "data": _bundle(patient)}), 201
    )
    benchmark_id = _benchmark(api, [dataset["id"]])
    key = layer_key([content_hash(dataset["data"])])
    layers = embedded_fhir(server.database.engine).layers
    seen: list[tuple[bool, int]] = []
    original = actions.start_task_run

    def spying(session: Session, *args: Any, **kwargs: Any) -> Any:
        with server.database.reading() as other:  # committed, seen from another connection
            stored = other.execute(select(FhirLayer.hash).where(FhirLayer.hash == key)).first() is not None
        seen.append((stored, layers.builds))
        return original(session, *args, **kwargs)

    monkeypatch.setattr(actions, "start_task_run", spying)
    built = layers.builds
    with _data_reads(server) as reads:
        _, task_run_id = _start(server, api, benchmark_id)
    assert seen == [(True, built + 1)]
    assert len(reads) == 1  # read once, before the transaction; the transaction read nothing
    assert _layer_of(server, task_run_id) == key


def test_a_published_version_keeps_each_dataset_in_its_own_row_and_a_second_start_reads_none(
    server: Server, api: httpx.Client
) -> None:
    """Runs of `slug@version` (how benchmarks are run) used to decode every frozen dataset with the
    version at each run creation and `start`, and hash them all again."""
    patients = [{"resourceType": "Patient", "id": unique("p").replace(" ", "-")} for _ in range(2)]
    datasets = [
        ok(api.post("/datasets", json={"name": unique("d"), "type": "fhir", "data": _bundle(p)}), 201)
        for p in patients
    ]
    benchmark_id = _benchmark(api, [d["id"] for d in datasets])
    slug = ok(api.post(f"/benchmarks/{benchmark_id}/publish", json={"force": True}))["slug"]
    # The draft changes after publishing: the version's runs keep what was frozen.
    ok(
        api.patch(
            f"/datasets/{datasets[0]['id']}", json={"data": _bundle({**patients[0], "gender": "other"})}
        )
    )
    with server.database.reading() as session:
        version = session.scalars(
            select(BenchmarkVersion).where(BenchmarkVersion.benchmark_id == benchmark_id)
        ).one()
        frozen = version.frozen["datasets"]
        rows = session.scalars(
            select(BenchmarkVersionDataset).where(BenchmarkVersionDataset.version_id == version.id)
        ).all()
    assert {row.dataset_id: row.data for row in rows} == {d["id"]: d["data"] for d in datasets}
    assert all("data" not in frozen[d["id"]] for d in datasets)
    assert [frozen[d["id"]]["hash"] for d in datasets] == [content_hash(d["data"]) for d in datasets]

    with _data_reads(server) as reads:
        token, first = _start(server, api, benchmark_id, slug)
    expected = layer_key([content_hash(d["data"]) for d in datasets])
    assert _layer_of(server, first) == expected
    assert all("benchmark_version_datasets" in read for read in reads)
    with server.client(token) as agent:
        assert "gender" not in ok(agent.get(f"/v1/task-runs/{first}/fhir/Patient/{patients[0]['id']}"))

    with _data_reads(server) as reads:
        _, again = _start(server, api, benchmark_id, slug)
    assert reads == []
    assert _layer_of(server, again) == expected


def test_a_version_published_before_its_datasets_had_rows_reads_them_inline(
    server: Server, api: httpx.Client
) -> None:
    patient = {"resourceType": "Patient", "id": unique("p").replace(" ", "-"), "gender": "female"}
    dataset = ok(
        api.post("/datasets", json={"name": unique("d"), "type": "fhir", "data": _bundle(patient)}), 201
    )
    benchmark_id = _benchmark(api, [dataset["id"]])
    slug = ok(api.post(f"/benchmarks/{benchmark_id}/publish", json={"force": True}))["slug"]
    with server.database.transaction() as session:  # as migration 0007 left a published version
        version = session.scalars(
            select(BenchmarkVersion).where(BenchmarkVersion.benchmark_id == benchmark_id)
        ).one()
        old = dict(version.frozen)
        old["datasets"] = {dataset["id"]: {"id": dataset["id"], "type": "fhir", "data": dataset["data"]}}
        version.frozen = old
        session.execute(
            delete(BenchmarkVersionDataset).where(BenchmarkVersionDataset.version_id == version.id)
        )
    token, task_run_id = _start(server, api, benchmark_id, slug)
    assert _layer_of(server, task_run_id) == layer_key([content_hash(dataset["data"])])
    with server.client(token) as agent:
        assert (
            ok(agent.get(f"/v1/task-runs/{task_run_id}/fhir/Patient/{patient['id']}"))["gender"] == "female"
        )


def test_a_dataset_changed_while_the_start_is_prepared_is_not_built_under_its_old_key(
    server: Server, api: httpx.Client, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Before `start`'s transaction each dataset's content is read in a short unit of work of its
    own, after the one that read the hashes (the layer's key). A content changed in between must
    never be stored under the old key, which a published version may still name: the preparation
    gives up and the transaction builds the layer of what it reads."""
    patient = {"resourceType": "Patient", "id": unique("p").replace(" ", "-")}
    dataset = ok(
        api.post("/datasets", json={"name": unique("d"), "type": "fhir", "data": _bundle(patient)}), 201
    )
    benchmark_id = _benchmark(api, [dataset["id"]])
    old_key = layer_key([content_hash(dataset["data"])])
    changed = _bundle({**patient, "gender": "other"})
    original = actions.datasets_for

    def changing_meanwhile(*args: Any, **kwargs: Any) -> Any:
        found = original(*args, **kwargs)
        if kwargs.get("reading") is not None:  # the preparation: the hashes are read, the contents not yet
            with server.database.transaction() as session:
                session.execute(
                    update(Dataset)
                    .where(Dataset.id == dataset["id"])
                    .values(data=changed, content_hash=content_hash(changed))
                )
        return found

    monkeypatch.setattr(actions, "datasets_for", changing_meanwhile)
    token, task_run_id = _start(server, api, benchmark_id)
    with server.database.reading() as session:
        bodies = session.scalars(
            select(FhirLayerResource.body).where(FhirLayerResource.layer_hash == old_key)
        ).all()
    assert all('"gender"' not in body for body in bodies)  # nothing, or the old content
    assert _layer_of(server, task_run_id) == layer_key([content_hash(changed)])
    with server.client(token) as agent:
        assert ok(agent.get(f"/v1/task-runs/{task_run_id}/fhir/Patient/{patient['id']}"))["gender"] == "other"


def test_the_layer_rows_are_written_in_write_turns_with_no_read_snapshot_open(
    server: Server, api: httpx.Client, monkeypatch: pytest.MonkeyPatch
) -> None:
    """On SQLite an open read snapshot keeps the WAL from being checkpointed: a 1,024-patient
    build left ~700 MB for the next commit to copy while holding the write lock (1.5-2.4 s in
    which no request was answered). And each insert takes its turn at the write lock in line with
    the requests, instead of meeting them at SQLite's busy handler. Counted per thread: the
    preparing one's open reading units, the writing one's turns."""
    patients = [{"resourceType": "Patient", "id": unique("p").replace(" ", "-")} for _ in range(3)]
    dataset = ok(
        api.post("/datasets", json={"name": unique("d"), "type": "fhir", "data": _bundle(*patients)}), 201
    )
    benchmark_id = _benchmark(api, [dataset["id"]])
    readings: dict[int, int] = {}
    preparing: list[int] = []
    seen: list[tuple[int, int]] = []
    database = server.database
    real_reading, real_prepare = database.reading, actions.prepare_start
    queue = queue_of(database.engine)

    @contextmanager
    def reading() -> Iterator[Session]:
        me = threading.get_ident()
        readings[me] = readings.get(me, 0) + 1
        try:
            with real_reading() as session:
                yield session
        finally:
            readings[me] -= 1

    def prepare_start(*args: Any, **kwargs: Any) -> None:
        preparing.append(threading.get_ident())
        real_prepare(*args, **kwargs)

    def note() -> None:
        open_readings = sum(readings.get(thread, 0) for thread in preparing)
        in_turn = queue is None or queue.held_here()  # PostgreSQL: the row locks are the turn
        seen.append((open_readings, int(in_turn)))

    def record(_conn: Any, _cursor: Any, statement: str, *_: Any) -> None:
        if re.match(r"\s*INSERT INTO fhir_layers\b", statement, re.IGNORECASE):
            note()

    real_writer = layers_module._RowWriter._writer

    def noting_writer(self: Any, conn: Any) -> Any:
        write = real_writer(self, conn)
        return lambda chunk: (note(), write(chunk))

    monkeypatch.setattr(layers_module._RowWriter, "_writer", noting_writer)
    monkeypatch.setattr(database, "reading", reading)
    monkeypatch.setattr(actions, "prepare_start", prepare_start)
    with listening(database.engine, "before_cursor_execute", record):
        _start(server, api, benchmark_id)
    assert len(preparing) == 1
    assert seen == [(0, 1), (0, 1)]  # the rows, then the layer row: no snapshot open, in a turn


def test_a_read_ahead_not_started_yet_is_read_by_the_one_who_asks() -> None:
    """Two read-ahead threads serve every `start` of the process: when both are busy (other starts'
    reads), a dataset asked for whose read has not begun is read on the asking thread instead of
    waiting in line behind them, and read once."""
    import json
    from concurrent.futures import wait

    release = threading.Event()
    blockers = [datasets_module._READER.submit(release.wait, 30) for _ in range(2)]
    reads: list[str] = []

    def fetch() -> str:
        reads.append(threading.current_thread().name)
        return json.dumps({"resourceType": "Bundle"})

    stored = datasets_module.StoredDataset("ds_1", "fhir", "h", fetch, own_unit_of_work=True)
    try:
        stored.read_ahead()
        assert stored["data"] == {"resourceType": "Bundle"}
        assert reads == [threading.current_thread().name]
    finally:
        release.set()
        wait(blockers)
    assert stored["data"] == {"resourceType": "Bundle"} and reads == [threading.current_thread().name]
