"""The replay page's view of the masked functions one by one (runs.replay.functions): each judged
alone (its transplant: the verdict and its reason for everyone who may see the attempt, its numbers
and time for staff only), and each final implementation beside the gold body only for those the
gold rule allows (runs.visibility.gold_access)."""
from __future__ import annotations

import html as html_module
import re

import pytest
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext
from django.urls import reverse

from runs.benchmark.masking import MaskTarget, mask_source, replace_function_body
from runs.benchmark.patches import unified_diff
from runs.evaluation.harness import attempt_execute
from runs.evaluation.services import run_create
from runs.evaluation.transplants import transplant_execute
from runs.models import Attempt, Suite, Transplant
from runs.visibility import gold_access, user_may_see_gold_code
from tests.evaluation.conftest import PAIR_EACH_FOUR_PERCENT_HIGH, PAIR_PAPER, PAIR_RUN, PAIR_SCALE, suite_imported
from tests.replay.factories import XSS, XSS_PAYLOADS, make_attempt, make_sample, make_user
from tests.support import require_backend

# A line of a gold body of the pair suite (`return x * 2.0`, `return x * 3.0`); the agent's bodies
# are the same lines with " * 1.04" after them.
PAIR_GOLD_LINE = re.compile(r"return x \* [23]\.0(?! \* 1\.04)")


def page(client, attempt) -> str:
    response = client.get(reverse("replay:attempt", args=[attempt.pk]))
    assert response.status_code == 200
    return response.content.decode()


def text_of(markup: str) -> str:
    """What a reader sees of `markup`: tags dropped, entities decoded (highlighting splits a line
    into spans, so a line of code is only found whole in the text)."""
    return html_module.unescape(re.sub(r"<[^>]+>", "", markup))


def section(markup: str, section_id: str) -> str:
    start = markup.index(f'<section id="{section_id}"')
    return markup[start : markup.index("</section>", start)]


def cells(markup: str, side: str) -> list[str]:
    """The text of each line on one side ("agent" or "gold") of the side-by-side tables."""
    return [text_of(cell) for cell in re.findall(rf'<td class="code side-{side}">(.*?)</td>', markup)]


def everything_anonymous_can_fetch(attempt) -> str:
    """The page, every step body its script fetches, and the whole final patch, as an anonymous user."""
    client = Client()
    fetched = [page(client, attempt)]
    count = len(attempt.trajectory["steps"])
    fetched.append(client.get(reverse("replay:steps", args=[attempt.pk]), {"first": 1, "last": count}).content.decode())
    fetched.append(client.get(reverse("replay:patch", args=[attempt.pk])).content.decode())
    return "\n".join(fetched)


# --- through the real harness: an interaction failure on the pair suite -------------------------


@pytest.fixture
def interaction_failure(tmp_path, workspace_root, redis_queue, transactional_db) -> Attempt:
    """An attempt on suite "pair" (gold not public) whose two functions are each 4% high: right
    alone, wrong together; executed, re-executed and judged function by function in real
    bubblewrap sandboxes."""
    require_backend("bubblewrap")
    suite = suite_imported(tmp_path / "pair-suite", name="pair", paper=PAIR_PAPER,
                           files={"scale.py": PAIR_SCALE, "run.py": PAIR_RUN}, samples="2")
    run = run_create(suite=suite, agent="planted_gold", agent_config={"bodies": PAIR_EACH_FOUR_PERCENT_HIGH},
                     n_values=[2], sample_cap=1, enqueue=False)
    attempt = run.attempts.get()
    attempt_execute(attempt_id=attempt.pk, requeue=False)
    for transplant in Transplant.objects.filter(attempt=attempt):
        assert transplant_execute(transplant_id=transplant.pk, requeue=False) == "done"
    attempt.refresh_from_db()
    assert attempt.function_diagnosis == Attempt.INTERACTION
    return attempt


@pytest.mark.django_db(transaction=True)
def test_an_interaction_failure_anonymous_staff_and_a_public_gold_suite(interaction_failure, client):
    attempt = interaction_failure

    # (a) Anonymous, gold not public: the diagnosis and both verdicts with their reasons, no numbers
    # or times (the agent's code printed them beside the gold code)...
    html = page(client, attempt)
    verdicts = section(html, "functions")
    assert "Interaction failure: every function right alone" in verdicts
    rows = verdicts.split('<tr class="function-verdict">')[1:]
    assert [re.search(r"<code>(.*?)</code>", row)[1] for row in rows] == ["scale.py:scale_a", "scale.py:scale_b"]
    for row in rows:
        shown = text_of(row)
        assert "Right alone" in shown and "passes with the gold bodies of the other masked functions" in shown
        assert "62.4" not in shown and "4.00%" not in shown and not re.search(r"\d+\.\d s", shown)
    assert "of sandbox time" not in verdicts and "shown to staff only" in verdicts
    # ... and the attempt's own verdicts stay where they were: 8.16% off together, the gold number withheld.
    final = section(html, "final-answer")
    assert "8.16%" in final and "withheld" in final and "60.0" not in final
    # No gold body anywhere: not in the page, not in what its script fetches, not in the patch.
    assert 'id="implementations"' not in html and "side-by-side" not in html
    fetched = everything_anonymous_can_fetch(attempt)
    assert not PAIR_GOLD_LINE.search(fetched) and not PAIR_GOLD_LINE.search(text_of(fetched))
    assert "return x * 2.0 * 1.04" in text_of(fetched)  # the agent's own code is public (not a gold agent)

    # (b) Staff: the same verdicts with their numbers and times, and each implementation beside its gold body.
    client.force_login(make_user(is_staff=True))
    html = page(client, attempt)
    verdicts = section(html, "functions")
    assert "Interaction failure: every function right alone" in verdicts
    for row in verdicts.split('<tr class="function-verdict">')[1:]:
        shown = text_of(row)
        # 10 doubled then tripled is 60; one function 4% high gives 62.4, within the 5% tolerance.
        assert "60" in shown and "62.4" in shown and "4.00%" in shown and "pass" in shown
        assert re.search(r"\d+\.\d s", shown)  # its sandbox time
    assert "of sandbox time, not counted in the attempt's time" in verdicts
    implementations = section(html, "implementations")
    assert re.findall(r'<code class="path">(.*?)</code>', implementations) == ["scale.py:scale_a", "scale.py:scale_b"]
    # The agent's bodies lost the docstring (planted_gold writes the body whole); the return lines pair up.
    assert cells(implementations, "agent") == ["", "return x * 2.0 * 1.04", "", "return x * 3.0 * 1.04"]
    assert cells(implementations, "gold") == ['"""Doubles x."""', "return x * 2.0", '"""Triples x."""', "return x * 3.0"]
    assert implementations.count('<tr class="sbs-gold">') == 2 and implementations.count('<tr class="sbs-changed">') == 2
    assert '<span class="tk-k">return</span>' in implementations  # the page's highlighter

    # (c) A suite that declares its gold code public shows it to everyone.
    client.logout()
    Suite.objects.filter(name="pair").update(gold_public=True)
    html = page(client, attempt)
    assert cells(section(html, "implementations"), "gold")[1] == "return x * 2.0"


# --- pages built from rows -------------------------------------------------------------------------

STATS = '''"""Weighted means."""
import math


def weighted_mean_0(values, weights):
    """The weighted mean."""
    total = sum(v * w for v, w in zip(values, weights))
    return total / sum(weights)


def weighted_mean_1(values, weights):
    """The weighted mean."""
    return math.fsum(v * w for v, w in zip(values, weights)) / math.fsum(weights)


def weighted_mean_2(values, weights):
    """The weighted mean."""
    return sum(v * w for v, w in zip(values, weights)) / sum(weights)


def weighted_mean_3(values, weights):
    """The weighted mean."""
    return sum(v * w for v, w in zip(values, weights)) / sum(weights)
'''
GOLD_LINE_0 = "total = sum(v * w for v, w in zip(values, weights))"


def gold_code_sample(tmp_path, *, count: int = 2, suite: Suite | None = None):
    """A sample masking weighted_mean_0 .. weighted_mean_{count-1} of STATS, whose gold code is on
    this server (under tmp_path)."""
    code_dir = tmp_path / "code"
    code_dir.mkdir(parents=True)
    (code_dir / "stats.py").write_text(STATS)
    (code_dir / "run.py").write_text("print(1)\n")
    sample = make_sample(func_ids=tuple(range(count)), **({"suite": suite} if suite else {}))
    sample.paper.code_dir = str(code_dir)
    sample.paper.save(update_fields=["code_dir"])
    return sample


def agent_patch(sample, bodies: dict[str, str], *, append: str = "", extra: str = "") -> str:
    """A final patch against the sample's masked workspace writing `bodies` (name -> body) and
    `append` at the end of stats.py, followed by `extra` sections."""
    functions = list(sample.functions.order_by("func_id"))
    masked = mask_source(STATS, [MaskTarget(f.name, f.description, f.line_hint) for f in functions]).text
    final = masked
    for name, body in bodies.items():
        final = replace_function_body(final, name, body)
    return unified_diff("code/stats.py", masked, final + append) + extra


def with_transplants(attempt, verdicts: list[tuple[str, str]], diagnosis: str = Attempt.INTERACTION):
    """Transplants of the attempt's functions in func_id order: (status, verdict) each."""
    Attempt.objects.filter(pk=attempt.pk).update(function_diagnosis=diagnosis)
    for function, (status, verdict) in zip(attempt.sample.functions.order_by("func_id"), verdicts):
        done = status == Transplant.Status.DONE
        Transplant.objects.create(
            attempt=attempt, function=function, status=status, verdict=verdict,
            reason="passes with the gold bodies of the other masked functions" if done else "",
            score=attempt.reexecution_score if done else None, sandbox_seconds=2.5 if done else None,
        )
    attempt.refresh_from_db()
    return attempt


@pytest.mark.django_db
def test_implementations_are_the_code_the_harness_runs(client, tmp_path):
    sample = gold_code_sample(tmp_path)
    # The agent rewrites weighted_mean_0 with a helper, leaves weighted_mean_1 masked, and edits run.py.
    body = '"""The weighted mean."""\nreturn _dot(values, weights) / sum(weights)'
    patch = agent_patch(sample, {"weighted_mean_0": body}, append="\n\ndef _dot(a, b):\n    return sum(x * y for x, y in zip(a, b))\n",
                        extra=unified_diff("code/run.py", "print(1)\n", "print(2)\n"))
    attempt = make_attempt(sample=sample, final_patch=patch, reexecuted={"mean": 1.0, "spread": 7.0})
    client.force_login(make_user(is_staff=True))
    implementations = section(page(client, attempt), "implementations")
    agent, gold = cells(implementations, "agent"), cells(implementations, "gold")
    # The return lines side by side; the gold line without a counterpart alone on its side.
    assert agent[:3] == ['"""The weighted mean."""', "", "return _dot(values, weights) / sum(weights)"]
    assert gold[:3] == ['"""The weighted mean."""', GOLD_LINE_0, "return total / sum(weights)"]
    assert "raise NotImplementedError" in agent  # weighted_mean_1 is still the stub
    assert "return math.fsum(v * w for v, w in zip(values, weights)) / math.fsum(weights)" in gold
    assert "def _dot" not in implementations  # a helper is not the function's body
    assert "the same as gold" not in implementations
    assert '<tr class="sbs-gold"><td class="ln"></td><td class="code side-agent"></td>' in implementations


@pytest.mark.django_db
def test_a_patch_that_does_not_apply_is_said_instead_of_a_body(client, tmp_path):
    sample = gold_code_sample(tmp_path)
    patch = "--- a/code/stats.py\n+++ b/code/stats.py\n@@ -1,1 +1,1 @@\n-not in the file\n+x = 1\n"
    attempt = make_attempt(sample=sample, final_patch=patch)
    client.force_login(make_user(is_staff=True))
    implementations = section(page(client, attempt), "implementations")
    assert implementations.count("No implementation to show: the final patch does not apply to code/stats.py") == 2
    assert "side-agent" not in implementations


@pytest.mark.django_db
def test_the_gold_code_missing_from_the_server_is_said(client):
    attempt = make_attempt()  # the factory's paper has no code directory
    client.force_login(make_user(is_staff=True))
    assert "is not on this server" in section(page(client, attempt), "implementations")


@pytest.mark.django_db
def test_anonymous_users_get_the_verdicts_but_no_gold_body_unless_the_suite_is_public(client, tmp_path):
    sample = gold_code_sample(tmp_path)
    attempt = with_transplants(
        make_attempt(sample=sample, final_patch=agent_patch(sample, {"weighted_mean_0": "return 0.0"})),
        [(Transplant.Status.DONE, Transplant.Verdict.RIGHT), (Transplant.Status.DONE, Transplant.Verdict.RIGHT)],
    )
    html = page(client, attempt)
    assert "Interaction failure: every function right alone" in html and html.count("Right alone") == 2
    assert GOLD_LINE_0 not in text_of(html) and 'id="implementations"' not in html
    assert not user_may_see_gold_code(user=None, suite=sample.paper.suite)
    Suite.objects.filter(pk=sample.paper.suite_id).update(gold_public=True)
    assert GOLD_LINE_0 in cells(section(page(client, attempt), "implementations"), "gold")


@pytest.mark.django_db
def test_transplants_not_done_show_their_state(client):
    attempt = with_transplants(
        make_attempt(sample=make_sample(func_ids=(0, 1, 2))),
        [(Transplant.Status.QUEUED, ""), (Transplant.Status.RUNNING, ""), (Transplant.Status.GIVEN_UP, Transplant.Verdict.NOT_DECIDABLE)],
        diagnosis=Attempt.PENDING,
    )
    Transplant.objects.filter(status=Transplant.Status.GIVEN_UP).update(reason="the transplant could not run (infrastructure failure): worker died")
    verdicts = section(page(client, attempt), "functions")
    assert "Being judged" in verdicts and "not every function has been judged yet" in verdicts
    labels = re.findall(r'<span class="verdict verdict-other">(.*?)</span>', verdicts)
    assert labels == ["queued", "running", "given up"]
    assert "worker died" in verdicts
    assert "No numbers recorded for this run." not in verdicts  # numbers are staff's
    client.force_login(make_user(is_staff=True))
    verdicts = section(page(client, attempt), "functions")
    assert "No numbers recorded for this run." in verdicts
    assert "of sandbox time" not in verdicts  # none of them ran


@pytest.mark.django_db
def test_attempts_without_transplants_have_no_verdict_table(client):
    html = page(client, make_attempt())
    assert 'id="functions"' not in html and "Which function broke it" not in html


@pytest.mark.django_db
def test_verdicts_and_implementations_are_escaped(client, tmp_path):
    sample = gold_code_sample(tmp_path, count=1)
    body = f"return {XSS!r}"
    attempt = with_transplants(make_attempt(sample=sample, final_patch=agent_patch(sample, {"weighted_mean_0": body})),
                               [(Transplant.Status.DONE, Transplant.Verdict.WRONG)], diagnosis=Attempt.ONE_WRONG)
    Transplant.objects.filter(attempt=attempt).update(reason=XSS)
    client.force_login(make_user(is_staff=True))
    html = page(client, attempt)
    for payload in XSS_PAYLOADS:
        assert payload not in html
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in section(html, "functions")
    assert "&lt;img src=x onerror=alert(1)&gt;" in section(html, "implementations")


@pytest.mark.django_db
@pytest.mark.parametrize("staff", [False, True])
def test_the_page_makes_as_many_queries_whatever_the_number_of_transplants(client, tmp_path, staff):
    if staff:
        client.force_login(make_user(is_staff=True))
    counts = []
    for count in (1, 4):
        sample = gold_code_sample(tmp_path / str(count), count=count)
        attempt = with_transplants(make_attempt(sample=sample, final_patch=agent_patch(sample, {"weighted_mean_0": "return 1.0"})),
                                   [(Transplant.Status.DONE, Transplant.Verdict.RIGHT)] * count)
        page(client, attempt)  # the error steps are found once, then cached
        with CaptureQueriesContext(connection) as queries:
            html = page(client, attempt)
        assert html.count('<tr class="function-verdict">') == count
        assert html.count('<details class="implementation" open>') == (count if staff else 0)
        counts.append(len(queries))
    assert counts[0] == counts[1]


# --- one gold-code rule for the whole replay -----------------------------------------------------


@pytest.mark.django_db
@pytest.mark.parametrize("signup", [False, True])
def test_the_gold_rule(settings, signup):
    settings.SIGNUP_ENABLED = signup  # an account vouches for nobody, whether sign-up is open or not
    private, public = Suite(name="private"), Suite(name="public", gold_public=True)
    member, staff = make_user(), make_user(is_staff=True)
    viewers = (None, member, staff)
    assert [user_may_see_gold_code(user=user, suite=private) for user in viewers] == [False, False, True]
    assert [gold_access(user=user, suite=private).numbers for user in viewers] == [False, False, True]
    assert [user_may_see_gold_code(user=user, suite=public) for user in viewers] == [True, True, True]
    assert [gold_access(user=user, suite=public).numbers for user in viewers] == [True, True, True]
    # Held-out variants and transplants' numbers are staff's whatever the suite declares.
    assert [gold_access(user=user, suite=public).staff for user in viewers] == [False, False, True]
    assert user_may_see_gold_code(user=None, suite=public) and not user_may_see_gold_code(user=None)


@pytest.mark.django_db
def test_a_suite_with_public_gold_shows_the_gold_agents_code_to_everyone(client):
    attempt = make_attempt(agent="gold", model="")
    other = make_attempt(sample=attempt.sample, run=attempt.run)
    urls = [reverse("replay:attempt", args=[attempt.pk]), reverse("replay:steps", args=[attempt.pk]) + "?first=1&last=4",
            reverse("replay:patch", args=[attempt.pk]), reverse("replay:compare") + f"?a={attempt.pk}&b={other.pk}"]
    assert [client.get(url).status_code for url in urls] == [200, 200, 403, 200]
    assert not any("the gold line" in client.get(url).content.decode() for url in urls)
    Suite.objects.filter(pk=attempt.run.suite_id).update(gold_public=True)
    for url in urls:
        response = client.get(url)
        assert response.status_code == 200 and "the gold line" in response.content.decode(), url
