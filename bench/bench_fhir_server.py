"""FHIR REST server benchmark: dataset load into a playground, search latency over HTTP.

Run: `uv run python bench/bench_fhir_server.py [--backend embedded|tag|assay-store|all]
[--datasets all|smart-2019]`

1. Dataset load, store level: a fresh SQLite database (the service's `Database`, WAL, migrated);
   `EmbeddedFhir.provision` of a playground seeded with all 18 Synthea files
   (tests/fixtures/fhir/synthea) as 18 datasets in order — dataset loading (docs/sandboxes.md), the layer
   stored once. Best and median of 3 fresh databases.
2. The whole service (`uvicorn --factory assay.service.app:create_app` in its own process): the 18 files as 18 `fhir` datasets of
   one environment; `POST /v1/task-runs/{id}/start` timed cold (loads the layer) and for a second
   task run of the same datasets (a pointer to the shared layer).
3. 1,000 FHIR searches over HTTP with the run token on `/v1/task-runs/{id}/fhir` (httpx, keep-alive,
   one client), after 100 warm-up requests: patient by family, observations of a patient by code,
   encounters of a patient, conditions by code, `_include`, read by id. Each request also resolves
   the run token and appends a sandbox event, as in production. Then 200 writes and 300 searches
   on the playground's own (copy-on-write) index; then `complete`.

Targets on the 2-core reference machine: load < 3 s, search p50 < 10 ms end to end.

`--backend tag`, `assay-store` or `all` measure what an external FHIR server (`ASSAY_FHIR_URL`,
docs/deployment.md) costs: steps 2-3 run first against the embedded store (the baseline), then against the
service configured with `ASSAY_FHIR_URL` pointing at a second Assay FHIR server (`assay
fhir-server`, i.e. `create_fhir_server` under uvicorn, in a third process with its own fresh
SQLite database) with `ASSAY_FHIR_ISOLATION=tag` (one store on that server, a tag and an id
prefix per playground) and/or `assay-store` (a store per playground). Every backend gets the same
request sequence (query values drawn from the baseline's playground, one seeded RNG); step 1 is
skipped. The first `complete` (a seeded, unchanged playground) is timed too: with an external
server it reads the whole playground back (the capture). The 100 warm-up requests' answers are
compared with the baseline's (ids and `total`; only `total` for a partial first page, whose
matches depend on the server's order), so a wrong answer shows up as a mismatch.
`--datasets smart-2019` runs on the 14 smart-2019 files only (the 4 hiv-2021 files hold
conditional references to resources they do not contain; an Assay FHIR server used to resolve them
in the seeding batch and refuse the entries, 412, and now keeps them as sent like the embedded
load). Everything listens on 127.0.0.1; every loop is bounded.
"""

from __future__ import annotations

import argparse
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
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

from assay.sandboxes.fhir import EmbeddedFhir
from assay.store.database import Database

ROOT = Path(__file__).resolve().parent.parent
SYNTHEA = ROOT / "tests" / "fixtures" / "fhir" / "synthea"
LOINC = ["8302-2", "29463-7", "39156-5", "55284-4", "72514-3", "2085-9", "4548-4"]
KEY = "vk_bench_" + "0" * 24
BACKENDS = ("embedded", "tag", "assay-store")


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


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def spawn(
    command: list[str], env: dict[str, str], url: str, log: Path | None = None
) -> subprocess.Popen[bytes]:
    """Start a server process (its output to `log` when given) and wait (at most 60 s) until `url`
    answers."""
    output = None if log is None else log.open("wb")
    try:
        process = subprocess.Popen(command, env=env, stdout=output, stderr=output)
    finally:
        if output is not None:
            output.close()  # the child has its own descriptor
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            httpx.get(url, timeout=1)
            return process
        except httpx.TransportError:
            if process.poll() is not None:
                break
            time.sleep(0.1)
    process.kill()
    process.wait(30)
    raise RuntimeError(f"the server did not start: {' '.join(command)}")


def serve(data_dir: Path, extra_env: dict[str, str] | None = None) -> tuple[str, subprocess.Popen[bytes]]:
    """`uvicorn --factory assay.service.app:create_app` in its own process, as in production (the
    client must not share the server's GIL), binding its own port (a socket handed over
    pre-bound keeps Nagle's algorithm on: ~40 ms of delayed-ACK wait per response)."""
    port = free_port()
    env = {
        **os.environ,
        "ASSAY_DATA_DIR": str(data_dir),
        "ASSAY_BOOTSTRAP_API_KEY": KEY,
        "ASSAY_SWEEP_INTERVAL": "60",
        **(extra_env or {}),
    }
    if not extra_env:  # the embedded baseline: never forward because the caller's shell says so
        env.pop("ASSAY_FHIR_URL", None)
        env.pop("ASSAY_FHIR_ISOLATION", None)
    command = [sys.executable, "-m", "uvicorn", "--factory", "assay.service.app:create_app",
               "--host", "127.0.0.1", "--port", str(port), "--log-level", "warning"]  # fmt: skip
    url = f"http://127.0.0.1:{port}"
    return url, spawn(command, env, f"{url}/openapi.json")


def serve_fhir_server(data_dir: Path) -> tuple[str, subprocess.Popen[bytes]]:
    """`assay fhir-server` (the standalone Assay FHIR server, `create_fhir_server` under uvicorn with
    TCP_NODELAY) in its own process over a fresh SQLite database, no token: the external server.
    Its access log goes to `data_dir/fhir-server.log`."""
    port = free_port()
    env = {key: value for key, value in os.environ.items() if not key.startswith("ASSAY_")}
    command = [sys.executable, "-c", "from assay.clients.cli import main; main()", "fhir-server",
               "--host", "127.0.0.1", "--port", str(port),
               "--database-url", f"sqlite:///{data_dir / 'fhir.db'}"]  # fmt: skip
    url = f"http://127.0.0.1:{port}"
    return url, spawn(command, env, f"{url}/openapi.json", data_dir / "fhir-server.log")


class StartFailed(Exception):
    """`start` did not answer 2xx; the message is the service's answer."""


def ok(response: httpx.Response) -> Any:
    response.raise_for_status()
    return response.json()


@dataclass
class Vocabulary:
    """What the queries draw from, read from the baseline's playground so every backend gets the
    same request sequence."""

    pids: list[str]
    families: list[str]
    codes: list[str]


@dataclass
class Measures:
    start_cold: float = 0.0
    """seconds"""
    start_second: float = 0.0
    complete_seeded: float = 0.0
    """milliseconds, the first task run's `complete` (seeded, unchanged playground)"""
    complete_after_writes: float = 0.0
    searches: dict[str, list[float]] = field(default_factory=dict)
    writes: list[float] = field(default_factory=list)
    after_writes: list[float] = field(default_factory=list)
    answers: list[tuple[str, int | None, tuple[str, ...]]] = field(default_factory=list)
    """the warm-up requests' answers: (request, total, sorted entry ids — only the total of a
    partial first page)"""


def answer_key(body: Any) -> tuple[int | None, tuple[str, ...]]:
    if body.get("resourceType") != "Bundle":
        return None, (f"{body.get('resourceType')}/{body.get('id')}",)
    entries = body.get("entry") or []
    matches = [e for e in entries if (e.get("search") or {}).get("mode", "match") == "match"]
    if body.get("total") is not None and len(matches) < body["total"]:
        # a first page: which matches it holds depends on the server's order (no _sort), so only
        # the total is compared
        return body["total"], ("(first page)",)
    return body.get("total"), tuple(
        sorted(f"{e['resource']['resourceType']}/{e['resource']['id']}" for e in entries)
    )


def service_workload(
    files: list[Path],
    bundles: list[Any],
    extra_env: dict[str, str] | None,
    vocabulary: Vocabulary | None,
    *,
    say: Callable[[str], None],
    compare: bool,
    server_log: Path | None = None,
) -> tuple[Measures, Vocabulary]:
    """Steps 2-3 against one service process (`extra_env` selects the FHIR backend); with the
    external server's access log, how many requests it got during each `start` and `complete`."""
    measures = Measures()
    seen = [0]

    def calls() -> str:
        if server_log is None:
            return ""
        total = server_log.read_text(encoding="utf-8", errors="replace").count(' HTTP/1.1" ')
        new, seen[0] = total - seen[0], total
        return f"  ({new} requests to the FHIR server)"

    tmp = tempfile.TemporaryDirectory()
    url, process = serve(Path(tmp.name), extra_env)
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
        calls()
        start = time.perf_counter()
        started = agent.post(first["start_url"])
        if started.is_error:
            raise StartFailed(f"{started.status_code} {started.text}")
        measures.start_cold = time.perf_counter() - start
        say(f"start through the service, {len(files)} datasets, cold: {measures.start_cold:.2f} s{calls()}")
        began = time.perf_counter()
        ok(agent.post(first["complete_url"]))
        measures.complete_seeded = (time.perf_counter() - began) * 1000
        if compare:
            say(
                f"complete of the first task run (seeded, unchanged): {measures.complete_seeded:.1f} ms{calls()}"
            )
        start = time.perf_counter()
        base = ok(agent.post(second["start_url"]))["endpoints"]["fhir"]
        measures.start_second = time.perf_counter() - start
        say(f"start of a second task run on the same datasets: {measures.start_second:.2f} s{calls()}")

        if vocabulary is None:
            patients = [
                e["resource"] for e in ok(agent.get(f"{base}/Patient", params={"_count": "100"}))["entry"]
            ]
            conditions = ok(agent.get(f"{base}/Condition", params={"_count": "300"}))["entry"]
            vocabulary = Vocabulary(
                pids=[p["id"] for p in patients],
                families=[p["name"][0]["family"][:4] for p in patients],
                codes=sorted({c["resource"]["code"]["coding"][0]["code"] for c in conditions}),
            )
        rng = random.Random(5)
        families, pids, codes = vocabulary.families, vocabulary.pids, vocabulary.codes

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

        def timed(
            n: int, answers: list[tuple[str, int | None, tuple[str, ...]]] | None = None
        ) -> dict[str, list[float]]:
            timings: dict[str, list[float]] = {}
            for _ in range(n):
                label, path, params = query()
                began = time.perf_counter()
                response = agent.get(f"{base}/{path}", params=params)
                response.raise_for_status()
                timings.setdefault(label, []).append((time.perf_counter() - began) * 1000)
                if answers is not None:
                    answers.append((f"{path}?{params}", *answer_key(response.json())))
            return timings

        timed(100, measures.answers)
        timings = measures.searches = timed(1000)
        every = [t for values in timings.values() for t in values]
        say("search over HTTP, run token, events recorded (1,000 requests after 100 warm-up):")
        for label, values in timings.items():
            say(
                f"  {label:38s} n={len(values):4d} p50 {pct(values, 0.5):6.2f} ms  p99 {pct(values, 0.99):6.2f} ms"
            )
        say(f"  {'all':38s} n={len(every):4d} p50 {pct(every, 0.5):6.2f} ms  p99 {pct(every, 0.99):6.2f} ms"
            "  (target p50 < 10 ms)")  # fmt: skip

        writes = measures.writes
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
        say(
            f"writes (create, or read + update): p50 {pct(writes, 0.5):.2f} ms  p99 {pct(writes, 0.99):.2f} ms"
        )
        after = measures.after_writes = [t for values in timed(300).values() for t in values]
        say(
            f"searches after 200 writes (own index): p50 {pct(after, 0.5):.2f} ms  p99 {pct(after, 0.99):.2f} ms"
        )
        calls()  # the searches and writes above are not the capture's
        began = time.perf_counter()
        ok(agent.post(second["complete_url"]))
        measures.complete_after_writes = (time.perf_counter() - began) * 1000
        what = "capture + verify, no criteria" if compare else "capture pointer + verify, no criteria"
        say(f"complete ({what}): {measures.complete_after_writes:.1f} ms{calls()}")
    finally:  # never leave the server process behind, even when a step fails
        process.terminate()
        process.wait(30)
        tmp.cleanup()
    return measures, vocabulary


def external_workload(
    isolation: str, files: list[Path], bundles: list[Any], vocabulary: Vocabulary
) -> Measures | None:
    """The service workload with `ASSAY_FHIR_URL` on a fresh second Assay FHIR server."""
    tmp = tempfile.TemporaryDirectory()
    server, process = serve_fhir_server(Path(tmp.name))
    try:
        if isolation == "tag":  # one shared store is the tag strategy's "any FHIR R4 base"
            httpx.put(f"{server}/stores/shared", timeout=30).raise_for_status()
            fhir_url = f"{server}/stores/shared/fhir"
        else:  # assay-store: the server's root; a store per playground
            fhir_url = server
        print(f"\n== backend {isolation}: ASSAY_FHIR_URL={fhir_url} (assay fhir-server, own process)")
        env = {"ASSAY_FHIR_URL": fhir_url, "ASSAY_FHIR_ISOLATION": isolation}
        try:
            measures, _ = service_workload(
                files,
                bundles,
                env,
                vocabulary,
                say=print,
                compare=True,
                server_log=Path(tmp.name) / "fhir-server.log",
            )
        except StartFailed as failure:
            print(f"start of the first task run failed, backend {isolation} not measured: {failure}")
            return None
        return measures
    finally:
        process.terminate()
        process.wait(30)
        tmp.cleanup()


def compare_table(results: dict[str, Measures]) -> None:
    """p50 / p99 per workload and each backend's ratio to the embedded one (at p50, p99)."""
    baseline = results["embedded"]

    def rows(m: Measures) -> list[tuple[str, list[float]]]:
        every = [t for values in m.searches.values() for t in values]
        searches = [(label, m.searches.get(label, [])) for label in baseline.searches]
        return [
            *searches,
            ("all searches", every),
            ("writes (create, or read + update)", m.writes),
            ("searches after 200 writes", m.after_writes),
        ]

    names = list(results)
    print("\n== p50 / p99 in ms; ×: backend ÷ embedded at p50 / p99")
    print(f"  {'workload':38s}" + "".join(f"{name:>32s}" for name in names))
    base_rows = rows(baseline)
    for index, (label, values) in enumerate(base_rows):
        cells = []
        for name in names:
            mine = rows(results[name])[index][1]
            cell = f"{pct(mine, 0.5):6.2f} / {pct(mine, 0.99):6.2f}"
            if name != "embedded":
                cell += f"  ×{pct(mine, 0.5) / pct(values, 0.5):4.1f} / ×{pct(mine, 0.99) / pct(values, 0.99):4.1f}"
            cells.append(f"{cell:>32s}")
        print(f"  {label:38s}" + "".join(cells))

    def single(label: str, unit: str, read: Callable[[Measures], float]) -> None:
        cells = []
        for name in names:
            value = read(results[name])
            cell = f"{value:.2f} {unit}" if unit == "s" else f"{value:.1f} {unit}"
            if name != "embedded":
                cell += f"  ×{value / read(baseline):5.1f}"
            cells.append(f"{cell:>32s}")
        print(f"  {label:38s}" + "".join(cells))

    single("start (seed), first task run", "s", lambda m: m.start_cold)
    single("start (seed), second task run", "s", lambda m: m.start_second)
    single("complete, seeded playground (capture)", "ms", lambda m: m.complete_seeded)
    single("complete after 200 writes (capture)", "ms", lambda m: m.complete_after_writes)
    for name in names[1:]:
        wrong = [
            (got, want)
            for got, want in zip(results[name].answers, baseline.answers, strict=True)
            if got != want
        ]
        print(f"  {name}: {len(wrong)} of {len(baseline.answers)} warm-up answers differ from embedded")
        for got, want in wrong[:3]:
            print(f"    {want[0]}: total {got[1]} (embedded {want[1]}); "
                  f"only here {sorted(set(got[2]) - set(want[2]))}, "
                  f"only in embedded {sorted(set(want[2]) - set(got[2]))}")  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument(
        "--backend",
        choices=[*BACKENDS, "all"],
        default="embedded",
        help="embedded (default, the issue-5 benchmark); tag, assay-store or all: also through "
        "ASSAY_FHIR_URL on a second Assay FHIR server, with ratios to embedded",
    )
    parser.add_argument(
        "--datasets",
        choices=["all", "smart-2019"],
        default="all",
        help="all 18 Synthea files (default), or the 14 of smart-2019 (no conditional references)",
    )
    options = parser.parse_args()
    backend = options.backend
    print(f"python {platform.python_version()} on {platform.machine()}")
    files = sorted(SYNTHEA.glob("*/*.json" if options.datasets == "all" else f"{options.datasets}/*.json"))
    bundles = [json.loads(path.read_text(encoding="utf-8")) for path in files]
    print(f"{len(files)} Synthea files, {sum(p.stat().st_size for p in files) / 1e6:.1f} MB")
    if backend == "embedded":
        store_level_load(bundles)
        service_workload(files, bundles, None, None, say=print, compare=False)
        return
    print("\n== backend embedded (baseline)")
    baseline, vocabulary = service_workload(files, bundles, None, None, say=print, compare=True)
    results = {"embedded": baseline}
    for isolation in BACKENDS[1:] if backend == "all" else (backend,):
        measures = external_workload(isolation, files, bundles, vocabulary)
        if measures is not None:
            results[isolation] = measures
    compare_table(results)
    for isolation in BACKENDS[1:] if backend == "all" else (backend,):
        if isolation not in results:
            print(f"  {isolation}: not measured, its start failed (above)")


if __name__ == "__main__":
    main()
