"""The OpenAPI description (autoexperiment_site.openapi): a valid document, covering every URL under
/api/v1/, its reference page, the JSON refusals it promises, and the deprecated unversioned paths."""
from __future__ import annotations

import json
import re

import pytest
from django.test import Client
from django.urls import URLPattern, URLResolver, get_resolver
from openapi_spec_validator import validate

from autoexperiment_site.openapi import openapi_document


def _routes(patterns, prefix: str = ""):
    for pattern in patterns:
        if isinstance(pattern, URLResolver):
            yield from _routes(pattern.url_patterns, prefix + str(pattern.pattern))
        elif isinstance(pattern, URLPattern):
            yield prefix + str(pattern.pattern)


def _as_openapi_path(route: str) -> str:
    return "/" + re.sub(r"<(?:\w+:)?(\w+)>", lambda match: "{" + ("id" if match.group(1) == "pk" else match.group(1)) + "}", route)


def test_the_document_is_valid_openapi():
    document = openapi_document()
    validate(document)
    assert document["openapi"].startswith("3.1")


def test_every_url_under_api_v1_is_described():
    routes = [route for route in _routes(get_resolver().url_patterns) if route.startswith("api/v1/")]
    assert routes, "no URL under api/v1/"
    described = set(openapi_document()["paths"])
    missing = [route for route in routes if _as_openapi_path(route) not in described]
    assert not missing, f"URLs under /api/v1/ not in the OpenAPI description: {missing}"


def test_every_download_is_described():
    """The files the pages offer (datasets, task archives) are operations too: a script fetches them."""
    routes = [route for route in _routes(get_resolver().url_patterns) if route.endswith((".zip", ".tar.gz"))]
    assert len(routes) >= 3, routes
    described = set(openapi_document()["paths"])
    assert [route for route in routes if _as_openapi_path(route) not in described] == []


def test_the_description_holds_no_data():
    """Examples of real objects are the fuzzer's to add (scripts/fuzz_api.py), to its own copy: what is
    published depends on no database."""
    document = openapi_document()
    for path, item in document["paths"].items():
        for operation in [item, *(item[method] for method in ("get", "post") if method in item)]:
            for parameter in operation.get("parameters", []):
                assert not {"example", "examples"} & set(parameter), f"{path}: {parameter['name']} has examples"


# The submitter's agent configuration and the suite's answer formats and gold numbers are any JSON.
FREE_JSON = ("/agent_config/*", "/answer_format", "/gold_result")


def _untyped(schema, where: str) -> list[str]:
    """Where `schema` leaves a value's type unsaid: no type at all, or an object or array whose
    members' schema is unsaid."""
    if not isinstance(schema, dict):  # `true`: anything
        return [where]
    if {"$ref", "const", "enum"} & set(schema):
        return []
    branches = [(f"{where}/{key}/{index}", branch) for key in ("anyOf", "oneOf", "allOf")
                for index, branch in enumerate(schema.get(key, []))]
    if branches:
        return [found for branch_where, branch in branches for found in _untyped(branch, branch_where)]
    kind = schema.get("type")
    if kind == "object":
        if "properties" in schema:
            return [found for name, member in schema["properties"].items() for found in _untyped(member, f"{where}/{name}")]
        return _untyped(schema.get("additionalProperties", True), f"{where}/*")
    if kind == "array":
        members = [(f"{where}/{index}", item) for index, item in enumerate(schema.get("prefixItems", []))]
        return [found for item_where, item in members or [(f"{where}/items", schema.get("items", True))]
                for found in _untyped(item, item_where)]
    return [] if kind else [where]


def test_every_page_model_is_described_to_its_leaves():
    """No object of a page's JSON is left an untyped dict (the models once said only a page's top
    level): every value has a type, every object its properties or its values' schema."""
    schemas = openapi_document()["components"]["schemas"]
    untyped = [where for name, schema in schemas.items() for where in _untyped(schema, name)]
    assert [where for where in untyped if not where.endswith(FREE_JSON)] == []


@pytest.mark.django_db
def test_the_description_and_its_reference_page_are_served():
    client = Client()
    response = client.get("/api/v1/openapi.json")
    assert response.status_code == 200 and response["Content-Type"] == "application/json"
    served = json.loads(response.content)
    validate(served)
    page = client.get("/api/v1/")
    assert page.status_code == 200
    text = page.content.decode()
    assert "POST /api/v1/submissions/" in text and 'id="schema-Submission"' in text
    assert "<script" not in text.split("</header>", 1)[1], "the reference page needs no script"


@pytest.mark.django_db
def test_refusals_of_json_requests_are_json_naming_the_problem():
    client = Client()
    missing = client.get("/api/v1/submissions/not-a-number/")
    assert missing.status_code == 404 and missing.json()["error"]
    no_suite = client.get("/benchmark/no-such-suite/?format=json")
    assert no_suite.status_code == 404 and "no-such-suite" in no_suite.json()["error"]
    no_b = client.get("/compare/?format=json&a=abc")
    assert no_b.status_code == 400 and no_b.json()["error"].startswith("b: missing")
    unknown = client.get("/compare/?format=json&a=abc&b=def")
    assert unknown.status_code == 404 and "'abc'" in unknown.json()["error"]
    nul = client.get("/functions/?format=json&agent=a%00b")
    assert nul.status_code == 400 and "NUL" in nul.json()["error"]
    assert client.get("/benchmark/no-such-suite/")["Content-Type"].startswith("text/html")  # a person gets the page


@pytest.mark.django_db
def test_the_unversioned_paths_answer_and_say_they_are_deprecated():
    client = Client()
    old = client.get("/api/submissions/1/")
    new = client.get("/api/v1/submissions/1/")
    assert old.status_code == new.status_code == 401 and old.json() == new.json()
    assert old["Deprecation"] == "true" and old["Link"] == '</api/v1/submissions/1/>; rel="successor-version"'
    assert "Deprecation" not in new
