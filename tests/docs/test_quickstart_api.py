"""`docs/quickstart-api.md` runs as written: its `bash` blocks, in order, in one shell, against a
live server (only `ASSAY_URL` and `ASSAY_API_KEY` point the shell at it)."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.service.conftest import Server

DOC = Path(__file__).parents[2] / "docs" / "quickstart-api.md"


def bash_blocks(text: str) -> list[str]:
    return re.findall(r"^```bash\n(.*?)^```", text, flags=re.S | re.M)


@pytest.mark.skipif(
    not (shutil.which("curl") and shutil.which("jq")), reason="needs curl and jq (.ci/run installs them)"
)
def test_quickstart_runs_as_written(server: Server, tmp_path: Path) -> None:
    blocks = bash_blocks(DOC.read_text())
    assert len(blocks) >= 8
    script = "\n".join(blocks) + '\njq -c "{verdict, score}" quickstart-result.json\n'
    env = {**os.environ, "ASSAY_URL": server.url, "ASSAY_API_KEY": server.org_key}
    done = subprocess.run(
        ["bash", "-c", script], env=env, capture_output=True, text=True, timeout=120, cwd=tmp_path
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    last = json.loads(done.stdout.strip().splitlines()[-1])
    assert last["verdict"] == "partial" and abs(last["score"] - 2 / 3) < 1e-9
    assert '"assertion.fields.0.operator"' in done.stdout  # the 422 the doc shows
