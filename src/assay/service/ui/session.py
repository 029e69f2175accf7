"""Signing in to the viewer: an organization API key kept in an HttpOnly, SameSite=Strict session
cookie (never in a URL), checked against the database on every page like a bearer token, so a
revoked key is signed out at once. Forms that change something (rescore, override) also carry a
CSRF token derived from the key: a page of another site cannot post one. Signing in
and out have no key to derive one from yet, so they take posts from the viewer's own pages only
(`from_this_site`): another site could otherwise sign a browser in with a key of its choosing
(login CSRF), and what the victim then does lands in the attacker's organization.

The cookie holds the key itself rather than a server-side session id: any worker of any instance
can check it with no session table and no shared secret, and it is exactly as strong as the
`Authorization` header the API takes. It is a session cookie (no expiry), scoped to `/ui`, and
`Secure` when the viewer is served over HTTPS.
"""

from __future__ import annotations

import hashlib
import hmac
from urllib.parse import urlsplit

from fastapi import Request, Response
from sqlalchemy.orm import Session

from assay.service.auth.actions import authenticate
from assay.store import Caller, Unauthorized

__all__ = [
    "COOKIE",
    "csrf_token",
    "forget_key",
    "from_this_site",
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


_DEFAULT_PORTS = (":80", ":443")


def _authority(netloc: str) -> str:
    """`host[:port]` as compared: lower case, without a default port (the scheme is left out, so
    a TLS-terminating proxy that forwards plain http does not make every post cross-site)."""
    text = netloc.strip().lower()
    for port in _DEFAULT_PORTS:
        if text.endswith(port):
            return text.removesuffix(port)
    return text


def from_this_site(request: Request) -> bool:
    """Whether a form post comes from a page of this viewer, by what the browser says.

    `Sec-Fetch-Site` other than `same-origin` (or `none`: typed by the user) is refused, and an
    `Origin` (else a `Referer`) must name the host the request was sent to (its `Host`, or
    `ASSAY_PUBLIC_HOST`); `Origin: null` (a sandboxed frame, a redirect from elsewhere) names
    none. A post with none of the three is no browser's cross-site post (browsers send `Origin`
    with every cross-origin POST) and is taken, as API clients and scripts send it."""
    fetch_site = request.headers.get("sec-fetch-site")
    if fetch_site is not None and fetch_site.strip().lower() not in ("same-origin", "none"):
        return False
    source = request.headers.get("origin") or request.headers.get("referer")
    if source is None:
        return True
    parts = urlsplit(source.strip())
    if parts.scheme not in ("http", "https") or not parts.netloc:
        return False
    hosts = {_authority(request.headers.get("host", ""))}
    public = getattr(getattr(request.app.state, "settings", None), "public_host", None)
    if public:
        hosts.add(_authority(urlsplit(public).netloc if "://" in public else public))
    return _authority(parts.netloc) in hosts
