"""`assay lint BENCHMARK_DIR|SLUG`: does each task measure what its author meant?

A package folder is checked locally first, with the API's own models (every problem, by file,
task, criterion and key; `--offline` stops there). Then it is pushed as a throwaway draft,
`assay lint · <name>`, never the author's own draft, and every task is self-tested on the server
(`POST /tasks/{id}/self-test`): an idle agent must earn nothing and a reference solution must pass
every criterion. The throwaway draft is deleted after, with its self-test runs. A slug, name or id self-tests that
benchmark's draft as it is. Exit 0 when every task is clean, 1 when any task has a problem (each
printed with the criterion and what it read), 2 on bad input.
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
from assay.clients.packages import PackageError, read_package
from assay.clients.packages.sync import find_benchmark, lint_draft
from assay.clients.packages.validate import validate_package

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
    offline: Annotated[
        bool, typer.Option("--offline", help="Only check the package folder locally; send nothing.")
    ] = False,
    api_key: ApiKeyOption = None,
    base_url: BaseUrlOption = None,
    as_json: AsJson = False,
) -> None:
    """Check a package locally, then self-test every task on a throwaway draft: flag criteria an
    idle agent passes and reference solutions that fail."""
    console = Console()
    package = None
    folder = bundled_package(benchmark) or Path(benchmark)
    if Path(folder, "benchmark.yaml").is_file():
        try:
            package = read_package(folder)
            validate_package(package)
        except PackageError as exc:
            print(f"error: {exc}", file=sys.stderr)
            raise typer.Exit(2) from None
        if offline:
            criteria = sum(len(task.criteria) for task in package.tasks)
            checked = {"name": package.name, "tasks": len(package.tasks), "criteria": criteria, "valid": True}
            if as_json:
                print_json(checked)
            else:
                console.print(f"{package.name}: {len(package.tasks)} task(s), {criteria} criteria: valid")
            return
    elif offline:
        print(
            f"error: {benchmark} holds no benchmark.yaml; --offline checks a package folder", file=sys.stderr
        )
        raise typer.Exit(2)
    left: list[str] = []
    with connect(api_key, base_url) as client:
        try:
            if package is not None:
                benchmark_id, clean_up = lint_draft(client, package)
            else:
                benchmark_id, clean_up = find_benchmark(client, benchmark).id, list
        except PackageError as exc:
            print(f"error: {exc}", file=sys.stderr)
            raise typer.Exit(2) from None
        try:
            tasks = list(client.tasks.list(benchmark_id=benchmark_id))[::-1]  # creation order
            results = [client.tasks.self_test(task.id) for task in tasks]
        finally:
            left = clean_up()
    for line in left:
        Console(stderr=True).print(f"[yellow]warning:[/] lint draft not cleaned up: {escape(line)}")
    if package is not None:  # the throwaway draft's ids are gone: name the tasks by the package's files
        for task, result in zip(package.tasks, results, strict=True):
            result["file"] = f"tasks/{task.file}"
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
