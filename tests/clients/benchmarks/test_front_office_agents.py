"""docs/benchmarks/front-office.md's "Through the agent tools" runs as written: its `bash` blocks, in
order, in one shell, against a live server with the bundled Front Office published as
`front-office@1`, and a scripted model that works the claim-status phone task (36) through the
tools — over MCP by hand, through Inspect AI (the CLI with `mockllm/model`, then `assay/benchmark`
with scripted tool calls) and through `assay agent run` over a local OpenAI-compatible stub. No way
out but to 127.0.0.1."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from assay.client import Assay
from assay.clients.benchmarks import BUNDLED
from assay.clients.packages import push, read_package
from tests.clients.agent.stub_model import stub_model, tool_call
from tests.clients.agent.test_agents_doc import bash_blocks
from tests.service.conftest import Server

DOC = Path(__file__).parents[3] / "docs" / "benchmarks" / "front-office.md"
CLAIM_TASK = "Call Blue Cross about Lupe Little's October claim"
NOTE = json.dumps({"claim": "MAH-2610-0733", "status": "denied", "paid": 0})
CLAIM_CALL: list[tuple[str, dict[str, Any]]] = [
    ("call_dial", {"to": "+18005550182"}),
    ("call_dtmf", {"call_id": "current", "digits": "2"}),
    ("call_dtmf", {"call_id": "current", "digits": "1245319599"}),
    ("call_dtmf", {"call_id": "current", "digits": "1"}),
    ("call_say", {"call_id": "current", "text": "X B C 4 0 0 8 5 1 1 6 7"}),
    ("call_dtmf", {"call_id": "current", "digits": "1"}),
    ("call_dtmf", {"call_id": "current", "digits": "04071982"}),
    ("call_dtmf", {"call_id": "current", "digits": "1"}),
    ("call_say", {"call_id": "current", "text": "This is Pat Morgan from Mount Auburn Hospital."}),
    ("call_say", {"call_id": "current", "text": "What is the status of claim MAH-2610-0733?"}),
    ("call_say", {"call_id": "current", "text": "Thank you, that is all. Goodbye."}),
    ("sftp_write", {"path": "outbox/billing/MAH-2610-0733.json", "content": NOTE}),
]
"""What a competent model does on task 36, one tool call a turn."""


def _scripted(messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> dict[str, Any]:
    """The stub model: task 36's calls in turn; every other task answered without tools."""
    if not str(messages[1]["content"]).startswith(f"Task: {CLAIM_TASK}"):
        return {"content": "Nothing to do."}
    turn = sum(1 for message in messages if message["role"] == "assistant")
    if turn == len(CLAIM_CALL):
        return {"content": "Billing has the claim's status."}
    name, arguments = CLAIM_CALL[turn]
    return {"content": None, "tool_calls": [tool_call(f"call_{turn}", name, arguments)]}


@pytest.fixture(scope="module")
def published(server: Server) -> str:
    """A fresh org with the bundled package published as `front-office@1`. The publish gate's own
    proof is `test_front_office.py`; here it is forced, to keep this test to the front doors."""
    key = server.new_org_key()
    with Assay(api_key=key, base_url=server.url) as client:
        report = push(client, read_package(BUNDLED["front-office"]))
        version = client.benchmarks.publish(report.benchmark_id, force=True)
    assert f"{version.slug}@{version.version}" == "front-office@1"
    return key


@pytest.mark.timeout(600)
@pytest.mark.skipif(not (shutil.which("curl") and shutil.which("jq")), reason="needs curl and jq")
def test_the_docs_front_doors_run_as_written(server: Server, published: str, tmp_path: Path) -> None:
    pytest.importorskip("inspect_ai")
    blocks = bash_blocks(DOC.read_text())
    assert len(blocks) == 4
    with stub_model(_scripted) as (model_url, requests):
        env = {
            **os.environ,
            "PATH": f"{Path(sys.executable).parent}:{os.environ.get('PATH', '')}",
            "ASSAY_URL": server.url,
            "ASSAY_API_KEY": published,
            "BENCHMARK": "front-office@1",
            "MODEL_URL": model_url,
            "COLUMNS": "200",
            "HTTP_PROXY": "http://127.0.0.1:9",
            "HTTPS_PROXY": "http://127.0.0.1:9",
            "NO_PROXY": "127.0.0.1,localhost",
        }
        done = subprocess.run(
            ["bash", "-c", "\n".join(blocks)],
            env=env,
            capture_output=True,
            text=True,
            timeout=540,
            cwd=tmp_path,
        )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    out = done.stdout.splitlines()
    # MCP: what the representative said, the call's end, and the grade
    assert out[:3] == [
        "Claim MAH-2610-0733 is finalized and denied; $0.00 was paid. Is there anything else?",
        "ended",
        '{"verdict":"pass","score":1}',
    ], out
    assert out[3] == "1"  # one Inspect log
    assert out[4] == "1", done.stdout  # assay agent run: task 36 passed through the stub model
    worked = [r for r in requests if str(r["messages"][1]["content"]).startswith(f"Task: {CLAIM_TASK}")]
    assert len(worked) == len(CLAIM_CALL) + 1 and all(request["tools"] for request in requests)
    with server.client(published) as org:
        runs = org.get("/benchmark-runs", params={"limit": 10}).json()["data"]
    assert {run["agent"]["name"] for run in runs} >= {"mcp-by-hand", "inspect"}


def test_inspect_works_the_phone_task_with_scripted_tool_calls(
    server: Server, published: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    pytest.importorskip("inspect_ai")
    from inspect_ai import eval as inspect_eval
    from inspect_ai.model import ModelOutput, get_model

    for name in ("HTTP_PROXY", "HTTPS_PROXY", "http_proxy", "https_proxy"):
        monkeypatch.setenv(name, "http://127.0.0.1:9")
    monkeypatch.setenv("NO_PROXY", "127.0.0.1,localhost")
    with server.client(published) as org:
        tasks = org.get("/tasks", params={"limit": 100}).json()["data"]
    task_id = next(task["id"] for task in tasks if task["name"] == CLAIM_TASK)
    outputs = [ModelOutput.for_tool_call("mockllm/model", name, arguments) for name, arguments in CLAIM_CALL]
    outputs.append(ModelOutput.from_content("mockllm/model", "Billing has the claim's status."))
    [log] = inspect_eval(
        "assay/benchmark",
        task_args={"benchmark": "front-office@1", "url": server.url, "api_key": published},
        model=get_model("mockllm/model", custom_outputs=outputs),
        sample_id=task_id,
        log_dir=str(tmp_path / "logs"),
        display="none",
    )
    assert log.status == "success", log.error
    [sample] = log.samples or []
    score = sample.scores["assay_scorer"]  # type: ignore[index]
    assert (score.value, score.answer, score.explanation) == (1.0, "pass", "every criterion passed")
