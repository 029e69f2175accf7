"""The results viewer at `/ui`: benchmark runs → a run → a task run with every
criterion's evidence and the agent's trajectory, and two runs side by side.

Server-rendered (Jinja2), readable without JavaScript (`<details>` expands event bodies), for org
API keys only: the pages read through the same caller-scoped queries as the API (`runs.queries`), so another
organization's ids are 404 and nothing a run token or Solver key may not see is ever shown to one.
Handlers are plain `def`s: each opens its own transaction on the thread that does the work.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from fractions import Fraction
from pathlib import Path
from typing import Annotated, Any

from fastapi import APIRouter, Form, Query, Request, Response
from fastapi.responses import HTMLResponse, RedirectResponse
from fastapi.templating import Jinja2Templates

from assay.core.statistics import compare_paired, run_statistics
from assay.service.runs import actions, overrides, queries
from assay.service.runs.overrides import OverrideCreate
from assay.service.runs.schemas import trials_by_task
from assay.service.runs.self_test import SELF_TEST_AGENT
from assay.service.tools.execute import tools_of_app
from assay.service.tools.trajectory import placed_messages
from assay.service.ui import views
from assay.service.ui.session import (
    COOKIE,
    csrf_token,
    forget_key,
    from_this_site,
    keep_key,
    org_caller_for,
    signed_in_caller,
    valid_csrf,
)
from assay.store import Caller, Conflict, Database, Invalid, NotFound
from assay.store.models import TaskRun

__all__ = ["router"]

router = APIRouter(prefix="/ui", include_in_schema=False)
templates = Jinja2Templates(directory=Path(__file__).parent / "templates")
templates.env.filters["pretty"] = views.pretty

PAGE_SIZE = 50
SORTS = ("created", "started", "benchmark", "agent", "phase", "verdict", "score", "duration")


class _SignedOut(Exception):
    pass


@contextmanager
def _org(request: Request) -> Iterator[tuple[Any, Caller]]:
    database: Database = request.app.state.database
    with database.transaction() as session:
        caller = signed_in_caller(request, session)
        if caller is None:
            raise _SignedOut
        yield session, caller


def _to_sign_in(request: Request) -> RedirectResponse:
    target = request.url.path + (f"?{request.url.query}" if request.url.query else "")
    response = RedirectResponse(f"/ui/login?next={target}", status_code=303)
    forget_key(response)
    return response


def _page(request: Request, name: str, status: int = 200, **context: Any) -> HTMLResponse:
    context.setdefault("csrf", csrf_token(request) if request.cookies.get(COOKIE) else "")
    return templates.TemplateResponse(request, name, context, status_code=status)


def _not_found(request: Request, message: str) -> HTMLResponse:
    return _page(request, "error.html", 404, title="Not found", message=message)


def _score(text: str | None) -> float | None:
    return None if text is None else float(Fraction(text))


# -- signing in -------------------------------------------------------------------------------


@router.get("", response_class=RedirectResponse)
def home() -> RedirectResponse:
    return RedirectResponse("/ui/runs", status_code=303)


@router.get("/login", response_class=HTMLResponse)
def sign_in_form(request: Request, next: str = "/ui/runs") -> HTMLResponse:
    return _page(request, "login.html", next=_safe_next(next), error=None)


def _safe_next(target: str) -> str:
    """Only a path of this viewer: never an open redirect to another site."""
    return target if target.startswith("/ui/") and not target.startswith("/ui//") else "/ui/runs"


def _cross_site(request: Request) -> HTMLResponse:
    message = "This form was posted from another site: open the viewer's own page and submit it there."
    return _page(request, "error.html", 403, title="Forbidden", message=message, csrf="")


@router.post("/login", response_class=HTMLResponse)
def sign_in(
    request: Request, api_key: Annotated[str, Form()] = "", next: Annotated[str, Form()] = "/ui/runs"
) -> Response:
    if not from_this_site(request):
        return _cross_site(request)
    database: Database = request.app.state.database
    with database.transaction() as session:
        caller = org_caller_for(session, api_key.strip())
    if caller is None:
        error = "That is not a valid organization API key (vk_…). Solver keys and run tokens cannot sign in."
        return _page(request, "login.html", 401, next=_safe_next(next), error=error, csrf="")
    response = RedirectResponse(_safe_next(next), status_code=303)
    keep_key(request, response, api_key.strip())
    return response


@router.post("/logout")
def sign_out(request: Request) -> Response:
    if not from_this_site(request):
        return _cross_site(request)
    response = RedirectResponse("/ui/login", status_code=303)
    forget_key(response)
    return response


# -- benchmark runs ---------------------------------------------------------------------------


def _run_row(run: Any) -> dict[str, Any]:
    ref = run.benchmark_ref or {}
    agent = run.agent
    agent_text = agent.get("name") or str(agent) if isinstance(agent, dict) else (agent or "")
    return {
        "id": run.id,
        "benchmark": ref.get("name") or ref.get("slug") or run.benchmark_id,
        "version": ref.get("version"),
        "agent": str(agent_text),
        "phase": run.phase,
        "verdict": run.verdict,
        "score": _score(run.score),
        "created": run.created_at,
        "started": run.started_at,
        "duration_seconds": (run.completed_at - run.started_at).total_seconds()
        if run.started_at and run.completed_at
        else None,
        "duration": views.duration_text(run.started_at, run.completed_at),
    }


def _sort_key(sort: str) -> Any:
    def key(row: dict[str, Any]) -> tuple[bool, Any]:
        value = row["duration_seconds" if sort == "duration" else sort]
        return (value is None, value if value is not None else 0)

    return key


@router.get("/runs", response_class=HTMLResponse)
def benchmark_runs(
    request: Request,
    benchmark: str = "",
    phase: str = "",
    verdict: str = "",
    agent: str = "",
    self_tests: Annotated[str, Query(pattern="^(|show)$")] = "",
    sort: Annotated[str, Query(pattern="^(" + "|".join(SORTS) + ")$")] = "created",
    order: Annotated[str, Query(pattern="^(asc|desc)$")] = "desc",
    page: Annotated[int, Query(ge=1, le=100_000)] = 1,
) -> Response:
    """Every run of the organization, filtered in SQL, sorted and paged in memory: the listed columns
    (score as an exact fraction, duration, the benchmark's name) are not sortable in SQL on both
    backends, and a few thousand small rows sort in milliseconds."""
    try:
        with _org(request) as (session, caller):
            rows = [_run_row(run) for run in queries.benchmark_run_summaries(session, caller, phase, verdict)]
    except _SignedOut:
        return _to_sign_in(request)
    hidden = 0
    if not self_tests:  # an author's lint and publish checks, not agents' results (docs/viewer.md)
        kept = [row for row in rows if row["agent"] != SELF_TEST_AGENT]
        hidden, rows = len(rows) - len(kept), kept
    benchmarks = sorted({row["benchmark"] for row in rows if row["benchmark"]})
    if benchmark:
        rows = [row for row in rows if row["benchmark"] == benchmark]
    if agent:
        rows = [row for row in rows if agent.lower() in row["agent"].lower()]
    rows.sort(key=_sort_key(sort), reverse=order == "desc")
    pages = max(1, -(-len(rows) // PAGE_SIZE))
    page = min(page, pages)
    shown = rows[(page - 1) * PAGE_SIZE : page * PAGE_SIZE]
    filters = {
        "benchmark": benchmark,
        "phase": phase,
        "verdict": verdict,
        "agent": agent,
        "self_tests": self_tests,
    }
    return _page(
        request,
        "runs.html",
        title="Benchmark runs",
        runs=shown,
        hidden=hidden,
        total=len(rows),
        page=page,
        pages=pages,
        sort=sort,
        order=order,
        filters=filters,
        benchmarks=benchmarks,
        sorts=SORTS,
    )


def _axes_mean(task_runs: list[TaskRun]) -> dict[str, float]:
    sums: dict[str, list[float]] = {}
    for task_run in task_runs:
        for name, axis in (task_run.axes or {}).items():
            sums.setdefault(name, []).append(float(axis.get("score", 0)))
    return {name: sum(values) / len(values) for name, values in sums.items()}


@router.get("/runs/{benchmark_run_id}", response_class=HTMLResponse)
def benchmark_run(request: Request, benchmark_run_id: str) -> Response:
    try:
        with _org(request) as (session, caller):
            run, task_runs = queries.settled_benchmark_run(session, caller, benchmark_run_id)
            counts = queries.overrides_in_force(session, [task_run.id for task_run in task_runs])
            others = queries.comparable_runs(session, caller, run)
    except _SignedOut:
        return _to_sign_in(request)
    except NotFound as missing:
        return _not_found(request, str(missing))
    statistics = None
    if run.phase == "completed":
        statistics = run_statistics(trials_by_task(task_runs), run.trials)
    return _page(
        request,
        "run.html",
        title=f"Run {run.id}",
        run=_run_row(run),
        raw=run,
        task_runs=task_runs,
        statistics=statistics,
        axes=_axes_mean(task_runs),
        overrides=counts,
        others=others,
        score_of=_score,
    )


# -- a task run -------------------------------------------------------------------------------


def _events(session: Any, playground_id: str | None) -> tuple[list[views.EventRow], dict[str, str]]:
    rows, surfaces = queries.playground_event_previews(session, playground_id, views.BODY_PREVIEW)
    return [views.EventRow(*row) for row in rows], surfaces


@router.get("/task-runs/{task_run_id}", response_class=HTMLResponse)
def task_run(request: Request, task_run_id: str) -> Response:
    tools_of_app(request.app).trajectory.flush()  # the tool calls still queued in this process
    try:
        with _org(request) as (session, caller):
            row = queries.settled_task_run(session, caller, task_run_id)
            criteria = queries.current_criterion_runs(session, row.id)
            events, surfaces = _events(session, row.playground_id)
            messages = placed_messages(session, row.id)  # the model's, among the events
    except _SignedOut:
        return _to_sign_in(request)
    except NotFound as missing:
        return _not_found(request, str(missing))
    links = views.criterion_event_links(criteria, events)
    judged_by: dict[str, list[str]] = {}
    for criterion_run_id, event_ids in links.items():
        for event_id in event_ids:
            judged_by.setdefault(event_id, []).append(criterion_run_id)
    frozen = row.snapshot.get("criteria", [])
    shown = [
        {
            "run": run,
            "score": _score(run.score),
            "rows": views.evidence_rows(run.evidence),
            "references": views.evidence_references(run.evidence),
            "required": run.position < len(frozen) and frozen[run.position].get("required") is True,
            "events": links.get(run.id, []),
        }
        for run in criteria
    ]
    return _page(
        request,
        "task_run.html",
        title=f"Task run {row.name}",
        task_run=row,
        score=_score(row.score),
        criteria=shown,
        timeline=views.with_messages(views.timeline(events, surfaces, judged_by), messages),
        matched_turns=views.matched_turns(criteria),
        task=row.snapshot.get("task", {}),
    )


@router.get("/task-runs/{task_run_id}/state")
def task_run_state(request: Request, task_run_id: str) -> Response:
    try:
        with _org(request) as (session, caller):
            data = queries.state_archive(session, queries.get_task_run(session, caller, task_run_id))
    except _SignedOut:
        return _to_sign_in(request)
    except (NotFound, Conflict) as problem:
        return _page(
            request,
            "error.html",
            404 if isinstance(problem, NotFound) else 409,
            title="No state",
            message=str(problem),
        )
    headers = {"Content-Disposition": f'attachment; filename="{task_run_id}.tar.gz"'}
    return Response(data, media_type="application/gzip", headers=headers)


@router.get("/events/{event_id}", response_class=HTMLResponse)
def event(request: Request, event_id: str) -> Response:
    try:
        with _org(request) as (session, caller):
            found = queries.event_of(session, caller, event_id)
    except _SignedOut:
        return _to_sign_in(request)
    if found is None:
        return _not_found(request, f"event {event_id} not found")
    return _page(request, "event.html", title=f"Event {found.id}", event=found)


def _refuse_without_csrf(request: Request, sent: str | None) -> HTMLResponse | None:
    if valid_csrf(request, sent):
        return None
    message = "This form is missing its CSRF token (or it is stale): reload the page and try again."
    return _page(request, "error.html", 403, title="Forbidden", message=message)


@router.post("/task-runs/{task_run_id}/rescore")
def rescore(request: Request, task_run_id: str, csrf: Annotated[str, Form()] = "") -> Response:
    refused = _refuse_without_csrf(request, csrf)
    if refused:
        return refused
    try:
        with _org(request) as (session, caller):
            actions.rescore_task_run(session, caller, task_run_id)
    except _SignedOut:
        return _to_sign_in(request)
    except (NotFound, Conflict) as problem:
        return _page(request, "error.html", 409, title="Cannot rescore", message=str(problem))
    return RedirectResponse(f"/ui/task-runs/{task_run_id}", status_code=303)


@router.post("/criterion-runs/{criterion_run_id}/override")
def override(
    request: Request,
    criterion_run_id: str,
    passed: Annotated[str, Form()],
    reason: Annotated[str, Form()] = "",
    csrf: Annotated[str, Form()] = "",
) -> Response:
    refused = _refuse_without_csrf(request, csrf)
    if refused:
        return refused
    if not reason.strip():
        return _page(
            request, "error.html", 422, title="Reason required", message="Say why you override the check."
        )
    try:
        with _org(request) as (session, caller):
            body = OverrideCreate(passed=passed == "true", reason=reason.strip())
            row = overrides.override_criterion_run(session, caller, criterion_run_id, body)
            task_run_id = row.task_run_id
    except _SignedOut:
        return _to_sign_in(request)
    except (NotFound, Conflict, Invalid) as problem:
        return _page(request, "error.html", 409, title="Cannot override", message=str(problem))
    return RedirectResponse(f"/ui/task-runs/{task_run_id}#criterion-{criterion_run_id}", status_code=303)


# -- compare ----------------------------------------------------------------------------------


@router.get("/compare", response_class=HTMLResponse)
def compare(request: Request, a: str = "", b: str = "") -> Response:
    try:
        with _org(request) as (session, caller):
            run_a, task_runs_a = queries.settled_benchmark_run(session, caller, a)
            run_b, task_runs_b = queries.settled_benchmark_run(session, caller, b)
            criteria_a = queries.criterion_means(session, task_runs_a)
            criteria_b = queries.criterion_means(session, task_runs_b)
    except _SignedOut:
        return _to_sign_in(request)
    except NotFound as missing:
        return _not_found(request, str(missing))
    if run_a.benchmark_id != run_b.benchmark_id:
        message = f"{a} and {b} are runs of different benchmarks; compare two runs of one benchmark."
        return _page(request, "error.html", 422, title="Not comparable", message=message)
    trials_a, trials_b = trials_by_task(task_runs_a), trials_by_task(task_runs_b)
    comparison = compare_paired(trials_a, trials_b)
    names = {tr.task_id: tr.name for tr in [*task_runs_a, *task_runs_b]}
    tasks = []
    for task_id in dict.fromkeys([*trials_a, *trials_b]):
        positions = sorted({p for (t, p) in [*criteria_a, *criteria_b] if t == task_id})
        rows = []
        for position in positions:
            label_a, score_a = criteria_a.get((task_id, position), ("", None))  # type: ignore[arg-type]
            label_b, score_b = criteria_b.get((task_id, position), ("", None))  # type: ignore[arg-type]
            rows.append(
                {"label": label_a or label_b, "a": score_a, "b": score_b, "changed": score_a != score_b}
            )
        mean_a = trials_a[task_id].mean if task_id in trials_a else None
        mean_b = trials_b[task_id].mean if task_id in trials_b else None
        tasks.append(
            {
                "id": task_id,
                "name": names.get(task_id, task_id),
                "a": mean_a,
                "b": mean_b,
                "difference": comparison.differences.get(task_id),
                "criteria": rows,
            }
        )
    return _page(
        request,
        "compare.html",
        title="Compare runs",
        a=_run_row(run_a),
        b=_run_row(run_b),
        comparison=comparison,
        tasks=tasks,
    )
