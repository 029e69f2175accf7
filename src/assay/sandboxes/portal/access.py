"""`PortalSurface`: which playground's portal a request reaches, and where its events go.

The service resolves the caller (the run token for REST, the portal session for the web pages)
and hands the routers one of these; the routers never look at tokens or task runs.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from sqlalchemy import Engine

from assay.sandboxes.events import record_event
from assay.sandboxes.portal.throttle import SignInThrottle

__all__ = ["PortalSurface"]


@dataclass(frozen=True, slots=True)
class PortalSurface:
    engine: Engine
    read_engine: Engine
    """`engine` for the pages and lists that only read: on SQLite they take no write turn."""
    org_id: str
    playground_id: str
    sandbox_id: str
    credentials: dict[str, Any]
    """`{username, password}` of the web portal (`credentials.portal` in docs/sandboxes.md)."""
    task_run_id: str
    base_path: str = ""
    """The web portal's root path (its links and its cookie's path); empty for REST."""
    sign_in: SignInThrottle | None = None
    """The deployment's wrong-password throttle (web pages only; None for REST)."""

    def record(
        self, method: str, path: str, status: int, request: bytes = b"", response: bytes = b""
    ) -> None:
        """One `portal_request` event (docs/api.md), REST and web pages alike."""
        record_event(
            self.engine,
            org_id=self.org_id,
            sandbox_id=self.sandbox_id,
            type="portal_request",
            method=method,
            path=path,
            status=status,
            request=request,
            response=response,
            task_run_id=self.task_run_id,
        )
