"""`Patient/[id]/$everything` parameters (issue 15), from R4 patient-operation-everything.html:

- `start` (date 0..1): "The date range relates to care dates, not record currency dates - e.g. all
  records relating to care provided in a certain date range. If no start date is provided, all
  records prior to the end date are in scope."
- `end` (date 0..1): "... If no end date is provided, all records subsequent to the start date
  are in scope."
- `_since` (instant 0..1): "Resources updated after this period will be included in the response."
- `_type` (code 0..*): "One or more parameters, each containing one or more comma-delimited FHIR
  resource types to include in the return resources."
- `_count` (integer 0..1): the page size.
- "At a minimum, the patient resource(s) itself is returned"; "the server also returns whatever
  resources are needed to support the records - e.g. linked practitioners".

A resource's care date is its type's date parameter in `compartments.PATIENT_CARE_DATES`
(Encounter and Observation `date`, Condition `onset-date`); ranges overlap inclusively (a date
parameter's `ge`/`le`). On an `assay fhir-server` store and through a run token, SQLite and (with
ASSAY_TEST_POSTGRES_URL) PostgreSQL.
"""

from __future__ import annotations

from dataclasses import dataclass

import httpx
import pytest

LOINC = "http://loinc.org"
AMB = {"system": "http://terminology.hl7.org/CodeSystem/v3-ActCode", "code": "AMB"}


@dataclass
class History:
    http: httpx.Client
    patient: str
    ids: dict[str, str]

    def everything(self, **params: str | list[str]) -> set[str]:
        """The names (keys of `ids`, `patient`) of what `$everything` returns with `params`."""
        response = self.http.get(f"/Patient/{self.patient}/$everything", params=params)
        assert response.status_code == 200, response.text
        bundle = response.json()
        assert bundle["type"] == "searchset" and bundle["total"] == len(bundle.get("entry", []))
        names = {f"{kind}/{rid}": name for name, (kind, rid) in self._keys().items()}
        return {
            names[f"{e['resource']['resourceType']}/{e['resource']['id']}"] for e in bundle.get("entry", [])
        }

    def _keys(self) -> dict[str, tuple[str, str]]:
        return {"patient": ("Patient", self.patient), **{n: tuple(k.split("/")) for n, k in self.ids.items()}}  # type: ignore[misc]


def _create(http: httpx.Client, resource: dict[str, object]) -> str:
    created = http.post(f"/{resource['resourceType']}", json=resource)
    assert created.status_code == 201, created.text
    return f"{resource['resourceType']}/{created.json()['id']}"


@pytest.fixture(scope="module")
def history(agent_fhir: httpx.Client) -> History:
    http = agent_fhir
    patient = _create(http, {"resourceType": "Patient", "name": [{"family": "Smith"}]}).split("/")[1]
    subject = {"reference": f"Patient/{patient}"}
    ids: dict[str, str] = {}
    ids["dr_2019"] = _create(http, {"resourceType": "Practitioner", "name": [{"family": "Early"}]})
    ids["dr_2021"] = _create(http, {"resourceType": "Practitioner", "name": [{"family": "Late"}]})
    ids["visit_2019"] = _create(http, {
        "resourceType": "Encounter", "status": "finished", "class": AMB, "subject": subject,
        "period": {"start": "2019-03-01T09:00:00Z", "end": "2019-03-02T17:00:00Z"},
    })  # fmt: skip
    ids["visit_2021"] = _create(http, {
        "resourceType": "Encounter", "status": "finished", "class": AMB, "subject": subject,
        "period": {"start": "2021-05-01T09:00:00Z", "end": "2021-05-01T10:00:00Z"},
    })  # fmt: skip
    for year, day in (("2019", "2019-03-01T10:00:00Z"), ("2021", "2021-05-01T09:30:00Z")):
        ids[f"bp_{year}"] = _create(http, {
            "resourceType": "Observation", "status": "final", "subject": subject,
            "code": {"coding": [{"system": LOINC, "code": "8480-6"}]}, "effectiveDateTime": day,
            "performer": [{"reference": ids[f"dr_{year}"]}], "encounter": {"reference": ids[f"visit_{year}"]},
        })  # fmt: skip
    ids["asthma_2018"] = _create(http, {
        "resourceType": "Condition", "subject": subject, "code": {"text": "Asthma"}, "onsetDateTime": "2018-06",
    })  # fmt: skip
    ids["undated_condition"] = _create(
        http, {"resourceType": "Condition", "subject": subject, "code": {"text": "Gout"}}
    )
    ids["coverage"] = _create(http, {
        "resourceType": "Coverage", "status": "active", "beneficiary": subject,
        "payor": [{"reference": f"Patient/{patient}"}],
    })  # fmt: skip
    return History(http, patient, ids)


UNDATED = {"patient", "undated_condition", "coverage"}
"""Always returned by a care-date filter: the patient (R4: "at a minimum"), a Condition without
an onset, and a type without a care date."""


def test_without_parameters_everything_is_returned(history: History) -> None:
    assert history.everything() == {"patient", *history.ids}


def test_start_keeps_care_on_or_after_it(history: History) -> None:
    """`start` alone: everything from that date on; the practitioner of a kept Observation comes
    along, the one of a dropped Observation does not."""
    assert history.everything(start="2020-01-01") == {*UNDATED, "visit_2021", "bp_2021", "dr_2021"}


def test_end_keeps_care_on_or_before_it(history: History) -> None:
    assert history.everything(end="2019-12-31") == {
        *UNDATED, "visit_2019", "bp_2019", "dr_2019", "asthma_2018",
    }  # fmt: skip


def test_start_and_end_are_inclusive_and_compare_ranges(history: History) -> None:
    """A stay from 2019-03-01 to 2019-03-02 is care on 2019-03-02; an Observation of
    2019-03-01T10:00Z is care on 2019-03-01 (a date covers its whole day); a Condition with onset
    2018-06 is care in June 2018."""
    assert history.everything(start="2019-03-02", end="2019-03-02") == {*UNDATED, "visit_2019"}
    assert history.everything(start="2019-03-01", end="2019-03-01") == {
        *UNDATED, "visit_2019", "bp_2019", "dr_2019",
    }  # fmt: skip
    assert history.everything(start="2018-06-30", end="2018-06-30") == {*UNDATED, "asthma_2018"}
    assert history.everything(start="2019-03-01T12:00:00Z") >= {"visit_2019"}


def test_a_range_with_no_care_returns_the_patient(history: History) -> None:
    assert history.everything(start="2030-01-01") == UNDATED
    assert history.everything(start="2030-01-01", _type="Patient") == {"patient"}


def test_since_keeps_what_was_written_since(history: History) -> None:
    """`_since`: resources whose `meta.lastUpdated` is at or after it; the patient is still
    returned."""
    kind, rid = history.ids["coverage"].split("/")
    stamp = history.http.get(f"/{kind}/{rid}").json()["meta"]["lastUpdated"]
    assert history.everything(_since=stamp) == {"patient", "coverage"}


def test_type_repeats_and_takes_comma_lists(history: History) -> None:
    assert history.everything(_type=["Condition", "Encounter,Patient"]) == {
        "patient", "asthma_2018", "undated_condition", "visit_2019", "visit_2021",
    }  # fmt: skip
    assert history.everything(_type="Observation", start="2020") == {"bp_2021"}


def test_count_pages(history: History) -> None:
    response = history.http.get(f"/Patient/{history.patient}/$everything", params={"_count": "3"})
    bundle = response.json()
    assert len(bundle["entry"]) == 3 and bundle["total"] == len(history.ids) + 1
    assert any(link["relation"] == "next" for link in bundle["link"])


@pytest.mark.parametrize(
    "params",
    [{"start": "2019-13-01"}, {"end": "ge2019"}, {"start": "soon"}, {"_since": "yesterday"},
     {"_type": "Nonsense"}, {"start": ["2019", "2020"]}, {"subject": "x"}],
)  # fmt: skip
def test_bad_parameters_are_400(history: History, params: dict[str, str]) -> None:
    response = history.http.get(f"/Patient/{history.patient}/$everything", params=params)
    assert response.status_code == 400, response.text
    assert response.json()["resourceType"] == "OperationOutcome"
