"""`assay push DIR`, `assay pull SLUG DIR`, `assay publish BENCHMARK`: benchmark packages
(docs/benchmark-packages.md) to and from the server, through the SDK."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn

from assay.clients.benchmarks import bundled_package
from assay.clients.cli.config import ApiKeyOption, AsJson, BaseUrlOption, connect, print_json
from assay.clients.packages import PackageError, pull, push, read_package, write_package
from assay.clients.packages.sync import find_benchmark, steps_of

__all__ = ["publish_command", "pull_command", "push_command"]


def _refuse(exc: PackageError) -> typer.Exit:
    print(f"error: {exc}", file=sys.stderr)
    return typer.Exit(2)


def push_command(
    folder: Annotated[
        Path,
        typer.Argument(
            help="The package folder (holds benchmark.yaml), or a bundled package's name: front-office."
        ),
    ],
    publish: Annotated[bool, typer.Option("--publish", help="Publish a new version after pushing.")] = False,
    force: Annotated[
        bool, typer.Option("--force", help="Publish even if a task fails its self-test.")
    ] = False,
    api_key: ApiKeyOption = None,
    base_url: BaseUrlOption = None,
    as_json: AsJson = False,
) -> None:
    """Create or update a benchmark from a package folder; a second push changes nothing."""
    try:
        package = read_package(bundled_package(folder) or folder)
    except PackageError as exc:
        raise _refuse(exc) from None
    err = Console(stderr=True)
    with connect(api_key, base_url) as client:
        columns = (TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn())
        with Progress(*columns, console=err, transient=True, disable=as_json) as progress:
            bar = progress.add_task(f"pushing {package.name}", total=steps_of(package))

            def step(what: str) -> None:
                progress.update(bar, advance=1, description=what)

            try:
                report = push(client, package, step)
            except PackageError as exc:
                raise _refuse(exc) from None
        version = client.benchmarks.publish(report.benchmark_id, force=force) if publish else None
    if as_json:
        print_json({**report.as_json(), **({"published": version.model_dump()} if version else {})})
        return
    if not report.changed:
        err.print(
            f"Nothing to change: {package.name} ({report.benchmark_id}) is up to date.", highlight=False
        )
    else:
        for verb in ("created", "updated", "deleted"):
            for what in getattr(report, verb):
                err.print(f"  {verb:8} {what}", highlight=False)
        err.print(
            f"{package.name} ({report.benchmark_id}): {len(report.created)} created, {len(report.updated)} updated, "
            f"{len(report.deleted)} deleted, {report.unchanged} unchanged.",
            highlight=False,
        )
    if version:
        err.print(f"published {version.slug}@{version.version}", highlight=False)


def pull_command(
    benchmark: Annotated[str, typer.Argument(help="Slug, name or id of the benchmark.")],
    folder: Annotated[Path, typer.Argument(help="A new (or empty) folder to write the package to.")],
    api_key: ApiKeyOption = None,
    base_url: BaseUrlOption = None,
    as_json: AsJson = False,
) -> None:
    """Write a benchmark's current draft out as a package folder."""
    with connect(api_key, base_url) as client:
        try:
            package = pull(client, benchmark)
            write_package(package, folder)
        except PackageError as exc:
            raise _refuse(exc) from None
    summary = {
        "folder": str(folder),
        "name": package.name,
        "tasks": len(package.tasks),
        "datasets": len(package.datasets),
    }
    if as_json:
        print_json(summary)
    else:
        print(
            f"wrote {package.name}: {len(package.tasks)} tasks, {len(package.datasets)} datasets to {folder}",
            file=sys.stderr,
        )


def publish_command(
    benchmark: Annotated[
        str, typer.Argument(help="Slug, name or id of the benchmark (or its package folder).")
    ],
    slug: Annotated[
        str | None, typer.Option(help="The slug (default: from the name; fixed after the first publish).")
    ] = None,
    force: Annotated[
        bool, typer.Option("--force", help="Publish even if a task fails its self-test (docs/scoring.md).")
    ] = False,
    api_key: ApiKeyOption = None,
    base_url: BaseUrlOption = None,
    as_json: AsJson = False,
) -> None:
    """Freeze a benchmark's draft as the next immutable `slug@version`, once every task passes its
    self-test (an idle agent earns nothing, a reference solution passes) or with `--force`."""
    reference = benchmark
    folder = bundled_package(benchmark) or Path(benchmark)
    if Path(folder, "benchmark.yaml").is_file():
        try:
            reference = read_package(folder).name
        except PackageError as exc:
            raise _refuse(exc) from None
    with connect(api_key, base_url) as client:
        try:
            found = find_benchmark(client, reference)
        except PackageError as exc:
            raise _refuse(exc) from None
        version = client.benchmarks.publish(found.id, slug=slug, force=force)
    if as_json:
        print_json(version.model_dump())
    else:
        print(f"{version.slug}@{version.version}")
