"""`assay demo` (docs/deployment.md): the whole loop on the bundled example, then where to look next."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console

__all__ = ["demo"]


def demo(
    data_dir: Annotated[
        Path | None,
        typer.Option("--data-dir", help="Keep the demo's data here (default: a new temporary folder)."),
    ] = None,
    benchmark: Annotated[
        str | None,
        typer.Option(
            "--benchmark",
            help="Run a bundled benchmark (front-office) with its reference agent instead of the demo package.",
        ),
    ] = None,
) -> None:
    """Run the bundled "front office" demo with a scripted agent and print the drill-down."""
    from assay.clients.benchmarks import BUNDLED
    from assay.clients.demo import PACKAGE, run_demo

    if benchmark is not None and benchmark not in BUNDLED:
        print(f"error: no bundled benchmark {benchmark!r} (bundled: {', '.join(BUNDLED)})", file=sys.stderr)
        raise typer.Exit(2)
    console = Console(highlight=False)
    result = run_demo(console, data_dir, benchmark)
    console.print()
    console.print(
        f"[bold]Done in {result.seconds:.1f} s.[/] Surfaces exercised: {', '.join(result.surfaces)}."
    )
    for name, missing in result.skipped.items():
        console.print(f"  [dim]skipped {name!r}: this build has no {', '.join(missing)} surface yet[/]")
    console.print("\n[bold]Where to look next[/]")
    serve = f"ASSAY_BOOTSTRAP_API_KEY={result.api_key} uv run assay serve --data-dir {result.data_dir}"
    console.print(f"  • Browse this run: {serve}", soft_wrap=True)
    console.print(
        "    then open http://127.0.0.1:8400/ui (sign in with that key), or http://127.0.0.1:8400/docs for the API."
    )
    console.print(
        f"  • The same tree from the CLI, while that server runs: ASSAY_API_KEY={result.api_key} "
        f"ASSAY_BASE_URL=http://127.0.0.1:8400 uv run assay runs show {result.benchmark_run_id}",
        soft_wrap=True,
    )
    package = BUNDLED[benchmark] if benchmark else PACKAGE
    console.print(f"  • The benchmark as a package you can edit and `assay push`: {package}", soft_wrap=True)
    console.print(
        "  • Write your own: docs/quickstart-api.md (curl), docs/sdk.md (Python, MCP), docs/benchmark-packages.md."
    )
