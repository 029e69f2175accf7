"""The web portal driven by a real browser: Playwright for Python on Debian's `chromium`.

A scripted browser agent finds its way by labels and button names only (as an accessibility-tree
agent would): signs in with the task run's portal credentials, looks a member up, submits a prior
authorization through the form (once with an inline validation error), reads the determination,
signs out; `complete` then scores the rows the form wrote. Sign-in, CSRF tokens and wrong
passwords over plain HTTP: `test_web_sign_in.py`.

Set `ASSAY_PORTAL_SCREENSHOTS=<dir>` to keep a screenshot of each page (docs/img/ is made so).
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.conftest import CHROMIUM, launched_chromium, needs_chromium
from tests.service.builders import ok
from tests.service.conftest import Server

from .world import MRI_APPROVED, Started, complete, start_portal_task

pytestmark = needs_chromium
SHOTS = os.environ.get("ASSAY_PORTAL_SCREENSHOTS")

if Path(CHROMIUM).exists():
    from playwright.sync_api import Browser, Page, expect


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    with launched_chromium() as launched:
        yield launched


@pytest.fixture
def page(browser: Browser) -> Iterator[Page]:
    context = browser.new_context(viewport={"width": 1100, "height": 800})
    context.set_default_timeout(15_000)
    yield context.new_page()
    context.close()


def _shot(page: Page, name: str) -> None:
    if SHOTS:
        Path(SHOTS).mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(Path(SHOTS) / f"portal-{name}.png"), full_page=True)


def _sign_in(page: Page, started: Started) -> None:
    page.goto(started.web + "/")
    expect(page.get_by_role("heading", name="Sign in")).to_be_visible()
    _shot(page, "1-sign-in")
    page.get_by_label("Username").fill(started.credentials["username"])
    page.get_by_label("Password").fill(started.credentials["password"])
    page.get_by_role("button", name="Sign in").click()
    expect(page.get_by_role("heading", name="Member lookup")).to_be_visible()


def _submit_prior_auth(page: Page, procedure_code: str, *, shots: bool = False) -> str:
    """From the member lookup page: find Ann Lee, open the form from her summary, submit."""
    page.get_by_label("Member ID").fill("M1001")
    page.get_by_label("Date of birth").fill("1980-04-02")
    page.get_by_role("button", name="Look up member").click()
    expect(page.get_by_role("heading", name="Eligibility summary")).to_be_visible()
    expect(page.get_by_text("Acme Gold PPO")).to_be_visible()
    if shots:
        _shot(page, "2-eligibility")
    page.get_by_role("link", name="Request prior authorization for this member").click()
    expect(page.get_by_label("Member ID (required)")).to_have_value("M1001")
    page.get_by_label("Provider NPI (required)").fill("1234567893")
    page.get_by_role("button", name="Submit prior authorization").click()
    expect(page.get_by_role("alert")).to_contain_text("not submitted")
    expect(page.locator("#procedure_code_error")).to_have_text("required")
    expect(page.get_by_label("Procedure code (CPT/HCPCS) (required)")).to_have_attribute(
        "aria-invalid", "true"
    )
    if shots:
        _shot(page, "3-form-errors")
    page.get_by_label("Procedure code (CPT/HCPCS) (required)").fill(procedure_code)
    page.get_by_label("Diagnosis codes (ICD-10)").fill("G43.909")
    page.get_by_label("Service date").fill("2026-12-01")
    page.get_by_role("button", name="Submit prior authorization").click()
    expect(page.get_by_role("heading", name=re.compile("Prior authorization PA"))).to_be_visible()
    if shots:
        _shot(page, "4-status")
    return page.locator("#determination").inner_text()


def test_browser_agent_submits_a_prior_auth_and_passes(server: Server, api: httpx.Client, page: Page) -> None:
    started = start_portal_task(server, api, [MRI_APPROVED])
    _sign_in(page, started)
    determination = _submit_prior_auth(page, "70551", shots=True)
    assert determination.lower() == "approved"
    auth_number = page.locator("#auth_number").inner_text()
    assert auth_number.startswith("AUTH")
    page.get_by_role("link", name="Prior authorizations").click()
    expect(page.get_by_role("cell", name=auth_number)).to_be_visible()
    _shot(page, "5-requests")
    page.get_by_role("button", name="Sign out").click()
    expect(page.get_by_role("heading", name="Sign in")).to_be_visible()
    page.goto(started.web + "/members")
    expect(page.get_by_role("heading", name="Sign in")).to_be_visible()

    with started.agent() as agent:  # the page wrote the same row REST reads
        rows = ok(agent.get(f"{started.portal}/prior_auth_requests"))["data"]
    assert [(r["procedure_code"], r["auth_number"]) for r in rows] == [("70551", auth_number)]
    result = complete(started)
    assert (result["verdict"], result["score"]) == ("pass", 1), result
    events = ok(api.get(f"/task-runs/{started.task_run_id}/events", params={"limit": 100}))["data"]
    posts = [e for e in events if e["type"] == "portal_request" and e["method"] == "POST"]
    submitted = [e for e in posts if e["path"].endswith("/prior-auth") and e["status"] == 303]
    assert submitted[0]["request"]["procedure_code"] == "70551"
    assert all("password" not in str(e["request"]) for e in posts)
    page.goto(started.web + "/login")
    assert "no traffic" in page.content()


def test_wrong_procedure_code_fails_naming_the_field(server: Server, api: httpx.Client, page: Page) -> None:
    started = start_portal_task(server, api, [MRI_APPROVED])
    _sign_in(page, started)
    assert _submit_prior_auth(page, "27447").lower() == "denied"
    result = complete(started)
    assert result["verdict"] == "partial", result  # provider.npi holds; procedure_code and status do not
    evidence = result["checks"][0]["evidence"]["assertionResults"]
    failed = {entry["path"]: entry["actual"] for entry in evidence if not entry["passed"]}
    assert failed == {"procedure_code": "27447", "status": "denied"}
