"""Web portal sign-in: server-side sessions, CSRF tokens, lockout after repeated wrong passwords.

The cookie holds a random session id; the `portal_sessions` row keeps its SHA-256, the CSRF token
every form must echo, and whether the session signed in — so any API worker can serve any page.
A session exists from the first page (the sign-in form needs a CSRF token too) and gets a new id
when it signs in (no session fixation). Wrong passwords count per portal (the playground's store
row, under its write lock): the `MAX_FAILURES`-th locks sign-in for `LOCKOUT`, right password or not.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
from dataclasses import dataclass
from datetime import datetime, timedelta

from sqlalchemy import Connection, delete, insert, select, update

from assay.sandboxes.portal.store import head
from assay.sandboxes.portal.tables import PortalSessionRow, PortalStoreRow
from assay.store import utcnow

__all__ = [
    "LOCKOUT",
    "MAX_FAILURES",
    "SignIn",
    "WebSession",
    "csrf_matches",
    "end_session",
    "find_session",
    "new_session",
    "sign_in",
]

MAX_FAILURES = 5
LOCKOUT = timedelta(minutes=15)


@dataclass(frozen=True, slots=True)
class WebSession:
    token: str
    """The cookie value (only ever known from the request or at creation)."""
    csrf: str
    signed_in: bool
    slug: str


@dataclass(frozen=True, slots=True)
class SignIn:
    """The outcome of one sign-in attempt."""

    session: WebSession | None
    """The new, signed-in session; None when refused."""
    locked_until: datetime | None = None
    failures_left: int | None = None


def _digest(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


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
) -> SignIn:
    """Check the password under the portal's write lock; count failures, lock, or open a session."""
    store = head(conn, playground_id, lock=True)
    if store is None:
        return SignIn(None)
    now = utcnow()
    if store.locked_until is not None and store.locked_until > now:
        return SignIn(None, locked_until=store.locked_until)
    right = hmac.compare_digest(username.encode(), str(credentials.get("username", "")).encode())
    right = hmac.compare_digest(password.encode(), str(credentials.get("password", "")).encode()) and right
    where = PortalStoreRow.playground_id == playground_id
    if not right:
        failures = store.failed_logins + 1
        locked = now + LOCKOUT if failures >= MAX_FAILURES else None
        conn.execute(
            update(PortalStoreRow).where(where).values(
                failed_logins=0 if locked else failures, locked_until=locked
            )
        )  # fmt: skip
        return SignIn(None, locked_until=locked, failures_left=None if locked else MAX_FAILURES - failures)
    conn.execute(update(PortalStoreRow).where(where).values(failed_logins=0, locked_until=None))
    end_session(conn, old.token)
    fresh = new_session(conn, playground_id)
    conn.execute(
        update(PortalSessionRow)
        .where(PortalSessionRow.id_hash == _digest(fresh.token))
        .values(signed_in=True, slug=slug)
    )
    return SignIn(WebSession(fresh.token, fresh.csrf, True, slug))
