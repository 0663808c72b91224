"""Cost against accuracy in a real browser: the chart draws with its frontier and its n buttons switch n."""
import os

import pytest

from tests.leaderboard.factories import build_board_data


@pytest.fixture
def board(transactional_db):
    return build_board_data()


def test_cost_chart_draws_the_frontier_and_switches_n(board, page, browser_events):
    page.goto("/?unverified=1")  # the board's system B is an upload that was never re-executed
    page.wait_for_selector("#cost-figure svg.main-svg")
    # n=1 first: the frontier line and two placed systems (the third's cost is unknown, listed below).
    assert page.locator("#cost-figure .scatterlayer .trace").count() == 3
    assert page.locator("#cost-figure .legend").text_content().count("Pareto frontier") == 1
    assert "Cost unknown at n = 1" in page.locator("#cost-accuracy").inner_text()
    if os.environ.get("PARETO_SCREENSHOT"):  # to look at the chart: PARETO_SCREENSHOT=/tmp/cost.png
        page.locator("#cost-accuracy").screenshot(path=os.environ["PARETO_SCREENSHOT"].replace(".png", "-n1.png"))
    page.locator("#cost-figure .updatemenu-button", has_text="n = 2").click()
    page.wait_for_function("document.querySelectorAll('#cost-figure .scatterlayer .trace').length === 2")
    if os.environ.get("PARETO_SCREENSHOT"):
        page.locator("#cost-accuracy").screenshot(path=os.environ["PARETO_SCREENSHOT"])
    assert page.locator("#leaderboard-rows .lb-frontier").count() == 2
    browser_events.assert_clean()  # no CSP violation, no missing static file, no JS error
