"""No address answers 500 for a NUL byte (which Postgres refuses in any text it is given): every URL
pattern of the site, its admin and its queue dashboards, with a NUL in each of its string parameters
answers 404, and with a NUL in a query parameter answers 400 saying which parameter
(autoexperiment_site.request_bytes)."""
from __future__ import annotations

import re
from urllib.parse import quote

import pytest
from django.test import Client
from django.urls import URLPattern, URLResolver, get_resolver
from django.urls.resolvers import RegexPattern, RoutePattern

from tests.replay.factories import make_attempt, make_sample, make_user

NUL = "x%00y"  # as a browser sends it; the server decodes it into the string the view is given
# Query parameters the site's views read, every one at once (the middleware answers for the first).
QUERY = "&".join(f"{name}={NUL}" for name in (
    "format", "q", "suite", "agent", "context", "system", "paper", "function", "n", "n_min", "n_max", "page", "sort",
    "table", "a", "b", "pick", "with", "next", "samples_page", "unverified", "tolerance", "status", "outcome",
    "exception", "reexecute", "transplants", "first", "last", "step",
))
_CONVERTER = re.compile(r"<(?:(\w+):)?(\w+)>")
_GROUP = re.compile(r"\(\?P<(\w+)>(?:[^()]|\([^()]*\))*\)\??")


def _routes(patterns, prefix: str = ""):
    """Every URL pattern as (its route with parameters as {name}, {name: converter})."""
    for pattern in patterns:
        if isinstance(pattern, URLResolver):
            yield from ((prefix + route, params) for route, params in _routes(pattern.url_patterns, _template(pattern.pattern)[0]))
            continue
        assert isinstance(pattern, URLPattern)
        route, params = _template(pattern.pattern)
        yield prefix + route, params


def _template(pattern) -> tuple[str, dict[str, str]]:
    text = str(pattern)
    if isinstance(pattern, RoutePattern):
        params = {name: converter or "str" for converter, name in _CONVERTER.findall(text)}
        return _CONVERTER.sub(lambda match: "{" + match.group(2) + "}", text), params
    assert isinstance(pattern, RegexPattern)
    params = {name: "regex" for name in _GROUP.findall(text)}
    text = _GROUP.sub(lambda match: "{" + match.group(1) + "}", text)
    return text.replace("^", "").replace("$", "").replace("/?", "/").replace("\\", ""), params


@pytest.fixture
def addresses(db) -> dict:
    """Real values for the parameters that are not under test: the views get as far as they can."""
    attempt = make_attempt(sample=make_sample())
    paper = attempt.sample.paper
    return {"suite": paper.suite.name, "paper_id": paper.paper_id, "pk": str(attempt.pk), "int": "0"}


def _value(name: str, converter: str, addresses: dict) -> str:
    if converter == "int":
        return addresses["pk"] if name == "pk" else addresses["int"]
    return quote(addresses.get(name, "x"))


def _clients() -> dict[str, Client]:
    anonymous, staff = Client(raise_request_exception=False), Client(raise_request_exception=False)
    staff.force_login(make_user(is_staff=True, is_superuser=True))
    return {"anonymous": anonymous, "staff": staff}


@pytest.mark.parametrize("who", ["anonymous", "staff"])
def test_a_nul_in_any_string_parameter_of_any_address_is_a_404(addresses, redis_queue, who):
    routes = dict(_routes(get_resolver().url_patterns))
    # The walk reaches the site's, the admin's and the queue dashboards' string parameters.
    assert routes["benchmark/{suite}/papers/{paper_id}/"] == {"suite": "slug", "paper_id": "str"}
    assert routes["admin/runs/run/{object_id}/change/"] == {"object_id": "path"}
    assert routes["django-rq/queues/{queue_index}/{job_id}/"] == {"queue_index": "int", "job_id": "str"}
    assert routes["accounts/reset/{uidb64}/{token}/"] == {"uidb64": "str", "token": "str"}
    client, answers = _clients()[who], {}
    for route, params in routes.items():
        for target, converter in params.items():
            if converter == "int":
                continue
            values = {name: NUL if name == target else _value(name, kind, addresses) for name, kind in params.items()}
            url = "/" + route.format(**values)
            answers[url] = client.get(url).status_code
    assert answers and {url: status for url, status in answers.items() if status != 404} == {}


@pytest.mark.parametrize("who", ["anonymous", "staff"])
def test_a_nul_in_a_query_parameter_of_any_address_is_a_400_that_names_it(addresses, redis_queue, who):
    client, answers = _clients()[who], {}
    for route, params in _routes(get_resolver().url_patterns):
        url = "/" + route.format(**{name: _value(name, kind, addresses) for name, kind in params.items()})
        response = client.get(f"{url}?{QUERY}")
        # The API's refusals are JSON (autoexperiment_site.openapi), the pages' plain text: the same words.
        text = response.json()["error"] if url.startswith("/api/") else response.content.decode(errors="replace")
        answers[url] = (response.status_code, text[:200])
    expected = (400, "format='x\\x00y': holds a NUL byte (%00), which no page accepts.")
    assert answers and {url: answer for url, answer in answers.items() if answer != expected} == {}


def test_a_nul_in_a_query_parameters_name_is_a_400_too(db):
    response = Client().get("/?x%00y=1")
    assert (response.status_code, response.content.decode()) == (
        400, "A query parameter's name holds a NUL byte (%00), which no page accepts.")


def test_a_cookie_holding_a_nul_is_ignored_as_if_not_sent(db):
    """A quoted cookie value may spell a NUL as \\000: the session middleware would look it up in the database."""
    client = Client()
    client.cookies["sessionid"] = "abcdefgh\x00ijk"
    response = client.get("/accounts/login/")
    assert response.status_code == 200 and not response.wsgi_request.user.is_authenticated
    signed_in = Client()
    signed_in.force_login(make_user())
    signed_in.cookies["theme"] = "dark\x00"  # another cookie's NUL does not cost the visitor their session
    assert signed_in.get("/accounts/login/").wsgi_request.user.is_authenticated
