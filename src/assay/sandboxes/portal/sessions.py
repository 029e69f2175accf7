"""Web portal sign-in: server-side sessions and CSRF tokens.

The cookie holds a random session id; the `portal_sessions` row keeps its SHA-256, the CSRF token
every form must echo, and whether the session signed in — so any API worker can serve any page.
A session exists from the first page (the sign-in form needs a CSRF token too) and gets a new id
when it signs in (no session fixation). Wrong passwords are slowed down per source and session by
`throttle.py`; nothing here ever locks a portal's sign-in as a whole.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
from dataclasses import dataclass

from sqlalchemy import Connection, delete, insert, select, update

from assay.sandboxes.portal.tables import PortalSessionRow
from assay.store import utcnow

__all__ = [
    "WebSession",
    "csrf_matches",
    "end_session",
    "find_session",
    "new_session",
    "session_key",
    "sign_in",
]


@dataclass(frozen=True, slots=True)
class WebSession:
    token: str
    """The cookie value (only ever known from the request or at creation)."""
    csrf: str
    signed_in: bool
    slug: str


def _digest(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


def session_key(session: WebSession) -> str:
    """A name for the session that is not its cookie (the cookie's SHA-256, as its row keeps it)."""
    return _digest(session.token)


def new_session(conn: Connection, playground_id: str) -> WebSession:
    token, csrf = secrets.token_urlsafe(32), secrets.token_urlsafe(32)
    conn.execute(
        insert(PortalSessionRow).values(
            id_hash=_digest(token), playground_id=playground_id, csrf=csrf, signed_in=False, slug="",
            created_at=utcnow(),
        )
    )  # fmt: skip
    return WebSession(token, csrf, False, "")


def find_session(conn: Connection, playground_id: str, token: str | None) -> WebSession | None:
    if not token:
        return None
    found = conn.execute(
        select(PortalSessionRow).where(
            PortalSessionRow.id_hash == _digest(token), PortalSessionRow.playground_id == playground_id
        )
    ).first()
    return None if found is None else WebSession(token, found.csrf, found.signed_in, found.slug)


def csrf_matches(session: WebSession | None, submitted: str | None) -> bool:
    return session is not None and bool(submitted) and hmac.compare_digest(session.csrf, submitted or "")


def end_session(conn: Connection, token: str) -> None:
    conn.execute(delete(PortalSessionRow).where(PortalSessionRow.id_hash == _digest(token)))


def sign_in(
    conn: Connection,
    playground_id: str,
    old: WebSession,
    credentials: dict[str, str],
    username: str,
    password: str,
    slug: str,
) -> WebSession | None:
    """The new, signed-in session when `username` and `password` are the portal's; else None.

    Both are compared in constant time, the password whether or not the username matched."""
    right = hmac.compare_digest(username.encode(), str(credentials.get("username", "")).encode())
    right = hmac.compare_digest(password.encode(), str(credentials.get("password", "")).encode()) and right
    if not right:
        return None
    end_session(conn, old.token)
    fresh = new_session(conn, playground_id)
    conn.execute(
        update(PortalSessionRow)
        .where(PortalSessionRow.id_hash == _digest(fresh.token))
        .values(signed_in=True, slug=slug)
    )
    return WebSession(fresh.token, fresh.csrf, True, slug)
