"""The run form (/runs/new/): who may use it, the check it shares with run_eval, the cost estimate
before anything is queued, and what an attacker would try (no CSRF token, a forged field after the
estimate, the button pressed twice, markup in the description, another endpoint for the server's key).

Suite "tiny" has one paper with three maskable functions: n=1 gives 3 samples, n=2 3, n=3 1.
"""
import io

import pytest
from django.contrib.auth.models import Permission, User
from django.core.management import CommandError, call_command
from django.test import Client
from django.urls import reverse

from runs.evaluation.services import RunOptionsInvalid, run_create
from runs.models import Attempt, Run

pytestmark = pytest.mark.django_db(transaction=True)

URL = reverse("runs:start")
GOLD = {"suite": "tiny", "agent": "gold", "model": "", "n": "1", "k": "1", "seed": "0", "cap": "100", "context": "full",
        "max_steps": "50", "max_seconds": "1800", "max_cost": "1.0", "history": "", "window": "", "agent_config": "",
        "backend": "", "transplants": "on", "description": ""}


@pytest.fixture
def staff(db):
    return User.objects.create_user("staff", password="a-long-password", is_staff=True)


@pytest.fixture
def staff_client(staff):
    client = Client()
    client.force_login(staff)
    return client


def _estimate(client, **changes):
    return client.post(URL, {**GOLD, **changes})


def _text(response) -> str:
    """The page with its runs of white space made one space."""
    return " ".join(response.content.decode().split())


def _confirm_data(response) -> dict:
    """The fields the estimate's "Queue it" form posts, read from the page as a browser would."""
    import html
    import re

    page = response.content.decode()
    form = page[page.index('id="run-confirm"'):]
    form = form[: form.index("</form>")]
    data = {name: html.unescape(value) for name, value in re.findall(r'<input type="hidden" name="([^"]+)" value="([^"]*)"', form)}
    data.pop("csrfmiddlewaretoken", None)
    data["queue"] = "1"
    return data


def test_anonymous_visitors_are_sent_to_sign_in(client, tiny_suite):
    for response in (client.get(URL), client.post(URL, GOLD)):
        assert response.status_code == 302 and "login" in response["Location"]
    assert not Run.objects.exists()


def test_signed_in_users_without_the_permission_get_403(client, tiny_suite, redis_queue):
    mallory = User.objects.create_user("mallory", password="a-long-password")
    client.force_login(mallory)
    assert client.get(URL).status_code == 403
    estimate = client.post(URL, GOLD)
    assert estimate.status_code == 403
    assert client.post(URL, {**GOLD, "queue": "1", "estimate": "forged"}).status_code == 403
    assert "Start a run" not in client.get(reverse("runs:queue")).content.decode()
    assert not Run.objects.exists() and redis_queue.count == 0


def test_users_granted_start_run_may_start_runs(client, tiny_suite, redis_queue):
    carol = User.objects.create_user("carol", password="a-long-password")
    carol.user_permissions.add(Permission.objects.get(codename="start_run", content_type__app_label="runs"))
    client.force_login(carol)
    assert 'id="start-run"' in client.get(reverse("runs:queue")).content.decode()
    response = client.post(URL, _confirm_data(_estimate(client)))
    assert response.status_code == 302 and response["Location"] == reverse("runs:queue")
    run = Run.objects.get()
    assert run.created_by == carol


def test_a_post_without_the_csrf_token_is_refused(staff, tiny_suite, redis_queue):
    client = Client(enforce_csrf_checks=True)
    client.force_login(staff)
    assert client.post(URL, GOLD).status_code == 403
    assert client.post(URL, {**GOLD, "queue": "1"}).status_code == 403
    assert not Run.objects.exists() and redis_queue.count == 0


def test_the_estimate_comes_first_and_queue_it_queues_the_run_as_run_eval_does(staff_client, staff, tiny_suite, redis_queue):
    response = _estimate(staff_client, n="1,2", k="2", description="form run")
    assert response.status_code == 200
    page = _text(response)
    assert "<strong>12</strong> attempt(s): 6 sample(s)" in page and "n=1: 3, n=2: 3" in page
    assert "calls no model" in page
    assert not Run.objects.exists() and redis_queue.count == 0  # nothing queued by the estimate

    response = staff_client.post(URL, _confirm_data(response), follow=True)

    run = Run.objects.get()
    assert response.redirect_chain == [(reverse("runs:queue"), 302)]
    assert (run.agent, run.model, run.n_values, run.attempts_per_sample, run.created_by) == ("gold", "", [1, 2], 2, staff)
    assert (run.max_steps, run.max_seconds, run.max_cost, run.transplants, run.description) == (50, 1800.0, 1.0, True, "form run")
    assert run.attempts.filter(status=Attempt.QUEUED).count() == 12 and redis_queue.count == 12
    page = response.content.decode()
    assert f'id="run-{run.pk}"' in page and f"Run {run.pk} queued: 12 attempt(s)" in page


def test_the_estimate_uses_the_cap_and_the_mean_of_earlier_runs(staff_client, tiny_suite, redis_queue):
    response = _estimate(staff_client, agent="react", model="openai:gpt-4o", k="2", max_cost="0.5")
    page = _text(response)
    assert "At most <strong>$3.00</strong>: 6 attempt(s) × the $0.5 cap per attempt" in page
    assert "No earlier attempt of react with openai:gpt-4o has a known cost" in page

    earlier = run_create(suite=tiny_suite, agent="react", model="openai:gpt-4o", n_values=[1], enqueue=False)
    Attempt.objects.filter(run=earlier).update(cost=0.1)
    Attempt.objects.filter(pk=earlier.attempts.first().pk).update(cost=None)  # an unknown cost counts for nothing
    page = _text(_estimate(staff_client, agent="react", model="openai:gpt-4o", k="2", max_cost="0.5"))
    assert "About <strong>$0.60</strong>" in page and "$0.1000 over 2 attempt(s) with a known cost" in page


@pytest.mark.parametrize(
    ("changes", "field", "message"),
    [
        ({"suite": "nope"}, "suite", "Select a valid choice"),
        ({"n": "4"}, "n", "n=4 is above suite tiny&#x27;s maximum of 3"),
        ({"n": "1,x"}, "n", "&#x27;x&#x27; is not an integer"),
        ({"k": "0"}, "k", "k must be at least 1, got 0"),
        ({"max_cost": "-1"}, "max_cost", "budgets must be positive: max cost is -1.0 USD"),
        ({"max_seconds": "0"}, "max_seconds", "budgets must be positive"),
        ({"max_steps": "100000"}, "max_steps", "a trajectory holds at most 1,000 steps"),
        ({"backend": "chroot"}, "backend", "Select a valid choice"),
        ({"agent": "react"}, "model", "agent &#x27;react&#x27; needs a model"),
        ({"agent": "react", "model": "gpt-4o"}, "model", "is not a model spec"),
        ({"agent": "react", "model": "openai:gpt-4o@https://attacker.example/v1"}, "model", "may not name an endpoint"),
        ({"agent_config": '{"max_cost": 100}'}, "agent_config", "max_cost is an option of the run itself"),
        ({"agent_config": "[1]"}, "agent_config", "must be a JSON object"),
        ({"agent_config": '{"colour": "blue"}'}, "agent_config", "could not be configured"),
        ({"agent_config": '{"command_timeout": 0}'}, "agent_config", "command_timeout must be positive, got 0"),
        ({"cap": str(2**40)}, "cap", "the sample cap must be between 1 and 2,147,483,647"),
        ({"k": "5000"}, "k", "the run would hold 15,000 attempts (3 samples x k=5000)"),
    ],
)
def test_bad_options_are_refused_naming_the_field(staff_client, tiny_suite, redis_queue, changes, field, message):
    response = _estimate(staff_client, **changes)
    assert response.status_code == 400
    page = response.content.decode()
    section = page[page.index(f'id="field-{field}"'):]
    section = section[: section.index("</p>")]
    assert f'<span class="error field-error">{field}: ' in section and message in section, section
    assert 'id="run-estimate"' not in page
    assert not Run.objects.exists() and redis_queue.count == 0


def test_a_field_forged_after_the_estimate_is_checked_again(staff_client, tiny_suite, redis_queue):
    data = _confirm_data(_estimate(staff_client))
    response = staff_client.post(URL, {**data, "n": "9"})
    assert response.status_code == 400 and "n=9 is above" in response.content.decode()

    # A valid change: not what was estimated, so a new estimate and nothing queued.
    response = staff_client.post(URL, {**data, "k": "3"})
    page = _text(response)
    assert response.status_code == 200 and "The options are not those of the estimate" in page
    assert "<strong>9</strong> attempt(s)" in page
    # A forged or missing signature is no estimate either.
    assert "The options are not those" in staff_client.post(URL, {**data, "estimate": "x:y:z"}).content.decode()
    assert not Run.objects.exists() and redis_queue.count == 0


def test_pressing_queue_it_twice_queues_one_run(staff_client, tiny_suite, redis_queue):
    data = _confirm_data(_estimate(staff_client))
    first = staff_client.post(URL, data)
    second = staff_client.post(URL, data, follow=True)
    assert first.status_code == 302
    assert "queued already" in second.content.decode()
    assert Run.objects.count() == 1 and redis_queue.count == 3


def test_markup_in_the_description_is_text(staff_client, tiny_suite, redis_queue):
    script = '<script>alert(1)</script>"><img src=x onerror=alert(2)>'
    estimate = _estimate(staff_client, description=script)
    assert script not in estimate.content.decode()
    staff_client.post(URL, _confirm_data(estimate))
    run = Run.objects.get()
    assert run.description == script  # stored as typed
    for url in (reverse("runs:queue"), reverse("runs:run_detail", args=[run.pk])):
        page = staff_client.get(url).content.decode()
        assert "<script>alert(1)" not in page and "<img src=x" not in page
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in staff_client.get(reverse("runs:run_detail", args=[run.pk])).content.decode()


def test_the_page_asks_for_no_key_and_shows_none(staff_client, tiny_suite, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-server-secret-123")
    form = staff_client.get(URL).content.decode()
    estimate = _estimate(staff_client, agent="react", model="openai:gpt-4o").content.decode()
    for page in (form, estimate):
        assert "sk-server-secret-123" not in page
        assert 'type="password"' not in page and "api_key" not in page.lower()


# --- the same check in run_eval and run_create -----------------------------------------------------


def test_run_eval_refuses_what_the_form_refuses_naming_the_flag(tiny_suite, settings):
    def run_eval(*args):
        call_command("run_eval", "--suite", "tiny", "--agent", "gold", "--sync", *args, stdout=io.StringIO())

    with pytest.raises(CommandError, match="--n: n=4 is above suite tiny's maximum of 3"):
        run_eval("--n", "1,4")
    with pytest.raises(CommandError, match="--k: k must be at least 1"):
        run_eval("--k", "0")
    with pytest.raises(CommandError, match="--max-cost: budgets must be positive: max cost is -2.0 USD"):
        run_eval("--max-cost", "-2")
    with pytest.raises(CommandError, match="--max-seconds: budgets must be positive: max seconds is inf"):
        run_eval("--max-seconds", "inf")
    with pytest.raises(CommandError, match="--agent-config: max_steps is an option of the run itself"):
        run_eval("--agent-config", '{"max_steps": 100000}')
    settings.RUN_MAX_ATTEMPTS = 5
    with pytest.raises(CommandError, match="--k: the run would hold 6 attempts .* at most 5 \\(RUN_MAX_ATTEMPTS\\)"):
        run_eval("--k", "2")
    assert not Run.objects.exists()


def test_run_create_lists_every_problem(tiny_suite):
    with pytest.raises(RunOptionsInvalid) as raised:
        run_create(suite=tiny_suite, agent="react", n_values=[0], attempts_per_sample=0, max_cost=float("nan"), enqueue=False)
    assert [problem.field for problem in raised.value.problems] == ["model", "n", "k", "max_cost"]
    assert not Run.objects.exists()


def test_the_admin_checks_an_edited_agent_config_as_the_run_form_does(tiny_suite):
    from runs.admin import RunAdminForm

    # A submission's run: its agent_config is a marker, not settings, and is left alone.
    run = Run.objects.create(suite=tiny_suite, agent="noop", n_values=[1], sandbox_backend="bubblewrap",
                             agent_config={"submitted": True})
    unbound = RunAdminForm(instance=run)
    data = {name: "" if (value := unbound[name].value()) is None else value for name in unbound.fields}
    data.pop("hidden", None)
    unchanged = RunAdminForm(data, instance=run)
    assert unchanged.is_valid(), unchanged.errors
    form = RunAdminForm({**data, "agent_config": '{"colour": "blue"}'}, instance=run)
    assert not form.is_valid()
    assert "no setting 'colour'" in form.errors["agent_config"][0]
    form = RunAdminForm({**data, "agent_config": '{"max_seconds": 5}'}, instance=run)
    assert form.errors["agent_config"] == ["max_seconds is an option of the run itself: set it there, not among the agent settings"]
    assert RunAdminForm({**data, "agent_config": '{"command_timeout": 30}'}, instance=run).is_valid()
