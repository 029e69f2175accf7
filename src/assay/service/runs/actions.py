"""The run verbs of docs/api.md: create, start, complete, cancel, rescore.

`start`, `complete`, `rescore` and a task run's `cancel` lock their own task run, so concurrent
calls on one task run queue up and each sees the previous one's commit (twenty parallel `complete`
calls write one set of criterion runs and return the same result), while calls on its siblings go
on in parallel: the benchmark run's slots, counts and score are kept by one conditional UPDATE of
its row at the end (`lifecycle.take_slot`, `lifecycle.count_ended`). Cancelling a whole run locks
all of its task runs, then the run (`lifecycle.lock_run`).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

from sqlalchemy import update
from sqlalchemy.orm import Session

from assay import sandboxes
from assay.sandboxes import Access, Deployment
from assay.service.catalog import repository as catalog
from assay.service.catalog.publish import freeze_task
from assay.service.grading import Grading
from assay.service.runs import states
from assay.service.runs.criterion_runs import (
    input_entity_of,
    record_criterion_runs,
    replaying_judge,
    verify_capture,
)
from assay.service.runs.lifecycle import (
    count_ended,
    end_task_run,
    finalize_if_done,
    lock_run,
    rescore_run,
    running_ids,
    settle_due,
    settle_task_run,
    store_score,
    take_slot,
)
from assay.service.runs.overrides import carry_overrides, score_rows
from assay.service.runs.repository import (
    current_criterion_runs,
    get_benchmark_run,
    lock_task_run,
    task_run_and_run,
)
from assay.service.runs.schemas import BenchmarkRunCreate
from assay.service.sandboxes.datasets import DatasetChanged, datasets_for
from assay.store import Caller, Conflict, Database, DomainError, Invalid, NotFound, new_id, owned, utcnow
from assay.store.database import pipelined
from assay.store.epoch import writes_of
from assay.store.models import (
    Benchmark,
    BenchmarkRun,
    BenchmarkVersion,
    CriterionRun,
    Playground,
    Solver,
    TaskRun,
)
from assay.store.tokens import RUN_TOKEN_PREFIX, generate_token, hash_token

__all__ = [
    "Completion",
    "Created",
    "Started",
    "cancel_benchmark_run",
    "cancel_task_run",
    "complete_task_run",
    "create_benchmark_run",
    "rescore_task_run",
    "start_task_run",
]

DEFAULT_TIMEOUT = 3600
MIN_TOKEN_LIFETIME = timedelta(hours=24)


@dataclass(frozen=True, slots=True)
class Created:
    benchmark_run: BenchmarkRun
    token: str
    task_runs: list[TaskRun]


@dataclass(frozen=True, slots=True)
class Started:
    task_run: TaskRun
    access: Access | None
    failure: str | None = None


@dataclass(frozen=True, slots=True)
class Completion:
    task_run: TaskRun
    criterion_runs: list[CriterionRun]
    scored: bool


# -- create -------------------------------------------------------------------------------------


def _source(session: Session, caller: Caller, body: BenchmarkRunCreate) -> Benchmark | BenchmarkVersion:
    """The draft benchmark or the published version the run is of (a version's benchmark row is not
    read: the version holds all the run needs, and its foreign key cascades, so the row exists)."""
    if bool(body.benchmark_id) == bool(body.benchmark):
        raise Invalid(
            {"benchmark": ["give exactly one of benchmark_id (the draft) or benchmark (slug@version)"]}
        )
    if body.benchmark_id:
        return catalog.get(session, Benchmark, caller, body.benchmark_id)  # type: ignore[no-any-return]
    slug, _, version_text = (body.benchmark or "").partition("@")
    if version_text:
        if not version_text.isdigit():
            raise Invalid({"benchmark": ["version must be an integer, as in slug@3"]})
        statement = owned(BenchmarkVersion, caller).where(
            BenchmarkVersion.slug == slug, BenchmarkVersion.version == int(version_text)
        )
        version = session.scalars(statement).first()
    else:
        version = catalog.latest_version(session, caller, slug)
    if version is None:
        raise NotFound(f"benchmark {body.benchmark} not found (publish it first)")
    return version


def create_benchmark_run(session: Session, caller: Caller, body: BenchmarkRunCreate) -> Created:
    """Freeze each task with its criteria into a task run; mint the run token (shown once)."""
    source = _source(session, caller, body)
    if isinstance(source, BenchmarkVersion):
        version, benchmark_id = source, source.benchmark_id
        frozen_benchmark = version.frozen["benchmark"]
        tasks = list(version.frozen["tasks"])
        ref = {"slug": version.slug, "version": version.version, "name": version.name}
    else:
        version, benchmark, benchmark_id = None, source, source.id
        frozen_benchmark = {
            "timeout": benchmark.timeout,
            "concurrency": benchmark.concurrency,
            "vocabulary": benchmark.vocabulary,
        }
        tasks = [
            freeze_task(session, caller, task) for task in catalog.tasks_of(session, caller, benchmark.id)
        ]
        ref = {"slug": benchmark.slug, "version": None, "name": benchmark.name}
    solver_id = caller.solver_id if caller.kind == "solver" else body.solver_id
    if solver_id and caller.kind == "org":
        catalog.get(session, Solver, caller, solver_id)
    now = utcnow()
    timeouts = [
        frozen["task"].get("timeout") or frozen_benchmark.get("timeout") or DEFAULT_TIMEOUT
        for frozen in tasks
    ]
    # Each trial is its own task run with its own playground; the token lives as long as all of them.
    tasks = [frozen for frozen in tasks for _ in range(body.trials)]
    # The benchmark's own vocabulary goes into every task run's snapshot beside its criteria: a
    # rescore, the state download and `assay verify` then judge with the same lexicon.
    vocabulary = {"vocabulary": frozen_benchmark["vocabulary"]} if frozen_benchmark.get("vocabulary") else {}
    timeouts = [timeout for timeout in timeouts for _ in range(body.trials)]
    token = generate_token(RUN_TOKEN_PREFIX)
    run = BenchmarkRun(
        id=new_id("br_"),
        org_id=caller.org_id,
        benchmark_id=benchmark_id,
        version_id=version.id if version else None,
        benchmark_ref=ref,
        solver_id=solver_id,
        agent=body.agent,
        scored=body.scored,
        phase="created",
        status="active",
        concurrency=frozen_benchmark.get("concurrency") or 1,
        trials=body.trials,
        task_runs_total=len(tasks),
        task_runs_ended=0,
        task_runs_running=0,
        token_hash=hash_token(token),
        token_expires_at=now + max(MIN_TOKEN_LIFETIME, timedelta(seconds=sum(timeouts))),
        created_at=now,
    )
    session.add(run)
    task_runs = [
        TaskRun(
            id=new_id("tr_"),
            org_id=caller.org_id,
            benchmark_run_id=run.id,
            task_id=frozen["task"]["id"],
            name=frozen["task"]["name"],
            position=i,
            trial=i % body.trials,
            phase="created",
            status="active",
            snapshot={"task": frozen["task"], "criteria": frozen["criteria"], **vocabulary},
            entities=frozen.get("entities", {}),
            timeout_seconds=timeout,
            created_at=now,
        )
        for i, (frozen, timeout) in enumerate(zip(tasks, timeouts, strict=True))
    ]
    session.add_all(task_runs)
    session.flush()
    finalize_if_done(run, task_runs, now)  # a benchmark without tasks is final at once: score 0, fail
    return Created(run, token, task_runs)


# -- start --------------------------------------------------------------------------------------


def _lock_for(session: Session, caller: Caller, task_run_id: str) -> tuple[BenchmarkRun, TaskRun]:
    """Lock the task run `task_run_id` as seen by `caller` (foreign → 404), and read its run
    without a lock (its counters are changed only by single conditional UPDATEs): one statement."""
    task_run, benchmark_run = task_run_and_run(session, caller, task_run_id, lock=True)
    return benchmark_run, task_run


def _limit_reached(session: Session, benchmark_run: BenchmarkRun, task_run: TaskRun) -> Conflict:
    """The 409 naming the started ones (not `task_run`: its own start, about to roll back)."""
    running = [ident for ident in running_ids(session, benchmark_run.id) if ident != task_run.id]
    return Conflict(
        f"concurrency limit {benchmark_run.concurrency} reached: {', '.join(running)} started",
        {"started_task_run_ids": running},
    )


def prepare_start(database: Database, caller: Caller, task_run_id: str, deployment: Deployment) -> None:
    """Before `start`'s transaction, in a read-only unit of work: let the surfaces build what
    seeding will find ready (the FHIR dataset layer), holding no lock, so the transaction is short
    and other requests never wait behind a big load. Anything amiss — no such task run,
    not startable, a dataset type nobody loads, a dataset changed meanwhile — is left for
    `start_task_run` to answer.

    The unit of work that finds the datasets ends before the surfaces prepare them: each content is
    read in a short one of its own (`datasets_for(reading=...)`), so no read snapshot is open
    while the layer is stored (on SQLite it kept the WAL from being checkpointed)."""
    with database.reading() as session:
        try:
            task_run, benchmark_run = task_run_and_run(session, caller, task_run_id)
        except DomainError:
            return
        if (task_run.phase, task_run.status) != states.CREATED:
            return
        environment = sandboxes.run_environment(session, benchmark_run)
        datasets = datasets_for(session, task_run, environment, reading=database.reading)
    if sandboxes.unsupported_dataset(datasets):
        return
    try:
        sandboxes.prepare_datasets(datasets, deployment)
    except DatasetChanged:
        return
    if _one_prepared_set(environment):
        sandboxes.remember_prepared(benchmark_run.id)


def is_prepared(benchmark_run_id: str | None) -> bool:
    """Whether `prepare_start` has nothing left to do for any task run of this run in this worker:
    it is published, and every one of its tasks seeds the same prepared datasets, which a start of
    it here has prepared. The route then skips it (its read and its thread). Only a shortcut: a
    `start` that finds something not prepared still builds it, in its transaction."""
    return sandboxes.is_prepared(benchmark_run_id)


def _one_prepared_set(environment: sandboxes.RunEnvironment) -> bool:
    """A published run whose tasks all name the same datasets of the types prepared before start."""
    if environment.version_id is None or environment.frozen_datasets is None:
        return False
    types, frozen = sandboxes.prepared_types(), environment.frozen_datasets

    def prepared(task_ids: tuple[str, ...]) -> tuple[str, ...]:
        named = dict.fromkeys([*environment.dataset_ids, *task_ids])
        return tuple(i for i in named if isinstance(frozen.get(i), dict) and frozen[i].get("type") in types)

    return len({prepared(ids) for ids in environment.task_dataset_ids}) <= 1


def start_task_run(
    session: Session, caller: Caller, task_run_id: str, *, host: str, deployment: Deployment
) -> Started:
    """Provision the playground and start the clock; idempotent while started (docs/api.md).

    The run's environment is read once and handed to the datasets, the surfaces' settings checks
    and their provisioning.
    """
    benchmark_run, task_run = _lock_for(session, caller, task_run_id)
    # Its writes concern this task run (and its run's started set) only: the other agents'
    # cached rows and FHIR indexes stay current (`store/epoch.py`).
    with writes_of(task_run.id, benchmark_run.id):
        started = _start(session, benchmark_run, task_run, host=host, deployment=deployment)
        session.flush()
    return started


def _start(
    session: Session, benchmark_run: BenchmarkRun, task_run: TaskRun, *, host: str, deployment: Deployment
) -> Started:
    now = utcnow()
    settle_task_run(session, benchmark_run, task_run, now)
    if states.is_running((task_run.phase, task_run.status)):
        return Started(task_run, _access(session, task_run, host, deployment))
    if task_run.status == "failed":  # the same 409 as the start that failed, reason included
        reason = task_run.failure_reason or "provisioning failed"
        raise Conflict(f"task run {task_run.id} failed: {reason}", {"reason": reason})
    states.next_state(states.TASK_RUN, (task_run.phase, task_run.status), "start", f"task run {task_run.id}")
    if benchmark_run.task_runs_running >= benchmark_run.concurrency:
        # Full: a sibling past its deadline still counts until it is settled, so settle the due
        # ones (rows someone else holds are theirs to settle) and look again.
        settle_due(session, benchmark_run, now, skip_locked=True)
        if benchmark_run.task_runs_running >= benchmark_run.concurrency:
            raise _limit_reached(session, benchmark_run, task_run)
    environment = sandboxes.run_environment(session, benchmark_run)
    datasets = datasets_for(session, task_run, environment)
    scenario = task_run.snapshot["task"].get("scenario") or []
    problem = (
        sandboxes.unsupported_step(scenario)
        or sandboxes.unsupported_dataset(datasets)
        or sandboxes.unsupported_settings(environment.settings, deployment)
    )
    if problem:
        return _fail_start(session, task_run, now, problem)
    run = sandboxes.RunContext(
        session, task_run.org_id, task_run.id, new_id("pg_"), environment.settings, deployment
    )
    # The playground's rows and every surface's seed are writes nobody reads back: on PostgreSQL
    # they go out together and are answered once, with the slot (a read inside, such as a
    # dataset's content, is answered at once).
    with pipelined(session):
        provisioned = sandboxes.provision(run)
        task_run.playground_id = run.playground_id
        try:
            sandboxes.seed(run, datasets, provisioned.sandboxes)
            sandboxes.run_scenario(run, scenario, provisioned.sandboxes)
        except sandboxes.ProvisionFailed as failed:  # teardown ends the playground
            return _fail_start(session, task_run, now, str(failed))
        task_run.phase, task_run.status = states.STARTED
        task_run.started_at = now
        task_run.deadline_at = now + timedelta(seconds=task_run.timeout_seconds)
        access = sandboxes.describe(
            session, provisioned.playground, host=host, deployment=deployment, sandboxes=provisioned.sandboxes
        )
        # Last: the slot is taken under the run's row lock, held from here to the commit, and the
        # task run's row written with it. Losing the race for the last slot after the check above
        # rolls the whole start back.
        if not take_slot(session, benchmark_run.id, now, task_run=task_run):
            raise _limit_reached(session, benchmark_run, task_run)
    return Started(task_run, access)


def _fail_start(session: Session, task_run: TaskRun, now: datetime, reason: str) -> Started:
    end_task_run(session, task_run, "fail", now, reason=reason)
    count_ended(session, task_run.benchmark_run_id, now, ended=1, released=0)
    return Started(task_run, None, reason)


def _access(session: Session, task_run: TaskRun, host: str, deployment: Deployment) -> Access:
    playground = session.get(Playground, task_run.playground_id) if task_run.playground_id else None
    if playground is None:
        raise Conflict(f"task run {task_run.id} has no playground")
    return sandboxes.describe(session, playground, host=host, deployment=deployment)


# -- complete, rescore --------------------------------------------------------------------------


def complete_task_run(
    session: Session,
    caller: Caller,
    task_run_id: str,
    deployment: Deployment | None = None,
    grading: Grading | None = None,
) -> Completion:
    """Capture, verify, record, finalize — once. Later or concurrent calls get the stored result."""
    benchmark_run, task_run = _lock_for(session, caller, task_run_id)
    with writes_of(task_run.id, benchmark_run.id):  # as `start_task_run`
        completion = _complete(session, benchmark_run, task_run, deployment, grading)
        session.flush()
    return completion


def _complete(
    session: Session,
    benchmark_run: BenchmarkRun,
    task_run: TaskRun,
    deployment: Deployment | None,
    grading: Grading | None,
) -> Completion:
    now = utcnow()
    if task_run.phase == "created":
        raise Conflict(f"task run {task_run.id} has not been started; call start first")
    settle_task_run(session, benchmark_run, task_run, now)
    if states.is_ended(task_run.status):
        return Completion(task_run, current_criterion_runs(session, task_run.id), benchmark_run.scored)
    pointer = sandboxes.capture(
        task_run.playground_id,
        task_run_id=task_run.id,
        input_entity=input_entity_of(task_run),
        entities=task_run.entities or {},
        session=session,
        deployment=deployment,
    )
    task_run.capture = pointer
    grading = grading or Grading()
    verification = verify_capture(session, task_run, pointer, grading, grading.judge)
    scored = benchmark_run.scored
    # The criterion runs, the teardown and the task run's end with the run's count: one round
    # trip on PostgreSQL (`pipelined`, `count_ended`).
    with pipelined(session):
        rows = record_criterion_runs(session, task_run, verification)
        end_task_run(session, task_run, "complete", now)
        store_score(task_run, verification.score)
        count_ended(session, benchmark_run.id, now, ended=1, released=1, task_run=task_run)
    return Completion(task_run, rows, scored)


def rescore_task_run(
    session: Session,
    caller: Caller,
    task_run_id: str,
    grading: Grading | None = None,
    *,
    rejudge: bool = False,
) -> Completion:
    """Re-run the frozen criteria on the stored capture; the previous set becomes superseded.

    The LLM judge's recorded verdicts are replayed, so a rescore reproduces a judged
    score without asking again; `rejudge` asks the live judge every question anew.
    """
    grading = grading or Grading()
    benchmark_run, task_run = _lock_for(session, caller, task_run_id)
    if task_run.capture is None:
        raise Conflict(f"task run {task_run.id} is {task_run.status} and has no captured state to rescore")
    previous = current_criterion_runs(session, task_run.id)
    if rejudge and grading.judge is None:
        raise Conflict("rejudge=true needs an LLM judge and none is configured (set ASSAY_JUDGE_URL)")
    judge = grading.judge if rejudge else replaying_judge(previous, grading.judge)
    session.execute(
        update(CriterionRun)
        .where(CriterionRun.task_run_id == task_run.id, CriterionRun.superseded.is_(False))
        .values(superseded=True)
    )
    verification = verify_capture(session, task_run, task_run.capture, grading, judge)
    rows = record_criterion_runs(session, task_run, verification)
    carry_overrides(session, previous, rows)
    store_score(task_run, score_rows(task_run, rows) if any(r.override for r in rows) else verification.score)
    scored = benchmark_run.scored
    rescore_run(session, benchmark_run.id, utcnow())
    return Completion(task_run, rows, scored)


# -- cancel -------------------------------------------------------------------------------------


def cancel_task_run(session: Session, caller: Caller, task_run_id: str) -> TaskRun:
    task_run, now = lock_task_run(session, caller, task_run_id), utcnow()
    released = int(states.is_running((task_run.phase, task_run.status)))
    end_task_run(session, task_run, "cancel", now)
    count_ended(session, task_run.benchmark_run_id, now, ended=1, released=released)
    return task_run


def cancel_benchmark_run(
    session: Session, caller: Caller, benchmark_run_id: str
) -> tuple[BenchmarkRun, list[TaskRun]]:
    """Cancel every task run that has not ended (score 0) and finalize the run as `cancelled`."""
    get_benchmark_run(session, caller, benchmark_run_id)
    benchmark_run, task_runs = lock_run(session, benchmark_run_id)
    now = utcnow()
    current = (benchmark_run.phase, benchmark_run.status)
    state = states.next_state(states.BENCHMARK_RUN, current, "cancel", f"benchmark run {benchmark_run.id}")
    ended = released = 0
    for task_run in task_runs:
        if not states.is_ended(task_run.status):
            released += int(states.is_running((task_run.phase, task_run.status)))
            end_task_run(session, task_run, "cancel", now)
            ended += 1
    benchmark_run.phase, benchmark_run.status = state
    benchmark_run.completed_at = now
    count_ended(session, benchmark_run.id, now, ended=ended, released=released)  # scores it
    return benchmark_run, task_runs
