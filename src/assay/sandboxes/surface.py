"""The `Surface` protocol: everything the run lifecycle and the API need from one sandbox surface.

A surface (`fhir`, `hl7`, `voice`, …) is one package under `sandboxes/` plus one line in
`registry.py`, the way a check is one module plus one line in `checks/__init__.py`. The lifecycle
never names a surface; it loops over the registry:

    dataset create   validate_dataset(data)            -> {"data.<key.path>": [message]} (422)
    start            provision(run)                    -> the sandbox row's `credentials` JSON
                     seed(run, sandbox, datasets)      datasets of its `dataset_type`, in order
                     scenario_steps[step](run, sandbox, step)   in task order
                     endpoints(base), credentials(sandbox, host, deployment)   what `start` shows
    traffic          router(target)                    mounted under /v1/task-runs/{id}/<name>/ and
                                                       /v1/benchmark-runs/{id}/<name>/; every write
                                                       goes through `gate.admit` first
                     listener(deployment)              one asyncio server per deployment (MLLP, SFTP)
    complete         capture_read(sandbox_id, playground_id) -> a one-value SELECT (or None)
                     capture(session, sandbox_id, playground_id, deployment, read) -> a JSON pointer
    score, rescore   read(pointer, session)            -> a view with the `SandboxState` fields it owns
    state tar.gz     snapshot(view, writer)            its part of the snapshot layout
    deleted          purge(gone)                       the rows (and files) it keeps for torn-down
                                                       playgrounds whose runs go
    agents           tools                             the typed tools it offers a model (`sandboxes/tools.py`)

What only some surfaces have is an optional protocol a surface opts into by implementing it (the
registry indexes them): `Lifecycle` (open, close, teardown: what it keeps beyond its rows),
`Preparing` (check_settings, prepare: environment settings, an index built before `start`'s
transaction), `Discarding` (discard: what `start` wrote outside the database, removed when its
transaction does not commit), `Caching` (serve_cached, catch_up: warm reads below FastAPI), and
`viewer.Viewer` (chat_lines, judged_events: its part of the task-run view).

`BaseSurface` implements every `Surface` hook as "nothing to do", so a surface overrides only what
it has.
Anything a hook cannot do for a reason the task author should read (a bad scenario step, a dataset
that cannot be loaded) is `ProvisionFailed(reason)`: `start` answers 409 and the task run is
`failed` with that reason (docs/api.md).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Hashable, Mapping, Sequence
from dataclasses import dataclass
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, Protocol, Unpack, runtime_checkable

from sqlalchemy import Select
from sqlalchemy.orm import Session

from assay.sandboxes.deployment import Deployment, deployment_of, open_deployment
from assay.sandboxes.events import Interaction, record_event
from assay.sandboxes.options import Option
from assay.store.models import Sandbox

if TYPE_CHECKING:
    from fastapi import APIRouter, Request, Response

    from assay.sandboxes.tools import AgentTool
    from assay.snapshot import SnapshotWriter

__all__ = [
    "Access",
    "BaseSurface",
    "Caching",
    "CatchUp",
    "Deployment",
    "Discarding",
    "Lifecycle",
    "LifecycleSurface",
    "Listener",
    "LogSurface",
    "Preparing",
    "ProvisionFailed",
    "Purge",
    "RecordsView",
    "RunContext",
    "SandboxHandle",
    "ScenarioStep",
    "StateView",
    "Surface",
    "SurfaceTarget",
    "deployment_of",
    "open_deployment",
]


class CatchUp(Exception):
    """Raised by `Surface.serve_cached` when what the worker holds is not current (something
    was committed since): `run` (blocking, for a worker thread) brings it current, and the
    request may be tried again. `key` names what it refreshes, so concurrent requests that meet
    the same stale state share one `run` (`service/fast_path.py`)."""

    def __init__(self, key: Hashable, run: Callable[[], None]):
        super().__init__(key)
        self.key = key
        self.run = run


class ProvisionFailed(Exception):
    """A dataset, setting or scenario step a surface cannot honour: `start` fails with the message."""


@dataclass(frozen=True, slots=True)
class RunContext:
    """What `start` hands each surface: the task run's ids, its session, and its environment's
    `settings`, resolved once per start."""

    session: Session
    org_id: str
    task_run_id: str
    playground_id: str
    settings: Mapping[str, Any]
    deployment: Deployment


@dataclass(frozen=True, slots=True)
class SandboxHandle:
    """One started task run's sandbox of one surface, as a request (or a listener) reaches it."""

    deployment: Deployment
    org_id: str
    task_run_id: str
    playground_id: str
    sandbox_id: str
    credentials: Mapping[str, Any]

    def record(self, type: str, **interaction: Unpack[Interaction]) -> str:
        """Queue one sandbox event (docs/api.md) for the event log (`events.record_event`); its id."""
        return record_event(
            self.deployment.engine,
            org_id=self.org_id,
            sandbox_id=self.sandbox_id,
            type=type,
            task_run_id=self.task_run_id,
            **interaction,
        )


SurfaceTarget = Callable[..., SandboxHandle | Awaitable[SandboxHandle]]
"""A FastAPI dependency the service builds per surface: it authenticates the run token, applies the
rate limit, and resolves the task run (or the benchmark run's single started one) to its sandbox,
or answers 401/403/404/409. A surface's router depends on it for every route."""

ScenarioStep = Callable[[RunContext, Sandbox, Mapping[str, Any]], None]
"""One scenario step (docs/sandboxes.md); raises `ProvisionFailed` with the reason when it cannot run."""


@dataclass(frozen=True, slots=True)
class Access:
    """What `start` shows the agent (docs/sandboxes.md): endpoint paths and credentials, by key."""

    endpoints: dict[str, str]
    credentials: dict[str, Any]


@dataclass(frozen=True, slots=True)
class Purge:
    """Torn-down playgrounds whose runs are being deleted, and their sandboxes, for `Surface.purge`
    in the deleting transaction (`session`)."""

    session: Session
    playground_ids: Sequence[str]
    sandbox_ids: Sequence[str]
    deployment: Deployment


class StateView:
    """A surface's part of a captured `SandboxState`: it overrides the methods it owns
    (`Surface.state_fields`); `CapturedState` asks each field's owner."""


class RecordsView(StateView):
    """A surface's state as a list of records (HL7 messages, X12 exchanges, portal rows), each
    written into the snapshot by `write`, with the seeded `baseline` (None: none recorded) that
    `no-unexpected-changes` compares `digests` with. `BaseSurface.snapshot` writes it."""

    def __init__(self, records: Sequence[Any] = (), baseline: Mapping[str, str] | None = None):
        self.records = list(records)
        self._baseline = None if baseline is None else dict(baseline)

    def write(self, writer: SnapshotWriter, record: Any) -> None:
        raise NotImplementedError

    def baseline(self) -> dict[str, str] | None:
        return self._baseline

    def digests(self) -> dict[str, str]:
        raise NotImplementedError


@runtime_checkable
class Listener(Protocol):
    """A server that runs once per deployment (MLLP, SFTP). `start` binds and returns the bound
    port; `stop` closes it and its connections."""

    async def start(self) -> int: ...

    async def stop(self) -> None: ...


@runtime_checkable
class Lifecycle(Protocol):
    """A surface that keeps something beyond its rows: for the deployment's lifetime (`open`,
    `close`: an external server's client, a thread pool) or for a playground's (`teardown`)."""

    def open(self, deployment: Deployment) -> None:
        """Open what the surface keeps for the deployment's lifetime (from `deployment.options`)
        into `deployment.runtime`; the app's lifespan calls it once at start-up."""
        ...

    def close(self, deployment: Deployment) -> None:
        """Close what `open` opened; the app's lifespan calls it at shutdown."""
        ...

    def teardown(self, session: Session, playground_id: str, deployment: Deployment) -> None:
        """Release what the playground holds when its task run ends, in the caller's transaction."""
        ...


@runtime_checkable
class Preparing(Protocol):
    """A surface whose start depends on more than its datasets: an environment setting it must
    honour (`check_settings`), or a shared index it builds before the start's transaction."""

    def check_settings(self, settings: Mapping[str, Any], deployment: Deployment) -> str | None:
        """The reason `start` cannot honour the environment's settings, or None."""
        ...

    def prepare(self, datasets: Sequence[Mapping[str, Any]], deployment: Deployment) -> None:
        """Before `start`'s transaction, holding no lock: build what `seed` will then find ready
        (shared and content-addressed, never the playground's own state); a failure here is
        left for `seed` to report."""
        ...


@runtime_checkable
class Discarding(Protocol):
    """A surface whose `seed` or scenario steps write outside the database (the files tree). That
    storage is not transactional: when the start's transaction does not commit, no row names what
    was written, so `provision` has it removed then (`discard`)."""

    def discard(self, playground_id: str, deployment: Deployment) -> None:
        """Remove what this start wrote for `playground_id` outside the database, once its
        transaction has ended without committing. It logs what it cannot remove rather than
        raising: the start's own error is what its caller must see (`provision` logs and swallows
        anything raised all the same)."""
        ...


@runtime_checkable
class Caching(Protocol):
    """A surface that answers warm reads from what the worker holds, below FastAPI
    (`service/fast_path.py`)."""

    def serve_cached(self, request: Request, handle: SandboxHandle, relative: str) -> Response | None:
        """The answer to a request at `relative` (the path under the surface's prefix) from what
        this worker already holds, with no SQL and no thread hand-off, recorded like the router's
        answer; None when the router must answer it. `CatchUp` when it would answer once what it
        holds is brought current."""
        ...

    def catch_up(self, handle: SandboxHandle) -> None:
        """On a worker thread, right after the fast path re-read the task run's rows (something
        was committed since): bring current what `serve_cached` would otherwise raise `CatchUp`
        for, in the same hand-off, so a worker makes one hand-off, not two."""
        ...


@runtime_checkable
class Surface(Protocol):
    @property
    def name(self) -> str:
        """Sandbox type, URL segment and snapshot folder (`hl7`)."""
        ...

    @property
    def dataset_type(self) -> str | None:
        """The dataset type it loads (docs/sandboxes.md), or None."""
        ...

    @property
    def dataset_files(self) -> str | None:
        """How a benchmark package holds its dataset bare, as `datasets/<name><dataset_files>`:
        a suffix (`.fhir.json`: the JSON file is the data) or `/` (a folder: `{"files": [...]}`)."""
        ...

    @property
    def scenario_steps(self) -> Mapping[str, ScenarioStep]:
        """Scenario steps it runs (docs/sandboxes.md), by step name."""
        ...

    @property
    def state_fields(self) -> frozenset[str]:
        """The `SandboxState` methods its view fills (`hl7_outbound`)."""
        ...

    @property
    def tools(self) -> Sequence[AgentTool]:
        """The agent tools it offers (`sandboxes/<surface>/tools.py`), each one request to its routes."""
        ...

    @property
    def options(self) -> Mapping[str, type | Option]:
        """Its settings section (`sandboxes/options.py`): option key → type (`int`, `float`,
        `str`, `bool`) or `Option` (with a default, a check, a variable of its own), each set by
        `ASSAY_<NAME>_<KEY>` unless it names its variable, and read with
        `deployment.option(name, key, default)`; the key `port` is its listener's port."""
        ...

    @property
    def openapi_schemas(self) -> Mapping[str, Any]:
        """Component schemas its routes' answers refer to (`#/components/schemas/<name>`)."""
        ...

    def validate_dataset(self, data: Any) -> dict[str, list[str]]: ...

    def provision(self, run: RunContext) -> dict[str, Any] | None: ...

    def seed(self, run: RunContext, sandbox: Sandbox, datasets: Sequence[Mapping[str, Any]]) -> None: ...

    def endpoints(self, base: str) -> dict[str, str]:
        """Endpoint key → URL path under a task-run or benchmark-run base (docs/sandboxes.md)."""
        ...

    def credentials(self, sandbox: Sandbox, host: str, deployment: Deployment) -> dict[str, Any]:
        """Credential key → object for `start` (`{"hl7": {host, port, receiving_facility}}`)."""
        ...

    def router(self, target: SurfaceTarget) -> APIRouter | None: ...

    def listener(self, deployment: Deployment) -> Listener | None: ...

    def capture_read(self, sandbox_id: str, playground_id: str) -> Select[Any] | None:
        """The one value `capture` needs from the database, as a SELECT of one column and at
        most one row; None when it reads nothing. `complete` reads every surface's in a single
        statement (one round trip instead of six, each a wait behind a busy machine),
        after the statement that locked the playground's sandbox rows (the write gate,
        `sandboxes/gate.py`: every admitted write has committed), and hands each `capture` its
        value as `read`."""
        ...

    def capture(
        self, session: Session, sandbox_id: str, playground_id: str, deployment: Deployment, read: Any = None
    ) -> Any:
        """Pin the sandbox's final state: a JSON pointer to it, or None. `read` is the value of
        `capture_read` (None when it found no row)."""
        ...

    def read(self, pointer: Any, session: Session | None) -> StateView: ...

    def snapshot(self, view: StateView, writer: SnapshotWriter) -> None: ...

    def purge(self, gone: Purge) -> None:
        """Delete what the surface keeps for these torn-down playgrounds, in the caller's
        transaction (files outside the database once it commits): their runs are being deleted."""
        ...


class BaseSurface:
    """Every `Surface` hook as "nothing to do"; subclass it and override what the surface has."""

    name: str
    dataset_type: str | None = None
    dataset_files: str | None = None
    scenario_steps: Mapping[str, ScenarioStep] = MappingProxyType({})
    state_fields: frozenset[str] = frozenset()
    tools: Sequence[AgentTool] = ()
    options: Mapping[str, type | Option] = MappingProxyType({})
    openapi_schemas: Mapping[str, Any] = MappingProxyType({})

    def validate_dataset(self, data: Any) -> dict[str, list[str]]:
        return {}

    def provision(self, run: RunContext) -> dict[str, Any] | None:
        return None

    def seed(self, run: RunContext, sandbox: Sandbox, datasets: Sequence[Mapping[str, Any]]) -> None:
        return None

    def endpoints(self, base: str) -> dict[str, str]:
        return {self.name: f"{base}/{self.name}"}

    def credentials(self, sandbox: Sandbox, host: str, deployment: Deployment) -> dict[str, Any]:
        return {}

    def router(self, target: SurfaceTarget) -> APIRouter | None:
        return None

    def listener(self, deployment: Deployment) -> Listener | None:
        return None

    def capture_read(self, sandbox_id: str, playground_id: str) -> Select[Any] | None:
        return None

    def capture(
        self, session: Session, sandbox_id: str, playground_id: str, deployment: Deployment, read: Any = None
    ) -> Any:
        return None

    def read(self, pointer: Any, session: Session | None) -> StateView:
        return StateView()

    def snapshot(self, view: StateView, writer: SnapshotWriter) -> None:
        if isinstance(view, RecordsView):
            for record in view.records:
                view.write(writer, record)
            baseline = view.baseline()
            if baseline is not None:
                writer.add_baseline(self.name, baseline)

    def purge(self, gone: Purge) -> None:
        return None


class LifecycleSurface(BaseSurface):
    """`BaseSurface` opted into `Lifecycle`, each hook "nothing to do"."""

    def open(self, deployment: Deployment) -> None:
        return None

    def close(self, deployment: Deployment) -> None:
        return None

    def teardown(self, session: Session, playground_id: str, deployment: Deployment) -> None:
        return None


class LogSurface(BaseSurface):
    """A surface whose state is its sandbox's append-only log (HL7 messages, X12 exchanges, voice
    turns): captured as the log's last sequence number, `{"sandbox_id", "seq"}`, read back up to it
    as a `view` of the records. Everything in the log is the agent's (nothing is logged before it
    acts), so a captured sandbox's baseline is empty."""

    view: type[RecordsView] = RecordsView

    def last_seq(self, sandbox_id: str) -> Select[Any]:
        """The log's last sequence number (NULL while it is empty)."""
        raise NotImplementedError

    def records_until(self, session: Session, sandbox_id: str, seq: int) -> Sequence[Any]:
        """The log's records at or below `seq`, in order."""
        raise NotImplementedError

    def read(self, pointer: Any, session: Session | None) -> StateView:
        if session is None or not isinstance(pointer, dict):
            return self.view()
        return self.view(self.records_until(session, str(pointer["sandbox_id"]), int(pointer["seq"])), {})

    def capture_read(self, sandbox_id: str, playground_id: str) -> Select[Any] | None:
        return self.last_seq(sandbox_id)

    def capture(
        self, session: Session, sandbox_id: str, playground_id: str, deployment: Deployment, read: Any = None
    ) -> Any:
        return {"sandbox_id": sandbox_id, "seq": int(read or 0)}
