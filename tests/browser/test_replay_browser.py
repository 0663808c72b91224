"""The trajectory replay pages in a real headless Chromium: keyboard, search, escaping, pages."""
import pytest
from django.templatetags.static import static
from django.urls import reverse

from tests.replay.factories import (
    XSS,
    XSS_PAYLOADS,
    make_attempt,
    make_long_attempt,
    make_user,
    make_xss_attempt,
)


def current_step(page) -> str | None:
    return page.evaluate("() => { const s = document.querySelector('.step.current'); return s && s.id; }")


def focused(page) -> str | None:
    return page.evaluate("() => document.activeElement && document.activeElement.id")


def hash_of(page) -> str:
    return page.evaluate("() => window.location.hash")


def open_attempt(page, attempt, fragment: str = ""):
    page.goto(reverse("replay:attempt", args=[attempt.pk]) + fragment)
    page.wait_for_selector("#replay.js-ready")


def test_keyboard_steps_forward_and_back_and_jumps_to_the_first_error(page, browser_events):
    attempt = make_attempt()  # four steps, the third one crashes
    open_attempt(page, attempt)
    assert current_step(page) is None
    history = page.evaluate("() => window.history.length")

    page.keyboard.press("j")
    assert (current_step(page), focused(page), hash_of(page)) == ("step-1", "step-1", "#step-1")
    page.keyboard.press("j")
    page.keyboard.press("n")
    assert (current_step(page), hash_of(page)) == ("step-3", "#step-3")
    page.keyboard.press("k")
    assert (current_step(page), focused(page), hash_of(page)) == ("step-2", "step-2", "#step-2")
    page.keyboard.press("ArrowDown")  # arrows move once a step is selected
    page.keyboard.press("ArrowDown")
    assert current_step(page) == "step-4"
    page.keyboard.press("j")  # already at the last step
    assert current_step(page) == "step-4"
    assert "last step" in page.locator("#replay-status").text_content()

    page.keyboard.press("e")
    assert (current_step(page), focused(page), hash_of(page)) == ("step-3", "step-3", "#step-3")
    assert page.locator("#step-3").is_visible()
    assert page.locator("#step-3 .badge-error").text_content().strip().endswith("exit code 1")
    assert page.evaluate("() => { const r = document.getElementById('step-3').getBoundingClientRect(); return r.top >= 0 && r.top < window.innerHeight; }")

    page.keyboard.press("p")
    page.get_by_role("link", name="Jump to first error").click()
    assert (current_step(page), hash_of(page)) == ("step-3", "#step-3")
    # Stepping replaces the URL: it does not fill the back button's history.
    assert page.evaluate("() => window.history.length") == history
    browser_events.assert_clean()


def test_a_step_link_opens_on_that_step(page, browser_events):
    attempt = make_attempt()
    open_attempt(page, attempt, "#step-4")
    assert current_step(page) == "step-4"
    page.keyboard.press("k")
    assert (current_step(page), hash_of(page)) == ("step-3", "#step-3")
    page.locator("#step-1 .step-anchor").click()
    assert current_step(page) == "step-1"
    browser_events.assert_clean()


def test_search_filters_steps_and_keys_stay_in_the_search_box(page, browser_events):
    attempt = make_attempt()
    open_attempt(page, attempt)
    page.keyboard.press("/")
    assert focused(page) == "replay-search"
    page.keyboard.type("nJ weighted_mean")  # "j" and "n" typed in the box do not move
    page.keyboard.press("Control+a")
    page.keyboard.type("Traceback")
    # The search runs after a pause in typing: wait for this query's result, not the one typed before it.
    page.wait_for_function("() => document.getElementById('replay-status').textContent === '1 of 4 steps match'")
    assert current_step(page) is None
    visible = page.evaluate("() => [...document.querySelectorAll('.step')].filter(s => !s.hidden).map(s => s.id)")
    assert visible == ["step-3"]
    assert page.locator("#replay-status").text_content() == "1 of 4 steps match"
    assert page.locator("#step-3 mark.search-hit").first.text_content() == "Traceback"

    page.keyboard.press("Enter")  # to the first match
    assert current_step(page) == "step-3"
    page.keyboard.press("j")  # stepping stays among the matches
    assert current_step(page) == "step-3"

    page.locator("#replay-search").fill("weighted_mean")
    page.wait_for_function("() => document.getElementById('replay-status').textContent.startsWith('2 of')")
    page.locator("#replay-search").press("Escape")
    assert page.evaluate("() => [...document.querySelectorAll('.step')].every(s => !s.hidden)")
    assert page.locator("mark.search-hit").count() == 0
    browser_events.assert_clean()


def assert_nothing_ran(page, browser_events):
    assert browser_events.dialogs == []
    assert page.locator("img").count() == 0
    assert page.locator("svg").count() == 0
    handlers = page.evaluate(
        "() => [...document.querySelectorAll('*')].flatMap(e => [...e.attributes].filter(a => a.name.startsWith('on')).map(a => e.tagName + ' ' + a.name))"
    )
    assert handlers == []
    scripts = page.evaluate("() => [...document.scripts].map(s => s.getAttribute('src'))")
    assert scripts == [static("js/replay.js")]
    assert page.evaluate("() => window.__xss === undefined")


def test_script_and_onerror_payloads_render_as_text_and_run_nothing(page, browser_events):
    attempt = make_xss_attempt()
    open_attempt(page, attempt)
    page.wait_for_load_state("load")
    page.wait_for_timeout(300)  # an <img onerror> would have fired by now
    assert_nothing_ran(page, browser_events)
    thought = page.locator("#step-1 .thought .text")
    assert thought.text_content() == XSS
    assert thought.is_visible()
    tool = page.locator("#step-2 .tool")
    assert tool.text_content() == XSS_PAYLOADS[1]
    observation = page.locator("#step-1 .observation pre")
    assert XSS_PAYLOADS[0] in observation.text_content() and observation.is_visible()

    # The script's own DOM work (search marks, opened <details>) must not turn text into markup.
    page.keyboard.press("/")
    page.keyboard.type(XSS_PAYLOADS[1])
    page.wait_for_function("() => document.querySelectorAll('mark.search-hit').length > 0")
    page.keyboard.press("Enter")
    page.keyboard.press("e")
    page.wait_for_timeout(200)
    assert_nothing_ran(page, browser_events)
    assert page.locator("mark.search-hit").first.text_content() == XSS_PAYLOADS[1]
    assert browser_events.page_errors == [] and browser_events.console_errors == []


def test_comparison_page_runs_nothing_and_steps_by_row(page, browser_events):
    a = make_xss_attempt()
    b = make_attempt(sample=a.sample)
    page.goto(f"{reverse('replay:compare')}?a={a.pk}&b={b.pk}")
    page.wait_for_selector("#replay.js-ready")
    page.wait_for_timeout(300)
    assert_nothing_ran(page, browser_events)
    page.keyboard.press("e")
    assert current_step(page) == "step-2"  # the first row where either attempt has an error
    page.keyboard.press("j")
    assert (current_step(page), hash_of(page)) == ("step-3", "#step-3")
    browser_events.assert_clean()


def test_staff_see_a_private_suites_gold_code_anonymous_users_do_not(page, login, browser_events):
    attempt = make_attempt(agent="gold", model="")
    open_attempt(page, attempt)
    assert page.get_by_text("The reference implementation of this suite, and what it printed, are shown").first.is_visible()
    assert "the gold line" not in page.content()
    login(make_user(is_staff=True))
    open_attempt(page, attempt)
    page.locator("#final-patch").scroll_into_view_if_needed()
    assert page.locator("#final-patch .dl-add").first.is_visible()
    assert "the gold line" in page.locator("#final-patch").text_content()
    browser_events.assert_clean()


def wait_for_step(page, url_end: str, step: str) -> None:
    """After a key opened another page of steps: that page, its script ready, the step selected."""
    page.wait_for_url(lambda url: url.endswith(url_end))
    page.wait_for_selector("#replay.js-ready")
    page.wait_for_function(f"() => {{ const s = document.querySelector('.step.current'); return s && s.id === '{step}'; }}")


@pytest.mark.slow
def test_a_500_step_trajectory_is_shown_in_pages_and_keys_cross_them(page, browser_events):
    attempt = make_long_attempt(steps=500)  # a crash every seventh step; 20 steps to a page
    open_attempt(page, attempt)
    assert page.locator(".step").count() == 20
    page.keyboard.press("e")
    assert current_step(page) == "step-7"
    page.keyboard.press("]")
    assert current_step(page) == "step-14"
    page.keyboard.press("]")  # the next error, step 21, is on page 2
    wait_for_step(page, "?page=2#step-21", "step-21")
    assert page.locator(".step").count() == 20 and page.locator("#step-40").count() == 1
    page.keyboard.press("k")
    page.keyboard.press("k")  # step 20 is on page 1
    wait_for_step(page, "?page=1#step-20", "step-20")
    page.keyboard.press("j")
    wait_for_step(page, "?page=2#step-21", "step-21")

    # A link to a step of another page, as made before the pages existed, opens that page.
    page.goto(reverse("replay:attempt", args=[attempt.pk]) + "#step-500")
    wait_for_step(page, "?page=25#step-500", "step-500")
    page.keyboard.press("k")
    assert current_step(page) == "step-499"
    page.keyboard.press("j")
    page.keyboard.press("j")
    assert current_step(page) == "step-500"
    assert "last step" in page.locator("#replay-status").text_content()

    page.goto(reverse("replay:attempt", args=[attempt.pk]) + "?page=13")
    page.wait_for_selector("#replay.js-ready")
    page.locator("#replay-search").fill("Step 250:")
    page.wait_for_function("() => document.getElementById('replay-status').textContent.startsWith('1 of 20 steps on this page')")
    page.keyboard.press("Enter")
    assert current_step(page) == "step-250"
    page.get_by_role("link", name="Next page →").first.click()
    page.wait_for_url(lambda url: "?page=14" in url)
    page.wait_for_selector("#replay.js-ready")
    assert page.locator(".step").first.get_attribute("id") == "step-261"
    browser_events.assert_clean()


# --- step bodies on demand ----------------------------------------------------------------------


def record_requests(page, path: str) -> list[str]:
    """The URLs of the requests `page` makes from now on to the attempt's `path` (steps/, search/)."""
    seen: list[str] = []
    page.on("request", lambda request: seen.append(request.url) if f"/{path}/?" in request.url else None)
    return seen


def body_loaded(page, number: int) -> bool:
    return page.evaluate(f"() => {{ const s = document.getElementById('step-{number}'); "
                         f"return !s.hasAttribute('data-pending') && !!s.querySelector('.observation'); }}")


def test_step_bodies_load_as_they_come_into_view_and_when_navigated_to(page, browser_events):
    attempt = make_long_attempt(steps=60)  # a crash every seventh step; 20 steps to a page, 5 rendered
    fetches = record_requests(page, "steps")
    page.set_viewport_size({"width": 1200, "height": 700})
    open_attempt(page, attempt)
    assert page.locator(".step").count() == 20
    assert page.locator("#step-20[data-pending]").count() == 1  # far below the first screen: a line
    assert "implement part 20" in page.locator("#step-20 .step-summary").text_content()

    page.keyboard.press("e")  # the first error, step 7: selected at once, its body fetched
    assert current_step(page) == "step-7"
    page.wait_for_function("() => !document.getElementById('step-7').hasAttribute('data-pending')")
    assert body_loaded(page, 7)
    assert page.locator("#step-7 .badge-error").first.text_content().strip().endswith("exit code 1")
    assert "ValueError: shapes do not match" in page.locator("#step-7 .observation").text_content()
    assert page.evaluate("() => { const r = document.getElementById('step-7').getBoundingClientRect(); return r.top >= 0 && r.top < window.innerHeight; }")
    page.keyboard.press("]")
    assert current_step(page) == "step-14"
    page.wait_for_function("() => !document.getElementById('step-14').hasAttribute('data-pending')")

    page.evaluate("() => window.scrollTo(0, document.body.scrollHeight)")  # the rest come into view
    page.wait_for_function("() => document.querySelectorAll('#steps [data-pending]').length === 0")
    assert all(body_loaded(page, number) for number in range(1, 21))
    # Only steps the page did not render were asked for, a page at most a request.
    for url in fetches:
        query = dict(part.split("=") for part in url.split("?")[1].split("&"))
        assert 6 <= int(query["first"]) <= int(query["last"]) <= 20
    assert fetches
    browser_events.assert_clean()


def test_a_link_to_a_step_not_rendered_opens_on_it_with_its_body(page, browser_events):
    attempt = make_long_attempt(steps=60)
    page.set_viewport_size({"width": 1200, "height": 700})
    open_attempt(page, attempt, "#step-18")
    assert current_step(page) == "step-18"
    page.wait_for_function("() => !document.getElementById('step-18').hasAttribute('data-pending')")
    assert body_loaded(page, 18)
    page.wait_for_function("() => { const r = document.getElementById('step-18').getBoundingClientRect(); return r.top >= 0 && r.top < 100; }")
    page.keyboard.press("k")
    assert current_step(page) == "step-17"
    browser_events.assert_clean()


def test_bodies_loaded_on_demand_run_nothing(page, browser_events, settings):
    settings.REPLAY_FIRST_SCREEN_STEPS = 0  # every body comes through the fetch
    attempt = make_xss_attempt()
    open_attempt(page, attempt)
    page.evaluate("() => window.scrollTo(0, document.body.scrollHeight)")
    page.wait_for_function("() => document.querySelectorAll('#steps [data-pending]').length === 0")
    page.wait_for_timeout(300)  # an <img onerror> would have fired by now
    assert_nothing_ran(page, browser_events)
    assert page.locator("#step-1 .thought .text").text_content() == XSS
    assert page.locator("#step-2 code.tool").first.text_content() == XSS_PAYLOADS[1]
    browser_events.assert_clean()


def test_search_asks_the_server_about_steps_not_loaded_and_loads_the_matches(page, browser_events):
    from runs.analysis.services import attempt_analysis_record

    attempt = make_long_attempt(steps=60)
    attempt_analysis_record([attempt.pk])  # the search index of the whole trajectory
    searches = record_requests(page, "search")
    page.set_viewport_size({"width": 1200, "height": 700})
    open_attempt(page, attempt)
    assert page.locator("#step-14[data-pending]").count() == 1
    page.keyboard.press("/")
    page.keyboard.type("ValueError: shapes")  # at the end of the crash steps' long observations
    page.wait_for_function("() => document.getElementById('replay-status').textContent.includes('match')")
    status = page.locator("#replay-status").text_content()
    assert status == "2 of 20 steps on this page match; 0 on other pages of the trajectory"  # past the index's cut
    assert searches and "first=" in searches[-1]
    visible = page.evaluate("() => [...document.querySelectorAll('.step')].filter(s => !s.hidden).map(s => s.id)")
    assert visible == ["step-7", "step-14"]
    assert body_loaded(page, 14) and page.locator("#step-14 mark.search-hit").first.text_content() == "ValueError: shapes"
    page.keyboard.press("Enter")
    assert current_step(page) == "step-7"
    page.keyboard.press("j")
    assert current_step(page) == "step-14"

    page.locator("#replay-search").fill("implement part 4")  # in the index: step 4 here, 40 to 49 elsewhere
    page.wait_for_function("() => document.getElementById('replay-status').textContent.startsWith('1 of 20')")
    assert page.locator("#replay-status").text_content() == "1 of 20 steps on this page match; 10 on other pages of the trajectory"
    page.locator("#replay-search").press("Escape")
    assert page.evaluate("() => [...document.querySelectorAll('.step')].every(s => !s.hidden)")
    browser_events.assert_clean()
