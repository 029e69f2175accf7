"""A package checked locally with the API's own request models and assertion parser, before any
request is sent: every problem of every file, each named by file, task, criterion and key, so one
`assay push` or `assay lint` shows them all and a half-made benchmark is never the way to find out.

The service's request models are imported when a package is checked, not when `assay` starts:
`assay verify` stays free of the service stack.
"""

from __future__ import annotations

from typing import Any

from pydantic import ValidationError

from assay.clients.packages.folder import Package, PackageError, TaskSpec
from assay.core.assertions import parse_assertion
from assay.core.errors import AssertionInvalid

__all__ = ["PackageInvalid", "package_problems", "validate_package"]

_PLACEHOLDER_ID = "local"
"""Stands for the ids the server assigns, which the models require but a package cannot know."""


class PackageInvalid(PackageError):
    """Every problem the local check found, one line each."""

    def __init__(self, problems: list[str]):
        self.problems = problems
        count = f"{len(problems)} problem{'s' if len(problems) != 1 else ''}"
        super().__init__(f"the package has {count}; nothing was sent:\n  " + "\n  ".join(problems))


def _key(loc: tuple[Any, ...]) -> str:
    return ".".join(str(part) for part in loc)


def _model_problems(model: Any, body: dict[str, Any], where: str, prefix: str = "") -> list[str]:
    try:
        model.model_validate(body)
    except ValidationError as exc:
        return [f"{where}: {prefix}{_key(e['loc'])}: {e['msg']}" for e in exc.errors(include_url=False)]
    return []


def _task_problems(task: TaskSpec) -> list[str]:
    from assay.service.catalog.schemas import CriterionCreate, TaskCreate

    where = f"tasks/{task.file}: task {task.name!r}"
    body = {"benchmark_id": _PLACEHOLDER_ID, "name": task.name, **task.body}
    problems = _model_problems(TaskCreate, body, where)
    for i, criterion in enumerate(task.criteria):
        at = f"criteria[{i}]."
        problems += _model_problems(CriterionCreate, {"task_id": _PLACEHOLDER_ID, **criterion}, where, at)
        if isinstance(criterion.get("assertion"), dict):
            try:
                parse_assertion(criterion["assertion"])
            except AssertionInvalid as exc:
                for key, messages in exc.errors.items():
                    problems += [f"{where}: {at}assertion.{key}: {message}" for message in messages]
    return problems


def package_problems(package: Package) -> list[str]:
    """Every problem the API would refuse the package for, that can be known without a server."""
    from assay.service.catalog.schemas import BenchmarkCreate, DatasetCreate, EnvironmentCreate

    problems = _model_problems(BenchmarkCreate, {"name": package.name, **package.benchmark}, "benchmark.yaml")
    env = {key: value for key, value in package.environment.items() if key != "datasets"}
    problems += _model_problems(EnvironmentCreate, env, "benchmark.yaml", "environment.")
    for name, spec in package.datasets.items():
        body = {"name": name, "type": spec.type, "data": spec.data, "entities": spec.entities}
        problems += _model_problems(DatasetCreate, body, f"datasets/{name}")
    for task in package.tasks:
        problems += _task_problems(task)
    return problems


def validate_package(package: Package) -> None:
    """Raise `PackageInvalid` listing every problem; return when there is none."""
    problems = package_problems(package)
    if problems:
        raise PackageInvalid(problems)
