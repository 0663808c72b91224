"""Every page type in a real Chromium: no axe-core violation (WCAG 2 A/AA and best practices), and
no table wider than the screen at 1280 pixels unless it scrolls in a box of its own.

The pages and their data come from tests/browser/site_pages.py: a page added there is checked here.
"""
from __future__ import annotations

import pytest

from tests.browser.axe import axe_source, axe_violations, inject_axe, violations_report
from tests.browser.conftest import DEFAULT_TIMEOUT_MS
from tests.browser.site_pages import STAFF, site_pages

pytestmark = pytest.mark.slow  # some thirty pages, each loaded and checked

# The leaderboard's first load brings plotly.js (3.5 MB) from a live server in this process, which a
# machine busy with other test processes served in over 10 s.
PAGE_LOAD_TIMEOUT_MS = 30_000


@pytest.fixture(scope="session")
def axe_script() -> str:
    return axe_source()


@pytest.fixture
def every_page(transactional_db, settings):
    """The site's pages with every optional page turned on (sign-up, password reset) and the page
    limits off (a test that loads thirty pages is no abuse)."""
    settings.SIGNUP_ENABLED = True
    settings.PASSWORD_RESET_ENABLED = True
    settings.EMAIL_BACKEND = "django.core.mail.backends.locmem.EmailBackend"
    settings.RATE_LIMITS = {**settings.RATE_LIMITS, "pages-address": None, "heavy-pages-address": None,
                            "pages-user": None, "heavy-pages-user": None}
    return site_pages()


@pytest.fixture
def axe_context(browser, live_server):
    """A context that ignores the site's Content-Security-Policy, for the axe tests alone: the CSP
    rightly refuses the inline script through which axe is injected. Nothing else is changed, so
    the pages render as they do for anyone."""
    context = browser.new_context(base_url=live_server.url, viewport={"width": 1280, "height": 800}, bypass_csp=True)
    context.set_default_timeout(DEFAULT_TIMEOUT_MS)
    context.set_default_navigation_timeout(PAGE_LOAD_TIMEOUT_MS)
    yield context
    context.close()


def sign_in(context, live_server, user) -> None:
    from django.conf import settings
    from django.test import Client

    client = Client()
    client.force_login(user)
    cookie = client.cookies[settings.SESSION_COOKIE_NAME]
    context.add_cookies([{"name": settings.SESSION_COOKIE_NAME, "value": cookie.value, "url": live_server.url}])


def visit_each(context, live_server, data):
    """Yields (site page, Playwright page) for each page of `data`, signed in as staff for theirs,
    once the page and its scripts have loaded."""
    page = context.new_page()
    signed_in = False
    for site_page in data.pages:
        if site_page.who == STAFF and not signed_in:
            sign_in(context, live_server, data.staff)
            signed_in = True
        response = page.goto(site_page.url)
        assert response.status == site_page.status, f"{site_page.name} ({site_page.url}): status {response.status}"
        page.wait_for_load_state("load")
        if page.locator(".js-plotly-plot, #leaderboard-figure").count():
            page.wait_for_selector(".main-svg", state="attached")  # Plotly drew (its SVG is checked too)
        yield site_page, page


def test_every_page_type_has_no_axe_violation(every_page, axe_context, live_server, axe_script):
    reports = []
    for site_page, page in visit_each(axe_context, live_server, every_page):
        inject_axe(page, axe_script)
        violations = axe_violations(page)
        if violations:
            reports.append(f"[{site_page.name}] " + violations_report(site_page.url, violations))
    assert not reports, "\n\n".join(reports)


def test_the_429_page_has_no_axe_violation(transactional_db, settings, axe_context, axe_script):
    settings.RATE_LIMITS = {**settings.RATE_LIMITS, "pages-address": "1/m"}
    page = axe_context.new_page()
    statuses = [page.goto("/functions/").status for _ in range(3)]
    assert statuses[-1] == 429, statuses
    inject_axe(page, axe_script)
    violations = axe_violations(page)
    assert not violations, violations_report("429 page", violations)


# A table is clipped when it reaches past the right edge of its container and no box between them
# scrolls sideways. Returns one line per clipped table; [] when every table fits or scrolls.
CLIPPED_TABLES = """() => {
  const problems = [];
  const page = document.documentElement;
  if (page.scrollWidth > page.clientWidth + 1) problems.push(`the page itself is ${page.scrollWidth}px wide`);
  for (const table of document.querySelectorAll('table')) {
    const name = table.id || table.className || 'a table';
    const right = table.getBoundingClientRect().right;
    let box = table.parentElement, scroller = null;
    for (let node = box; node && node !== document.body; node = node.parentElement) {
      const overflow = getComputedStyle(node).overflowX;
      if (overflow === 'auto' || overflow === 'scroll') { scroller = node; break; }
    }
    if (scroller) {
      const edge = scroller.getBoundingClientRect().right;
      if (edge > page.clientWidth + 1) problems.push(`${name}: its scroll box ends at ${edge}px, past the window`);
      if (scroller.scrollWidth > scroller.clientWidth && scroller.tabIndex < 0)
        problems.push(`${name}: its scroll box cannot be reached with the keyboard (tabindex)`);
      continue;
    }
    if (right > box.getBoundingClientRect().right + 1 || right > page.clientWidth + 1)
      problems.push(`${name}: right edge at ${Math.round(right)}px, past its container `
                    + `(${Math.round(box.getBoundingClientRect().right)}px) and the window (${page.clientWidth}px)`);
  }
  return problems;
}"""


@pytest.fixture
def screen_1280(browser, live_server):
    """A plain context (the site's CSP applies) in a 1280 x 800 window."""
    context = browser.new_context(base_url=live_server.url, viewport={"width": 1280, "height": 800})
    context.set_default_timeout(DEFAULT_TIMEOUT_MS)
    context.set_default_navigation_timeout(PAGE_LOAD_TIMEOUT_MS)
    yield context
    context.close()


def test_no_table_is_clipped_at_1280_pixels(every_page, screen_1280, live_server):
    clipped = []
    for site_page, page in visit_each(screen_1280, live_server, every_page):
        assert page.viewport_size == {"width": 1280, "height": 800}
        clipped += [f"[{site_page.name}] {site_page.url}: {problem}" for problem in page.evaluate(CLIPPED_TABLES)]
    assert not clipped, "\n".join(clipped)


def test_the_run_forms_estimate_and_its_refusal_have_no_axe_violation(every_page, axe_context, live_server, axe_script):
    """The run form's two states that only a POST reaches: the estimate, and an option refused at its field."""
    sign_in(axe_context, live_server, every_page.staff)
    page = axe_context.new_page()
    reports = []
    for agent, model, shown in (("gold", "", "#run-estimate"), ("react", "", "#field-model .field-error")):
        page.goto("/runs/new/")
        page.select_option("#run-form [name=suite]", "builtin")
        page.select_option("#run-form [name=agent]", agent)
        page.fill("#run-form [name=n]", "1")
        page.fill("#run-form [name=model]", model)
        page.click("#estimate-run")
        page.wait_for_selector(shown)
        inject_axe(page, axe_script)
        violations = axe_violations(page)
        if violations:
            reports.append(violations_report(f"run form ({shown})", violations))
    assert not reports, "\n\n".join(reports)
