"""`create_app(settings)`: the FastAPI application factory (no module-level engine).

The lifespan opens the database, upgrades the schema (Alembic, under a lock, so several workers
may start together), makes sure `ASSAY_BOOTSTRAP_API_KEY` exists, and runs the sweeper thread that
times out task runs and expires run tokens (docs/api.md), opens what the surfaces keep while the app
runs (the FHIR surface's external-server client, from `Settings`), and starts the surfaces'
listeners (MLLP, SFTP) unless `ASSAY_LISTENERS=0` (a multi-worker `serve` runs them in its
listener process); on shutdown it stops and closes them and the sweeper and disposes of the engine.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from fastapi import Depends, FastAPI
from sqlalchemy.exc import IntegrityError

from assay.checks import load_semantic_model
from assay.core.memory import release_heap, settle_heap
from assay.judge import OpenAIJudge
from assay.sandboxes import Listeners, close_surfaces, open_surfaces
from assay.sandboxes.events import close_event_logs
from assay.service.auth.cache import TokenCache
from assay.service.catalog.routes import router as catalog_router
from assay.service.catalog.task_routes import router as task_router
from assay.service.errors import ERROR_RESPONSES, install_error_handlers
from assay.service.fast_path import AssayApp
from assay.service.grading import Grading
from assay.service.health import router as health_router
from assay.service.limits import BodySizeLimit, RateLimiter, json_body_limit
from assay.service.listeners import open_settings_deployment
from assay.service.openapi import install_openapi
from assay.service.orphans import exit_with_parent
from assay.service.priority import VerbsFirst, share_the_gil
from assay.service.runs.routes import router as runs_router
from assay.service.runs.sweeper import Sweeper
from assay.service.runs.v1_routes import router as v1_router
from assay.service.sandboxes.routes import sandbox_routers
from assay.service.settings import Settings
from assay.service.tools import install_tools
from assay.service.ui import router as ui_router
from assay.store import Database
from assay.store.epoch import epoch_of
from assay.store.tokens import ensure_api_key

__all__ = ["create_app"]


def _bootstrap(database: Database, key: str) -> None:
    """Ensure `ASSAY_BOOTSTRAP_API_KEY`; a worker that loses the insert race finds the winner's row."""
    for attempt in range(2):
        try:
            with database.transaction() as session:
                ensure_api_key(session, key)
            return
        except IntegrityError:
            if attempt:
                raise


def create_app(settings: Settings | None = None) -> FastAPI:
    """Build the app; without `settings`, read them from the environment (for `uvicorn --factory`)."""
    settings = settings or Settings.from_env()

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        exit_with_parent()  # a worker of `serve --workers N` stops when `serve` is killed
        share_the_gil()  # `complete` keeps its pace under agent load (service/priority.py)
        database = Database(settings.resolved_database_url)
        database.migrate()
        if settings.bootstrap_api_key:
            _bootstrap(database, settings.bootstrap_api_key)
        app.state.database = database
        app.state.epoch = epoch_of(database.engine)  # read by `AssayApp` (service/fast_path.py)
        app.state.tokens = TokenCache(database)
        app.state.settings = settings
        deployment = open_settings_deployment(database.engine, settings)
        app.state.deployment = deployment
        open_surfaces(deployment)  # e.g. the FHIR surface's client of an ASSAY_FHIR_URL server
        listeners = Listeners(deployment)
        if settings.listeners:
            await listeners.start()
        app.state.rate_limiter = (
            RateLimiter(settings.rate_limit, settings.rate_limit_burst) if settings.rate_limit else None
        )
        judge = OpenAIJudge(settings.judge) if settings.judge else None
        app.state.grading = Grading(semantic=settings.voice_semantic, judge=judge)
        app.state.verbs_first = VerbsFirst(settings.agent_requests)  # service/priority.py
        if settings.voice_semantic:
            load_semantic_model()  # once per process, before the first `complete` needs it
        sweeper = Sweeper(database, settings.sweep_interval)
        sweeper.start()
        settle_heap()  # last: everything start-up built is frozen out of full collections
        try:
            yield
        finally:
            release_heap()
            await listeners.stop()
            sweeper.stop()
            if judge is not None:
                judge.close()
            close_event_logs(database.engine)  # the events still queued (sandboxes/events.py)
            close_surfaces(deployment)  # the pooled connections to an ASSAY_FHIR_URL server
            await app.state.epoch.aclose()  # PostgreSQL: the epoch reader's connection
            database.dispose()

    app = AssayApp(
        title="Assay",
        version="0.1.0",
        summary="Verification engine for healthcare AI-agent benchmarks.",
        lifespan=lifespan,
    )
    app.add_middleware(BodySizeLimit, max_bytes=settings.max_body_bytes)
    install_error_handlers(app)
    install_openapi(app)
    app.include_router(health_router)
    # The sandbox surfaces first: they are the agents' hot path, and routes are matched in order
    # (their prefixes, `/v1/task-runs/{id}/<surface>`, overlap no other route).
    for router, prefix in sandbox_routers():
        app.include_router(router, prefix=prefix, responses=ERROR_RESPONSES)
    install_tools(app)  # the agents' tools next: a tool call is as hot (service/tools)
    body_checks = [Depends(json_body_limit)]
    app.include_router(catalog_router, dependencies=body_checks)
    app.include_router(task_router, dependencies=body_checks)
    app.include_router(runs_router, dependencies=body_checks)
    app.include_router(v1_router, prefix="/v1", dependencies=body_checks)
    app.include_router(ui_router)
    return app
