"""The history checker of writes racing `complete`, shared by the tests and `bench/soak_clean_cut.py`.

Writers (threads) each tag every write uniquely and write as an agent would, through the public
surface: FHIR REST (a create, a transaction), HL7 over HTTP and over MLLP (a raw TCP socket with
MLLP framing), X12 270 and 276, the files API and SFTP (paramiko), the portal over REST and its
web form, voice turns. `complete` is called while they write. Each answer is sorted:

- acknowledged: 2xx (a 303 for the web form), MSH `AA`;
- refused: the surface's refusal of a write after the capture — 409 naming the phase (FHIR: an
  OperationOutcome), MLLP `AR` with ERR-8 saying why, an SFTP failure status;
- unknown: the connection went away before an answer (SFTP sessions of an ended run are closed):
  the agent was told nothing either way.

A writer stops at its first refusal. The graded state is the task run's state tar.gz read by the
snapshot reader; the rule is `acknowledged ⊆ graded` and `graded ⊆ acknowledged ∪ unknown` (the
tags are the test's own, so nothing seeded carries one), and nothing refused is graded.
"""

from __future__ import annotations

import io
import json
import re
import socket
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import paramiko

from assay.core.state import SandboxState
from assay.formats.hl7 import parse_message
from assay.snapshot import open_snapshot
from tests.sandboxes.x12.requests import claim_status_276, eligibility_270, interchange, subscriber_270

Json = dict[str, Any]

ACKNOWLEDGED, REFUSED, UNKNOWN = "acknowledged", "refused", "unknown"


class Unexpected(Exception):
    """An answer that is neither an acknowledgement nor the surface's refusal (a 500, a 503)."""


@dataclass
class Started:
    """A started task run as its agent sees it."""

    url: str
    token: str
    task_run_id: str
    body: Json

    @property
    def base(self) -> str:
        return f"{self.url}/v1/task-runs/{self.task_run_id}"

    def client(self, **headers: str) -> httpx.Client:
        return httpx.Client(headers={"Authorization": f"Bearer {self.token}", **headers}, timeout=60)


@dataclass
class Surface:
    """One write path: `open` a writer's connection, `write` one tagged write (the tags it stored,
    and its outcome), `close`; `graded` finds the tags in a snapshot."""

    name: str
    open: Callable[[Started], Any]
    write: Callable[[Any, Started, str, int], tuple[str, list[str]]]
    graded: Callable[[SandboxState], str]
    close: Callable[[Any], None] = lambda _: None
    writers: int = 24


def _http_outcome(response: httpx.Response, acknowledged: tuple[int, ...]) -> str:
    if response.status_code in acknowledged:
        return ACKNOWLEDGED
    if response.status_code == 409 and "completed/completed" in response.text:
        return REFUSED
    raise Unexpected(f"{response.status_code} {response.text[:300]}")


def _client(started: Started) -> httpx.Client:
    return started.client()


def _close_client(client: httpx.Client) -> None:
    client.close()


# -- FHIR ----------------------------------------------------------------------------------------


def _observation(tag: str) -> Json:
    return {
        "resourceType": "Observation",
        "status": "final",
        "code": {"text": tag},
        "identifier": [{"value": tag}],
    }


def _fhir_create(client: httpx.Client, started: Started, tag: str, _: int) -> tuple[str, list[str]]:
    response = client.post(
        f"{started.base}/fhir/Observation",
        content=json.dumps(_observation(tag)),
        headers={"Content-Type": "application/fhir+json"},
    )
    if response.status_code == 409:  # the FHIR surface refuses with an OperationOutcome
        assert response.json()["resourceType"] == "OperationOutcome", response.text
    return _http_outcome(response, (201,)), [tag]


def _fhir_transaction(client: httpx.Client, started: Started, tag: str, _: int) -> tuple[str, list[str]]:
    tags = [tag + "A", tag + "B"]
    bundle = {
        "resourceType": "Bundle",
        "type": "transaction",
        "entry": [
            {"resource": _observation(one), "request": {"method": "POST", "url": "Observation"}}
            for one in tags
        ],
    }
    response = client.post(
        f"{started.base}/fhir", content=json.dumps(bundle), headers={"Content-Type": "application/fhir+json"}
    )
    return _http_outcome(response, (200,)), tags


def _fhir_graded(state: SandboxState) -> str:
    return json.dumps(state.fhir_search("Observation", {}))


# -- HL7 -----------------------------------------------------------------------------------------


def _adt(facility: str, tag: str) -> str:
    return (
        f"MSH|^~\\&|AGENT|CLINIC|LAB|{facility}|20260301120500||ADT^A08^ADT_A01|{tag}|P|2.5.1\r"
        "EVN|A08|20260301120500\r"
        "PID|1||MRN123^^^HOSP^MR||SMITH^JOHN||19800101|M\r"
    )


def _facility(started: Started) -> str:
    return str(started.body["credentials"]["hl7"]["receiving_facility"])


def _hl7_http(client: httpx.Client, started: Started, tag: str, _: int) -> tuple[str, list[str]]:
    response = client.post(
        f"{started.base}/hl7/outbound",
        content=_adt(_facility(started), tag).encode(),
        headers={"Content-Type": "x-application/hl7-v2+er7"},
    )
    outcome = _http_outcome(response, (200,))
    if outcome == ACKNOWLEDGED:
        code = parse_message(response.text).read("MSA.1").value
        if code != "AA":
            raise Unexpected(f"MSA {code}: {response.text[:300]}")
    return outcome, [tag]


def _mllp_open(started: Started) -> socket.socket:
    hl7 = started.body["credentials"]["hl7"]
    sock = socket.create_connection((hl7["host"], hl7["port"]), timeout=60)
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    return sock


def _mllp(sock: socket.socket, started: Started, tag: str, _: int) -> tuple[str, list[str]]:
    try:
        sock.sendall(b"\x0b" + _adt(_facility(started), tag).encode() + b"\x1c\r")
        answer = b""
        while not answer.endswith(b"\x1c\r"):
            chunk = sock.recv(65536)
            if not chunk:
                return UNKNOWN, [tag]
            answer += chunk
    except OSError:
        return UNKNOWN, [tag]
    ack = parse_message(answer.strip(b"\x0b\x1c\r").decode())
    code, why = ack.read("MSA.1").value, ack.read("ERR.8").value or ""
    if code == "AA":
        return ACKNOWLEDGED, [tag]
    if code == "AR" and "completed/completed" in why:
        return REFUSED, [tag]
    raise Unexpected(f"MSA {code}: {why}")


def _hl7_graded(state: SandboxState) -> str:
    return "\n".join(record.message for record in state.hl7_outbound())


# -- X12 -----------------------------------------------------------------------------------------


def _x12(endpoint: str, body: Callable[[str, int], str]) -> Callable[..., tuple[str, list[str]]]:
    def write(client: httpx.Client, started: Started, tag: str, n: int) -> tuple[str, list[str]]:
        response = client.post(
            f"{started.base}/x12/{endpoint}",
            content=body(tag, n).encode(),
            headers={"Content-Type": "application/edi-x12"},
        )
        return _http_outcome(response, (200,)), [tag]

    return write


def _270(tag: str, n: int) -> str:
    return interchange(
        "270", eligibility_270(subscriber_270("M1001", trace=tag, last="LEE", first="ANN")), control=n
    )


def _276(tag: str, n: int) -> str:
    return interchange("276", claim_status_276(("M1001", tag, "125.00")), control=n)


def _x12_graded(state: SandboxState) -> str:
    return "\n".join(record.request or "" for record in state.x12_records())


# -- files ---------------------------------------------------------------------------------------


def _files_put(client: httpx.Client, started: Started, tag: str, _: int) -> tuple[str, list[str]]:
    response = client.put(f"{started.base}/files/outbox/{tag}.txt", content=tag.encode())
    return _http_outcome(response, (200, 201)), [tag]


def _sftp_open(started: Started) -> paramiko.SFTPClient:
    sftp = started.body["credentials"]["sftp"]
    transport = paramiko.Transport((sftp["host"], sftp["port"]))
    transport.connect(username=sftp["username"], password=sftp["password"])
    client = paramiko.SFTPClient.from_transport(transport)
    assert client is not None
    with suppress(OSError):  # another writer made it
        client.mkdir("outbox")
    return client


def _sftp_put(client: paramiko.SFTPClient, started: Started, tag: str, _: int) -> tuple[str, list[str]]:
    # paramiko swallows the status of the CLOSE that commits an upload: `confirm` (its default)
    # stats the file afterwards, which is how a paramiko agent learns that it was stored.
    try:
        client.putfo(io.BytesIO(tag.encode()), f"outbox/{tag}.txt", confirm=True)
    except (EOFError, paramiko.SSHException):
        return UNKNOWN, [tag]
    except FileNotFoundError:  # the commit was refused (paramiko swallowed the status); not stored
        return REFUSED, [tag]
    except OSError as exc:  # an SFTP status: the server answered, and refused
        if "completed/completed" in str(exc) or "has ended" in str(exc):
            return REFUSED, [tag]
        if "closed" in str(exc).lower():
            return UNKNOWN, [tag]
        raise Unexpected(repr(exc)) from exc
    return ACKNOWLEDGED, [tag]


def _sftp_close(client: paramiko.SFTPClient) -> None:
    transport = client.get_channel().get_transport()  # type: ignore[union-attr]
    client.close()
    transport.close()


def _files_graded(state: SandboxState) -> str:
    return "\n".join(record.path for record in state.files())


# -- portal --------------------------------------------------------------------------------------


def _portal_rest(client: httpx.Client, started: Started, tag: str, _: int) -> tuple[str, list[str]]:
    response = client.post(f"{started.base}/portal/patients", json={"member_id": tag, "name": "Ann Lee"})
    return _http_outcome(response, (201,)), [tag]


@dataclass
class _Browser:
    client: httpx.Client
    csrf: str


_SIGNED_IN: dict[str, tuple[dict[str, str], str]] = {}
_SIGNED_IN_LOCK = threading.Lock()


def _web_open(started: Started) -> _Browser:
    """A browser with the run's one signed-in session (signed in once, its cookie shared)."""
    web = started.url + started.body["credentials"]["portal"]["portal_url"]
    with _SIGNED_IN_LOCK:
        if started.task_run_id not in _SIGNED_IN:
            creds = started.body["credentials"]["portal"]
            with httpx.Client(base_url=web, timeout=60) as browser:
                form = browser.get("/login")
                token = re.search(r'name="csrf_token" value="([^"]+)"', form.text)
                assert token is not None, form.text
                signed = browser.post(
                    "/login",
                    data={
                        "username": creds["username"],
                        "password": creds["password"],
                        "csrf_token": token[1],
                    },
                )
                assert signed.status_code == 303, signed.text
                page = browser.get("/prior-auth/new")
                csrf = re.search(r'name="csrf_token" value="([^"]+)"', page.text)
                assert csrf is not None, page.text
                _SIGNED_IN[started.task_run_id] = (dict(browser.cookies), csrf[1])
        cookies, csrf_token = _SIGNED_IN[started.task_run_id]
    return _Browser(httpx.Client(base_url=web, cookies=cookies, timeout=60), csrf_token)


def _web_submit(browser: _Browser, started: Started, tag: str, _: int) -> tuple[str, list[str]]:
    form = {
        "csrf_token": browser.csrf,
        "member_id": tag,
        "provider_npi": "1234567893",
        "procedure_code": "70551",
        "diagnosis_codes": "G43.909",
    }
    response = browser.client.post("/prior-auth", data=form)
    return _http_outcome(response, (303,)), [tag]


def _web_close(browser: _Browser) -> None:
    browser.client.close()


def _portal_graded(state: SandboxState) -> str:
    rows = [*state.portal_rows("patients"), *state.portal_rows("prior_auth_requests")]
    return json.dumps([row.row for row in rows])


# -- voice ---------------------------------------------------------------------------------------


def _voice(client: httpx.Client, started: Started, tag: str, _: int) -> tuple[str, list[str]]:
    response = client.post(f"{started.base}/voice/turns", json={"speaker": "agent", "text": f"turn {tag}"})
    return _http_outcome(response, (201,)), [tag]


def _voice_graded(state: SandboxState) -> str:
    return "\n".join(turn.text for turn in state.voice_turns())


SURFACES = {
    surface.name: surface
    for surface in (
        Surface("fhir-create", _client, _fhir_create, _fhir_graded, _close_client),
        Surface("fhir-transaction", _client, _fhir_transaction, _fhir_graded, _close_client),
        Surface("hl7-http", _client, _hl7_http, _hl7_graded, _close_client),
        Surface("hl7-mllp", _mllp_open, _mllp, _hl7_graded, lambda sock: sock.close()),
        Surface("x12-270", _client, _x12("270", _270), _x12_graded, _close_client),
        Surface("x12-276", _client, _x12("276", _276), _x12_graded, _close_client),
        Surface("files-api", _client, _files_put, _files_graded, _close_client),
        Surface("files-sftp", _sftp_open, _sftp_put, _files_graded, _sftp_close, writers=8),
        Surface("portal-rest", _client, _portal_rest, _portal_graded, _close_client),
        Surface("portal-web", _web_open, _web_submit, _portal_graded, _web_close),
        Surface("voice", _client, _voice, _voice_graded, _close_client),
    )
}


# -- the race ------------------------------------------------------------------------------------


@dataclass
class History:
    """What the writers were told, and what was graded, by tag."""

    surface: str
    acknowledged: set[str] = field(default_factory=set)
    refused: set[str] = field(default_factory=set)
    unknown: set[str] = field(default_factory=set)
    graded: set[str] = field(default_factory=set)
    problems: list[str] = field(default_factory=list)
    completed: Json = field(default_factory=dict)
    archive: bytes = b""

    def summary(self) -> str:
        return (
            f"{self.surface}: {len(self.acknowledged)} acknowledged, {len(self.graded)} graded, "
            f"{len(self.refused)} refused, {len(self.unknown)} unknown; "
            f"acknowledged but not graded {len(self.acknowledged - self.graded)}, "
            f"graded but not acknowledged {len(self.graded - self.acknowledged - self.unknown)}, "
            f"refused but graded {len(self.refused & self.graded)}"
        )

    def check(self) -> None:
        """The clean cut: what was acknowledged is graded, and nothing else of the writers' is."""
        assert not self.problems, f"{self.summary()}\nunexpected answers: {self.problems[:5]}"
        lost = sorted(self.acknowledged - self.graded)
        assert not lost, f"{self.summary()}\nacknowledged but not graded: {lost[:10]}"
        extra = sorted(self.graded - self.acknowledged - self.unknown)
        assert not extra, f"{self.summary()}\ngraded but never acknowledged: {extra[:10]}"
        assert self.refused, f"{self.summary()}\nno write met the end of the run: the race was not run"


def _writer(
    surface: Surface, started: Started, history: History, prefix: str, n: int, lock: threading.Lock, cap: int
) -> None:
    try:
        session = surface.open(started)
    except Exception as exc:
        with lock:
            history.problems.append(f"writer {n} could not connect: {exc!r}")
        return
    try:
        for i in range(cap):
            tag = f"{prefix}{n:02d}{i:04d}"
            try:
                outcome, tags = surface.write(session, started, tag, n * 10_000 + i + 1)
            except Exception as exc:
                with lock:
                    history.problems.append(f"{tag}: {exc!r}")
                return
            with lock:
                getattr(history, outcome).update(tags)
            if outcome != ACKNOWLEDGED:
                return
    finally:
        with suppress(Exception):
            surface.close(session)


def race(
    surface: Surface,
    started: Started,
    complete: Callable[[], Json],
    state: Callable[[], bytes],
    tmp_path: Path,
    *,
    before: int = 40,
    writers: int | None = None,
    cap: int = 2_000,
    wait: float = 20.0,
) -> History:
    """Run the surface's writers, `complete` once `before` writes were acknowledged, let every
    writer meet the end, and read the graded state from the state tar.gz (`state()`)."""
    history = History(surface.name)
    prefix = "T" + uuid.uuid4().hex[:6].upper()
    lock = threading.Lock()
    threads = [
        threading.Thread(target=_writer, args=(surface, started, history, prefix, n, lock, cap), daemon=True)
        for n in range(writers or surface.writers)
    ]
    for thread in threads:
        thread.start()
    deadline = time.monotonic() + wait
    while len(history.acknowledged) < before and time.monotonic() < deadline and not history.problems:
        time.sleep(0.01)
    history.completed = complete()
    for thread in threads:
        thread.join(60)
    assert not any(thread.is_alive() for thread in threads), "a writer did not finish within 60 s"
    history.archive = state()
    archive = tmp_path / f"{surface.name}-{prefix}.tar.gz"
    archive.write_bytes(history.archive)
    found = re.findall(prefix + r"\d{6}[AB]?", surface.graded(open_snapshot(archive)))
    history.graded = set(found)
    return history


@contextmanager
def started_run(url: str, org_key: str, *, criteria: list[Json] | None = None) -> Iterator[Started]:
    """A one-task benchmark run, its task run started (no datasets: nothing is seeded)."""
    with httpx.Client(base_url=url, headers={"Authorization": f"Bearer {org_key}"}, timeout=60) as api:
        name = uuid.uuid4().hex[:8]
        benchmark = api.post("/benchmarks", json={"name": f"clean cut {name}"}).json()
        task = api.post("/tasks", json={"benchmark_id": benchmark["id"], "name": "write"}).json()
        for i, assertion in enumerate(criteria or []):
            made = api.post(
                "/criteria", json={"task_id": task["id"], "label": f"c{i}", "assertion": assertion}
            )
            assert made.status_code == 201, made.text
        run = api.post("/v1/benchmark-runs", json={"benchmark_id": benchmark["id"]})
        assert run.status_code == 201, run.text
    token, [task_run] = run.json()["bearer_token"], run.json()["task_runs"]
    started = httpx.post(
        f"{url}{task_run['start_url']}", headers={"Authorization": f"Bearer {token}"}, timeout=60
    )
    assert started.status_code == 200, started.text
    yield Started(url, token, task_run["id"], started.json())


def run_race(url: str, org_key: str, surface: Surface, tmp_path: Path, **options: Any) -> History:
    """`race` on a fresh started run of a server at `url`; `complete` with the run token."""
    with started_run(url, org_key) as started:

        def complete() -> Json:
            answer = httpx.post(
                f"{started.base}/complete", headers={"Authorization": f"Bearer {started.token}"}, timeout=120
            )
            assert answer.status_code == 200, answer.text
            return answer.json()  # type: ignore[no-any-return]

        def state() -> bytes:
            answer = httpx.get(
                f"{url}/task-runs/{started.task_run_id}/state",
                headers={"Authorization": f"Bearer {org_key}"},
                timeout=120,
            )
            assert answer.status_code == 200, answer.text
            return answer.content

        return race(surface, started, complete, state, tmp_path, **options)
