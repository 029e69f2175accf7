"""The benchmark package folder format, read and written (docs/benchmark-packages.md)::

    my-benchmark/
      benchmark.yaml            name, description?, timeout?, concurrency?, environment?: {name?, description?,
                                settings?, datasets?: [dataset names]}, vocabulary?: [{terms, source, ...}]
      tasks/<anything>.yaml     name, task_item?, scenario?, tags?, timeout?, datasets?: [names],
                                input_entity?, reference?: {actions: [...]} | {snapshot: PATH},
                                criteria: [{label, assertion, weight?, axis?, input_entity_id?, required?, idle_ok?}]
      references/<name>/        a reference snapshot (layout in docs/snapshots.md), or
      references/<name>.tar.gz datasets/<name>.yaml      {type, data, entities?}   (any dataset type;
      .json works too)          datasets/<name><suffix>   a dataset bare, in the form its surface
                                declares (`Surface.dataset_files`): datasets/<name>.fhir.json a FHIR
                                Bundle as is (type fhir); datasets/<name>/ a folder of files (type
                                files), each file's path relative to it

Tasks are pushed in file-name order; a dataset's name is its file or folder name. `write_package`
writes exactly what `read_package` reads back, so push → pull → push changes nothing. The bare
forms come from the surface registry, imported when a package is read or written, not when
`assay` starts (`assay verify` stays free of the sandboxes).
"""

from __future__ import annotations

import base64
import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from assay.checks.vocabulary import VocabularyInvalid, parse_entries
from assay.core.errors import SnapshotError
from assay.snapshot import snapshot_files

__all__ = ["DatasetSpec", "Package", "PackageError", "TaskSpec", "read_package", "write_package"]

Json = dict[str, Any]
_TASK_KEYS = {
    "name",
    "task_item",
    "scenario",
    "tags",
    "timeout",
    "datasets",
    "input_entity",
    "criteria",
    "reference",
}
_BENCHMARK_KEYS = {"name", "description", "timeout", "concurrency", "environment", "vocabulary"}
_CRITERION_KEYS = {"label", "assertion", "weight", "axis", "input_entity_id", "required", "idle_ok"}


class PackageError(Exception):
    """A package folder that cannot be read: the message names the file and the key."""


@dataclass
class DatasetSpec:
    name: str
    type: str
    data: Json
    entities: list[Json] = field(default_factory=list)


@dataclass
class TaskSpec:
    name: str
    body: Json
    """task_item, scenario, tags, timeout, input_entity: as the API takes them."""
    datasets: list[str]
    criteria: list[Json]
    file: str


@dataclass
class Package:
    name: str
    benchmark: Json
    """description, timeout, concurrency."""
    environment: Json
    """name, description, settings, datasets (names)."""
    tasks: list[TaskSpec]
    datasets: dict[str, DatasetSpec]


def _load(path: Path) -> Any:
    """The file's YAML or JSON; a syntax error is named `FILE:LINE:COLUMN: what` (1-based), the
    form editors jump to."""
    try:
        text = path.read_text(encoding="utf-8")
        return json.loads(text) if path.suffix == ".json" else yaml.safe_load(text)
    except json.JSONDecodeError as exc:
        raise PackageError(f"{path}:{exc.lineno}:{exc.colno}: cannot read: {exc.msg}") from None
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        where = f"{path}:{mark.line + 1}:{mark.column + 1}" if mark is not None else str(path)
        what = " ".join(part for part in (exc.context, exc.problem) if part)
        raise PackageError(f"{where}: cannot read: {what or type(exc).__name__}") from None
    except (OSError, UnicodeDecodeError, ValueError, yaml.YAMLError) as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise PackageError(f"{path}: cannot read: {first}") from None


def _mapping(value: Any, where: str, allowed: set[str]) -> Json:
    if not isinstance(value, dict):
        raise PackageError(f"{where}: expected a mapping")
    unknown = sorted(set(value) - allowed)
    if unknown:
        raise PackageError(f"{where}: unknown key {unknown[0]!r} (allowed: {', '.join(sorted(allowed))})")
    return value


def _names(value: Any, where: str) -> list[str]:
    if value is None:
        return []
    if not isinstance(value, list) or not all(isinstance(item, str) for item in value):
        raise PackageError(f"{where}: expected a list of dataset names")
    return value


def _file_item(relative: str, raw: bytes) -> Json:
    """A file as the API takes it: UTF-8 text as `content`, anything else as `content_base64`."""
    try:
        return {"path": relative, "content": raw.decode("utf-8")}
    except UnicodeDecodeError:
        return {"path": relative, "content_base64": base64.b64encode(raw).decode()}


def _read_files(folder: Path) -> Json:
    files = []
    for path in sorted(p for p in folder.rglob("*") if p.is_file()):
        files.append(_file_item(path.relative_to(folder).as_posix(), path.read_bytes()))
    return {"files": files}


def _read_reference(value: Any, where: str, package: Path) -> Any:
    """`{snapshot: PATH}` (a snapshot folder or tar.gz, relative to the package) read into the
    API's `{snapshot: {files: [...]}}`; `{actions: [...]}` and anything else go to the API as is."""
    if not isinstance(value, dict) or "snapshot" not in value:
        return value
    given = value["snapshot"]
    if not isinstance(given, str) or not given:
        raise PackageError(f"{where}: reference.snapshot must be a path to a snapshot folder or tar.gz")
    path = package / given
    if not path.resolve().is_relative_to(package.resolve()):
        raise PackageError(f"{where}: reference.snapshot {given!r} is outside the package")
    try:
        files = snapshot_files(path)
    except (SnapshotError, OSError) as exc:
        raise PackageError(f"{where}: reference.snapshot {given!r}: {exc}") from None
    if not files:
        raise PackageError(f"{where}: reference.snapshot {given!r} holds no files")
    items = [_file_item(name, raw) for name, raw in sorted(files.items())]
    return {**value, "snapshot": {"files": items}}


_FOLDER = "/"
"""The bare form that is a folder of files (`Surface.dataset_files`)."""


def _bare_forms() -> dict[str, str]:
    """Each bare dataset form (`.fhir.json`, `/`) → its dataset type, as the surfaces declare them."""
    from assay.sandboxes.registry import DATASET_FILES

    return dict(DATASET_FILES)


def _dataset_types() -> str:
    from assay.sandboxes.registry import DATASET_TYPES

    return ", ".join(sorted(DATASET_TYPES))


def _bare_dataset(path: Path, forms: dict[str, str]) -> DatasetSpec | None:
    if path.is_dir():
        kind = forms.get(_FOLDER)
        return None if kind is None else DatasetSpec(path.name, kind, _read_files(path))
    for suffix, kind in forms.items():
        if suffix != _FOLDER and path.name.endswith(suffix) and len(path.name) > len(suffix):
            return DatasetSpec(path.name.removesuffix(suffix), kind, _load(path))
    return None


def _read_datasets(folder: Path) -> dict[str, DatasetSpec]:
    datasets: dict[str, DatasetSpec] = {}
    if not folder.is_dir():
        return datasets
    forms = _bare_forms()
    for path in sorted(folder.iterdir()):
        bare = _bare_dataset(path, forms)
        if bare is not None:
            spec = bare
        elif path.is_file() and path.suffix in (".yaml", ".yml", ".json"):
            body = _mapping(_load(path), str(path), {"type", "data", "entities"})
            if not isinstance(body.get("type"), str) or not isinstance(body.get("data"), dict):
                raise PackageError(f"{path}: needs `type` ({_dataset_types()}) and a `data` mapping")
            spec = DatasetSpec(path.stem, body["type"], body["data"], list(body.get("entities") or []))
        else:
            continue
        if spec.name in datasets:
            raise PackageError(f"{path}: a second dataset named {spec.name!r}")
        datasets[spec.name] = spec
    return datasets


def _read_task(path: Path, package: Path) -> TaskSpec:
    document = _mapping(_load(path), str(path), _TASK_KEYS)
    if not isinstance(document.get("name"), str) or not document["name"]:
        raise PackageError(f"{path}: needs a `name`")
    criteria = document.get("criteria") or []
    if not isinstance(criteria, list):
        raise PackageError(f"{path}: `criteria` must be a list")
    for i, criterion in enumerate(criteria):
        _mapping(criterion, f"{path}: criteria[{i}]", _CRITERION_KEYS)
        if "label" not in criterion or "assertion" not in criterion:
            raise PackageError(f"{path}: criteria[{i}] needs `label` and `assertion`")
    body: Json = {
        key: document[key]
        for key in ("task_item", "scenario", "tags", "timeout", "input_entity", "reference")
        if key in document
    }
    if "reference" in body:
        body["reference"] = _read_reference(body["reference"], str(path), package)
    return TaskSpec(
        document["name"], body, _names(document.get("datasets"), f"{path}: datasets"), criteria, path.name
    )


def read_package(folder: str | Path) -> Package:
    """Read and check a package folder; `PackageError` names the first problem."""
    folder = Path(folder)
    manifest = folder / "benchmark.yaml"
    if not manifest.is_file():
        raise PackageError(f"{folder}: no benchmark.yaml (is this a benchmark package?)")
    benchmark = _mapping(_load(manifest), str(manifest), _BENCHMARK_KEYS)
    if benchmark.get("vocabulary") is not None:
        try:
            parse_entries(benchmark["vocabulary"])
        except VocabularyInvalid as exc:
            raise PackageError(f"{manifest}: {exc}") from None
    if not isinstance(benchmark.get("name"), str) or not benchmark["name"]:
        raise PackageError(f"{manifest}: needs a `name`")
    environment = _mapping(
        benchmark.get("environment") or {},
        f"{manifest}: environment",
        {"name", "description", "settings", "datasets"},
    )
    datasets = _read_datasets(folder / "datasets")
    task_files = sorted(p for p in (folder / "tasks").glob("*") if p.suffix in (".yaml", ".yml", ".json"))
    tasks = [_read_task(path, folder) for path in task_files]
    seen: set[str] = set()
    for task in tasks:
        if task.name in seen:
            raise PackageError(f"{folder / 'tasks' / task.file}: a second task named {task.name!r}")
        seen.add(task.name)
    env_datasets = _names(environment.get("datasets"), f"{manifest}: environment.datasets")
    env: Json = {
        "name": environment.get("name") or f"{benchmark['name']} environment",
        "description": environment.get("description"),
        "settings": environment.get("settings") or {},
        "datasets": env_datasets,
    }
    for name in env_datasets + [n for task in tasks for n in task.datasets]:
        if name not in datasets:
            bare = [f"datasets/{name}{suffix} (type {kind})" for suffix, kind in _bare_forms().items()]
            raise PackageError(
                f"{folder}: dataset {name!r} is used but there is none: add datasets/{name}.yaml "
                f"(or .yml, .json) or {' or '.join(bare) or 'nothing else'}"
            )
    header: Json = {
        key: benchmark[key]
        for key in ("description", "timeout", "concurrency", "vocabulary")
        if key in benchmark
    }
    return Package(benchmark["name"], header, env, tasks, datasets)


def _slug(name: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", name.lower()).strip("-") or "task"


def _dump_yaml(path: Path, value: Any) -> None:
    path.write_text(yaml.safe_dump(value, sort_keys=False, allow_unicode=True, width=100), encoding="utf-8")


def _write_files(root: Path, files: list[Json]) -> None:
    """`{path, content | content_base64}` items as files under `root` (what `_read_files` reads)."""
    for item in files:
        target = root / item["path"]
        if not target.resolve().is_relative_to(root.resolve()):
            raise PackageError(f"{item['path']!r} would be written outside {root}")
        target.parent.mkdir(parents=True, exist_ok=True)
        if "content_base64" in item:
            target.write_bytes(base64.b64decode(item["content_base64"]))
        else:
            target.write_bytes(str(item.get("content", "")).encode("utf-8"))


def _write_dataset(folder: Path, spec: DatasetSpec, forms: dict[str, str]) -> None:
    bare = None if spec.entities else next((f for f, kind in forms.items() if kind == spec.type), None)
    files = spec.data.get("files")
    if bare == _FOLDER and isinstance(files, list) and set(spec.data) == {"files"}:
        _write_files(folder / spec.name, files)
        return
    if bare is not None and bare != _FOLDER:
        (folder / f"{spec.name}{bare}").write_text(json.dumps(spec.data, indent=2, ensure_ascii=False) + "\n")
        return
    body: Json = {"type": spec.type, "data": spec.data}
    if spec.entities:
        body["entities"] = spec.entities
    _dump_yaml(folder / f"{spec.name}.yaml", body)


def write_package(package: Package, folder: str | Path) -> None:
    """Write `package` as a folder (which must be empty or absent)."""
    folder = Path(folder)
    if folder.exists() and any(folder.iterdir()):
        raise PackageError(f"{folder} is not empty; pull into a new folder")
    (folder / "tasks").mkdir(parents=True)
    manifest: Json = {"name": package.name, **package.benchmark}
    environment = {key: value for key, value in package.environment.items() if value not in (None, {}, [])}
    if environment:
        manifest["environment"] = environment
    _dump_yaml(folder / "benchmark.yaml", manifest)
    width = len(str(len(package.tasks)))
    for i, task in enumerate(package.tasks, start=1):
        stem = f"{i:0{width}d}-{_slug(task.name)}"
        document: Json = {"name": task.name, **task.body}
        snapshot = (task.body.get("reference") or {}).get("snapshot")
        if isinstance(snapshot, dict):
            document["reference"] = {**task.body["reference"], "snapshot": f"references/{stem}"}
            _write_files(folder / "references" / stem, snapshot.get("files") or [])
        if task.datasets:
            document["datasets"] = task.datasets
        document["criteria"] = task.criteria
        _dump_yaml(folder / "tasks" / f"{stem}.yaml", document)
    if package.datasets:
        (folder / "datasets").mkdir()
        forms = _bare_forms()
        for spec in package.datasets.values():
            _write_dataset(folder / "datasets", spec, forms)
