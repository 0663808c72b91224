"""The replay pages through the test client: content, escaping, gold code, comparison, 500 steps."""
import re
from html.parser import HTMLParser

import pytest
from django.templatetags.static import static
from django.urls import reverse

from tests.replay.factories import (
    XSS,
    XSS_PAYLOADS,
    make_attempt,
    make_long_attempt,
    make_step,
    make_trajectory,
    make_user,
    make_xss_attempt,
    text_of,
)

pytestmark = pytest.mark.django_db


def page(client, attempt) -> str:
    response = client.get(reverse("replay:attempt", args=[attempt.pk]))
    assert response.status_code == 200
    return response.content.decode()


def test_url_names():
    assert reverse("replay:attempt", args=[7]) == "/attempts/7/"
    assert reverse("replay:compare") == "/attempts/compare/"


def test_attempt_page_shows_steps_diffs_errors_costs_and_scores(client):
    attempt = make_attempt()
    html = page(client, attempt)
    for number in range(1, 5):
        assert f'id="step-{number}"' in html
    assert html.count('data-error="1"') == 1 and 'id="step-3" data-step="3" data-error="1"' in html
    assert 'href="#step-3" data-action="first-error"' in html
    assert "exit code 1" in html and '<span class="obs-tb">Traceback (most recent call last):' in html
    assert "Implement weighted_mean as the paper says." in html
    # Each call in the tool's terms: a command as a shell block, a file written as the file.
    assert '<pre tabindex="0" class="code shell">python3 run.py  # step 3</pre>' in html
    assert '<span class="part-label">File written</span><code class="call-target">code/stats.py</code>' in html
    assert "def weighted_mean(values, weights): ..." in text_of(html) and "&quot;path&quot;" not in html
    assert '<span class="dl dl-add">+    <span class="tk-k">return</span> total / sum(weights)</span>' in html
    assert "1200 in / 80 out" in html and "$0.0042" in html and "2.5 s" in html and "(model 1.5 s)" in html
    assert "sample 2401.0" in html and "openai:gpt-4o" in html and "submitted" in html
    assert f'href="/runs/{attempt.run_id}/"' in html
    # Final answer against gold, both verdicts, and the final patch.
    table = html[html.index('id="final-answer"') : html.index('id="final-patch"')]
    assert "Reported answer" in table and "Re-executed code" in table
    assert "<code>mean</code>" in table and ">2.6<" in table and ">0%<" in table
    assert table.count('<span class="verdict-pass">pass</span>') >= 4
    assert "code/stats.py" in html[html.index('id="final-patch"') :]
    assert "Mismatch" not in html


def test_keys_are_documented_and_the_script_is_external(client):
    html = page(client, make_attempt())
    assert "<kbd>j</kbd>" in html and "<kbd>k</kbd>" in html and "<kbd>e</kbd> first error" in html
    assert re.findall(r"<script[^>]*>", html) == [f'<script src="{static("js/replay.js")}" defer>']
    assert static("css/replay.css") in html


def test_mismatch_is_flagged(client):
    attempt = make_attempt(reexecuted={"mean": 9.0, "spread": 7.0})
    assert attempt.mismatch and not attempt.passed
    html = page(client, attempt)
    assert 'class="banner banner-mismatch"' in html
    assert '<tr class="mismatch"' in html and "badge-mismatch" in html


def test_unparseable_answer_and_non_finite_numbers(client):
    html = page(client, make_attempt(answer='{"mean": NaN, "spread": Infinity}'))
    assert ">NaN<" in html and "nan" in html and "infinite" in html
    html = page(client, make_attempt(answer="I could not finish"))
    assert "could not parse the answer" in html and "I could not finish" in html


def test_unknown_attempt_is_404(client):
    assert client.get("/attempts/999999/").status_code == 404
    a = make_attempt()
    assert client.get(f"/attempts/compare/?a={a.pk}&b=999999").status_code == 404


def test_pages_send_a_content_security_policy(client):
    a = make_attempt()
    b = make_attempt(sample=a.sample)
    for url in (f"/attempts/{a.pk}/", f"/attempts/compare/?a={a.pk}&b={b.pk}"):
        policy = client.get(url).headers["Content-Security-Policy"]  # the site's one policy (tests/test_security.py)
        script_src = next(part for part in policy.split("; ") if part.startswith("script-src "))
        assert script_src.startswith("script-src 'self'") and "unsafe-inline" not in script_src


def test_only_get_is_allowed(client):
    a = make_attempt()
    assert client.post(f"/attempts/{a.pk}/").status_code == 405


# --- security ------------------------------------------------------------------------------------


class _Elements(HTMLParser):
    """Every start tag of a page with its attributes, as a browser's tokenizer sees them."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.tags: list[tuple[str, dict]] = []

    def handle_starttag(self, tag, attrs):
        self.tags.append((tag, dict(attrs)))


def assert_no_payload(html: str) -> None:
    for payload in XSS_PAYLOADS:
        assert payload not in html
    parser = _Elements()
    parser.feed(html)
    tags = {tag for tag, _ in parser.tags}
    assert not tags & {"img", "svg", "iframe", "object", "embed"}
    handlers = [(tag, name) for tag, attrs in parser.tags for name in attrs if name.startswith("on")]
    assert handlers == []
    assert [attrs for tag, attrs in parser.tags if tag == "script"] == [{"src": static("js/replay.js"), "defer": None}]


def test_every_piece_of_trajectory_content_is_escaped(client):
    html = page(client, make_xss_attempt())
    assert_no_payload(html)
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in html
    assert "&lt;img src=x onerror=alert(1)&gt;" in html
    assert "&quot;&gt;&lt;svg onload=alert(1)&gt;" in html
    # In each place: thought, tool, arguments, observation, traceback, notes, file name, diff, answer, patch.
    step = html[html.index('id="step-2"') : html.index('id="final-answer"')]
    assert '<code class="tool">&lt;img src=x onerror=alert(1)&gt;</code>' in step
    assert '<code class="path">code/&quot;&gt;&lt;svg onload=alert(1)&gt;.py</code>' in step
    assert 'class="dl dl-add">+x = <span class="tk-s2">&quot;&lt;img src=x onerror=alert(1)&gt;&quot;</span>' in step
    assert "ValueError: &lt;script&gt;" in step
    final = html[html.index('id="final-answer"') :]
    assert "&lt;img src=x onerror=alert(1)&gt;" in final  # answer key and patch


def test_a_stored_upload_with_values_of_other_types_still_shows(client):
    # Uploads were checked only for their required fields and command outcome until the fields were typed.
    stored = make_trajectory()
    stored["header"]["exit_message"] = 5
    stored["steps"][0].update(thought=["a", "list"], arguments="ls -l", notes="one note", cost=None, exit_code="0")
    stored["steps"][1]["files_changed"].append("code/x.py")
    html = page(client, make_attempt(trajectory=stored))
    assert "cannot be read" not in html
    assert "[&#x27;a&#x27;, &#x27;list&#x27;]" in html and "ls -l" in html and "one note" in html
    stored["steps"][0].pop("index")  # a required field: never accepted
    assert "The stored trajectory cannot be read: step 1: index is missing" in page(client, make_attempt(trajectory=stored))


def test_the_comparison_page_escapes_too(client):
    a = make_xss_attempt()
    b = make_attempt(sample=a.sample)
    response = client.get(f"/attempts/compare/?a={a.pk}&b={b.pk}")
    assert response.status_code == 200
    html = response.content.decode()
    assert_no_payload(html)
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in html


@pytest.mark.parametrize("agent", ["gold", "mutant"])
def test_gold_code_is_hidden_from_anonymous_users(client, agent):
    attempt = make_attempt(agent=agent, model="")
    other = make_attempt(sample=attempt.sample)
    html = page(client, attempt)
    assert "the gold line" not in html and "total / sum(weights)" not in html
    assert "weighted_mean(values, weights): ..." not in text_of(html)  # the write_file content
    assert "The reference implementation of this suite, and what it printed, are shown to staff only" in html
    assert 'id="final-patch"' in html and "code/stats.py" in html  # which files changed is not secret
    compare = client.get(f"/attempts/compare/?a={attempt.pk}&b={other.pk}").content.decode()
    step_2 = compare[compare.index('id="step-2"') : compare.index('id="step-3"')]
    assert "the gold line" not in step_2.split('class="column"')[1]

    # A signed-in member of a private suite sees no more (sign-up open or not: runs.visibility.gold_access); staff do.
    client.force_login(make_user())
    assert "the gold line" not in page(client, attempt)
    client.force_login(make_user(username="staff-member", is_staff=True))
    html = page(client, attempt)
    assert "the gold line" in html and "def weighted_mean(values, weights): ..." in text_of(html)
    assert "The reference implementation of this suite, and what it printed, are shown" not in html


def test_with_open_sign_up_only_staff_see_gold_code(client, settings):
    """Anyone can make an account then, so an account alone must not reveal the reference code."""
    settings.SIGNUP_ENABLED = True
    attempt = make_attempt(agent="gold", model="")
    client.force_login(make_user())
    assert "the gold line" not in page(client, attempt)
    assert client.get(f"/attempts/{attempt.pk}/patch/").status_code == 403
    client.force_login(make_user(username="staff-member", is_staff=True))
    assert "the gold line" in page(client, attempt)


def test_other_agents_show_their_code_to_everyone(client):
    html = page(client, make_attempt(agent="react"))
    assert "the gold line" in html and "The reference implementation of this suite, and what it printed, are shown" not in html


# --- comparison ----------------------------------------------------------------------------------


def test_compare_two_attempts_of_the_same_sample(client):
    a = make_attempt()
    b = make_attempt(sample=a.sample, steps=[make_step(1, thought="Only one step here.")],
                     reexecuted={"mean": 1.0, "spread": 7.0})
    response = client.get(reverse("replay:compare"), {"a": a.pk, "b": b.pk})
    assert response.status_code == 200
    html = response.content.decode()
    assert html.index(f"Attempt {a.pk}") < html.index('id="steps"')  # verdicts on top
    assert html.index("banner-mismatch") < html.index('id="steps"')
    assert "Only one step here." in html and "List the files first." in html
    assert f"No step 2: attempt {b.pk} ended earlier." in html
    assert 'id="step-4"' in html and 'id="step-5"' not in html
    # The attempt page links to the comparison.
    assert f"/attempts/compare/?a={a.pk}&amp;b={b.pk}" in page(client, a)


def test_compare_refuses_attempts_of_different_samples(client):
    a, b = make_attempt(), make_attempt()
    response = client.get(reverse("replay:compare"), {"a": a.pk, "b": b.pk})
    assert response.status_code == 400
    assert "only attempts at the same sample can be compared" in response.content.decode()


@pytest.mark.parametrize("query", ["", "?a=1", "?a=1&b=x", "?a=-1&b=2"])
def test_compare_needs_two_ids(client, query):
    response = client.get("/attempts/compare/" + query)
    assert response.status_code == 400
    assert "Give two attempt ids" in response.content.decode()


# --- scale ---------------------------------------------------------------------------------------


def test_a_500_step_trajectory_renders_a_page_of_steps_with_three_queries(client, django_assert_num_queries):
    attempt = make_long_attempt(steps=500)
    client.get(reverse("replay:attempt", args=[attempt.pk]))  # the error steps are found once, then cached
    # The attempt (with run, sample, paper), the page of its trajectory, and the compare links.
    with django_assert_num_queries(3):
        response = client.get(reverse("replay:attempt", args=[attempt.pk]))
    html = response.content.decode()
    assert response.status_code == 200
    assert html.count('<li class="step') == 20
    assert 'id="step-1" data-step="1"' in html and 'id="step-20" data-step="20"' in html and 'id="step-21"' not in html
    assert 'href="#step-7" data-action="first-error"' in html
    # The first screen's bodies come with the page, long observations and step diffs collapsed; the
    # other steps are one line each, their bodies fetched on demand with the same markup.
    assert html.count('<details class="part observation">') == 5
    assert html.count('<details class="file-diff">') == 5
    assert html.count('data-pending="1"') == 15 and 'id="step-6" data-step="6" data-pending="1"' in html
    assert 'id="step-7" data-step="7" data-error="1" data-pending="1"' in html
    assert "Step 7: implement part 7 of the method." in html  # its list line
    bodies = client.get(reverse("replay:steps", args=[attempt.pk]), {"first": 6, "last": 20}).content.decode()
    assert bodies.count('<details class="part observation">') == 15 and bodies.count('<details class="file-diff">') == 15
    assert 'data-step-count="500"' in html and 'data-errors="7 14 21' in html
    last = client.get(reverse("replay:attempt", args=[attempt.pk]), {"page": 25}).content.decode()
    assert last.count('<li class="step') == 20 and 'id="step-500" data-step="500"' in last
    assert 'href="?page=1#step-7" data-action="first-error"' in last  # the first error is on page 1


def test_attempts_of_a_hidden_submission_are_seen_only_by_staff_and_the_uploader(client):
    from runs.models import Submission

    attempt = make_attempt()
    uploader = make_user()
    Submission.objects.create(
        run=attempt.run, uploader=uploader, model="m", agent="a", contact="c", file_sha256="0" * 64,
        file_bytes=1, record_count=1,
    )
    # A submission's run is its uploader's, as submission_create makes it; hiding is the run's.
    type(attempt.run).objects.filter(pk=attempt.run_id).update(created_by=uploader, hidden=True)
    url = reverse("replay:attempt", args=[attempt.pk])
    assert client.get(url).status_code == 404
    client.force_login(make_user())
    assert client.get(url).status_code == 404
    client.force_login(uploader)
    assert client.get(url).status_code == 200
    client.force_login(make_user(is_staff=True))
    assert client.get(url).status_code == 200


def test_out_of_scope_edits_are_listed_with_their_diffs_and_escaped(client):
    dropped = "--- a/code/run.py\n+++ b/code/run.py\n@@ -1 +1 @@\n-print('{\"mean\": 4.0}')\n+print(compute())\n"
    attempt = make_attempt(out_of_scope_edits=[
        {"path": "code/run.py", "reason": "not a file with masked functions", "diff": dropped},
        {"path": f"code/{XSS_PAYLOADS[2]}/__init__.py", "reason": XSS, "diff": ""},
    ])
    html = page(client, attempt)
    section = html[html.index('id="out-of-scope"'):]
    assert "Out-of-scope edits: not run by the re-execution" in section
    assert '<code class="path">code/run.py</code> <span class="change change-dropped">dropped</span>' in section
    assert "not a file with masked functions" in section and "print(compute())" in section
    assert_no_payload(html)


def test_no_out_of_scope_section_without_such_edits(client):
    assert 'id="out-of-scope"' not in page(client, make_attempt())
