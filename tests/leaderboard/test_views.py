"""The leaderboard pages, their filter form and their JSON / CSV exports."""
import csv
import io
import json

import pytest
from django.urls import reverse

from leaderboard.rules import LeaderboardFilters
from leaderboard.selectors import leaderboard_get
from leaderboard.standings import standings_refresh
from runs.evaluation.services import runs_set_hidden
from runs.models import Attempt
from tests.support import standings_refreshed

pytestmark = pytest.mark.django_db


@pytest.fixture
def client(unverified_view_client):
    """This module's numbers are over every counted attempt, unverified uploads included (?unverified=1)."""
    return unverified_view_client


def slug_of(agent="react", config=None):
    for row in leaderboard_get(filters=LeaderboardFilters(verified_only=False)).rows:
        if row.agent == agent and (config is None or row.config == config):
            return row.slug
    raise AssertionError("no such system")


def test_home_is_the_leaderboard(board_data, client):
    response = client.get(reverse("leaderboard:home"))
    assert reverse("leaderboard:home") == "/"
    assert response.status_code == 200
    html = response.content.decode()
    assert html.count('class="lb-row"') == 3
    assert 'id="leaderboard-figure-data"' in html and 'type="application/json"' in html
    assert "vendor/plotly.min.js" in html and "js/leaderboard.js" in html
    assert "Reported in the paper (upstream suite), not reproduced here" in html
    assert html.count('class="lb-reference-row"') == 7  # 4 ReAct models, o3-mini ReAct, 2 agentless
    assert "How to read this" in html
    assert "<script>" not in html  # no inline script: the figure is JSON data
    assert "script-src 'self'" in response["Content-Security-Policy"]


def test_home_chart_is_plotly_json_with_bands(board_data, client):
    response = client.get("/")
    figure = response.context["figure"]
    named = [trace for trace in figure["data"] if trace.get("showlegend") is not False]
    bands = [trace for trace in figure["data"] if trace.get("fill") == "tonexty"]
    assert len(bands) == 3  # one band per measured system
    assert any(trace["name"].startswith("Paper (reported)") and trace["visible"] == "legendonly" for trace in named)
    assert figure["layout"]["yaxis"]["tickformat"] == ".0%"


def test_empty_leaderboard_says_so(db, client):
    response = client.get("/")
    assert response.status_code == 200
    assert "No attempt has finished for these filters yet." in response.content.decode()


def test_filters_change_the_table_and_keep_the_url(board_data, client):
    response = client.get("/", {"agent": "agentless"})
    html = response.content.decode()
    assert html.count('class="lb-row"') == 1
    assert "anthropic:claude-3-5-sonnet" in html
    # Sort links keep the filters.
    assert "agent=agentless" in response.context["columns_by_n"][0]["pass1"]["url"]
    assert response.context["board"].filters.agent == "agentless"
    # The paper's agentless numbers follow the agent filter.
    assert html.count('class="lb-reference-row"') == 2


def test_the_default_view_hides_unverified_systems_and_the_option_shows_them_marked(board_data, client):
    html = client.get("/", {"unverified": "0"}).content.decode()  # the default: re-executed attempts only
    marked = '>unverified</span> <span class="lb-ci">reported numbers, not re-executed</span>'
    assert html.count('class="lb-row"') == 2 and marked not in html
    assert 'name="unverified" value="1"' in html and "checked" not in html.split('name="unverified"')[1].split(">")[0]
    html = client.get("/", {"unverified": "1"}).content.decode()
    assert html.count('class="lb-row"') == 3 and html.count(marked) == 1  # B, uploaded and never re-executed
    assert 'name="unverified" value="1"' in html and "checked" in html.split('name="unverified"')[1].split(">")[0]


@pytest.mark.parametrize(
    "query, message",
    [
        ({"n_min": "-1"}, "n_min='-1': Ensure this value is greater than or equal to 1."),
        ({"n_min": "two"}, "n_min='two': Enter a whole number."),
        ({"n_min": "3", "n_max": "1"}, "the n range is empty: n from 3 is more than n to 1"),
        ({"unverified": "maybe"}, "unverified='maybe': must be 1 or 0"),
        ({"suite": "nope"}, "suite='nope': Select a valid choice."),
        ({"context": "paper"}, "context='paper': Select a valid choice."),
        ({"sort": "pass1"}, "'pass1' is not a sort key"),
        ({"sort": "-pass1_n1;drop"}, "is not a sort key"),
    ],
)
def test_bad_filters_get_a_message_not_a_500(board_data, client, query, message):
    response = client.get("/", query)
    assert response.status_code == 400
    html = response.content.decode()
    assert "Some filters were not understood and are ignored" in html
    assert message.replace("'", "&#x27;") in html
    # The valid part still applies: here nothing is filtered (a bad `unverified` leaves the default view).
    assert html.count('class="lb-row"') == (2 if "unverified" in query else 3)
    data = client.get("/", {**query, "format": "json"})
    assert data.status_code == 400
    assert any(message in error for error in data.json()["filters"]["errors"])


def test_valid_filters_apply_beside_an_invalid_one(board_data, client):
    response = client.get("/", {"agent": "agentless", "n_max": "zero"})
    assert response.status_code == 400
    assert response.content.decode().count('class="lb-row"') == 1


def test_unknown_format_is_refused(board_data, client):
    response = client.get("/", {"format": "xml"})
    assert response.status_code == 400
    assert "format='xml'" in response.json()["error"]


def test_json_export(board_data, client):
    response = client.get("/", {"format": "json"})
    assert response["Content-Type"] == "application/json"
    data = response.json()
    measured = [row for row in data["rows"] if not row["reference"]]
    reference = [row for row in data["rows"] if row["reference"]]
    assert len(measured) == 3 and len(reference) == 7
    a = next(row for row in measured if row["agent_config"] == {"history": "full"})
    assert a["by_n"]["1"]["pass1"] == pytest.approx(0.5)
    assert a["by_n"]["1"]["pass1_ci_low"] <= 0.5 <= a["by_n"]["1"]["pass1_ci_high"]
    assert a["by_n"]["1"]["passk"] == pytest.approx(1.0) and a["k"] == 2
    assert (a["errors"], a["cost_unknown"], a["verified"]) == (1, 1, True)
    gpt4o = next(row for row in reference if row["model"] == "GPT-4o" and row["agent"] == "react")
    assert gpt4o["by_n"]["1"] == {"n": 1, "pass1": 0.353, "k": 5, "passk": 0.482}
    assert gpt4o["suite"] == "upstream (paper)"
    assert all(finding["reference"] for finding in data["reference_findings"])
    assert data["filters"]["sort"] == "-pass1_n1"
    filtered = client.get("/", {"format": "json", "context": "none"}).json()
    assert [row["agent"] for row in filtered["rows"] if not row["reference"]] == ["agentless"]


def test_csv_export(board_data, client):
    response = client.get("/", {"format": "csv", "agent": "react"})
    assert response["Content-Type"].startswith("text/csv")
    assert 'filename="leaderboard.csv"' in response["Content-Disposition"]
    rows = list(csv.DictReader(io.StringIO(response.content.decode())))
    assert rows[0].keys() >= {"reference", "system", "n", "pass1", "pass1_ci_low", "pass1_ci_high", "passk", "cost_mean"}
    measured = [row for row in rows if row["reference"] == "false"]
    reference = [row for row in rows if row["reference"] == "true"]
    assert {(row["agent"], row["n"]) for row in measured} == {("react", "1"), ("react", "2")}
    assert len(measured) == 3  # A at n=1 and 2, B at n=1
    a2 = next(row for row in measured if row["n"] == "2")
    assert float(a2["pass1"]) == pytest.approx(0.25) and float(a2["passk"]) == pytest.approx(0.5)
    assert all(row["agent"] == "react" for row in reference)  # the filter applies to the paper's rows too
    assert {row["pass1"] for row in reference if row["model"] == "GPT-4o-mini"} == {"0.271", "0.021"}


def test_function_page_and_exports(board_data, client):
    response = client.get(reverse("leaderboard:functions"))
    assert response.status_code == 200
    html = response.content.decode()
    assert "Exact at every n." in html and "<th>Undecided</th>" in html
    assert "<code>f2</code>" in html
    data = client.get(reverse("leaderboard:functions"), {"format": "json"}).json()
    f2 = next(row for row in data["rows"] if row["name"] == "f2")
    assert (f2["attempts"], f2["passes"], f2["pass_rate"], f2["systems"]) == (5, 1, pytest.approx(0.2), 3)
    # s12 failed twice at n = 2 without transplants: undecided about f2, not wrong.
    assert (f2["right"], f2["wrong"], f2["undecided"], f2["right_rate"]) == (1, 2, 2, pytest.approx(1 / 3))
    rows = list(csv.DictReader(io.StringIO(client.get(reverse("leaderboard:functions"), {"format": "csv"}).content.decode())))
    assert rows[0]["name"] == "f2" and rows[0]["pass_rate_n1"] == str(1 / 3)
    filtered = client.get(reverse("leaderboard:functions"), {"format": "json", "agent": "agentless"}).json()
    assert next(row for row in filtered["rows"] if row["name"] == "f2")["attempts"] == 1


def test_system_page(board_data, client):
    slug = slug_of(config={"history": "full"})
    url = reverse("leaderboard:system", args=[slug])
    assert url == f"/systems/{slug}/"
    response = client.get(url)
    assert response.status_code == 200
    html = response.content.decode()
    assert "openai:gpt-4o · react" in html and 'class="lb-badge lb-verified"' in html
    assert f"run {board_data.run_a.pk}" in html
    # Each sample is summarised, its attempts one link away in the explorer.
    assert html.count('class="lb-sample"') == 5
    assert f'href="/explore/?system={slug}&amp;paper=p&amp;sample=p_0%2C1"' in html
    explored = client.get("/explore/", {"system": slug, "paper": "p", "sample": "p_0,1", "format": "json"}).json()
    assert sorted(row["attempt_id"] for row in explored["rows"]) == sorted(
        attempt.pk for (system, sample, _), attempt in board_data.attempts.items()
        if system == "A" and sample == "s01" and attempt.status in ("done", "error")
    )
    # The leaderboard links here.
    assert f'href="{url}"' in client.get("/").content.decode()


def test_system_page_exports(board_data, client):
    slug = slug_of(config={"history": "full"})
    url = reverse("leaderboard:system", args=[slug])
    data = client.get(url, {"format": "json"}).json()
    assert data["system"]["slug"] == slug and data["system"]["by_n"]["2"]["pass1"] == pytest.approx(0.25)
    assert data["runs"][0]["attempts_by_status"] == {"done": 9, "error": 1, "queued": 1, "cancelled": 1}
    s0 = next(sample for sample in data["samples"] if sample["sample_id"] == "p_0")
    assert (s0["attempts"], s0["passes"], s0["pass_rate"]) == (2, 1, 0.5)
    assert s0["attempts_url"] == f"/explore/?system={slug}&paper=p&sample=p_0"
    rows = list(csv.DictReader(io.StringIO(client.get(url, {"format": "csv"}).getvalue().decode())))
    assert len(rows) == 5 and rows[0].keys() >= {"sample_id", "n", "attempts", "passes", "errors", "attempt_ids"}
    csv_s0 = next(row for row in rows if row["sample_id"] == "p_0")
    assert csv_s0["passed_attempt_ids"] == str(board_data.attempts[("A", "s0", 0)].pk)
    only_n2 = client.get(url, {"format": "json", "n_min": "2"}).json()
    assert {sample["n"] for sample in only_n2["samples"]} == {2}
    runs = list(csv.DictReader(io.StringIO(client.get(url, {"format": "csv", "table": "runs"}).content.decode())))
    assert [(row["run"], row["done"], row["error"], row["queued"], row["verified"]) for row in runs] == [
        (str(board_data.run_a.pk), "9", "1", "1", "true")
    ]
    by_n = list(csv.DictReader(io.StringIO(client.get(url, {"format": "csv", "table": "by_n"}).content.decode())))
    assert [(row["n"], row["pass1"], row["passk"]) for row in by_n] == [("1", "0.5", "1.0"), ("2", "0.25", "0.5")]
    assert client.get(url, {"format": "csv", "table": "bogus"}).status_code == 400
    html = client.get(url).content.decode()
    assert "table=runs" in html and "table=by_n" in html and "table=samples" in html


def test_unknown_system_is_404(board_data, client):
    assert client.get(reverse("leaderboard:system", args=["0123456789ab"])).status_code == 404


def test_page_query_counts_are_bounded(board_data, client, django_assert_max_num_queries):
    # Filter choices (2), the standings' marks, whether their runs are public, (the board being built)
    # the standings and their numbers, the shown suites' gold stability (HTML only); sessions are not touched.
    with django_assert_max_num_queries(7):
        assert client.get("/").status_code == 200
    with django_assert_max_num_queries(5):
        assert client.get("/", {"format": "csv"}).status_code == 200
    with django_assert_max_num_queries(6):
        assert client.get(reverse("leaderboard:functions")).status_code == 200
    slug = slug_of(config={"history": "full"})
    # The system page reads what its refresh stored: its standing, runs, numbers by n, runs' counts,
    # near misses, its samples counted and read a page at a time, its failure analysis and its error
    # taxonomy (totals and patterns): never an attempt (tests/leaderboard/test_stored_system_page.py).
    with django_assert_max_num_queries(12):
        assert client.get(reverse("leaderboard:system", args=[slug])).status_code == 200


def test_json_has_no_nan(board_data, client):
    text = client.get("/", {"format": "json"}).content.decode()
    assert "NaN" not in text and "Infinity" not in text
    json.loads(text)


def test_a_nan_or_infinity_anywhere_in_an_export_is_written_as_null():
    from leaderboard.api_models import Strict
    from leaderboard.views import _json

    class Numbers(Strict):
        a: list[float | dict[str, float]]
        c: float
        d: float
        e: str

    response = _json({"a": [1.5, {"b": float("nan")}], "c": float("inf"), "d": -float("inf"), "e": "NaN"},
                     model=Numbers, status=400)
    assert response.status_code == 400 and response["Content-Type"] == "application/json"
    assert json.loads(response.content) == {"a": [1.5, {"b": None}], "c": None, "d": None, "e": "NaN"}


def test_hidden_submissions_stay_off_every_public_table(board_data, client):
    from runs.models import Submission

    c_slug = slug_of(agent="agentless")
    Submission.objects.create(
        run=board_data.run_c, model="anthropic:claude-3-5-sonnet", agent="agentless", contact="a@example.org",
        file_sha256="0" * 64, file_bytes=1, record_count=3,
    )
    runs_set_hidden(runs=[board_data.run_c], hidden=True)
    standings_refresh()  # what the job the change queues does: the hidden run's system is recomputed
    html = client.get("/").content.decode()
    assert html.count('class="lb-row"') == 2 and "anthropic:claude-3-5-sonnet" not in html
    assert 'value="agentless"' not in html  # not even offered as a filter
    functions = client.get(reverse("leaderboard:functions"), {"format": "json"}).json()
    assert next(row for row in functions["rows"] if row["name"] == "f2")["systems"] == 2
    assert client.get(reverse("leaderboard:system", args=[c_slug])).status_code == 404


def test_system_page_counts_out_of_scope_edits(board_data, client):
    slug = slug_of(config={"history": "full"})
    url = reverse("leaderboard:system", args=[slug])
    assert "0 attempts changed code outside the masked functions" in client.get(url).content.decode()
    edited = board_data.attempts[("A", "s0", 0)]
    Attempt.objects.filter(pk=edited.pk).update(
        out_of_scope_edits=[{"path": "code/run.py", "reason": "not a file with masked functions", "diff": ""}]
    )
    standings_refreshed()  # an update() announces nothing; the page lists what the refresh stored
    html = client.get(url).content.decode()
    assert "1 attempt changed code outside the masked functions" in html
    assert html.count("1 with out-of-scope edits dropped") == 1
    data = client.get(url, {"format": "json"}).json()
    assert data["out_of_scope_attempts"] == 1
    s0 = next(sample for sample in data["samples"] if sample["sample_id"] == "p_0")
    assert s0["out_of_scope_attempts"] == 1


def test_system_page_lists_its_samples_a_page_at_a_time(board_data, client):
    from runs.models import Sample
    from tests.leaderboard.factories import PASS, make_attempt

    extra = Sample.objects.bulk_create(
        [Sample(paper=board_data.paper, sample_id=f"p_extra{i:03d}", n=1) for i in range(150)]
    )
    for sample in extra:
        make_attempt(board_data.run_c, sample, 0, PASS)
    standings_refreshed()
    url = reverse("leaderboard:system", args=[slug_of(agent="agentless")])  # 3 + 150 samples
    first = client.get(url).content.decode()
    assert first.count("<code>p_") == 100 and "Samples 1–100 of 153" in first and 'rel="next"' in first
    second = client.get(url, {"samples_page": "2"}).content.decode()
    assert second.count("<code>p_") == 53 and 'rel="prev"' in second and 'rel="next"' not in second
    bad = client.get(url, {"samples_page": "9"})
    assert bad.status_code == 400
    assert "samples_page=&#x27;9&#x27;: the pages of samples run from 1 to 2" in bad.content.decode()
    assert bad.content.decode().count("<code>p_") == 100  # the first page, with the message
    exported = list(csv.DictReader(io.StringIO(client.get(url, {"format": "csv", "samples_page": "2"}).getvalue().decode())))
    assert len(exported) == 153  # the export is every sample, whatever page is shown
