"""The system page's failure analyses (leaderboard.failure_analysis): every number checked by hand.

One system ("react · openai:gpt-4o"), one public run, samples s0, s1, s2 (n = 1) and s01 (n = 2).
Each step lasts 10 s and costs $0.125 unless said otherwise (binary fractions: exact sums).

n = 1, counted (status done):
  a1 s0#0 passed            read, crash (RuntimeError shape), works      -> crashed, recovered at step 3, 30 s, $0.375
  a2 s0#1 wrong_answer      read, works                                  -> ran, not crashed, working at step 2, 20 s, $0.25
  a3 s1#0 no_answer         crash (RuntimeError shape), crash (same, other shapes) -> crashed, never recovered
  a4 s1#1 unparseable       read (no experiment; not re-executed)        -> ran nothing
  a5 s2#0 reexecution_failed crash (ValueError, 5 s, cost unknown), works (7 s); re-execution output: ZeroDivisionError
                                                                         -> crashed, recovered at step 2, 12 s, cost unknown
  not counted: a6 s2#1 error (infrastructure; its trajectory has a KeyError), a7 s2#2 error (model provider),
  a8 s2#3 running.
n = 2, counted:
  b1 s01#0 budget_exhausted read, read, crash (RuntimeError shape), works -> crashed, recovered at step 4, 40 s, $0.5
  b2 s01#1 passed           no trajectory (not analysed)
A hidden run of the same system holds a passed attempt with a TypeError: never counted.

Outcome split n = 1 (of 5): passed 1 (20%), wrong answer 1 (20%), no answer 2 (40%: 1 + 1 unparseable),
re-execution failed 1 (20%); apart: infrastructure 1, model provider 1. n = 2 (of 2): passed 1, budget 1.
Crashes n = 1: ran 4 (a1 a2 a3 a5), crashed 3 (75%), recovered 2 (2/3), working 3 (a1 a2 a5):
steps 3, 2, 2 (mean 7/3, median 2), seconds 30, 20, 12 (mean 62/3, median 20), cost 0.375, 0.25 (a5 unknown).
n = 2: analysed 1 of 2, ran 1, crashed 1, recovered 1, steps 4, 40 s, $0.5.
Taxonomy: RuntimeError "shape mismatch <shape> vs <shape>": n = 1 2 attempts (a1, a3) 3 occurrences, n = 2 1 (b1) 1;
ValueError (a5 step 1) and ZeroDivisionError (a5 re-execution), 1 each at n = 1.
"""
from dataclasses import dataclass
from urllib.parse import parse_qs, urlsplit

import pytest
from django.db import connection
from django.db.models import Q
from django.urls import reverse

from leaderboard import reference as paper
from leaderboard.failure_analysis import TAXONOMY_LIMIT, error_taxonomy_computed, failure_analysis_computed
from leaderboard.failure_figures import failure_figure_payload
from leaderboard.rules import LeaderboardFilters, runs_frame
from runs.analysis.services import attempt_analysis_record
from runs.models import Attempt, AttemptAnalysis, AttemptException, Function, Paper, Run, Sample, Suite
from tests.leaderboard.factories import make_run
from tests.support import standings_refreshed

pytestmark = pytest.mark.django_db

SHAPE = "RuntimeError: shape mismatch (3, 4) vs (4, 3)"
SHAPE_PATTERN = "shape mismatch <shape> vs <shape>"
NOT_A_FLOAT = "ValueError: could not convert string to float: 'abc'"


# --- trajectories -------------------------------------------------------------------------------------


@pytest.fixture
def client(unverified_view_client):
    """This module's numbers are over every counted attempt, unverified uploads included (?unverified=1)."""
    return unverified_view_client


def step(tool, arguments, observation, *, exit_code=None, duration=10, cost=0.125, cost_unknown=False):
    data = {"index": 0, "tool": tool, "arguments": arguments, "observation": observation, "duration": duration,
            "cost": cost, "cost_unknown": cost_unknown, "thought": "", "truncated": False, "error": None, "traceback": None}
    if exit_code is not None:
        data.update(exit_code=exit_code, timed_out=False)
    return data


def read(**kwargs):
    return step("read_file", {"path": "code/model.py"}, "def forward(x):\n    return x\n", **kwargs)


def crash(message=SHAPE, **kwargs):
    return step(
        "execute_bash_script", {"command": "cd code && python main.py"},
        f'Traceback (most recent call last):\n  File "/work/code/main.py", line 3, in <module>\n{message}\n'
        "[exit code 1; 1.0 s; cwd code]",
        exit_code=1, **kwargs,
    )


def works(**kwargs):
    return step("execute_bash_script", {"command": "cd code && python main.py"},
                "accuracy: 0.91\n[exit code 0; 2.0 s; cwd code]", exit_code=0, **kwargs)


def trajectory(*steps):
    for index, item in enumerate(steps):
        item["index"] = index
    return {"format": "autoexperiment.trajectory/1", "header": {"sample_id": "x", "exit_status": "submitted"},
            "steps": list(steps), "final_answer": None, "final_patch": None}


def record_analysis(attempts):
    """The analysis rows of `attempts`, as the write paths make them."""
    attempt_analysis_record([attempt.pk for attempt in attempts])


# --- data ---------------------------------------------------------------------------------------------

DONE = {"status": Attempt.DONE, "reexecution_passed": False, "reported_passed": False}


@dataclass
class Data:
    run: Run
    hidden: Run
    slug: str
    attempts: dict[str, Attempt]


def _samples():
    suite = Suite.objects.create(name="toy", version="1", gold_root="/nonexistent")
    paper_row = Paper.objects.create(suite=suite, paper_id="p", title="A paper", text="The method.")
    functions = [Function.objects.create(paper=paper_row, func_id=i, file="m.py", name=f"f{i}") for i in range(3)]
    samples = {}
    for name, numbers in (("s0", [0]), ("s1", [1]), ("s2", [2]), ("s01", [0, 1])):
        sample = Sample.objects.create(paper=paper_row, sample_id=f"p_{name}", n=len(numbers))
        sample.functions.set([functions[i] for i in numbers])
        samples[name] = sample
    return suite, samples


@pytest.fixture
def data() -> Data:
    suite, samples = _samples()
    run = make_run(suite, k=4)
    hidden = make_run(suite, k=1)
    Run.objects.filter(pk=hidden.pk).update(hidden=True)
    specs = {
        "a1": ("s0", 0, {**DONE, "outcome": "passed", "passed": True, "reexecution_passed": True, "reported_passed": True},
               trajectory(read(), crash(), works())),
        "a2": ("s0", 1, {**DONE, "outcome": "wrong_answer"}, trajectory(read(), works())),
        "a3": ("s1", 0, {**DONE, "outcome": "no_answer"},
               trajectory(crash(), crash("RuntimeError: shape mismatch (2, 5) vs (5, 2)"))),
        "a4": ("s1", 1, {**DONE, "outcome": "unparseable_answer", "reexecution_passed": None}, trajectory(read())),
        "a5": ("s2", 0, {**DONE, "outcome": "reexecution_failed",
                         "reexecution_output": 'Traceback (most recent call last):\n  File "main.py", line 9\n'
                                               "ZeroDivisionError: division by zero\n"},
               trajectory(crash(NOT_A_FLOAT, duration=5, cost_unknown=True), works(duration=7))),
        "a6": ("s2", 1, {"status": Attempt.ERROR, "failure_label": Attempt.INFRASTRUCTURE},
               trajectory(crash("KeyError: 'weights'"))),
        "a7": ("s2", 2, {"status": Attempt.ERROR, "failure_label": Attempt.MODEL_PROVIDER}, trajectory(read())),
        "a8": ("s2", 3, {"status": Attempt.RUNNING}, trajectory(crash())),
        "b1": ("s01", 0, {**DONE, "outcome": "budget_exhausted"}, trajectory(read(), read(), crash(), works())),
        "b2": ("s01", 1, {**DONE, "outcome": "passed", "passed": True, "reexecution_passed": True, "reported_passed": True},
               None),
    }
    attempts = {
        name: Attempt.objects.create(run=run, sample=samples[sample], index=index, trajectory=steps, **fields)
        for name, (sample, index, fields, steps) in specs.items()
    }
    attempts["h1"] = Attempt.objects.create(
        run=hidden, sample=samples["s0"], index=0, trajectory=trajectory(crash("TypeError: bad operand"), works()),
        **{**DONE, "outcome": "passed", "passed": True, "reexecution_passed": True, "reported_passed": True},
    )
    record_analysis([attempt for attempt in attempts.values() if attempt.trajectory is not None])
    standings_refreshed()  # what the system's page reads
    slug = runs_frame(Q(pk=run.pk)).iloc[0]["slug"]
    return Data(run=run, hidden=hidden, slug=slug, attempts=attempts)


def _analysis(data: Data, **filters):
    return failure_analysis_computed(slug=data.slug, run_ids=[data.run.pk],
                                     filters=LeaderboardFilters(**{"verified_only": False, **filters}))


def _taxonomy(data: Data, **filters):
    return error_taxonomy_computed(slug=data.slug, run_ids=[data.run.pk],
                                   filters=LeaderboardFilters(**{"verified_only": False, **filters}))


def _explore(data: Data, **params) -> str:
    from urllib.parse import urlencode

    return f"{reverse('leaderboard:explore')}?{urlencode({'system': data.slug, **params})}"


def _cells(row) -> dict:
    return {cell.n: (cell.count, cell.share) for cell in row.cells}


# --- outcome split ------------------------------------------------------------------------------------


def test_outcome_split_by_n(data):
    analysis = _analysis(data)
    assert analysis.n_values == [1, 2]
    assert analysis.counted == {1: 5, 2: 2}
    rows = {row.key: row for row in analysis.outcomes}
    assert [row.key for row in analysis.outcomes] == [
        "passed", "wrong_answer", "no_answer_any", "no_answer", "unparseable_answer", "reexecution_failed",
        "budget_exhausted", "out_of_scope",
    ]
    assert _cells(rows["passed"]) == {1: (1, 0.2), 2: (1, 0.5)}
    assert _cells(rows["wrong_answer"]) == {1: (1, 0.2), 2: (0, 0.0)}
    assert _cells(rows["no_answer_any"]) == {1: (2, 0.4), 2: (0, 0.0)}
    assert _cells(rows["no_answer"]) == {1: (1, 0.2), 2: (0, 0.0)}
    assert _cells(rows["unparseable_answer"]) == {1: (1, 0.2), 2: (0, 0.0)}
    assert _cells(rows["reexecution_failed"]) == {1: (1, 0.2), 2: (0, 0.0)}
    assert _cells(rows["budget_exhausted"]) == {1: (0, 0.0), 2: (1, 0.5)}
    assert _cells(rows["out_of_scope"]) == {1: (0, 0.0), 2: (0, 0.0)}
    assert rows["no_answer"].part and rows["unparseable_answer"].part and not rows["no_answer_any"].part
    # Infrastructure and model provider failures: apart, counts only, outside the denominator.
    apart = {row.key: row for row in analysis.apart}
    assert list(apart) == ["infrastructure", "model_provider"]
    assert _cells(apart["infrastructure"]) == {1: (1, None), 2: (0, None)}
    assert _cells(apart["model_provider"]) == {1: (1, None), 2: (0, None)}


def test_paper_values_stand_beside_n1(data):
    analysis = _analysis(data)
    rows = {row.key: row for row in analysis.outcomes}
    assert analysis.paper_n == 1
    assert analysis.paper.label == "Paper (GPT-4o, n = 1)"
    assert rows["passed"].paper == pytest.approx(0.353)
    assert rows["wrong_answer"].paper == pytest.approx(0.314)
    assert rows["no_answer_any"].paper == pytest.approx(0.333)
    assert rows["reexecution_failed"].paper is None
    assert analysis.paper_crash_share == pytest.approx(0.694)
    assert analysis.paper_recovery_share == pytest.approx(0.291)
    assert paper.FAILURE_ANALYSIS.source == paper.SOURCE
    # Without n = 1 on the page, there is nothing to stand beside.
    assert _analysis(data, n_min=2).paper_n is None


def test_verified_only_leaves_out_attempts_not_re_executed(data):
    analysis = _analysis(data, verified_only=True)
    assert analysis.counted == {1: 4, 2: 2}
    rows = {row.key: row for row in analysis.outcomes}
    assert _cells(rows["unparseable_answer"])[1] == (0, 0.0)
    assert _cells(rows["passed"])[1] == (1, 0.25)
    assert rows["passed"].cells[0].url == _explore(data, verified=1, n=1, outcome="passed")
    stats = analysis.trajectories[0]
    assert (stats.counted, stats.analysed, stats.ran) == (4, 4, 4)


def test_outcome_links_lead_to_the_attempts_behind_them(data):
    analysis = _analysis(data)
    rows = {row.key: row for row in analysis.outcomes}
    assert rows["passed"].cells[0].url == _explore(data, n=1, outcome="passed")
    assert rows["budget_exhausted"].cells[1].url == _explore(data, n=2, outcome="budget_exhausted")
    assert rows["unparseable_answer"].cells[0].url == _explore(data, n=1, outcome="unparseable_answer")
    assert rows["no_answer_any"].cells[0].url is None  # two outcomes: its parts link
    apart = {row.key: row for row in analysis.apart}
    assert apart["model_provider"].cells[0].url == _explore(data, n=1, outcome="model_provider")
    query = parse_qs(urlsplit(rows["passed"].cells[0].url).query)
    assert query == {"system": [data.slug], "n": ["1"], "outcome": ["passed"]}


def test_done_attempts_not_classified_yet_are_counted_and_said(data):
    Attempt.objects.filter(pk=data.attempts["a2"].pk).update(outcome="")
    rows = {row.key: row for row in _analysis(data).outcomes}
    assert _cells(rows["unclassified"]) == {1: (1, 0.2), 2: (0, 0.0)}
    assert _cells(rows["wrong_answer"])[1] == (0, 0.0)


# --- crashes and recovery -----------------------------------------------------------------------------


def test_crash_and_recovery_by_n(data):
    one, two = _analysis(data).trajectories
    assert (one.n, one.counted, one.analysed, one.ran, one.crashed, one.recovered, one.working) == (1, 5, 5, 4, 3, 2, 3)
    assert one.crash_share == 0.75
    assert one.recovery_share == pytest.approx(2 / 3)
    assert one.steps_mean == pytest.approx(7 / 3)
    assert one.steps_median == 2
    assert one.seconds_mean == pytest.approx(62 / 3)
    assert one.seconds_median == 20
    assert (one.cost_known, one.cost_mean, one.cost_median) == (2, 0.3125, 0.3125)
    assert (two.n, two.counted, two.analysed, two.ran, two.crashed, two.recovered, two.working) == (2, 2, 1, 1, 1, 1, 1)
    assert (two.crash_share, two.recovery_share) == (1.0, 1.0)
    assert (two.steps_mean, two.steps_median, two.seconds_mean, two.seconds_median) == (4, 4, 40, 40)
    assert (two.cost_known, two.cost_mean, two.cost_median) == (1, 0.5, 0.5)


def test_crash_links(data):
    one = _analysis(data).trajectories[0]
    assert one.urls == {
        "crashed": _explore(data, status="done", n=1, crashed_first=1),
        "not_crashed": _explore(data, status="done", n=1, crashed_first=0),
        "recovered": _explore(data, status="done", n=1, crashed_first=1, recovered=1),
        "not_recovered": _explore(data, status="done", n=1, crashed_first=1, recovered=0),
        "working": _explore(data, status="done", n=1, recovered=1),
    }


def test_hidden_runs_never_count(client, data):
    """The hidden run belongs to the same system; its passed attempt and its TypeError are left out."""
    body = client.get(reverse("leaderboard:system", args=[data.slug]), {"format": "json"}).json()
    outcomes = {row["key"]: row for row in body["failure_analysis"]["outcomes"]}
    assert outcomes["passed"]["by_n"]["1"]["count"] == 1
    assert body["failure_analysis"]["counted"] == {"1": 5, "2": 2}
    assert "TypeError" not in {row["exception_type"] for row in body["error_taxonomy"]["rows"]}
    assert body["error_taxonomy"]["occurrences"] == {"1": 5, "2": 1}


# --- error taxonomy -----------------------------------------------------------------------------------


def test_taxonomy_counts_by_n_most_frequent_first(data):
    taxonomy = _taxonomy(data)
    assert taxonomy.n_values == [1, 2]
    assert [(row.exception_type, row.pattern) for row in taxonomy.rows] == [
        ("RuntimeError", SHAPE_PATTERN),
        ("ValueError", "could not convert string to float: 'abc'"),
        ("ZeroDivisionError", "division by zero"),
    ]
    shape, value, zero = taxonomy.rows
    assert [cell[:3] for cell in shape.cells] == [(1, 2, 3), (2, 1, 1)]
    assert (shape.attempts, shape.occurrences) == (3, 4)
    assert [cell[:3] for cell in value.cells] == [(1, 1, 1), (2, 0, 0)]
    assert [cell[:3] for cell in zero.cells] == [(1, 1, 1), (2, 0, 0)]
    assert taxonomy.patterns == 3
    assert taxonomy.attempts == {1: 3, 2: 1}  # a1, a3, a5; b1 (errors, running and hidden attempts left out)
    assert taxonomy.occurrences == {1: 5, 2: 1}


def test_taxonomy_links(data, settings):
    settings.REPLAY_STEPS_PER_PAGE = 2
    shape, _, zero = _taxonomy(data).rows
    a = data.attempts
    assert shape.url == _explore(data, status="done", exception="RuntimeError")
    assert shape.cells[0][3] == _explore(data, status="done", n=1, exception="RuntimeError")
    # Newest attempts first, each at its first occurrence of the pattern: b1 step 3 is on page 2.
    assert [(e.attempt_pk, e.step, e.url) for e in shape.examples] == [
        (a["b1"].pk, 3, f"/attempts/{a['b1'].pk}/?page=2#step-3"),
        (a["a3"].pk, 1, f"/attempts/{a['a3'].pk}/?page=1#step-1"),
        (a["a1"].pk, 2, f"/attempts/{a['a1'].pk}/?page=1#step-2"),
    ]
    assert shape.examples[1].message == SHAPE
    # Found in the re-execution output: the replay's first page.
    assert [(e.attempt_pk, e.step) for e in zero.examples] == [(a["a5"].pk, None)]
    assert zero.examples[0].url.startswith(f"/attempts/{a['a5'].pk}/")
    assert "#step" not in zero.examples[0].url


def test_taxonomy_keeps_the_most_frequent(data):
    attempt = data.attempts["a2"]
    AttemptException.objects.bulk_create(
        AttemptException(attempt=attempt, step=1, exception_type=f"Error{i:02d}", pattern="p", message="m")
        for i in range(TAXONOMY_LIMIT + 5)
    )
    taxonomy = _taxonomy(data)
    assert len(taxonomy.rows) == TAXONOMY_LIMIT
    assert taxonomy.patterns == 3 + TAXONOMY_LIMIT + 5
    assert taxonomy.rows[0].exception_type == "RuntimeError"
    assert taxonomy.attempts[1] == 4


# --- a constant number of queries ---------------------------------------------------------------------


def test_query_count_does_not_grow_with_attempts(data, django_assert_num_queries):
    # Outcomes and trajectories (plus the medians apart where the database has no PERCENTILE_CONT);
    # exception groups, totals and examples.
    analysis_queries = 2 if connection.vendor == "postgresql" else 3
    with django_assert_num_queries(analysis_queries):
        _analysis(data)
    with django_assert_num_queries(3):
        _taxonomy(data)
    sample = Sample.objects.get(sample_id="p_s0")
    more = [
        Attempt.objects.create(run=data.run, sample=sample, index=10 + i, trajectory=trajectory(crash(), works()),
                               **{**DONE, "outcome": "wrong_answer"})
        for i in range(6)
    ]
    record_analysis(more)
    with django_assert_num_queries(analysis_queries):
        assert _analysis(data).trajectories[0].crashed == 9
    with django_assert_num_queries(3):
        assert _taxonomy(data).rows[0].attempts == 9


# --- the page -----------------------------------------------------------------------------------------


def test_system_page_json(client, data):
    response = client.get(reverse("leaderboard:system", args=[data.slug]), {"format": "json"})
    assert response.status_code == 200
    body = response.json()
    analysis = body["failure_analysis"]
    assert analysis["counted"] == {"1": 5, "2": 2}
    outcomes = {row["key"]: row for row in analysis["outcomes"]}
    assert outcomes["passed"]["by_n"]["1"] == {"count": 1, "share": 0.2, "url": _explore(data, n=1, outcome="passed")}
    assert outcomes["passed"]["paper"] == pytest.approx(0.353)
    assert {row["key"]: row["by_n"]["1"]["count"] for row in analysis["shown_apart"]} == {
        "infrastructure": 1, "model_provider": 1,
    }
    one = analysis["trajectories"][0]
    assert (one["ran_experiment"], one["first_run_crashed"], one["first_run_crashed_share"], one["recovered"]) == (4, 3, 0.75, 2)
    assert one["steps_to_working"] == {"mean": pytest.approx(7 / 3), "median": 2}
    assert analysis["paper"]["first_run_crashed"] == pytest.approx(0.694)
    assert analysis["paper"]["reference"] is True
    taxonomy = body["error_taxonomy"]
    assert taxonomy["rows"][0]["exception_type"] == "RuntimeError"
    assert taxonomy["rows"][0]["by_n"]["1"]["attempts"] == 2
    assert taxonomy["attempts_with_exception"] == {"1": 3, "2": 1}
    assert [e["attempt_id"] for e in taxonomy["rows"][0]["examples"]] == [
        data.attempts["b1"].pk, data.attempts["a3"].pk, data.attempts["a1"].pk,
    ]


def test_system_page_html(client, data):
    response = client.get(reverse("leaderboard:system", args=[data.slug]))
    assert response.status_code == 200
    page = response.content.decode()
    assert 'id="failure-outcomes"' in page
    assert "Paper (GPT-4o, n = 1)" in page
    assert "35.3%" in page and "69.4%" in page and "29.1%" in page
    assert 'id="failure-figure-data"' in page
    assert 'href="' + _explore(data, n=1, outcome="passed").replace("&", "&amp;") + '"' in page
    assert 'href="' + _explore(data, status="done", n=1, crashed_first=1).replace("&", "&amp;") + '"' in page
    assert f"/attempts/{data.attempts['a3'].pk}/?page=1#step-1" in page
    assert "Not analysed yet" not in page
    assert "<script>" not in page  # the figure is data; leaderboard.js draws it (strict CSP)


def test_system_without_analysis_says_so(client, data):
    AttemptAnalysis.objects.all().delete()
    AttemptException.objects.all().delete()
    standings_refreshed()
    analysis = _analysis(data)
    assert analysis.analysed == 0
    assert analysis.trajectories[0].ran == 0
    page = client.get(reverse("leaderboard:system", args=[data.slug])).content.decode()
    assert page.count("Not analysed yet") == 2  # crashes and taxonomy
    assert 'id="failure-outcomes"' in page  # the outcome split comes from the verdicts


def test_system_with_no_attempt(client):
    suite, _ = _samples()
    run = make_run(suite, model="openai:o3")
    slug = runs_frame(Q(pk=run.pk)).iloc[0]["slug"]
    analysis = failure_analysis_computed(slug=slug, run_ids=[run.pk], filters=LeaderboardFilters(verified_only=False))
    assert (analysis.n_values, analysis.counted_total, analysis.trajectories) == ([], 0, [])
    assert failure_figure_payload(analysis) is None
    page = client.get(reverse("leaderboard:system", args=[slug])).content.decode()
    assert "No counted attempt yet." in page and "Not analysed yet" in page


def test_figure_holds_bars_lines_and_the_paper(data):
    figure = failure_figure_payload(_analysis(data))
    bars = {trace["name"]: trace for trace in figure["data"] if trace["type"] == "bar"}
    assert set(bars) == {"Passed", "Wrong answer", "No answer (incl. unparseable)", "Crashed or timed out in re-execution",
                         "Step, time or cost budget exhausted"}
    assert bars["Passed"]["x"] == ["n = 1", "n = 2", "Paper (GPT-4o, n = 1)"]
    assert bars["Passed"]["y"] == [0.2, 0.5, pytest.approx(0.353)]
    lines = [trace for trace in figure["data"] if trace["type"] == "scatter"]
    assert lines[0]["y"] == [0.75, 1.0]
    assert lines[1]["y"] == [pytest.approx(2 / 3), 1.0]
    assert lines[2]["y"] == [pytest.approx(0.694), pytest.approx(0.291)]
    assert figure["layout"]["barmode"] == "stack"


def test_each_number_links_to_exactly_the_attempts_behind_it(client, data):
    """Follow the outcome, crash and taxonomy links to the explorer (as an anonymous visitor, like
    the page): each lists as many attempts as the number it sits on."""
    def listed(url: str) -> int:
        return client.get(f"{url}&format=json").json()["count"]

    analysis = _analysis(data)
    for row in analysis.outcomes + analysis.apart:
        for cell in row.cells:
            if cell.url:
                assert listed(cell.url) == cell.count, (row.key, cell.n)
    for stats in analysis.trajectories:
        assert listed(stats.urls["crashed"]) == stats.crashed
        assert listed(stats.urls["recovered"]) == stats.recovered
        assert listed(stats.urls["working"]) == stats.working
    for row in _taxonomy(data).rows:
        for n, attempts, _occurrences, url in row.cells:
            assert listed(url) == attempts, (row.exception_type, n)
