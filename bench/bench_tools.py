"""Agent tools benchmark: a tool call against the protocol request it makes, and an MCP tool call.

    uv run python bench/bench_tools.py [--repeat 300]

1. Over HTTP, against `assay serve` in its own process (`_serve.py`), one started task run of the
   bundled "front office" benchmark: p50 of `POST /v1/task-runs/{id}/tools/fhir_read` against
   `GET /v1/task-runs/{id}/fhir/Patient/john-smith`, the request the tool makes (target: ≤ 1.25×),
   and the same for `hl7_inbox` against `GET …/hl7/inbox`; the two kinds of request alternate.
2. In-process (the ASGI app under a test client, no network): p50 of one MCP `tools/call` of
   `fhir_read` at `/v1/task-runs/{id}/mcp` (stateless: one POST per call; target < 10 ms).
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import sys
import tempfile
import time
import uuid
from collections.abc import Callable
from pathlib import Path

import httpx
from fastapi.testclient import TestClient

sys.path.insert(0, str(Path(__file__).parent))

from _serve import assay_serve

from assay.client import Assay
from assay.clients.demo import PACKAGE
from assay.clients.demo.runner import _for_this_build
from assay.clients.packages import push, read_package
from assay.service.app import create_app
from assay.service.settings import Settings

KEY = "vk_bench_" + uuid.uuid4().hex
PHONE = "Record John Smith's new phone number"


def _p50_pair(
    protocol: Callable[[], httpx.Response], tool: Callable[[], httpx.Response], repeat: int
) -> tuple[float, float]:
    """p50 of each, their requests alternating: on a shared machine a change of speed between two
    measurements one after the other moved the ratio more than the code did."""
    for _ in range(min(20, repeat)):  # warm: caches, the fast path, the first event batch
        protocol().raise_for_status()
        tool().raise_for_status()
    samples: tuple[list[float], list[float]] = ([], [])
    for i in range(2 * repeat):
        call, kept = (protocol, samples[0]) if i % 2 == 0 else (tool, samples[1])
        started = time.perf_counter()
        call().raise_for_status()
        kept.append(time.perf_counter() - started)
    return statistics.median(samples[0]) * 1000, statistics.median(samples[1]) * 1000


def _p50(call: Callable[[], httpx.Response], repeat: int) -> float:
    for _ in range(min(20, repeat)):  # warm: caches, the fast path, the first event batch
        call().raise_for_status()
    samples = []
    for _ in range(repeat):
        started = time.perf_counter()
        call().raise_for_status()
        samples.append(time.perf_counter() - started)
    return statistics.median(samples) * 1000


def _started_run(client: Assay, http: httpx.Client) -> tuple[str, str]:
    package, _ = _for_this_build(read_package(PACKAGE))
    version = client.benchmarks.publish(push(client, package).benchmark_id)
    run = client.benchmark_runs.create(benchmark=f"{version.slug}@{version.version}")
    task_run = next(t.id for t in run.task_runs if t.name == PHONE)
    http.post(
        f"/v1/task-runs/{task_run}/start", headers={"Authorization": f"Bearer {run.bearer_token}"}
    ).raise_for_status()
    return run.bearer_token, task_run


def over_http(repeat: int) -> None:
    with (
        tempfile.TemporaryDirectory() as tmp,
        assay_serve(Path(tmp) / "data", KEY) as (url, _pid),
        Assay(api_key=KEY, base_url=url) as client,
        httpx.Client(base_url=url, timeout=30) as http,
    ):
        token, task_run = _started_run(client, http)
        http.headers["Authorization"] = f"Bearer {token}"
        base = f"/v1/task-runs/{task_run}"
        pairs = [
            (
                "fhir_read",
                lambda: http.get(f"{base}/fhir/Patient/john-smith"),
                lambda: http.post(
                    f"{base}/tools/fhir_read", json={"resource_type": "Patient", "id": "john-smith"}
                ),
            ),
            (
                "hl7_inbox",
                lambda: http.get(f"{base}/hl7/inbox"),
                lambda: http.post(f"{base}/tools/hl7_inbox", json={}),
            ),
        ]
        for name, protocol, tool in pairs:
            direct, through_tool = _p50_pair(protocol, tool, repeat)
            print(
                f"{name:10s} protocol p50 {direct:7.2f} ms  tool p50 {through_tool:7.2f} ms  "
                f"ratio {through_tool / direct:5.2f}x  (target <= 1.25x)"
            )


def mcp_in_process(repeat: int) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        settings = Settings(data_dir=Path(tmp), bootstrap_api_key=KEY).with_free_ports()
        with TestClient(create_app(settings)) as http:
            # Not closed here: closing the SDK would close the test client it was handed.
            client = Assay(api_key=KEY, base_url="http://testserver", http_client=http)  # type: ignore[arg-type]
            token, task_run = _started_run(client, http)  # type: ignore[arg-type]
            headers = {
                "Authorization": f"Bearer {token}",
                "Accept": "application/json, text/event-stream",
                "MCP-Protocol-Version": "2025-06-18",
            }
            call = {
                "jsonrpc": "2.0",
                "id": 1,
                "method": "tools/call",
                "params": {
                    "name": "fhir_read",
                    "arguments": {"resource_type": "Patient", "id": "john-smith"},
                },
            }
            p50 = _p50(lambda: http.post(f"/v1/task-runs/{task_run}/mcp", json=call, headers=headers), repeat)
            print(f"MCP tools/call fhir_read in-process p50 {p50:7.2f} ms  (target < 10 ms)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=300)
    args = parser.parse_args()
    print(f"{platform.python_implementation()} {platform.python_version()} · {os.cpu_count()} CPUs")
    over_http(args.repeat)
    mcp_in_process(args.repeat)


if __name__ == "__main__":
    main()
