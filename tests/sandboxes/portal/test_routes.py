"""The portal REST surface through the service (SPEC §5.2, §5.3, §6): seeded rows, filters, a
prior-auth POST decided by the payer's rules, 422s naming the field, PATCH, events, and a
`complete` whose portal-state-match result `rescore` and `assay verify` on the state tarball repeat.
"""

from __future__ import annotations

import json
from pathlib import Path

import httpx
from typer.testing import CliRunner

from assay.clients.cli.app import app as cli
from tests.service.builders import error, ok
from tests.service.conftest import Server

from .world import MRI_APPROVED, PORTAL, SUBMISSION, Started, complete, dataset, start_portal_task


def test_seeded_rows_filters_and_keys(server: Server, api: httpx.Client) -> None:
    started = start_portal_task(server, api, [MRI_APPROVED])
    with started.agent() as agent:
        patients = ok(agent.get(f"{started.portal}/patients"))
        assert patients["data"] == PORTAL["resources"]["patients"]["rows"]
        assert ok(agent.get(f"{started.portal}/patients/M1001"))["name"] == "Ann Lee"
        assert (
            ok(agent.get(f"{started.portal}/referrals", params={"member_id": "M1001"}))["data"][0][
                "referral_id"
            ]
            == "R1"
        )
        assert ok(agent.get(f"{started.portal}/referrals", params={"member_id": "M9"}))["data"] == []
        error(agent.get(f"{started.portal}/patients/M404"), 404, "NOT_FOUND")
        error(agent.get(f"{started.portal}/claims"), 404, "NOT_FOUND")


def test_prior_auth_is_decided_by_the_payer_rules(server: Server, api: httpx.Client) -> None:
    started = start_portal_task(server, api, [MRI_APPROVED])
    with started.agent() as agent:
        approved = ok(agent.post(f"{started.portal}/prior_auth_requests", json=SUBMISSION), 201)
        assert approved["status"] == "approved" and approved["auth_number"].startswith("AUTH")
        assert approved["request_id"].startswith("PA") and approved["patient"]["name"] == "Ann Lee"
        denied = ok(
            agent.post(
                f"{started.portal}/prior_auth_requests", json={**SUBMISSION, "procedure_code": "27447"}
            ),
            201,
        )
        assert (denied["status"], denied["auth_number"]) == ("denied", None)
        assert denied["reason"] == "conservative therapy not documented"
        pended = ok(
            agent.post(
                f"{started.portal}/prior_auth_requests", json={**SUBMISSION, "procedure_code": "99999"}
            ),
            201,
        )
        assert pended["status"] == "pended"
        assert ok(agent.get(f"{started.portal}/prior_auth_requests/{approved['request_id']}")) == approved
        listed = ok(agent.get(f"{started.portal}/prior_auth_requests", params={"status": "denied"}))["data"]
        assert [row["request_id"] for row in listed] == [denied["request_id"]]
        newest_first = ok(agent.get(f"{started.portal}/prior_auth_requests", params={"limit": 2}))
        assert [r["status"] for r in newest_first["data"]] == ["pended", "denied"]
        rest = ok(
            agent.get(
                f"{started.portal}/prior_auth_requests", params={"cursor": newest_first["_meta"]["next"]}
            )
        )
        assert [r["status"] for r in rest["data"]] == ["approved"]


def test_bad_submissions_are_422s_naming_the_field(server: Server, api: httpx.Client) -> None:
    started = start_portal_task(server, api, [MRI_APPROVED])
    url = f"{started.portal}/prior_auth_requests"
    with started.agent() as agent:
        missing = {k: v for k, v in SUBMISSION.items() if k != "procedure_code"}
        assert error(agent.post(url, json=missing), 422, "VALIDATION_ERROR") == {
            "procedure_code": ["required"]
        }
        no_npi = {**SUBMISSION, "provider": {"name": "x"}}
        assert "provider.npi" in error(agent.post(url, json=no_npi), 422, "VALIDATION_ERROR")
        forged = {**SUBMISSION, "status": "approved", "auth_number": "AUTH1"}
        assert set(error(agent.post(url, json=forged), 422, "VALIDATION_ERROR")) == {"status", "auth_number"}
        stranger = {**SUBMISSION, "patient": {"member_id": "M9999"}}
        assert "patient.member_id" in error(agent.post(url, json=stranger), 422, "VALIDATION_ERROR")
        wrong_birth = {**SUBMISSION, "patient": {"member_id": "M1001", "birth_date": "1980-04-03"}}
        assert "patient.birth_date" in error(agent.post(url, json=wrong_birth), 422, "VALIDATION_ERROR")
        error(agent.post(url, content=b"{not json"), 400, "BAD_REQUEST")
        error(agent.post(url, content=b'{"procedure_code": NaN}'), 422, "VALIDATION_ERROR")
        error(agent.post(url, json=[1, 2]), 422, "VALIDATION_ERROR")
        deep = b'{"notes": ' + b"[" * 900 + b"]" * 900 + b"}"
        error(agent.post(url, content=deep), 422, "VALIDATION_ERROR")
        error(agent.post(f"{started.portal}/patients", json={"member_id": "M1001"}), 409, "CONFLICT")
        error(agent.get(url, params={"cursor": "nonsense"}), 400, "BAD_REQUEST")


def test_patch_merges_and_keeps_the_payer_fields(server: Server, api: httpx.Client) -> None:
    started = start_portal_task(server, api, [MRI_APPROVED])
    url = f"{started.portal}/prior_auth_requests"
    with started.agent() as agent:
        pended = ok(agent.post(url, json={**SUBMISSION, "procedure_code": "99999"}), 201)
        key = pended["request_id"]
        error(agent.patch(f"{url}/{key}", json={"status": "approved"}), 422, "VALIDATION_ERROR")
        error(agent.patch(f"{url}/{key}", json={"request_id": "other"}), 422, "VALIDATION_ERROR")
        noted = ok(agent.patch(f"{url}/{key}", json={"notes": "faxed records", "service_date": None}))
        assert (noted["notes"], noted["service_date"], noted["status"]) == ("faxed records", None, "pended")
        corrected = ok(agent.patch(f"{url}/{key}", json={"procedure_code": "70551"}))
        assert corrected["status"] == "approved" and corrected["auth_number"]
        rows = ok(agent.get(url))["data"]
        assert len(rows) == 1 and rows[0] == corrected
        patient = ok(agent.patch(f"{started.portal}/patients/M1001", json={"phone": "555-0100"}))
        assert patient == {**PORTAL["resources"]["patients"]["rows"][0], "phone": "555-0100"}


def test_complete_rescore_and_offline_verify_agree(server: Server, api: httpx.Client, tmp_path: Path) -> None:
    wrong_code = {**MRI_APPROVED, "assertions": [{"path": "procedure_code", "expected": "70553"}]}
    started = start_portal_task(server, api, [MRI_APPROVED, wrong_code])
    with started.agent() as agent:
        ok(agent.post(f"{started.portal}/prior_auth_requests", json=SUBMISSION), 201)
    result = complete(started)
    assert [check["passed"] for check in result["checks"]] == [True, False]
    assert result["verdict"] != "pass"
    failed = result["checks"][1]
    assert failed["evidence"]["assertionResults"][0]["path"] == "procedure_code"
    assert failed["evidence"]["assertionResults"][0]["actual"] == "70551"
    with started.agent() as agent:
        error(agent.get(f"{started.portal}/patients"), 409, "CONFLICT")
    rescored = ok(api.post(f"/task-runs/{started.task_run_id}/rescore"))
    assert (rescored["score"], rescored["verdict"]) == (result["score"], result["verdict"])
    tarball = tmp_path / "state.tar.gz"
    response = api.get(f"/task-runs/{started.task_run_id}/state")
    assert response.status_code == 200
    tarball.write_bytes(response.content)
    task_file = tmp_path / "task.json"
    task_file.write_text(json.dumps({"criteria": [{"assertion": MRI_APPROVED}, {"assertion": wrong_code}]}))
    verified = CliRunner().invoke(cli, ["verify", str(task_file), str(tarball), "--json"])
    assert verified.exit_code == 0, verified.output
    offline = json.loads(verified.output)
    assert (offline["score"], offline["verdict"]) == (result["score"], result["verdict"])
    events = ok(api.get(f"/task-runs/{started.task_run_id}/events", params={"limit": 100}))["data"]
    portal_events = [e for e in events if e["type"] == "portal_request"]
    assert [(e["method"], e["status"]) for e in portal_events] == [("POST", 201)]


def test_two_payers_portals_by_slug(server: Server, api: httpx.Client) -> None:
    alpha = {**PORTAL, "slug": "acme01"}
    beta_payer = {
        "payer": {"id": "BETA", "name": "Beta"},
        "members": [{"member_id": "B1", "first_name": "Cy", "last_name": "Ng", "birth_date": "1990-01-01"}],
        "default_determination": {"determination": "denied"},
    }

    other = {
        "slug": "beta",
        "payer": beta_payer,
        "resources": {"patients": {"rows": [{"member_id": "B1", "name": "Cy"}]}},
    }
    ids = [dataset(api, "portal", alpha), dataset(api, "portal", other)]
    in_beta = {
        "assert": "portal-state-match",
        "portal": "beta",
        "correlate_by": {"resource": "prior_auth_requests", "key": "procedure_code", "value": "70551"},
        "assertions": [{"path": "status", "expected": "denied"}],
    }
    started = start_portal_task(server, api, [in_beta, {**MRI_APPROVED, "portal": "acme01"}], datasets=ids)
    body = {**SUBMISSION, "patient": {"member_id": "B1"}}
    with started.agent() as agent:
        error(agent.get(f"{started.portal}/patients"), 400, "BAD_REQUEST")
        assert (
            ok(agent.get(f"{started.portal}/patients", params={"portal": "beta"}))["data"][0]["member_id"]
            == "B1"
        )
        error(agent.get(f"{started.portal}/patients", params={"portal": "gamma"}), 404, "NOT_FOUND")
        denied = ok(agent.post(f"{started.portal}/prior_auth_requests?portal=beta", json=body), 201)
        assert denied["status"] == "denied"
        ok(agent.post(f"{started.portal}/prior_auth_requests?portal=acme01", json=SUBMISSION), 201)
    result = complete(started)
    assert result["verdict"] == "pass", result


def test_scenario_sets_rows_and_bad_datasets_are_422(server: Server, api: httpx.Client) -> None:
    scenario = [
        {
            "step": "set_portal_row",
            "resource": "patients",
            "row": {"member_id": "M1001", "name": "Ann B. Lee"},
        },
        {"step": "set_portal_row", "resource": "providers", "row": {"npi": "111", "name": "Dr. New"}},
    ]
    started: Started = start_portal_task(server, api, [MRI_APPROVED], scenario=scenario)
    with started.agent() as agent:
        assert ok(agent.get(f"{started.portal}/patients"))["data"] == [scenario[0]["row"]]
        assert ok(agent.get(f"{started.portal}/providers/111"))["name"] == "Dr. New"
    bad = {
        "resources": {
            "claims": {"rows": [{"id": 1}]},
            "patients": {"rows": [{"member_id": "A"}, {"member_id": "A"}]},
        }
    }
    details = error(
        api.post("/datasets", json={"name": "bad", "type": "portal", "data": bad}), 422, "VALIDATION_ERROR"
    )
    assert set(details) == {"data.resources.claims.key", "data.resources.patients.rows.1.member_id"}
    typo = {"resources": {"web": {"key": "id"}}, "slugg": "x", "payer": {"payer": {}}}
    typos = error(
        api.post("/datasets", json={"name": "t", "type": "portal", "data": typo}), 422, "VALIDATION_ERROR"
    )
    assert {"data.slugg", "data.resources.web", "data.payer.payer.id"} <= set(typos), typos


def test_a_portal_without_its_own_payer_decides_with_the_x12_payer(server: Server, api: httpx.Client) -> None:
    from .world import PAYER

    without_payer = {key: value for key, value in PORTAL.items() if key != "payer"}
    ids = [dataset(api, "x12", PAYER), dataset(api, "portal", without_payer)]
    started = start_portal_task(server, api, [MRI_APPROVED], datasets=ids)
    with started.agent() as agent:
        denied = ok(
            agent.post(
                f"{started.portal}/prior_auth_requests", json={**SUBMISSION, "procedure_code": "27447"}
            ),
            201,
        )
        assert (denied["status"], denied["reason"]) == ("denied", "conservative therapy not documented")
        ok(agent.post(f"{started.portal}/prior_auth_requests", json=SUBMISSION), 201)
    assert complete(started)["verdict"] == "pass"
    alone = start_portal_task(server, api, [MRI_APPROVED], datasets=[dataset(api, "portal", without_payer)])
    with alone.agent() as agent:
        submitted = ok(agent.post(f"{alone.portal}/prior_auth_requests", json=SUBMISSION), 201)
    assert (submitted["status"], submitted["auth_number"]) == ("submitted", None)


def test_a_later_dataset_row_with_an_earlier_rows_key_is_a_new_version_of_it(
    server: Server, api: httpx.Client
) -> None:
    """The seed resolves rows by key as `set_row` does (it writes them all in one statement): a row
    whose key an earlier dataset's row has is a new version of that row, not a second row (listed
    where its last version puts it, as after a PATCH)."""
    first = {"resources": {"patients": {"rows": [
        {"member_id": "M1001", "name": "Ann Lee"}, {"member_id": "M1002", "name": "Bo Diaz"},
    ]}}}  # fmt: skip
    later = {"resources": {"patients": {"rows": [{"member_id": "M1001", "name": "Ann Lee-Park"}]}}}
    ids = [dataset(api, "portal", first), dataset(api, "portal", later)]
    started = start_portal_task(server, api, [MRI_APPROVED], datasets=ids)
    with started.agent() as agent:
        patients = ok(agent.get(f"{started.portal}/patients"))["data"]
        assert [(p["member_id"], p["name"]) for p in patients] == [
            ("M1002", "Bo Diaz"),
            ("M1001", "Ann Lee-Park"),
        ]
        assert ok(agent.get(f"{started.portal}/patients/M1001"))["name"] == "Ann Lee-Park"
