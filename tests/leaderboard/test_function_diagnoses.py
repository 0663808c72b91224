"""What broke the failed attempts at n >= 2, on the system page, and the per-function difficulty made
exact at every n by the transplants' verdicts (runs.evaluation.transplants), both from stored numbers.

Suite "pairs", paper "q" with functions g0, g1, g2; samples q_0 (n = 1: g0) and, at n = 2, q_01, q_12,
q_02. One system (react, openai:gpt-4o, full context), every attempt re-executed:

    q_0   #0 pass
    q_01  #0 fail: g0 right alone, g1 right alone    -> interaction failure
    q_01  #1 pass
    q_12  #0 fail: g1 right alone, g2 wrong alone    -> one function wrong
    q_02  #0 fail: g0 wrong alone, g2 wrong alone    -> several functions wrong

At n = 2: g0 right 2 (q_01 twice), wrong 1 (q_02); g1 right 3; g2 wrong 2.
"""
import csv
import importlib
import io
import re
from dataclasses import dataclass

import pytest
from django.apps import apps
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse

from leaderboard.computation import standing_numbers_computed
from leaderboard.models import SystemFunctionStanding, SystemStanding, SystemStandingByN
from leaderboard.rules import LeaderboardFilters
from leaderboard.selectors import function_difficulty, leaderboard_get
from runs.evaluation.transplants import diagnosis_refresh
from runs.models import Attempt, Function, Paper, Run, Sample, Suite, Transplant
from tests.leaderboard.factories import FAIL, PASS, REPORTED_FAIL, make_attempt, make_run
from tests.support import standings_refreshed

pytestmark = pytest.mark.django_db

INTERACTION_SENTENCE = "every masked function passes alone with the others gold, but together they fail"
RIGHT, WRONG, UNDECIDABLE = Transplant.Verdict.RIGHT, Transplant.Verdict.WRONG, Transplant.Verdict.NOT_DECIDABLE


@dataclass
class Pairs:
    suite: Suite
    functions: list[Function]
    samples: dict[str, Sample]
    run: Run

    def failed(self, sample: str, index: int, verdicts: dict[int, str] | None, *, run: Run | None = None,
               outcome=FAIL) -> Attempt:
        """A failed attempt whose transplants (function number -> verdict) are all settled, its
        diagnosis written as the last transplant's settling writes it; None: no transplants made."""
        attempt = make_attempt(run or self.run, self.samples[sample], index, outcome)
        if verdicts is not None:
            Transplant.objects.bulk_create(
                Transplant(attempt=attempt, function=self.functions[number], status=Transplant.Status.DONE, verdict=verdict)
                for number, verdict in verdicts.items()
            )
            diagnosis_refresh(attempt_id=attempt.pk)
        return attempt

    def slug(self) -> str:
        [row] = [row for row in leaderboard_get(filters=LeaderboardFilters(verified_only=False)).rows if row.suite == "pairs"]
        return row.slug


@pytest.fixture
def client(unverified_view_client):
    """This module's numbers are over every counted attempt, unverified uploads included (?unverified=1)."""
    return unverified_view_client


@pytest.fixture
def pairs(db) -> Pairs:
    suite = Suite.objects.create(name="pairs", version="1", gold_root="/nonexistent")
    paper = Paper.objects.create(suite=suite, paper_id="q", title="Q", text="The method.")
    functions = [Function.objects.create(paper=paper, func_id=i, file="m.py", name=f"g{i}") for i in range(3)]
    samples = {}
    for ids in ("0", "01", "12", "02"):
        sample = Sample.objects.create(paper=paper, sample_id=f"q_{ids}", n=len(ids))
        sample.functions.set([functions[int(i)] for i in ids])
        samples[ids] = sample
    data = Pairs(suite, functions, samples, make_run(suite))
    make_attempt(data.run, samples["0"], 0, PASS)
    data.failed("01", 0, {0: RIGHT, 1: RIGHT})
    make_attempt(data.run, samples["01"], 1, PASS)
    data.failed("12", 0, {1: RIGHT, 2: WRONG})
    data.failed("02", 0, {0: WRONG, 2: WRONG})
    standings_refreshed()
    return data


def difficulty(**filters) -> dict[str, tuple[int, int, int]]:
    """(right, wrong, undecided) per function of the suite, from the stored counts."""
    rows = function_difficulty(filters=LeaderboardFilters(verified_only=False, suite="pairs", **filters))
    return {row.name: (row.right, row.wrong, row.undecided) for row in rows}


def diagnosis_cells(html: str, n: int) -> dict[str, str]:
    """The system page's diagnosis row at n: group -> "count share"."""
    row = re.search(rf'<tr data-n="{n}">(.*?)</tr>', html, re.S).group(1)
    cells = re.findall(r'data-diagnosis="(\w+)">(\d+) <span class="lb-ci">([^<]+)</span>', row)
    return {key: f"{count} {share}" for key, count, share in cells}


# --- the system page: what broke the failed attempts ----------------------------------------------


def test_the_system_page_shows_what_broke_the_failed_attempts_by_n(pairs, client):
    url = reverse("leaderboard:system", args=[pairs.slug()])
    html = client.get(url).content.decode()
    assert 'id="system-diagnoses"' in html and INTERACTION_SENTENCE in html
    assert diagnosis_cells(html, 2) == {
        "interaction": "1 33.3%", "one_wrong": "1 33.3%", "several_wrong": "1 33.3%", "not_decided": "0 0.0%",
    }
    assert '<tr data-n="1">' not in html.split('id="system-diagnoses"', 1)[1].split("</table>", 1)[0]  # n >= 2 only

    by_n = client.get(url, {"format": "json"}).json()["system"]["by_n"]
    assert "function_diagnoses" not in by_n["1"]
    assert by_n["2"]["function_diagnoses"] == {
        "failed_attempts": 3,
        "counts": {"interaction": 1, "one_wrong": 1, "several_wrong": 1, "not_decided": 0},
        "shares": {"interaction": pytest.approx(1 / 3), "one_wrong": pytest.approx(1 / 3),
                   "several_wrong": pytest.approx(1 / 3), "not_decided": 0.0},
        "not_decided_by_reason": {"not_decided": 0, "pending": 0, "none": 0},
    }
    rows = list(csv.DictReader(io.StringIO(client.get(url, {"format": "csv", "table": "by_n"}).content.decode())))
    assert [(row["n"], row["failed_attempts"], row["diagnosis_interaction"], row["diagnosis_not_decided"]) for row in rows] == [
        ("1", "", "", ""), ("2", "3", "1", "0"),
    ]


def test_undecided_failures_are_not_decided_whatever_kept_them_so(pairs, client):
    """A transplant that could not decide, transplants still running, and none at all (an uploaded
    attempt not re-executed): all "not decided", told apart under it. The unverified one is left out
    by "verified only", like every number of the row."""
    pairs.failed("12", 1, {1: UNDECIDABLE, 2: WRONG})  # one wrong, one unknown: which broke it is not known
    pending = pairs.failed("01", 2, None)
    Transplant.objects.create(attempt=pending, function=pairs.functions[0], status=Transplant.Status.DONE, verdict=RIGHT)
    Transplant.objects.create(attempt=pending, function=pairs.functions[1])  # still queued
    Attempt.objects.filter(pk=pending.pk).update(function_diagnosis=Attempt.PENDING)  # as transplants_plan left it
    pairs.failed("02", 1, None, outcome=REPORTED_FAIL)
    standings_refreshed()
    url = reverse("leaderboard:system", args=[pairs.slug()])

    html = client.get(url).content.decode()
    assert diagnosis_cells(html, 2) == {
        "interaction": "1 16.7%", "one_wrong": "1 16.7%", "several_wrong": "1 16.7%", "not_decided": "3 50.0%",
    }
    assert "1 undecidable, 1 being judged, 1 not judged" in html
    exported = client.get(url, {"format": "json"}).json()["system"]["by_n"]["2"]["function_diagnoses"]
    assert exported["not_decided_by_reason"] == {"not_decided": 1, "pending": 1, "none": 1}

    verified = client.get(url, {"format": "json", "unverified": "0"}).json()["system"]["by_n"]["2"]["function_diagnoses"]
    assert verified["failed_attempts"] == 5 and verified["not_decided_by_reason"] == {"not_decided": 1, "pending": 1, "none": 0}


def test_numbers_stored_before_the_diagnoses_still_load(pairs, client):
    """Metrics stored by an older release have no `diagnoses`: they load, say so, and export none."""
    for stored in SystemStandingByN.objects.filter(standing__slug=pairs.slug()):
        stored.metrics.pop("diagnoses")
        stored.save(update_fields=["metrics"])
    url = reverse("leaderboard:system", args=[pairs.slug()])
    response = client.get(url)
    assert response.status_code == 200
    assert 'id="system-diagnoses"' in response.content.decode() and "Not computed yet" in response.content.decode()
    assert "function_diagnoses" not in client.get(url, {"format": "json"}).json()["system"]["by_n"]["2"]
    assert leaderboard_get(filters=LeaderboardFilters(verified_only=False)).rows[0].by_n[2].pass1 == pytest.approx(1 / 6)


# --- per-function difficulty: exact at every n ------------------------------------------------------


def test_function_difficulty_at_n2_reads_each_functions_verdict_alone(pairs, client):
    # g0 right from q_01's interaction failure (right alone) and its pass, wrong from q_02;
    # g1 right three times (a pass and two failures it was not to blame for); g2 wrong twice.
    assert difficulty(n_min=2) == {"g0": (2, 1, 0), "g1": (3, 0, 0), "g2": (0, 2, 0)}
    pairs.failed("12", 1, {1: UNDECIDABLE, 2: WRONG})
    standings_refreshed()
    assert difficulty(n_min=2) == {"g0": (2, 1, 0), "g1": (3, 0, 1), "g2": (0, 3, 0)}  # g1: undecided, not wrong
    rows = {row.name: row for row in function_difficulty(filters=LeaderboardFilters(verified_only=False, suite="pairs", n_min=2))}
    assert rows["g1"].right_rate == 1.0 and rows["g1"].attempts == 4
    assert rows["g1"].pass_rate == pytest.approx(1 / 4)  # what the whole sample's verdict alone would have blamed it for
    assert [row.name for row in rows.values()] == ["g2", "g0", "g1"]  # hardest first, by the right rate

    data = client.get(reverse("leaderboard:functions"), {"format": "json", "suite": "pairs", "n_min": "2"}).json()
    g1 = next(row for row in data["rows"] if row["name"] == "g1")
    assert (g1["right"], g1["wrong"], g1["undecided"], g1["right_rate"]) == (3, 0, 1, 1.0)
    html = client.get(reverse("leaderboard:functions"), {"suite": "pairs"}).content.decode()
    assert "Exact at every n." in html and "undecided" in html
    assert "exact at n = 1 only" not in client.get("/").content.decode()
    # Over every n, g0 adds its n = 1 pass.
    assert difficulty()["g0"] == (3, 1, 0)


def test_failures_without_a_verdict_are_undecided_and_n1_failures_wrong(pairs):
    """Transplants switched off (or an attempt never re-executed) leave a failure at n >= 2 undecided
    about every function it masks; at n = 1 the one function was all there was to get wrong."""
    off = make_run(pairs.suite, n_values=(1, 2))
    Run.objects.filter(pk=off.pk).update(transplants=False)
    pairs.failed("01", 3, None, run=off)
    make_attempt(off, pairs.samples["0"], 1, FAIL)
    standings_refreshed()
    assert difficulty() == {"g0": (3, 2, 1), "g1": (3, 0, 1), "g2": (0, 2, 0)}


def test_hidden_runs_stay_out_of_the_diagnoses_and_the_difficulty(pairs, client):
    """A hidden run of the same system, whose transplants would clear g2: nothing of it shows."""
    hidden = make_run(pairs.suite)
    Run.objects.filter(pk=hidden.pk).update(hidden=True)
    pairs.failed("12", 1, {1: RIGHT, 2: RIGHT}, run=hidden)
    pairs.failed("02", 1, {0: RIGHT, 2: RIGHT}, run=hidden)
    standings_refreshed()
    assert difficulty() == {"g0": (3, 1, 0), "g1": (3, 0, 0), "g2": (0, 2, 0)}
    url = reverse("leaderboard:system", args=[pairs.slug()])
    exported = client.get(url, {"format": "json"}).json()["system"]["by_n"]["2"]["function_diagnoses"]
    assert exported["failed_attempts"] == 3 and exported["counts"]["interaction"] == 1


# --- queries: the pages read stored rows, a refresh groups -----------------------------------------


def _queries(action) -> int:
    with CaptureQueriesContext(connection) as captured:
        action()
    return len(captured)


def test_query_counts_do_not_grow_with_the_attempts(pairs, client):
    slug = pairs.slug()
    system_url = reverse("leaderboard:system", args=[slug])

    def pages():
        return [
            _queries(lambda: client.get(system_url)),
            _queries(lambda: client.get(system_url, {"format": "json"})),
            _queries(lambda: client.get(reverse("leaderboard:functions"))),
            _queries(lambda: list(standing_numbers_computed([slug]))),  # the refresh of one system
        ]

    before = pages()
    for index in range(1, 21):  # twenty more failed attempts at each pair, each with its transplants
        pairs.failed("01", index + 2, {0: RIGHT, 1: WRONG})
        pairs.failed("12", index, {1: UNDECIDABLE, 2: WRONG})
        pairs.failed("02", index, {0: RIGHT, 2: RIGHT})
    standings_refreshed()
    assert difficulty(n_min=2) == {"g0": (42, 1, 0), "g1": (3, 20, 20), "g2": (20, 22, 0)}
    assert pages() == before


# --- the migration's carry-over ----------------------------------------------------------------------


def test_the_migration_carries_the_stored_counts_over_and_asks_for_a_refresh(pairs):
    SystemFunctionStanding.objects.update(right=0, wrong=0, undecided=0)  # as the new columns start
    standing = SystemStanding.objects.get(slug=pairs.slug())
    assert not standing.stale
    migration = importlib.import_module("leaderboard.migrations.0004_function_verdicts")
    migration.counts_carried_over(apps, None)
    # Before a refresh reads the transplants, n >= 2 failures are undecided: never blamed.
    assert difficulty(n_min=2) == {"g0": (1, 0, 2), "g1": (1, 0, 2), "g2": (0, 0, 2)}
    assert difficulty(n_max=1) == {"g0": (1, 0, 0), "g1": (0, 0, 0), "g2": (0, 0, 0)}
    standing.refresh_from_db()
    assert standing.stale
    standings_refreshed()
    assert difficulty(n_min=2) == {"g0": (2, 1, 0), "g1": (3, 0, 0), "g2": (0, 2, 0)}
