"""`assay agent run BENCHMARK --model-url URL --model NAME`: the reference agent (`clients/agent`)."""

from __future__ import annotations

import os
from typing import Annotated

import typer
from rich.console import Console
from rich.markup import escape
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

__all__ = ["agent_app"]

agent_app = typer.Typer(
    help="The reference LLM agent: a tool-calling loop over an OpenAI-compatible endpoint."
)


@agent_app.command("run")
def run(
    benchmark: Annotated[str, typer.Argument(help="The published benchmark, slug@version (or slug).")],
    model_url: Annotated[
        str, typer.Option(help="OpenAI-compatible base URL (its /chat/completions is called).")
    ],
    model: Annotated[str, typer.Option(help="The model name to ask for.")],
    model_key: Annotated[
        str | None, typer.Option(help="The model endpoint's API key (default: OPENAI_API_KEY, if set).")
    ] = None,
    url: Annotated[
        str | None, typer.Option(help="Assay API (default: ASSAY_BASE_URL, else http://127.0.0.1:8400).")
    ] = None,
    api_key: Annotated[str | None, typer.Option(help="Org or Solver key (default: ASSAY_API_KEY).")] = None,
    concurrency: Annotated[int, typer.Option(min=1, max=64, help="Task runs worked at once.")] = 1,
    trials: Annotated[int, typer.Option(min=1, max=50, help="Trials of each task (pass^k over them).")] = 1,
    max_steps: Annotated[int, typer.Option(min=1, help="Model turns per task run.")] = 30,
    max_seconds: Annotated[
        float, typer.Option(min=1, help="Seconds per task run, model calls included.")
    ] = 300,
    temperature: Annotated[float | None, typer.Option(help="Sampling temperature to ask for.")] = None,
) -> None:
    """Work every task of BENCHMARK with the model, then print the score, its interval and pass^k."""
    from assay.clients.agent import AgentLimits, ModelEndpoint, TaskOutcome, run_benchmark

    base_url = url or os.environ.get("ASSAY_BASE_URL") or "http://127.0.0.1:8400"
    key = api_key or os.environ.get("ASSAY_API_KEY")
    if not key:
        raise typer.BadParameter("an org or Solver key is needed: --api-key or ASSAY_API_KEY")
    endpoint = ModelEndpoint(model_url, model, model_key or os.environ.get("OPENAI_API_KEY"), temperature)
    console = Console()
    progress = Progress(
        TextColumn("[bold]{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=console,
    )
    bar: list[object] = []

    def started(total: int) -> None:
        bar.append(progress.add_task("task runs", total=total))

    def finished(outcome: TaskOutcome) -> None:
        colour = {"pass": "green", "partial": "yellow"}.get(outcome.verdict or "", "red")
        how = outcome.agent.stopped if outcome.agent else (outcome.error or "")
        progress.console.print(
            f"  [{colour}]{outcome.verdict or 'error'}[/] {outcome.score if outcome.score is not None else '-'}  "
            f"{escape(outcome.name)} (trial {outcome.trial}; {escape(how)})",
            highlight=False,
        )
        progress.advance(bar[0])  # type: ignore[arg-type]

    with progress:
        try:
            summary = run_benchmark(
                base_url,
                key,
                benchmark,
                endpoint,
                AgentLimits(max_steps=max_steps, max_seconds=max_seconds),
                concurrency=concurrency,
                trials=trials,
                on_start=started,
                on_done=finished,
            )
        except RuntimeError as refused:
            console.print(f"[red]{escape(str(refused))}[/]")
            raise typer.Exit(1) from None
    stats = summary.statistics
    table = Table(title=f"{escape(benchmark)} · {summary.benchmark_run_id}", show_header=False)
    table.add_row("score", f"{summary.score}" if summary.score is not None else "-")
    table.add_row("verdict", summary.verdict or "-")
    if stats:
        low, high = stats.get("ci95", [None, None])
        table.add_row("95% interval", f"[{low}, {high}]")
        table.add_row(f"pass@{trials}", str(stats.get("pass_at_k")))
        table.add_row(f"pass^{trials}", str(stats.get("pass_hat_k")))
    table.add_row("worked at once", str(summary.workers))
    table.add_row("viewer", summary.viewer)
    console.print(table)
    for outcome in summary.outcomes:
        if outcome.verdict != "pass":
            console.print(
                f"  {escape(outcome.name)}: {summary.task_link(base_url, outcome.task_run_id)}",
                highlight=False,
            )
