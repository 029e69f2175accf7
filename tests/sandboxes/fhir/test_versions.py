"""The versioned store against a model (hypothesis): any sequence of writes, deletes and captures;
every capture reads back exactly the state at its sequence number, and history numbers versions."""

from __future__ import annotations

import uuid
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sqlalchemy import Engine

from assay.sandboxes.fhir import EmbeddedFhir

IDS = ["a", "b", "c", "seed"]
SEED = {"resourceType": "Bundle", "type": "collection", "entry": [
    {"resource": {"resourceType": "Patient", "id": "seed", "gender": "unknown"}},
]}  # fmt: skip

operations = st.lists(
    st.one_of(
        st.tuples(st.just("put"), st.sampled_from(IDS), st.sampled_from(["male", "female", "other"])),
        st.tuples(st.just("delete"), st.sampled_from(IDS), st.none()),
        st.tuples(st.just("capture"), st.none(), st.none()),
    ),
    max_size=12,
)


@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(steps=operations)
def test_captures_and_history_follow_a_model(engine: Engine, steps: list[tuple[str, Any, Any]]) -> None:
    fhir = EmbeddedFhir(engine)
    store = "pg_" + uuid.uuid4().hex[:20]
    fhir.provision(store, [SEED])
    model: dict[str, str] = {"seed": "unknown"}
    versions: dict[str, int] = {"seed": 1}
    captures: list[tuple[int, dict[str, str]]] = []
    for op, rid, gender in steps:
        if op == "put":
            with fhir.writing(store) as tx:
                stored = tx.put({"resourceType": "Patient", "gender": gender}, rid)
            versions[rid] = versions.get(rid, 0) + 1
            assert stored["meta"]["versionId"] == str(versions[rid])
            model[rid] = gender
        elif op == "delete" and rid in model:
            with fhir.writing(store) as tx:
                tx.delete("Patient", rid)
            versions[rid] += 1
            del model[rid]
        elif op == "capture":
            captures.append((fhir.capture(store), dict(model)))

    for seq, expected in captures:
        found = fhir.state_at(store, seq).search("Patient", {})
        assert {r["id"]: r["gender"] for r in found} == expected
    with fhir.reading(store) as index:
        assert {r["id"]: r["gender"] for r in index.search_index.search("Patient", {})} == model
    for rid, count in versions.items():
        assert [row.version_id for row in fhir.history(store, "Patient", rid)] == [
            str(n) for n in range(1, count + 1)
        ]
