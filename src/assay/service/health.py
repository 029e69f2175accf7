"""`GET /healthz`: is this API up and can it reach its database? No token needed, so load balancers,
`assay demo` and the SDK's `health()` can ask before they have a key."""

from __future__ import annotations

from typing import Any, Literal

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse
from pydantic import BaseModel
from sqlalchemy import text
from sqlalchemy.exc import SQLAlchemyError

from assay import __version__
from assay.service.errors import ErrorEnvelope, envelope

__all__ = ["router"]

router = APIRouter(tags=["health"])


class HealthOut(BaseModel):
    status: Literal["ok"]
    version: str


@router.get(
    "/healthz",
    responses={
        200: {"model": HealthOut, "description": "Up, and the database answers"},
        503: {"model": ErrorEnvelope, "description": "`UNAVAILABLE`: the database cannot be reached"},
    },
)
def healthz(request: Request) -> Any:
    """`{"status": "ok", "version": …}`; 503 `UNAVAILABLE` when a `SELECT 1` on the database fails."""
    try:
        with request.app.state.database.reading() as session:  # no write lock for a ping
            session.execute(text("SELECT 1"))
    except SQLAlchemyError as exc:
        return envelope(503, "UNAVAILABLE", f"the database cannot be reached: {type(exc).__name__}")
    return JSONResponse({"status": "ok", "version": __version__})
