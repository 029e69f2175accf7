"""Datasets, environments, benchmarks (+ publish), solvers and keys (docs/api.md): thin handlers.

Each handler resolves caller and session through `deps`, calls one action, and shapes the reply;
the rules live in `actions` and `publish`. The list, get and delete endpoints that are alike in
every collection come from `standard_routes` (`add_list_route(router, "/environments", ...)`), in
their place among the hand-written ones.
"""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Depends, Header, Request, Response
from starlette.concurrency import run_in_threadpool

from assay.service.auth.actions import authenticate
from assay.service.catalog import actions
from assay.service.catalog.publish import publish_benchmark
from assay.service.catalog.schemas import (
    BenchmarkCreate,
    BenchmarkPatch,
    DatasetCreate,
    DatasetPatch,
    EntityCreate,
    EnvironmentCreate,
    EnvironmentPatch,
    KeyCreate,
    PublishBody,
    SolverCreate,
    SolverPatch,
    VersionOut,
    benchmark_json,
    dataset_bytes,
    dataset_json,
    entity_json,
    environment_json,
    key_json,
    solver_json,
    version_json,
)
from assay.service.catalog.standard_routes import add_delete_route, add_get_route, add_list_route
from assay.service.deps import OrgCaller, PageDep, SessionDep, limit_rate
from assay.service.errors import ERROR_RESPONSES
from assay.service.pages import list_json
from assay.service.runs.self_test import refusal_response, self_test_benchmark
from assay.service.transactions import TransactionRoute
from assay.store import Conflict, Database, Forbidden
from assay.store.models import ApiKey, Benchmark, Dataset, DatasetEntity, Environment, Solver

__all__ = ["router"]

router = APIRouter(responses=ERROR_RESPONSES, route_class=TransactionRoute)
Json = dict[str, Any]


# -- datasets -----------------------------------------------------------------------------------


add_list_route(router, "/datasets", Dataset, dataset_json)


def _new_dataset(body: DatasetCreate) -> actions.NewDataset:
    """Checked, hashed and rendered on a worker thread before the handler's transaction opens, so
    the SQLite write lock is not held for it."""
    return actions.prepare_dataset(body)


@router.post("/datasets", status_code=201, tags=["datasets"], response_model=Json)
def create_dataset(
    session: SessionDep, caller: OrgCaller, new: Annotated[actions.NewDataset, Depends(_new_dataset)]
) -> Response:
    # The 201 echoes `data` (docs/api.md) as the bytes just stored, not rendered again.
    dataset, entities = actions.create_dataset(session, caller, new)
    return Response(
        dataset_bytes(dataset, entities, new.text), status_code=201, media_type="application/json"
    )


@router.get("/datasets/{dataset_id}", tags=["datasets"])
def get_dataset(dataset_id: str, session: SessionDep, caller: OrgCaller) -> Json:
    dataset = actions.get_row(session, Dataset, caller, dataset_id)
    return dataset_json(dataset, actions.entities_of(session, caller, dataset.id))


@router.patch("/datasets/{dataset_id}", tags=["datasets"])
def patch_dataset(dataset_id: str, body: DatasetPatch, session: SessionDep, caller: OrgCaller) -> Json:
    dataset = actions.patch_dataset(session, caller, dataset_id, body)
    return dataset_json(dataset, actions.entities_of(session, caller, dataset.id))


add_delete_route(router, "/datasets/{dataset_id}", actions.delete_dataset)


@router.get("/datasets/{dataset_id}/entities", tags=["datasets"])
def list_entities(dataset_id: str, session: SessionDep, caller: OrgCaller, page: PageDep) -> Json:
    statement = actions.dataset_entities_listed(session, caller, dataset_id)
    return list_json(session, statement, DatasetEntity, page, entity_json)


@router.post("/datasets/{dataset_id}/entities", status_code=201, tags=["datasets"])
def create_entity(dataset_id: str, body: EntityCreate, session: SessionDep, caller: OrgCaller) -> Json:
    return entity_json(actions.create_entity(session, caller, dataset_id, body))


# -- environments -------------------------------------------------------------------------------


add_list_route(router, "/environments", Environment, environment_json)


@router.post("/environments", status_code=201, tags=["environments"])
def create_environment(body: EnvironmentCreate, session: SessionDep, caller: OrgCaller) -> Json:
    return environment_json(actions.create_environment(session, caller, body))


add_get_route(router, "/environments/{environment_id}", Environment, environment_json)


@router.patch("/environments/{environment_id}", tags=["environments"])
def patch_environment(
    environment_id: str, body: EnvironmentPatch, session: SessionDep, caller: OrgCaller
) -> Json:
    return environment_json(actions.patch_environment(session, caller, environment_id, body))


add_delete_route(router, "/environments/{environment_id}", actions.delete_environment)


# -- benchmarks ---------------------------------------------------------------------------------


add_list_route(router, "/benchmarks", Benchmark, benchmark_json)


@router.post("/benchmarks", status_code=201, tags=["benchmarks"])
def create_benchmark(body: BenchmarkCreate, session: SessionDep, caller: OrgCaller) -> Json:
    return benchmark_json(actions.create_benchmark(session, caller, body))


add_get_route(router, "/benchmarks/{benchmark_id}", Benchmark, benchmark_json)


@router.patch("/benchmarks/{benchmark_id}", tags=["benchmarks"])
def patch_benchmark(benchmark_id: str, body: BenchmarkPatch, session: SessionDep, caller: OrgCaller) -> Json:
    return benchmark_json(actions.patch_benchmark(session, caller, benchmark_id, body))


add_delete_route(router, "/benchmarks/{benchmark_id}", actions.delete_benchmark)


@router.post(
    "/benchmarks/{benchmark_id}/publish",
    tags=["benchmarks"],
    response_model=None,
    responses={200: {"model": VersionOut, "description": "The version just published"}},
)
async def publish(
    request: Request,
    benchmark_id: str,
    body: PublishBody | None = None,
    authorization: Annotated[str | None, Header()] = None,
) -> Json | Response:
    """Freeze the draft as an immutable `slug@version` (docs/api.md), once every task passes its
    self-test (an idle agent earns nothing, a reference solution passes; docs/scoring.md), unless
    `force`. The refusal (409) lists each task's problems with the criteria and their evidence."""
    body = body or PublishBody()
    if not body.force:
        try:
            results = await self_test_benchmark(request.app, authorization or "", benchmark_id)
        except Exception as error:
            return refusal_response(error)
        failing = {result.task_id: result.as_json() for result in results if not result.ok}
        if failing:
            count = sum(len(result["problems"]) for result in failing.values())
            raise Conflict(
                f"{len(failing)} task(s) of benchmark {benchmark_id} fail their self-test ({count} problem(s)); "
                "fix them or publish with force",
                {"self_tests": failing},
            )
    database: Database = request.app.state.database

    def publish_now() -> Json:
        with database.transaction() as session:
            caller = limit_rate(request, authenticate(session, authorization))
            if caller.kind != "org":
                raise Forbidden("this endpoint needs an organization API key")
            return version_json(publish_benchmark(session, caller, benchmark_id, body))

    return await run_in_threadpool(publish_now)


# -- solvers and keys ---------------------------------------------------------------------------


add_list_route(router, "/solvers", Solver, solver_json)


@router.post("/solvers", status_code=201, tags=["solvers"])
def create_solver(body: SolverCreate, session: SessionDep, caller: OrgCaller) -> Json:
    return solver_json(actions.create_solver(session, caller, body))


add_get_route(router, "/solvers/{solver_id}", Solver, solver_json)


@router.patch("/solvers/{solver_id}", tags=["solvers"])
def patch_solver(solver_id: str, body: SolverPatch, session: SessionDep, caller: OrgCaller) -> Json:
    return solver_json(actions.patch_solver(session, caller, solver_id, body))


add_delete_route(router, "/solvers/{solver_id}", actions.delete_solver)


@router.post("/solvers/{solver_id}/api-keys", status_code=201, tags=["solvers"])
def create_solver_key(
    solver_id: str, session: SessionDep, caller: OrgCaller, body: KeyCreate | None = None
) -> Json:
    """A Solver key (`vrl_slv_`): creates runs, reads the runs its solver created. Shown once."""
    minted = actions.create_solver_key(session, caller, solver_id, body.name if body else None)
    return key_json(minted.row, minted.token)


@router.delete("/solvers/{solver_id}/api-keys/{key_id}", status_code=204, tags=["solvers"])
def delete_solver_key(solver_id: str, key_id: str, session: SessionDep, caller: OrgCaller) -> Response:
    actions.delete_solver_key(session, caller, solver_id, key_id)
    return Response(status_code=204)


@router.get("/api-keys", tags=["api-keys"])
def list_keys(session: SessionDep, caller: OrgCaller, page: PageDep) -> Json:
    return list_json(session, actions.keys_listed(caller), ApiKey, page, key_json)


@router.post("/api-keys", status_code=201, tags=["api-keys"])
def create_key(session: SessionDep, caller: OrgCaller, body: KeyCreate | None = None) -> Json:
    """An org API key (`vk_`); the plaintext is in this response only."""
    minted = actions.create_key(session, caller, body.name if body else None)
    return key_json(minted.row, minted.token)


add_delete_route(router, "/api-keys/{key_id}", actions.delete_key)
