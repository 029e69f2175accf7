"""Signing in to the web portal over HTTP: wrong passwords slow down their own source and session,
never the task run's portal as a whole, and the session cookie is `Secure` behind https.

Every client here is a real socket to the real server, each bound to its own loopback address
(127.0.0.2, 127.0.0.3, …: all of 127/8 is the loopback on Linux), so the server sees distinct
client addresses exactly as it would distinct hosts; no header is needed to tell them apart.
"""

from __future__ import annotations

import re
import time
from collections.abc import Iterator
from contextlib import contextmanager

import httpx

from assay.sandboxes.portal.throttle import source_key
from tests.service.builders import error, ok
from tests.service.conftest import Server, serving

from .world import MRI_APPROVED, Started, start_portal_task

FREE_FAILURES = 5
"""`ASSAY_PORTAL_SIGN_IN_FREE_FAILURES`'s default."""


@contextmanager
def _browser(started: Started, source: str, server: Server | None = None) -> Iterator[httpx.Client]:
    """A cookie-keeping client of the web portal whose connections come from `source` (to
    `server`, another app on the same database, when given)."""
    base = (server or started.server).url + started.body["credentials"]["portal"]["portal_url"]
    transport = httpx.HTTPTransport(local_address=source)
    with httpx.Client(base_url=base, timeout=30, transport=transport) as client:
        yield client


def _csrf(client: httpx.Client) -> str:
    form = client.get("/login")
    assert form.status_code == 200, form.text
    found = re.search(r'name="csrf_token" value="([^"]+)"', form.text)
    assert found is not None
    return found.group(1)


def _sign_in(client: httpx.Client, username: str, password: str, **headers: str) -> httpx.Response:
    fields = {"username": username, "password": password, "csrf_token": _csrf(client)}
    return client.post("/login", data=fields, headers=headers)


def test_a_stranger_hammering_sign_in_never_locks_the_agent_out(server: Server, api: httpx.Client) -> None:
    """Anyone who knows a task run's id can reach its portal's sign-in form. A stranger's wrong
    passwords slow the stranger's own address down (429 + Retry-After, with or without a fresh
    session, whatever X-Forwarded-For it claims from an address that is no trusted proxy), and
    the agent, from its own address, signs in with its credentials meanwhile. (A 30 s first wait
    keeps the test's timing out of it; the default number of free failures is kept.)"""
    started = start_portal_task(server, api, [MRI_APPROVED])
    username, password = started.credentials["username"], started.credentials["password"]
    with serving(server, surface_settings={"portal": {"sign_in_backoff": 30.0}}) as slow:
        with _browser(started, "127.0.0.2", slow) as stranger:
            statuses = [_sign_in(stranger, username, f"guess-{i}").status_code for i in range(FREE_FAILURES)]
            assert statuses == [401] * FREE_FAILURES
            slowed = _sign_in(stranger, username, "guess-again")
            assert slowed.status_code == 401 and slowed.headers["Retry-After"] == "30"
            refused = _sign_in(stranger, username, password, **{"X-Forwarded-For": "203.0.113.9"})
            assert refused.status_code == 429 and 1 <= int(refused.headers["Retry-After"]) <= 30
            assert "try again in" in refused.text
            assert "assay_portal" not in refused.headers.get("set-cookie", "")  # no signed-in session
            stranger.cookies.clear()  # a fresh session from the same address waits too
            assert _sign_in(stranger, username, password).status_code == 429

        with _browser(started, "127.0.0.3", slow) as agent:
            signed_in = _sign_in(agent, username, password)
            assert signed_in.status_code == 303 and signed_in.headers["location"].endswith("/members")
            assert agent.get("/members").status_code == 200


def test_a_session_waits_wherever_it_comes_from_and_the_wait_ends(server: Server, api: httpx.Client) -> None:
    """A client that keeps its session but changes address is still the session it was. Each
    failure past the free ones doubles the wait up to its cap (`ASSAY_PORTAL_SIGN_IN_FREE_FAILURES=2`,
    `ASSAY_PORTAL_SIGN_IN_BACKOFF=2`, `…_BACKOFF_MAX=3`: 2 s, then 3 s where 4 s was due); the
    wait ends, and the right password then works."""
    started = start_portal_task(server, api, [MRI_APPROVED])
    username, password = started.credentials["username"], started.credentials["password"]
    changes = {"sign_in_free_failures": 2, "sign_in_backoff": 2.0, "sign_in_backoff_max": 3.0}
    with serving(server, surface_settings={"portal": changes}) as other:
        with _browser(started, "127.0.0.4", other) as first:
            answers = [_sign_in(first, username, f"guess-{i}") for i in range(3)]
            assert [a.status_code for a in answers] == [401, 401, 401]
            assert [a.headers.get("Retry-After") for a in answers] == [None, None, "2"]
            session = dict(first.cookies)
        with _browser(started, "127.0.0.5", other) as moved:
            moved.cookies.update(session)
            assert _sign_in(moved, username, password).status_code == 429
            time.sleep(2.2)
            again = _sign_in(moved, username, "guess-more")
            assert again.status_code == 401 and again.headers["Retry-After"] == "3"
            assert _sign_in(moved, username, password).status_code == 429
            time.sleep(3.2)
            assert _sign_in(moved, username, password).status_code == 303


def test_an_ipv6_source_is_its_64_network() -> None:
    """One host is given a whole /64; an IPv4 client as such, mapped into IPv6 or not."""
    assert source_key("2001:db8:1:2:aaaa::1") == source_key("2001:db8:1:2:bbbb::2") == "2001:db8:1:2::/64"
    assert source_key("2001:db8:1:3::1") != source_key("2001:db8:1:2::1")
    assert source_key("::ffff:192.0.2.7") == source_key("192.0.2.7") == "192.0.2.7"


def test_the_portal_cookie_is_secure_behind_https(server: Server, api: httpx.Client) -> None:
    """The request came over https (a TLS-terminating proxy on this host says so with
    X-Forwarded-Proto, which uvicorn honours from the addresses it trusts): the session cookie is
    `Secure`, before and after sign-in, as the viewer's is; over plain http it cannot be."""
    started = start_portal_task(server, api, [MRI_APPROVED])
    username, password = started.credentials["username"], started.credentials["password"]
    with _browser(started, "127.0.0.1") as proxied:
        proxied.headers["X-Forwarded-Proto"] = "https"
        form = proxied.get("/login")
        assert "secure" in form.headers["set-cookie"].lower()
        token = re.search(r'name="csrf_token" value="([^"]+)"', form.text)
        assert token is not None
        # httpx keeps a Secure cookie for https URLs only: send it by hand, as a browser would.
        cookie = form.headers["set-cookie"].split(";", 1)[0]
        fields = {"username": username, "password": password, "csrf_token": token.group(1)}
        signed_in = proxied.post("/login", data=fields, headers={"Cookie": cookie})
        assert signed_in.status_code == 303, signed_in.text
        assert "secure" in signed_in.headers["set-cookie"].lower()
    with _browser(started, "127.0.0.1") as plain:
        assert "secure" not in plain.get("/login").headers["set-cookie"].lower()
    ok(api.get(f"/task-runs/{started.task_run_id}"))


def test_forms_need_their_csrf_token(server: Server, api: httpx.Client) -> None:
    started = start_portal_task(server, api, [MRI_APPROVED])
    right = {"username": started.credentials["username"], "password": started.credentials["password"]}
    with _browser(started, "127.0.0.6") as browser:
        token = _csrf(browser)
        assert browser.post("/login", data=right).status_code == 403
        assert browser.post("/login", data={**right, "csrf_token": "forged"}).status_code == 403
        assert browser.post("/members", data={"member_id": "M1001"}).status_code == 403
        assert browser.post("/logout", data={}).status_code == 403
        assert browser.get("/members").headers["location"].endswith("/login")  # not signed in
        assert browser.post("/login", data={**right, "csrf_token": token}).status_code == 303
        assert browser.post("/members", data={"member_id": "M1001"}).status_code == 403
        assert browser.get("/members").status_code == 200
    with started.agent() as agent:
        rows = ok(agent.get(f"{started.portal}/prior_auth_requests"))["data"]
    assert rows == []
    with httpx.Client(timeout=30) as stranger:
        missing = stranger.get(f"{server.url}/portal/tr_01AAAAAAAAAAAAAAAAAAAAAAAA/login")
        error(missing, 404, "NOT_FOUND")
