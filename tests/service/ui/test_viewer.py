"""The results viewer at `/ui` (issue 16) over HTTP: sign-in with an org key in an HttpOnly
cookie, the three levels of results, evidence as expected vs actual, the trajectory with the
events a criterion judged, compare, rescore and override forms (CSRF), and isolation."""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass

import httpx
import pytest

from tests.service.builders import FAILS, FHIR_BOOKED, PASSES, criterion, make_benchmark, ok
from tests.service.conftest import Server

APPOINTMENT = {
    "resourceType": "Appointment",
    "status": "booked",
    "participant": [
        {"actor": {"display": "Dr. Lee"}, "status": "accepted"},
        {"actor": {"reference": "Patient/john-smith"}, "status": "accepted"},
    ],
}


@dataclass
class Finished:
    run_id: str
    task_run_id: str


def finish_run(server: Server, api: httpx.Client, benchmark_id: str, agent: str = "demo-agent") -> Finished:
    """A run whose agent books an appointment with the wrong doctor, then completes."""
    created = ok(
        api.post("/v1/benchmark-runs", json={"benchmark_id": benchmark_id, "agent": {"name": agent}}), 201
    )
    task_run = created["task_runs"][0]
    with server.client(created["bearer_token"]) as agent_client:
        started = ok(agent_client.post(task_run["start_url"]))
        fhir = started["endpoints"]["fhir"]
        ok(agent_client.post(f"{fhir}/Appointment", json=APPOINTMENT), 201)
        ok(agent_client.get(f"{fhir}/Appointment", params={"status": "booked"}))
        ok(agent_client.post(task_run["complete_url"]))
    return Finished(created["benchmark_run_id"], task_run["id"])


@pytest.fixture
def viewer(server: Server) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=server.url, follow_redirects=False, timeout=60) as client:
        response = client.post("/ui/login", data={"api_key": server.org_key, "next": "/ui/runs"})
        assert response.status_code == 303 and response.headers["location"] == "/ui/runs"
        yield client


@pytest.fixture
def benchmark(api: httpx.Client) -> str:
    return make_viewer_benchmark(api)


def make_viewer_benchmark(api: httpx.Client) -> str:
    """One task: a FHIR booking the agent gets wrong, a phrase it never says, a safety rule it keeps."""
    criteria = [
        criterion(FHIR_BOOKED, label="appointment booked with Dr. Rivera"),
        criterion(FAILS, label="asked for member ID"),
        criterion(PASSES, label="never asked for the SSN"),
    ]
    return make_benchmark(api, [criteria]).benchmark_id


def test_signed_out_pages_go_to_sign_in(server: Server) -> None:
    with httpx.Client(base_url=server.url) as anonymous:
        for path in ("/ui/runs", "/ui/runs/br_x", "/ui/task-runs/tr_x", "/ui/compare?a=1&b=2"):
            response = anonymous.get(path)
            assert response.status_code == 303 and response.headers["location"].startswith(
                "/ui/login?next=/ui/"
            )


def test_sign_in_keeps_the_key_in_an_httponly_samesite_cookie(server: Server) -> None:
    with httpx.Client(base_url=server.url) as client:
        response = client.post("/ui/login", data={"api_key": server.org_key})
        assert response.status_code == 303 and server.org_key not in response.headers["location"]
        cookie = response.headers["set-cookie"]
        assert "HttpOnly" in cookie and "SameSite=strict" in cookie and "Path=/ui" in cookie
        wrong = client.post("/ui/login", data={"api_key": "vk_nope"})
        assert wrong.status_code == 401 and "not a valid organization API key" in wrong.text
        assert 'for="api_key"' in client.get("/ui/login").text


def test_sign_in_and_out_refuse_cross_site_posts(server: Server) -> None:
    """Login CSRF: a page of another site must not sign a browser in with a key of its choosing
    (nor out). What the browser says of the post's source decides; a client that says nothing
    (an API client, a script) is no browser posting cross-site."""
    cross_site = [
        {"Origin": "https://evil.example"},
        {"Referer": "https://evil.example/innocent-page"},
        {"Origin": "null"},
        {"Origin": "https://evil.example", "Referer": f"{server.url}/ui/login"},
        {"Origin": server.url, "Sec-Fetch-Site": "cross-site"},
        {"Origin": server.url.replace("127.0.0.1", "localhost")},
    ]
    with httpx.Client(base_url=server.url) as client:
        for headers in cross_site:
            refused = client.post("/ui/login", data={"api_key": server.org_key}, headers=headers)
            assert refused.status_code == 403, headers
            assert "set-cookie" not in refused.headers and "another site" in refused.text
        own_page = {
            "Origin": server.url,
            "Sec-Fetch-Site": "same-origin",
            "Referer": f"{server.url}/ui/login",
        }
        signed_in = client.post("/ui/login", data={"api_key": server.org_key}, headers=own_page)
        assert signed_in.status_code == 303 and "assay_viewer=" in signed_in.headers["set-cookie"]
        referred = client.post(
            "/ui/login", data={"api_key": server.org_key}, headers={"Referer": f"{server.url}/ui/login"}
        )
        assert referred.status_code == 303
        kept = client.post("/ui/logout", headers={"Origin": "https://evil.example"})
        assert kept.status_code == 403 and "set-cookie" not in kept.headers
        assert client.get("/ui/runs").status_code == 200
        assert client.post("/ui/logout", headers=own_page).status_code == 303


def test_a_solver_key_cannot_sign_in(server: Server, api: httpx.Client) -> None:
    solver = ok(api.post("/solvers", json={"name": "s"}), 201)
    key = ok(api.post(f"/solvers/{solver['id']}/api-keys"), 201)["key"]
    with httpx.Client(base_url=server.url) as client:
        assert client.post("/ui/login", data={"api_key": key}).status_code == 401


def test_runs_list_filters_sorts_and_links(
    server: Server, api: httpx.Client, viewer: httpx.Client, benchmark: str
) -> None:
    finished = finish_run(server, api, benchmark, agent="agent-under-test")
    page = viewer.get("/ui/runs", params={"agent": "agent-under-test", "sort": "score", "order": "asc"})
    assert page.status_code == 200
    assert f'href="/ui/runs/{finished.run_id}"' in page.text and "partial" in page.text
    assert "agent-under-test" in page.text and 'aria-sort="ascending"' in page.text
    empty = viewer.get("/ui/runs", params={"agent": "agent-under-test", "verdict": "pass"})
    assert finished.run_id not in empty.text and "No runs match." in empty.text
    assert viewer.get("/ui/runs", params={"sort": "nonsense"}).status_code == 400


def test_task_run_page_shows_expected_vs_actual_and_the_judged_event(
    server: Server, api: httpx.Client, viewer: httpx.Client, benchmark: str
) -> None:
    finished = finish_run(server, api, benchmark)
    run_page = viewer.get(f"/ui/runs/{finished.run_id}").text
    assert f'href="/ui/task-runs/{finished.task_run_id}"' in run_page and "Task runs" in run_page
    page = viewer.get(f"/ui/task-runs/{finished.task_run_id}").text
    assert "appointment booked with Dr. Rivera" in page
    # The failing field: expected Dr. Rivera, actual Dr. Lee, in one row.
    row = re.search(
        r"<tr class=\"changed\"><td><code>participant\.0\.actor\.display</code>.*?</tr>", page, re.S
    )
    assert row and "Dr. Rivera" in row.group(0) and "Dr. Lee" in row.group(0)
    # The criterion links to the POST that created the appointment, which is marked as judged.
    judged = re.findall(r'<a href="#event-(evt_[^"]+)">', page)
    assert judged and f'class="event judged" id="event-{judged[0]}"' in page
    assert "POST" in page and "Appointment" in page
    assert f"/ui/task-runs/{finished.task_run_id}/state" in page
    state = viewer.get(f"/ui/task-runs/{finished.task_run_id}/state")
    assert state.status_code == 200 and state.headers["content-type"] == "application/gzip"
    whole = viewer.get(f"/ui/events/{judged[0]}")
    assert whole.status_code == 200 and "Dr. Lee" in whole.text


def test_override_and_rescore_forms_need_the_csrf_token(
    server: Server, api: httpx.Client, viewer: httpx.Client, benchmark: str
) -> None:
    finished = finish_run(server, api, benchmark)
    page = viewer.get(f"/ui/task-runs/{finished.task_run_id}").text
    csrf = re.search(r'name="csrf" value="([0-9a-f]+)"', page)
    crun = re.search(r'action="/ui/criterion-runs/(crun_[^/]+)/override"', page)
    assert csrf and crun
    forged = viewer.post(
        f"/ui/criterion-runs/{crun.group(1)}/override", data={"passed": "true", "reason": "x"}
    )
    assert forged.status_code == 403
    assert viewer.post(f"/ui/task-runs/{finished.task_run_id}/rescore").status_code == 403
    body = {"passed": "true", "reason": "doctor names differ only in spelling", "csrf": csrf.group(1)}
    saved = viewer.post(f"/ui/criterion-runs/{crun.group(1)}/override", data=body)
    assert saved.status_code == 303
    assert ok(api.get(f"/criterion-runs/{crun.group(1)}"))["override"]["reason"] == body["reason"]
    again = viewer.post(f"/ui/task-runs/{finished.task_run_id}/rescore", data={"csrf": csrf.group(1)})
    assert again.status_code == 303
    assert "doctor names differ only in spelling" in viewer.get(f"/ui/task-runs/{finished.task_run_id}").text


def test_compare_two_runs(server: Server, api: httpx.Client, viewer: httpx.Client, benchmark: str) -> None:
    first = finish_run(server, api, benchmark)
    second = finish_run(server, api, benchmark)
    assert f'value="{second.run_id}"' in viewer.get(f"/ui/runs/{first.run_id}").text
    page = viewer.get("/ui/compare", params={"a": first.run_id, "b": second.run_id})
    assert page.status_code == 200 and "Paired difference of means (A − B): +0.000" in page.text
    assert "within the noise" in page.text and "asked for member ID" in page.text


def test_another_org_sees_none_of_it(server: Server, api: httpx.Client, benchmark: str) -> None:
    finished = finish_run(server, api, benchmark)
    with httpx.Client(base_url=server.url) as stranger:
        ok_login = stranger.post("/ui/login", data={"api_key": server.new_org_key()})
        assert ok_login.status_code == 303
        assert finished.run_id not in stranger.get("/ui/runs").text
        assert stranger.get(f"/ui/runs/{finished.run_id}").status_code == 404
        assert stranger.get(f"/ui/task-runs/{finished.task_run_id}").status_code == 404
        assert stranger.get(f"/ui/task-runs/{finished.task_run_id}/state").status_code == 404


def test_sign_out_forgets_the_key(server: Server, viewer: httpx.Client) -> None:
    response = viewer.post("/ui/logout")
    assert response.status_code == 303 and 'assay_viewer=""' in response.headers["set-cookie"]
