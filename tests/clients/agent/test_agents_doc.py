"""`docs/agents.md` runs as written: its `bash` blocks, in order, in one shell, against a live
server, with a scripted model endpoint for the reference agent and no way out but to 127.0.0.1."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.clients.agent.stub_model import stub_model
from tests.service.conftest import Server

DOC = Path(__file__).parents[3] / "docs" / "agents.md"


def bash_blocks(text: str) -> list[str]:
    return re.findall(r"^```bash\n(.*?)^```", text, flags=re.S | re.M)


def _answer_without_tools(messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> dict[str, Any]:
    return {"content": "Nothing to do."}


@pytest.mark.skipif(not (shutil.which("curl") and shutil.which("jq")), reason="needs curl and jq")
def test_agents_doc_runs_as_written(server: Server, front_office: str, tmp_path: Path) -> None:
    pytest.importorskip("inspect_ai")
    blocks = bash_blocks(DOC.read_text())
    assert len(blocks) >= 9
    with stub_model(_answer_without_tools) as (model_url, requests):
        env = {
            **os.environ,
            "PATH": f"{Path(sys.executable).parent}:{os.environ.get('PATH', '')}",
            "ASSAY_URL": server.url,
            "ASSAY_API_KEY": server.org_key,
            "BENCHMARK": front_office,
            "MODEL_URL": model_url,
            "HTTP_PROXY": "http://127.0.0.1:9",
            "HTTPS_PROXY": "http://127.0.0.1:9",
            "NO_PROXY": "127.0.0.1,localhost",
        }
        done = subprocess.run(
            ["bash", "-c", "\n".join(blocks)],
            env=env,
            capture_output=True,
            text=True,
            timeout=600,
            cwd=tmp_path,
        )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    out = done.stdout.splitlines()
    assert "task_read" in out and "rivera" in out, out
    assert """{"arguments":["'id' is a required property"]}""" in out  # the 422 the doc shows
    assert (
        '{"verdict":"fail","score":0}' in out
        and '["user","assistant",["fhir_search",200],["fhir_read",422]]' in out
    )
    assert out[-2] == "1" and out[-1] == "1", out  # one Inspect log; one summary with its viewer link
    assert requests and all(request["tools"] for request in requests)
