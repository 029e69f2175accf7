"""The viewer in a real browser (issue 16): Playwright for Python driving Debian's Chromium signs in,
opens a run, drills down to a failing criterion, reads its expected and actual values, opens the
event it judged, and compares two runs. `ASSAY_SCREENSHOTS=docs/img` keeps a screenshot of each
page (how the ones in docs/viewer.md were made)."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.conftest import launched_chromium, needs_chromium
from tests.service.conftest import Server

from .test_viewer import finish_run, make_viewer_benchmark

pytestmark = needs_chromium


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    with launched_chromium() as launched:
        yield launched


def _shot(page: Any, name: str, tmp_path: Path) -> None:
    folder = Path(os.environ.get("ASSAY_SCREENSHOTS") or tmp_path)
    folder.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(folder / f"viewer-{name}.png"), full_page=True)


def test_drill_down_and_compare_in_chromium(
    server: Server,
    api: httpx.Client,
    browser: Any,
    tmp_path: Path,
) -> None:
    if server.backend != "sqlite":
        pytest.skip("one browser walk is enough; the pages are the same on PostgreSQL")
    benchmark = make_viewer_benchmark(api)
    first = finish_run(server, api, benchmark, agent="front-desk-agent v1")
    second = finish_run(server, api, benchmark, agent="front-desk-agent v2")
    context = browser.new_context(viewport={"width": 1400, "height": 900})
    page = context.new_page()

    page.goto(f"{server.url}/ui/runs")
    assert "/ui/login" in page.url
    page.get_by_label("Organization API key").fill(server.org_key)
    _shot(page, "sign-in", tmp_path)
    page.get_by_role("button", name="Sign in").click()
    page.wait_for_url("**/ui/runs")
    assert server.org_key not in page.url
    cookie = next(c for c in context.cookies() if c["name"] == "assay_viewer")
    assert cookie["httpOnly"] and cookie["sameSite"] == "Strict"
    assert page.evaluate("document.cookie") == ""  # scripts cannot read the key
    _shot(page, "runs", tmp_path)

    page.get_by_role("link", name=first.run_id).click()
    page.get_by_role("heading", name="Task runs").wait_for()
    _shot(page, "run", tmp_path)
    page.get_by_role("link", name="task 0").click()

    failing = page.get_by_role("article", name="appointment booked with Dr. Rivera")
    assert "failed" in failing.inner_text()
    cells = failing.get_by_role("row").filter(has_text="participant.0.actor.display").inner_text()
    assert "Dr. Rivera" in cells and "Dr. Lee" in cells and "differs" in cells
    _shot(page, "task-run", tmp_path)

    failing.get_by_role("link", name="event").first.click()
    judged = page.locator(".event.judged").first
    judged.locator("summary").click()
    assert "Dr. Lee" in judged.inner_text()

    page.goto(f"{server.url}/ui/runs/{first.run_id}")
    page.get_by_label("Compare with run").select_option(second.run_id)
    page.get_by_role("button", name="Compare").click()
    page.get_by_role("heading", name="Per task and criterion").wait_for()
    assert "within the noise" in page.content()
    _shot(page, "compare", tmp_path)

    page.get_by_role("button", name="Sign out").click()
    page.goto(f"{server.url}/ui/runs/{first.run_id}")
    assert "/ui/login" in page.url
    context.close()
