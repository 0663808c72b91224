"""The search across trajectories in a real headless Chromium: type a query, submit, open a hit,
land on the replay with that step in view."""
from runs.analysis.services import attempt_analysis_record
from tests.replay.factories import make_attempt


def test_a_search_opens_the_replay_at_the_step_it_found(page, browser_events, settings):
    settings.REPLAY_STEPS_PER_PAGE = 2  # the hit (step 3) is on the replay's second page
    attempt = make_attempt()  # four steps; step 3's observation is a NotImplementedError traceback
    other = make_attempt()
    attempt_analysis_record([attempt.pk, other.pk])

    page.goto("/explore/")
    page.get_by_label("Search steps").fill("NotImplementedError traceback")
    page.locator("#explore-submit").click()
    page.wait_for_selector("#explore-hits")
    links = page.locator(".explore-hit-link")
    assert links.count() == 2  # newest attempt first
    assert links.first.text_content() == f"Attempt {other.pk}, step 3"
    assert page.locator(".explore-hit mark").first.text_content().lower() in ("notimplementederror", "traceback")

    page.locator(".explore-hit-link", has_text=f"Attempt {attempt.pk}, step 3").click()
    page.wait_for_selector("#replay.js-ready")
    assert page.evaluate("() => window.location.pathname + window.location.search + window.location.hash") == (
        f"/attempts/{attempt.pk}/?page=2#step-3"
    )
    assert page.evaluate("() => { const s = document.querySelector('.step.current'); return s && s.id; }") == "step-3"
    assert page.evaluate(
        "() => { const r = document.getElementById('step-3').getBoundingClientRect();"
        " return r.top >= 0 && r.top < window.innerHeight; }"
    )
    browser_events.assert_clean()
