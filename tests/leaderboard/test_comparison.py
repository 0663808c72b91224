"""The paired comparison of two systems (`/compare/`) on hand-made attempts whose numbers are worked out below.

Suite "cmp", paper "q"; samples x1..x6 at n = 1, y1 and y2 at n = 2.

System A (react, k=1):            x1 reported pass (not re-executed), x2 pass, x3 fail, x4 fail, x5 pass,
                                  x6 error (not counted), y1 pass, y2 fail.
System B (agentless, k=2):        x1 pass pass, x2 fail fail, x3 pass fail, x4 fail error, x6 pass,
                                  y1 pass fail, y2 fail fail.
A hidden run of system B:         x2 pass pass pass, x5 pass: never counted.

n = 1: shared x1..x4 (x5: B has only the hidden run; x6: A has only an error).
    A scores 1, 1, 0, 0 -> Pass@1 0.5;  B scores 1, 0, 1/2, 0 -> 0.375;  A - B = 0.125.
    2x2 (passes when c/m >= 1/2): x1 both, x2 only A, x3 only B, x4 neither.
n = 2: shared y1, y2.  A 1, 0 -> 0.5;  B 1/2, 0 -> 0.25;  A - B = 0.25.  y1 both, y2 neither.
Differing scores, largest gap first: x2 (1 vs 0), then x3 (0 vs 1/2, n=1) and y1 (1 vs 1/2, n=2).
Verified only: A's x1 attempt drops, so n = 1 shares x2..x4 alone.
"""
import re
from html import unescape

import pytest
from django.urls import reverse

from leaderboard.comparison import DIFFERENCES_LIMIT, _bootstrap, systems_compare
from leaderboard.rules import BOOTSTRAP_RESAMPLES, BOOTSTRAP_SEED, LeaderboardFilters, canonical_config, system_slug
from leaderboard.selectors import leaderboard_get
from runs.benchmark.statistics import paired_bootstrap
from runs.models import Paper, Sample, Suite
from tests.leaderboard.factories import ERROR, FAIL, PASS, REPORTED_PASS, make_attempt, make_run
from tests.support import standings_refreshed

pytestmark = pytest.mark.django_db


@pytest.fixture
def client(unverified_view_client):
    """This module's numbers are over every counted attempt, unverified uploads included (?unverified=1)."""
    return unverified_view_client


@pytest.fixture
def pair(db):
    suite = Suite.objects.create(name="cmp", version="1", gold_root="/nonexistent")
    paper = Paper.objects.create(suite=suite, paper_id="q", title="Q", text="The method.")
    samples = {name: Sample.objects.create(paper=paper, sample_id=f"q_{name}", n=1) for name in
               ("x1", "x2", "x3", "x4", "x5", "x6")}
    samples |= {name: Sample.objects.create(paper=paper, sample_id=f"q_{name}", n=2) for name in ("y1", "y2")}
    run_a = make_run(suite, agent="react")
    run_b = make_run(suite, agent="agentless", k=2)
    hidden_b = make_run(suite, agent="agentless", k=2)
    hidden_b.hidden = True
    hidden_b.save(update_fields=["hidden"])
    attempts = {}
    plan = {
        ("A", run_a): {"x1": [REPORTED_PASS], "x2": [PASS], "x3": [FAIL], "x4": [FAIL], "x5": [PASS], "x6": [ERROR],
                       "y1": [PASS], "y2": [FAIL]},
        ("B", run_b): {"x1": [PASS, PASS], "x2": [FAIL, FAIL], "x3": [PASS, FAIL], "x4": [FAIL, ERROR], "x6": [PASS],
                       "y1": [PASS, FAIL], "y2": [FAIL, FAIL]},
        ("hidden", hidden_b): {"x2": [PASS, PASS, PASS], "x5": [PASS]},
    }
    for (system, run), by_sample in plan.items():
        for name, outcomes in by_sample.items():
            for index, outcome in enumerate(outcomes):
                attempts[(system, name, index)] = make_attempt(run, samples[name], index, outcome)
    standings_refreshed()
    slugs = {row.agent: row.slug for row in leaderboard_get(filters=LeaderboardFilters(verified_only=False, suite="cmp")).rows}
    return {"a": slugs["react"], "b": slugs["agentless"], "samples": samples, "attempts": attempts, "hidden": hidden_b}


def test_outcome_table_and_difference_by_n(pair):
    comparison = systems_compare(slug_a=pair["a"], slug_b=pair["b"], verified_only=False)
    one, two = comparison.by_n
    assert (one.n, one.samples_a, one.samples_b, one.shared) == (1, 5, 5, 4)
    assert (one.attempts_a, one.attempts_b) == (4, 7)
    assert (one.both, one.only_a, one.only_b, one.neither) == (1, 1, 1, 1)
    assert one.pass1_a == 0.5 and one.pass1_b == 0.375
    assert one.difference == pytest.approx(0.125)
    assert (two.n, two.shared, two.both, two.only_a, two.only_b, two.neither) == (2, 2, 1, 0, 0, 1)
    assert two.difference == pytest.approx(0.25)
    assert [d.sample_id for d in comparison.differences] == ["q_x2", "q_x3", "q_y1"]
    assert comparison.differences_total == 3


def test_interval_and_p_value_are_paired_bootstraps(pair):
    samples = pair["samples"]
    one = systems_compare(slug_a=pair["a"], slug_b=pair["b"], verified_only=False).by_n[0]
    expected = paired_bootstrap(
        {samples["x1"].pk: 1.0, samples["x2"].pk: 1.0, samples["x3"].pk: 0.0, samples["x4"].pk: 0.0},
        {samples["x1"].pk: 1.0, samples["x2"].pk: 0.0, samples["x3"].pk: 0.5, samples["x4"].pk: 0.0},
        resamples=BOOTSTRAP_RESAMPLES, seed=BOOTSTRAP_SEED,
    )
    assert (one.difference, one.low, one.high, one.p_value) == (
        expected.difference, expected.low, expected.high, expected.p_value)
    assert one.low < one.difference < one.high and 0 < one.p_value <= 1


def test_verified_only_drops_reported_attempts_and_the_samples_left_unshared(pair):
    one = systems_compare(slug_a=pair["a"], slug_b=pair["b"], verified_only=True).by_n[0]
    assert (one.samples_a, one.shared, one.both, one.only_a, one.only_b, one.neither) == (4, 3, 0, 1, 1, 1)


def test_one_n_only(pair):
    comparison = systems_compare(slug_a=pair["a"], slug_b=pair["b"], n=2, verified_only=False)
    assert [row.n for row in comparison.by_n] == [2]
    assert [d.sample_id for d in comparison.differences] == ["q_y1"]


def test_a_constant_number_of_queries(pair, django_assert_num_queries):
    # The two systems' standings, their public runs (not every run of the site), the counted attempts
    # grouped per (system, sample).
    with django_assert_num_queries(3):
        systems_compare(slug_a=pair["a"], slug_b=pair["b"], verified_only=False)


def test_differing_sample_links_to_the_side_by_side_replay(pair, client):
    attempts = pair["attempts"]
    comparison = systems_compare(slug_a=pair["a"], slug_b=pair["b"], verified_only=False)
    x2, x3, y1 = comparison.differences
    # The better system's passing attempt beside the other's failing one.
    assert (x2.attempt_a, x2.attempt_b) == (attempts[("A", "x2", 0)].pk, attempts[("B", "x2", 0)].pk)
    assert (x3.attempt_a, x3.attempt_b) == (attempts[("A", "x3", 0)].pk, attempts[("B", "x3", 0)].pk)
    assert (y1.attempt_a, y1.attempt_b) == (attempts[("A", "y1", 0)].pk, attempts[("B", "y1", 1)].pk)
    expected = f"/attempts/compare/?a={x2.attempt_a}&amp;b={x2.attempt_b}"
    html = client.get(reverse("leaderboard:compare"), {"a": pair["a"], "b": pair["b"]}).content.decode()
    assert f'href="{expected}"' in html
    assert client.get(unescape(expected)).status_code == 200


def test_page_shows_both_systems_table_and_chart(pair, client):
    response = client.get("/compare/", {"a": pair["a"], "b": pair["b"]})
    assert response.status_code == 200
    html = response.content.decode()
    assert f'href="/systems/{pair["a"]}/"' in html and f'href="/systems/{pair["b"]}/"' in html
    row = re.search(r'<tr data-n="1">(.*?)</tr>', html, re.S).group(1)
    cells = dict(re.findall(r'data-outcome="(\w+)">(\d+)<', row))
    assert cells == {"both": "1", "only_a": "1", "only_b": "1", "neither": "1"}
    assert "+12.5%" in row
    assert 'id="compare-figure-data"' in html and "js/compare.js" in html and "<script>" not in html
    figure = response.context["figure"]
    assert figure["data"][0]["x"] == [1, 2]
    assert figure["layout"]["shapes"][0]["y0"] == 0  # the zero line


def test_json_format(pair, client):
    data = client.get("/compare/", {"a": pair["a"], "b": pair["b"], "format": "json"}).json()
    assert data["a"]["slug"] == pair["a"] and data["b"]["agent"] == "agentless"
    one = data["by_n"][0]
    assert one["outcomes"] == {"both": 1, "only_a": 1, "only_b": 1, "neither": 1}
    assert one["shared_samples"] == 4 and one["difference"] == pytest.approx(0.125)
    assert [row["sample_id"] for row in data["differing_samples"]] == ["q_x2", "q_x3", "q_y1"]
    assert data["differing_samples_total"] == 3 and data["differing_samples_limit"] == DIFFERENCES_LIMIT


def test_hidden_run_alone_is_no_system(pair, client):
    pair["hidden"].agent = "secret"
    pair["hidden"].save(update_fields=["agent"])
    # Moving the hidden run to its own system removes nothing from B's numbers: it never counted.
    assert systems_compare(slug_a=pair["a"], slug_b=pair["b"], verified_only=False).by_n[0].shared == 4
    hidden_slug = system_slug(suite="cmp", agent="secret", model="openai:gpt-4o", config_json=canonical_config({}),
                              context="full")
    response = client.get("/compare/", {"a": pair["a"], "b": hidden_slug})
    assert response.status_code == 404
    assert f"b=&#x27;{hidden_slug}&#x27;: no system on the leaderboard" in response.content.decode()


@pytest.mark.parametrize("query, status, message", [
    ({"a": "A"}, 400, "b: missing"),
    ({"b": "B"}, 400, "a: missing"),
    ({"a": "A", "b": "A"}, 400, "a and b are the same system"),
    ({"a": "A", "b": "000000000000"}, 404, "b=&#x27;000000000000&#x27;: no system on the leaderboard"),
    ({"a": "A", "b": "B", "n": "two"}, 400, "n=&#x27;two&#x27;: Enter a whole number."),
    ({"a": "A", "b": "B", "unverified": "maybe"}, 400, "unverified=&#x27;maybe&#x27;: must be 1 or 0"),
    ({"a": "A", "b": "B", "format": "xml"}, 400, "format=&#x27;xml&#x27;"),
    ({"a": "no such/slug", "b": "B"}, 400, "a=&#x27;no such/slug&#x27;"),
    ({"pick": "A"}, 400, "tick exactly two systems to compare (you ticked 1)"),
])
def test_bad_parameters_say_what_is_wrong(pair, client, query, status, message):
    query = {key: pair["a"] if value == "A" else pair["b"] if value == "B" else value for key, value in query.items()}
    response = client.get("/compare/", query)
    assert response.status_code == status
    html = response.content.decode()
    assert message in html
    assert 'id="compare-pick"' in html  # and the form to choose two systems


def test_bad_parameters_in_json(pair, client):
    response = client.get("/compare/", {"a": pair["a"], "format": "json"})
    assert response.status_code == 400
    assert response.json() == {"error": "b: missing; give two system ids, as ?a=<id>&b=<id>."}


def test_no_parameters_is_the_picking_form(pair, client):
    response = client.get("/compare/", {"with": pair["a"]})
    assert response.status_code == 200
    html = response.content.decode()
    assert f'<option value="{pair["a"]}" selected>' in html and f'<option value="{pair["b"]}">' in html


def test_leaderboard_form_leads_to_the_page(pair, client):
    html = client.get("/", {"unverified": "0"}).content.decode()
    form = re.search(r'<form method="get" action="([^"]+)" id="compare-form"', html)
    assert form and form.group(1) == "/compare/"
    assert 'name="unverified"' not in html.split('id="compare-form"')[1].split("</form>")[0]
    assert '<input type="hidden" name="unverified" value="1">' in client.get("/", {"unverified": "1"}).content.decode()
    picks = re.findall(r'<input type="checkbox" name="pick" value="(\w+)" form="compare-form"', html)
    assert set(picks) >= {pair["a"], pair["b"]}
    # What the browser sends when the two rows are ticked (the checkboxes belong to the form).
    response = client.get("/compare/", {"unverified": "0", "pick": [pair["a"], pair["b"]]})
    assert response.status_code == 302
    assert response["Location"] == f"/compare/?a={pair['a']}&b={pair['b']}"
    page = client.get(response["Location"] + "&unverified=0")
    assert page.status_code == 200 and page.context["comparison"].verified_only
    assert page.context["comparison"].by_n[0].shared == 3


def test_system_page_links_to_the_picking_form(pair, client):
    html = client.get(f"/systems/{pair['a']}/").content.decode()
    assert f'href="/compare/?with={pair["a"]}"' in html


def test_no_shared_sample_says_so(pair, client):
    suite = Suite.objects.create(name="other", version="1", gold_root="/nonexistent")
    paper = Paper.objects.create(suite=suite, paper_id="z", title="Z", text="")
    sample = Sample.objects.create(paper=paper, sample_id="z_1", n=1)
    make_attempt(make_run(suite, agent="lonely"), sample, 0, PASS)
    standings_refreshed()
    slug = next(row.slug for row in leaderboard_get(filters=LeaderboardFilters(verified_only=False, suite="other")).rows)
    response = client.get("/compare/", {"a": pair["a"], "b": slug})
    assert response.status_code == 200
    assert "no sample that both attempted" in response.content.decode()
    assert response.context["figure"] is None


def test_without_the_shared_cache_the_page_is_slower_not_broken(pair, client, settings):
    """Redis down (a port nothing listens on): the bootstrap is computed in the process, same numbers."""
    expected = systems_compare(slug_a=pair["a"], slug_b=pair["b"], verified_only=False).by_n[0]
    _bootstrap.cache_clear()
    settings.CACHES = {"default": {"BACKEND": "django.core.cache.backends.redis.RedisCache",
                                   "LOCATION": "redis://127.0.0.1:1/0"}}
    response = client.get(reverse("leaderboard:compare"), {"a": pair["a"], "b": pair["b"], "format": "json"})
    assert response.status_code == 200
    one = response.json()["by_n"][0]
    assert (one["difference"], one["p_value"]) == (expected.difference, expected.p_value)
