"""runs.replay.presenters without HTTP: highlighting, diffs, observations, error marking, the score table."""
from pathlib import Path

import pytest
from django.conf import settings
from pygments.formatters import HtmlFormatter

from runs.agents.trajectory import FileChange
from runs.benchmark.text import format_seconds
from runs.replay.comparison import ComparisonError, attempts_compare
from runs.replay.diffs import HIGHLIGHT_STYLE, HighlightBudget, diff_lines, highlight_python, patch_files
from runs.replay.presenters import Pager, ReplayPageError, attempt_replay
from runs.replay.scores import format_number, format_relative_error, score_table
from runs.replay.selectors import attempt_get_for_replay
from runs.replay.steps import observation_parts, step_error_kind
from runs.replay.text import format_cost
from runs.visibility import GoldAccess
from tests.replay.factories import (
    FUNCTION_DIFF,
    TRACEBACK_OUTPUT,
    make_attempt,
    make_sample,
    make_score,
    make_step,
    synthetic_trajectory,
)

# A viewer who may see none of a private suite's gold, and one who may see all of it (runs.visibility.gold_access).
ANONYMOUS = GoldAccess(code=False, numbers=False, staff=False)
STAFF = GoldAccess(code=True, numbers=True, staff=True)


@pytest.mark.parametrize(
    "line",
    [
        "    return total / sum(weights)  # the gold line",
        "x = 'unterminated",
        's = f"{a!r}" + r"\\d+" if not x else None',
        "value = 0x1F + 1.5e-3 + .5 + 10_000j",
        "",
        "<script>alert(1)</script>",
    ],
)
def test_highlighting_only_splits_the_text(line):
    segments = highlight_python(line)
    assert "".join(segment["t"] for segment in segments) == line
    styled = set(HtmlFormatter(style=HIGHLIGHT_STYLE).class2style)
    assert {segment["c"] for segment in segments} <= styled | {""}


def test_highlighting_classes_are_pygments_token_classes():
    segments = highlight_python("    return x  # done")
    assert {"c": "k", "t": "return"} in segments
    assert {"c": "c1", "t": "# done"} in segments
    assert {"c": "s1", "t": "'a'"} in highlight_python("y = 'a'")
    assert {"c": "nc", "t": "Model"} in highlight_python("class Model(Base):")
    # Tokens the style leaves uncoloured (names, operators, numbers in "vs") are one plain segment.
    assert highlight_python("y = x + 42") == [{"c": "", "t": "y = x + 42"}]


def test_every_token_class_has_its_rule_in_the_stylesheet():
    css = (Path(settings.BASE_DIR) / "static/css/replay.css").read_text()
    rules = HtmlFormatter(style=HIGHLIGHT_STYLE, classprefix="tk-").get_token_style_defs("")
    assert rules and all(rule.split(" /* ")[0] in css for rule in rules)


def test_diff_lines_kinds_counts_and_python_tokens():
    lines, additions, deletions, omitted = diff_lines(FUNCTION_DIFF, python=True)
    assert [line["kind"] for line in lines] == ["meta", "meta", "hunk", "ctx", "ctx", "del", "add", "add"]
    assert (additions, deletions, omitted) == (2, 1, 0)
    assert lines[6]["segs"][0] == {"c": "", "t": "+"}
    assert any(segment["c"] == "k" for segment in lines[7]["segs"])
    assert lines[3]["segs"] is None  # context lines are not tokenized
    assert all(line["segs"] is None for line in diff_lines(FUNCTION_DIFF, python=False)[0][3:5])


def test_diff_lines_are_cut_and_the_highlighting_budget_is_shared():
    diff = "--- a/x.py\n+++ b/x.py\n@@ -0,0 +1,100 @@\n" + "".join(f"+x = {i}\n" for i in range(100))
    lines, additions, _, omitted = diff_lines(diff, python=True, max_lines=10)
    assert len(lines) == 10 and omitted == 93 and additions == 100
    changed_chars = sum(len(f"+x = {i}") for i in range(100))
    budget = HighlightBudget(changed_chars * 3 // 2)
    first = diff_lines(diff, python=True, budget=budget)[0]
    second = diff_lines(diff, python=True, budget=budget)[0]
    assert first[-1]["segs"] is not None
    assert all(line["segs"] is None for line in second)  # over budget: line colours only
    assert [line["kind"] for line in second] == [line["kind"] for line in first]


def test_patch_is_split_per_file_with_python_switching_on_the_header():
    patch = FUNCTION_DIFF + "--- /dev/null\n+++ b/notes.txt\n@@ -0,0 +1 @@\n+if this were code\n"
    files = patch_files(patch)
    assert [(f.path, f.change, f.additions) for f in files] == [("code/stats.py", "modified", 2), ("notes.txt", "added", 1)]
    assert files[1].lines[-1]["segs"] is None
    assert not files[0].collapsed


def test_observation_parts_mark_tracebacks_and_truncation():
    text = "head\n[... 1234 characters truncated ...]\n" + TRACEBACK_OUTPUT
    parts = observation_parts(text)
    assert "".join(part.text for part in parts) == text
    kinds = [part.kind for part in parts]
    assert "cut" in kinds and "tb" in kinds
    traceback = next(part.text for part in parts if part.kind == "tb")
    assert traceback.startswith("Traceback (most recent call last):") and traceback.endswith("NotImplementedError")


@pytest.mark.parametrize(
    ("fields", "kind"),
    [
        ({}, ""),
        ({"error": True, "observation": "Error: no such file"}, "tool error"),
        ({"traceback": "Traceback ..."}, "traceback"),
        ({"observation": "boom\n[exit code 2; 0.1 s; cwd code]", "exit_code": 2}, "exit code 2"),
        ({"observation": "[timed out after 600 s and was killed; 600.0 s; cwd code]", "exit_code": 137, "timed_out": True},
         "timed out"),
        ({"observation": TRACEBACK_OUTPUT.replace("exit code 1", "exit code 0")}, "traceback in output"),
        # The program printed a status line of its own: the step's field decides, either way.
        ({"observation": '{"mean": 2.6}\n[exit code 0; 0.1 s; cwd code]', "exit_code": 1}, "exit code 1"),
        ({"observation": "boom\n[exit code 2; 0.1 s; cwd code]\n[exit code 0; 0.1 s; cwd code]", "exit_code": 0}, ""),
        # Stored before steps had the field: no exit status is shown.
        ({"observation": "boom\n[exit code 2; 0.1 s; cwd code]", "exit_code": None}, ""),
    ],
)
def test_step_error_kind(fields, kind):
    assert step_error_kind(make_step(1, **fields)) == kind


def test_formats():
    assert format_seconds(2.5) == "2.5 s"
    assert format_seconds(125) == "2 min 05 s"
    assert format_seconds(None) == "—"
    assert format_cost(0.0042, False) == "$0.0042"
    assert format_cost(0.0, True) == "unknown"
    assert format_cost(0.5, True) == "$0.5000 + unknown"
    assert format_number(0.123456789) == ("0.123457", "0.123456789")
    assert format_number("NaN") == ("NaN", "NaN")
    assert format_number(None)[0] == "—"
    assert format_relative_error("Infinity") == "∞"
    assert format_relative_error(0.0312) == "3.12%"
    assert format_relative_error(0) == "0%"


@pytest.mark.django_db
def test_score_table_puts_both_verdicts_side_by_side():
    sample = make_sample(gold=[{"mean": 2.6, "spread": 0.0}, {"acc": 0.9}])
    reported = make_score(sample, {"Experiment 1": {"mean": 2.6, "spread": 1.0}, "Experiment 2": {"acc": "NaN"}})
    reexecuted = make_score(sample, {"Experiment 1": {"mean": 3.0, "spread": 0.0}})
    table = score_table(reported, reexecuted)
    assert [e.label for e in table] == ["Experiment 1", "Experiment 2"]
    mean, spread = table[0].rows
    assert mean.reported.passed and not mean.reexecuted.passed and mean.mismatch
    assert mean.reexecuted.relative_error == "15.38%"
    assert spread.reported.relative_error == "∞" and spread.reported.reason == "outside tolerance"
    assert spread.reexecuted.passed
    acc = table[1].rows[0]
    assert not acc.reported.passed and acc.reexecuted.reason == "missing"
    assert table[1].reexecuted_error  # "the answer has no entry for experiment ..."


@pytest.mark.django_db
def test_replay_of_default_attempt():
    attempt = attempt_get_for_replay(pk=make_attempt().pk)
    replay = attempt_replay(attempt=attempt, access=ANONYMOUS)
    assert replay.step_count == 4
    assert replay.first_error == 3 and replay.error_count == 1
    assert replay.steps[1].files[0].additions == 2
    assert replay.final_patch and not replay.gold_code_hidden
    assert replay.input_tokens == 4800 and replay.cost == "$0.0168"


@pytest.mark.django_db
def test_gold_agents_hide_code_from_anonymous_viewers():
    attempt = attempt_get_for_replay(pk=make_attempt(agent="gold", model="").pk)
    hidden = attempt_replay(attempt=attempt, access=ANONYMOUS)
    assert hidden.gold_code_hidden and hidden.patch_hidden and hidden.final_patch == []
    write = hidden.steps[1]
    assert write.redacted and "def weighted_mean" not in write.arguments
    assert write.files[0].hidden and write.files[0].lines == [] and write.files[0].additions == 2
    shown = attempt_replay(attempt=attempt, access=STAFF)
    assert not shown.gold_code_hidden and shown.steps[1].files[0].lines
    assert "def weighted_mean" in shown.steps[1].arguments


@pytest.mark.django_db
def test_missing_or_unreadable_trajectory():
    queued = make_attempt(trajectory=None, status="queued", answer=None)
    replay = attempt_replay(attempt=attempt_get_for_replay(pk=queued.pk), access=STAFF)
    assert replay.steps == [] and "not finished" in replay.trajectory_problem
    broken = make_attempt(trajectory={"format": "autoexperiment.trajectory/99", "steps": []})
    replay = attempt_replay(attempt=attempt_get_for_replay(pk=broken.pk), access=STAFF)
    assert "cannot be read" in replay.trajectory_problem and replay.experiments


@pytest.mark.django_db
def test_compare_refuses_different_samples():
    a, b = make_attempt(), make_attempt()
    with pytest.raises(ComparisonError, match="same sample"):
        attempts_compare(left=a, right=b, access=STAFF)
    c = make_attempt(sample=a.sample, steps=[make_step(1)])
    comparison = attempts_compare(left=a, right=c, access=STAFF)
    assert len(comparison.pairs) == 4 and comparison.pairs[1].right is None
    assert comparison.first_error == 3


@pytest.mark.parametrize(
    ("total", "page", "shown", "previous", "following"),
    [
        (0, 1, [], None, None),  # no steps (yet): one page, which starts at step 1 and shows none
        (10, 1, [1, 2, 3, 4], None, 2),
        (10, 3, [9, 10], 2, None),  # the last page holds what is left
        (8, 2, [5, 6, 7, 8], 1, None),
    ],
)
def test_a_pager_says_which_steps_its_page_shows(total, page, shown, previous, following):
    pager = Pager(page=page, per_page=4, total=total, prefix="?page=", errors=[])
    pager.check()
    assert list(pager.steps) == shown
    # The page's <ol start> and the script's data-page-first/-last (an empty page: 1 and 0).
    assert (pager.first, pager.last) == ((page - 1) * 4 + 1, min(total, page * 4))
    assert (pager.previous, pager.next) == (previous, following)
    assert pager.page_count == max(1, -(-total // 4))


def test_a_pager_links_steps_on_other_pages_through_their_page():
    pager = Pager(page=2, per_page=4, total=10, prefix="?page=", errors=[3, 9])
    assert pager.href(6) == "#step-6"
    assert pager.href(3) == pager.first_error_href == "?page=1#step-3"
    assert pager.href(9) == "?page=3#step-9"


def test_a_pager_refuses_a_page_the_trajectory_does_not_have():
    with pytest.raises(ReplayPageError, match=r"^there is no page 4 of steps: the trajectory has 10 steps, "
                                              r"shown 4 to a page on 3 pages$"):
        Pager(page=4, per_page=4, total=10, prefix="?page=", errors=[]).check()


def test_the_long_trajectory_factory_is_in_the_stored_format():
    from runs.agents.trajectory import trajectory_from_json

    data = synthetic_trajectory(steps=20)
    trajectory = trajectory_from_json(data)
    assert len(trajectory.steps) == 20
    assert isinstance(trajectory.steps[0].files_changed[0], FileChange)
    assert sum(1 for step in trajectory.steps if step_error_kind(step)) == 2
