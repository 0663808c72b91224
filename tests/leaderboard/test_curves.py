"""A system's difficulty curve (leaderboard.curves): the fit itself on synthetic data, the cases where
it is not determined, and what the refresh stores and the pages, sorting and exports make of it."""
import csv
import io
import json
from collections import Counter

import numpy as np
import pytest
from django.test import Client
from django.urls import reverse

from leaderboard import curves
from leaderboard.curves import CurveFit, curve_fit
from leaderboard.models import SystemStanding
from leaderboard.rules import LeaderboardFilters
from leaderboard.selectors import leaderboard_get
from leaderboard.standings import standings_refresh
from runs.evaluation.services import runs_set_hidden
from runs.models import Function, Paper, Sample, Suite
from tests.leaderboard.factories import FAIL, PASS, make_attempt, make_run
from tests.support import standings_refreshed


def synthetic(a: float, b: float, *, n_values=(1, 2, 3, 4, 5), samples=80, attempts=3, seed=7) -> dict:
    """Per n, `samples` samples of `attempts` Bernoulli attempts each at pass rate logistic(a + b n)."""
    rng = np.random.default_rng(seed)
    shares = {}
    for n in n_values:
        passes = rng.binomial(attempts, 1 / (1 + np.exp(-(a + b * n))), size=samples)
        shares[n] = [(int(c), attempts, times) for c, times in Counter(passes).items()]
    return shares


# --- the fit ---------------------------------------------------------------------------------------


@pytest.mark.parametrize(("a", "b", "seed"), [(3.0, -1.0, 1), (2.0, -0.5, 2), (4.5, -1.5, 3)])
def test_the_fit_recovers_a_known_curve_within_its_intervals(a, b, seed):
    fit = curve_fit(synthetic(a, b, seed=seed))

    assert fit.status == curves.CurveStatus.FITTED and fit.determined
    assert fit.n50_low < -a / b < fit.n50_high
    assert fit.n50_low < fit.n50 < fit.n50_high
    assert fit.slope_low < b < fit.slope_high
    assert fit.n50 == pytest.approx(-a / b, abs=0.5)
    assert fit.pass_rate(fit.n50) == pytest.approx(0.5)


def test_the_fit_is_deterministic_and_survives_being_stored():
    shares = synthetic(3.0, -1.0)
    first = curve_fit(shares)
    again = curve_fit({n: list(reversed(triples)) for n, triples in reversed(shares.items())})
    assert first == again  # same samples in another order: the same fit, intervals included
    assert CurveFit.from_dict(json.loads(json.dumps(first.as_dict()))) == first


def test_each_sample_weighs_the_same_whatever_its_number_of_attempts():
    # At n = 1 one sample passed 1 of 1 and another 0 of 9: Pass@1 is 50% (mean of c/m), and so is the
    # curve's weight there; a per-attempt fit would see 1 pass in 10.
    pooled = curve_fit({1: [(1, 1, 1), (0, 9, 1)], 2: [(1, 4, 2)], 3: [(0, 1, 1), (1, 10, 1)]})
    equal = curve_fit({1: [(1, 1, 1), (0, 1, 1)], 2: [(1, 4, 2)], 3: [(0, 1, 1), (1, 10, 1)]})
    assert pooled.intercept == pytest.approx(equal.intercept) and pooled.slope == pytest.approx(equal.slope)


@pytest.mark.parametrize(("shares", "status"), [
    ({2: [(1, 2, 10)]}, curves.CurveStatus.TOO_FEW_N),
    ({}, curves.CurveStatus.TOO_FEW_N),
    ({1: [(2, 2, 5)], 2: [(1, 1, 4)]}, curves.CurveStatus.NO_SPREAD),  # every sample passed
    ({1: [(0, 2, 5)], 3: [(0, 1, 4)]}, curves.CurveStatus.NO_SPREAD),  # none did
    ({1: [(1, 1, 5)], 2: [(1, 1, 2), (0, 1, 2)], 3: [(0, 1, 5)]}, curves.CurveStatus.SEPARATED),  # 100%, 50%, 0%
    ({1: [(1, 1, 2), (0, 1, 8)], 2: [(1, 1, 5), (0, 1, 5)], 3: [(1, 1, 8), (0, 1, 2)]}, curves.CurveStatus.NO_FALL),
    ({1: [(1, 1, 95), (0, 1, 5)], 2: [(1, 1, 93), (0, 1, 7)]}, curves.CurveStatus.ABOVE_RANGE),  # 95%, 93%: crosses far past n = 2
    ({2: [(1, 1, 5), (0, 1, 95)], 3: [(1, 1, 3), (0, 1, 97)]}, curves.CurveStatus.BELOW_RANGE),  # already 5% at n = 2
])
def test_an_undetermined_curve_says_why_and_has_no_n50(shares, status):
    fit = curve_fit(shares)
    assert fit.status == status and not fit.determined
    assert fit.n50 is None and fit.n50_low is None and fit.n50_high is None
    assert fit.reason and fit.reason != status
    if status == curves.CurveStatus.ABOVE_RANGE:
        assert fit.label == "> 3" and fit.slope < 0  # 2 + (2 - 1): one observed range past the largest n
    elif status == curves.CurveStatus.BELOW_RANGE:
        assert fit.label == "< 1"
    else:
        assert fit.label == "—"


# --- stored at refresh, read by the pages -----------------------------------------------------------

# Per system: at each n, how many samples pass (of SAMPLES_PER_N, one attempt each).
STEEP = {1: 7, 2: 4, 3: 1}  # n50 about 2
GENTLE = {1: 8, 2: 7, 3: 5}  # n50 about 3.2
SAMPLES_PER_N = 8


@pytest.fixture
def curve_data(db):
    """A suite with SAMPLES_PER_N samples at each n = 1, 2, 3, and three systems: "steep" and "gentle"
    at every n, "single" at n = 1 only (its n50 is not determined). Every attempt is re-executed."""
    suite = Suite.objects.create(name="curves", version="1", gold_root="/nonexistent")
    paper = Paper.objects.create(suite=suite, paper_id="q", title="A paper", text="The method.")
    functions = [Function.objects.create(paper=paper, func_id=i, file="m.py", name=f"g{i}") for i in range(4)]
    samples = {}
    for n in (1, 2, 3):
        for index in range(SAMPLES_PER_N):
            sample = Sample.objects.create(paper=paper, sample_id=f"q_{n}_{index}", n=n)
            sample.functions.set(functions[:n])
            samples[n, index] = sample
    runs = {}
    for model, passing in (("steep", STEEP), ("gentle", GENTLE), ("single", {1: 5})):
        run = runs[model] = make_run(suite, model=f"test:{model}", n_values=tuple(passing))
        for n, passes in passing.items():
            for index in range(SAMPLES_PER_N):
                make_attempt(run, samples[n, index], 0, PASS if index < passes else FAIL)
    standings_refreshed()
    return {"suite": suite, "samples": samples, "runs": runs}


def board_rows(**filters):
    return {row.model: row for row in leaderboard_get(filters=LeaderboardFilters(**filters)).rows}


def test_the_refresh_stores_the_curve_under_both_counting_rules(curve_data):
    standing = SystemStanding.objects.get(model="test:steep")
    assert set(standing.curve_fits) == {"verified", "all"}
    stored = CurveFit.from_dict(standing.curve_fits["verified"])
    assert stored.status == curves.CurveStatus.FITTED and stored.n_values == (1, 2, 3) and stored.samples == 3 * SAMPLES_PER_N
    assert 1.5 < stored.n50 < 2.5 and stored.slope < 0

    rows = board_rows()
    assert rows["test:steep"].fit == stored and rows["test:steep"].n50 == stored.n50
    assert 2.5 < rows["test:gentle"].n50 < 4
    assert rows["test:single"].fit.status == curves.CurveStatus.TOO_FEW_N and rows["test:single"].n50 is None


def test_a_hidden_run_changes_the_fit_after_the_refresh(curve_data):
    # A second run of "steep" that passes everything at n = 3 pulls its curve up.
    extra = make_run(curve_data["suite"], model="test:steep", n_values=(3,))
    for index in range(SAMPLES_PER_N):
        make_attempt(extra, curve_data["samples"][3, index], 0, PASS)
    standings_refreshed()
    pooled = board_rows()["test:steep"].fit
    assert pooled.n50 > 2.5

    runs_set_hidden(runs=[extra], hidden=True)
    standings_refresh()
    alone = board_rows()["test:steep"].fit
    assert alone.n50 < 2.5 and alone == CurveFit.from_dict(
        SystemStanding.objects.get(model="test:steep").curve_fits["verified"])
    # Public pages show the fit of the public runs only.
    body = Client().get("/", {"format": "json"}).json()
    steep = next(row for row in body["rows"] if row.get("model") == "test:steep")
    assert steep["difficulty_curve"]["n50"] == pytest.approx(alone.n50)


@pytest.mark.parametrize("sort", ["n50", "-n50"])
def test_sorting_by_n50_puts_undetermined_last_both_ways(curve_data, sort):
    expected = ["test:steep", "test:gentle"] if sort == "n50" else ["test:gentle", "test:steep"]

    body = Client().get("/", {"format": "json", "sort": sort}).json()
    assert body["filters"]["sort"] == sort
    assert [row["model"] for row in body["rows"] if not row["reference"]] == [*expected, "test:single"]

    page = Client().get("/", {"sort": sort}).content.decode()
    slugs = {row.model: row.slug for row in board_rows().values()}
    positions = [page.index(f'data-slug="{slugs[model]}"') for model in [*expected, "test:single"]]
    assert positions == sorted(positions)
    assert 'id="n50-column"' in page


def test_the_n50_column_links_to_its_sort_best_first(curve_data):
    page = Client().get("/").content.decode()
    header = page[page.index('id="n50-column"'):]
    assert 'href="?sort=-n50"' in header[:200]


def test_exports_carry_n50_with_its_interval(curve_data):
    fit = board_rows()["test:steep"].fit

    body = Client().get("/", {"format": "json"}).json()
    steep = next(row for row in body["rows"] if row.get("model") == "test:steep")
    curve = steep["difficulty_curve"]
    assert curve["n50"] == pytest.approx(fit.n50) and curve["determined"] is True
    assert curve["n50_low"] == pytest.approx(fit.n50_low)
    assert curve["n50_high"] == pytest.approx(fit.n50_high) and curve["slope"] == pytest.approx(fit.slope)
    single = next(row for row in body["rows"] if row.get("model") == "test:single")["difficulty_curve"]
    assert single["determined"] is False and single["n50"] is None and "two or more n" in single["reason"]

    response = Client().get("/", {"format": "csv"})
    rows = list(csv.DictReader(io.StringIO(response.content.decode())))
    steep_rows = [row for row in rows if row["model"] == "test:steep"]
    assert len(steep_rows) == 3  # one per n, the system's curve on each
    for row in steep_rows:
        assert float(row["n50"]) == pytest.approx(fit.n50)
        assert float(row["n50_ci_low"]) == pytest.approx(fit.n50_low)
        assert float(row["n50_ci_high"]) == pytest.approx(fit.n50_high)
        assert float(row["curve_slope"]) == pytest.approx(fit.slope) and row["curve_status"] == "fitted"
    single_row = next(row for row in rows if row["model"] == "test:single")
    assert single_row["n50"] == "" and single_row["curve_status"] == curves.CurveStatus.TOO_FEW_N


def test_the_system_page_draws_the_fit_over_the_points(curve_data):
    row = board_rows()["test:steep"]
    response = Client().get(reverse("leaderboard:system", args=[row.slug]))
    page = response.content.decode()
    assert 'id="curve-figure"' in page and f"n50 = {row.fit.label}" in page

    start = page.index('id="curve-figure-data"')
    figure = json.loads(page[page.index(">", start) + 1 : page.index("</script>", start)])
    points, fit = figure["data"][0], figure["data"][1]
    assert points["x"] == [1, 2, 3] and points["y"] == pytest.approx([row.by_n[n].pass1 for n in (1, 2, 3)])
    assert fit["meta"] == "fit" and fit["x"][0] == 1 and fit["x"][-1] == 3
    assert fit["y"] == pytest.approx([row.fit.pass_rate(x) for x in fit["x"]], abs=1e-5)
    n50_line = [shape for shape in figure["layout"]["shapes"] if shape["type"] == "line" and shape["xref"] == "x"]
    assert n50_line and n50_line[0]["x0"] == pytest.approx(row.fit.n50)

    single = board_rows()["test:single"]
    page = Client().get(reverse("leaderboard:system", args=[single.slug])).content.decode()
    assert "n50 is not determined: needs results at two or more n" in page


def test_the_leaderboard_chart_draws_each_fit_in_its_systems_group(curve_data):
    page = Client().get("/").content.decode()
    start = page.index('id="leaderboard-figure-data"')
    figure = json.loads(page[page.index(">", start) + 1 : page.index("</script>", start)])
    fits = [trace for trace in figure["data"] if trace.get("meta") == "fit"]
    slugs = {row.model: row.slug for row in board_rows().values()}
    assert sorted(trace["legendgroup"] for trace in fits) == sorted([slugs["test:steep"], slugs["test:gentle"]])
