"""`assay criteria list | get | create | update | delete`: a task's criteria from the shell."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Annotated, Any

import typer
import yaml
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from assay.clients.cli.config import ApiKeyOption, AsJson, BaseUrlOption, connect, print_json

__all__ = ["criteria_app"]

criteria_app = typer.Typer(help="Criteria: the typed assertions of a task.", no_args_is_help=True)

AssertionArg = Annotated[
    str | None,
    typer.Option("--assertion", help="The assertion as JSON, or @FILE (JSON or YAML)."),
]


def _assertion(text: str) -> dict[str, Any]:
    try:
        value = yaml.safe_load(Path(text[1:]).read_text()) if text.startswith("@") else json.loads(text)
    except (OSError, ValueError, yaml.YAMLError) as exc:
        print(f"error: cannot read --assertion: {exc}", file=sys.stderr)
        raise typer.Exit(2) from None
    if not isinstance(value, dict):
        print("error: --assertion must be an object with `assert`", file=sys.stderr)
        raise typer.Exit(2)
    return value


def _show(criterion: Any, as_json: bool) -> None:
    if as_json:
        print_json(criterion.model_dump(mode="json"))
    else:
        Console().print_json(json.dumps(criterion.model_dump(mode="json")))


@criteria_app.command("list")
def list_criteria(
    task: Annotated[str, typer.Option("--task", help="Task id.")],
    api_key: ApiKeyOption = None,
    base_url: BaseUrlOption = None,
    as_json: AsJson = False,
) -> None:
    """A task's criteria."""
    with connect(api_key, base_url) as client:
        criteria = list(client.criteria.list(task_id=task))
    if as_json:
        print_json({"data": [c.model_dump(mode="json") for c in criteria]})
        return
    table = Table()
    for column in ("id", "label", "assert", "weight", "axis"):
        table.add_column(column)
    for c in criteria:
        table.add_row(
            c.id, escape(c.label), str(c.assertion.get("assert")), f"{c.weight:g}", escape(c.axis or "")
        )
    Console().print(table)


@criteria_app.command("get")
def get_criterion(
    criterion_id: str, api_key: ApiKeyOption = None, base_url: BaseUrlOption = None, as_json: AsJson = False
) -> None:
    """One criterion."""
    with connect(api_key, base_url) as client:
        _show(client.criteria.get(criterion_id), as_json)


@criteria_app.command("create")
def create_criterion(
    task: Annotated[str, typer.Option("--task", help="Task id.")],
    label: Annotated[str, typer.Option(help="Short human-readable label.")],
    assertion: AssertionArg = None,
    weight: Annotated[float | None, typer.Option(help="Relative weight (default 1).")] = None,
    axis: Annotated[str | None, typer.Option(help="Scoring axis.")] = None,
    required: Annotated[
        bool, typer.Option("--required", help="A gate: the task scores 0 unless this passes.")
    ] = False,
    idle_ok: Annotated[
        bool, typer.Option("--idle-ok", help="An idle agent is meant to pass it (self-tests do not flag it).")
    ] = False,
    api_key: ApiKeyOption = None,
    base_url: BaseUrlOption = None,
    as_json: AsJson = False,
) -> None:
    """Add a criterion to a task; a bad assertion is the API's 422, naming the key."""
    if assertion is None:
        print("error: --assertion is required", file=sys.stderr)
        raise typer.Exit(2)
    body = _assertion(assertion)
    with connect(api_key, base_url) as client:
        _show(
            client.criteria.create(
                task_id=task,
                label=label,
                assertion=body,
                weight=weight,
                axis=axis,
                required=required or None,
                idle_ok=idle_ok or None,
            ),
            as_json,
        )


@criteria_app.command("update")
def update_criterion(
    criterion_id: str,
    label: Annotated[str | None, typer.Option(help="New label.")] = None,
    assertion: AssertionArg = None,
    weight: Annotated[float | None, typer.Option(help="New weight.")] = None,
    axis: Annotated[str | None, typer.Option(help="New axis.")] = None,
    required: Annotated[
        bool | None, typer.Option("--required/--not-required", help="Make it a gate, or not.")
    ] = None,
    idle_ok: Annotated[
        bool | None,
        typer.Option("--idle-ok/--not-idle-ok", help="Whether an idle agent is meant to pass it."),
    ] = None,
    api_key: ApiKeyOption = None,
    base_url: BaseUrlOption = None,
    as_json: AsJson = False,
) -> None:
    """Change a criterion (only the options given)."""
    changes: dict[str, Any] = {
        "label": label,
        "weight": weight,
        "axis": axis,
        "required": required,
        "idle_ok": idle_ok,
    }
    changes = {key: value for key, value in changes.items() if value is not None}
    if assertion is not None:
        changes["assertion"] = _assertion(assertion)
    with connect(api_key, base_url) as client:
        _show(client.criteria.update(criterion_id, **changes), as_json)


@criteria_app.command("delete")
def delete_criterion(
    criterion_id: str, api_key: ApiKeyOption = None, base_url: BaseUrlOption = None, as_json: AsJson = False
) -> None:
    """Delete a criterion."""
    with connect(api_key, base_url) as client:
        client.criteria.delete(criterion_id)
    if as_json:
        print_json({"deleted": True})
    else:
        print(f"deleted {criterion_id}", file=sys.stderr)
