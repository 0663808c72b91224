"""The leaderboard's numbers on hand-built data (see tests/leaderboard/factories.py for the table)."""
from datetime import UTC, datetime

import pytest

from leaderboard.reference import reference_rows
from leaderboard.rules import LeaderboardFilters, canonical_config
from leaderboard.selectors import function_difficulty, leaderboard_get, system_detail, system_sample_rows, system_samples_page
from runs.benchmark.statistics import bootstrap_ci
from tests.leaderboard.factories import (
    FAIL,
    PASS,
    REPORTED_PASS,
    make_attempt,
    make_run,
)
from tests.support import standings_refreshed

pytestmark = pytest.mark.django_db


def rows_by_system(board):
    """{"A": row, ...} using the factories' systems (A and B share model and agent: tell by config)."""
    named = {}
    for row in board.rows:
        if row.agent == "agentless":
            named["C"] = row
        elif row.config == {"history": "full"}:
            named["A"] = row
        else:
            named["B"] = row
    return named


def board(**filters):
    standings_refreshed()  # the tests below change attempts with the ORM
    return leaderboard_get(filters=LeaderboardFilters(**{"verified_only": False, **filters}))


def test_pass_at_1_is_the_mean_over_samples_of_c_over_m(board_data):
    a = rows_by_system(board())["A"]
    one, two = a.by_n[1], a.by_n[2]
    assert one.pass1 == pytest.approx(0.5)  # (1/2 + 2/2 + 0/1) / 3
    assert (one.samples, one.attempts, one.errors) == (3, 5, 1)
    assert two.pass1 == pytest.approx(0.25)  # (1/2 + 0/2) / 2
    assert (two.samples, two.attempts, two.errors) == (2, 4, 0)


def test_confidence_interval_is_the_seeded_bootstrap_over_per_sample_values(board_data):
    a = rows_by_system(board())["A"]
    expected = bootstrap_ci([0.0, 0.5, 1.0], seed=0)
    one = a.by_n[1]
    assert (one.pass1_low, one.pass1_high) == pytest.approx((expected.low, expected.high))
    assert one.pass1_low <= one.pass1 <= one.pass1_high
    again = rows_by_system(board())["A"].by_n[1]
    assert (again.pass1_low, again.pass1_high) == (one.pass1_low, one.pass1_high)  # deterministic


def test_pass_at_k_uses_samples_with_k_counted_attempts(board_data):
    named = rows_by_system(board())
    a = named["A"]
    assert a.k == 2
    # n=1: s0 (1 of 2) and s1 (2 of 2) give pass@2 = 1 each; s2 has one counted attempt and is left out.
    assert (a.by_n[1].passk, a.by_n[1].passk_samples) == (pytest.approx(1.0), 2)
    assert (a.by_n[2].passk, a.by_n[2].passk_samples) == (pytest.approx(0.5), 2)
    assert named["B"].by_n[1].passk is None and named["C"].by_n[1].passk is None  # k = 1


def test_errors_queued_and_cancelled_attempts_are_not_counted(board_data):
    a = rows_by_system(board())["A"]
    assert a.attempts == 9  # 12 attempts: 1 error, 1 queued, 1 cancelled left out
    assert a.errors == 1
    assert a.samples == 5


def test_cost_excludes_unknown_prices_and_says_how_many(board_data):
    named = rows_by_system(board())
    a = named["A"]
    assert a.cost_mean == pytest.approx(0.10)
    assert a.cost_unknown == 1
    assert a.seconds_mean == pytest.approx(60.0)
    assert named["C"].cost_mean == pytest.approx(0.02) and named["C"].cost_unknown == 0


def test_unverified_attempts_are_judged_by_their_reported_verdict(board_data):
    named = rows_by_system(board())
    b = named["B"]
    assert b.by_n[1].pass1 == pytest.approx(0.5)  # (1/2 + 0 + 1) / 3 from reported verdicts
    assert not b.verified and b.verified_attempts == 0
    assert named["A"].verified and named["C"].verified


def test_mismatch_counts_as_a_failure_for_a_verified_attempt(board_data):
    # s0 of A: one pass and one attempt whose reported numbers pass but the re-run does not.
    filters = LeaderboardFilters(verified_only=False)
    detail = system_detail(slug=rows_by_system(board())["A"].slug, filters=filters)
    page = system_samples_page(detail=detail, filters=filters, number=None)
    s0 = next(sample for sample in page.object_list if sample.sample_id == "p_0")
    assert (s0.counted, s0.passes) == (2, 1)


def test_runs_of_one_system_are_pooled_whatever_the_config_key_order(board_data):
    b = rows_by_system(board())["B"]
    assert sorted(b.run_ids) == sorted([board_data.run_b1.pk, board_data.run_b2.pk])
    assert b.config_json == canonical_config({"a": 2, "b": 1}) == '{"a":2,"b":1}'
    assert b.date == datetime(2026, 1, 20, tzinfo=UTC)  # the latest finished run
    assert len(board().rows) == 3


def test_verified_only_keeps_verified_attempts(board_data):
    # An uploaded (not re-executed) passing attempt joins system A at s2.
    make_attempt(board_data.run_a, board_data.samples["s2"], 3, REPORTED_PASS)
    a = rows_by_system(board())["A"]
    assert not a.verified and (a.verified_attempts, a.attempts) == (9, 10)
    assert a.by_n[1].pass1 == pytest.approx((0.5 + 1 + 0.5) / 3)

    verified = board(verified_only=True)
    named = rows_by_system(verified)
    assert set(named) == {"A", "C"}  # B has no verified attempt
    assert named["A"].verified and named["A"].attempts == 9
    assert named["A"].by_n[1].pass1 == pytest.approx(0.5)


def test_filters_by_agent_context_suite_and_n(board_data):
    assert set(rows_by_system(board(agent="agentless"))) == {"C"}
    assert set(rows_by_system(board(context="none"))) == {"C"}
    assert set(rows_by_system(board(context="full"))) == {"A", "B"}
    high = board(n_min=2)
    assert set(rows_by_system(high)) == {"A"} and high.n_values == [2]
    assert board(n_max=1).n_values == [1]
    assert board(suite="other").rows == []
    assert len(board(suite="toy").rows) == 3


def test_a_system_on_another_suite_is_another_system(board_data):
    from runs.models import Paper, Sample, Suite

    other = Suite.objects.create(name="other", gold_root="/nonexistent")
    paper = Paper.objects.create(suite=other, paper_id="q", title="Q")
    sample = Sample.objects.create(paper=paper, sample_id="q_0", n=1)
    run = make_run(other, config={"history": "full"}, k=1)
    make_attempt(run, sample, 0, PASS)
    assert len(board().rows) == 4
    [row] = board(suite="other").rows
    assert row.suite == "other" and row.by_n[1].pass1 == 1.0


def test_default_sort_is_pass_at_1_at_the_smallest_n_descending(board_data):
    result = board()
    assert result.sort == "-pass1_n1"
    assert [rows_by_system(result)["C"].slug] == [result.rows[0].slug]  # C: 2/3


@pytest.mark.parametrize(
    "sort, first, last",
    [
        ("-pass1_n2", "A", None),  # only A has n=2
        ("pass1_n2", "A", None),  # rows without a value stay last either way
        ("-passk_n1", "A", None),
        ("cost", "C", "B"),  # $0.02, $0.10, $0.30
        ("-cost", "B", "C"),
        ("-attempts", "A", None),
        ("date", "A", "B"),  # 2026-01-10, -15, -20
    ],
)
def test_sorting(board_data, sort, first, last):
    result = board(sort=sort)
    named = {row.slug: key for key, row in rows_by_system(result).items()}
    order = [named[row.slug] for row in result.rows]
    assert order[0] == first
    if last:
        assert order[-1] == last


def test_sort_by_name_is_alphabetical(board_data):
    names = [row.name for row in board(sort="name").rows]
    assert names == sorted(names, key=str.lower)
    assert [row.name for row in board(sort="-name").rows] == names[::-1]


def test_reference_rows_are_data_apart_from_measured_rows(board_data):
    rows = reference_rows()
    gpt4o = next(row for row in rows if row.model == "GPT-4o" and row.agent == "react")
    assert gpt4o.pass1 == {1: 35.3, 2: 8.5}
    assert gpt4o.passk == {1: (5, 48.2)}
    assert {(row.model, row.pass1[1]) for row in rows if row.agent == "agentless"} == {("GPT-4o", 8.3), ("o3-mini", 27.8)}
    claude37 = next(row for row in rows if row.model == "Claude-3.7-sonnet")
    assert claude37.pass1 == {1: 36.5, 2: 9.6}
    assert {row.model for row in reference_rows(agent="agentless")} == {"GPT-4o", "o3-mini"}
    assert all(set(row.pass1) == {2} for row in reference_rows(n_min=2))
    # Never among the measured rows, whatever the sort.
    for sort in ("-pass1_n1", "pass1_n1", "name"):
        assert all(row.suite == "toy" for row in board(sort=sort).rows)
    assert reference_rows()[0].as_dict()["reference"] is True


def test_function_difficulty_by_hand(board_data):
    rows = {row.name: row for row in function_difficulty(filters=LeaderboardFilters(verified_only=False))}
    f0, f1, f2 = rows["f0"], rows["f1"], rows["f2"]
    # f0: s0 (A 1/2, B 1/2, C 1/1) and s01 (A 1/2).
    assert (f0.attempts, f0.passes, f0.attempts_n1, f0.passes_n1, f0.systems) == (7, 4, 5, 3, 3)
    assert (f1.attempts, f1.passes, f1.attempts_n1, f1.passes_n1, f1.systems) == (8, 4, 4, 3, 3)
    assert (f2.attempts, f2.passes, f2.attempts_n1, f2.passes_n1, f2.systems) == (5, 1, 3, 1, 3)
    assert f2.pass_rate == pytest.approx(0.2)
    assert function_difficulty(filters=LeaderboardFilters(verified_only=False))[0].name == "f2"  # hardest first
    only_c = {row.name: row for row in function_difficulty(filters=LeaderboardFilters(verified_only=False, agent="agentless"))}
    assert (only_c["f2"].attempts, only_c["f2"].passes, only_c["f2"].systems) == (1, 0, 1)


def test_function_difficulty_lists_unattempted_functions_last(board_data):
    from runs.models import Function

    Function.objects.create(paper=board_data.paper, func_id=9, file="m.py", name="never")
    rows = function_difficulty(filters=LeaderboardFilters(verified_only=False))
    assert rows[-1].name == "never" and rows[-1].attempts == 0 and rows[-1].pass_rate is None


def test_system_detail_lists_runs_and_samples_with_attempt_links(board_data):
    a = rows_by_system(board())["A"]
    filters = LeaderboardFilters(verified_only=False)
    detail = system_detail(slug=a.slug, filters=filters)
    assert [run.pk for run in detail.runs] == [board_data.run_a.pk]
    assert detail.runs[0].counts == {"done": 9, "error": 1, "queued": 1, "cancelled": 1}
    assert detail.runs[0].verified
    page = system_samples_page(detail=detail, filters=filters, number=None)
    samples = {sample.sample_id: sample for sample in page.object_list}
    assert set(samples) == {"p_0", "p_1", "p_2", "p_0,1", "p_1,2"}
    s2 = samples["p_2"]
    assert (s2.total, s2.counted, s2.passes, s2.errors) == (2, 1, 0, 1)  # the queued one has not ended
    assert s2.attempts_url == f"/explore/?system={a.slug}&paper=p&sample=p_2"
    # The export lists every attempt: the queued one too, in run and index order.
    exported = {row["sample_id"]: row for row in system_sample_rows(run_ids=detail.run_ids, filters=filters)}
    assert exported["p_2"]["attempt_ids"] == [board_data.attempts[("A", "s2", index)].pk for index in range(3)]
    assert (exported["p_2"]["attempts"], exported["p_2"]["errors"]) == (1, 1)
    assert system_detail(slug="000000000000", filters=LeaderboardFilters(verified_only=False)) is None


def test_query_count_does_not_grow_with_systems(board_data, django_assert_max_num_queries):
    # The standings' marks, which of their runs are public now, and (when the board is not kept) the
    # standings shown and their numbers.
    with django_assert_max_num_queries(4):
        leaderboard_get(filters=LeaderboardFilters(verified_only=False))
    # Twenty more systems, each with a run of two attempts.
    for number in range(20):
        run = make_run(board_data.suite, model=f"openai:model-{number}", k=2)
        make_attempt(run, board_data.samples["s0"], 0, PASS)
        make_attempt(run, board_data.samples["s01"], 0, FAIL)
    standings_refreshed()
    with django_assert_max_num_queries(4):
        result = leaderboard_get(filters=LeaderboardFilters(verified_only=True, n_min=1))
    assert len(result.rows) == 22
    with django_assert_max_num_queries(4):
        function_difficulty(filters=LeaderboardFilters(verified_only=False))
