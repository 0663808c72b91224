"""One replay request does bounded work whatever is stored: the database hands over one page of
steps (runs.replay.pages), long text is cut, diffs, file lists, notes and the final patch are
bounded, and the whole patch is a plain-text download. The stored trajectory here is one made
before the upload limits existed, over every one of them."""
from __future__ import annotations

import re

import pytest
from django.urls import reverse

from runs.agents.trajectory import FileChange
from runs.replay.pages import trajectory_page, trajectory_page_in_python
from tests.replay.factories import FUNCTION_DIFF, make_attempt, make_long_attempt, make_sample, make_step, make_trajectory, make_user

pytestmark = pytest.mark.django_db

STEPS = 1100  # over the 1,000 a trajectory may now hold
BIG_DIFF = "--- a/code/big.py\n+++ b/code/big.py\n@@ -0,0 +1,4997 @@\n" + "".join(f"+row_{i} = {i}\n" for i in range(4997))
BIG_PATCH = "--- a/code/m.py\n+++ b/code/m.py\n@@ -0,0 +1,29997 @@\n" + "".join(f"+line_{i} = {i}\n" for i in range(29997))


def huge_attempt(**fields):
    sample = fields.pop("sample", None) or make_sample()
    steps = [
        make_step(index, thought=f"Step {index}.", input_tokens=1, output_tokens=1, cost=0.0,
                  observation=f"ok {index}\n[exit code {1 if index % 7 == 0 else 0}; 0.1 s; cwd code]",
                  exit_code=1 if index % 7 == 0 else 0)
        for index in range(1, STEPS + 1)
    ]
    steps[0].observation = "x" * 1_000_000 + "\n[exit code 0; 0.1 s; cwd code]"
    steps[1].files_changed = [FileChange(path="code/big.py", change="modified", diff=BIG_DIFF)]
    steps[2].files_changed = [FileChange(path=f"code/f{i}.bin", change="added", diff=None, note="binary file") for i in range(1000)]
    steps[3].notes = ["a note"] * 5000
    trajectory = make_trajectory(steps=steps, sample_id=sample.sample_id, final_patch=None)
    return make_attempt(sample=sample, trajectory=trajectory, final_patch=BIG_PATCH, **fields)


def get(client, attempt, **query):
    return client.get(reverse("replay:attempt", args=[attempt.pk]), query)


def test_a_huge_stored_trajectory_is_served_one_bounded_page(client, django_assert_num_queries):
    attempt = huge_attempt()
    # The attempt, the page of its trajectory, its error steps, the compare links, and the paper's gold
    # numbers (read once a while for a viewer of a private suite: runs.analysis.gold_text).
    with django_assert_num_queries(5):
        response = get(client, attempt)
    assert response.status_code == 200
    html = response.content.decode()
    assert len(response.content) < 600_000
    assert html.count('<li class="step') == 20
    assert re.search(r"\[\.\.\. 9\d{5} characters truncated \.\.\.\]", html)  # the 1 MB observation, cut
    # 200 lines of the 5,000-line diff of step 2, and the first 1,000 lines of the 30,000-line patch.
    assert html.count('<span class="dl ') == 200 + 1000
    assert "4800 more lines not shown here; the final patch holds the whole change." in html
    assert html.count('<code class="path">code/f') == 20 and "980 more files changed in this step: not listed here" in html
    assert html.count("<li>a note</li>") == 50 and "... and 4,950 more notes, not shown here" in html
    assert "This trajectory has 1,100 steps, more than the 1,000 this site now accepts" in html
    assert 'data-step-count="1100"' in html and 'data-errors="7 14 21 ' in html and ' 994"' in html  # up to step 1,000
    patch_url = reverse("replay:patch", args=[attempt.pk])
    assert "only its beginning is shown here" in html and f'href="{patch_url}"' in html


def test_pages_link_to_each_other_and_bad_pages_say_why(client):
    attempt = huge_attempt()
    html = get(client, attempt, page=2).content.decode()
    assert html.count('<li class="step') == 20
    assert 'id="step-21" data-step="21"' in html and 'id="step-40" data-step="40"' in html
    assert "Steps 21–40 of 1100" in html
    assert 'href="?page=1#steps" rel="prev"' in html and 'href="?page=3#steps" rel="next"' in html
    assert '<strong aria-current="page">2</strong>' in html and 'href="?page=55#steps">55</a>' in html
    assert 'href="#step-21" data-action="first-error"' not in html and 'href="?page=1#step-7"' in html

    last = get(client, attempt, page=55).content.decode()
    assert 'id="step-1100" data-step="1100"' in last and 'rel="next"' not in last

    missing = get(client, attempt, page=56)
    assert missing.status_code == 404
    assert (f"Attempt {attempt.pk}: there is no page 56 of steps: the trajectory has 1,100 steps, shown 20 to a page "
            "on 55 pages.") in missing.content.decode()
    for bad in ("0", "two", "-1"):
        response = get(client, attempt, page=bad)
        assert response.status_code == 400
        assert "The page of steps must be a whole number from 1 up" in response.content.decode()


def test_the_whole_patch_is_a_plain_text_download(client):
    attempt = make_attempt(final_patch=BIG_PATCH)
    response = client.get(reverse("replay:patch", args=[attempt.pk]))
    assert response.status_code == 200 and response["Content-Type"] == "text/plain; charset=utf-8"
    assert response.content.decode() == BIG_PATCH

    gold = make_attempt(agent="gold", model="")
    url = reverse("replay:patch", args=[gold.pk])
    assert client.get(url).status_code == 403  # the reference implementation, as on the page
    client.force_login(make_user())  # a member sees no more of a private suite's gold (runs.visibility.gold_access)
    assert client.get(url).status_code == 403
    client.force_login(make_user(username="staff-member", is_staff=True))
    assert "the gold line" in client.get(url).content.decode()


def test_comparison_pages_pair_the_same_steps(client):
    long = make_long_attempt(steps=45)
    short = make_attempt(sample=long.sample)  # four steps
    url = reverse("replay:compare")
    first = client.get(url, {"a": long.pk, "b": short.pk}).content.decode()
    assert first.count('<li class="step pair') == 10  # half an attempt page from each side
    html = client.get(url, {"a": long.pk, "b": short.pk, "page": 5}).content.decode()
    assert html.count('<li class="step pair') == 5  # steps 41-45
    assert f"No step 41: attempt {short.pk} ended earlier." in html
    assert f'href="?a={long.pk}&amp;b={short.pk}&amp;page=4#steps" rel="prev"' in html
    assert 'data-errors="3 7 14 21 28 35 42"' in html  # both attempts' errors, every page
    assert client.get(url, {"a": long.pk, "b": short.pk, "page": 6}).status_code == 404


def test_the_database_window_is_the_python_window(django_assert_num_queries):
    """The SQL that slices the stored JSON and finds the error steps agrees with plain Python on
    the same document, odd values included; the error steps are computed once per version of the
    row (then cached) and again when the row changes. A command's status is its step's fields:
    a status line in the output, forged by the program or stored before the fields existed, is
    not read."""
    steps = [
        make_step(1),
        make_step(2, error=True),
        make_step(3, traceback="Traceback ..."),
        make_step(4, observation="Traceback (most recent call last):\n  x\nValueError: y\nthen more output"),
        make_step(5, observation="slow\n[timed out after 60 s; cwd code]", exit_code=137, timed_out=True),
        make_step(6, observation="[exit code 0; 1 s; cwd code]"),
        make_step(7, observation="fine " * 200 + "[exit code 2; 0.1 s; cwd code]", exit_code=2),
        make_step(8, traceback=""),
        make_step(9),
        make_step(10),
        make_step(11),
        make_step(12, observation='{"mean": 2.6}\n[exit code 0; 0.1 s; cwd code]', exit_code=1),
        make_step(13, observation="[exit code 0; 0.1 s; cwd code]\n[exit code 3; 0.1 s; cwd code]", exit_code=0),
        make_step(14, observation="boom\n[exit code 1; 0.1 s; cwd code]", exit_code=None),
        make_step(15, observation="slow\n[timed out after 60 s; cwd code]", exit_code=None),
        make_step(16),
        make_step(17),
        make_step(18),
        make_step(19, exit_code=None),
    ]
    # Values of other types, as uploads stored before the trajectory's fields were typed may hold.
    odd = {9: {"error": 0}, 10: {"observation": {"out": "Traceback (most recent call last):"}}, 11: {"error": "yes"},
           16: {"exit_code": "1"}, 17: {"exit_code": 1.5}, 18: {"exit_code": True}, 19: {"timed_out": "yes"}}
    sample = make_sample()
    stored = make_trajectory(steps=steps, sample_id=sample.sample_id)
    for number, values in odd.items():
        stored["steps"][number - 1].update(values)
    attempt = make_attempt(sample=sample, trajectory=stored, final_patch="")
    for first, count, errors_limit in ((1, 5, 100), (4, 4, 100), (9, 10, 100), (12, 5, 100), (1, 11, 6), (1, 19, 100)):
        window = trajectory_page(attempt_id=attempt.pk, first=first, count=count, errors_limit=errors_limit, patch_chars=40)
        reference = trajectory_page_in_python(attempt_id=attempt.pk, first=first, count=count, errors_limit=errors_limit,
                                              patch_chars=40)
        assert window == reference
    window = trajectory_page(attempt_id=attempt.pk, first=1, count=19, errors_limit=100, patch_chars=40)
    assert window.errors == [2, 3, 4, 5, 7, 10, 11, 12, 19]
    # The attempt has no patch of its own: the trajectory's, cut.
    assert window.patch_head == FUNCTION_DIFF[:40] and window.patch_chars == len(FUNCTION_DIFF)

    with django_assert_num_queries(1):  # the error steps come from the cache
        trajectory_page(attempt_id=attempt.pk, first=1, count=11, errors_limit=100, patch_chars=40)
    trajectory = make_trajectory(steps=steps[:3], sample_id=sample.sample_id)
    type(attempt).objects.filter(pk=attempt.pk).update(trajectory=trajectory)
    with django_assert_num_queries(2):
        assert trajectory_page(attempt_id=attempt.pk, first=1, count=11, errors_limit=100, patch_chars=40).errors == [2, 3]

    for odd in (None, [1, 2], {"format": "autoexperiment.trajectory/1", "steps": "not a list"}):
        attempt = make_attempt(trajectory=odd)
        assert trajectory_page(attempt_id=attempt.pk, first=1, count=5, errors_limit=10, patch_chars=10) == \
            trajectory_page_in_python(attempt_id=attempt.pk, first=1, count=5, errors_limit=10, patch_chars=10)
