"""FHIR dataset loading from Bundles (SPEC §5.1) on the bundled Synthea files and small cases."""

from __future__ import annotations

import copy
import json
import re
from pathlib import Path
from typing import Any

from tests.conftest import FIXTURES

from assay.formats.fhir import BundleLoader, copy_json, resources_from_bundle

FHIR = FIXTURES / "fhir"
NPI = "http://hl7.org/fhir/sid/us-npi"


def load(path: Path) -> dict[str, Any]:
    return json.loads(path.read_text(encoding="utf-8"))


def references(resources: list[dict[str, Any]]) -> list[str]:
    return re.findall(r'"reference": "([^"]*)"', json.dumps(resources))


def test_smart_2019_urn_uuid_references_become_type_slash_id() -> None:
    bundle = load(next((FHIR / "synthea" / "smart-2019").glob("Alfreda_Wyman_*.json")))
    resources = resources_from_bundle(bundle)
    assert len(resources) == len(bundle["entry"])
    loaded = {f"{r['resourceType']}/{r['id']}" for r in resources}
    refs = references(resources)
    assert refs and not [r for r in refs if r.startswith("urn:")]
    patient_refs = [r for r in refs if r.startswith("Patient/")]
    assert patient_refs and set(patient_refs) <= loaded


def test_hiv_2021_conditional_references_to_absent_resources_stay_verbatim() -> None:
    for path in sorted((FHIR / "synthea" / "hiv-2021").glob("*.json")):
        bundle = load(path)
        before = {r for r in references([e["resource"] for e in bundle["entry"]]) if "?" in r}
        resources = resources_from_bundle(bundle)
        refs = references(resources)
        assert not [r for r in refs if r.startswith("urn:uuid:")]
        assert {r for r in refs if "?" in r} == before
        assert any(r.startswith("Practitioner?identifier=") for r in before)


def test_conditional_reference_resolves_when_exactly_one_resource_matches() -> None:
    bundle = {
        "resourceType": "Bundle",
        "type": "searchset",
        "entry": [
            {
                "resource": {
                    "resourceType": "Practitioner",
                    "id": "dr-a",
                    "identifier": [{"system": NPI, "value": "1"}],
                }
            },
            {
                "resource": {
                    "resourceType": "Practitioner",
                    "id": "dr-b",
                    "identifier": [{"system": NPI, "value": "2"}],
                }
            },
            {
                "resource": {
                    "resourceType": "Practitioner",
                    "id": "dr-c",
                    "identifier": [{"system": NPI, "value": "2"}],
                }
            },
            {
                "resource": {
                    "resourceType": "Encounter",
                    "id": "e1",
                    "participant": [
                        {"individual": {"reference": f"Practitioner?identifier={NPI}|1"}},
                        {"individual": {"reference": f"Practitioner?identifier={NPI}|2"}},
                        {"individual": {"reference": f"Practitioner?identifier={NPI}|3"}},
                        {"individual": {"reference": "Practitioner?shoe-size=9"}},
                    ],
                }
            },
        ],
    }
    original = copy.deepcopy(bundle)
    encounter = resources_from_bundle(bundle)[-1]
    assert [p["individual"]["reference"] for p in encounter["participant"]] == [
        "Practitioner/dr-a",
        f"Practitioner?identifier={NPI}|2",
        f"Practitioner?identifier={NPI}|3",
        "Practitioner?shoe-size=9",
    ]
    assert bundle == original


def test_conditional_reference_resolves_against_earlier_datasets() -> None:
    earlier = [
        {"resourceType": "Organization", "id": "org-1", "identifier": [{"system": "urn:x", "value": "A"}]}
    ]
    bundle = {
        "resourceType": "Bundle",
        "type": "transaction",
        "entry": [
            {
                "resource": {
                    "resourceType": "Patient",
                    "id": "p",
                    "managingOrganization": {"reference": "Organization?identifier=urn:x|A"},
                }
            }
        ],
    }
    (patient,) = resources_from_bundle(bundle, existing=earlier)
    assert patient["managingOrganization"]["reference"] == "Organization/org-1"


def test_ids_deletes_absolute_full_urls_and_last_write_wins() -> None:
    bundle = {
        "resourceType": "Bundle",
        "type": "transaction",
        "entry": [
            {
                "fullUrl": "urn:uuid:aaaa-1",
                "resource": {"resourceType": "Patient", "name": [{"family": "A"}]},
            },
            {"resource": {"resourceType": "Patient"}},
            {
                "fullUrl": "http://example.org/fhir/Patient/123",
                "resource": {"resourceType": "Patient", "id": "123"},
            },
            {
                "request": {"method": "DELETE", "url": "Patient/9"},
                "resource": {"resourceType": "Patient", "id": "9"},
            },
            {
                "resource": {
                    "resourceType": "Observation",
                    "id": "o",
                    "subject": {"reference": "urn:uuid:aaaa-1"},
                    "performer": [{"reference": "http://example.org/fhir/Patient/123"}],
                }
            },
            {"resource": {"resourceType": "Patient", "id": "123", "gender": "other"}},
            {"request": {"method": "GET", "url": "Patient?name=x"}},
        ],
    }
    resources = resources_from_bundle(bundle)
    by_key = {(r["resourceType"], r["id"]): r for r in resources}
    assert ("Patient", "aaaa-1") in by_key
    assert ("Patient", "9") not in by_key
    assert by_key[("Patient", "123")] == {"resourceType": "Patient", "id": "123", "gender": "other"}
    observation = by_key[("Observation", "o")]
    assert observation["subject"]["reference"] == "Patient/aaaa-1"
    assert observation["performer"][0]["reference"] == "Patient/123"
    generated = [r for r in resources if r["resourceType"] == "Patient" and r["id"] not in ("aaaa-1", "123")]
    assert len(generated) == 1 and len(generated[0]["id"]) == 36
    assert len(resources) == 4


def test_r4_transaction_example_loads_without_rejection() -> None:
    resources = resources_from_bundle(load(FHIR / "r4-examples" / "Bundle-bundle-transaction.json"))
    kinds = sorted(r["resourceType"] for r in resources)
    assert kinds == ["Parameters", "Patient", "Patient", "Patient", "Patient", "Patient"]
    assert {"123", "123a", "61ebe359-bfdc-4613-8bf2-c5e300945f0a"} <= {r["id"] for r in resources}


def _conditional_bundle(index: int) -> dict[str, Any]:
    """An Organization plus a Patient whose conditional reference names the first bundle's one."""
    return {
        "resourceType": "Bundle",
        "type": "transaction",
        "entry": [
            {"resource": {"resourceType": "Organization", "id": f"org-{index}",
                          "identifier": [{"system": "urn:x", "value": f"O{index}"}]}},
            {"resource": {"resourceType": "Patient", "id": f"p-{index}",
                          "managingOrganization": {"reference": "Organization?identifier=urn:x|O0"},
                          "generalPractitioner": [{"reference": f"Organization?identifier=urn:x|O{index + 1}"}]}},
        ],
    }  # fmt: skip


def test_loader_builds_one_index_for_every_bundle_and_keeps_load_order_semantics() -> None:
    """Conditional references in many bundles resolve against one index built once (it was one per
    bundle: quadratic), across bundles, and never against a bundle loaded later."""
    loader = BundleLoader()
    for index in range(5):
        loader.add(_conditional_bundle(index))
    assert loader.index_builds == 1
    patients = {r["id"]: r for r in loader.resources() if r["resourceType"] == "Patient"}
    for index in range(5):
        assert patients[f"p-{index}"]["managingOrganization"]["reference"] == "Organization/org-0"
        # `O{index + 1}` is only loaded by the next bundle: left verbatim, as before
        assert patients[f"p-{index}"]["generalPractitioner"][0]["reference"] == (
            f"Organization?identifier=urn:x|O{index + 1}"
        )
    assert loader.store is not None
    # the index conditional references used is current with the rewritten references
    found = loader.store.search("Patient", {"organization": "Organization/org-0"})
    assert sorted(r["id"] for r in found) == [f"p-{index}" for index in range(5)]


def test_loader_copies_unless_told_it_owns_the_bundle() -> None:
    bundle = _conditional_bundle(0)
    pristine = copy_json(bundle)
    BundleLoader().add(bundle)
    assert bundle == pristine
    (_, patient) = BundleLoader(copy=False).add(bundle)
    assert patient is bundle["entry"][1]["resource"]
    assert patient["managingOrganization"]["reference"] == "Organization/org-0"


def test_a_later_write_replaces_an_indexed_resource_for_conditional_references() -> None:
    """The kept index follows last-write-wins: a later dataset that changes an Organization's
    identifier moves which one a later conditional reference finds."""
    loader = BundleLoader()
    loader.add(_conditional_bundle(0))
    renamed = {
        "resourceType": "Organization",
        "id": "org-0",
        "identifier": [{"system": "urn:x", "value": "Z"}],
    }
    loader.add({"resourceType": "Bundle", "entry": [{"resource": renamed}]})
    (patient,) = loader.add({"resourceType": "Bundle", "entry": [{"resource": {
        "resourceType": "Patient", "id": "late", "managingOrganization": {"reference": "Organization?identifier=urn:x|O0"},
    }}]})  # fmt: skip
    assert patient["managingOrganization"]["reference"] == "Organization?identifier=urn:x|O0"
    assert loader.index_builds == 1
