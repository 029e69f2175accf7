"""Task files for `assay verify` (docs/deployment.md): YAML or JSON with `criteria`, `input_entity` and
`vocabulary` (the benchmark's own lexicon entries, as a task run's snapshot carries them).

Extra keys are ignored, so `GET /tasks/{id}` output, a task run's `snapshot` (which nests the
task under `task` and the criteria beside it) and a whole task run (`GET /task-runs/{id}`, whose
`snapshot` is read) all work as task files.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from assay.core.errors import TaskFileError
from assay.verify import CriterionSpec

__all__ = ["TaskFile", "load_task_file", "parse_task_document"]


@dataclass(frozen=True, slots=True)
class TaskFile:
    criteria: list[CriterionSpec]
    input_entity: Mapping[str, Any] | None
    vocabulary: Any = None


def load_task_file(path: str | Path) -> TaskFile:
    path = Path(path)
    if path.is_dir():
        inside = (
            sorted(p.name for p in (path / "tasks").glob("*.y*ml"))[:1] if (path / "tasks").is_dir() else []
        )
        hint = f", e.g. {path / 'tasks' / inside[0]}" if inside else ""
        raise TaskFileError(f"task file {path} is a folder: give one task's YAML or JSON file{hint}")
    try:
        text = path.read_text(encoding="utf-8-sig")
    except (OSError, UnicodeDecodeError) as exc:
        raise TaskFileError(f"cannot read task file {path}: {exc}") from None
    try:
        document = json.loads(text) if path.suffix.lower() == ".json" else yaml.safe_load(text)
    except RecursionError:
        raise TaskFileError(f"task file {path} is nested too deeply to read") from None
    except json.JSONDecodeError as exc:
        raise TaskFileError(
            f"task file {path}:{exc.lineno}:{exc.colno} is not valid JSON: {exc.msg}"
        ) from None
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        where = f"{path}:{mark.line + 1}:{mark.column + 1}" if mark is not None else str(path)
        what = " ".join(part for part in (exc.context, exc.problem) if part) or _first_line(exc)
        raise TaskFileError(f"task file {where} is not valid YAML: {what}") from None
    except (ValueError, yaml.YAMLError) as exc:
        raise TaskFileError(f"task file {path} is not valid {_kind(path)}: {_first_line(exc)}") from None
    return parse_task_document(document, str(path))


def parse_task_document(document: Any, name: str = "task file") -> TaskFile:
    if not isinstance(document, dict):
        raise TaskFileError(f"{name} must hold an object with a `criteria` list")
    frozen = document.get("snapshot")
    if isinstance(frozen, dict) and "criteria" not in document:
        document = frozen  # a task run (`GET /task-runs/{id}`): score its frozen criteria
    criteria = document.get("criteria")
    nested = document.get("task")
    task: dict[str, Any] = nested if isinstance(nested, dict) else {}
    if criteria is None:
        criteria = task.get("criteria")
    if not isinstance(criteria, list):
        raise TaskFileError(f"{name} has no `criteria` list")
    entity = document.get("input_entity", task.get("input_entity"))
    specs = [
        CriterionSpec.from_json(item if isinstance(item, dict) else {"assertion": item}, i)
        for i, item in enumerate(criteria)
    ]
    vocabulary = document.get("vocabulary")
    return TaskFile(specs, entity if isinstance(entity, dict) else None, vocabulary)


def _kind(path: Path) -> str:
    return "JSON" if path.suffix.lower() == ".json" else "YAML"


def _first_line(exc: Exception) -> str:
    return str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
