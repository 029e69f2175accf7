"""Tasks (+ entities) and criteria (docs/api.md): thin handlers over `actions`."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Header, Query, Request, Response

from assay.service.catalog import actions
from assay.service.catalog.schemas import (
    CriterionCreate,
    CriterionOut,
    CriterionPatch,
    SelfTestOut,
    TaskCreate,
    TaskEntityLink,
    TaskPatch,
    criterion_json,
    entity_json,
    task_json,
)
from assay.service.catalog.standard_routes import add_delete_route, add_get_route
from assay.service.deps import OrgCaller, PageDep, SessionDep
from assay.service.errors import ERROR_RESPONSES
from assay.service.pages import list_json
from assay.service.runs.self_test import refusal_response, self_test_task
from assay.service.transactions import TransactionRoute
from assay.store.models import Criterion, DatasetEntity, Task

__all__ = ["router"]

router = APIRouter(responses=ERROR_RESPONSES, route_class=TransactionRoute)
Json = dict[str, Any]


@router.get("/tasks", tags=["tasks"])
def list_tasks(
    session: SessionDep, caller: OrgCaller, page: PageDep, benchmark_id: Annotated[str | None, Query()] = None
) -> Json:
    return list_json(session, actions.tasks_listed(caller, benchmark_id), Task, page, task_json)


@router.post("/tasks", status_code=201, tags=["tasks"])
def create_task(body: TaskCreate, session: SessionDep, caller: OrgCaller) -> Json:
    return task_json(actions.create_task(session, caller, body), [])


@router.get("/tasks/{task_id}", tags=["tasks"])
def get_task(task_id: str, session: SessionDep, caller: OrgCaller) -> Json:
    """The task with its `criteria` in creation order."""
    task = actions.get_row(session, Task, caller, task_id)
    return task_json(task, actions.criteria_of(session, caller, task.id))


@router.patch("/tasks/{task_id}", tags=["tasks"])
def patch_task(task_id: str, body: TaskPatch, session: SessionDep, caller: OrgCaller) -> Json:
    task = actions.patch_task(session, caller, task_id, body)
    return task_json(task, actions.criteria_of(session, caller, task.id))


add_delete_route(
    router,
    "/tasks/{task_id}",
    actions.delete_task,
    description="Deletes the task and its criteria; runs keep their frozen snapshot.",
)


@router.get("/tasks/{task_id}/entities", tags=["tasks"])
def list_task_entities(task_id: str, session: SessionDep, caller: OrgCaller, page: PageDep) -> Json:
    statement = actions.task_entities_listed(session, caller, task_id)
    return list_json(session, statement, DatasetEntity, page, entity_json)


@router.post("/tasks/{task_id}/entities", status_code=201, tags=["tasks"])
def link_task_entity(task_id: str, body: TaskEntityLink, session: SessionDep, caller: OrgCaller) -> Json:
    """Attach a dataset entity to the task (frozen with it into runs)."""
    return entity_json(actions.link_task_entity(session, caller, task_id, body.entity_id))


@router.delete("/tasks/{task_id}/entities/{entity_id}", status_code=204, tags=["tasks"])
def unlink_task_entity(task_id: str, entity_id: str, session: SessionDep, caller: OrgCaller) -> Response:
    actions.unlink_task_entity(session, caller, task_id, entity_id)
    return Response(status_code=204)


@router.get("/criteria", tags=["criteria"])
def list_criteria(
    session: SessionDep, caller: OrgCaller, page: PageDep, task_id: Annotated[str | None, Query()] = None
) -> Json:
    """Newest first; a task's criteria (`task_id`) in the task's order, the order they are scored
    and shown in (creation order)."""
    statement = actions.criteria_listed(caller, task_id)
    return list_json(session, statement, Criterion, page, criterion_json, newest_first=task_id is None)


_CRITERION = {"model": CriterionOut, "description": "The criterion"}


@router.post(
    "/criteria", status_code=201, tags=["criteria"], response_model=None, responses={201: _CRITERION}
)
def create_criterion(body: CriterionCreate, session: SessionDep, caller: OrgCaller) -> Json:
    """Create a criterion; `assertion` must parse (422 naming `assertion.<key>`) and is stored as sent."""
    return criterion_json(actions.create_criterion(session, caller, body))


add_get_route(
    router,
    "/criteria/{criterion_id}",
    Criterion,
    criterion_json,
    response_model=None,
    responses={200: _CRITERION},
)


@router.patch("/criteria/{criterion_id}", tags=["criteria"], response_model=None, responses={200: _CRITERION})
def patch_criterion(criterion_id: str, body: CriterionPatch, session: SessionDep, caller: OrgCaller) -> Json:
    return criterion_json(actions.patch_criterion(session, caller, criterion_id, body))


add_delete_route(router, "/criteria/{criterion_id}", actions.delete_criterion)


@router.post(
    "/tasks/{task_id}/self-test",
    tags=["tasks"],
    response_model=None,
    responses={200: {"model": SelfTestOut, "description": "The self-test's findings"}},
)
async def self_test(
    request: Request, task_id: str, authorization: Annotated[str | None, Header()] = None
) -> Json | Response:
    """Score the task with an idle agent and, when it has one, its reference solution:
    `ok` is false and `problems` lists each criterion an idle agent passes (unless `idle_ok`), an
    idle score above 0, and each criterion the reference fails, with its evidence."""
    try:
        result = await self_test_task(request.app, authorization or "", task_id)
    except Exception as error:
        return refusal_response(error)
    return result.as_json()
