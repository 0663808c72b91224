"""The attempt page lists its steps and renders the first screen; the other bodies come from
replay:steps (an escaped HTML fragment, bounded) and a search of the whole trajectory from
replay:search (JSON step numbers from the search index, gold code left out)."""
import json

import pytest
from django.urls import reverse

from runs.analysis.services import attempt_analysis_record
from tests.replay.factories import XSS, make_attempt, make_long_attempt, make_user, make_xss_attempt, text_of
from tests.replay.test_replay_bounds import huge_attempt
from tests.replay.test_replay_pages import _Elements

pytestmark = pytest.mark.django_db


def bodies(client, attempt, **query):
    return client.get(reverse("replay:steps", args=[attempt.pk]), query)


def search(client, attempt, q, **query):
    return client.get(reverse("replay:search", args=[attempt.pk]), {"q": q, **query})


def assert_inert(html: str) -> None:
    parser = _Elements()
    parser.feed(html)
    tags = {tag for tag, _ in parser.tags}
    assert not tags & {"script", "img", "svg", "iframe", "object", "embed", "style"}
    assert [(tag, name) for tag, attrs in parser.tags for name in attrs if name.startswith("on") or name == "style"] == []


def test_the_page_lists_every_step_and_renders_the_first_screen(client, settings):
    settings.REPLAY_FIRST_SCREEN_STEPS = 2
    attempt = make_attempt()  # four steps, the third one crashes
    html = client.get(reverse("replay:attempt", args=[attempt.pk])).content.decode()
    assert html.count('<li class="step') == 4 and html.count('data-pending="1"') == 2
    assert 'id="step-3" data-step="3" data-error="1" data-pending="1"' in html
    line = html[html.index('id="step-3"') : html.index('id="step-4"')]
    assert '<code class="tool">command_line</code>' in line and "exit code 1" in line
    assert '<span class="step-summary">Run the experiment.</span>' in line
    assert "Traceback" not in line  # the body is not in the page
    assert f'data-steps-url="{reverse("replay:steps", args=[attempt.pk])}"' in html
    assert f'data-search-url="{reverse("replay:search", args=[attempt.pk])}"' in html
    # Without a script, the rest of the page's bodies are a link away.
    assert '<noscript><p class="banner">Without JavaScript' in html
    assert f'href="{reverse("replay:steps", args=[attempt.pk])}?first=3&amp;last=4"' in html
    settings.REPLAY_FIRST_SCREEN_STEPS = 5
    assert "<noscript>" not in client.get(reverse("replay:attempt", args=[attempt.pk])).content.decode()


def test_step_bodies_are_the_page_partial_for_the_range_asked(client, django_assert_num_queries):
    attempt = make_attempt()
    page = client.get(reverse("replay:attempt", args=[attempt.pk])).content.decode()
    with django_assert_num_queries(2):  # the attempt, and its steps sliced by the database
        response = bodies(client, attempt, first=3, last=4)
    assert response.status_code == 200 and response["Content-Type"].startswith("text/html")
    assert "Content-Security-Policy" in response.headers
    html = response.content.decode()
    assert html.count("data-body-of=") == 2 and 'data-body-of="3"' in html and 'data-body-of="4"' in html
    assert '<span class="obs-tb">Traceback (most recent call last):' in html
    # The same markup as the page renders for that step.
    step_3 = page[page.index('id="step-3"') : page.index('id="step-4"')]
    assert html[html.index('<header class="step-head">') : html.index("</header>")] in step_3
    # Past the end: only what exists.
    assert bodies(client, attempt, first=4, last=10).content.decode().count("data-body-of=") == 1
    assert bodies(client, attempt, first=9, last=10).content.decode().count("data-body-of=") == 0


def test_step_bodies_are_escaped(client):
    attempt = make_xss_attempt()
    html = bodies(client, attempt, first=1, last=5).content.decode()
    assert_inert(html)
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in html and XSS not in html
    assert '<code class="tool">&lt;img src=x onerror=alert(1)&gt;</code>' in html


def test_gold_code_is_left_out_of_bodies_lines_and_search_for_anonymous_users(client, settings):
    settings.REPLAY_FIRST_SCREEN_STEPS = 1
    attempt = make_attempt(agent="gold", model="")
    attempt_analysis_record([attempt.pk])
    page = client.get(reverse("replay:attempt", args=[attempt.pk])).content.decode()
    line = page[page.index('id="step-2"') : page.index('id="step-3"')]
    assert "weighted_mean" not in line and "<code class=\"tool\">write_file</code>" in line
    html = bodies(client, attempt, first=1, last=4).content.decode()
    assert "the gold line" not in html and "weighted_mean(values, weights): ..." not in text_of(html)
    assert "The reference implementation of this suite, and what it printed, are shown to staff only" in html
    assert search(client, attempt, "def weighted_mean").json()["steps"] == []
    assert search(client, attempt, "def weighted_mean", first=1, last=4).json()["steps"] == []
    assert search(client, attempt, "the gold line", first=1, last=4).json()["steps"] == []

    client.force_login(make_user(is_staff=True))
    html = bodies(client, attempt, first=1, last=4).content.decode()
    assert "the gold line" in html and "def weighted_mean(values, weights): ..." in text_of(html)
    # Staff's search of the steps the page has not loaded finds what staff would see there.
    assert search(client, attempt, "the gold line", first=1, last=4).json()["steps"] == [2]


@pytest.mark.parametrize("query, named", [
    ({}, "first"), ({"first": "1"}, "last"), ({"first": "0", "last": "2"}, "first"), ({"first": "x", "last": "2"}, "first"),
    ({"first": "1", "last": "²"}, "last"), ({"first": "5", "last": "4"}, "last"), ({"first": "1", "last": "21"}, "at most 20"),
    ({"first": "1" * 40, "last": "2"}, "first"),
])
def test_bad_ranges_are_a_400_naming_the_parameter(client, query, named):
    attempt = make_attempt()
    response = bodies(client, attempt, **query)
    assert response.status_code == 400 and named in response.content.decode()


def test_a_request_for_bodies_is_bounded_whatever_is_stored(client, django_assert_num_queries):
    attempt = huge_attempt()  # 1,100 steps, a 1 MB observation, a 5,000-line diff, 1,000 files, 5,000 notes
    # The attempt, the slice of steps, and the paper's gold numbers (read once a while: runs.analysis.gold_text).
    with django_assert_num_queries(3):
        response = bodies(client, attempt, first=1, last=20)
    assert response.status_code == 200 and len(response.content) < 600_000
    html = response.content.decode()
    assert html.count("data-body-of=") == 20
    assert "4800 more lines not shown here" in html and "980 more files changed in this step" in html
    assert bodies(client, attempt, first=1091, last=1110).content.decode().count("data-body-of=") == 10


def test_search_lists_matching_steps_of_the_whole_trajectory(client, django_assert_max_num_queries):
    attempt = make_long_attempt(steps=60)  # a crash every seventh step
    attempt_analysis_record([attempt.pk])
    with django_assert_max_num_queries(2):
        response = search(client, attempt, "IMPLEMENT part 4")
    assert response.status_code == 200
    assert response.json() == {"steps": [4, *range(40, 50)], "indexed": True, "truncated": False}
    assert search(client, attempt, "--step 18").json()["steps"] == [18]
    # The page's steps not loaded are searched exactly, in the whole body (the index holds the first
    # few thousand characters of an observation: the traceback at the end of these is past them).
    with django_assert_max_num_queries(4):  # the attempt, the index (twice), the slice of steps
        response = search(client, attempt, "ValueError: shapes", first=6, last=20)
    assert response.json()["steps"] == [7, 14]
    assert search(client, attempt, "implement part 4", first=1, last=20).json()["steps"] == [4, *range(40, 50)]
    assert search(client, attempt, "x", first=1, last=21).status_code == 400
    assert search(client, attempt, "100%_").json() == {"steps": [], "indexed": True, "truncated": False}  # LIKE characters are text


def test_search_says_when_the_trajectory_is_not_indexed(client):
    attempt = make_attempt()  # analysis never recorded
    assert search(client, attempt, "Traceback").json() == {"steps": [], "indexed": False, "truncated": False}


@pytest.mark.parametrize("q", ["", "   ", "x" * 201])  # a NUL: tests/test_nul_bytes.py, for every address
def test_a_bad_search_is_a_400_naming_q(client, q):
    response = search(client, make_attempt(), q)
    assert response.status_code == 400 and "q must be" in response.content.decode()


def test_hidden_runs_hide_their_bodies_and_search(client):
    attempt = make_attempt()
    type(attempt.run).objects.filter(pk=attempt.run_id).update(hidden=True, created_by=make_user())
    assert bodies(client, attempt, first=1, last=2).status_code == 404
    assert search(client, attempt, "Traceback").status_code == 404
    assert client.post(reverse("replay:search", args=[attempt.pk]), {"q": "x"}).status_code in (403, 404, 405)


def test_search_answer_is_json_numbers_only(client):
    attempt = make_xss_attempt()
    attempt_analysis_record([attempt.pk])
    response = search(client, attempt, "<script>")
    assert response["Content-Type"] == "application/json"
    found = json.loads(response.content)
    assert found["indexed"] and found["steps"] and all(isinstance(n, int) for n in found["steps"])
