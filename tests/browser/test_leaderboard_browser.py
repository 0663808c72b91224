"""The leaderboard in a real browser: the Plotly chart draws, filters change the table and the URL."""
from urllib.parse import parse_qs, urlparse

import pytest

from tests.leaderboard.factories import build_board_data


@pytest.fixture
def board(transactional_db):
    return build_board_data()


def rows(page) -> int:
    return page.locator("#leaderboard-rows tr.lb-row").count()


def query(page) -> dict:
    return parse_qs(urlparse(page.url).query)


def test_chart_renders_and_a_filter_changes_table_and_url(board, page, browser_events):
    page.goto("/")
    # plotly.js (served from the plotly package) drew the figure as SVG, with a band per system.
    page.wait_for_selector("#leaderboard-figure svg.main-svg")
    # By default re-executed attempts alone count: system B (uploaded, never re-executed) is not shown.
    assert page.locator("#leaderboard-figure .scatterlayer .trace").count() >= 6  # 2 systems x (low, band, line)
    assert page.locator("#leaderboard-figure .legend").count() == 1
    assert rows(page) == 2
    assert page.locator("#leaderboard-reference tr.lb-reference-row").count() == 7

    # Choosing an agent applies at once (no Apply click) and puts the filter in the URL.
    page.select_option("select[name=agent]", "agentless")
    page.wait_for_url("**agent=agentless**")
    assert rows(page) == 1
    assert "anthropic:claude-3-5-sonnet" in page.locator("#leaderboard-rows").inner_text()
    assert query(page) == {"agent": ["agentless"]}  # empty filters stay out of the URL
    page.wait_for_selector("#leaderboard-figure svg.main-svg")

    # The checkbox that includes unverified uploads too, marked as such.
    page.goto("/")
    page.check("input[name=unverified]")
    page.wait_for_url("**unverified=1**")
    assert rows(page) == 3
    assert page.is_checked("input[name=unverified]")
    assert "reported numbers, not re-executed" in page.locator("#leaderboard-rows").inner_text()

    # n range with the Apply button; sorting by a column heading keeps the filters.
    page.fill("input[name=n_min]", "2")
    page.click("button[type=submit]")
    page.wait_for_url("**n_min=2**")
    assert rows(page) == 1
    page.click("#leaderboard-table thead >> text=Cost / attempt")
    page.wait_for_url("**sort=cost**")
    assert query(page) == {"unverified": ["1"], "n_min": ["2"], "sort": ["cost"]}
    assert rows(page) == 1
    page.click("#leaderboard-table thead >> text=Cost / attempt")  # again: reversed
    page.wait_for_url("**sort=-cost**")
    assert page.locator("#leaderboard-table thead a.lb-sorted.lb-desc").count() == 1
    browser_events.assert_clean()  # no CSP violation, no missing static file, no JS error


def test_a_shared_url_reproduces_the_view(board, page, browser_events):
    page.goto("/?context=full&sort=name&unverified=1")
    assert rows(page) == 2  # A, and B's unverified uploads, asked for
    assert page.locator("select[name=context]").input_value() == "full"
    assert page.is_checked("input[name=unverified]")
    page.wait_for_selector("#leaderboard-figure svg.main-svg")
    # A system's page, from its row.
    page.locator("#leaderboard-rows a.lb-system-name").first.click()
    page.wait_for_url("**/systems/**")
    assert page.locator("#system-samples tbody tr").count() >= 3
    # Its tolerance curve draws (one line per n) beside its table.
    page.wait_for_selector("#leaderboard-figure svg.main-svg")
    assert page.locator("#leaderboard-figure .scatterlayer .trace").count() >= 1
    assert page.locator("#system-tolerance thead th").count() == 8  # n, samples, six tolerances
    browser_events.assert_clean()


def test_the_leaderboard_sorts_by_pass1_at_a_chosen_tolerance(board, page, browser_events):
    page.goto("/")
    page.select_option("select[name=tolerance]", "0.01")
    page.wait_for_url("**tolerance=0.01**")
    heading = page.locator("#leaderboard-table thead a", has_text="at 1%").first
    heading.click()
    page.wait_for_url("**pass1_tol_n**")
    assert query(page)["tolerance"] == ["0.01"]
    assert page.locator("#leaderboard-table thead a.lb-sorted").count() == 1
    browser_events.assert_clean()


def test_bad_filter_shows_a_message(board, page, browser_events):
    response = page.goto("/?n_min=0&agent=react&unverified=1")
    assert response.status == 400
    assert "Some filters were not understood" in page.locator("#filter-problems").inner_text()
    assert rows(page) == 2  # agent=react and unverified=1 still apply
    browser_events.console_errors.clear()  # the 400 status itself is reported by Chromium
    browser_events.assert_clean()


def test_sorting_by_n50_then_a_system_page_draws_its_fitted_curve(board, page, browser_events):
    page.goto("/")
    page.click("#n50-column a")
    page.wait_for_url("**sort=-n50**")
    assert page.locator("#leaderboard-table thead a.lb-sorted.lb-desc").count() == 1
    # System A has n = 1 and 2 (its n50 is determined, first); C only n = 1 (not determined, last).
    first = page.locator("#leaderboard-rows tr.lb-row").first
    assert first.locator(".lb-n50 strong").count() == 1
    assert page.locator("#leaderboard-rows tr.lb-row").last.locator(".lb-n50 .lb-muted").inner_text() == "—"
    page.wait_for_selector("#leaderboard-figure svg.main-svg")
    first.locator("a.lb-system-name").click()
    page.wait_for_url("**/systems/**")
    # Its points and the fit dotted over them, n50 marked.
    page.wait_for_selector("#curve-figure svg.main-svg")
    assert page.locator("#curve-figure .scatterlayer .trace").count() == 2
    assert "n50 =" in page.locator("#curve-summary").inner_text()
    browser_events.assert_clean()
