"""Signing in to the viewer: an organization API key kept in an HttpOnly, SameSite=Strict session
cookie (never in a URL), checked against the database on every page like a bearer token, so a
revoked key is signed out at once. Forms that change something (rescore, override) also carry a
CSRF token derived from the key: a page of another site cannot post one (issue 16).

The cookie holds the key itself rather than a server-side session id: any worker of any instance
can check it with no session table and no shared secret, and it is exactly as strong as the
`Authorization` header the API takes. It is a session cookie (no expiry), scoped to `/ui`, and
`Secure` when the viewer is served over HTTPS.
"""

from __future__ import annotations

import hashlib
import hmac

from fastapi import Request, Response
from sqlalchemy.orm import Session

from assay.service.auth.actions import authenticate
from assay.store import Caller, Unauthorized

__all__ = [
    "COOKIE",
    "csrf_token",
    "forget_key",
    "keep_key",
    "org_caller_for",
    "signed_in_caller",
    "valid_csrf",
]

COOKIE = "assay_viewer"


def signed_in_caller(request: Request, session: Session) -> Caller | None:
    """The org caller whose key the cookie holds; None when absent, unknown, revoked or not an org key."""
    return org_caller_for(session, request.cookies.get(COOKIE))


def org_caller_for(session: Session, key: str | None) -> Caller | None:
    """The org caller of `key`, or None (absent, unknown, revoked, or not an organization key)."""
    if not key:
        return None
    try:
        caller = authenticate(session, f"Bearer {key}")
    except Unauthorized:
        return None
    return caller if caller.kind == "org" else None


def keep_key(request: Request, response: Response, key: str) -> None:
    response.set_cookie(
        COOKIE, key, httponly=True, samesite="strict", path="/ui", secure=request.url.scheme == "https"
    )


def forget_key(response: Response) -> None:
    response.delete_cookie(COOKIE, path="/ui")


def csrf_token(request: Request) -> str:
    key = request.cookies.get(COOKIE, "")
    return hmac.new(key.encode(), b"assay-viewer-form", hashlib.sha256).hexdigest()


def valid_csrf(request: Request, sent: str | None) -> bool:
    return bool(sent) and hmac.compare_digest(csrf_token(request), sent or "")
