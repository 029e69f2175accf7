"""REQUEST-SHAPE tests, not verification: the calls each `FhirSpaces` implementation sends, checked
against an httpx `MockTransport` that answers like the documentation says the server answers. No
HAPI, Google Cloud Healthcare API or Medplum server was reachable when these were written; only
`AssayStores` is verified against a real server (`test_external_isolated.py`)."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any
from urllib.parse import parse_qs, parse_qsl, urlencode, urlsplit

import httpx
import pytest

from assay.sandboxes.fhir.external import (
    ExternalFhirFailed,
    FhirForwarder,
    ForwardedRequest,
    GcpFhirStores,
    HapiPartitions,
    IsolatedFhir,
    MedplumProjects,
    TaggedFhir,
)
from assay.sandboxes.fhir.outcomes import FhirError
from assay.sandboxes.fhir.results import FhirResult

Answer = Callable[[httpx.Request], httpx.Response]
ASSAY_BASE = "http://assay.invalid/v1/task-runs/tr_1/fhir"


def _recording(answer: Answer) -> tuple[httpx.Client, list[httpx.Request]]:
    sent: list[httpx.Request] = []

    def handle(request: httpx.Request) -> httpx.Response:
        sent.append(request)
        return answer(request)

    return httpx.Client(transport=httpx.MockTransport(handle)), sent


def _shape(request: httpx.Request) -> tuple[str, str, object]:
    body: object = None
    if request.content:
        text = request.content.decode()
        body = json.loads(text) if text.startswith("{") else parse_qs(text)
    return request.method, str(request.url), body


def test_hapi_partitions_request_shape() -> None:
    client, sent = _recording(lambda request: httpx.Response(200, json={"resourceType": "Parameters"}))
    spaces = HapiPartitions("http://hapi.invalid/fhir/", client, "Bearer admin")
    space = spaces.open("pg_A")
    spaces.close("pg_A", space.saved)
    number = HapiPartitions.partition_id("pg_A")
    assert 0 < number < 2**31 and number == HapiPartitions.partition_id("pg_A")
    assert [_shape(r) for r in sent] == [
        ("POST", "http://hapi.invalid/fhir/DEFAULT/$partition-management-create-partition", {
            "resourceType": "Parameters", "parameter": [
                {"name": "id", "valueInteger": number},
                {"name": "name", "valueCode": "assay-pg_A"},
                {"name": "description", "valueString": "Assay playground pg_A"},
            ]}),
        ("POST", "http://hapi.invalid/fhir/DEFAULT/$partition-management-delete-partition", {
            "resourceType": "Parameters", "parameter": [{"name": "id", "valueInteger": number}]}),
    ]  # fmt: skip
    assert space.base_url == "http://hapi.invalid/fhir/assay-pg_A" and space.saved == {}
    assert all(r.headers["Authorization"] == "Bearer admin" for r in sent)


def test_gcp_fhir_stores_request_shape() -> None:
    dataset = "https://healthcare.invalid/v1/projects/p/locations/l/datasets/d"
    client, sent = _recording(lambda request: httpx.Response(200, json={}))
    spaces = GcpFhirStores(dataset, client, "Bearer ya29.x")
    space = spaces.open("pg_A")
    spaces.close("pg_A", space.saved)
    assert [_shape(r) for r in sent] == [
        ("POST", f"{dataset}/fhirStores?fhirStoreId=assay-pg_A",
         {"version": "R4", "enableUpdateCreate": True, "disableReferentialIntegrity": True}),
        ("DELETE", f"{dataset}/fhirStores/assay-pg_A", None),
    ]  # fmt: skip
    assert space.base_url == f"{dataset}/fhirStores/assay-pg_A/fhir"
    assert space.headers == {"Authorization": "Bearer ya29.x"}


def _medplum(request: httpx.Request) -> httpx.Response:
    path = request.url.path
    if path.endswith("/Project/$init"):
        return httpx.Response(201, json={"resourceType": "Project", "id": "proj-1"})
    if path.endswith("/client"):
        return httpx.Response(201, json={"resourceType": "ClientApplication", "id": "cli-1", "secret": "s"})
    if path == "/oauth2/token":
        return httpx.Response(
            200, json={"access_token": f"tok-{len(request.content)}", "token_type": "Bearer"}
        )
    return httpx.Response(202, json={"resourceType": "OperationOutcome"})


def test_medplum_projects_request_shape() -> None:
    client, sent = _recording(_medplum)
    spaces = MedplumProjects("https://medplum.invalid/fhir/R4", client, "Bearer super")
    space = spaces.open("pg_A")
    spaces.close("pg_A", space.saved)
    shapes = [_shape(r) for r in sent]
    assert shapes[0] == (
        "POST", "https://medplum.invalid/fhir/R4/Project/$init",
        {"resourceType": "Parameters", "parameter": [{"name": "name", "valueString": "assay-pg_A"}]},
    )  # fmt: skip
    assert shapes[1][:2] == ("POST", "https://medplum.invalid/admin/projects/proj-1/client")
    assert shapes[2] == (
        "POST", "https://medplum.invalid/oauth2/token",
        {"grant_type": ["client_credentials"], "client_id": ["cli-1"], "client_secret": ["s"]},
    )  # fmt: skip
    assert shapes[3] == (
        "POST",
        "https://medplum.invalid/fhir/R4/Project/proj-1/$expunge?everything=true",
        None,
    )
    assert [r.headers.get("Authorization") for r in sent] == [
        "Bearer super",
        "Bearer super",
        None,
        "Bearer super",
    ]
    assert space.base_url == "https://medplum.invalid/fhir/R4" and space.headers["Authorization"].startswith(
        "Bearer tok-"
    )
    assert space.saved == {"project_id": "proj-1", "client_id": "cli-1", "client_secret": "s"}


def test_medplum_token_refused_is_renewed_once() -> None:
    tokens = iter(["old", "new"])

    def answer(request: httpx.Request) -> httpx.Response:
        if request.url.path == "/oauth2/token":
            return httpx.Response(200, json={"access_token": next(tokens)})
        if request.headers["Authorization"] == "Bearer old":
            return httpx.Response(401, json={"resourceType": "OperationOutcome"})
        return httpx.Response(200, json={"resourceType": "Patient", "id": "x"})

    client, sent = _recording(answer)
    fhir = IsolatedFhir(MedplumProjects("https://medplum.invalid/fhir/R4", client), client)
    saved = {"project_id": "p", "client_id": "c", "client_secret": "s"}
    fhir._remember("pg_A", fhir.spaces.resume("pg_A", saved))
    result = fhir.forward(ForwardedRequest("pg_A", ASSAY_BASE, "GET", "Patient/x"))
    fhir_requests = [r.headers["Authorization"] for r in sent if r.url.path.endswith("/Patient/x")]
    assert result.status == 200 and fhir_requests == ["Bearer old", "Bearer new"]


def test_isolated_forwarding_maps_urls_both_ways() -> None:
    hapi = "http://hapi.invalid/fhir/assay-pg_A"

    def answer(request: httpx.Request) -> httpx.Response:
        body = {
            "resourceType": "Bundle", "type": "searchset",
            "link": [{"relation": "next", "url": f"{hapi}/Patient?_getpagesoffset=1"}],
            "entry": [{"fullUrl": f"{hapi}/Patient/x", "resource": {"resourceType": "Patient", "id": "x",
                       "link": [{"other": {"reference": f"{hapi}/Patient/y"}}]}}],
        }  # fmt: skip
        return httpx.Response(
            201, json=body, headers={"Location": f"{hapi}/Patient/x/_history/1", "ETag": 'W/"1"'}
        )

    client, sent = _recording(answer)
    fhir = IsolatedFhir(HapiPartitions("http://hapi.invalid/fhir", client), client)
    body = {"resourceType": "Patient", "link": [{"other": {"reference": f"{ASSAY_BASE}/Patient/y"}}]}
    headers = {"if-none-exist": "x=1"}
    result = fhir.forward(
        ForwardedRequest("pg_A", ASSAY_BASE, "POST", "Patient", (), headers, json.dumps(body).encode())
    )
    [request] = sent
    assert (request.method, str(request.url)) == ("POST", f"{hapi}/Patient")
    assert json.loads(request.content)["link"][0]["other"]["reference"] == f"{hapi}/Patient/y"
    assert request.headers["If-None-Exist"] == "x=1"
    assert result.headers == {"Location": f"{ASSAY_BASE}/Patient/x/_history/1", "ETag": 'W/"1"'}
    assert result.body is not None and hapi not in json.dumps(result.body)
    assert result.body["link"][0]["url"] == f"{ASSAY_BASE}/Patient?_getpagesoffset=1"


@pytest.mark.parametrize(
    ("method", "path", "body"),
    [
        ("GET", "Patient/$everything", b""),
        ("POST", "$expunge", b"{}"),
        ("GET", "Project", b""),
        ("GET", "Patient/x/_history/1/extra", b""),
        ("POST", "", b'{"resourceType": "Bundle", "type": "batch", "entry": [{"request": {"method": "POST", "url": "Patient/$expunge"}}]}'),
        ("POST", "", b'{"resourceType": "Bundle", "type": "batch", "entry": [{"request": {"method": "GET", "url": "Project"}}]}'),
        # `.` and `..` are no ids (the embedded store refuses them): in a URL they are dot segments,
        # and `DELETE Patient/.` went out as `DELETE [space]/Patient`, a conditional delete of all.
        ("DELETE", "Patient/.", b""),
        ("PUT", "Patient/..", b'{"resourceType": "Patient", "id": ".."}'),
        ("GET", "Patient/x/_history/..", b""),
    ],
)  # fmt: skip
def test_isolated_forwarding_refuses_what_the_surface_does_not_serve(
    method: str, path: str, body: bytes
) -> None:
    """Operations (`$…`) and non-R4 types never reach the server, which Assay calls as an admin."""
    client, sent = _recording(lambda request: httpx.Response(200, json={}))
    fhir = IsolatedFhir(HapiPartitions("http://hapi.invalid/fhir", client), client)
    with pytest.raises(FhirError) as refused:
        fhir.forward(ForwardedRequest("pg_A", ASSAY_BASE, method, path, body=body))
    assert refused.value.status == 404 and sent == []


@pytest.mark.parametrize(
    ("method", "path"),
    [("PUT", "Patient"), ("DELETE", "Patient"), ("GET", "Patient/_history"), ("GET", "_history")],
)
def test_the_tag_strategy_refuses_what_would_cross_playgrounds(method: str, path: str) -> None:
    client, sent = _recording(lambda request: httpx.Response(200, json={}))
    with pytest.raises(FhirError) as refused:
        TaggedFhir("http://fhir.invalid", client).forward(
            ForwardedRequest("pg_A", ASSAY_BASE, method, path, (("_id", "x"),), body=b"{}")
        )
    assert refused.value.status == 501 and sent == []


@pytest.mark.parametrize(
    ("method", "url"), [("PUT", "Patient?_id=x"), ("DELETE", "Patient?_id=x"), ("GET", "Patient/_history")]
)
def test_the_tag_strategy_refuses_the_same_in_bundle_entries(method: str, url: str) -> None:
    """Conditional update/delete and type history are 501 as entries too: they were sent (with the
    `_tag` ANDed to the criteria, which a server may ignore in a conditional write), or a type
    history became a read of the id `_history`."""
    client, sent = _recording(lambda request: httpx.Response(200, json={}))
    entry: dict[str, Any] = {"request": {"method": method, "url": url}}
    if method == "PUT":
        entry["resource"] = {"resourceType": "Patient"}
    body = json.dumps({"resourceType": "Bundle", "type": "batch", "entry": [entry]}).encode()
    with pytest.raises(FhirError) as refused:
        TaggedFhir("http://fhir.invalid", client).forward(
            ForwardedRequest("pg_A", ASSAY_BASE, "POST", "", body=body)
        )
    assert refused.value.status == 501 and "entry 0" in refused.value.diagnostics and sent == []


def test_the_agents_content_type_replaces_the_default() -> None:
    client, sent = _recording(lambda request: httpx.Response(200, json={"resourceType": "Bundle"}))
    fhir = IsolatedFhir(HapiPartitions("http://hapi.invalid/fhir", client), client)
    form = {"content-type": "application/x-www-form-urlencoded"}
    fhir.forward(ForwardedRequest("pg_A", ASSAY_BASE, "POST", "Patient/_search", (), form, b"name=x"))
    [request] = sent
    assert request.headers.get_list("content-type") == ["application/x-www-form-urlencoded"]
    assert request.content == b"name=x"


def test_a_medplum_capture_reads_with_a_fresh_token_and_fails_on_any_error() -> None:
    tokens = iter(["t1", "t2", "t3"])

    def answer(request: httpx.Request) -> httpx.Response:
        if request.url.path == "/oauth2/token":
            return httpx.Response(200, json={"access_token": next(tokens)})
        if request.url.path.endswith("/metadata"):
            resources = [{"type": "Patient"}, {"type": "Project"}, {"type": "Observation"}]
            return httpx.Response(
                200, json={"resourceType": "CapabilityStatement", "rest": [{"resource": resources}]}
            )
        if request.url.path.endswith("/Patient"):
            entry = [{"resource": {"resourceType": "Patient", "id": "x"}, "search": {"mode": "match"}}]
            return httpx.Response(200, json={"resourceType": "Bundle", "entry": entry})
        return httpx.Response(403, json={"resourceType": "OperationOutcome"})

    client, sent = _recording(answer)
    fhir = IsolatedFhir(MedplumProjects("https://medplum.invalid/fhir/R4", client), client)
    fhir._remember("pg_A", fhir.spaces.resume("pg_A", {"client_id": "c", "client_secret": "s"}))
    with pytest.raises(
        ExternalFhirFailed, match="search Observation for the capture: it answered 403"
    ) as failed:
        fhir.snapshot("pg_A")
    assert "medplum.invalid" not in failed.value.message  # the API's answer to `complete`
    assert "GET https://medplum.invalid/fhir/R4/Observation?" in str(failed.value)  # the operator's log
    searched = [r for r in sent if r.url.path != "/oauth2/token"]
    paths = [r.url.path.rsplit("/", 1)[-1] for r in searched]
    # Types are read READERS at a time, so Patient may be in flight when Observation's 403 ends the
    # capture; Project (not an R4 type) is never read.
    assert (
        paths[0] == "metadata"
        and "Observation" in paths
        and set(paths) <= {"metadata", "Observation", "Patient"}
    )
    assert {r.headers["Authorization"] for r in searched} == {"Bearer t2"}


def test_both_strategies_take_one_forwarded_request() -> None:
    """The surface builds one `ForwardedRequest` and depends only on `FhirForwarder`: either
    strategy takes the same request (here a read) and sends it to its own place on the server."""
    client, sent = _recording(lambda request: httpx.Response(200, json={"resourceType": "Patient"}))
    forwarders: list[FhirForwarder] = [
        TaggedFhir("http://hapi.invalid/fhir", client),
        IsolatedFhir(HapiPartitions("http://hapi.invalid/fhir", client), client),
    ]
    read = ForwardedRequest("pg_A", ASSAY_BASE, "GET", "Patient/x")
    assert [forwarder.forward(read).status for forwarder in forwarders] == [200, 200]
    assert [str(request.url) for request in sent] == [
        "http://hapi.invalid/fhir/Patient/aa-x",
        "http://hapi.invalid/fhir/assay-pg_A/Patient/x",
    ]


HAPI_PAGE = "_getpages=abc&_getpagesoffset={offset}&_count=1&_bundletype=searchset"
"""The query of a HAPI `next` link (HAPI pages every search on its base: `[base]?_getpages=…`)."""


def _hapi_pages(base: str, code: str | None = None) -> Answer:
    """Answers like HAPI: page 1 of a Patient search, or the page a `_getpages` link names, each
    with a `next` link on the server's base; resources tagged for `code` when given."""

    def answer(request: httpx.Request) -> httpx.Response:
        offset = int(request.url.params.get("_getpagesoffset", "0"))
        rid = f"aa-p{offset}" if code else f"p{offset}"
        resource: dict[str, object] = {"resourceType": "Patient", "id": rid}
        if code:
            resource["meta"] = {"tag": [{"system": "https://assay.dev/fhir/playground", "code": code}]}
        return httpx.Response(200, json={
            "resourceType": "Bundle", "type": "searchset", "total": 3,
            "link": [{"relation": "next", "url": f"{base}?{HAPI_PAGE.format(offset=offset + 1)}"}],
            "entry": [{"fullUrl": f"{base}/Patient/{rid}", "resource": resource, "search": {"mode": "match"}}],
        })  # fmt: skip

    return answer


def _next_query(result: FhirResult) -> tuple[tuple[str, str], ...]:
    assert result.body is not None
    [url] = [link["url"] for link in result.body["link"] if link["relation"] == "next"]
    assert url.startswith(f"{ASSAY_BASE}?")
    return tuple(parse_qsl(urlsplit(url).query, keep_blank_values=True))


def test_hapi_paging_links_on_the_base_are_followed_in_a_space() -> None:
    """REQUEST SHAPE (HAPI's link shape; no HAPI server): the agent sees HAPI's `next` link under
    its Assay base, and a GET there goes to the space's base with the same query."""
    hapi = "http://hapi.invalid/fhir/assay-pg_A"
    client, sent = _recording(_hapi_pages(hapi))
    fhir = IsolatedFhir(HapiPartitions("http://hapi.invalid/fhir", client), client)
    first = fhir.forward(ForwardedRequest("pg_A", ASSAY_BASE, "GET", "Patient", (("_count", "1"),)))
    query = _next_query(first)
    assert query == tuple(parse_qsl(HAPI_PAGE.format(offset=1)))
    second = fhir.forward(ForwardedRequest("pg_A", ASSAY_BASE, "GET", "", query))
    assert str(sent[1].url) == f"{hapi}?{HAPI_PAGE.format(offset=1)}"
    assert second.status == 200 and second.body is not None and hapi not in json.dumps(second.body)
    assert second.body["entry"][0]["fullUrl"] == f"{ASSAY_BASE}/Patient/p1"
    assert _next_query(second) == tuple(parse_qsl(HAPI_PAGE.format(offset=2)))
    with pytest.raises(FhirError) as refused:  # the base without a query: no interaction to forward
        fhir.forward(ForwardedRequest("pg_A", ASSAY_BASE, "GET", ""))
    assert refused.value.status == 404 and len(sent) == 2


def test_hapi_paging_links_on_the_base_are_followed_with_the_tag() -> None:
    """REQUEST SHAPE (HAPI's link shape; no HAPI server): under the tag strategy a GET on the base
    is forwarded with the playground's `_tag` added (a system-level search is filtered by it)."""
    client, sent = _recording(_hapi_pages("http://hapi.invalid/fhir", "pg_A"))
    fhir = TaggedFhir("http://hapi.invalid/fhir", client)
    query = _next_query(fhir.forward(ForwardedRequest("pg_A", ASSAY_BASE, "GET", "Patient")))
    assert query == tuple(parse_qsl(HAPI_PAGE.format(offset=1)))
    second = fhir.forward(ForwardedRequest("pg_A", ASSAY_BASE, "GET", "", query))
    tag = urlencode({"_tag": "https://assay.dev/fhir/playground|pg_A"})
    assert str(sent[1].url) == f"http://hapi.invalid/fhir?{HAPI_PAGE.format(offset=1)}&{tag}"
    assert second.body is not None and second.body["entry"][0]["resource"] == {
        "resourceType": "Patient",
        "id": "p1",
    }
    assert _next_query(second) == tuple(parse_qsl(HAPI_PAGE.format(offset=2)))
    fhir.forward(ForwardedRequest("pg_A", ASSAY_BASE, "GET", "", (("_id", "x"),)))  # system search
    assert str(sent[2].url) == f"http://hapi.invalid/fhir?_id=aa-x&{tag}"


def test_a_page_on_the_base_from_another_playground_is_refused_under_the_tag() -> None:
    """HAPI continues a cached search by its `_getpages` id and ignores other parameters, so the
    `_tag` cannot filter a page: every matched resource of the page is checked for the playground's
    tag instead, and a page of another playground's search is refused, nothing of it shown."""
    client, _ = _recording(_hapi_pages("http://hapi.invalid/fhir", "pg_OTHER"))
    fhir = TaggedFhir("http://hapi.invalid/fhir", client)
    query = tuple(parse_qsl(HAPI_PAGE.format(offset=1)))
    with pytest.raises(FhirError) as refused:
        fhir.forward(ForwardedRequest("pg_A", ASSAY_BASE, "GET", "", query))
    assert refused.value.status == 404 and "not a page of this playground" in refused.value.diagnostics
    assert "pg_OTHER" not in json.dumps(refused.value.outcome())


def _unreachable(request: httpx.Request) -> httpx.Response:
    raise httpx.ConnectError("connection refused", request=request)


@pytest.mark.parametrize("isolated", [False, True])
def test_an_unreachable_server_is_a_502_that_does_not_name_it(isolated: bool) -> None:
    """The agent never sees the server: its URL (`ASSAY_FHIR_URL`) is in the operator's log only."""
    client = httpx.Client(transport=httpx.MockTransport(_unreachable))
    url = "http://hidden-fhir.invalid/fhir"
    forwarder: FhirForwarder = (
        IsolatedFhir(HapiPartitions(url, client), client) if isolated else TaggedFhir(url, client)
    )
    with pytest.raises(FhirError) as refused:
        forwarder.forward(ForwardedRequest("pg_A", ASSAY_BASE, "GET", "Patient/x"))
    assert refused.value.status == 502 and "hidden-fhir" not in json.dumps(refused.value.outcome())


def test_a_space_that_cannot_be_opened_is_an_error_that_does_not_name_the_server() -> None:
    """`ExternalFhirFailed.message` is what `start`, `complete` and a forwarded request answer (all
    the agent's); the server's URL and answer are in `str(exc)`, for the operator's log."""
    answer = httpx.Response(400, text="invalid_client at https://medplum.invalid")
    client, _ = _recording(lambda request: answer)
    with pytest.raises(ExternalFhirFailed) as failed:
        MedplumProjects("https://medplum.invalid/fhir/R4", client).resume("pg_A", {"client_id": "c"})
    assert failed.value.message == "the external FHIR server failed to issue a project token: it answered 400"
    assert "POST https://medplum.invalid/oauth2/token" in str(failed.value)


def test_a_medplum_project_whose_client_cannot_be_read_is_expunged() -> None:
    """An answer that is not JSON (a proxy's HTML page) is `ExternalFhirFailed`, and the project
    just created is expunged: a `ValueError` escaped, and left the project on the server."""

    def answer(request: httpx.Request) -> httpx.Response:
        if request.url.path.endswith("/client"):
            return httpx.Response(200, text="<html>gateway</html>")
        return _medplum(request)

    client, sent = _recording(answer)
    with pytest.raises(
        ExternalFhirFailed, match="create a client application: its answer is not a JSON object"
    ):
        MedplumProjects("https://medplum.invalid/fhir/R4", client, "Bearer super").open("pg_A")
    assert sent[-1].method == "POST" and sent[-1].url.path == "/fhir/R4/Project/proj-1/$expunge"


def test_a_seeding_batch_entry_the_server_refuses_fails_the_load_under_the_tag() -> None:
    """A batch answers 200 whatever its entries did: each entry's status is read, as for a space
    (`IsolatedFhir.load`); a refused resource used to leave the playground seeded without it."""
    response = {"resourceType": "Bundle", "type": "batch-response", "entry": [
        {"response": {"status": "200 OK"}}, {"response": {"status": "400 Bad Request"}},
    ]}  # fmt: skip
    client, sent = _recording(lambda request: httpx.Response(200, json=response))
    resources = [{"resourceType": "Patient", "id": "a"}, {"resourceType": "Patient", "id": "b"}]
    with pytest.raises(ExternalFhirFailed, match=r"entries answered 400 Bad Request"):
        TaggedFhir("http://hapi.invalid/fhir", client).provision("pg_A", resources)
    assert len(sent) == 1


@pytest.mark.parametrize("links", [["next"], {"relation": "next"}, [{"relation": "next", "url": 7}]])
def test_a_capture_page_with_malformed_links_is_read_as_the_last_page(links: object) -> None:
    """`Bundle.link` that is not a list of objects with a string url ends the paging; it raised
    `AttributeError` out of `complete` (a bare 500 with no reason)."""

    def answer(request: httpx.Request) -> httpx.Response:
        if request.url.path.endswith("/metadata"):
            statement = {"resourceType": "CapabilityStatement", "rest": [{"resource": [{"type": "Patient"}]}]}
            return httpx.Response(200, json=statement)
        entry = [{"resource": {"resourceType": "Patient", "id": "x"}}]
        return httpx.Response(200, json={"resourceType": "Bundle", "entry": entry, "link": links})

    client, _ = _recording(answer)
    fhir = IsolatedFhir(HapiPartitions("http://hapi.invalid/fhir", client), client)
    assert fhir.snapshot("pg_A") == [{"resourceType": "Patient", "id": "x"}]


def test_the_tag_strategy_maps_only_urls_under_the_server_base() -> None:
    """`http://hapi.invalid/fhir-binary/…` is not under `http://hapi.invalid/fhir`: it stays as the
    server sent it (it became `<Assay base>-binary/…`); the isolated strategy checks the same way."""
    resource = {"resourceType": "DocumentReference", "id": "aa-d", "content": [
        {"attachment": {"url": "http://hapi.invalid/fhir-binary/Binary/b"}},
        {"attachment": {"url": "http://hapi.invalid/fhir/Binary/aa-b"}},
    ]}  # fmt: skip
    client, _ = _recording(lambda request: httpx.Response(200, json=resource))
    result = TaggedFhir("http://hapi.invalid/fhir", client).forward(
        ForwardedRequest("pg_A", ASSAY_BASE, "GET", "DocumentReference/d")
    )
    assert result.body is not None
    assert [c["attachment"]["url"] for c in result.body["content"]] == [
        "http://hapi.invalid/fhir-binary/Binary/b",
        f"{ASSAY_BASE}/Binary/b",
    ]


def test_the_space_cache_keeps_the_spaces_in_use(monkeypatch: pytest.MonkeyPatch) -> None:
    """Least recently *used* goes first (docs/decisions.md: LRU): a space read since it was cached
    stays when the cache is full; it was first in, first out."""
    monkeypatch.setattr("assay.sandboxes.fhir.external.isolated._CACHE", 2)
    client, sent = _recording(lambda request: httpx.Response(200, json={"access_token": "t"}))
    fhir = IsolatedFhir(MedplumProjects("https://medplum.invalid/fhir/R4", client), client)
    for playground_id in ("pg_A", "pg_B"):
        fhir._remember(playground_id, fhir.spaces.resume(playground_id, {}))
    fhir.space("pg_A")
    fhir._remember("pg_C", fhir.spaces.resume("pg_C", {}))
    before = len(sent)
    fhir.space("pg_A")  # still cached: no token asked for (pg_B went)
    assert len(sent) == before


def test_a_bundle_entry_whose_full_url_is_no_string_is_forwarded_under_the_tag() -> None:
    """A `fullUrl` that is no string names nothing (the embedded surface creates the entry all the
    same); it was used as a dictionary key and raised `TypeError` (a 500)."""
    client, sent = _recording(lambda request: httpx.Response(200, json={"resourceType": "Bundle"}))
    entry = {
        "fullUrl": {"x": 1},
        "resource": {"resourceType": "Patient"},
        "request": {"method": "POST", "url": "Patient"},
    }
    body = json.dumps({"resourceType": "Bundle", "type": "batch", "entry": [entry]}).encode()
    result = TaggedFhir("http://hapi.invalid/fhir", client).forward(
        ForwardedRequest("pg_A", ASSAY_BASE, "POST", "", body=body)
    )
    assert result.status == 200 and json.loads(sent[0].content)["entry"][0]["request"]["method"] == "PUT"


@pytest.mark.parametrize(
    "resource", [{"resourceType": "Patient", "meta": [1]}, {"resourceType": "Patient", "id": {"a": 1}}]
)
def test_a_resource_on_a_read_or_delete_entry_is_passed_over_under_the_tag(resource: dict[str, Any]) -> None:
    """FHIR ignores a resource on a GET or DELETE entry; its `meta` or `id` of the wrong type made
    the namespacing raise (`TypeError`, `AttributeError`: a 500). Found by fuzzing `forward`."""
    client, sent = _recording(lambda request: httpx.Response(200, json={"resourceType": "Bundle"}))
    entry = {"resource": resource, "request": {"method": "DELETE", "url": "Patient/x"}}
    body = json.dumps({"resourceType": "Bundle", "type": "batch", "entry": [entry]}).encode()
    result = TaggedFhir("http://hapi.invalid/fhir", client).forward(
        ForwardedRequest("pg_A", ASSAY_BASE, "POST", "", body=body)
    )
    assert (
        result.status == 200 and json.loads(sent[0].content)["entry"][0]["request"]["url"] == "Patient/aa-x"
    )


def test_a_page_on_the_base_whose_entry_search_is_no_object_is_still_checked() -> None:
    page = {"resourceType": "Bundle", "entry": [{"search": "match", "resource": {"resourceType": "Patient"}}]}
    client, _ = _recording(lambda request: httpx.Response(200, json=page))
    with pytest.raises(FhirError) as refused:  # untagged, so not this playground's: it raised AttributeError
        TaggedFhir("http://hapi.invalid/fhir", client).forward(
            ForwardedRequest("pg_A", ASSAY_BASE, "GET", "", (("_getpages", "x"),))
        )
    assert refused.value.status == 404


@pytest.mark.parametrize("rest", [True, [{"resource": 1.5}]])
def test_a_capability_statement_listing_no_types_means_every_r4_type(rest: object) -> None:
    """`rest` or `rest.resource` that is no list lists nothing (it raised `TypeError` out of the
    capture, a bare 500); as for a statement that lists no types, every R4 type is read."""

    def answer(request: httpx.Request) -> httpx.Response:
        if request.url.path.endswith("/metadata"):
            return httpx.Response(200, json={"resourceType": "CapabilityStatement", "rest": rest})
        return httpx.Response(200, json={"resourceType": "Bundle"})

    client, sent = _recording(answer)
    assert IsolatedFhir(HapiPartitions("http://hapi.invalid/fhir", client), client).snapshot("pg_A") == []
    assert len(sent) > 140  # metadata, then a search of each of R4's types


@pytest.mark.parametrize("project_id", [["p"], "../../admin", True])
def test_a_medplum_project_id_that_is_no_fhir_id_fails_the_open(project_id: object) -> None:
    """The id `$init` answers goes into URL paths (the client, `$expunge`): anything but a FHIR id
    is refused before it is used (`str()` of it was, `../../admin` included)."""

    def answer(request: httpx.Request) -> httpx.Response:
        if request.url.path.endswith("/Project/$init"):
            return httpx.Response(201, json={"resourceType": "Project", "id": project_id})
        return _medplum(request)

    client, sent = _recording(answer)
    with pytest.raises(ExternalFhirFailed, match="no Project id in its answer"):
        MedplumProjects("https://medplum.invalid/fhir/R4", client, "Bearer super").open("pg_A")
    assert len(sent) == 1


def test_a_medplum_capture_asks_for_one_token(monkeypatch: pytest.MonkeyPatch) -> None:
    """A space not cached (another worker started the run) is resumed from its sandbox row once for
    the capture: it was resumed, then renewed again at once, two token requests."""
    saved = {"isolation": "medplum-project", "server": "x", "saved": {"client_id": "c", "client_secret": "s"}}
    monkeypatch.setattr("assay.sandboxes.fhir.external.isolated.recorded_space", lambda conn, pid: saved)

    def answer(request: httpx.Request) -> httpx.Response:
        if request.url.path == "/oauth2/token":
            return httpx.Response(200, json={"access_token": "t"})
        if request.url.path.endswith("/metadata"):
            statement = {"resourceType": "CapabilityStatement", "rest": [{"resource": [{"type": "Patient"}]}]}
            return httpx.Response(200, json=statement)
        return httpx.Response(200, json={"resourceType": "Bundle"})

    client, sent = _recording(answer)
    fhir = IsolatedFhir(MedplumProjects("https://medplum.invalid/fhir/R4", client), client)
    assert fhir.snapshot("pg_A", conn=object()) == []  # type: ignore[arg-type]
    assert [r.url.path for r in sent].count("/oauth2/token") == 1
