"""FHIR verification benchmark: snapshot load, search latency, criteria per second.

Run: `uv run python bench/bench_fhir.py`

1. Writes a snapshot of all 18 bundled Synthea files (tests/fixtures/fhir/synthea) to a temp dir.
2. Times `open_snapshot` (median of 5 cold opens).
3. Runs a mix of 1,000 FHIR searches (string, token, reference, date ranges, quantity, `_sort`,
   `_count`, `:missing`, `:not`) on one opened snapshot and reports p50/p99 latency; the first
   pass (which builds the lazy indexes) is reported separately.
4. Verifies a 20-criterion `fhir-resource-state` task through `verify_task` repeatedly and
   reports criteria per second.

Targets on the 2-core reference machine: load < 3 s, search p50 < 2 ms, >= 500 criteria/s.
"""

from __future__ import annotations

import json
import platform
import random
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from assay.formats.fhir import resources_from_bundle
from assay.snapshot import open_snapshot, write_snapshot
from assay.verify import CriterionSpec, verify_task

ROOT = Path(__file__).resolve().parent.parent
SYNTHEA = ROOT / "tests" / "fixtures" / "fhir" / "synthea"
LOINC = ["8302-2", "29463-7", "39156-5", "55284-4", "72514-3", "2085-9", "33914-3", "4548-4"]


def load_resources() -> list[dict[str, Any]]:
    resources: list[dict[str, Any]] = []
    for path in sorted(SYNTHEA.glob("*/*.json")):
        resources.extend(resources_from_bundle(json.loads(path.read_text(encoding="utf-8"))))
    return resources


def search_mix(
    patients: list[dict[str, Any]], rng: random.Random, n: int
) -> list[tuple[str, dict[str, Any]]]:
    def patient() -> dict[str, Any]:
        return rng.choice(patients)

    templates = [
        lambda: ("Patient", {"family": patient()["name"][0]["family"][:4].lower()}),
        lambda: ("Patient", {"family": patient()["name"][0]["family"], "birthdate": patient()["birthDate"]}),
        lambda: (
            "Patient",
            {"birthdate": f"lt{rng.randint(1940, 2020)}", "_sort": "-birthdate", "_count": "3"},
        ),
        lambda: (
            "Observation",
            {"subject": f"Patient/{patient()['id']}", "code": f"http://loinc.org|{rng.choice(LOINC)}"},
        ),
        lambda: (
            "Observation",
            {"patient": patient()["id"], "date": [f"ge{rng.randint(2000, 2019)}", "lt2021"]},
        ),
        lambda: ("Observation", {"code": rng.choice(LOINC), "value-quantity": f"gt{rng.randint(1, 150)}"}),
        lambda: ("Encounter", {"patient": patient()["id"], "date": ["ge2012-01-01", "lt2019-01-01"]}),
        lambda: ("Encounter", {"subject": patient()["id"], "_sort": "-date", "_count": "1"}),
        lambda: ("Condition", {"patient": patient()["id"], "clinical-status": "active"}),
        lambda: ("Immunization", {"patient": f"Patient/{patient()['id']}", "status:not": "entered-in-error"}),
        lambda: ("Claim", {"patient": patient()["id"], "created": f"ge{rng.randint(2010, 2020)}"}),
        lambda: ("Patient", {"death-date:missing": rng.choice(["true", "false"])}),
    ]
    return [rng.choice(templates)() for _ in range(n)]


def criteria(patients: list[dict[str, Any]]) -> list[CriterionSpec]:
    specs = []
    for i in range(20):
        p = patients[i % len(patients)]
        kind = i % 4
        if kind == 0:
            assertion = {
                "resource_type": "Patient",
                "search": {"_id": p["id"]},
                "fields": [
                    {"path": "name.0.family", "expected": p["name"][0]["family"]},
                    {"path": "birthDate", "expected": p["birthDate"]},
                ],
            }
        elif kind == 1:
            assertion = {
                "resource_type": "Observation",
                "search": {"subject": f"Patient/{p['id']}", "code": "http://loinc.org|8302-2"},
                "match": "latest",
                "fields": [{"path": "valueQuantity.unit", "expected": "cm"}],
            }
        elif kind == 2:
            assertion = {
                "resource_type": "Encounter",
                "search": {"patient": p["id"], "date": "ge2010"},
                "fields": [
                    {"path": "status", "expected": "finished"},
                    {"path": "class.code", "operator": "in", "expected": ["AMB", "EMER", "IMP"]},
                ],
            }
        else:
            assertion = {
                "resource_type": "Condition",
                "search": {"patient": p["id"]},
                "fields": [{"fhirpath": "code.coding.system", "expected": "http://snomed.info/sct"}],
            }
        specs.append(CriterionSpec(assertion={"assert": "fhir-resource-state", **assertion}, label=f"c{i}"))
    return specs


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def main() -> None:
    resources = load_resources()
    with tempfile.TemporaryDirectory() as tmp:
        snapshot = write_snapshot(Path(tmp) / "snapshot", fhir=resources)
        loads = []
        for _ in range(5):
            start = time.perf_counter()
            state = open_snapshot(snapshot)
            loads.append(time.perf_counter() - start)
        load = statistics.median(loads)

        patients = state.fhir.resources("Patient")
        mix = search_mix(patients, random.Random(2), 1000)
        start = time.perf_counter()
        for resource_type, params in mix:
            state.fhir_search(resource_type, params)
        first_pass = time.perf_counter() - start
        latencies = []
        hits = 0
        for resource_type, params in mix:
            start = time.perf_counter()
            hits += len(state.fhir_search(resource_type, params))
            latencies.append((time.perf_counter() - start) * 1000)

        specs = criteria(patients)
        verification = verify_task(specs, state)
        assert all(run.result.status == "ok" for run in verification.runs)
        rounds = 25
        start = time.perf_counter()
        for _ in range(rounds):
            verify_task(specs, state)
        per_second = rounds * len(specs) / (time.perf_counter() - start)

    print(
        f"machine: {platform.machine()}, {platform.python_implementation()} {platform.python_version()}, "
        f"{platform.system()}"
    )
    print(f"snapshot: {len(resources)} resources from 18 Synthea files")
    print(f"open_snapshot: {load * 1000:.0f} ms (median of 5; target < 3000 ms)")
    print(
        f"search mix, first pass incl. lazy index builds: {first_pass * 1000:.0f} ms for {len(mix)} searches"
    )
    print(
        f"search latency: p50 {percentile(latencies, 0.5):.3f} ms, p99 {percentile(latencies, 0.99):.3f} ms "
        f"(target p50 < 2 ms; {hits} results)"
    )
    print(
        f"verify_task: {per_second:.0f} criteria/s on a 20-criterion task "
        f"(score {float(verification.score.score):.2f}; target >= 500)"
    )


if __name__ == "__main__":
    main()
