"""`complete` is a clean cut on every surface: a write racing it is graded if and only if it was
acknowledged (`clean_cut.py` describes the history checker). Per surface and backend (SQLite, and
PostgreSQL with ASSAY_TEST_POSTGRES_URL): writers tag every write, `complete` lands mid-stream,
and the state tar.gz must hold exactly what was acknowledged. `bench/soak_clean_cut.py` runs the
same race longer, and against `assay serve --workers 2`."""

from __future__ import annotations

import json
import uuid
from pathlib import Path

import httpx
import pytest
from hl7.client import MLLPClient
from typer.testing import CliRunner

from assay.clients.cli.app import app as cli
from assay.formats.hl7 import parse_message
from assay.snapshot import open_snapshot
from tests.sandboxes.clean_cut import SURFACES, race, run_race, started_run
from tests.service.builders import ok
from tests.service.conftest import Server
from tests.service.processes import serving


@pytest.mark.parametrize("surface", sorted(SURFACES))
def test_what_was_acknowledged_is_what_is_graded(server: Server, surface: str, tmp_path: Path) -> None:
    history = run_race(server.url, server.org_key, SURFACES[surface], tmp_path)
    print(f"[{server.backend}] {history.summary()}")
    history.check()


def test_complete_rescore_and_verify_agree_on_a_raced_capture(
    server: Server, api: httpx.Client, tmp_path: Path
) -> None:
    """The graded score of a capture cut mid-stream is the same from `complete`, `rescore` and
    `assay verify` on the state tar.gz: all three read the one pointer."""
    prefix_criteria = [
        {"assert": "voice-transcript", "speaker": "agent", "contains": ["turn"]},
        {"assert": "voice-transcript", "speaker": "agent", "not_contains": ["turn"]},
    ]
    with started_run(server.url, server.org_key, criteria=prefix_criteria) as started:

        def complete() -> dict:  # type: ignore[type-arg]
            with started.client() as agent:
                return ok(agent.post(f"{started.base}/complete"))

        def state() -> bytes:
            answer = api.get(f"/task-runs/{started.task_run_id}/state")
            assert answer.status_code == 200, answer.text
            return answer.content

        history = race(SURFACES["voice"], started, complete, state, tmp_path)
    history.check()
    completed = history.completed
    rescored = ok(api.post(f"/task-runs/{started.task_run_id}/rescore"))
    assert (rescored["score"], rescored["verdict"]) == (completed["score"], completed["verdict"])
    archive, task_file = tmp_path / "state.tar.gz", tmp_path / "task.json"
    archive.write_bytes(history.archive)
    task_file.write_text(json.dumps({"criteria": [{"assertion": a} for a in prefix_criteria]}))
    result = CliRunner().invoke(cli, ["verify", str(task_file), str(archive), "--json"])
    assert result.exit_code == 0, result.output
    verified = json.loads(result.stdout)
    assert (verified["score"], verified["verdict"]) == (completed["score"], completed["verdict"])
    assert [c["passed"] for c in verified["criterion_runs"]] == [c["passed"] for c in completed["checks"]]


def test_the_receiving_facility_is_random_and_a_neighbours_old_name_is_refused(
    server: Server, tmp_path: Path
) -> None:
    """MSH-6.1 alone routes an MLLP message to a task run, so it is random per task run: the name
    the facility used to be derived from (`ASSAY-` + the last 10 characters of the task run id,
    guessable from a neighbour's consecutive id) reaches no one and is refused (AR, nothing
    stored)."""
    facilities = []
    for _ in range(2):
        with started_run(server.url, server.org_key) as started:
            hl7 = started.body["credentials"]["hl7"]
            facility = str(hl7["receiving_facility"])
            random_part = facility.removeprefix("ASSAY-")
            assert facility.startswith("ASSAY-") and len(random_part) >= 10
            assert started.task_run_id.removeprefix("tr_")[-10:].upper() not in facility
            facilities.append(facility)
            old_style = "ASSAY-" + started.task_run_id.removeprefix("tr_")[-10:].upper()
            message = (
                f"MSH|^~\\&|AGENT|CLINIC|LAB|{old_style}|20260301120500||ADT^A08^ADT_A01|GUESS-1|P|2.5.1\r"
                "PID|1||MRN123^^^HOSP^MR||SMITH^JOHN||19800101|M\r"
            )
            with MLLPClient(hl7["host"], hl7["port"]) as client:
                ack = parse_message(client.send_message(message).decode())
            assert ack.read("MSA.1").value == "AR"
            assert old_style in (ack.read("ERR.8").value or "")
            with started.client() as agent:
                completed = ok(agent.post(f"{started.base}/complete"))
            assert completed["status"] == "completed"
            tarball = httpx.get(
                f"{server.url}/task-runs/{started.task_run_id}/state",
                headers={"Authorization": f"Bearer {server.org_key}"},
                timeout=60,
            )
            archive = tmp_path / f"{started.task_run_id}.tar.gz"
            archive.write_bytes(tarball.content)
            assert list(open_snapshot(archive).hl7_outbound()) == []
    assert facilities[0] != facilities[1]


@pytest.mark.postgres
def test_the_cut_holds_with_two_workers_on_postgres(_postgres_database: str, tmp_path: Path) -> None:
    """`assay serve --workers 2` on PostgreSQL: writes reach either worker (and the listener
    process, for MLLP) while `complete` runs on one of them."""
    key = "vk_cut_" + uuid.uuid4().hex
    with serving(tmp_path / "data", database_url=_postgres_database, key=key, workers=2) as served:
        for name in ("x12-270", "hl7-mllp", "portal-rest", "voice"):
            history = run_race(served.url, key, SURFACES[name], tmp_path, writers=32)
            print(f"[postgres, 2 workers] {history.summary()}")
            history.check()
