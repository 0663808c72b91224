"""A system's page reads what its refresh stored (leaderboard.standings: SystemSampleStanding,
SystemRunStanding, SystemNearMiss), never its attempts: an attacker who uploads ten times the
attempts, across more runs and samples, makes no page view issue one query more; the numbers
stored are those the attempts give, under both counting rules and any n range; a run hidden is
gone from the page in the request that hid it, before any refresh."""
from __future__ import annotations

import random

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse

from leaderboard.failure_analysis import error_taxonomy_computed, failure_analysis_computed
from leaderboard.models import VerifierSelection
from leaderboard.rules import NEAR_MISS_FACTOR, LeaderboardFilters, canonical_config, system_slug
from leaderboard.standings import standings_refresh
from runs.evaluation.services import runs_set_hidden
from runs.models import Attempt, AttemptException, Paper, Sample, Suite
from tests.leaderboard.factories import make_run
from tests.support import standings_refreshed

pytestmark = pytest.mark.django_db

ATTEMPT_TABLE = Attempt._meta.db_table
EXCEPTIONS = ["ValueError", "RuntimeError", "TypeError"]
PATTERNS = ["shapes <n> and <n>", "loss is nan", "no key <s>"]


@pytest.fixture
def suite():
    """Suite "attacked": 60 samples at n = 1 and 60 at n = 2 (a page of a system's samples and a bit)."""
    suite = Suite.objects.create(name="attacked", version="1", gold_root="/nonexistent")
    paper = Paper.objects.create(suite=suite, paper_id="q", title="A paper", text="The method.")
    Sample.objects.bulk_create([Sample(paper=paper, sample_id=f"q_{n}_{i:02d}", n=n) for n in (1, 2) for i in range(60)])
    return suite


def _outcome(rng: random.Random) -> dict:
    """One attempt of every kind the page counts: passes, failures, near misses (verified or
    reported only), uploads never re-executed, errors, out-of-scope edits, not ended."""
    kind = rng.choice(["pass", "fail", "near", "near_reported", "reported_pass", "reported_fail", "error", "queued"])
    fields = {
        "pass": {"status": Attempt.DONE, "reported_passed": True, "reexecution_passed": True, "passed": True},
        "fail": {"status": Attempt.DONE, "reported_passed": False, "reexecution_passed": False, "passed": False,
                 "tolerance_ratio": rng.uniform(NEAR_MISS_FACTOR, 9)},
        "near": {"status": Attempt.DONE, "reported_passed": False, "reexecution_passed": True, "passed": False,
                 "tolerance_ratio": round(rng.uniform(1.01, NEAR_MISS_FACTOR), 3)},
        "near_reported": {"status": Attempt.DONE, "reported_passed": False, "reexecution_passed": None, "passed": False,
                          "tolerance_ratio": round(rng.uniform(1.01, NEAR_MISS_FACTOR), 3)},
        "reported_pass": {"status": Attempt.DONE, "reported_passed": True, "reexecution_passed": None, "passed": False},
        "reported_fail": {"status": Attempt.DONE, "reported_passed": False, "reexecution_passed": None, "passed": False},
        "error": {"status": Attempt.ERROR, "failure_label": Attempt.INFRASTRUCTURE},
        "queued": {"status": Attempt.QUEUED},
    }[kind]
    if rng.random() < 0.1:
        fields["out_of_scope_edits"] = [{"path": "code/run.py", "reason": "outside", "diff": ""}]
    return fields


def add_runs(suite, *, runs: int, seed: int, samples_each: int = 40, k: int = 3) -> list:
    """`runs` more runs of one system, k attempts at `samples_each` samples each (drawn among both n),
    with an oracle verifier choice at every sample."""
    rng = random.Random(seed)
    samples = list(Sample.objects.filter(paper__suite=suite).order_by("pk"))
    made = []
    for _ in range(runs):
        run = make_run(suite, model="openai:attacker", k=k, n_values=(1, 2))
        attempts = Attempt.objects.bulk_create([
            Attempt(run=run, sample=sample, index=index, **_outcome(rng))
            for sample in rng.sample(samples, samples_each) for index in range(k)
        ])
        VerifierSelection.objects.bulk_create([
            VerifierSelection(run=run, sample_id=attempt.sample_id, attempt=attempt, verifier="oracle", candidates=k)
            for attempt in attempts if attempt.index == 0
        ])
        AttemptException.objects.bulk_create([
            AttemptException(attempt=attempt, step=rng.choice([None, 1, 2, 3]), exception_type=rng.choice(EXCEPTIONS),
                             pattern=rng.choice(PATTERNS), message="it went wrong")
            for attempt in attempts if attempt.status == Attempt.DONE and rng.random() < 0.4
        ])
        made.append(run)
    return made


def _slug(run) -> str:
    return system_slug(suite=run.suite.name, agent=run.agent, model=run.model,
                       config_json=canonical_config(run.agent_config), context=run.context)


def _queries(client, url, **params) -> list[str]:
    with CaptureQueriesContext(connection) as captured:
        response = client.get(url, params)
    assert response.status_code == 200, response.content[:300]
    return [query["sql"] for query in captured.captured_queries]


VIEWS = [{}, {"unverified": "1"}, {"format": "json"}, {"format": "json", "unverified": "1", "samples_page": "2"},
         {"n_min": "2", "unverified": "1"}]


def test_a_page_view_issues_as_many_queries_at_ten_times_the_attempts(suite, client):
    runs = add_runs(suite, runs=2, seed=1, samples_each=110, k=1)  # two pages of samples
    standings_refreshed()
    url = reverse("leaderboard:system", args=[_slug(runs[0])])
    before = [len(_queries(client, url, **params)) for params in VIEWS]
    add_runs(suite, runs=18, seed=2, samples_each=110, k=1)  # ten times the attempts (1,980 more), runs and verifier choices
    standings_refreshed()
    after = [len(_queries(client, url, **params)) for params in VIEWS]
    assert after == before


@pytest.mark.parametrize("params", VIEWS)
def test_a_page_view_reads_no_attempt(suite, client, params):
    runs = add_runs(suite, runs=2, seed=8, samples_each=110, k=1)  # two pages of samples
    standings_refreshed()
    queries = _queries(client, reverse("leaderboard:system", args=[_slug(runs[0])]), **params)
    assert not [sql for sql in queries if ATTEMPT_TABLE in sql]


def _expected(run_ids: list[int], filters: LeaderboardFilters) -> dict:
    """What the page's numbers must be, counted attempt by attempt in Python: per sample, per run,
    and the near misses, nearest first."""
    samples: dict[str, list[int]] = {}
    by_run: dict[int, dict[str, int]] = {pk: {} for pk in run_ids}
    near = []
    attempts = Attempt.objects.filter(run_id__in=run_ids).select_related("sample")
    for attempt in attempts:
        n = attempt.sample.n
        if (filters.n_min and n < filters.n_min) or (filters.n_max and n > filters.n_max):
            continue
        verified = attempt.reexecution_passed is not None
        counted = attempt.status == Attempt.DONE and (verified or not filters.verified_only)
        passes = counted and (bool(attempt.passed) if verified else bool(attempt.reported_passed))
        own = samples.setdefault(attempt.sample.sample_id, [0, 0, 0, 0, 0])
        own[0] += attempt.status in (Attempt.DONE, Attempt.ERROR)
        own[1] += counted
        own[2] += passes
        own[3] += attempt.status == Attempt.ERROR
        own[4] += bool(attempt.out_of_scope_edits)
        by_run[attempt.run_id][attempt.status] = by_run[attempt.run_id].get(attempt.status, 0) + 1
        if counted and not passes and attempt.tolerance_ratio is not None and 1 < attempt.tolerance_ratio <= NEAR_MISS_FACTOR:
            near.append((attempt.tolerance_ratio, n, attempt.sample.sample_id, attempt.pk))
    return {"samples": {name: tuple(counts) for name, counts in samples.items()}, "runs": by_run,
            "near": [pk for *_, pk in sorted(near)], "near_total": len(near)}


def _shown(client, url, **params) -> dict:
    """What the page's JSON says, every page of samples read."""
    data = client.get(url, {"format": "json", **params}).json()
    samples = {}
    pages = [data]
    while pages[-1]["samples_page"]["next"]:
        pages.append(client.get(pages[-1]["samples_page"]["next"]).json())
    for page in pages:
        for row in page["samples"]:
            samples[row["sample_id"]] = (row["ended_attempts"], row["attempts"], row["passes"], row["errors"],
                                         row["out_of_scope_attempts"])
    return {"samples": samples, "runs": {run["id"]: run["attempts_by_status"] for run in data["runs"]},
            "near": [miss["attempt_id"] for miss in data["near_misses"]], "near_total": data["near_miss_total"],
            "stale": data["system"]["stale"]}


@pytest.mark.parametrize("params", [{}, {"unverified": "1"}, {"n_min": "2"}, {"n_max": "1", "unverified": "1"}],
                         ids=["verified", "unverified", "n from 2", "n to 1, unverified"])
def test_the_stored_numbers_are_those_the_attempts_give(suite, client, params, monkeypatch):
    monkeypatch.setattr("leaderboard.selectors.NEAR_MISS_LIMIT", 7)  # a cut-off among many near misses
    runs = add_runs(suite, runs=3, seed=4)
    standings_refreshed()
    filters = LeaderboardFilters(verified_only="unverified" not in params, n_min=int(params.get("n_min", 0)) or None,
                                 n_max=int(params.get("n_max", 0)) or None)
    expected = _expected([run.pk for run in runs], filters)
    shown = _shown(client, reverse("leaderboard:system", args=[_slug(runs[0])]), **params)
    assert shown["samples"] == expected["samples"]
    assert shown["runs"] == expected["runs"]
    assert (shown["near_total"], shown["near"]) == (expected["near_total"], expected["near"][:7])
    assert expected["near_total"] > 7 and not shown["stale"]
    data = client.get(reverse("leaderboard:system", args=[_slug(runs[0])]), {**params, "format": "json"}).json()
    slug, run_ids = _slug(runs[0]), [run.pk for run in runs]
    assert data["failure_analysis"] == failure_analysis_computed(slug=slug, run_ids=run_ids, filters=filters).as_dict()
    assert data["error_taxonomy"] == error_taxonomy_computed(slug=slug, run_ids=run_ids, filters=filters).as_dict()
    assert data["error_taxonomy"]["rows"] and data["failure_analysis"]["counted"]


def test_a_hidden_run_leaves_the_page_at_once_and_its_numbers_at_the_refresh(suite, client):
    kept, hidden = add_runs(suite, runs=2, seed=5)
    standings_refreshed()
    url = reverse("leaderboard:system", args=[_slug(kept)])
    hidden_attempts = set(Attempt.objects.filter(run=hidden).values_list("pk", flat=True))
    before = _shown(client, url, unverified="1")
    assert hidden.pk in before["runs"] and hidden_attempts & set(before["near"])

    runs_set_hidden(runs=[hidden], hidden=True)  # no refresh: the test's transaction never commits
    shown = _shown(client, url, unverified="1")
    assert shown["stale"] and list(shown["runs"]) == [kept.pk]
    assert not hidden_attempts & set(shown["near"]) and shown["near"]
    texts = [client.get(url, params).content.decode() for params in
             ({}, {"unverified": "1"}, {"format": "json", "unverified": "1"}, {"samples_page": "2", "unverified": "1"})]
    for pk in hidden_attempts:
        assert all(f"/attempts/{pk}/" not in text for text in texts)
    assert all(f"/runs/{hidden.pk}/" not in text for text in texts)

    standings_refresh()
    filters = LeaderboardFilters(verified_only=False)
    expected = _expected([kept.pk], filters)
    shown = _shown(client, url, unverified="1")
    assert not shown["stale"] and shown["samples"] == expected["samples"] and shown["near"] == expected["near"][:50]


def test_a_run_added_since_the_refresh_is_listed_as_being_updated(suite, client):
    first = add_runs(suite, runs=1, seed=6)[0]
    standings_refreshed()
    added = add_runs(suite, runs=1, seed=7)[0]  # written behind the refresh's back: not counted yet
    url = reverse("leaderboard:system", args=[_slug(first)])
    runs = {run["id"]: run["attempts_by_status"] for run in client.get(url, {"format": "json"}).json()["runs"]}
    assert runs[added.pk] == {} and runs[first.pk]
    html = client.get(url).content.decode()
    assert html.count("being updated</span>") == 1
    standings_refreshed()
    runs = {run["id"]: run["attempts_by_status"] for run in client.get(url, {"format": "json"}).json()["runs"]}
    assert runs[added.pk] == _expected([added.pk], LeaderboardFilters())["runs"][added.pk]
