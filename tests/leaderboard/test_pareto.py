"""Cost against accuracy: the Pareto frontier (leaderboard.pareto), its chart and its marks on the leaderboard."""
import json
import random
from types import SimpleNamespace

import pytest
from django.urls import reverse

from leaderboard.figures import cost_figure_payload
from leaderboard.metrics import NMetrics
from leaderboard.pareto import CostPoint, cost_accuracy, dominates, frontier_step_line, pareto_frontier
from leaderboard.rules import LeaderboardFilters
from leaderboard.selectors import leaderboard_get
from runs.models import Attempt
from tests.support import standings_refreshed


@pytest.fixture
def client(unverified_view_client):
    """This module's numbers are over every counted attempt, unverified uploads included (?unverified=1)."""
    return unverified_view_client


def keys(points):
    return [point.key for point in points]


# --- the frontier on hand-made points -----------------------------------------------------------------


def test_a_dominated_system_is_off_the_frontier():
    cheap_good = CostPoint("cheap-good", 0.10, 0.60)
    dear_worse = CostPoint("dear-worse", 0.50, 0.40)
    dear_better = CostPoint("dear-better", 0.90, 0.70)
    assert keys(pareto_frontier([dear_worse, dear_better, cheap_good])) == ["cheap-good", "dear-better"]


def test_ties_in_one_measure_are_decided_by_the_other():
    # Same cost: the more accurate wins. Same Pass@1: the cheaper wins.
    assert keys(pareto_frontier([CostPoint("low", 0.2, 0.3), CostPoint("high", 0.2, 0.5)])) == ["high"]
    assert keys(pareto_frontier([CostPoint("dear", 0.4, 0.5), CostPoint("cheap", 0.1, 0.5)])) == ["cheap"]


def test_duplicates_do_not_dominate_each_other():
    twins = [CostPoint("twin-b", 0.3, 0.5), CostPoint("twin-a", 0.3, 0.5), CostPoint("worse", 0.3, 0.2)]
    assert keys(pareto_frontier(twins)) == ["twin-a", "twin-b"]


def test_float_noise_in_equal_means_decides_nothing():
    # 0.1 + 0.2 != 0.3 in floating point: the two are still the same cost, so both stay.
    assert 0.1 + 0.2 != 0.3
    points = [CostPoint("summed", 0.1 + 0.2, 1 / 3), CostPoint("exact", 0.3, (0.5 + 0.5 + 0) / 3)]
    assert keys(pareto_frontier(points)) == ["exact", "summed"]


def test_one_system_is_its_own_frontier_and_no_system_makes_none():
    assert keys(pareto_frontier([CostPoint("only", 2.0, 0.0)])) == ["only"]
    assert pareto_frontier([]) == []


def test_frontier_matches_the_definition_on_random_points():
    rng = random.Random(7)
    for _ in range(200):
        # Few distinct values, so ties and duplicates are common.
        points = [CostPoint(f"s{i}", rng.choice([0.0, 0.1, 0.2, 0.5]), rng.choice([0.0, 0.25, 0.5, 1.0]))
                  for i in range(rng.randint(1, 8))]
        frontier = pareto_frontier(points)
        for point in points:
            beaten = any(
                other is not point and other.cost <= point.cost and other.pass1 >= point.pass1
                and (other.cost < point.cost or other.pass1 > point.pass1)
                for other in points
            )
            assert (point in frontier) is not beaten
        # Along the frontier, paying more always buys strictly more Pass@1 (duplicates aside).
        distinct = sorted({(p.cost, p.pass1) for p in frontier})
        assert all(a[0] < b[0] and a[1] < b[1] for a, b in zip(distinct, distinct[1:]))


def test_dominates_is_strict_in_one_measure():
    a = CostPoint("a", 0.1, 0.5)
    assert dominates(a, CostPoint("b", 0.1, 0.4)) and dominates(a, CostPoint("c", 0.2, 0.5))
    assert not dominates(a, CostPoint("d", 0.1, 0.5)) and not dominates(a, CostPoint("e", 0.05, 0.4))


def test_step_line_runs_cheapest_first():
    frontier = [CostPoint("dear", 0.9, 0.8), CostPoint("cheap", 0.1, 0.3)]
    assert frontier_step_line(frontier) == ([0.1, 0.9], [0.3, 0.8])


# --- systems whose cost is unknown -------------------------------------------------------------------


def fake_row(slug, **metrics):
    """A leaderboard row (SystemRow's slug and by_n) measured at n=1 only."""
    return SimpleNamespace(slug=slug, by_n={1: NMetrics(n=1, **metrics)})


def test_unknown_cost_systems_are_listed_apart_and_never_on_the_frontier():
    rows = [
        # Would dominate everything at zero cost, but two attempts' costs are unknown: not placed.
        fake_row("partly-unknown", pass1=1.0, cost_mean=0.0, cost_unknown=2),
        fake_row("no-cost", pass1=0.9, cost_mean=None, cost_unknown=3),
        fake_row("known", pass1=0.2, cost_mean=0.5),
        fake_row("no-pass1", pass1=None, cost_mean=0.1),  # nothing measured: neither placed nor listed
    ]
    [chart] = cost_accuracy(rows, [1, 2])  # nothing at n=2: no chart
    assert chart.n == 1
    assert keys(chart.placed) == ["known"] and keys(chart.frontier) == ["known"]
    assert [row.slug for row in chart.unknown] == ["partly-unknown", "no-cost"]
    assert chart.as_dict() == {"n": 1, "frontier": ["known"], "cost_unknown": ["partly-unknown", "no-cost"]}


# --- on the leaderboard (tests/leaderboard/factories.py) ------------------------------------------------
# n=1: A has one attempt of unknown cost; B costs 0.30 for Pass@1 0.5; C costs 0.02 for 2/3: C dominates B.
# n=2: A alone, every cost known: its own frontier.


def row_html(page: str, slug: str) -> str:
    """The cells of system `slug`'s row in a leaderboard page."""
    return page.split(f'data-slug="{slug}"')[1].split("</tr>")[0]


def systems(board):
    by_agent = {}
    for row in board.rows:
        by_agent["A" if row.config == {"history": "full"} else "B" if row.agent == "react" else "C"] = row
    return by_agent


@pytest.mark.django_db
def test_leaderboard_flags_the_frontier_per_system_and_n(board_data):
    board = leaderboard_get(filters=LeaderboardFilters(verified_only=False))
    rows = systems(board)
    assert rows["C"].by_n[1].pareto_frontier is True
    assert rows["B"].by_n[1].pareto_frontier is False
    assert rows["A"].by_n[1].pareto_frontier is False  # cost unknown
    assert rows["A"].by_n[2].pareto_frontier is True
    charts = {chart.n: chart for chart in board.cost_accuracy}
    assert keys(charts[1].frontier) == [rows["C"].slug]
    assert [row.slug for row in charts[1].unknown] == [rows["A"].slug]
    assert keys(charts[2].frontier) == [rows["A"].slug] and charts[2].unknown == ()


@pytest.mark.django_db
def test_figure_payload_holds_the_frontier_step_line_per_n(board_data):
    board = leaderboard_get(filters=LeaderboardFilters(verified_only=False))
    rows = systems(board)
    figure = cost_figure_payload(board)
    traces = figure["data"]
    frontiers = [trace for trace in traces if trace["name"] == "Pareto frontier"]
    assert len(frontiers) == 2  # one per n
    n1, n2 = frontiers
    assert n1["line"]["shape"] == "hv" and n1["x"] == [pytest.approx(0.02)] and n1["y"] == [pytest.approx(2 / 3)]
    assert n2["x"] == [pytest.approx(0.10)] and n2["y"] == [pytest.approx(0.25)]
    # One trace per placed system: B and C at n=1, A at n=2; A is not placed at n=1 (its cost is unknown).
    # In the table's order (C first: the best Pass@1 at n=1).
    placed = [(trace["legendgroup"], trace["x"][0]) for trace in traces if trace["name"] != "Pareto frontier"]
    assert placed == [(rows["C"].slug, pytest.approx(0.02)), (rows["B"].slug, pytest.approx(0.30)),
                      (rows["A"].slug, pytest.approx(0.10))]
    # The n buttons show one n's traces at a time; the first n is shown at first.
    buttons = figure["layout"]["updatemenus"][0]["buttons"]
    assert [button["label"] for button in buttons] == ["n = 1", "n = 2"]
    first, second = (button["args"][0]["visible"] for button in buttons)
    assert first == [trace.get("visible", True) is True for trace in traces]
    assert [a or b for a, b in zip(first, second)] == [True] * len(traces) and not any(a and b for a, b in zip(first, second))
    # Frontier systems are ringed.
    ringed = {trace["legendgroup"] for trace in traces if trace.get("marker", {}).get("line", {}).get("width") == 2}
    assert ringed == {rows["C"].slug, rows["A"].slug}


@pytest.mark.django_db
def test_no_figure_when_no_cost_is_known(board_data, client):
    Attempt.objects.update(cost=None)
    standings_refreshed()
    board = leaderboard_get(filters=LeaderboardFilters(verified_only=False))
    assert cost_figure_payload(board) is None
    assert all(not chart.placed and chart.unknown for chart in board.cost_accuracy)
    html = client.get("/").content.decode()
    assert 'id="cost-figure-data"' not in html and "no system is placed against its cost" in html


@pytest.mark.django_db
def test_page_marks_frontier_cells_and_lists_unknown_costs(board_data, client):
    rows = systems(leaderboard_get(filters=LeaderboardFilters(verified_only=False)))
    response = client.get(reverse("leaderboard:home"))
    html = response.content.decode()
    assert 'id="cost-figure-data"' in html and "<script>" not in html
    assert response.context["cost_figure"]["data"]
    assert html.count('class="lb-badge lb-frontier" title="On the cost–accuracy Pareto frontier at n = ') == 2
    cells = {slug: row_html(html, slug) for slug in (r.slug for r in rows.values())}
    assert "lb-frontier" in cells[rows["C"].slug] and "lb-frontier" in cells[rows["A"].slug]
    assert "lb-frontier" not in cells[rows["B"].slug]
    unknown = html.split('class="lb-note lb-cost-unknown" data-n="1"')[1].split("</p>")[0]
    assert "Cost unknown at n = 1" in unknown and reverse("leaderboard:system", args=[rows["A"].slug]) in unknown
    assert rows["B"].slug not in unknown and rows["C"].slug not in unknown
    assert 'lb-cost-unknown" data-n="2"' not in html  # every cost known at n=2


@pytest.mark.django_db
def test_json_carries_the_frontier_flags(board_data, client):
    rows = systems(leaderboard_get(filters=LeaderboardFilters(verified_only=False)))
    payload = json.loads(client.get("/", {"format": "json"}).content)
    by_slug = {row["slug"]: row for row in payload["rows"] if not row["reference"]}
    assert by_slug[rows["C"].slug]["by_n"]["1"]["pareto_frontier"] is True
    assert by_slug[rows["B"].slug]["by_n"]["1"]["pareto_frontier"] is False
    assert by_slug[rows["A"].slug]["by_n"]["1"]["pareto_frontier"] is False
    assert by_slug[rows["A"].slug]["by_n"]["2"]["pareto_frontier"] is True
    assert payload["cost_accuracy"] == [
        {"n": 1, "frontier": [rows["C"].slug], "cost_unknown": [rows["A"].slug]},
        {"n": 2, "frontier": [rows["A"].slug], "cost_unknown": []},
    ]


@pytest.mark.django_db
def test_frontier_costs_no_query(board_data, client, django_assert_max_num_queries):
    # As before the chart: filter choices (2), the standings' marks, whether their runs are public, and
    # (the board being built) the standings and their numbers by n; gold stability.
    with django_assert_max_num_queries(7):
        assert client.get("/").status_code == 200
    with django_assert_max_num_queries(4):
        leaderboard_get(filters=LeaderboardFilters(verified_only=False))
