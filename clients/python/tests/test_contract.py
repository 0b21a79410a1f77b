"""The Python client against the live OpenAPI document (``GET /api/v1/openapi.json``): every field it
reads exists there, is required, and has the type and nullability the client expects, so a field
renamed or dropped on the server fails here, not in a user's suite."""

from __future__ import annotations

import json
import urllib.request
from typing import Any, Dict

import pytest

from ephemail.client import OPERATIONS
from ephemail.models import MODELS, Email
from openapi_check import check, summary, without_field


@pytest.fixture(scope="module")
def openapi(ephemail_url: str) -> Dict[str, Any]:
    with urllib.request.urlopen(f"{ephemail_url}/api/v1/openapi.json", timeout=30) as res:
        doc: Dict[str, Any] = json.load(res)
    assert str(doc.get("openapi", "")).startswith("3.1"), doc.get("openapi")
    return doc


def test_every_field_the_client_reads_is_in_the_live_openapi_document(openapi: Dict[str, Any]) -> None:
    problems = check(openapi)
    assert not problems, summary(problems)


def test_the_check_covers_every_model_and_operation() -> None:
    # the models the operations read are all checked
    assert {getattr(m, "SCHEMA") for m in MODELS} >= {"Email", "EmailSummary", "Attachment", "Code", "Link", "Header"}
    assert set(OPERATIONS) == {"mint_key", "create_inbox", "list_emails", "latest", "clear", "get_email", "raw_email", "download_attachment"}


@pytest.mark.parametrize(("component", "field"), [("Email", "codes"), ("Code", "value"), ("Link", "url"), ("EmailSummary", "subject")])
def test_the_check_fails_when_a_field_is_missing(openapi: Dict[str, Any], component: str, field: str) -> None:
    broken, _ = without_field(openapi, component, field)
    problems = check(broken)
    assert any(f"{component}: the contract has no field {field!r}" in p for p in problems), problems


def test_the_check_fails_when_a_field_becomes_optional_or_nullable(openapi: Dict[str, Any]) -> None:
    import copy

    optional = copy.deepcopy(openapi)
    optional["components"]["schemas"]["Email"]["required"].remove("links")
    assert any("'links' is not required" in p for p in check(optional))
    nullable = copy.deepcopy(openapi)
    nullable["components"]["schemas"]["Email"]["properties"]["subject"] = {"anyOf": [{"type": "string"}, {"type": "null"}]}
    assert any(p.startswith("Email.subject: the contract says ['null', 'string']") for p in check(nullable))


def test_the_check_fails_when_an_envelope_field_is_renamed(openapi: Dict[str, Any]) -> None:
    import copy

    broken = copy.deepcopy(openapi)
    body = broken["paths"]["/api/v1/keys"]["post"]["responses"]["201"]["content"]["application/json"]["schema"]
    data = body["properties"]["data"]
    data = broken["components"]["schemas"][data["$ref"].rsplit("/", 1)[-1]] if "$ref" in data else data
    data["properties"]["key"] = data["properties"].pop("api_key")
    data["required"] = ["key" if r == "api_key" else r for r in data["required"]]
    assert any("POST /api/v1/keys 201 data: the contract has no field 'api_key'" in p for p in check(broken)), check(broken)


def test_a_response_without_a_field_raises_invalid_response() -> None:
    from ephemail import InvalidResponseError
    from ephemail.models import from_wire

    email = {"id": "x", "address": "a@b", "sender": "", "mailed_by": None, "subject": "", "has_attachments": False}
    with pytest.raises(InvalidResponseError, match="'received_at' is missing"):
        from_wire(Email, email)
    with pytest.raises(InvalidResponseError, match=r"Code\.value: expected str, got a number"):
        from_wire(MODELS[1], {"value": 559120, "context": ""})
