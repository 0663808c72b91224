"""What Chromium draws and runs under the site's one Content-Security-Policy: a model named with
HTML shows in the chart's legend and hover label as that literal text, with no link; the admin
sign-in and django-rq's job list render with no policy violation."""
from datetime import UTC, datetime

import pytest

from runs.models import Paper, Sample, Suite
from tests.leaderboard.factories import PASS, make_attempt, make_run
from tests.replay.factories import make_user
from tests.support import redis_test_url, standings_refreshed

LINK = '<a href="https://evil.example">x</a>'
PLACEHOLDER = "%{x} <b>bold</b>"


@pytest.fixture
def hostile_system(transactional_db):
    suite = Suite.objects.create(name="toy", version="1", gold_root="/nonexistent")
    paper = Paper.objects.create(suite=suite, paper_id="p", title="A paper")
    sample = Sample.objects.create(paper=paper, sample_id="p_0", n=1)
    run = make_run(suite, model=LINK, agent=PLACEHOLDER, n_values=(1,), finished=datetime(2026, 1, 1, tzinfo=UTC))
    make_attempt(run, sample, 0, PASS)
    standings_refreshed()


def test_a_model_named_with_html_is_text_in_the_chart(hostile_system, page, browser_events):
    page.goto("/")
    figure = page.locator("#leaderboard-figure")
    page.wait_for_selector("#leaderboard-figure svg.main-svg")
    label = f"{LINK} · {PLACEHOLDER} · full"
    legend = figure.locator(".legend .legendtext")
    assert label in legend.all_text_contents()
    # The hover label, over the system's one point.
    # Plotly listens on a drag layer above the points: move the mouse there, as a person would.
    figure.locator(".scatterlayer .trace .points path.point").first.hover(force=True)
    hover = figure.locator(".hoverlayer .hovertext")
    hover.wait_for()
    assert hover.text_content().startswith(label + "n=1: Pass@1 100.0%")
    # Plotly draws a label's <a href> as an SVG link, <b> as bold: neither is there.
    assert figure.locator("a").count() == 0
    assert figure.locator("tspan[style*='font-weight:bold'], tspan[style*='font-weight: bold']").count() == 0
    browser_events.assert_clean()


def test_admin_sign_in_renders_under_the_policy(page, browser_events, live_server):
    response = page.goto("/admin/login/")
    assert response.status == 200 and "Content-Security-Policy" in {name.title() for name in response.headers}
    assert page.locator("input[name=password]").is_visible()
    browser_events.assert_clean()


@pytest.mark.browser_allows_js_errors
def test_django_rq_job_list_works_under_the_policy(page, browser_events, login, settings):
    import django_rq

    settings.RQ_QUEUES = {settings.EVALUATION_QUEUE: {"URL": redis_test_url()}}
    queue = django_rq.get_queue(settings.EVALUATION_QUEUE)
    jobs = [queue.enqueue("builtins.print", number) for number in range(2)]  # no worker: they wait
    try:
        login(make_user(is_staff=True, is_superuser=True))
        assert page.goto("/django-rq/queues/0/").status == 200
        assert page.locator("input.action-select").count() == 2
        # "Select all" is the admin's actions.js, a static file that starts itself.
        page.click("#action-toggle")
        assert page.locator("input.action-select:checked").count() == 2
        # django-rq's own inline script is refused (settings.py says why that costs nothing) ...
        assert len(browser_events.console_errors) == 1
        assert "Executing inline script violates the following Content Security Policy directive" in browser_events.console_errors[0]
        # ... and the only exceptions are actions.js not finding the selection counter, which
        # django-rq's template lacks, policy or not.
        assert browser_events.page_errors and all(
            "reading 'dataset'" in error for error in browser_events.page_errors
        ), browser_events.page_errors
    finally:
        for job in jobs:
            job.delete()
