"""`assay demo`: the whole loop on the bundled "front office" demo package, in one process.

1. Start the service (API + the surfaces' listeners, every port picked free) on a fresh data dir.
2. Push the bundled package (`front_office/`) through the SDK, publish it, create a benchmark run.
3. For each task: start it, let the scripted agent (`agent.py`) work through the real protocols,
   complete it.
4. Print the drill-down (benchmark run → task runs → criterion runs) and where to look next.

`assay demo --benchmark NAME` runs a bundled benchmark package instead (`front-office`), worked by
its reference agent: each task's scripted `reference.actions`, sent over HTTP with the run token
exactly as the self-test replays them.

Tasks are tagged `surface:<name>`; a task whose surfaces this build does not have is left out (and
said so), as are datasets of types no surface loads, so the demo runs on whatever is built.
"""

from __future__ import annotations

import contextlib
import secrets
import socket
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace
from pathlib import Path

import httpx
import uvicorn
from rich.console import Console
from rich.markup import escape

from assay.client import Assay, StartedTaskRun
from assay.clients.benchmarks import BUNDLED
from assay.clients.cli.runs import fetch_run, render_run
from assay.clients.demo.agent import ACTIONS, AgentContext, RetryUnavailable
from assay.clients.packages import Package, push, read_package
from assay.clients.packages.folder import TaskSpec
from assay.sandboxes.registry import DATASET_TYPES, SURFACES
from assay.service.app import create_app
from assay.service.server import NoDelayH11Protocol
from assay.service.settings import Settings

__all__ = ["PACKAGE", "DemoResult", "run_demo"]

PACKAGE = Path(__file__).parent / "front_office"


@dataclass
class DemoResult:
    benchmark_run_id: str
    verdicts: dict[str, str | None]
    """Task name → verdict."""
    surfaces: list[str]
    skipped: dict[str, list[str]]
    """Task name → the surfaces it needs that this build lacks."""
    data_dir: Path
    api_key: str
    seconds: float


class _QuietServer(uvicorn.Server):
    def install_signal_handlers(self) -> None:  # the demo's thread is not the main thread
        pass


@contextlib.contextmanager
def _service(settings: Settings) -> Iterator[str]:
    """The API (and, through its lifespan, the listeners) on a free port, in a thread."""
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    config = uvicorn.Config(create_app(settings), log_level="warning", lifespan="on", http=NoDelayH11Protocol)
    server = _QuietServer(config)
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    deadline = time.monotonic() + 30
    while not server.started:
        if not thread.is_alive() or time.monotonic() > deadline:
            raise RuntimeError("the Assay service did not start")
        time.sleep(0.02)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(timeout=15)
        sock.close()


def _needs(task_tags: list[str]) -> list[str]:
    return [tag.removeprefix("surface:") for tag in task_tags if tag.startswith("surface:")]


def _for_this_build(package: Package) -> tuple[Package, dict[str, list[str]]]:
    """The package without the tasks whose surfaces are missing, nor datasets nobody can load."""
    skipped = {}
    tasks = []
    for task in package.tasks:
        missing = [s for s in _needs(task.body.get("tags", [])) if s not in SURFACES]
        if missing:
            skipped[task.name] = missing
        else:
            tasks.append(task)
    loadable = {name: spec for name, spec in package.datasets.items() if spec.type in DATASET_TYPES}
    environment = {
        **package.environment,
        "datasets": [n for n in package.environment["datasets"] if n in loadable],
    }
    return replace(package, tasks=tasks, datasets=loadable, environment=environment), skipped


Agent = Callable[[str, str, AgentContext], None]
"""(task name, task run id, context) → works the task."""


def _scripted(name: str, _task_run_id: str, ctx: AgentContext) -> None:
    ACTIONS[name](ctx)


def _reference_agent(tasks: list[TaskSpec]) -> Agent:
    """Replays each task's `reference.actions` against its task run, as the self-test does."""
    by_name = {task.name: (task.body.get("reference") or {}).get("actions") or [] for task in tasks}

    def act(name: str, task_run_id: str, ctx: AgentContext) -> None:
        for action in by_name[name]:
            headers = {"Content-Type": action["content_type"]} if action.get("content_type") else {}
            content = action["body"].encode() if action.get("body") is not None else None
            response = ctx.http.request(
                action["method"],
                f"/v1/task-runs/{task_run_id}/{action['path']}",
                json=action.get("json"),
                content=content,
                headers=headers,
            )
            ctx.ok(response, f"{action['method']} {action['path'].split('?')[0]}")

    return act


def _work(
    console: Console,
    client: Assay,
    base_url: str,
    run_token: str,
    task_run_id: str,
    name: str,
    agent: Agent = _scripted,
) -> str | None:
    console.print(f"[bold]▸ {escape(name)}[/]")
    started: StartedTaskRun = client.task_runs.start(task_run_id, run_token=run_token)
    notes: list[str] = []
    headers = {"Authorization": f"Bearer {run_token}"}
    with httpx.Client(base_url=base_url, headers=headers, timeout=30, transport=RetryUnavailable()) as http:
        context = AgentContext(http, started.endpoints, started.credentials, notes)
        try:
            agent(name, task_run_id, context)
        except Exception as exc:  # the agent failing is part of the story, not the demo crashing
            notes.append(f"[red]the agent gave up: {escape(str(exc))}[/]")
    for note in notes:
        console.print(f"    {note}", highlight=False)
    done = client.task_runs.complete(task_run_id, run_token=run_token)
    colour = {"pass": "green", "partial": "yellow"}.get(done.verdict or "", "red")
    console.print(f"    [{colour}]{done.verdict} {round(done.score or 0, 4):g}[/]")
    return done.verdict


def run_demo(console: Console, data_dir: Path | None = None, benchmark: str | None = None) -> DemoResult:
    """Run the demo package with the scripted agent, or the bundled `benchmark` with its reference agent."""
    began = time.monotonic()
    data_dir = data_dir or Path(tempfile.mkdtemp(prefix="assay-demo-"))
    api_key = "vk_demo_" + secrets.token_hex(12)
    settings = Settings(data_dir=data_dir, bootstrap_api_key=api_key).with_free_ports()
    package, skipped = _for_this_build(read_package(BUNDLED[benchmark] if benchmark else PACKAGE))
    agent = _reference_agent(package.tasks) if benchmark else _scripted
    worker = "its reference agent" if benchmark else "a scripted agent"
    console.print(f"[bold]Assay demo[/]: the {escape(package.name)!r} benchmark, worked by {worker}.")
    with _service(settings) as base_url, Assay(api_key=api_key, base_url=base_url) as client:
        console.print(f"  service on {base_url}  (data in {data_dir})", highlight=False)
        report = push(client, package)
        version = client.benchmarks.publish(report.benchmark_id)
        console.print(
            f"  pushed {len(package.tasks)} tasks and {len(package.datasets)} datasets; published "
            f"{version.slug}@{version.version}",
            highlight=False,
        )
        run = client.benchmark_runs.create(
            benchmark=f"{version.slug}@{version.version}", agent={"name": "assay demo"}
        )
        console.print(f"  benchmark run {run.benchmark_run_id}\n", highlight=False)
        verdicts = {
            task_run.name: _work(
                console, client, base_url, run.bearer_token, task_run.id, task_run.name, agent
            )
            for task_run in run.task_runs
        }
        console.print()
        console.print(render_run(*fetch_run(client, run.benchmark_run_id)))
    surfaces = sorted({s for task in package.tasks for s in _needs(task.body.get("tags", []))})
    return DemoResult(
        run.benchmark_run_id, verdicts, surfaces, skipped, data_dir, api_key, time.monotonic() - began
    )
