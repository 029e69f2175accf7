"""`assay runs list | show ID`: benchmark runs, and one run drilled down as a tree — benchmark run →
task runs → criterion runs, each failing field with its expected (green) and actual (red) value."""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.console import Console
from rich.markup import escape
from rich.table import Table
from rich.tree import Tree

from assay.clients.cli.config import ApiKeyOption, AsJson, BaseUrlOption, connect, print_json
from assay.clients.cli.evidence import failing_fields, gate_text, miss_text

if TYPE_CHECKING:
    from assay.client import Assay, BenchmarkRun, CriterionRun, TaskRun

__all__ = ["render_run", "runs_app"]

runs_app = typer.Typer(help="Benchmark runs and their results.", no_args_is_help=True)

_VERDICT = {"pass": "green", "partial": "yellow", "fail": "red"}


def _score(value: float | None) -> str:
    return "–" if value is None else f"{round(value, 4):g}"


def _verdict(verdict: str | None, score: float | None) -> str:
    if verdict is None:
        return "[dim]not scored yet[/]"
    return f"[{_VERDICT.get(verdict, 'white')}]{verdict} {_score(score)}[/]"


@runs_app.command("list")
def list_runs(
    benchmark: Annotated[str | None, typer.Option(help="Only runs of this benchmark id.")] = None,
    limit: Annotated[int, typer.Option(min=1, help="At most this many (newest first).")] = 20,
    self_tests: Annotated[
        bool, typer.Option("--self-tests", help="Also list self-test runs (assay lint, publish).")
    ] = False,
    api_key: ApiKeyOption = None,
    base_url: BaseUrlOption = None,
    as_json: AsJson = False,
) -> None:
    """Benchmark runs, newest first; self-test runs only with --self-tests."""
    with connect(api_key, base_url) as client:
        runs = []
        for run in client.benchmark_runs.list(benchmark_id=benchmark, self_tests=self_tests):
            runs.append(run)
            if len(runs) >= limit:
                break
    if as_json:
        print_json({"data": [run.model_dump(mode="json") for run in runs]})
        return
    table = Table()
    for column in ("id", "benchmark", "status", "verdict", "created"):
        table.add_column(column, no_wrap=column != "benchmark")
    for run in runs:
        ref = run.benchmark or {}
        name = f"{ref.get('slug') or ref.get('name') or run.benchmark_id}" + (
            f"@{ref['version']}" if ref.get("version") else ""
        )
        table.add_row(
            run.id, escape(name), run.status, _verdict(run.verdict, run.score), run.created_at or ""
        )
    Console().print(table)


def _criterion_line(run: CriterionRun) -> str:
    mark = "[yellow]! error[/]" if run.status == "error" else ("[green]✔[/]" if run.passed else "[red]✘[/]")
    axis = f" [dim]{escape(run.axis)}[/]" if run.axis else ""
    return f"{mark} {escape(run.label)}{axis} [dim]w{run.weight:g}[/] {_score(run.score)} — {escape(run.details or '')}"


def render_run(
    run: BenchmarkRun, task_runs: list[TaskRun], criterion_runs: dict[str, list[CriterionRun]]
) -> Tree:
    """Verdict first on every line (it is what one scans for), ids and status dimmed after."""
    ref = run.benchmark or {}
    title = f"{ref.get('slug') or ref.get('name') or run.benchmark_id}@{ref.get('version') or 'draft'}"
    tree = Tree(
        f"{_verdict(run.verdict, run.score)}  [bold]{escape(title)}[/]  [dim]{run.id} · {run.status}[/]"
    )
    for task_run in task_runs:
        branch = tree.add(
            f"{_verdict(task_run.verdict, task_run.score)}  [bold]{escape(task_run.name)}[/]  "
            f"[dim]{task_run.id} · {task_run.status}[/]"
        )
        if task_run.failure_reason:
            branch.add(f"[red]{escape(task_run.failure_reason)}[/]")
        gate = gate_text(getattr(task_run, "gated_by", None))
        if gate:
            branch.add(f"[red]{escape(gate)}[/]")
        for criterion in criterion_runs.get(task_run.id, []):
            leaf = branch.add(_criterion_line(criterion))
            if not criterion.passed:
                for miss in failing_fields(criterion.evidence):
                    leaf.add(miss_text(miss))
    return tree


def fetch_run(
    client: Assay, run_id: str
) -> tuple[BenchmarkRun, list[TaskRun], dict[str, list[CriterionRun]]]:
    run = client.benchmark_runs.get(run_id)
    task_runs = list(run.task_runs or [])
    criterion_runs: dict[str, list[CriterionRun]] = {}
    for task_run in task_runs:
        current = [c for c in client.criterion_runs.list(task_run_id=task_run.id) if not c.superseded]
        criterion_runs[task_run.id] = current[::-1]  # the list is newest first; ids are monotonic
    return run, task_runs, criterion_runs


@runs_app.command("show")
def show_run(
    run_id: Annotated[str, typer.Argument(help="A benchmark run id (br_…).")],
    api_key: ApiKeyOption = None,
    base_url: BaseUrlOption = None,
    as_json: AsJson = False,
) -> None:
    """One benchmark run as a tree: its task runs, their criterion runs, what each failure read."""
    with connect(api_key, base_url) as client:
        run, task_runs, criterion_runs = fetch_run(client, run_id)
    if as_json:
        body: dict[str, Any] = run.model_dump(mode="json")
        body["task_runs"] = [
            {
                **t.model_dump(mode="json"),
                "criterion_runs": [c.model_dump(mode="json") for c in criterion_runs[t.id]],
            }
            for t in task_runs
        ]
        print_json(body)
        return
    Console().print(render_run(run, task_runs, criterion_runs))


@runs_app.command("compare")
def compare_runs(
    a: Annotated[str, typer.Argument(help="Benchmark run A (br_…).")],
    b: Annotated[str, typer.Argument(help="Benchmark run B, of the same benchmark.")],
    api_key: ApiKeyOption = None,
    base_url: BaseUrlOption = None,
    as_json: AsJson = False,
) -> None:
    """A minus B per task, the paired difference of means with its 95% interval, and whether it
    exceeds the noise (docs/scoring.md)."""
    with connect(api_key, base_url) as client:
        result = client.benchmark_runs.compare(a, b)
    if as_json:
        print_json(result)
        return
    table = Table(title=f"{a} − {b}")
    table.add_column("task")
    table.add_column("A − B", justify="right")
    for task_id, difference in result["tasks"].items():
        name = result.get("task_names", {}).get(task_id, task_id)
        colour = "green" if difference > 0 else ("red" if difference < 0 else "dim")
        table.add_row(escape(name), f"[{colour}]{difference:+.3f}[/]")
    console = Console()
    console.print(table)
    low, high = result["ci95"]
    verdict = "[bold]beyond the noise[/]" if result["exceeds_noise"] else "[dim]within the noise[/]"
    console.print(
        f"mean difference {result['mean_difference']:+.3f}, 95% interval [{low:.3f}, {high:.3f}]: {verdict}"
    )
    if result["unmatched_tasks"]:
        console.print(f"[dim]tasks only one run has: {', '.join(result['unmatched_tasks'])}[/]")
