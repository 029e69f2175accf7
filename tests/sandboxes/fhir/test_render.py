"""The FHIR surface's response rendering (issue 9): orjson for speed, `json.dumps` for what orjson
will not encode, and the same JSON either way."""

from __future__ import annotations

import json

from assay.sandboxes.fhir.results import FhirResult
from assay.sandboxes.fhir.routes.exchange import FHIR_JSON, render


def test_a_body_renders_as_compact_json_with_its_keys_in_order() -> None:
    body = {"resourceType": "Patient", "id": "p1", "name": [{"family": "Ünal", "given": ["Zoë"]}], "x": 1.5}
    response, strict = render(FhirResult(200, body, {"ETag": 'W/"1"'}), FHIR_JSON)
    assert strict
    assert json.loads(response.body) == body
    assert list(json.loads(response.body)) == list(body)
    assert b" " not in response.body.replace(b'"family"', b"")  # compact
    assert response.headers["content-type"] == FHIR_JSON
    assert response.headers["etag"] == 'W/"1"'


def test_what_orjson_will_not_encode_is_rendered_by_json_dumps() -> None:
    huge = {"resourceType": "Observation", "valueInteger": 2**70}
    response, strict = render(FhirResult(200, huge), FHIR_JSON)
    assert strict and json.loads(response.body) == huge
    lone = {"resourceType": "Patient", "id": "\ud800"}  # never stored; rendered all the same
    response, strict = render(FhirResult(200, lone), FHIR_JSON)
    assert strict and json.loads(response.body) == lone


def test_no_body_is_an_empty_response() -> None:
    response, strict = render(FhirResult(204, None), FHIR_JSON)
    assert response.body == b"" and not strict
