"""The OpenAPI 3.1 description of the site's API and of the JSON its pages offer, served at
/api/v1/openapi.json with a reference page at /api/v1/ (templates/api/reference.html, no script).

Generated, not written by hand: response bodies are the JSON schemas of the pydantic models the
views build their answers through (runs.submissions.api_models; leaderboard.api_models and
.benchmark_api_models, typed down to every nested row, which the explorer's large export is only
checked against), and the pages' query parameters are the fields of the Django forms that validate
them. It holds no example drawn from the database: scripts/fuzz_api.py adds real objects to its own
copy. tests/deploy/test_api_fuzz.py runs schemathesis over every operation against a real gunicorn;
tests/test_openapi.py validates the document and checks that every URL under /api/v1/ is in it;
tests/leaderboard/test_api_models.py checks every page's live JSON against it.

Version 1: a change to a documented shape needs /api/v2/ (the old version kept, announced as
deprecated the way the unversioned /api/submissions/ paths are).
"""
from __future__ import annotations

import copy
import functools
import json

from django import forms
from django.http import JsonResponse
from django.shortcuts import render
from django.views.decorators.http import require_GET
from pydantic import BaseModel
from pydantic.json_schema import models_json_schema

from leaderboard import api_models as pages
from leaderboard import benchmark_api_models as benchmark_pages
from leaderboard.comparison_views import ComparisonForm
from leaderboard.explorer_forms import ExplorerForm
from leaderboard.forms import LeaderboardFilterForm
from runs.benchmark.workspace import CONTEXT_CONDITIONS
from runs.submissions import api_models as submissions

VERSION = "1.0.0"
SLUG_PATTERN = "^[-a-zA-Z0-9_]+$"  # Django's slug converter and SlugField
REF = "#/components/schemas/{model}"
JSON = "application/json"

SUBMISSION_MODELS = [submissions.Submission, submissions.Error, submissions.UploadRefused]
PAGE_MODELS = [
    pages.PageError, pages.FormErrors, pages.Leaderboard, pages.FunctionDifficulty, pages.SystemPage,
    pages.ExplorerExport, benchmark_pages.BenchmarkSuite, benchmark_pages.BenchmarkPaper,
    benchmark_pages.BenchmarkSamples, benchmark_pages.BenchmarkFunction, benchmark_pages.BenchmarkExperiment,
    pages.Comparison,
]


def _ref(model: type[BaseModel]) -> dict:
    return {"$ref": REF.format(model=model.__name__)}


def _json_body(description: str, *models: type[BaseModel]) -> dict:
    schema = _ref(models[0]) if len(models) == 1 else {"anyOf": [_ref(model) for model in models]}
    return {"description": description, "content": {JSON: {"schema": schema}}}


def _path_parameter(name: str, schema: dict, description: str) -> dict:
    return {"name": name, "in": "path", "required": True, "schema": schema, "description": description}


def _query(name: str, description: str, *, schema: dict | None = None, required: bool = False) -> dict:
    return {"name": name, "in": "query", "required": required, "schema": schema or {"type": "string"},
            "description": description}


def _form_parameters(form: type[forms.Form], *, skip: tuple[str, ...] = ("format",),
                     required: tuple[str, ...] = ()) -> list[dict]:
    """The query parameters a page's form validates: any string may be sent (a bad one is a 400
    naming it), so they are described as strings, with the form's own words. `required`: those
    the JSON cannot do without (its absence is a 400 too)."""
    parameters = []
    for name, field in form.base_fields.items():
        if name in skip:
            continue
        words = str(field.help_text or field.label or name.replace("_", " "))
        if isinstance(field, forms.ChoiceField) and (choices := [str(value) for value, _ in field.choices if value != ""]):
            words += f" (one of: {', '.join(choices)})"
        # A slug names an object: said, so that a client (and the fuzzer) sends one.
        schema = {"type": "string", "pattern": SLUG_PATTERN, "maxLength": field.max_length} if isinstance(field, forms.SlugField) else None
        parameters.append(_query(name, words, schema=schema, required=name in required))
    return parameters


FORMAT_JSON = _query("format", "json: this description's JSON (without it the page is HTML)",
                     schema={"type": "string", "enum": ["json"]}, required=True)
PAGE = _query("page", "the page of the list, from 1 (a page that does not exist is a 400)")
TOKEN = [{"token": []}]
REFUSALS = {
    "401": _json_body("no token, an unknown one or another scheme (WWW-Authenticate: Token)", submissions.Error),
    "403": _json_body("a revoked token or an inactive account", submissions.Error),
    "429": _json_body("past a rate limit: retry_after seconds (and the Retry-After header)", submissions.Error),
}


def _page_refusals(*, bad: tuple[type[BaseModel], ...] = (pages.PageError,), found: bool = True) -> dict:
    responses = {
        "400": _json_body("a bad parameter, named", *bad),
        "429": {"description": "past a rate limit of the pages (an HTML page saying when to come back)",
                "content": {"text/html": {"schema": {"type": "string"}}}},
    }
    if found:
        responses["404"] = _json_body("no such object: `error` names it", pages.PageError)
    return responses


HTML = {"text/html": {"schema": {"type": "string"}}}
# A NUL byte in a query parameter of a request that did not ask for JSON (autoexperiment_site.request_bytes).
TEXT = {"text/plain": {"schema": {"type": "string"}}}


def _page(summary: str, model: type[BaseModel], *, parameters: list[dict], tag: str, bad=None, found: bool = True) -> dict:
    """A page's JSON. Without format=json the same address is the HTML page (said, so that a request
    without it, or with another format, is documented too)."""
    responses = {"200": _json_body(summary, model), **_page_refusals(bad=bad or (pages.PageError,), found=found)}
    for status in ("200", "400", "404"):
        if status in responses:
            responses[status]["content"].update(HTML)
            if status == "400":
                responses[status]["content"].update(TEXT)
        elif status == "404":
            responses[status] = {"description": "without format=json: the page saying nothing is there", "content": dict(HTML)}
    return {"get": {
        "summary": summary, "tags": [tag], "operationId": f"page_{model.__name__}",
        "parameters": [FORMAT_JSON, *parameters], "responses": responses,
    }}


def _submission_paths(prefix: str, *, deprecated: bool) -> dict:
    suffix = "_deprecated" if deprecated else ""
    note = " Deprecated: use the /api/v1/ path (responses say so with Deprecation and Link headers)." if deprecated else ""
    create = {
        "summary": "Upload a results file (JSONL, or a zip of it with trajectories)",
        "description": "The file is the body itself (any Content-Type but multipart), or multipart/form-data with "
                       "the file in the field `file`. Every problem is listed with its line and field, and nothing "
                       "is stored if there is any." + note,
        "operationId": f"submission_create{suffix}", "tags": ["submissions"], "deprecated": deprecated,
        "security": TOKEN,
        "parameters": [
            _query("reexecute", "1 to queue a re-execution of every attempt", schema={"type": "string", "enum": ["0", "1"]}),
            _query("transplants", "0: no per-function verdicts of failed attempts at n >= 2 after re-execution",
                   schema={"type": "string", "enum": ["0", "1"]}),
            {"name": "X-Filename", "in": "header", "required": False, "schema": {"type": "string"},
             "description": "the file's name, for the submission's page (raw bodies only)"},
        ],
        "requestBody": {"required": True, "content": {
            "application/x-ndjson": {"schema": {"type": "string"}},
            "application/zip": {"schema": {"type": "string", "format": "binary"}},
            "multipart/form-data": {"schema": {
                "type": "object", "required": ["file"],
                "properties": {"file": {"type": "string", "format": "binary"},
                               "reexecute": {"type": "string", "enum": ["0", "1"]},
                               "transplants": {"type": "string", "enum": ["0", "1"]}},
            }},
        }},
        "responses": {
            "201": {**_json_body("stored and scored (Location: its status URL)", submissions.Submission),
                    "headers": {"Location": {"schema": {"type": "string"}}}},
            "400": _json_body("a file with problems (each named with its line and field), or a body that "
                              "could not be read", submissions.UploadRefused, submissions.Error),
            **REFUSALS,
            "411": _json_body("a chunked body (send Content-Length)", submissions.Error),
            "413": _json_body("a body over the limit (limit_bytes)", submissions.Error),
        },
    }
    detail = {
        "summary": "A submission's status and summary",
        "description": "Hidden submissions answer only their uploader and staff (others get the 404 an unknown id gets)." + note,
        "operationId": f"submission_get{suffix}", "tags": ["submissions"], "deprecated": deprecated,
        "security": TOKEN,
        "responses": {
            "200": _json_body("the submission", submissions.Submission),
            **REFUSALS,
            "404": _json_body("no such submission visible to this token", submissions.Error),
        },
    }
    return {
        f"{prefix}submissions/": {"post": create},
        f"{prefix}submissions/{{id}}/": {
            "parameters": [_path_parameter("id", {"type": "integer", "minimum": 1}, "the submission's id")],
            "get": detail,
        },
    }


SUITE = _path_parameter("suite", {"type": "string", "pattern": SLUG_PATTERN}, "a suite's name (e.g. builtin)")
PAPER = _path_parameter("paper_id", {"type": "string", "pattern": "^[^/]+$"}, "a paper's id in the suite")


def _page_paths() -> dict:
    leaderboard = _form_parameters(LeaderboardFilterForm)
    return {
        "/": _page("The leaderboard: one row per system, the paper's reference rows", pages.Leaderboard,
                   parameters=[*leaderboard, PAGE], tag="leaderboard", bad=(pages.Leaderboard, pages.PageError), found=False),
        "/functions/": _page("How often each masked function is implemented correctly", pages.FunctionDifficulty,
                             parameters=leaderboard, tag="leaderboard", bad=(pages.FunctionDifficulty, pages.PageError), found=False),
        "/systems/{slug}/": {
            "parameters": [_path_parameter("slug", {"type": "string", "pattern": SLUG_PATTERN}, "a system's slug")],
            **_page("One system: numbers by n, runs, samples, failure analysis", pages.SystemPage,
                    parameters=[*leaderboard, _query("samples_page", "the page of its samples, from 1")],
                    tag="leaderboard", bad=(pages.SystemPage, pages.PageError)),
        },
        "/compare/": _page(
            "Two systems sample by sample, per n: who passes, the paired bootstrap difference, the samples where "
            "they differ", pages.Comparison, parameters=_form_parameters(ComparisonForm, required=("a", "b")),
            tag="leaderboard"),
        "/explore/": _page("Attempts across runs and submissions (with q: the steps whose text matches)",
                           pages.ExplorerExport, parameters=_form_parameters(ExplorerForm, skip=("format", "page")),
                           tag="explorer", bad=(pages.FormErrors, pages.PageError), found=False),
        "/benchmark/{suite}/": {"parameters": [SUITE], **_page(
            "A suite: papers, counts, samples by n, gold stability, task downloads", benchmark_pages.BenchmarkSuite,
            parameters=[], tag="benchmark")},
        "/benchmark/{suite}/samples/": {"parameters": [SUITE], **_page(
            "The samples of one n, a page at a time, with the attempts' summary", benchmark_pages.BenchmarkSamples,
            parameters=[_query("n", "masked functions (default: the smallest n)"), PAGE], tag="benchmark")},
        "/benchmark/{suite}/papers/{paper_id}/": {"parameters": [SUITE, PAPER], **_page(
            "A paper: the start of its text, its code tree, functions and experiments", benchmark_pages.BenchmarkPaper,
            parameters=[], tag="benchmark")},
        "/benchmark/{suite}/papers/{paper_id}/functions/{func_id}/": {
            "parameters": [SUITE, PAPER, _path_parameter("func_id", {"type": "integer", "minimum": 0}, "the function's id")],
            **_page("A function: where it is, its stub, how often each system implements it", benchmark_pages.BenchmarkFunction,
                    parameters=[PAGE], tag="benchmark")},
        "/benchmark/{suite}/papers/{paper_id}/experiments/{exp_id}/": {
            "parameters": [SUITE, PAPER, _path_parameter("exp_id", {"type": "integer", "minimum": 0}, "the experiment's id")],
            **_page("An experiment: command, answer format, dependencies, pass rate by system", benchmark_pages.BenchmarkExperiment,
                    parameters=[PAGE], tag="benchmark")},
    }


def _download(operation_id: str, summary: str, media: str, *, description: str, conditional: bool) -> dict:
    """A file to download (no format=json): the file, or the HTML pages of a refusal."""
    ok = {"description": summary, "content": {media: {"schema": {"type": "string", "format": "binary"}}}}
    responses = {"200": ok}
    if conditional:
        ok["headers"] = {name: {"schema": {"type": "string"}, "description": words} for name, words in (
            ("ETag", "the version of what the file holds: send it back in If-None-Match"),
            ("Last-Modified", "when this version was built: send it back in If-Modified-Since"),
        )}
        responses["304"] = {"description": "the version the client names (If-None-Match, If-Modified-Since) is current"}
    responses["404"] = {"description": "no such suite, system or file for this viewer (an HTML page saying so)", "content": dict(HTML)}
    responses["429"] = _page_refusals()["429"]
    return {"get": {"summary": summary, "description": description, "tags": ["downloads"],
                    "operationId": operation_id,
                    "responses": responses}}


def _download_paths() -> dict:
    slug = _path_parameter("slug", {"type": "string", "pattern": SLUG_PATTERN}, "a system's slug")
    dataset = ("A zip of Parquet files and a dataset card (README.md): one row per sample with its task, one "
               "row per attempt of a public run with its verdicts, cost and outcome; no gold. Built once per "
               "change of what it holds.")
    return {
        "/benchmark/{suite}/dataset.zip": {"parameters": [SUITE], **_download(
            "suite_dataset", "A suite's samples and public attempts as a Parquet dataset", "application/zip", conditional=True,
            description=dataset + " Every sample of the suite and every attempt of its public runs.")},
        "/systems/{slug}/dataset.zip": {"parameters": [slug], **_download(
            "system_dataset", "A system's public attempts as a Parquet dataset", "application/zip", conditional=True,
            description=dataset + " The system's public attempts and the samples they were at.")},
        "/benchmark/{suite}/tasks/n{n}-{context}.tar.gz": {
            "parameters": [
                SUITE, _path_parameter("n", {"type": "integer", "minimum": 1}, "masked functions"),
                _path_parameter("context", {"type": "string", "enum": list(CONTEXT_CONDITIONS)}, "what the workspace holds"),
            ],
            **_download("task_download", "The tasks of one n and context, to run an agent elsewhere", "application/gzip", conditional=False, description=(
                "The tasks of one n and context: manifest.jsonl, README.md (the answer and upload formats) and one "
                "workspace archive per sample, no gold. A suite whose gold code is private: staff only (others 404).")),
        },
    }


def _document_paths() -> dict:
    return {
        "/api/v1/openapi.json": {"get": {
            "summary": "This description", "operationId": "openapi", "tags": ["meta"],
            "responses": {"200": {"description": "OpenAPI 3.1", "content": {JSON: {"schema": {"type": "object"}}}}},
        }},
        "/api/v1/": {"get": {
            "summary": "This description as a page to read", "operationId": "reference", "tags": ["meta"],
            "responses": {"200": {"description": "HTML", "content": {"text/html": {"schema": {"type": "string"}}}}},
        }},
    }


@functools.cache
def _document() -> dict:
    _, definitions = models_json_schema(
        [(model, "serialization") for model in [*SUBMISSION_MODELS, *PAGE_MODELS]], ref_template=REF
    )
    return {
        "openapi": "3.1.0",
        "info": {
            "title": "AutoExperiment leaderboard API",
            "version": VERSION,
            "description": "Upload results and read their status with a token (/api/v1/submissions/); read the "
                           "leaderboard, systems, comparison, explorer and benchmark pages as JSON (?format=json). Refusals are "
                           "4xx with a JSON body whose `error` (or `errors`) names the problem. The unversioned "
                           "/api/submissions/ paths are deprecated aliases of version 1.",
        },
        "servers": [{"url": "/"}],
        "tags": [{"name": name} for name in ("submissions", "leaderboard", "explorer", "benchmark", "downloads", "meta")],
        "paths": {
            **_submission_paths("/api/v1/", deprecated=False),
            **_document_paths(),
            **_page_paths(),
            **_download_paths(),
            **_submission_paths("/api/", deprecated=True),
        },
        "components": {
            "schemas": definitions["$defs"],
            "securitySchemes": {"token": {
                "type": "apiKey", "in": "header", "name": "Authorization",
                "description": "'Token <key>' (or 'Bearer <key>'): make a key on /submissions/tokens/",
            }},
        },
    }


def openapi_document() -> dict:
    """The description, a fresh copy each time (callers may change theirs)."""
    return copy.deepcopy(_document())


@require_GET
def openapi_json(request):
    return JsonResponse(openapi_document(), json_dumps_params={"indent": 1})


METHODS = ("get", "post", "put", "patch", "delete")


def _operations(document: dict) -> list[dict]:
    """Each operation for the reference page: its parameters and responses, schemas by name."""
    operations = []
    for path, item in document["paths"].items():
        shared = item.get("parameters", [])
        for method in METHODS:
            if method not in item:
                continue
            operation = item[method]
            responses = []
            for status, response in operation["responses"].items():
                for media, content in response.get("content", {}).items():
                    schema = content["schema"]
                    names = [ref["$ref"].rsplit("/", 1)[1] for ref in schema.get("anyOf", [schema]) if "$ref" in ref]
                    responses.append({"status": status, "description": response["description"], "media": media,
                                      "schemas": names})
            operations.append({
                "method": method.upper(), "path": path, "summary": operation.get("summary", ""),
                "description": operation.get("description", ""), "deprecated": operation.get("deprecated", False),
                "token": bool(operation.get("security")), "tag": operation["tags"][0],
                "parameters": [*shared, *operation.get("parameters", [])], "responses": responses,
            })
    return operations


@require_GET
def reference(request):
    """The description to read: operations, their parameters and responses, and every schema."""
    document = openapi_document()
    schemas = [{"name": name, "description": schema.get("description", ""), "text": json.dumps(schema, indent=1)}
               for name, schema in sorted(document["components"]["schemas"].items())]
    return render(request, "api/reference.html", {
        "info": document["info"], "operations": _operations(document), "schemas": schemas,
    })
