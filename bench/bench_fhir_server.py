"""FHIR REST server benchmark (issue 5): dataset load into a playground, search latency over HTTP.

Run: `uv run python bench/bench_fhir_server.py`

1. Dataset load, store level: a fresh SQLite database (the service's `Database`, WAL, migrated);
   `EmbeddedFhir.provision` of a playground seeded with all 18 Synthea files
   (tests/fixtures/fhir/synthea) as 18 datasets in order — SPEC §5.1 loading, the layer stored
   once. Best and median of 3 fresh databases.
2. The whole service (`uvicorn --factory assay.service.app:create_app` in its own process): the 18 files as 18 `fhir` datasets of
   one environment; `POST /v1/task-runs/{id}/start` timed cold (loads the layer) and for a second
   task run of the same datasets (a pointer to the shared layer).
3. 1,000 FHIR searches over HTTP with the run token on `/v1/task-runs/{id}/fhir` (httpx, keep-alive,
   one client), after 100 warm-up requests: patient by family, observations of a patient by code,
   encounters of a patient, conditions by code, `_include`, read by id. Each request also resolves
   the run token and appends a sandbox event, as in production. Then 200 writes and 300 searches
   on the playground's own (copy-on-write) index; then `complete`.

Targets on the 2-core reference machine: load < 3 s, search p50 < 10 ms end to end.
"""

from __future__ import annotations

import json
import os
import platform
import random
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx

from assay.sandboxes.fhir import EmbeddedFhir
from assay.store.database import Database

ROOT = Path(__file__).resolve().parent.parent
SYNTHEA = ROOT / "tests" / "fixtures" / "fhir" / "synthea"
LOINC = ["8302-2", "29463-7", "39156-5", "55284-4", "72514-3", "2085-9", "4548-4"]
KEY = "vk_bench_" + "0" * 24


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def store_level_load(bundles: list[Any]) -> None:
    loads, count = [], 0
    for _ in range(3):
        with tempfile.TemporaryDirectory() as tmp:
            database = Database(f"sqlite:///{Path(tmp) / 'assay.db'}")
            database.migrate()
            fhir = EmbeddedFhir(database.engine)
            start = time.perf_counter()
            fhir.provision("pg_bench", bundles)
            with fhir.reading("pg_bench") as index:
                count = len(index.layer.by_key) if index.layer else 0
            loads.append(time.perf_counter() - start)
            database.dispose()
    print(f"dataset load into a fresh playground, store level ({count} resources): "
          f"best {min(loads):.2f} s, median {statistics.median(loads):.2f} s  (target < 3 s)")  # fmt: skip


def serve(data_dir: Path) -> tuple[str, subprocess.Popen[bytes]]:
    """`uvicorn --factory assay.service.app:create_app` in its own process, as in production (the
    client must not share the server's GIL), binding its own port (a socket handed over
    pre-bound keeps Nagle's algorithm on: ~40 ms of delayed-ACK wait per response)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    env = {
        **os.environ,
        "ASSAY_DATA_DIR": str(data_dir),
        "ASSAY_BOOTSTRAP_API_KEY": KEY,
        "ASSAY_SWEEP_INTERVAL": "60",
    }
    command = [sys.executable, "-m", "uvicorn", "--factory", "assay.service.app:create_app",
               "--host", "127.0.0.1", "--port", str(port), "--log-level", "warning"]  # fmt: skip
    process = subprocess.Popen(command, env=env)
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            httpx.get(f"{url}/openapi.json", timeout=1)
            return url, process
        except httpx.TransportError:
            time.sleep(0.1)
    process.kill()
    raise RuntimeError("the server did not start")


def ok(response: httpx.Response) -> Any:
    response.raise_for_status()
    return response.json()


def main() -> None:
    print(f"python {platform.python_version()} on {platform.machine()}")
    files = sorted(SYNTHEA.glob("*/*.json"))
    bundles = [json.loads(path.read_text(encoding="utf-8")) for path in files]
    print(f"{len(files)} Synthea files, {sum(p.stat().st_size for p in files) / 1e6:.1f} MB")
    store_level_load(bundles)

    tmp = tempfile.TemporaryDirectory()
    url, process = serve(Path(tmp.name))
    try:
        api = httpx.Client(base_url=url, headers={"Authorization": f"Bearer {KEY}"}, timeout=120)
        ids = [ok(api.post("/datasets", json={"name": f.stem, "type": "fhir", "data": b}))["id"]
               for f, b in zip(files, bundles, strict=True)]  # fmt: skip
        environment = ok(api.post("/environments", json={"name": "synthea", "dataset_ids": ids}))
        benchmark = ok(api.post("/benchmarks", json={"name": "bench", "environment_id": environment["id"]}))
        for n in range(2):
            ok(api.post("/tasks", json={"benchmark_id": benchmark["id"], "name": f"task {n}"}))
        run = ok(api.post("/v1/benchmark-runs", json={"benchmark_id": benchmark["id"]}))
        agent = httpx.Client(
            base_url=url, headers={"Authorization": f"Bearer {run['bearer_token']}"}, timeout=120
        )
        first, second = run["task_runs"]
        start = time.perf_counter()
        ok(agent.post(first["start_url"]))
        print(f"start through the service, 18 datasets, cold: {time.perf_counter() - start:.2f} s")
        ok(agent.post(first["complete_url"]))
        start = time.perf_counter()
        base = ok(agent.post(second["start_url"]))["endpoints"]["fhir"]
        print(f"start of a second task run on the same datasets: {time.perf_counter() - start:.2f} s")

        patients = [
            e["resource"] for e in ok(agent.get(f"{base}/Patient", params={"_count": "100"}))["entry"]
        ]
        conditions = ok(agent.get(f"{base}/Condition", params={"_count": "300"}))["entry"]
        rng = random.Random(5)
        families = [p["name"][0]["family"][:4] for p in patients]
        pids = [p["id"] for p in patients]
        codes = sorted({c["resource"]["code"]["coding"][0]["code"] for c in conditions})

        def query() -> tuple[str, str, dict[str, str]]:
            kind, pid = rng.randrange(6), rng.choice(pids)
            if kind == 0:
                return "patient by family", "Patient", {"family": rng.choice(families)}
            if kind == 1:
                code = f"http://loinc.org|{rng.choice(LOINC)}"
                return (
                    "observations of a patient by code",
                    "Observation",
                    {"patient": f"Patient/{pid}", "code": code},
                )
            if kind == 2:
                return (
                    "encounters of a patient (_count 20)",
                    "Encounter",
                    {"patient": f"Patient/{pid}", "_count": "20"},
                )
            if kind == 3:
                return "conditions by code", "Condition", {"code": rng.choice(codes)}
            if kind == 4:
                params = {"patient": f"Patient/{pid}", "_include": "Encounter:patient", "_count": "10"}
                return "encounters + _include patient", "Encounter", params
            return "read by id", f"Patient/{pid}", {}

        def timed(n: int) -> dict[str, list[float]]:
            timings: dict[str, list[float]] = {}
            for _ in range(n):
                label, path, params = query()
                began = time.perf_counter()
                agent.get(f"{base}/{path}", params=params).raise_for_status()
                timings.setdefault(label, []).append((time.perf_counter() - began) * 1000)
            return timings

        timed(100)
        timings = timed(1000)
        every = [t for values in timings.values() for t in values]
        print("search over HTTP, run token, events recorded (1,000 requests after 100 warm-up):")
        for label, values in timings.items():
            print(
                f"  {label:38s} n={len(values):4d} p50 {pct(values, 0.5):6.2f} ms  p99 {pct(values, 0.99):6.2f} ms"
            )
        print(f"  {'all':38s} n={len(every):4d} p50 {pct(every, 0.5):6.2f} ms  p99 {pct(every, 0.99):6.2f} ms"
              "  (target p50 < 10 ms)")  # fmt: skip

        writes: list[float] = []
        for n in range(200):
            began = time.perf_counter()
            if n % 2 == 0:
                body = {"resourceType": "Appointment", "status": "booked",
                        "participant": [{"actor": {"reference": f"Patient/{rng.choice(pids)}"}, "status": "accepted"}]}  # fmt: skip
                agent.post(f"{base}/Appointment", json=body).raise_for_status()
            else:
                patient = ok(agent.get(f"{base}/Patient/{pids[0]}"))
                agent.put(
                    f"{base}/Patient/{pids[0]}", json={**patient, "active": n % 4 == 1}
                ).raise_for_status()
            writes.append((time.perf_counter() - began) * 1000)
        print(
            f"writes (create, or read + update): p50 {pct(writes, 0.5):.2f} ms  p99 {pct(writes, 0.99):.2f} ms"
        )
        after = [t for values in timed(300).values() for t in values]
        print(
            f"searches after 200 writes (own index): p50 {pct(after, 0.5):.2f} ms  p99 {pct(after, 0.99):.2f} ms"
        )
        began = time.perf_counter()
        ok(agent.post(second["complete_url"]))
        print(
            f"complete (capture pointer + verify, no criteria): {(time.perf_counter() - began) * 1000:.1f} ms"
        )
    finally:  # never leave the server process behind, even when a step fails
        process.terminate()
        process.wait(30)
        tmp.cleanup()


if __name__ == "__main__":
    main()
