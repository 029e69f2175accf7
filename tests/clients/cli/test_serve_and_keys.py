"""`assay keys create` and `assay serve`: a key minted on the command line opens the API, and the
server shuts down cleanly on SIGINT."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx
from typer.testing import CliRunner

from assay.clients.cli.app import app as cli


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def test_keys_create_then_serve(tmp_path: Path) -> None:
    env = {key: value for key, value in os.environ.items() if not key.startswith("ASSAY_")}
    minted = CliRunner().invoke(
        cli, ["keys", "create", "--data-dir", str(tmp_path), "--org", "acme"], env=env
    )
    assert minted.exit_code == 0, minted.output
    key = minted.stdout.strip().splitlines()[-1]
    assert key.startswith("vk_")
    port = _free_port()
    process = subprocess.Popen(
        [
            str(Path(sys.executable).parent / "assay"),
            "serve",
            "--data-dir",
            str(tmp_path),
            "--port",
            str(port),
            "--sftp-port",
            "2299",
            "--mllp-port",
            "0",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env={**env, "PYTHONUNBUFFERED": "1"},
    )
    try:
        response = None
        for _ in range(200):
            try:
                response = httpx.get(
                    f"http://127.0.0.1:{port}/benchmarks", headers={"Authorization": f"Bearer {key}"}
                )
                break
            except httpx.TransportError:
                time.sleep(0.05)
        assert response is not None and response.status_code == 200
        with httpx.Client(
            base_url=f"http://127.0.0.1:{port}", headers={"Authorization": f"Bearer {key}"}
        ) as api:
            benchmark = api.post("/benchmarks", json={"name": "cli"}).json()
            api.post("/tasks", json={"benchmark_id": benchmark["id"], "name": "t"}).raise_for_status()
            run = api.post("/v1/benchmark-runs", json={"benchmark_id": benchmark["id"]}).json()
            started = api.post(
                run["task_runs"][0]["start_url"], headers={"Authorization": f"Bearer {run['bearer_token']}"}
            ).json()
        assert started["phase"] == "started"
        assert started["credentials"].get("sftp", {}).get("port", 2299) == 2299
        assert started["credentials"]["hl7"]["port"] > 0  # --mllp-port 0: the port actually bound
    finally:
        process.send_signal(signal.SIGINT)
        _, stderr = process.communicate(timeout=30)
    assert process.returncode == 0, stderr
    text = stderr.decode()
    assert f"http://127.0.0.1:{port}" in text and "assay keys create" in text


def test_serve_with_a_malformed_setting_exits_2_naming_it(tmp_path: Path) -> None:
    env = {key: value for key, value in os.environ.items() if not key.startswith("ASSAY_")}
    result = CliRunner().invoke(
        cli, ["serve", "--data-dir", str(tmp_path)], env={**env, "ASSAY_SFTP_PORT": "twenty-two"}
    )
    assert result.exit_code == 2
    assert "ASSAY_SFTP_PORT must be an integer" in result.output


def test_serve_without_listeners_needs_their_ports(tmp_path: Path) -> None:
    """An instance run with `ASSAY_LISTENERS=0` (all but one of a scaled-out deployment) reports the
    configured listener ports in its credentials, so they must be real ports."""
    env = {key: value for key, value in os.environ.items() if not key.startswith("ASSAY_")}
    result = CliRunner().invoke(
        cli,
        ["serve", "--data-dir", str(tmp_path)],
        env={**env, "ASSAY_LISTENERS": "0", "ASSAY_MLLP_PORT": "0", "ASSAY_SFTP_PORT": "2222"},
    )
    assert result.exit_code == 2
    assert "ASSAY_LISTENERS=0 needs ASSAY_MLLP_PORT and ASSAY_SFTP_PORT" in result.output
