"""Clients benchmark: `assay demo` wall time, and what the SDK adds over raw httpx.

    uv run python bench/bench_clients.py [--requests 300] [--demo-runs 1]

1. `assay demo` as a user runs it (a fresh `assay` process, its own temporary data dir), timed
   end to end. Target: under 60 s on the 2-core machine.
2. The SDK's per-request cost: the same `GET /criteria/{id}` N times through `Assay.criteria.get`
   (retry loop, envelope handling, a pydantic model) and through a bare `httpx.Client.get` +
   `.json()` (the peer), against one server in this process; p50 of each and the ratio.
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

import httpx

from assay.client import Assay
from assay.clients.demo.runner import _service
from assay.service.settings import Settings

KEY = "vk_bench_" + uuid.uuid4().hex


def _demo_seconds(runs: int) -> list[float]:
    assay = str(Path(sys.executable).with_name("assay"))
    times = []
    for _ in range(runs):
        with tempfile.TemporaryDirectory() as folder:
            began = time.perf_counter()
            subprocess.run([assay, "demo", "--data-dir", folder], check=True, capture_output=True)
            times.append(time.perf_counter() - began)
    return times


def _p50(samples: list[float]) -> float:
    return statistics.median(samples) * 1000


def _sdk_vs_httpx(requests: int) -> tuple[float, float]:
    with tempfile.TemporaryDirectory() as folder:
        settings = Settings(data_dir=Path(folder), bootstrap_api_key=KEY).with_free_ports()
        with _service(settings) as url, Assay(api_key=KEY, base_url=url) as sdk:
            task = sdk.tasks.create(benchmark_id=sdk.benchmarks.create(name="bench").id, name="t")
            assertion = {"assert": "voice-transcript", "speaker": "agent", "contains": ["member ID"]}
            criterion = sdk.criteria.create(task_id=task.id, label="c", assertion=assertion)
            raw = httpx.Client(base_url=url, headers={"Authorization": f"Bearer {KEY}"})
            sdk_times, raw_times = [], []
            for _ in range(requests):
                began = time.perf_counter()
                sdk.criteria.get(criterion.id)
                sdk_times.append(time.perf_counter() - began)
                began = time.perf_counter()
                raw.get(f"/criteria/{criterion.id}").json()
                raw_times.append(time.perf_counter() - began)
            raw.close()
    return _p50(sdk_times), _p50(raw_times)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--requests", type=int, default=300)
    parser.add_argument("--demo-runs", type=int, default=1)
    options = parser.parse_args()
    print(f"machine: {platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}")
    print(f"load average: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    demo = _demo_seconds(options.demo_runs)
    print(f"assay demo: {', '.join(f'{s:.1f} s' for s in demo)} (target < 60 s)")
    sdk, raw = _sdk_vs_httpx(options.requests)
    print(f"GET /criteria/{{id}} p50: SDK {sdk:.2f} ms, raw httpx {raw:.2f} ms, ratio {sdk / raw:.2f}x")


if __name__ == "__main__":
    main()
