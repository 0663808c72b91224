"""One Content-Security-Policy, from django-csp's middleware, on every page of the site, signed in
and not, with X-Content-Type-Options and Referrer-Policy beside it; the admin and django-rq pages
render under it, with no inline script but django-rq's dead one (settings.py says why).

Every URL name of the site is requested (new pages are covered without editing this file); the
admin's and django-rq's hundreds of URLs are sampled. POST-only views answer GET with 405, which
carries the headers like any other response.
"""
from __future__ import annotations

import re

import pytest
from django.test import Client
from django.urls import URLPattern, URLResolver, get_resolver, reverse

from runs.models import Submission
from runs.submissions.services import token_create
from tests.replay.factories import make_attempt, make_user
from tests.support import redis_test_url

THIRD_PARTY = {"admin", "django_rq"}
# Placeholders for URL arguments that name no row of the fixture.
PLACEHOLDERS = {"int": 999_999, "str": "x", "slug": "x", "path": "x"}


def site_urls() -> list[tuple[str, dict[str, str]]]:
    """(name with namespace, {argument: converter type}) of every named URL outside THIRD_PARTY."""
    found = []

    def walk(patterns, namespace):
        for pattern in patterns:
            if isinstance(pattern, URLResolver):
                if pattern.namespace in THIRD_PARTY:
                    continue
                inner = ":".join(part for part in (namespace, pattern.namespace) if part)
                walk(pattern.url_patterns, inner)
            elif isinstance(pattern, URLPattern) and pattern.name:
                converters = getattr(pattern.pattern, "converters", {})
                kinds = {name: type(converter).__name__.removesuffix("Converter").lower() for name, converter in converters.items()}
                name = f"{namespace}:{pattern.name}" if namespace else pattern.name
                if (name, kinds) not in found:
                    found.append((name, kinds))

    walk(get_resolver().url_patterns, "")
    return found


SITE_URLS = site_urls()


@pytest.fixture
def rows(db):
    """A user's run with an attempt and a submission, and their API token."""
    user = make_user()
    attempt = make_attempt()
    run = attempt.run
    run.created_by = user
    run.save(update_fields=["created_by"])
    submission = Submission.objects.create(
        run=run, uploader=user, model=run.model, agent=run.agent, contact="me@example.org",
        file_sha256="0" * 64, file_bytes=1, record_count=1,
    )
    token, _ = token_create(user=user, name="ci")
    return {"user": user, "attempt": attempt, "run": run, "submission": submission, "token": token}


def url_of(name: str, kinds: dict[str, str], rows: dict) -> str:
    values = {}
    for argument, kind in kinds.items():
        if argument == "pk":
            if name.startswith("runs:"):
                values[argument] = rows["run"].pk
            elif name == "submissions:token_revoke":
                values[argument] = rows["token"].pk
            elif name.startswith("submissions:"):
                values[argument] = rows["submission"].pk
            elif name.startswith("replay:"):
                values[argument] = rows["attempt"].pk
        values.setdefault(argument, PLACEHOLDERS.get(kind, "x"))
    url = reverse(name, kwargs=values)
    if name == "replay:compare":
        url += f"?a={rows['attempt'].pk}&b={rows['attempt'].pk}"
    return url


def policy() -> dict[str, list[str]]:
    from csp.utils import build_policy

    return {part.split()[0]: part.split()[1:] for part in build_policy().split("; ")}


def assert_headers(response, url: str) -> None:
    assert response.status_code != 500, url
    header = response.headers.get("Content-Security-Policy")
    assert header, f"{url} ({response.status_code}) sends no Content-Security-Policy"
    directives = {part.split()[0]: part.split()[1:] for part in header.split("; ")}
    assert directives == policy(), url
    assert response.headers["X-Content-Type-Options"] == "nosniff", url
    assert response.headers["Referrer-Policy"] == "same-origin", url


def test_the_policy():
    directives = policy()
    assert directives["default-src"] == ["'self'"]
    assert directives["script-src"] == ["'self'"]
    assert directives["style-src"] == ["'self'", "'unsafe-inline'"]  # Plotly's inline styles
    assert directives["object-src"] == directives["base-uri"] == directives["frame-ancestors"] == ["'none'"]
    # The pages the issue found without a policy are among those requested below.
    assert {"submissions:upload", "submissions:detail", "submissions:tokens", "runs:queue", "runs:run_detail"} <= {
        name for name, _ in SITE_URLS
    }


@pytest.mark.parametrize("signed_in", [False, True], ids=["anonymous", "signed-in"])
def test_every_page_sends_the_policy(rows, signed_in):
    client = Client()
    if signed_in:
        client.force_login(rows["user"])
    statuses = {}
    for name, kinds in SITE_URLS:
        url = url_of(name, kinds, rows)
        response = client.get(url)
        assert_headers(response, url)
        statuses[name] = response.status_code
    # Real pages were rendered, not only errors: the ones each visitor may see.
    ok = {name for name, status in statuses.items() if status == 200}
    assert {"leaderboard:home", "leaderboard:functions", "replay:attempt", "replay:compare", "submissions:detail"} <= ok
    if signed_in:
        assert {"submissions:upload", "submissions:tokens", "submissions:mine", "runs:queue", "runs:run_detail"} <= ok


def test_admin_and_django_rq_render_under_the_policy(db, settings):
    settings.RQ_QUEUES = {settings.EVALUATION_QUEUE: {"URL": redis_test_url()}}
    anonymous = Client()
    login = anonymous.get(reverse("admin:login"))
    assert login.status_code == 200 and b'name="password"' in login.content
    assert_headers(login, "admin:login")

    staff = Client()
    staff.force_login(make_user(is_staff=True, is_superuser=True))
    for url in (reverse("admin:index"), reverse("admin:runs_run_changelist"), reverse("django_rq:home"),
                reverse("django_rq:jobs", args=[0]), reverse("django_rq:failed_jobs", args=[0])):
        response = staff.get(url)
        assert response.status_code == 200, url
        assert_headers(response, url)
        # No inline script the pages need: the policy blocks them all (JSON data is not run).
        for attributes, body in re.findall(r"<script([^>]*)>(.*?)</script>", response.content.decode(), re.S):
            if "src=" not in attributes and "application/json" not in attributes:
                assert url.startswith("/django-rq/") and body.split() == [
                    "(function($)", "{", "$(document).ready(function($)", "{", '$("tr', 'input.action-select").actions();',
                    "});", "})(django.jQuery);",
                ], f"{url}: an inline script the policy blocks: {body[:200]!r}"
