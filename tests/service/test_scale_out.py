"""Scale-out across machines, simulated on one (issue 9): two `assay serve` instances, each with its
own data dir, on one PostgreSQL and one shared file storage, as `docs/deployment.md` describes.

A run is created and started through instance A, driven through both (FHIR writes, HL7 over REST
and MLLP, X12, files over REST and SFTP) and completed through instance B. A FHIR write through
one instance is visible to a search through the other at once, though each worker answers warm
searches from memory (its FHIR index and the task run's rows): they are used only while
PostgreSQL's change epoch is the one the request read first, and every committed write moves it
before it answers (`store/epoch.py`). Instance A runs the listeners (MLLP, SFTP); B runs with `ASSAY_LISTENERS=0` and two
workers, names the same ports in its credentials, and would fail to start if it bound them too.
"""

from __future__ import annotations

import io
import json
import time
import uuid
from pathlib import Path
from typing import Any

import httpx
import paramiko
from hl7.client import MLLPClient

from assay.formats.hl7 import parse_message
from assay.formats.x12 import parse_x12

from ..sandboxes.payer.samples import PAYER
from ..sandboxes.x12.requests import eligibility_270, interchange, subscriber_270
from .builders import ok
from .processes import free_port, serving

Json = dict[str, Any]

PATIENT = {"resourceType": "Patient", "id": "john-smith", "name": [{"family": "Smith", "given": ["John"]}]}
BOOKED = {
    "assert": "fhir-resource-state",
    "resource_type": "Appointment",
    "search": {"patient": "Patient/john-smith", "status": "booked"},
    "fields": [{"path": "participant.0.actor.display", "expected": "Dr. Rivera"}],
}
ADT = {
    "assert": "hl7-structural",
    "correlate_by": {"message_type": "ADT^A08"},
    "fields": [{"path": "PID.5.1", "expected": "SMITH"}],
}
ORM = {
    "assert": "hl7-structural",
    "correlate_by": {"message_type": "ORM^O01"},
    "fields": [{"path": "PID.5.1", "expected": "SMITH"}],
}
ELIGIBLE = {
    "assert": "x12-response",
    "transaction": "271",
    "correlate_by": {"member_id": "W123456789", "trace_number": "TRACE-1"},
    "fields": [{"path": "2110C/EB[1]03", "expected": "30"}],
}
UPLOADED_REST = {"assert": "sftp-file-present", "path": "outbox/rest.json"}
UPLOADED_SFTP = {"assert": "sftp-file-present", "path": "outbox/sftp.txt"}


def _appointment(display: str = "Dr. Rivera") -> Json:
    return {
        "resourceType": "Appointment",
        "status": "booked",
        "participant": [
            {"actor": {"display": display}, "status": "accepted"},
            {"actor": {"reference": "Patient/john-smith"}, "status": "accepted"},
        ],
    }


def _hl7(message_type: str, facility: str, control: str) -> str:
    return (
        f"MSH|^~\\&|AGENT|CLINIC|LAB|{facility}|20260301120500||{message_type}|{control}|P|2.5.1\r"
        "PID|1||MRN123^^^HOSP^MR||SMITH^JOHN||19800101|M\r"
    )


def _catalog(api: httpx.Client) -> str:
    """One task with a FHIR and an X12 dataset and a criterion per surface; the benchmark's id."""
    bundle = {"resourceType": "Bundle", "type": "collection", "entry": [{"resource": PATIENT}]}
    tag = uuid.uuid4().hex[:8]
    fhir = ok(api.post("/datasets", json={"name": f"ehr {tag}", "type": "fhir", "data": bundle}), 201)
    payer = ok(api.post("/datasets", json={"name": f"payer {tag}", "type": "x12", "data": PAYER}), 201)
    benchmark = ok(api.post("/benchmarks", json={"name": f"scale-out {tag}"}), 201)
    task = ok(
        api.post(
            "/tasks",
            json={
                "benchmark_id": benchmark["id"],
                "name": "book, notify, check, file",
                "dataset_ids": [fhir["id"], payer["id"]],
            },
        ),
        201,
    )
    for label, assertion in (
        ("booked", BOOKED),
        ("adt over MLLP", ADT),
        ("orm over REST", ORM),
        ("eligibility", ELIGIBLE),
        ("file over REST", UPLOADED_REST),
        ("file over SFTP", UPLOADED_SFTP),
    ):
        criterion = {"task_id": task["id"], "label": label, "assertion": assertion}
        ok(api.post("/criteria", json=criterion), 201)
    return str(benchmark["id"])


def _path(url: str) -> str:
    """The path of an endpoint URL an instance handed out (any instance serves it)."""
    return httpx.URL(url).raw_path.decode()


def test_a_run_started_on_one_instance_is_driven_and_completed_on_another(
    _postgres_database: str, tmp_path: Path
) -> None:
    key = "vk_scale_" + uuid.uuid4().hex
    storage = tmp_path / "shared-storage"
    storage.mkdir()
    mllp_port, sftp_port = free_port(), free_port()
    shared = {
        "ASSAY_STORAGE_URL": storage.as_uri(),
        "ASSAY_MLLP_PORT": str(mllp_port),
        "ASSAY_SFTP_PORT": str(sftp_port),
        "ASSAY_PUBLIC_HOST": "127.0.0.1",
    }
    with (
        serving(tmp_path / "a", database_url=_postgres_database, key=key, env=shared) as a,
        serving(
            tmp_path / "b",
            database_url=_postgres_database,
            key=key,
            workers=2,
            env={**shared, "ASSAY_LISTENERS": "0"},
        ) as b,
    ):
        org = {"Authorization": f"Bearer {key}"}
        with httpx.Client(base_url=a.url, headers=org, timeout=60) as api_a:
            benchmark_id = _catalog(api_a)
            run = ok(api_a.post("/v1/benchmark-runs", json={"benchmark_id": benchmark_id}), 201)
        [task_run] = run["task_runs"]
        agent = {"Authorization": f"Bearer {run['bearer_token']}"}
        with (
            httpx.Client(base_url=a.url, headers=agent, timeout=60) as on_a,
            httpx.Client(base_url=b.url, headers=agent, timeout=60) as on_b,
        ):
            started = ok(on_a.post(task_run["start_url"]))
            again = ok(on_b.post(task_run["start_url"]))  # idempotent through either instance
            assert again["playground_id"] == started["playground_id"]
            assert again["credentials"]["hl7"]["port"] == started["credentials"]["hl7"]["port"] == mllp_port
            assert again["credentials"]["sftp"]["port"] == sftp_port
            fhir = _path(started["endpoints"]["fhir"])

            # FHIR: a write through one instance is what the other reads and searches, at once,
            # though both have the store's index and the task run cached (warm: every worker
            # answers these searches from memory until the change epoch moves)
            booked = {"patient": "Patient/john-smith"}
            for _ in range(4):  # B's two workers, whichever answers
                assert ok(on_a.get(f"{fhir}/Appointment", params=booked))["total"] == 0
                assert ok(on_b.get(f"{fhir}/Appointment", params=booked))["total"] == 0
            created = on_a.post(f"{fhir}/Appointment", json=_appointment("Dr. Nobody"))
            assert created.status_code == 201, created.text
            appointment_id = created.json()["id"]
            found = ok(on_b.get(f"{fhir}/Appointment", params=booked))
            assert [e["resource"]["id"] for e in found.get("entry", [])] == [appointment_id]
            updated = on_b.put(
                f"{fhir}/Appointment/{appointment_id}",
                json={**_appointment(), "id": appointment_id},
                headers={"If-Match": 'W/"1"'},
            )
            assert updated.status_code == 200, updated.text
            read = ok(on_a.get(f"{fhir}/Appointment/{appointment_id}"))
            assert read["meta"]["versionId"] == "2"
            assert read["participant"][0]["actor"]["display"] == "Dr. Rivera"
            stale = on_a.put(
                f"{fhir}/Appointment/{appointment_id}",
                json={**_appointment("Dr. Late"), "id": appointment_id},
                headers={"If-Match": 'W/"1"'},
            )
            assert stale.status_code == 412, stale.text  # A saw B's version 2 before writing
            searched = ok(on_a.get(f"{fhir}/Appointment", params={"status": "booked"}))
            assert [e["resource"]["id"] for e in searched.get("entry", [])] == [appointment_id]

            # HL7: MLLP to the one listener (instance A's), REST through B
            hl7 = started["credentials"]["hl7"]
            with MLLPClient("127.0.0.1", hl7["port"]) as client:
                message = _hl7("ADT^A08^ADT_A01", hl7["receiving_facility"], "M-1")
                ack = parse_message(client.send_message(message).decode())
            assert ack.read("MSA.1").value == "AA"
            outbound = on_b.post(
                _path(started["endpoints"]["hl7_outbound"]),
                content=_hl7("ORM^O01", hl7["receiving_facility"], "M-2"),
                headers={"Content-Type": "x-application/hl7-v2+er7"},
            )
            assert outbound.status_code == 200, outbound.text

            # X12 through B
            request = interchange(
                "270",
                eligibility_270(
                    subscriber_270("W123456789", trace="TRACE-1", last="DOE", first="JANE", birth="19800412")
                ),
            )
            reply = on_b.post(
                _path(started["endpoints"]["x12"]) + "/270",
                content=request,
                headers={"Content-Type": "application/edi-x12"},
            )
            assert reply.status_code == 200 and reply.headers["x-assay-x12-response"] == "271", reply.text
            assert parse_x12(reply.content).interchanges

            # Files: REST through B, SFTP to A's listener, one shared storage
            files = _path(started["endpoints"]["files"])
            put = on_b.put(f"{files}/outbox/rest.json", content=json.dumps({"ok": True}).encode())
            assert put.status_code in (200, 201), put.text
            sftp = started["credentials"]["sftp"]
            transport = paramiko.Transport(("127.0.0.1", sftp["port"]))
            try:
                transport.connect(username=sftp["username"], password=sftp["password"])
                client = paramiko.SFTPClient.from_transport(transport)
                assert client is not None
                assert "rest.json" in client.listdir("outbox")  # B's upload, seen by A's listener
                client.putfo(io.BytesIO(b"sent over SFTP"), "outbox/sftp.txt")
                client.close()
            finally:
                transport.close()
            listed = ok(on_b.get(files))["data"]
            assert {"outbox/rest.json", "outbox/sftp.txt"} <= {entry["path"] for entry in listed}

            for _ in range(2):  # A's rows for the task run: warm
                ok(on_a.get(f"{fhir}/Appointment", params={"status": "booked"}))
            completed = ok(on_b.post(task_run["complete_url"]))
            failed = [(c["label"], c.get("details")) for c in completed["checks"] if not c["passed"]]
            assert not failed, failed
            assert completed["verdict"] == "pass" and completed["score"] == 1.0
            assert ok(on_a.post(task_run["complete_url"]))["score"] == 1.0  # the stored result
            after = on_a.get(f"{fhir}/Appointment", params={"status": "booked"})
            assert after.status_code == 409, after.text  # A's warm rows are stale at once
            late = on_a.post(f"{fhir}/Appointment", json=_appointment())
            assert late.status_code == 409, late.text  # the playground ended for every instance

        with httpx.Client(base_url=a.url, headers=org, timeout=60) as api_a:
            summary = ok(api_a.get(f"/benchmark-runs/{run['benchmark_run_id']}"))
            assert summary["phase"] == "completed" and summary["verdict"] == "pass"
            # Each process writes the events it queued (sandboxes/events.py); another instance's
            # arrive within milliseconds, so the list is polled, bounded.
            wanted = {"fhir_request", "hl7_outbound", "x12_exchange", "file_upload"}
            for _ in range(100):
                events = ok(api_a.get(f"/task-runs/{task_run['id']}/events", params={"limit": 100}))["data"]
                kinds = {e["type"] for e in events}
                if wanted <= kinds:
                    break
                time.sleep(0.1)
            assert wanted <= kinds, sorted(kinds)
        assert a.process.poll() is None and b.process.poll() is None
