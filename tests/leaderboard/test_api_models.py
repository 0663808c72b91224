"""Every page's JSON, live, against the OpenAPI description (autoexperiment_site.openapi) and the models it
is generated from (leaderboard.api_models), on data that fills every key they name (tests/leaderboard/
api_data.py): a key an `as_dict` or a view adds without the model fails here, and so does a key of the
description that no page emits any more."""
from __future__ import annotations

import inspect
import json

import pytest
from django.test import Client
from jsonschema import Draft202012Validator
from jsonschema.exceptions import best_match
from pydantic import BaseModel

from autoexperiment_site.openapi import openapi_document
from leaderboard import api_models, benchmark_api_models
from tests.leaderboard.api_data import SEARCH_WORD, ApiData, seed_api_data

pytestmark = pytest.mark.django_db

# The pages' operations as the description names them (tags other than submissions and meta).
PAGE_TAGS = {"leaderboard", "explorer", "benchmark"}


@pytest.fixture
def data() -> ApiData:
    return seed_api_data()


def _requests(data: ApiData) -> list[tuple[str, dict, dict, int]]:
    """(path template, path parameters, query, expected status) of every request the test makes."""
    suite = {"suite": data.suite.name}
    paper = {**suite, "paper_id": data.function.paper.paper_id}
    return [
        ("/", {}, {}, 200),
        ("/", {}, {"tolerance": "0.01", "unverified": "1"}, 200),
        ("/functions/", {}, {}, 200),
        ("/systems/{slug}/", {"slug": data.slug_a}, {}, 200),
        ("/systems/{slug}/", {"slug": data.slug_b}, {"tolerance": "0.01"}, 200),
        ("/compare/", {}, {"a": data.slug_a, "b": data.slug_b}, 200),
        ("/explore/", {}, {}, 200),
        ("/explore/", {}, {"q": SEARCH_WORD}, 200),
        ("/explore/", {}, {"n": "many"}, 400),
        ("/benchmark/{suite}/", suite, {}, 200),
        ("/benchmark/{suite}/", {"suite": "no-such-suite"}, {}, 404),
        ("/benchmark/{suite}/samples/", suite, {"n": "1"}, 200),
        ("/benchmark/{suite}/samples/", suite, {"n": "2"}, 200),
        ("/benchmark/{suite}/papers/{paper_id}/", paper, {}, 200),
        ("/benchmark/{suite}/papers/{paper_id}/functions/{func_id}/", {**paper, "func_id": data.function.func_id}, {}, 200),
        ("/benchmark/{suite}/papers/{paper_id}/experiments/{exp_id}/", {**paper, "exp_id": data.experiment.exp_id}, {}, 200),
    ]


def _validator(document: dict, template: str, status: int) -> Draft202012Validator:
    """The described JSON schema of the GET of `template` answering `status`."""
    schema = document["paths"][template]["get"]["responses"][str(status)]["content"]["application/json"]["schema"]
    # The schema's $refs point into the document's components.
    return Draft202012Validator({**schema, "components": document["components"]})


def _deepest(error):
    """The most telling error under an anyOf's (jsonschema's own best match stops at the anyOf)."""
    while error is not None and error.context:
        error = best_match(error.context)
    return error


def _model(document: dict, template: str, status: int) -> list[type[BaseModel]]:
    schema = document["paths"][template]["get"]["responses"][str(status)]["content"]["application/json"]["schema"]
    names = [item["$ref"].rsplit("/", 1)[1] for item in schema.get("anyOf", [schema])]
    return [getattr(api_models, name, None) or getattr(benchmark_api_models, name) for name in names]


def _seen(value, seen: set[tuple[str, str]]) -> None:
    """Every (model, field) present in a validated value, nested ones too."""
    if isinstance(value, BaseModel):
        for name in value.model_fields_set:
            # a field a base model declares (AttemptPlace's) is seen through its subclasses' values
            seen.update((model.__name__, name) for model in type(value).__mro__ if name in getattr(model, "model_fields", {}))
            _seen(getattr(value, name), seen)
    elif isinstance(value, list | tuple):
        for item in value:
            _seen(item, seen)
    elif isinstance(value, dict):
        for item in value.values():
            _seen(item, seen)


def _validated(models: list[type[BaseModel]], body: dict) -> BaseModel:
    problems = []
    for model in models:
        try:
            return model.model_validate(body)
        except ValueError as error:
            problems.append(str(error))
    raise AssertionError("\n".join(problems))


def test_every_page_answers_as_described_and_uses_every_key(data):
    document = openapi_document()
    client = Client()
    seen: set[tuple[str, str]] = set()
    requested = set()
    for template, parameters, query, status in _requests(data):
        path = template.format(**parameters)
        response = client.get(path, {"format": "json", **query})
        where = f"GET {path}?{query}"
        assert response.status_code == status, f"{where}: {response.status_code} {response.content[:500]!r}"
        assert response["Content-Type"] == "application/json", where
        body = json.loads(response.content)
        error = _deepest(best_match(_validator(document, template, status).iter_errors(body)))
        assert error is None, (f"{where} does not match the OpenAPI description at "
                               f"{'/'.join(map(str, error.absolute_path))}: {error.message[:500]}")
        _seen(_validated(_model(document, template, status), body), seen)
        requested.add(template)

    pages = {path for path, item in document["paths"].items() if PAGE_TAGS & set(item.get("get", {}).get("tags", ()))}
    assert pages <= requested, f"page operations this test does not request: {sorted(pages - requested)}"
    described = {(name, field) for module in (api_models, benchmark_api_models)
                 for name, model in inspect.getmembers(module, inspect.isclass)
                 if issubclass(model, api_models.Strict) and model is not api_models.Strict
                 for field in model.model_fields}
    unseen = sorted(described - seen)
    assert not unseen, f"keys of the description no response held (extend tests/leaderboard/api_data.py): {unseen}"


def test_a_key_the_model_does_not_name_is_refused():
    """What makes a key added to an as_dict without its model fail: the models forbid unknown keys."""
    row = {"n": 1, "frontier": [], "cost_unknown": [], "cost_per_pass": 0.2}
    with pytest.raises(ValueError, match="cost_per_pass"):
        api_models.CostAccuracy.model_validate(row)
