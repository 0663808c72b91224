"""The leaderboard, the replay and the explorer used from the keyboard alone (Tab, Enter, Space,
arrows: page.keyboard only, never a click), each control showing where the focus is."""
from __future__ import annotations

from urllib.parse import parse_qs, urlparse

from runs.analysis.services import attempt_analysis_record
from tests.leaderboard.factories import build_board_data
from tests.replay.factories import make_attempt

MAX_TABS = 120


def active_matches(page, selector: str) -> bool:
    return page.evaluate("(selector) => !!document.activeElement && document.activeElement.matches(selector)", selector)


def tab_to(page, selector: str, *, backwards: bool = False) -> None:
    """Presses Tab (Shift+Tab) until the focused element matches `selector`; fails after MAX_TABS."""
    for _ in range(MAX_TABS):
        page.keyboard.press("Shift+Tab" if backwards else "Tab")
        if active_matches(page, selector):
            assert_focus_visible(page)
            return
    raise AssertionError(f"{selector} was not reached with {MAX_TABS} presses of Tab")


def assert_focus_visible(page) -> None:
    """The focused element draws a focus ring: an outline of at least 2 px (site.css :focus-visible)
    or a ring of box-shadow (a replay step, drawn as the current one)."""
    ring = page.evaluate("""() => {
      const element = document.activeElement, style = getComputedStyle(element);
      return {what: element.outerHTML.slice(0, 120), visible: element.matches(':focus-visible'),
              style: style.outlineStyle, width: parseFloat(style.outlineWidth), shadow: style.boxShadow};
    }""")
    outlined = ring["style"] != "none" and ring["width"] >= 2
    assert ring["visible"] and (outlined or ring["shadow"] != "none"), f"no visible focus ring: {ring}"


def query(page) -> dict:
    return parse_qs(urlparse(page.url).query)


def test_the_leaderboard_sorts_filters_and_pages_from_the_keyboard(transactional_db, page, browser_events, monkeypatch):
    monkeypatch.setattr("leaderboard.views.LEADERBOARD_PER_PAGE", 1)  # two systems: two pages
    build_board_data()
    page.goto("/")

    tab_to(page, "#leaderboard-table thead a")  # the first sortable heading: System
    tab_to(page, "#leaderboard-table thead a[href*='sort=cost']")
    page.keyboard.press("Enter")
    page.wait_for_url("**sort=cost**")

    tab_to(page, "select[name=agent]")
    page.keyboard.press("ArrowDown")  # a closed select changes its value with the arrows; the form submits
    page.wait_for_url("**agent=**")
    assert query(page)["sort"] == ["cost"] and query(page)["agent"] != [""]

    page.goto("/")
    tab_to(page, "input[name=unverified]")
    page.keyboard.press("Space")
    page.wait_for_url("**unverified=1**")

    tab_to(page, "#leaderboard-pages a[rel=next]")
    page.keyboard.press("Enter")
    page.wait_for_url("**page=2**")
    assert page.locator("#leaderboard-rows tr.lb-row").count() == 1

    # The table's scroll box is a Tab stop of its own, so the arrows can scroll a wide table.
    tab_to(page, "div.lb-scroll", backwards=True)
    browser_events.assert_clean()


def test_the_replay_steps_from_the_keyboard(transactional_db, page, browser_events):
    attempt = make_attempt()  # four steps, the third one crashes
    page.goto(f"/attempts/{attempt.pk}/")
    page.wait_for_selector("#replay.js-ready")

    tab_to(page, ".replay-toolbar [data-action=next]")
    page.keyboard.press("Enter")
    assert page.evaluate("() => document.querySelector('.step.current').id") == "step-1"
    assert page.evaluate("() => document.activeElement.id") == "step-1"  # the step it selected takes the focus
    assert_focus_visible(page)
    tab_to(page, ".replay-toolbar [data-action=next]", backwards=True)
    page.keyboard.press("Space")
    assert page.evaluate("() => document.querySelector('.step.current').id") == "step-2"

    tab_to(page, ".replay-toolbar [data-action=next-error]")
    page.keyboard.press("Enter")
    assert page.evaluate("() => document.querySelector('.step.current').id") == "step-3"

    # The step keys from the step itself, which has the focus and shows it.
    page.keyboard.press("k")
    assert page.evaluate("() => document.activeElement.id") == "step-2"
    page.keyboard.press("ArrowDown")
    assert page.evaluate("() => document.activeElement.id") == "step-3"
    assert_focus_visible(page)

    tab_to(page, "#replay-search")
    page.keyboard.type("NotImplementedError")
    page.wait_for_function("() => /match/.test(document.getElementById('replay-status').textContent)")
    page.keyboard.press("Escape")
    browser_events.assert_clean()


def test_the_explorer_searches_and_opens_a_hit_from_the_keyboard(transactional_db, page, browser_events):
    attempt = make_attempt()
    attempt_analysis_record([attempt.pk])
    page.goto("/explore/")

    tab_to(page, "input[name=q]")
    page.keyboard.type("NotImplementedError")
    page.keyboard.press("Enter")
    page.wait_for_selector("#explore-hits")

    tab_to(page, ".explore-hit-link")
    page.keyboard.press("Enter")
    page.wait_for_selector("#replay.js-ready")
    assert page.evaluate("() => window.location.hash") == "#step-3"
    browser_events.assert_clean()
