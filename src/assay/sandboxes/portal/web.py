"""The web portal: server-rendered pages a browser agent — or a person — can use.

Jinja2 templates, plain HTML forms, no JavaScript. Pages: sign in, member lookup with the
eligibility summary, the prior-authorization form with inline errors, a request's status page,
the list of requests, sign out. Every input has a `<label>` and every button text, so agents
that find their way by accessible names (Playwright's `get_by_label`) and screen readers both can.

Every POST checks the session's CSRF token first (403 without it); wrong passwords slow down their
source and session (`throttle.py`), never the portal's sign-in as a whole. The session cookie is
HttpOnly, SameSite=Lax, and `Secure` when the request came over https. The pages write through
`actions`, the same code as the REST surface, and each request is one `portal_request` event; a
form submission's event carries the row as REST would have received it (never a password).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Coroutine, Mapping
from pathlib import Path
from typing import Any

from fastapi import APIRouter, Depends, Request
from fastapi.responses import HTMLResponse, RedirectResponse, Response
from fastapi.routing import APIRoute
from jinja2 import Environment, FileSystemLoader, select_autoescape
from starlette.concurrency import run_in_threadpool

from assay.sandboxes.portal import actions, sessions
from assay.sandboxes.portal.access import PortalSurface
from assay.sandboxes.portal.members import BENEFIT_COLUMNS, look_up
from assay.sandboxes.portal.store import StoreHead, rows_of
from assay.sandboxes.portal.throttle import source_key
from assay.store import DomainError, Invalid, NotFound, utcnow

__all__ = ["COOKIE", "portal_web_router"]

COOKIE = "assay_portal"
_TEMPLATES = Environment(
    loader=FileSystemLoader(Path(__file__).parent / "templates"),
    autoescape=select_autoescape(["html"]),
    auto_reload=False,
)
_FORM_FIELDS = {
    "patient": "member_id",
    "patient.member_id": "member_id",
    "patient.birth_date": "birth_date",
    "patient.name": "patient_name",
    "provider": "provider_npi",
    "provider.npi": "provider_npi",
    "provider.name": "provider_name",
}
"""Row field (as `Invalid` names it) → the form input that shows the error."""
_NOT_RECORDED = frozenset({"password", "csrf_token"})


class _Page:
    """One request's context: the portal, its store head, the session and the reply."""

    store: StoreHead
    """Set by `_open`, before any handler reads it."""

    def __init__(self, surface: PortalSurface, request: Request):
        self.surface = surface
        self.request = request
        self.base = surface.base_path.rstrip("/")
        self.session: sessions.WebSession | None = None
        self.names: dict[str, str] = {}
        self.set_cookie: str | None = None
        self.record_request: bytes = b""
        self.record_response: bytes = b""

    def render(self, template: str, status: int = 200, **context: Any) -> HTMLResponse:
        values = {
            "base": self.base,
            "csrf": self.session.csrf if self.session else "",
            "signed_in": bool(self.session and self.session.signed_in),
            "payer_name": self.names.get(self.session.slug if self.session else "") or "Payer",
            **context,
        }
        return HTMLResponse(_TEMPLATES.get_template(template).render(**values), status_code=status)

    def redirect(self, to: str) -> RedirectResponse:
        return RedirectResponse(self.base + to, status_code=303)

    def finish(self, response: Response) -> Response:
        if self.set_cookie is not None:
            response.set_cookie(
                COOKIE, self.set_cookie, path=self.base + "/", httponly=True, samesite="lax",
                secure=self.request.url.scheme == "https",
            )  # fmt: skip
        path = self.request.url.path + (f"?{self.request.url.query}" if self.request.url.query else "")
        self.surface.record(
            self.request.method, path, response.status_code, self.record_request, self.record_response
        )
        return response


def _open(page: _Page, *, create: bool) -> None:
    """Load the store head and the session (a new one when `create` and the cookie names none).

    Read on the read engine; only a new session is written, in a transaction of its own: it
    depends on nothing read here (a random token), so nothing can change between the two."""
    with page.surface.read_engine.connect() as conn:
        page.store = actions.open_store(conn, page.surface.playground_id)
        page.names = actions.payer_names(conn, page.store)
        token = page.request.cookies.get(COOKIE)
        page.session = sessions.find_session(conn, page.surface.playground_id, token)
    if page.session is None and create:
        with page.surface.engine.begin() as conn:
            page.session = sessions.new_session(conn, page.surface.playground_id)
        page.set_cookie = page.session.token


def _form_values(form: Mapping[str, Any]) -> dict[str, str]:
    return {key: str(value) for key, value in form.items() if isinstance(value, str)}


def _forbidden(page: _Page) -> Response:
    return page.render(
        "message.html", 403, title="Form refused",
        message="This form was sent without its security token (CSRF), or the token has expired. "
        "Open the page again and resubmit.",
    )  # fmt: skip


class _Refused(Exception):
    """A page's dependency answered the request itself (a refused form, a redirect to sign in)."""

    def __init__(self, response: Response):
        super().__init__(response.status_code)
        self.response = response


class _PageRoute(APIRoute):
    """A route whose dependencies may answer for it by raising `_Refused`."""

    def get_route_handler(self) -> Callable[[Request], Coroutine[Any, Any, Response]]:
        handler = super().get_route_handler()

        async def answer(request: Request) -> Response:
            try:
                return await handler(request)
            except _Refused as refused:
                return refused.response

        return answer


def portal_web_router(surface: Callable[..., PortalSurface]) -> APIRouter:
    """The pages over the portal `surface` resolves (a FastAPI dependency).

    A handler names what it needs and its dependencies check it, in the order declared:
    `Posted` (the form, refused 403 without the session's CSRF token) before `SignedIn` (the page,
    or a redirect to the sign-in form)."""
    router = APIRouter(tags=["portal web"], include_in_schema=False, route_class=_PageRoute)

    def opened(request: Request, portal: PortalSurface = Depends(surface)) -> _Page:
        page = _Page(portal, request)
        _open(page, create=False)
        return page

    def with_session(request: Request, portal: PortalSurface = Depends(surface)) -> _Page:
        page = _Page(portal, request)
        _open(page, create=True)
        return page

    async def posted(page: _Page = Depends(opened)) -> dict[str, str]:
        values = _form_values(await page.request.form())
        page.record_request = json.dumps({k: v for k, v in values.items() if k not in _NOT_RECORDED}).encode()
        if not sessions.csrf_matches(page.session, values.get("csrf_token")):
            raise _Refused(await run_in_threadpool(page.finish, _forbidden(page)))
        return values

    def signed_in(page: _Page = Depends(opened)) -> _Page:
        if not (page.session and page.session.signed_in):
            raise _Refused(page.finish(page.redirect("/login")))
        return page

    Page, NewSession, Posted, SignedIn = (
        Depends(opened), Depends(with_session), Depends(posted), Depends(signed_in)
    )  # fmt: skip

    @router.get("")
    @router.get("/")
    def home(page: _Page = Page) -> Response:
        return page.finish(page.redirect("/members" if page.session and page.session.signed_in else "/login"))

    @router.get("/login")
    def login_form(page: _Page = NewSession) -> Response:
        if page.session and page.session.signed_in:
            return page.finish(page.redirect("/members"))
        return page.finish(_login_page(page, "", None))

    @router.post("/login")
    async def login(values: dict[str, str] = Posted, page: _Page = Page) -> Response:
        return await run_in_threadpool(_sign_in, page, values)

    @router.post("/logout")
    async def logout(values: dict[str, str] = Posted, page: _Page = Page) -> Response:
        def work() -> Response:
            with page.surface.engine.begin() as conn:
                sessions.end_session(conn, page.session.token)  # type: ignore[union-attr]
            page.session = None
            response = page.redirect("/login")
            response.delete_cookie(COOKIE, path=page.base + "/")
            return page.finish(response)

        return await run_in_threadpool(work)

    @router.get("/members")
    def members_form(page: _Page = SignedIn) -> Response:
        return page.finish(_members_page(page, {}, None, None))

    @router.post("/members")
    async def members_lookup(values: dict[str, str] = Posted, page: _Page = SignedIn) -> Response:
        return await run_in_threadpool(_look_up, page, values)

    @router.get("/prior-auth")
    def prior_auth_list(page: _Page = SignedIn) -> Response:
        slug = page.session.slug  # type: ignore[union-attr]
        with page.surface.read_engine.connect() as conn:
            rows = [s.row for s in rows_of(conn, page.surface.playground_id, slug, "prior_auth_requests")]
        rows.reverse()
        return page.finish(
            page.render("priorauth_list.html", title="Prior authorization requests", rows=rows)
        )

    @router.get("/prior-auth/new")
    def prior_auth_form(page: _Page = SignedIn) -> Response:
        given = {k: v for k, v in page.request.query_params.items() if k in ("member_id", "birth_date")}
        return page.finish(_form_page(page, given, {}))

    @router.post("/prior-auth")
    async def prior_auth_submit(values: dict[str, str] = Posted, page: _Page = SignedIn) -> Response:
        return await run_in_threadpool(_submit, page, values)

    @router.get("/prior-auth/{request_id}")
    def prior_auth_status(request_id: str, page: _Page = SignedIn) -> Response:
        slug = page.session.slug  # type: ignore[union-attr]
        try:
            with page.surface.read_engine.connect() as conn:
                row = actions.get_row(conn, page.store, slug, "prior_auth_requests", request_id).row
        except NotFound:
            return page.finish(
                page.render(
                    "message.html", 404, title="Not found", message=f"No prior authorization {request_id}."
                )
            )
        return page.finish(
            page.render("priorauth_status.html", title=f"Prior authorization {request_id}", row=row)
        )

    return router


def _portals(page: _Page) -> list[tuple[str, str]]:
    return [(slug, page.names.get(slug) or slug or "Default portal") for slug in sorted(page.store.keys)]


def _login_page(page: _Page, username: str, message: str | None, status: int = 200) -> HTMLResponse:
    return page.render(
        "login.html", status, title="Sign in", username=username, message=message, portals=_portals(page)
    )


def _throttle_keys(page: _Page) -> list[str]:
    """What wrong passwords count against: the client's address, as the server resolved it (the
    peer, or a trusted proxy's `X-Forwarded-For`), and the session; each within this portal."""
    where = page.surface.playground_id
    client = page.request.client
    keys = [f"{where} source {source_key(client.host if client else None)}"]
    if page.session is not None:
        keys.append(f"{where} session {sessions.session_key(page.session)}")
    return keys


def _sign_in(page: _Page, values: dict[str, str]) -> Response:
    username = values.get("username", "")
    throttle, keys = page.surface.sign_in, _throttle_keys(page)
    wait = throttle.wait(keys) if throttle else 0
    if wait:  # refused unchecked: a guess made now tells nothing, and does not count
        message = f"Too many failed sign-in attempts from here: try again in {wait} s."
        response = _login_page(page, username, message, 429)
        response.headers["Retry-After"] = str(wait)
        return page.finish(response)
    portals = [slug for slug, _ in _portals(page)]
    slug = values.get("portal") or (portals[0] if portals else "")
    if slug not in portals:
        slug = portals[0] if portals else ""
    with page.surface.engine.begin() as conn:
        session = sessions.sign_in(
            conn, page.surface.playground_id, page.session,  # type: ignore[arg-type]
            page.surface.credentials, username, values.get("password", ""), slug,
        )  # fmt: skip
    if session is not None:
        if throttle:
            throttle.succeeded(keys)
        page.session, page.set_cookie = session, session.token
        return page.finish(page.redirect("/members"))
    delay = throttle.failed(keys) if throttle else 0
    message = "Wrong username or password."
    if delay:
        message += f" Too many failed attempts from here: try again in {delay} s."
    response = _login_page(page, username, message, 401)
    if delay:
        response.headers["Retry-After"] = str(delay)
    return page.finish(response)


def _members_page(page: _Page, values: Mapping[str, str], member: Any, message: str | None) -> HTMLResponse:
    return page.render(
        "members.html", 200 if message is None else 404, title="Member lookup",
        member_id=values.get("member_id", ""), birth_date=values.get("birth_date", ""),
        member=member, message=message, columns=BENEFIT_COLUMNS,
    )  # fmt: skip


def _look_up(page: _Page, values: dict[str, str]) -> Response:
    slug = page.session.slug if page.session else ""
    with page.surface.read_engine.connect() as conn:
        patients = [s.row for s in rows_of(conn, page.surface.playground_id, slug, "patients")]
        payer = actions.payer_for(conn, page.store, slug)
    found = look_up(
        payer, patients, values.get("member_id", ""), values.get("birth_date", ""), utcnow().date()
    )
    if isinstance(found, str):
        return page.finish(_members_page(page, values, None, found))
    return page.finish(_members_page(page, values, found, None))


def _form_page(page: _Page, values: Mapping[str, str], errors: Mapping[str, list[str]]) -> HTMLResponse:
    return page.render(
        "priorauth_form.html", 422 if errors else 200, title="New prior authorization request",
        values=values, errors=errors,
    )  # fmt: skip


def _row_of(values: Mapping[str, str]) -> dict[str, Any]:
    """The form as the REST body of the same submission (empty optional fields left out)."""
    given = {key: value.strip() for key, value in values.items()}
    patient = {"member_id": given.get("member_id", "")}
    provider = {"npi": given.get("provider_npi", "")}
    if given.get("birth_date"):
        patient["birth_date"] = given["birth_date"]
    if given.get("patient_name"):
        patient["name"] = given["patient_name"]
    if given.get("provider_name"):
        provider["name"] = given["provider_name"]
    row: dict[str, Any] = {
        "patient": patient,
        "provider": provider,
        "procedure_code": given.get("procedure_code", ""),
    }
    codes = [code.strip() for code in given.get("diagnosis_codes", "").split(",") if code.strip()]
    if codes:
        row["diagnosis_codes"] = codes
    if given.get("service_date"):
        row["service_date"] = given["service_date"]
    return row


def _submit(page: _Page, values: dict[str, str]) -> Response:
    row = _row_of(values)
    page.record_request = json.dumps(row).encode()
    slug = page.session.slug if page.session else ""
    try:
        with page.surface.engine.begin() as conn:
            stored = actions.create_row(conn, page.surface.playground_id, slug, "prior_auth_requests", row)
    except Invalid as exc:
        errors: dict[str, list[str]] = {}
        for key, messages in exc.details.items():
            errors.setdefault(_FORM_FIELDS.get(key, key), []).extend(messages)
        return page.finish(_form_page(page, values, errors))
    except DomainError as exc:
        return page.finish(page.render("message.html", 409, title="Not submitted", message=exc.message))
    page.record_response = json.dumps(stored).encode()
    return page.finish(page.redirect(f"/prior-auth/{stored['request_id']}"))
