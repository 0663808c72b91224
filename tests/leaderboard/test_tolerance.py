"""Tolerance sensitivity and near misses, from stored scores: the system page's table, chart and
near-miss list, and the leaderboard sorted by Pass@1 at a chosen tolerance.

Every attempt here is scored for real (score_sample against the experiment's gold, stored with
score_dict, its tolerance_ratio set by with_tolerance_ratio as the harness and uploads do). One
experiment, gold {"acc": 0.8, "loss": -1.25}; an attempt reports acc off by a known relative error
(loss exact), so at the rule's 5% its ratio is error / 5%, and it passes at tolerance t when error <= t.

System X (model-x, k=2, reported only unless said):
    s0: 0.3%, 0.8%    s1: 3%, 7%    s2: 15%, reported 0.8% but re-executed 9% (ratio 1.8)
    s01 (n=2): 1.5%, numbers missing
    plus an error (not counted) and a hidden run of the same system holding a 6% near miss.
    n=1 Pass@1 at 0.5% 1/6, 1% 1/3, 2% 1/3, 5% 1/2, 10% 5/6, 20% 1; n=2: 0, 0, 1/2, 1/2, 1/2, 1/2.
    Near misses (1 < ratio <= 2): the 7% attempt (1.40x), then the re-executed 9% one (1.80x).
System Y (model-y, k=1): s0 0.9%, s1 0.9%, s2 40%  -> at 1%: 2/3, 5%: 2/3, 20%: 2/3.
System Z (model-z, k=1): s0 4%, s1 4%, s2 12%     -> at 1%: 0,   5%: 2/3, 20%: 1.
"""
import csv
import html as html_text
import importlib
import io
import json
import re

import pytest
from django.apps import apps
from django.urls import reverse

from leaderboard import selectors
from leaderboard.rules import TOLERANCES, LeaderboardFilters, attempt_verdict
from leaderboard.selectors import leaderboard_get
from runs.benchmark.scoring import score_sample
from runs.evaluation.verdicts import score_dict, scoring_specs, with_tolerance_ratio
from runs.models import Attempt, Experiment, Function, Paper, Suite
from runs.suites.selectors import sample_experiments
from tests.leaderboard.factories import ERROR, make_attempt, make_run
from tests.support import standings_refreshed

pytestmark = pytest.mark.django_db

GOLD = {"acc": 0.8, "loss": -1.25}
MISSING = "missing"


@pytest.fixture
def client(unverified_view_client):
    """This module's numbers are over every counted attempt, unverified uploads included (?unverified=1)."""
    return unverified_view_client


def _score(sample, error):
    experiments = sample_experiments(sample=sample)
    answer = {} if error == MISSING else {"acc": GOLD["acc"] * (1 + error), "loss": GOLD["loss"]}
    score = score_sample(experiments=scoring_specs(experiments), answer=answer)
    return score.passed, score_dict(score, experiments)


def scored_attempt(run, sample, index, error, *, reexecuted=None):
    """An attempt whose reported acc is `error` off (and, if given, whose re-run's is `reexecuted` off)."""
    reported_passed, reported_score = _score(sample, error)
    fields = {"status": Attempt.DONE, "reported_score": reported_score, "reported_passed": reported_passed, "passed": False}
    if reexecuted is not None:
        reexecution_passed, reexecution_score = _score(sample, reexecuted)
        fields.update(reexecution_score=reexecution_score, reexecution_passed=reexecution_passed,
                      passed=reported_passed and reexecution_passed, mismatch=reported_passed and not reexecution_passed)
    return Attempt.objects.create(run=run, sample=sample, index=index, **with_tolerance_ratio(fields))


@pytest.fixture
def tolerance_data(db):
    suite = Suite.objects.create(name="tol", version="1", gold_root="/nonexistent")
    paper = Paper.objects.create(suite=suite, paper_id="q", title="A paper", text="The method.")
    functions = [Function.objects.create(paper=paper, func_id=i, file="m.py", name=f"f{i}") for i in range(3)]
    experiment = Experiment.objects.create(paper=paper, exp_id=1, description="e", command="python run.py", gold_result=GOLD)
    experiment.dependencies.set(functions)
    samples = {}
    for ids in ("0", "1", "2", "0,1"):
        numbers = [int(i) for i in ids.split(",")]
        sample = paper.samples.create(sample_id=f"q_{ids}", n=len(numbers))
        sample.functions.set([functions[i] for i in numbers])
        samples["s" + ids.replace(",", "")] = sample

    x = make_run(suite, model="model-x", k=2)
    attempts = {
        "x_s0_0": scored_attempt(x, samples["s0"], 0, 0.003),
        "x_s0_1": scored_attempt(x, samples["s0"], 1, 0.008),
        "x_s1_0": scored_attempt(x, samples["s1"], 0, 0.03),
        "x_s1_1": scored_attempt(x, samples["s1"], 1, 0.07),
        "x_s2_0": scored_attempt(x, samples["s2"], 0, 0.15),
        "x_s2_1": scored_attempt(x, samples["s2"], 1, 0.008, reexecuted=0.09),
        "x_s01_0": scored_attempt(x, samples["s01"], 0, 0.015),
        "x_s01_1": scored_attempt(x, samples["s01"], 1, MISSING),
        "x_error": make_attempt(x, samples["s0"], 2, ERROR),
    }
    hidden = make_run(suite, model="model-x", k=2)
    hidden.hidden = True
    hidden.save(update_fields=["hidden"])
    attempts["hidden"] = scored_attempt(hidden, samples["s1"], 0, 0.06)
    y = make_run(suite, model="model-y", n_values=(1,))
    z = make_run(suite, model="model-z", n_values=(1,))
    for name, error in (("s0", 0.009), ("s1", 0.009), ("s2", 0.40)):
        scored_attempt(y, samples[name], 0, error)
    for name, error in (("s0", 0.04), ("s1", 0.04), ("s2", 0.12)):
        scored_attempt(z, samples[name], 0, error)
    standings_refreshed()
    return attempts


def system_url(model: str) -> str:
    row = next(row for row in leaderboard_get(filters=LeaderboardFilters(verified_only=False)).rows if row.model == model)
    return reverse("leaderboard:system", args=[row.slug])


def table_rows(html: str, table_id: str) -> list[list[str]]:
    """The text of each body row's cells of the table with `table_id`."""
    table = re.search(rf'<table[^>]*id="{table_id}".*?<tbody>(.*?)</tbody>', html, re.DOTALL).group(1)
    return [
        [re.sub(r"<[^>]+>", "", cell).strip() for cell in re.findall(r"<td[^>]*>(.*?)</td>", row, re.DOTALL)]
        for row in re.findall(r"<tr>(.*?)</tr>", table, re.DOTALL)
    ]


def test_ratios_stored_with_the_verdicts_agree_with_them(tolerance_data):
    ratios = {name: attempt.tolerance_ratio for name, attempt in tolerance_data.items()}
    assert ratios["x_s0_0"] == pytest.approx(0.06, rel=1e-6) and ratios["x_s1_1"] == pytest.approx(1.4, rel=1e-6)
    assert ratios["x_s2_1"] == pytest.approx(1.8, rel=1e-6)  # re-executed: the larger of the two
    assert ratios["x_s01_1"] is None and ratios["x_error"] is None
    for attempt in Attempt.objects.filter(status=Attempt.DONE):
        assert (attempt.tolerance_ratio is not None and attempt.tolerance_ratio <= 1) == attempt_verdict(attempt)


def test_system_page_shows_the_tolerance_table(tolerance_data, client):
    html = client.get(system_url("model-x")).content.decode()
    assert "<th>0.5%</th><th>1%</th><th>2%</th><th>5%</th><th>10%</th><th>20%</th>" in html
    assert table_rows(html, "system-tolerance") == [
        ["1", "3", "16.7%", "33.3%", "33.3%", "50.0%", "83.3%", "100.0%"],
        ["2", "1", "0.0%", "0.0%", "50.0%", "50.0%", "50.0%", "50.0%"],
    ]
    # The 5% column is the leaderboard's Pass@1.
    assert [row[1].split()[0] for row in table_rows(html, "system-metrics")] == ["50.0%", "50.0%"]
    assert "scaled by t / 5%" in html and "scales in proportion" in html


def test_system_page_charts_the_tolerance_curve(tolerance_data, client):
    html = client.get(system_url("model-x")).content.decode()
    assert "vendor/plotly.min.js" in html and "js/leaderboard.js" in html
    data = re.search(r'<script id="leaderboard-figure-data" type="application/json">(.*?)</script>', html, re.DOTALL)
    figure = json.loads(data.group(1))
    assert [trace["name"] for trace in figure["data"]] == ["n = 1", "n = 2"]
    assert all(trace["x"] == list(TOLERANCES) for trace in figure["data"])
    assert figure["data"][0]["y"] == pytest.approx([1 / 6, 1 / 3, 1 / 3, 1 / 2, 5 / 6, 1])
    assert figure["data"][1]["y"] == pytest.approx([0, 0, 1 / 2, 1 / 2, 1 / 2, 1 / 2])
    assert figure["layout"]["xaxis"]["type"] == "log"
    # Plotly text, % escaped so that it is never read as a placeholder (Plotly shows the entity as %).
    assert [html_text.unescape(tick) for tick in figure["layout"]["xaxis"]["ticktext"]] == ["0.5%", "1%", "2%", "5%", "10%", "20%"]


def test_system_page_lists_near_misses_linking_to_their_replays(tolerance_data, client):
    url = system_url("model-x")
    html = client.get(url).content.decode()
    seven, nine = tolerance_data["x_s1_1"], tolerance_data["x_s2_1"]
    rows = table_rows(html, "system-near-misses")
    assert [row[1:] for row in rows] == [["q_1", "1", "1.40× tolerance"], ["q_2", "1", "1.80× tolerance"]]
    assert rows[0][0].startswith(f"attempt {seven.pk}") and "reported only" in rows[0][0]
    assert rows[1][0].startswith(f"attempt {nine.pk}") and "reported only" not in rows[1][0]
    assert f'<a href="/attempts/{seven.pk}/">attempt {seven.pk}</a>' in html
    assert f'<a href="/attempts/{nine.pk}/">attempt {nine.pk}</a>' in html
    assert f"attempt {tolerance_data['hidden'].pk}" not in html  # hidden runs never show
    assert "2 near misses." in html

    data = client.get(url, {"format": "json"}).json()
    assert [miss["attempt_id"] for miss in data["near_misses"]] == [seven.pk, nine.pk]
    assert data["near_miss_total"] == 2
    assert data["system"]["by_n"]["1"]["pass1_at_tolerance"]["0.01"] == pytest.approx(1 / 3)
    by_n = list(csv.DictReader(io.StringIO(client.get(url, {"format": "csv", "table": "by_n"}).content.decode())))
    assert [(row["n"], row["pass1_at_0.005"], row["pass1_at_0.2"]) for row in by_n] == [
        ("1", str(1 / 6), "1.0"), ("2", "0.0", "0.5"),
    ]
    # Verified only: the re-executed attempt alone is counted.
    verified = client.get(url, {"format": "json", "unverified": "0"}).json()
    assert [miss["attempt_id"] for miss in verified["near_misses"]] == [nine.pk]


def test_near_misses_are_capped_with_their_total(tolerance_data, client, monkeypatch):
    monkeypatch.setattr(selectors, "NEAR_MISS_LIMIT", 1)
    html = client.get(system_url("model-x")).content.decode()
    assert len(table_rows(html, "system-near-misses")) == 1
    assert "The first 1 of 2 are shown." in html


def test_system_page_costs_no_extra_query(tolerance_data, client, django_assert_max_num_queries):
    url = system_url("model-x")
    # As many as before the tolerance sensitivity, plus the failure analyses' 5 (leaderboard.failure_analysis)
    # and the near misses' list beside their count and the samples' count for their pages.
    with django_assert_max_num_queries(9 + 5):
        assert client.get(url).status_code == 200


def test_pass_rate_at_the_rule_is_pass1_for_every_system(tolerance_data):
    board = leaderboard_get(filters=LeaderboardFilters(verified_only=False, tolerance=0.05))
    for row in board.rows:
        for metrics in row.by_n.values():
            assert metrics.pass1_tol == pytest.approx(metrics.pass1, abs=1e-12)


@pytest.mark.parametrize(
    ("query", "order"),
    [
        ({}, ["model-y", "model-z", "model-x"]),  # Pass@1 at the rule: 2/3, 2/3 (by name), 1/2
        ({"tolerance": "0.01", "sort": "-pass1_tol_n1"}, ["model-y", "model-x", "model-z"]),  # 2/3, 1/3, 0
        ({"tolerance": "0.2", "sort": "-pass1_tol_n1"}, ["model-x", "model-z", "model-y"]),  # 1, 1 (by name), 2/3
        ({"tolerance": "0.01", "sort": "pass1_tol_n1"}, ["model-z", "model-x", "model-y"]),
        ({"sort": "pass1_tol_n1"}, ["model-x", "model-y", "model-z"]),  # no tolerance chosen: the rule's, Pass@1
    ],
)
def test_leaderboard_sorts_by_pass1_at_a_chosen_tolerance(tolerance_data, client, query, order):
    response = client.get("/", query)
    assert response.status_code == 200
    assert [row.model for row in response.context["board"].rows] == order


def test_leaderboard_tolerance_column_and_control(tolerance_data, client):
    default = client.get("/").content.decode()
    assert "lb-tolerance" not in default and 'colspan="4" class="lb-ngroup"' in default
    assert '<select name="tolerance"' in default and '<option value="0.01">1% tolerance</option>' in default

    html = client.get("/", {"tolerance": "0.01"}).content.decode()
    assert 'colspan="5" class="lb-ngroup"' in html
    assert "Pass@1 at 1%</a>" in html and "sort=-pass1_tol_n1" in html and "tolerance=0.01" in html
    assert '<option value="0.01" selected>' in html
    cells = re.findall(r'<td class="lb-num lb-tolerance">([^<]*)</td>', html)
    assert cells == ["66.7%", "0.0%", "33.3%", "0.0%"]  # Y, Z (n=1 only), X at n=1 and 2: the default order
    data = client.get("/", {"tolerance": "0.01", "format": "json"}).json()
    x = next(row for row in data["rows"] if row.get("model") == "model-x")
    assert x["by_n"]["1"]["pass1_at_tolerance"] == {"0.01": pytest.approx(1 / 3)}
    assert data["filters"]["tolerance"] == 0.01
    plain = client.get("/", {"format": "json"}).json()
    assert all("pass1_at_tolerance" not in by_n for row in plain["rows"] for by_n in row["by_n"].values())


@pytest.mark.parametrize(
    ("query", "message"),
    [
        ({"tolerance": "0.03"}, "tolerance=&#x27;0.03&#x27;: not a tolerance of the sensitivity table; tolerance is a "
                                "relative tolerance as a fraction, one of 0.005 (0.5%), 0.01 (1%)"),
        ({"tolerance": "1%"}, "tolerance=&#x27;1%&#x27;: not a tolerance of the sensitivity table"),
    ],
)
def test_bad_tolerance_requests_say_what_was_wrong(tolerance_data, client, query, message):
    response = client.get("/", query)
    assert response.status_code == 400
    html = response.content.decode()
    assert message in html
    assert [row.model for row in response.context["board"].rows] == ["model-y", "model-z", "model-x"]  # the default


def test_backfill_migration_restores_the_ratios(tolerance_data):
    stored = dict(Attempt.objects.values_list("pk", "tolerance_ratio"))
    assert sum(ratio is not None for ratio in stored.values()) == 14  # all but the error and the missing numbers
    Attempt.objects.update(tolerance_ratio=None)
    importlib.import_module("runs.migrations.0007_backfill_tolerance_ratio").backfill(apps, None)
    assert dict(Attempt.objects.values_list("pk", "tolerance_ratio")) == stored
