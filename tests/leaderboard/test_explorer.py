"""The attempts explorer and the search across trajectories (/explore/), on the hand-built board
(tests/leaderboard/factories.py: systems A, B, C) plus hidden runs and indexed step texts."""
import csv
import io

import pytest
from django.db import connection
from django.db.models import Q

from leaderboard.explorer import COUNT_CAP, PAGE_SIZE, split_marked, substring_snippet
from leaderboard.rules import runs_frame
from runs.models import Attempt, AttemptAnalysis, AttemptException, StepText, Suite
from tests.leaderboard.factories import FAIL, PASS, make_attempt, make_run
from tests.replay.factories import make_user

URL = "/explore/"


def index_steps(attempt: Attempt, texts: list[str]) -> None:
    """Step texts of `attempt` (steps 1..), with their full-text vectors on Postgres."""
    StepText.objects.bulk_create(StepText(attempt=attempt, step=n, text=text) for n, text in enumerate(texts, start=1))
    if connection.vendor == "postgresql":
        with connection.cursor() as cursor:
            cursor.execute("UPDATE runs_steptext SET document = to_tsvector('simple', text) WHERE attempt_id = %s", [attempt.pk])


def slug_of(run) -> str:
    return runs_frame(Q(id=run.pk))["slug"].iloc[0]


def ended(**filters) -> set[int]:
    return set(Attempt.objects.filter(status__in=(Attempt.DONE, Attempt.ERROR), **filters).values_list("id", flat=True))


def listed(client, **params) -> list[int]:
    """Attempt ids of the JSON export (the whole filtered list, in the page's order)."""
    response = client.get(URL, {**params, "format": "json"})
    assert response.status_code == 200, response.content
    return [row["attempt_id"] for row in response.json()["rows"]]


def page_ids(client, **params) -> list[int]:
    response = client.get(URL, params)
    assert response.status_code == 200, response.content
    return [row.pk for row in response.context["result"].rows]


def ids(board_data, *keys) -> set[int]:
    return {board_data.attempts[key].pk for key in keys}


# --- filters -------------------------------------------------------------------------------------------


def test_the_explorer_lists_every_ended_attempt_newest_first(client, board_data):
    everything = ended()
    assert len(everything) == 17 and Attempt.objects.count() == 19  # queued and cancelled ones are left out
    assert listed(client) == sorted(everything, reverse=True)
    assert page_ids(client) == sorted(everything, reverse=True)


def test_each_filter_narrows_and_two_filters_combine_with_and(client, board_data):
    system_a = slug_of(board_data.run_a)
    assert set(listed(client, system=system_a)) == ended(run=board_data.run_a) and len(ended(run=board_data.run_a)) == 10
    # System B is two runs (one configuration written in two key orders).
    assert set(listed(client, system=slug_of(board_data.run_b1))) == ended(run__in=[board_data.run_b1, board_data.run_b2])

    n2 = ids(board_data, ("A", "s01", 0), ("A", "s01", 1), ("A", "s12", 0), ("A", "s12", 1))
    assert set(listed(client, n=2)) == n2 == ended(sample__n=2)

    # Unverified: system B's uploads (never re-executed) and A's errored attempt.
    unverified = ended(run__in=[board_data.run_b1, board_data.run_b2]) | ids(board_data, ("A", "s2", 1))
    assert len(unverified) == 5
    assert set(listed(client, verified=0)) == unverified
    assert set(listed(client, verified=1)) == ended() - unverified
    assert set(listed(client, mismatch=1)) == ids(board_data, ("A", "s0", 1))
    assert set(listed(client, system=system_a, mismatch=1)) == ids(board_data, ("A", "s0", 1))
    assert set(listed(client, system=slug_of(board_data.run_c), mismatch=1)) == set()
    # AND: system A at n = 2, then also only those whose first experiment run crashed.
    assert set(listed(client, system=system_a, n=2)) == n2
    AttemptAnalysis.objects.create(attempt=board_data.attempts[("A", "s01", 1)], steps=5, first_run_crashed=True,
                                   working_run_step=4)
    AttemptAnalysis.objects.create(attempt=board_data.attempts[("A", "s12", 0)], steps=3, first_run_crashed=True)
    AttemptAnalysis.objects.create(attempt=board_data.attempts[("C", "s0", 0)], steps=3, first_run_crashed=False)
    assert set(listed(client, system=system_a, n=2, crashed_first=1)) == ids(board_data, ("A", "s01", 1), ("A", "s12", 0))
    assert set(listed(client, crashed_first=1, recovered=1)) == ids(board_data, ("A", "s01", 1))
    assert set(listed(client, crashed_first=1, recovered=0)) == ids(board_data, ("A", "s12", 0))
    assert set(listed(client, crashed_first=0)) == ids(board_data, ("C", "s0", 0))


def test_outcome_exception_paper_function_suite_and_exit_status_filters(client, board_data):
    wrong = board_data.attempts[("A", "s2", 0)]
    Attempt.objects.filter(pk=wrong.pk).update(outcome=Attempt.WRONG_ANSWER, exit_status="submitted")
    Attempt.objects.filter(pk=board_data.attempts[("A", "s0", 0)].pk).update(outcome=Attempt.PASSED)
    # The shown outcome of an errored attempt is its failure label.
    assert set(listed(client, outcome="infrastructure")) == ids(board_data, ("A", "s2", 1))
    assert set(listed(client, outcome="wrong_answer")) == {wrong.pk}
    assert set(listed(client, exit_status="submitted")) == {wrong.pk}
    AttemptException.objects.create(attempt=wrong, step=3, exception_type="RuntimeError", pattern="shape <N>", message="x")
    AttemptException.objects.create(attempt=wrong, step=4, exception_type="RuntimeError", pattern="shape <N>", message="y")
    assert listed(client, exception="RuntimeError") == [wrong.pk]  # once, however many exceptions
    assert listed(client, exception="ValueError") == []
    everything = set(listed(client))
    assert set(listed(client, suite="toy", paper="p")) == everything
    assert listed(client, paper="other") == []
    # Function f0 is masked by samples s0 and s01.
    with_f0 = ended(sample__sample_id__in=["p_0", "p_0,1"])
    assert set(listed(client, function="p:0")) == with_f0
    assert set(listed(client, function="p:0", n=2)) == ids(board_data, ("A", "s01", 0), ("A", "s01", 1))


def test_near_miss_is_a_failed_attempt_within_twice_its_tolerance(client, board_data):
    near = board_data.attempts[("A", "s12", 0)]
    Attempt.objects.filter(pk=near.pk).update(tolerance_ratio=1.5)
    Attempt.objects.filter(pk=board_data.attempts[("A", "s12", 1)].pk).update(tolerance_ratio=3.0)  # too far
    Attempt.objects.filter(pk=board_data.attempts[("A", "s0", 0)].pk).update(tolerance_ratio=0.5)  # passed
    assert listed(client, near_miss=1) == [near.pk]


@pytest.mark.parametrize("params, name", [
    ({"n": "two"}, "n"), ({"outcome": "great"}, "outcome"), ({"verified": "banana"}, "verified"),
    ({"sort": "name"}, "sort"), ({"page": "0"}, "page"), ({"system": "not-a-slug"}, "system"),
    ({"function": "gmm.py"}, "function"), ({"suite": "nope"}, "suite"), ({"format": "xml"}, "format"),
    ({"page": "x", "format": "json"}, "page"), ({"q": "x" * 201}, "q"),
])
def test_a_bad_parameter_is_a_400_naming_it(client, board_data, params, name):
    response = client.get(URL, params)
    assert response.status_code == 400
    assert f"{name}=" in response.content.decode()


# --- sorting and pages ---------------------------------------------------------------------------------


@pytest.fixture
def many(board_data):
    """130 more attempts of system C at sample s0, in few distinct costs (ties) and some unknown."""
    run = make_run(board_data.suite, agent="agentless", model="anthropic:claude-3-5-sonnet", context="none", n_values=(1,))
    made = []
    for index in range(130):
        cost = None if index % 10 == 0 else round(0.01 * (index % 3), 2)
        made.append(make_attempt(run, board_data.samples["s0"], index, PASS if index % 2 else FAIL, cost=cost,
                                 seconds=float(index % 4)))
    return made


@pytest.mark.parametrize("sort", ["-id", "id", "cost", "-cost", "seconds", "-steps", "n", "-ratio"])
def test_pages_are_stable_every_attempt_on_exactly_one_page(client, board_data, many, sort):
    everything = listed(client, sort=sort)
    assert len(everything) == 17 + 130 == len(set(everything))
    seen = []
    for page in (1, 2, 3):
        seen += page_ids(client, sort=sort, page=page)
    assert seen == everything  # the pages, joined, are the export: same order, no repeats, none missing
    assert len(set(seen)) == len(seen)
    assert client.get(URL, {"sort": sort, "page": 4}).status_code == 404  # past the end, said on the page


def test_sorting_by_cost_puts_unknown_costs_last_and_breaks_ties_by_id(client, board_data, many):
    rows = client.get(URL, {"sort": "cost", "format": "json"}).json()["rows"]
    costs = [row["cost"] for row in rows]
    known = [cost for cost in costs if cost is not None]
    assert costs == known + [None] * (len(costs) - len(known))
    assert known == sorted(known)
    for before, after in zip(rows, rows[1:]):
        if before["cost"] == after["cost"]:
            assert before["attempt_id"] < after["attempt_id"]


def test_the_count_says_how_many_and_the_page_its_range(client, board_data, many):
    response = client.get(URL, {"page": 2})
    assert "147 attempts; showing 51–100." in " ".join(response.content.decode().split())
    assert COUNT_CAP > 147


def test_exports_match_the_page(client, board_data, many):
    params = {"sort": "-cost", "verified": "1"}
    first_page = page_ids(client, **params)
    rows = client.get(URL, {**params, "format": "json"}).json()
    assert rows["truncated"] is False
    exported = [row["attempt_id"] for row in rows["rows"]]
    assert exported[:PAGE_SIZE] == first_page
    response = client.get(URL, {**params, "format": "csv"})
    assert response["Content-Type"].startswith("text/csv")
    table = list(csv.DictReader(io.StringIO(response.content.decode())))
    assert [int(row["attempt_id"]) for row in table] == exported
    assert {row["suite"] for row in table} == {"toy"}


def test_a_row_links_to_the_replay_at_its_first_error_and_to_its_system(client, board_data, settings):
    settings.REPLAY_STEPS_PER_PAGE = 20
    attempt = board_data.attempts[("C", "s2", 0)]
    AttemptAnalysis.objects.create(attempt=attempt, steps=30, first_error_step=23,
                                   first_error_line="RuntimeError: shapes (3,) and (4,) <mismatch>")
    page = client.get(URL, {"system": slug_of(board_data.run_c)}).content.decode()
    assert f'href="/attempts/{attempt.pk}/?page=2#step-23"' in page
    assert "RuntimeError: shapes (3,) and (4,) &lt;mismatch&gt;" in page
    assert f'href="/systems/{slug_of(board_data.run_c)}/"' in page
    assert "anthropic:claude-3-5-sonnet · agentless" in page


# --- who sees what -------------------------------------------------------------------------------------


@pytest.fixture
def hidden(board_data):
    owner = make_user()
    run = make_run(board_data.suite, model="secret:model", n_values=(1,))
    run.hidden, run.created_by = True, owner
    run.save()
    attempt = make_attempt(run, board_data.samples["s0"], 0, PASS)
    index_steps(attempt, ["cat notes.txt", "the zanzibar protocol converged"])
    return owner, run, attempt


def test_hidden_runs_appear_only_for_their_owner_and_staff(client, board_data, hidden):
    owner, run, attempt = hidden
    assert attempt.pk not in listed(client)
    assert "secret:model" not in client.get(URL).content.decode()
    client.force_login(make_user())
    assert attempt.pk not in listed(client)
    client.force_login(owner)
    assert attempt.pk in listed(client)
    client.force_login(make_user(is_staff=True))
    assert attempt.pk in listed(client)


def test_a_hidden_runs_system_filter_and_search_show_it_to_its_owner_alone(client, board_data, hidden):
    owner, run, attempt = hidden
    from leaderboard.rules import canonical_config, system_slug

    slug = system_slug(suite="toy", agent=run.agent, model=run.model, config_json=canonical_config(run.agent_config),
                       context=run.context)
    assert listed(client, system=slug) == []
    assert listed(client, q="zanzibar") == []
    response = client.get(URL, {"q": "zanzibar"})
    assert response.context["result"].rows == [] and "converged" not in response.content.decode()
    client.force_login(owner)
    assert listed(client, system=slug) == [attempt.pk]
    assert listed(client, q="zanzibar") == [attempt.pk]


# --- search ---------------------------------------------------------------------------------------------

OBSERVATION = (
    "Traceback (most recent call last):\n  File \"gmm.py\", line 12, in fit\n"
    "RuntimeError (x < 3 & y): shape mismatch: value tensor of shape [3] cannot be broadcast <script>alert(1)</script>"
)


@pytest.fixture
def searchable(board_data):
    first = board_data.attempts[("A", "s2", 0)]
    index_steps(first, ["ls code", "edit gmm.py", OBSERVATION, "python run.py again"])
    second = board_data.attempts[("C", "s1", 0)]
    index_steps(second, ["a shape of things", "the mismatch was fixed", "shape mismatch again in gmm.py"])
    return first, second


def test_a_search_finds_a_phrase_in_an_observation_and_links_to_its_step(client, board_data, searchable, settings):
    settings.REPLAY_STEPS_PER_PAGE = 2
    first, second = searchable
    response = client.get(URL, {"q": '"shape mismatch"'})
    assert response.status_code == 200
    hits = response.context["result"].rows
    # Newest attempt first; steps where both words are present but not as the phrase do not match.
    assert [(hit.attempt_id, hit.step) for hit in hits] == sorted([(second.pk, 3), (first.pk, 3)], reverse=True)
    page = response.content.decode()
    assert f'href="/attempts/{first.pk}/?page=2#step-3"' in page
    assert "<mark>shape</mark>" in page or "<mark>shape mismatch</mark>" in page
    # Stored text is escaped (Postgres's headline drops what looks like an HTML tag altogether).
    assert "(x &lt; 3 &amp; y)" in page and "<script>alert" not in page


def test_the_explorer_filters_apply_to_the_search(client, board_data, searchable):
    first, second = searchable
    assert listed(client, q="gmm.py mismatch") != []
    assert {row["attempt_id"] for row in client.get(URL, {"q": "mismatch", "format": "json"}).json()["rows"]} == {
        first.pk, second.pk}
    only_c = client.get(URL, {"q": "mismatch", "system": slug_of(board_data.run_c), "format": "json"}).json()["rows"]
    assert [(row["attempt_id"], row["step"]) for row in only_c] == [(second.pk, 2), (second.pk, 3)]
    assert client.get(URL, {"q": "nothing-like-this-anywhere"}).context["result"].rows == []


def test_search_exports_list_the_hits(client, board_data, searchable):
    first, second = searchable
    table = list(csv.DictReader(io.StringIO(client.get(URL, {"q": "mismatch", "format": "csv"}).content.decode())))
    assert [(int(row["attempt_id"]), int(row["step"])) for row in table] == [
        (second.pk, 2), (second.pk, 3), (first.pk, 3)]
    assert table[0]["url"].endswith("#step-2")


def test_a_search_never_finds_the_code_a_gold_agent_wrote(client, db):
    """StepText holds what the anonymous replay shows: the gold agent's code is not indexed."""
    services = pytest.importorskip("runs.analysis.services")
    from tests.replay.factories import make_attempt as make_replay_attempt
    from tests.replay.factories import make_sample

    gold = make_replay_attempt(sample=make_sample(), agent="gold", model="")
    # A suite whose gold numbers are public: a private suite's gold baseline shows none of its output (runs.analysis.public).
    Suite.objects.filter(pk=gold.run.suite_id).update(gold_public=True)
    services.attempt_analysis_record([gold.pk])
    assert StepText.objects.filter(attempt=gold).exists()
    assert listed(client, q="Implement weighted_mean") == []  # the thought of the step that writes the gold code
    assert listed(client, q='"zip values weights"') == []  # the gold body itself
    # What the replay does show is found: the crash in step 3's observation, linked at that step.
    hits = client.get(URL, {"q": "NotImplementedError", "format": "json"}).json()["rows"]
    assert [(hit["attempt_id"], hit["step"]) for hit in hits] == [(gold.pk, 3)]
    assert hits[0]["url"] == f"/attempts/{gold.pk}/?page=1#step-3"


# --- snippets ---------------------------------------------------------------------------------------------


def test_headline_marks_become_segments_and_nothing_else():
    assert split_marked("a \x02shape\x03 of \x02it\x03") == [("a ", False), ("shape", True), (" of ", False), ("it", True)]
    assert split_marked("plain <b>") == [("plain <b>", False)]


def test_the_substring_snippet_marks_every_match_in_its_window():
    text = "x" * 200 + " Shape mismatch and shape again " + "y" * 200
    segments = substring_snippet(text, "shape")
    assert [text for text, hit in segments if hit] == ["Shape", "shape"]
    assert segments[0] == ("…", False) and segments[-1] == ("…", False)


def test_exports_say_when_they_are_cut_and_neutralise_formulas(client, board_data, monkeypatch):
    monkeypatch.setattr("leaderboard.explorer.EXPORT_LIMIT", 5)
    AttemptAnalysis.objects.create(attempt=board_data.attempts[("C", "s2", 0)], steps=2, first_error_step=2,
                                   first_error_line='=HYPERLINK("http://evil","x")')
    data = client.get(URL, {"format": "json"}).json()
    assert data["truncated"] is True and len(data["rows"]) == 5 and "first 5 attempts" in data["note"]
    table = list(csv.reader(io.StringIO(client.get(URL, {"format": "csv"}).content.decode())))
    assert len(table) == 1 + 5 + 1 and table[-1][0].startswith("# cut: only the first 5 attempts")
    assert table[1][-1] == "'=HYPERLINK(\"http://evil\",\"x\")"  # the newest attempt is C's s2


@pytest.mark.parametrize("q", ["!!!", '"unbalanced', "a:b & | !", "-"])
def test_a_search_of_odd_syntax_is_an_empty_result_not_an_error(client, board_data, searchable, q):
    response = client.get(URL, {"q": q})
    assert response.status_code == 200


def test_an_unknown_system_lists_nothing(client, board_data):
    assert listed(client, system="0" * 12) == []
    response = client.get(URL, {"system": "0" * 12, "page": 1})
    assert response.status_code == 200 and "No visible attempt matches these filters." in response.content.decode()
