"""FHIR fidelity benchmark: chained and `_has` search, `$everything`, and the cost of
validating writes. In-process, on the 18 bundled Synthea files.

Run: `uv run python bench/bench_fhir_fidelity.py`

1. Loads every Synthea file into one `FhirStore` (as `bench_fhir.py` does) and times a mix of
   chained (`subject:Patient.name=…`, `subject.birthdate=…`) and reverse-chained
   (`_has:Condition:subject:code=…`, `_has:Observation:patient:code=…`) searches: p50/p99, first
   pass (lazy index builds) apart.
2. Provisions the same bundles as one embedded playground store (SQLite in a temp dir) and times
   `Patient/[id]/$everything` for each Synthea patient (`operations.everything`, no HTTP).
3. Validation: `validation.validate_resource` over every Synthea resource (mean and p50 per
   resource), and `actions.create` of a Patient on a validating store against a lenient one
   (p50 per write; the difference is what validation costs a write).

Targets: chained and `_has` p50 < 5 ms; `$everything` < 50 ms.
"""

from __future__ import annotations

import contextlib
import json
import os
import platform
import random
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from assay.formats.fhir import FhirStore, resources_from_bundle
from assay.sandboxes.fhir import actions, operations
from assay.sandboxes.fhir.outcomes import FhirError
from assay.sandboxes.fhir.store import EmbeddedFhir
from assay.sandboxes.fhir.validation import validate_resource
from assay.store.database import Database

ROOT = Path(__file__).resolve().parent.parent
SYNTHEA = ROOT / "tests" / "fixtures" / "fhir" / "synthea"
SNOMED = ["38341003", "44054006", "195662009", "10509002", "444814009", "15777000"]
LOINC = ["8302-2", "29463-7", "39156-5", "55284-4", "72514-3"]


def _bundles() -> list[dict[str, Any]]:
    return [json.loads(path.read_text(encoding="utf-8")) for path in sorted(SYNTHEA.glob("*/*.json"))]


def _ms(samples: list[float]) -> str:
    ordered = sorted(samples)
    p50 = statistics.median(ordered) * 1000
    p99 = ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))] * 1000
    return f"p50 {p50:.3f} ms, p99 {p99:.3f} ms (n={len(ordered)})"


def _chain_mix(
    patients: list[dict[str, Any]], rng: random.Random, n: int
) -> list[tuple[str, dict[str, str]]]:
    def family() -> str:
        return str(rng.choice(patients)["name"][0]["family"])

    templates = [
        lambda: ("Condition", {"subject:Patient.name": family()}),
        lambda: (
            "Observation",
            {"subject:Patient.family": family(), "code": f"http://loinc.org|{rng.choice(LOINC)}"},
        ),
        lambda: ("Encounter", {"subject.birthdate": str(rng.choice(patients)["birthDate"])}),
        lambda: ("Patient", {"_has:Condition:subject:code": f"http://snomed.info/sct|{rng.choice(SNOMED)}"}),
        lambda: (
            "Patient",
            {"_has:Observation:patient:code": f"http://loinc.org|{rng.choice(LOINC)}", "gender": "female"},
        ),
    ]
    return [rng.choice(templates)() for _ in range(n)]


def main() -> None:
    print(
        f"machine: {platform.processor() or platform.machine()}, {os.cpu_count()} cores, {platform.python_version()}"
    )
    print(f"load average: {os.getloadavg()}")
    bundles = _bundles()
    resources = [r for b in bundles for r in resources_from_bundle(b)]
    store = FhirStore(resources)
    patients = store.resources("Patient")
    rng = random.Random(15)
    mix = _chain_mix(patients, rng, 1000)
    first: list[float] = []
    for kind, params in mix[:50]:
        started = time.perf_counter()
        store.search(kind, params)
        first.append(time.perf_counter() - started)
    samples = []
    for kind, params in mix:
        started = time.perf_counter()
        store.search(kind, params)
        samples.append(time.perf_counter() - started)
    print(f"resources: {len(resources)}, patients: {len(patients)}")
    print(f"chained + _has search, first 50 (index builds): {_ms(first)}")
    print(f"chained + _has search, 1,000 mixed: {_ms(samples)}   target p50 < 5 ms")

    with tempfile.TemporaryDirectory() as tmp:
        database = Database(f"sqlite:///{tmp}/bench.db")
        database.migrate()
        fhir = EmbeddedFhir(database.engine)
        fhir.provision("bench", bundles)
        fhir.provision("lenient")
        for pid in [p["id"] for p in patients][:2]:
            operations.everything(fhir, "bench", "http://x/fhir", pid, [("_count", "1000")])  # warm
        everything = []
        for _ in range(5):
            for patient in patients:
                started = time.perf_counter()
                result = operations.everything(
                    fhir, "bench", "http://x/fhir", patient["id"], [("_count", "1000")]
                )
                everything.append(time.perf_counter() - started)
                assert result.body is not None and result.body["total"] > 1
        print(f"$everything per Synthea patient: {_ms(everything)}   target < 50 ms")

        per_resource = []
        for resource in resources:
            started = time.perf_counter()
            with contextlib.suppress(FhirError):  # a refused seed resource still costs its check
                validate_resource(resource)
            per_resource.append(time.perf_counter() - started)
        mean = statistics.fmean(per_resource) * 1000
        print(
            f"validate_resource over {len(resources)} Synthea resources: mean {mean:.3f} ms, {_ms(per_resource)}"
        )

        fhir.provision("validating")
        with fhir.reading("lenient") as index:
            index.strict = False
        body = {"resourceType": "Patient", "name": [{"family": "Bench", "given": ["A"]}], "birthDate": "1970-01-02",
                "gender": "female", "identifier": [{"system": "urn:x", "value": "1"}]}  # fmt: skip
        timings: dict[str, list[float]] = {"validating": [], "lenient": []}
        for _ in range(200):
            for store_id in ("validating", "lenient"):
                started = time.perf_counter()
                actions.create(fhir, store_id, "http://x/fhir", "Patient", dict(body))
                timings[store_id].append(time.perf_counter() - started)
        stamped = actions.create(fhir, "lenient", "http://x/fhir", "Patient", dict(body)).body
        assert stamped is not None
        direct = []
        for _ in range(500):
            started = time.perf_counter()
            validate_resource(stamped)
            direct.append(time.perf_counter() - started)
        print(f"validate_resource of that Patient alone: {_ms(direct)}")
        gap = (statistics.median(timings["validating"]) - statistics.median(timings["lenient"])) * 1000
        print(f"create Patient, validating store: {_ms(timings['validating'])}")
        print(f"create Patient, lenient store:    {_ms(timings['lenient'])}")
        print(f"validation's cost per write (p50 difference): {gap:.3f} ms")
        database.dispose()


if __name__ == "__main__":
    main()
