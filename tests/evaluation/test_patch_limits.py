"""Issue 30, attack 8: an agent's own final patch is held to the upload limits.

The attacker is a ReAct agent (the fake LLM on loopback) that writes many large files into its code
and reports the gold numbers, through the real harness on both sandbox backends. Its patch is over
SUBMISSION_MAX_PATCH_BYTES (lowered here so the test stays small; scripts/bench_patch_limits.py runs
the 120 files of 500 KB and measures the worker's memory): the attempt is counted (done) and failed
with outcome patch_too_large, never re-executed; the stored patch is cut to the limit with a note;
the replay page still opens.
"""
from __future__ import annotations

import json

import pytest

from runs.benchmark.patch_parsing import parse_patch
from runs.models import Attempt
from tests.evaluation.test_hostile_agents import (  # noqa: F401 - fixtures
    assert_no_gold,
    assert_nothing_left,
    backend,
    final,
    host,
    hostile_suite,
    react_attack,
    replay_html,
    turn,
)

pytestmark = pytest.mark.django_db(transaction=True)

LIMIT = 64 * 1024
FILES, FILE_BYTES = 12, 20_000  # 240 KB of new code: well over LIMIT, each file alone well under it
MANY_LARGE_FILES = f"""python3 - <<'EOF'
import os
os.makedirs("code/bulk", exist_ok=True)
for number in range({FILES}):
    with open(f"code/bulk/part_{{number:03d}}.py", "w") as handle:
        handle.write(("x = 1  # " + "y" * 90 + "\\n") * ({FILE_BYTES} // 100))
print("wrote", len(os.listdir("code/bulk")))
EOF"""


def test_a_final_patch_over_the_limits_is_counted_failed_cut_and_not_reexecuted(
    backend, hostile_suite, fake_llm, host, workspace_root, settings,  # noqa: F811 - the fixtures imported above
):
    settings.SUBMISSION_MAX_PATCH_BYTES = LIMIT
    answer = hostile_suite.gold_answer()
    attempt = react_attack(hostile_suite, fake_llm, backend, [
        turn("command_line", "Write a lot of code.", command=MANY_LARGE_FILES),
        final(answer),
    ])

    why = (attempt.status, attempt.outcome, attempt.failure_detail, attempt.reexecution_error, attempt.infra_history)
    assert attempt.status == Attempt.DONE and attempt.tries == 1, why
    assert attempt.outcome == Attempt.PATCH_TOO_LARGE, why
    assert attempt.reported_passed is True and attempt.passed is False and attempt.mismatch is False, why
    # A harness verdict, so it counts on the leaderboard (re-executed attempts only): failed, nothing ran.
    assert attempt.reexecution_passed is False and attempt.reexecution_output == "", why
    assert "not re-executed" in attempt.reexecution_error and "over the limits" in attempt.reexecution_error
    assert attempt.failure_detail == attempt.reexecution_error
    # Stored cut, with a note, within the limit; the files kept are whole and still read as a patch.
    stored = attempt.final_patch
    assert len(stored.encode()) <= LIMIT
    assert stored.startswith("# Final patch cut by the harness: it is over the limits")
    assert f"{FILES + 0:,} files changed under code/" in stored.splitlines()[0]
    kept = parse_patch(stored)
    assert kept and all(section.path.startswith("code/bulk/part_") for section in kept)
    assert all(section.text.count("\n+x = 1") == FILE_BYTES // 100 for section in kept)
    assert attempt.trajectory["final_patch"] == stored
    assert "over the limits" in attempt.trajectory["final_patch_over_limits"]
    assert len(json.dumps(attempt.trajectory)) < 4 * LIMIT  # the steps' own diffs are cut as before
    page = replay_html(attempt)
    assert "the final patch is not re-executed: it is over the limits" in page
    host.check()
    assert_nothing_left(workspace_root, backend)
    assert_no_gold(attempt, hostile_suite, fake_llm=fake_llm, numbers=False)  # the test handed it the numbers


# --- the bounded diff and the outcome rule, without a sandbox -----------------------------------


def _snapshots(tmp_path, files: dict[str, str]):
    from runs.agents.recorder import snapshot

    workspace = tmp_path / "workspace"
    (workspace / "code").mkdir(parents=True)
    (workspace / "code" / "metric.py").write_text("def f():\n    raise NotImplementedError\n")
    before = snapshot(workspace, under="code")
    for name, text in files.items():
        (workspace / "code" / name).write_text(text)
    return before, snapshot(workspace, under="code")


def test_the_bounded_diff_is_the_whole_patch_within_the_limits(tmp_path):
    from runs.agents.recorder import bounded_patch_between, patch_between

    before, after = _snapshots(tmp_path, {"a.py": "a = 1\n" * 100, "metric.py": "def f():\n    return 2\n"})
    bounded = bounded_patch_between(before, after, max_bytes=LIMIT, max_lines=1000)
    assert bounded.over_limits is None and bounded.text == patch_between(before, after)


@pytest.mark.parametrize(("max_bytes", "max_lines", "limit"), [(8 * 1024, 20_000, "8.0 KB"), (LIMIT, 250, "250 lines")])
def test_the_bounded_diff_stops_at_the_first_file_over_a_limit(tmp_path, monkeypatch, max_bytes, max_lines, limit):
    from runs.agents import recorder

    files = {f"part_{number:03d}.py": f"x{number} = 1\n" * 100 for number in range(40)}  # ~900 bytes, 103 lines each
    before, after = _snapshots(tmp_path, files)
    diffed = []
    real = recorder._file_change
    monkeypatch.setattr(recorder, "_file_change", lambda path, *args: diffed.append(path) or real(path, *args))
    bounded = recorder.bounded_patch_between(before, after, max_bytes=max_bytes, max_lines=max_lines)

    assert bounded.over_limits and limit in bounded.over_limits and "40 files changed under code/" in bounded.over_limits
    assert len(diffed) < 12  # stopped early: the other files were never diffed
    assert len(bounded.text.encode()) <= max_bytes and bounded.text.count("\n") <= max_lines
    assert bounded.text.startswith("# Final patch cut by the harness: it is over the limits")
    kept = parse_patch(bounded.text)
    assert kept and [section.path for section in kept] == [f"code/{name}" for name in sorted(files)][: len(kept)]
    assert all(section.text.count("\n+x") == 100 for section in kept)  # whole files only


@pytest.mark.parametrize(("label", "outcome"), [
    (Attempt.WRONG_ANSWER, Attempt.PATCH_TOO_LARGE),
    (Attempt.NO_ANSWER, Attempt.PATCH_TOO_LARGE),  # whatever it answered, its code was never checked
    (Attempt.BUDGET_EXHAUSTED, Attempt.PATCH_TOO_LARGE),
    (Attempt.INFRASTRUCTURE, Attempt.INFRASTRUCTURE),  # not the model's result, whatever else
])
def test_a_refused_patch_is_the_outcome_before_the_answer(label, outcome):
    from runs.analysis.outcomes import attempt_outcome
    from runs.evaluation.verdicts import patch_refused_reexecution

    refused = patch_refused_reexecution(over_limits="is over the limits", experiments=[])
    assert refused.passed is False and refused.too_large and not refused.applied
    assert attempt_outcome(
        status=Attempt.DONE, failure_label=label, passed=False, reported_passed=True, reexecution_passed=False,
        reexecution_error=refused.error, reexecution_score=refused.score, out_of_scope_edits=[],
    ) == outcome
    # The marker is the harness's own key: an error text alike is not enough.
    assert attempt_outcome(
        status=Attempt.DONE, failure_label=Attempt.WRONG_ANSWER, passed=False, reported_passed=True,
        reexecution_passed=False, reexecution_error=refused.error, reexecution_score={"error": refused.error},
        out_of_scope_edits=[],
    ) == Attempt.REEXECUTION_FAILED


def test_an_attempt_refused_as_too_large_gets_no_transplants_and_a_failed_one_does(db):
    """At n >= 2 a failed attempt's functions are judged one by one from its stored patch; a patch over
    the limits never ran and is stored cut, so it has nothing to judge them by."""
    from runs.evaluation.transplants import transplants_plan
    from runs.evaluation.verdicts import patch_refused_reexecution
    from tests.leaderboard.factories import FAIL, build_board_data, make_attempt

    data = build_board_data()
    refused = patch_refused_reexecution(over_limits="is over the limits", experiments=[])
    too_large = make_attempt(data.run_a, data.samples["s01"], 7, {**FAIL, "reexecution_score": refused.score})
    failed = make_attempt(data.run_a, data.samples["s01"], 8, FAIL)
    assert transplants_plan(attempt_id=too_large.pk, enqueue_jobs=False) == []
    assert len(transplants_plan(attempt_id=failed.pk, enqueue_jobs=False)) == 2
