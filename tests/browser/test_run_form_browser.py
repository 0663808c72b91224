"""Starting a run from the site in a real headless Chromium: the queue page's link, the form, the
cost estimate, "Queue it", and the run on the queue at once; a bad option is shown at its field."""
from __future__ import annotations

from runs.models import Attempt, Run
from tests.replay.factories import make_user


def _fill(page, **values) -> None:
    for name, value in values.items():
        page.fill(f"#run-form [name={name}]", value)


def test_staff_queue_a_run_from_the_form(page, login, builtin, redis_queue, browser_events):
    staff = login(make_user(is_staff=True))
    page.goto("/runs/")
    page.click("#start-run")
    page.wait_for_url("**/runs/new/")

    page.select_option("#run-form [name=suite]", "builtin")
    page.select_option("#run-form [name=agent]", "gold")
    _fill(page, n="1", k="2", cap="1", description="<script>window.__injected = 1</script>")
    page.click("#estimate-run")
    page.wait_for_selector("#run-estimate")

    # 4 papers, one n=1 sample each under the cap, twice: nothing is queued until "Queue it".
    assert page.inner_text("#estimate-attempts").startswith("8 attempt(s): 4 sample(s)")
    assert "calls no model" in page.inner_text("#estimate-ceiling")
    assert page.inner_text("#estimate-description") == "<script>window.__injected = 1</script>"
    assert not Run.objects.exists()

    page.click("#queue-run")
    page.wait_for_url("**/runs/")
    run = Run.objects.get()
    assert (run.agent, run.n_values, run.attempts_per_sample, run.sample_cap, run.created_by_id) == ("gold", [1], 2, 1, staff.pk)
    assert run.attempts.filter(status=Attempt.QUEUED).count() == 8 and redis_queue.count == 8
    row = page.locator(f"#run-{run.pk}")
    assert row.get_attribute("data-status") == "queued"
    assert row.locator(".count-queued").inner_text() == "8"
    assert f"Run {run.pk} queued: 8 attempt(s)" in page.inner_text(".messages")
    assert page.evaluate("window.__injected") is None
    browser_events.assert_clean()


def test_a_bad_option_is_shown_at_its_field_and_nothing_is_queued(page, login, builtin, redis_queue, browser_events):
    login(make_user(is_staff=True))
    page.goto("/runs/new/")
    page.select_option("#run-form [name=agent]", "react")
    _fill(page, n="1", model="")
    page.click("#estimate-run")
    page.wait_for_selector("#field-model .field-error")

    assert "model: agent 'react' needs a model" in page.inner_text("#field-model .field-error")
    assert page.locator("#run-estimate").count() == 0
    assert not Run.objects.exists() and redis_queue.count == 0
    # The refused form is answered with status 400, which Chromium logs; nothing else may be.
    assert browser_events.dialogs == [] and browser_events.page_errors == []
    assert all("status of 400" in message for message in browser_events.console_errors), browser_events.console_errors
