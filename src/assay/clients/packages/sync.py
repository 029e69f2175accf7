"""Mirror a package folder to an Assay server and back, through the SDK.

`push` makes the server's draft equal the folder: datasets and the environment by name, the
benchmark by name, its tasks by name, each task's criteria by position (so ids and creation order
survive an edit). Only what differs is written; tasks the folder no longer has are deleted. A
second push of the same folder writes nothing and says so. A dataset whose `type` changed cannot
be patched (the API keeps a dataset's type), so a new one is created under the same name.

A push is all or nothing. The package is first checked locally with the API's own models
(`validate.py`: every problem, by file, task, criterion and key); then creates and updates run, and
deletions wait until they have all succeeded. When the server refuses a step, what the push made is
deleted and what it updated is put back, newest first, and the error names the step — so the
server holds the draft as it was, and the next push after a fix starts from there.

`pull` reads a benchmark (by slug, name or id) back into a `Package`; `write_package` then writes
exactly what `read_package` reads, so push → pull → push is a no-op.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from assay.clients.packages.folder import DatasetSpec, Package, PackageError, TaskSpec

if TYPE_CHECKING:
    from assay.client import Assay, Criterion, Dataset

__all__ = [
    "LINT_PREFIX",
    "PushFailed",
    "PushReport",
    "dataset_name",
    "find_benchmark",
    "lint_draft",
    "pull",
    "push",
    "steps_of",
]

Json = dict[str, Any]
Step = Callable[[str], None]


@dataclass
class PushReport:
    benchmark_id: str = ""
    created: list[str] = field(default_factory=list)
    updated: list[str] = field(default_factory=list)
    deleted: list[str] = field(default_factory=list)
    unchanged: int = 0

    @property
    def changed(self) -> bool:
        return bool(self.created or self.updated or self.deleted)

    def as_json(self) -> Json:
        return {
            "benchmark_id": self.benchmark_id,
            "changed": self.changed,
            "created": self.created,
            "updated": self.updated,
            "deleted": self.deleted,
            "unchanged": self.unchanged,
        }


def dataset_name(benchmark: str, name: str) -> str:
    """A package's dataset on the server is `<benchmark>: <name>`: datasets are org-wide, and two
    packages each with a `patients` dataset must not overwrite each other's."""
    return f"{benchmark}: {name}"


def steps_of(package: Package) -> int:
    """How many steps `push` reports (for a progress bar): datasets, environment, benchmark, tasks."""
    return len(package.datasets) + 2 + len(package.tasks) + 1


def _by_name(items: Any) -> dict[str, Any]:
    found: dict[str, Any] = {}
    for item in items:  # newest first: the newest of a name wins
        found.setdefault(item.name, item)
    return found


def _differs(current: Json, desired: Json) -> Json:
    """The keys of `desired` whose value differs from `current` (numbers compare as numbers)."""
    return {key: value for key, value in desired.items() if current.get(key) != value}


def _entities(items: Any) -> list[Json]:
    return [{"kind": e["kind"], "key": e.get("key"), "data": e.get("data") or {}} for e in items]


class PushFailed(PackageError):
    """The server refused a step; what the push had changed is rolled back."""


class _Pusher:
    def __init__(self, client: Assay, report: PushReport, step: Step):
        self.client, self.report, self.step = client, report, step
        self.undo: list[Callable[[], None]] = []
        """How to take back each create and update done so far, in the order they were done."""
        self.deletions: list[tuple[str, Callable[[], None]]] = []
        """Deletions, run once every create and update has succeeded (they cannot be undone)."""
        self.doing = "reading the server's catalog"
        """The step under way, as an error names it."""

    def _made(self, resource: Any, made_id: str) -> None:
        self.undo.append(lambda: resource.delete(made_id))

    def _changed(self, resource: Any, item_id: str, before: Json, changes: Json) -> None:
        previous = {key: before.get(key) for key in changes}
        self.undo.append(lambda: resource.update(item_id, **previous))

    def roll_back(self) -> list[str]:
        """Undo, newest first; the steps that could not be undone, as messages."""
        failed = []
        for undo in reversed(self.undo):
            try:
                undo()
            except Exception as exc:  # keep undoing the rest, and say what is left
                failed.append(str(exc))
        self.undo.clear()
        return failed

    def _note(self, verb: str, what: str) -> None:
        getattr(self.report, verb).append(what)

    def dataset(self, spec: DatasetSpec, server_name: str, existing: Dataset | None) -> str:
        what = f"dataset {spec.name}"
        self.doing = f"datasets/{spec.name}"
        wanted_entities = _entities(spec.entities)
        if existing is None or existing.type != spec.type:
            made = self.client.datasets.create(
                name=server_name, type=spec.type, data=spec.data, entities=wanted_entities
            )
            self._made(self.client.datasets, made.id)
            self._note("created", what)
            return made.id
        current = self.client.datasets.get(existing.id)
        changed = False
        if current.data != spec.data:
            self.client.datasets.update(existing.id, data=spec.data)
            self._changed(self.client.datasets, existing.id, {"data": current.data}, {"data": spec.data})
            changed = True
        have = _entities(entity.model_dump() for entity in current.entities or [])
        for entity in wanted_entities:
            if entity not in have:
                self.client.datasets.create_entity(existing.id, **entity)
                changed = True
        if changed:
            self._note("updated", what)
        else:
            self.report.unchanged += 1
        return existing.id

    def upsert(self, kind: str, name: str, existing: Any, desired: Json, resource: Any, **create: Any) -> str:
        what = f"{kind} {name}"
        self.doing = what
        if existing is None:
            made = resource.create(name=name, **create, **{k: v for k, v in desired.items() if v is not None})
            self._made(resource, str(made.id))
            self._note("created", what)
            return str(made.id)
        before = existing.model_dump()
        changes = _differs(before, desired)
        if changes:
            resource.update(existing.id, **changes)
            self._changed(resource, existing.id, before, changes)
            self._note("updated", what)
        else:
            self.report.unchanged += 1
        return str(existing.id)

    def criteria(self, task: TaskSpec, task_id: str, existing: list[Criterion]) -> None:
        for i in range(max(len(task.criteria), len(existing))):
            what = f"criterion {task.name} #{i + 1}"
            self.doing = f"tasks/{task.file}: task {task.name!r}: criteria[{i}]"
            if i >= len(task.criteria):
                self.deletions.append((what, functools.partial(self.client.criteria.delete, existing[i].id)))
                continue
            desired = {
                "weight": 1,
                "axis": None,
                "input_entity_id": None,
                "required": False,
                "idle_ok": False,
                **task.criteria[i],
            }
            if i >= len(existing):
                made = self.client.criteria.create(
                    task_id=task_id, **{k: v for k, v in desired.items() if v is not None}
                )
                self._made(self.client.criteria, made.id)
                self._note("created", what)
                continue
            before = existing[i].model_dump()
            changes = _differs(before, desired)
            if changes:
                self.client.criteria.update(existing[i].id, **changes)
                self._changed(self.client.criteria, existing[i].id, before, changes)
                self._note("updated", what)
            else:
                self.report.unchanged += 1


def push(client: Assay, package: Package, step: Step = lambda _what: None) -> PushReport:
    """Make the server's draft of `package.name` equal the package, or leave it as it was
    (`PackageInvalid` before anything is sent, `PushFailed` after a rollback); report what changed."""
    from assay.clients.packages.validate import validate_package

    validate_package(package)
    report = PushReport()
    pusher = _Pusher(client, report, step)
    try:
        _apply(client, package, pusher, step)
    except Exception as exc:
        from assay.client import AssayError

        if not isinstance(exc, AssayError):
            pusher.roll_back()
            raise
        left = pusher.roll_back()
        undone = (
            "the changes made so far were rolled back"
            if not left
            else (f"rolling back failed too ({'; '.join(left)}): check the benchmark on the server")
        )
        details = "".join(f"\n  {key}: {'; '.join(map(str, msgs))}" for key, msgs in exc.details.items())
        raise PushFailed(f"{pusher.doing}: the server refused it: {exc}{details}\n{undone}") from None
    for what, delete in pusher.deletions:
        delete()
        report.deleted.append(what)
    return report


def _apply(client: Assay, package: Package, pusher: _Pusher, step: Step) -> None:
    report = pusher.report
    datasets = _by_name(client.datasets.list())
    dataset_ids: dict[str, str] = {}
    for name, spec in package.datasets.items():
        step(f"dataset {name}")
        server_name = dataset_name(package.name, name)
        dataset_ids[name] = pusher.dataset(spec, server_name, datasets.get(server_name))

    step("environment")
    env = package.environment
    environment_id = pusher.upsert(
        "environment",
        env["name"],
        _by_name(client.environments.list()).get(env["name"]),
        {
            "description": env.get("description"),
            "dataset_ids": [dataset_ids[n] for n in env["datasets"]],
            "settings": env.get("settings") or {},
        },
        client.environments,
    )

    step("benchmark")
    desired = {
        "description": None,
        "timeout": None,
        "concurrency": None,
        "vocabulary": None,
        **package.benchmark,
    }
    benchmark_id = pusher.upsert(
        "benchmark",
        package.name,
        _by_name(client.benchmarks.list()).get(package.name),
        {**desired, "environment_id": environment_id},
        client.benchmarks,
    )
    report.benchmark_id = benchmark_id

    tasks = _by_name(client.tasks.list(benchmark_id=benchmark_id))
    for task in package.tasks:
        step(f"task {task.name}")
        pusher.doing = f"tasks/{task.file}: task {task.name!r}"
        body = {
            "task_item": None,
            "scenario": None,
            "tags": [],
            "timeout": None,
            "input_entity": None,
            "reference": None,
            **task.body,
            "dataset_ids": [dataset_ids[n] for n in task.datasets],
        }
        existing = tasks.pop(task.name, None)
        task_id = pusher.upsert("task", task.name, existing, body, client.tasks, benchmark_id=benchmark_id)
        current = client.tasks.get(task_id).criteria or [] if existing is not None else []
        pusher.criteria(task, task_id, current)
    step("clean up")
    for name, stale in tasks.items():
        pusher.deletions.append((f"task {name}", functools.partial(client.tasks.delete, stale.id)))


def find_benchmark(client: Assay, ref: str) -> Any:
    matches = [b for b in client.benchmarks.list() if ref in (b.id, b.slug, b.name)]
    if not matches:
        raise PackageError(f"no benchmark with slug, name or id {ref!r}")
    return matches[0]


def _dataset_spec(client: Assay, dataset_id: str, benchmark: str) -> DatasetSpec:
    dataset = client.datasets.get(dataset_id)
    entities = _entities(entity.model_dump() for entity in dataset.entities or [])
    name = dataset.name.removeprefix(dataset_name(benchmark, ""))
    return DatasetSpec(name, dataset.type, dataset.data, [_compact(e) for e in entities])


def _compact(entity: Json) -> Json:
    return {key: value for key, value in entity.items() if value not in (None, {})}


def pull(client: Assay, ref: str) -> Package:
    """The current draft of a benchmark (by slug, name or id) as a package."""
    benchmark = find_benchmark(client, ref)
    names: dict[str, str] = {}
    datasets: dict[str, DatasetSpec] = {}

    def name_of(dataset_id: str) -> str:
        if dataset_id not in names:
            spec = _dataset_spec(client, dataset_id, benchmark.name)
            if spec.name in datasets:
                raise PackageError(f"two datasets are named {spec.name!r}; rename one to pull this benchmark")
            names[dataset_id], datasets[spec.name] = spec.name, spec
        return names[dataset_id]

    environment: Json = {"name": None, "description": None, "settings": {}, "datasets": []}
    if benchmark.environment_id:
        env = client.environments.get(benchmark.environment_id)
        environment = {
            "name": env.name,
            "description": env.description,
            "settings": env.settings,
            "datasets": [name_of(i) for i in env.dataset_ids],
        }
    tasks = []
    for listed in reversed(list(client.tasks.list(benchmark_id=benchmark.id))):  # creation order
        task = client.tasks.get(listed.id)
        body = {
            key: getattr(task, key)
            for key in ("task_item", "scenario", "tags", "timeout", "input_entity", "reference")
            if getattr(task, key) not in (None, [])
        }
        criteria = [_criterion(c) for c in task.criteria or []]
        tasks.append(TaskSpec(task.name, body, [name_of(i) for i in task.dataset_ids], criteria, ""))
    header = {
        key: getattr(benchmark, key)
        for key in ("description", "timeout", "concurrency", "vocabulary")
        if getattr(benchmark, key) is not None
    }
    return Package(benchmark.name, header, environment, tasks, datasets)


def _criterion(criterion: Criterion) -> Json:
    body: Json = {"label": criterion.label, "assertion": criterion.assertion}
    if criterion.weight != 1:
        body["weight"] = criterion.weight
    for key in ("axis", "input_entity_id"):
        if getattr(criterion, key) is not None:
            body[key] = getattr(criterion, key)
    for flag in ("required", "idle_ok"):
        if getattr(criterion, flag):
            body[flag] = True
    return body


LINT_PREFIX = "assay lint · "
"""The name of the draft `assay lint` self-tests a package folder on: `assay lint · <name>`."""


def lint_draft(client: Assay, package: Package) -> tuple[str, Callable[[], list[str]]]:
    """Push `package` as a throwaway draft beside the author's own (which it never touches); return
    its benchmark id and the clean-up to call when the self-tests are done.

    The clean-up deletes the draft's tasks (their criteria go with them), its environment, its
    datasets and the benchmark itself, whose runs are all self-tests and go with it (the server
    keeps a benchmark with any other run). It returns what it could not delete."""
    shadow = Package(
        LINT_PREFIX + package.name, package.benchmark, package.environment, package.tasks, package.datasets
    )
    shadow.environment = {**package.environment, "name": LINT_PREFIX + str(package.environment["name"])}
    benchmark_id = push(client, shadow).benchmark_id

    def clean_up() -> list[str]:
        left: list[str] = []

        def attempt(what: str, call: Callable[[], Any]) -> None:
            try:
                call()
            except Exception as exc:  # clean up what can be, and say what is left
                left.append(f"{what}: {exc}")

        benchmark = client.benchmarks.get(benchmark_id)
        dataset_ids: dict[str, None] = {}  # the environment's and the tasks' own, each once
        for task in list(client.tasks.list(benchmark_id=benchmark_id)):
            dataset_ids.update(dict.fromkeys(task.dataset_ids))
            attempt(f"task {task.name}", functools.partial(client.tasks.delete, task.id))
        if benchmark.environment_id:
            environment = client.environments.get(benchmark.environment_id)
            attempt(
                "benchmark", functools.partial(client.benchmarks.update, benchmark_id, environment_id=None)
            )
            attempt("environment", functools.partial(client.environments.delete, environment.id))
            dataset_ids.update(dict.fromkeys(environment.dataset_ids))
        for dataset_id in dataset_ids:
            attempt(f"dataset {dataset_id}", functools.partial(client.datasets.delete, dataset_id))
        attempt("benchmark", functools.partial(client.benchmarks.delete, benchmark_id))
        return left

    return benchmark_id, clean_up
