"""The leaderboard's rows rendered once per computation of their numbers (leaderboard.table), its board
kept while the standings are unchanged (selectors.leaderboard_get) and its figures' text made once
(figures.FigurePayload): a row, board or figure reused is never one whose content changed since."""
import re

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import set_script_prefix
from django.utils.html import json_script

from leaderboard import figures, selectors
from leaderboard.figures import FigurePayload
from leaderboard.rules import LeaderboardFilters
from leaderboard.selectors import leaderboard_get
from leaderboard.standings import standings_refresh, standings_refresh_queued
from leaderboard.templatetags.leaderboard_format import figure_script
from runs.evaluation.services import runs_set_hidden
from runs.models import Attempt, Run
from runs.signals import results_changed_send
from tests.leaderboard.test_pareto import row_html, systems

pytestmark = pytest.mark.django_db
ROW_TEMPLATE = "leaderboard/_row.html"


@pytest.fixture
def client(unverified_view_client):
    """This module's numbers are over every counted attempt, unverified uploads included (?unverified=1)."""
    return unverified_view_client


@pytest.fixture(autouse=True)
def _nothing_built_in_this_process():
    """Each test starts as a web process that has built nothing (its cache is the test's own: tests/conftest.py)."""
    selectors._leaderboard_built.cache_clear()
    figures._memoised.cache_clear()


def rows_rendered(client, **query) -> tuple[int, str]:
    """(how many rows this request rendered, the page)."""
    response = client.get("/", query)
    assert response.status_code == 200
    return sum(template.name == ROW_TEMPLATE for template in response.templates), response.content.decode()


def test_rows_are_rendered_once_and_again_only_for_the_system_that_changed(board_data, client):
    assert rows_rendered(client)[0] == 3
    assert rows_rendered(client)[0] == 0
    assert rows_rendered(client, sort="name")[0] == 0  # another order, the same rows
    assert rows_rendered(client, unverified="0")[0] == 2  # the default view: other numbers (A and C; B has none re-executed)

    c = systems(leaderboard_get(filters=LeaderboardFilters(verified_only=False)))["C"]
    Attempt.objects.filter(run=board_data.run_c, sample=board_data.samples["s2"]).update(passed=True, reexecution_passed=True)
    results_changed_send(run_ids=[board_data.run_c.pk])
    rendered, page = rows_rendered(client)
    assert rendered == 1 and "lb-stale" in row_html(page, c.slug) and "66.7%" in row_html(page, c.slug)
    assert standings_refresh() == 1
    rendered, page = rows_rendered(client)
    assert rendered == 1 and "lb-stale" not in row_html(page, c.slug) and "100.0%" in row_html(page, c.slug)


def test_a_row_whose_own_numbers_did_not_change_still_loses_or_gains_its_pareto_badge(board_data, client):
    """At n = 1 C dominates B. Hiding C's run changes nothing of B's numbers, but puts B on the frontier."""
    b = systems(leaderboard_get(filters=LeaderboardFilters(verified_only=False)))["B"]
    assert "lb-frontier" not in row_html(rows_rendered(client)[1], b.slug)
    runs_set_hidden(runs=[board_data.run_c], hidden=True)
    standings_refresh()
    assert "lb-frontier" in row_html(rows_rendered(client)[1], b.slug)


def test_the_refresh_job_renders_the_first_opened_views_rows_ahead_of_its_first_request(board_data, client):
    Attempt.objects.filter(run=board_data.run_c, sample=board_data.samples["s2"]).update(passed=True, reexecution_passed=True)
    results_changed_send(run_ids=[board_data.run_c.pk])
    assert standings_refresh_queued() == 1
    selectors._leaderboard_built.cache_clear()  # a web process that has built nothing itself
    rendered, page = rows_rendered(client, unverified="0")  # the first opened view: re-executed attempts only
    assert rendered == 0 and "100.0%" in page


def test_rows_rendered_under_another_address_prefix_are_not_reused(board_data, client):
    """Behind a proxy that mounts the site under a path, a row's links carry that path."""
    rows_rendered(client)
    set_script_prefix("/bench/")  # what Django's WSGI handler does for a request with SCRIPT_NAME=/bench
    try:
        rendered, page = rows_rendered(client)
    finally:
        set_script_prefix("/")
    links = re.findall(r'<a href="([^"]+)" class="lb-system-name">', page)
    assert rendered == 3 and len(links) == 3 and all(link.startswith("/bench/systems/") for link in links)


def test_the_board_is_read_with_two_queries_while_the_standings_are_unchanged(board_data):
    """The standings, and which of their runs are public now (never stored: leaderboard.selectors.standings_shown_runs)."""
    first = leaderboard_get(filters=LeaderboardFilters(verified_only=False))
    with CaptureQueriesContext(connection) as queries:
        again = leaderboard_get(filters=LeaderboardFilters(verified_only=False))
    assert again is first and len(queries) == 2
    results_changed_send(run_ids=[board_data.run_c.pk])
    marked = leaderboard_get(filters=LeaderboardFilters(verified_only=False))
    assert marked is not first and sum(row.stale for row in marked.rows) == 1
    standings_refresh()
    assert not any(row.stale for row in leaderboard_get(filters=LeaderboardFilters(verified_only=False)).rows)


def test_a_figures_script_text_is_what_json_script_writes_even_for_hostile_labels(board_data, client):
    """A model name is the uploader's text: it cannot close the <script> element it is embedded in."""
    Run.objects.filter(pk=board_data.run_c.pk).update(model="</script><script>alert(1)</script>&")
    standings_refresh(everything=True)
    board = leaderboard_get(filters=LeaderboardFilters(verified_only=False))
    figure = figures.cost_figure_payload(board)
    assert isinstance(figure, FigurePayload)
    assert figure_script(figure, "cost-figure-data") == json_script(dict(figure), "cost-figure-data")
    page = client.get("/").content.decode()
    assert "</script><script>alert(1)" not in page and page.count("<script") == page.count("</script>")
