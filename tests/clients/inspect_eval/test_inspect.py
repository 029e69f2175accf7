"""Inspect AI runs a published Assay benchmark offline: `assay/benchmark` found through the entry
point, `mockllm/model` with scripted `ModelOutput.for_tool_call` outputs, a real server, and every
address but the local one made unreachable (an attempt to fetch anything would fail the run)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

inspect_ai = pytest.importorskip("inspect_ai")

from inspect_ai import eval as inspect_eval  # noqa: E402
from inspect_ai.model import ModelOutput, get_model  # noqa: E402
from inspect_ai.scorer import Score  # noqa: E402

from assay.clients.demo import PACKAGE  # noqa: E402
from assay.clients.demo.agent import PRIOR_AUTH_REQUEST, adt_a08, appointment  # noqa: E402
from assay.clients.inspect_eval.task import pass_k, tool_params  # noqa: E402
from tests.service.conftest import Server  # noqa: E402

MODEL = "mockllm/model"
LETTER = (PACKAGE / "datasets/drop/inbox/referrals/smith-cardiology.txt").read_text()


def _call(name: str, arguments: dict[str, Any]) -> ModelOutput:
    return ModelOutput.for_tool_call(MODEL, name, arguments)


def _say(text: str) -> ModelOutput:
    return ModelOutput.from_content(MODEL, text)


def _facility(server: Server) -> str:
    """The started lab task run's receiving facility, as its `task_read` answered it (trajectory)."""
    with httpx.Client(base_url=server.url, headers={"Authorization": f"Bearer {server.org_key}"}) as org:
        runs = org.get("/task-runs", params={"limit": 100}).json()["data"]
        lab = next(r for r in runs if r["name"].startswith("Tell the lab") and r["phase"] == "started")
        steps = org.get(f"/task-runs/{lab['id']}/trajectory").json()["tool_calls"]
    return str(steps[-1]["result"]["facts"]["hl7"]["receiving_facility"])


def _outputs(server: Server) -> Iterator[ModelOutput]:
    """The model's turns, sample after sample in task order (one sample at a time)."""
    yield _call("fhir_create", {"resource": appointment("john-smith", "rivera")})
    yield _say("Booked.")
    yield _call("ehr_update_phone", {"phone": "555-0142"})  # no such tool: the phone stays wrong
    yield _say("I could not.")
    yield _call("task_read", {})
    facility = _facility(server)  # read once the task_read above has run
    yield _call("hl7_send", {"message": "\n".join(adt_a08(facility))})
    yield _say("Sent.")
    eligibility = {"member_id": "M123456", "first_name": "JOHN", "last_name": "SMITH", "birth_date": "1962-04-17",
                   "payer_id": "842610001", "payer_name": "ACME HEALTH", "service_date": "2026-12-03",
                   "provider_npi": "1234567893"}  # fmt: skip
    yield _call("x12_eligibility", eligibility)
    yield _say("Covered.")
    yield _call("sftp_write", {"path": "outbox/cardiology/smith-cardiology.txt", "content": LETTER})
    yield _say("Filed.")
    yield _call("portal_submit", {"resource": "prior_auth_requests", "record": PRIOR_AUTH_REQUEST})
    yield _say("Requested.")
    yield _say("I will call later.")  # no tool: the call never happens
    yield _say("I will call the payer tomorrow.")  # nor this one


@pytest.fixture
def offline(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    for name in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy", "all_proxy"):
        monkeypatch.setenv(name, "http://127.0.0.1:9")  # nothing listens there: any outside fetch fails
    monkeypatch.setenv("NO_PROXY", "127.0.0.1,localhost")
    monkeypatch.setenv("no_proxy", "127.0.0.1,localhost")
    monkeypatch.setenv("INSPECT_LOG_DIR", str(tmp_path / "logs"))
    return tmp_path / "logs"


def test_inspect_runs_the_benchmark_offline(server: Server, front_office: str, offline: Path) -> None:
    model = get_model(MODEL, custom_outputs=_outputs(server))
    task_args = {"benchmark": front_office, "url": server.url, "api_key": server.org_key}
    [log] = inspect_eval(
        "assay/benchmark", task_args=task_args, model=model, max_samples=1, log_dir=str(offline)
    )
    assert log.status == "success", log.error
    assert log.eval.metadata and "/ui/runs/" in log.eval.metadata["viewer"]
    scores = {sample.metadata["name"]: sample.scores["assay_scorer"] for sample in log.samples or []}
    assert len(scores) == 8
    for name in (
        "Book a follow-up",
        "Tell the lab",
        "Check John Smith's",
        "File the cardiology",
        "Request prior",
    ):
        score = next(s for n, s in scores.items() if n.startswith(name))
        assert (score.value, score.answer, score.explanation) == (1.0, "pass", "every criterion passed"), name
    phone = next(s for n, s in scores.items() if n.startswith("Record John Smith"))
    assert phone.value < 1 and phone.answer in {"fail", "partial"} and "✗" in (phone.explanation or "")
    assert "expected" in (phone.explanation or "")
    assert phone.metadata and phone.metadata["task_run_id"].startswith("tr_")
    assert (
        phone.metadata["criterion_runs"]
        and "axes" in phone.metadata
        and "/ui/task-runs/" in phone.metadata["viewer"]
    )
    for sample in log.samples or []:  # the run token is not written to Inspect's log
        assert not any("rt_" in str(value) for value in (sample.metadata or {}).values())
    assert log.results is not None
    reducers = {score.reducer: score for score in log.results.scores}
    assert set(reducers) == {"mean", "pass_at_1", "assay/pass_k_1"}
    assert abs(reducers["mean"].metrics["mean"].value - 5 / 8) < 1e-9  # five of eight tasks passed
    assert abs(reducers["assay/pass_k_1"].metrics["mean"].value - 5 / 8) < 1e-9


def test_pass_k_is_every_trial_passing() -> None:
    reduce = pass_k(3)
    assert reduce([Score(value=1.0)] * 3).value == 1.0
    assert reduce([Score(value=1.0), Score(value=0.5), Score(value=1.0)]).value == 0.0


def test_tool_params_keep_every_description() -> None:
    schema = {
        "type": "object",
        "properties": {
            "params": {
                "type": "object",
                "description": "d",
                "additionalProperties": {"type": ["string", "number"]},
            },
            "ids": {"type": "array", "description": "e", "items": {"type": "string", "description": "f"}},
        },
        "required": ["params"],
    }
    params = tool_params(schema)
    assert params.required == ["params"] and params.properties["ids"].items.description == "f"  # type: ignore[union-attr]
    assert [p.type for p in params.properties["params"].additionalProperties.anyOf] == ["string", "number"]  # type: ignore[union-attr]
