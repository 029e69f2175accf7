"""`assay lint BENCHMARK_DIR|SLUG`: does each task measure what its author meant? (issue 14)

A package folder is pushed first (idempotent: an unchanged package changes nothing), then every task
of the benchmark is self-tested on the server (`POST /tasks/{id}/self-test`): an idle agent must
earn nothing and a reference solution must pass every criterion. Exit 0 when every task is clean,
1 when any task has a problem (each printed with the criterion and what it read), 2 on bad input.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.markup import escape

from assay.clients.benchmarks import bundled_package
from assay.clients.cli.config import ApiKeyOption, AsJson, BaseUrlOption, connect, print_json
from assay.clients.packages import PackageError, push, read_package
from assay.clients.packages.sync import find_benchmark

__all__ = ["lint_command"]


def _problem_line(problem: dict[str, Any]) -> str:
    line = f"[red]✘[/] {escape(problem['message'])}"
    criterion = problem.get("criterion")
    if criterion and criterion.get("details"):
        line += f"\n      [dim]{escape(criterion['details'])}[/]"
    return line


def lint_command(
    benchmark: Annotated[
        str,
        typer.Argument(
            help="A package folder (holds benchmark.yaml), a bundled package (front-office), or a slug, name or id."
        ),
    ],
    api_key: ApiKeyOption = None,
    base_url: BaseUrlOption = None,
    as_json: AsJson = False,
) -> None:
    """Self-test every task: flag criteria an idle agent passes and reference solutions that fail."""
    console = Console()
    with connect(api_key, base_url) as client:
        try:
            folder = bundled_package(benchmark) or Path(benchmark)
            if Path(folder, "benchmark.yaml").is_file():
                benchmark_id = push(client, read_package(folder)).benchmark_id
            else:
                benchmark_id = find_benchmark(client, benchmark).id
        except PackageError as exc:
            print(f"error: {exc}", file=sys.stderr)
            raise typer.Exit(2) from None
        tasks = list(client.tasks.list(benchmark_id=benchmark_id))[::-1]  # creation order
        results = [client.tasks.self_test(task.id) for task in tasks]
    if as_json:
        print_json({"benchmark_id": benchmark_id, "tasks": results})
    else:
        for result in results:
            mark = "[green]✔[/]" if result["ok"] else "[red]✘[/]"
            idle = result["idle"].get("score")
            reference = result["reference"]
            summary = f"idle score {idle:g}" if idle is not None else "idle run did not complete"
            if reference is not None:
                summary += f", reference {reference.get('verdict')} {reference.get('score')}"
            console.print(f"{mark} [bold]{escape(result['name'])}[/] [dim]{summary}[/]")
            for problem in result["problems"]:
                console.print("    " + _problem_line(problem))
        clean = sum(result["ok"] for result in results)
        console.print(f"{clean} of {len(results)} task(s) clean")
    if not all(result["ok"] for result in results):
        raise typer.Exit(1)
