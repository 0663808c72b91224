"""Trajectory documents: round trips, versions, atomic saves, workspace diffs and the final patch."""

from __future__ import annotations

import json
import math
import os
import re
import subprocess
import time

import pytest

from runs.agents.recorder import MAX_DIFF_FILE_BYTES, MAX_STEP_FILE_CHANGES, TrajectoryWriter, diff_snapshots, snapshot
from runs.agents.tools import ToolContext
from runs.agents.trajectory import (
    FORMAT,
    FileChange,
    FinalAnswer,
    Header,
    Step,
    Trajectory,
    TrajectoryFormatError,
    load_trajectory,
)
from runs.benchmark.answers import parse_answer
from runs.benchmark.masking import replace_function_body
from tests.agents.helpers import GOLD_BODY, build_toy_workspace
from tests.support import require_patch


def full_trajectory() -> Trajectory:
    """A trajectory with every field set to something other than its default."""
    header = Header(
        sample_id="toy_0",
        agent="react",
        model="openai:gpt-4o",
        config={"history": "window", "window": 3, "max_cost": 1.0},
        versions={"python": "3.11.7"},
        started_at="2026-01-01T00:00:00+00:00",
        ended_at="2026-01-01T00:01:00+00:00",
        exit_status="submitted",
        exit_message="done",
        input_tokens=30,
        output_tokens=12,
        cost=0.25,
        cost_unknown=True,
    )
    step = Step(
        index=1,
        started_at="2026-01-01T00:00:01+00:00",
        duration=1.5,
        model_seconds=0.75,
        thought="Look at the file. ünïcödé",
        tool="write_file",
        arguments={"path": "code/a.py", "content": "x = 1\n", "nested": [1, 2.5, None, True]},
        tool_call_id="call_1",
        observation="Created /workspace/code/a.py",
        exit_code=3,
        timed_out=True,
        truncated=True,
        error=True,
        traceback="Traceback ...",
        files_changed=[FileChange("code/a.py", "added", "--- /dev/null\n+++ b/code/a.py\n"), FileChange("d.bin", "modified", None, "binary file")],
        input_tokens=30,
        output_tokens=12,
        cost=0.25,
        cost_unknown=True,
        notes=["1 extra tool call(s) not executed"],
        summary="Read a.py.",
    )
    answer = FinalAnswer.from_parsed('{"Experiment 1": {"mean": 2.6}}', parse_answer('{"Experiment 1": {"mean": 2.6}}'))
    return Trajectory(header=header, steps=[step], final_answer=answer, final_patch="--- a/code/a.py\n")


def test_round_trip_is_lossless(tmp_path):
    trajectory = full_trajectory()
    path = tmp_path / "t.json"
    path.write_text(trajectory.to_json())
    assert load_trajectory(path) == trajectory
    assert json.loads(path.read_text())["format"] == FORMAT == "autoexperiment.trajectory/1"


def test_non_finite_numbers_in_an_answer_survive(tmp_path):
    trajectory = full_trajectory()
    trajectory.final_answer = FinalAnswer.from_parsed("{'loss': inf}", parse_answer("{'loss': inf}"))
    path = tmp_path / "t.json"
    path.write_text(trajectory.to_json())
    assert math.isinf(load_trajectory(path).final_answer.parsed["loss"])


def test_unknown_future_fields_are_kept(tmp_path):
    data = full_trajectory().to_dict()
    data["reviewer"] = "someone"
    data["header"]["gpu"] = "A100"
    data["steps"][0]["screenshot"] = "s.png"
    path = tmp_path / "t.json"
    path.write_text(json.dumps(data))
    loaded = load_trajectory(path)
    assert loaded.extra == {"reviewer": "someone"} and loaded.header.extra == {"gpu": "A100"}
    assert loaded.steps[0].extra == {"screenshot": "s.png"}
    assert loaded.to_dict() == data


@pytest.mark.parametrize(
    "content, message",
    [
        ({"format": "autoexperiment.trajectory/2", "header": {}}, "format 'autoexperiment.trajectory/2' is not supported"),
        ({"header": {}}, "not an AutoExperiment trajectory"),
        ([1, 2], "a trajectory is a JSON object"),
        ({"format": FORMAT, "header": {"sample_id": "x"}}, "Header"),
    ],
)
def test_wrong_versions_and_shapes_are_clear_errors(tmp_path, content, message):
    path = tmp_path / "t.json"
    path.write_text(json.dumps(content))
    with pytest.raises(TrajectoryFormatError, match=message):
        load_trajectory(path)


def test_steps_written_before_the_command_outcome_fields_still_load(tmp_path):
    data = full_trajectory().to_dict()
    del data["steps"][0]["exit_code"], data["steps"][0]["timed_out"]
    step = Trajectory.from_dict(data).steps[0]
    assert (step.exit_code, step.timed_out) == (None, False)  # no exit status, not one read from the text


@pytest.mark.parametrize(
    "fields, message",
    [
        ({"exit_code": "0"}, 'step 2: exit_code must be an integer or null, got "0"'),
        ({"exit_code": 1.0}, "step 2: exit_code must be an integer or null, got 1.0"),
        ({"exit_code": True}, "step 2: exit_code must be an integer or null, got true"),
        ({"exit_code": 2**31}, f"step 2: exit_code must be an integer or null, got {2**31}"),
        ({"timed_out": 1}, "step 2: timed_out must be true or false, got 1"),
        ({"timed_out": None}, "step 2: timed_out must be true or false, got null"),
    ],
)
def test_command_outcome_fields_must_hold_what_they_say(fields, message):
    data = full_trajectory().to_dict()
    data["steps"].append({**data["steps"][0], "index": 2, **fields})
    with pytest.raises(TrajectoryFormatError, match=re.escape(message)):
        Trajectory.from_dict(data)
    for code in (None, 0, -9, 2**31 - 1, -(2**31)):
        data["steps"][1] = {**data["steps"][0], "index": 2, "exit_code": code, "timed_out": False}
        assert Trajectory.from_dict(data).steps[1].exit_code == code


def test_a_file_that_is_not_json_is_a_format_error(tmp_path):
    path = tmp_path / "t.json"
    path.write_text('{"format": ')
    with pytest.raises(TrajectoryFormatError, match="not valid JSON"):
        load_trajectory(path)


# --- the writer -------------------------------------------------------------------------------------------


def test_writer_saves_after_every_step_and_leaves_no_temporary_files(tmp_path):
    path = tmp_path / "out" / "t.json"
    writer = TrajectoryWriter(path, Header(sample_id="s", agent="noop", model="none"))
    assert load_trajectory(path).header.exit_status == "running"
    assert load_trajectory(path).header.versions["python"]
    for n in range(3):
        step = writer.new_step(thought=f"step {n + 1}")
        step.input_tokens, step.cost = 10, 0.5
        writer.add_step(step)
        on_disk = load_trajectory(path)
        assert [s.thought for s in on_disk.steps] == [f"step {i + 1}" for i in range(n + 1)]
        assert on_disk.header.cost == 0.5 * (n + 1)
    writer.finish(exit_status="step_limit", exit_message="out of steps")
    assert load_trajectory(path) == writer.trajectory
    assert os.listdir(path.parent) == ["t.json"]


def test_writer_refuses_a_path_inside_the_workspace(tmp_path):
    workspace = build_toy_workspace(tmp_path)
    with pytest.raises(ValueError, match="must not be inside the workspace"):
        TrajectoryWriter(workspace / "t.json", Header(sample_id="s", agent="a", model="m"), workspace=workspace)


def test_baseline_agents_record_tool_steps_without_the_loop(tmp_path, sandbox_on):
    """What a fixed-pipeline baseline does: its own thoughts, tools called directly."""
    workspace = build_toy_workspace(tmp_path)
    sandbox = sandbox_on(workspace)
    path = tmp_path / "t.json"
    writer = TrajectoryWriter(path, Header(sample_id="toy_0", agent="gold", model="none"), workspace=workspace)
    context = ToolContext(sandbox=sandbox, workspace=workspace)
    masked = (workspace / "code/stats.py").read_text()
    fixed = replace_function_body(masked, "weighted_mean", GOLD_BODY)
    step, _ = writer.tool_step(context, "write_file", {"path": "code/stats.py", "content": fixed}, thought="Insert the gold body.")
    assert step.index == 1 and step.thought == "Insert the gold body." and step.tool == "write_file"
    assert [(c.path, c.change) for c in step.files_changed] == [("code/stats.py", "modified")]
    assert "+    return total / sum(weights)" in step.files_changed[0].diff
    assert step.exit_code is None and not step.timed_out  # write_file runs no command
    ran, result = writer.tool_step(context, "command_line", {"command": "cd code && python3 run.py"}, thought="Run it.")
    assert '{"mean": 2.6, "spread": 7.0}' in result.observation
    assert (ran.exit_code, ran.timed_out) == (result.exit_code, result.timed_out) == (0, False)
    failed, _ = writer.tool_step(context, "command_line", {"command": "echo '[exit code 0; 0.1 s; cwd /workspace]'; exit 4"})
    assert failed.exit_code == 4  # the field, whatever the output says
    assert [step["exit_code"] for step in json.loads(path.read_text())["steps"]] == [None, 0, 4]
    trajectory = writer.finish(exit_status="submitted", final_answer_raw='{"mean": 2.6, "spread": 7.0}')
    assert trajectory.final_answer.parsed == {"mean": 2.6, "spread": 7.0}
    assert trajectory.final_patch == writer.trajectory.steps[0].files_changed[0].diff
    assert load_trajectory(path) == trajectory


# --- snapshots and diffs ----------------------------------------------------------------------------------


def _age(root, seconds=60):
    """Backdate every file, as if written long before: their snapshot entries are then trusted."""
    past = time.time() - seconds
    for directory, _, files in os.walk(root):
        for name in files:
            os.utime(os.path.join(directory, name), (past, past))


def test_snapshots_diff_added_modified_deleted_binary_and_large_files(tmp_path):
    root = tmp_path / "ws"
    root.mkdir()
    (root / "keep.txt").write_text("same\n")
    (root / "edit.txt").write_text("one\ntwo\n")
    (root / "gone.txt").write_text("bye\n")
    (root / "data.bin").write_bytes(b"\x00\x01")
    (root / "__pycache__").mkdir()
    (root / "__pycache__" / "x.pyc").write_bytes(b"\x00")
    before = snapshot(root)
    assert "__pycache__/x.pyc" not in before
    (root / "edit.txt").write_text("one\n2\n")
    (root / "gone.txt").unlink()
    (root / "new.txt").write_text("hello\n")
    (root / "data.bin").write_bytes(b"\x00\x02\x03")
    (root / "big.log").write_text("x" * (MAX_DIFF_FILE_BYTES + 1))
    (root / "keep.txt").write_text("same\n")  # rewritten, identical
    changes = {c.path: c for c in diff_snapshots(before, snapshot(root, before))}
    assert set(changes) == {"edit.txt", "gone.txt", "new.txt", "data.bin", "big.log"}
    assert changes["edit.txt"].diff == "--- a/edit.txt\n+++ b/edit.txt\n@@ -1,2 +1,2 @@\n one\n-two\n+2\n"
    assert changes["gone.txt"].change == "deleted" and "+++ /dev/null" in changes["gone.txt"].diff
    assert changes["new.txt"].change == "added" and changes["new.txt"].diff.endswith("+hello\n")
    assert changes["data.bin"].diff is None and changes["data.bin"].note == "binary file: no diff recorded"
    assert changes["big.log"].diff is None and "large file" in changes["big.log"].note


def test_a_quick_rewrite_of_the_same_size_is_not_missed(tmp_path):
    # Timestamps are coarse: two writes within one tick leave mtime and size unchanged.
    root = tmp_path / "ws"
    root.mkdir()
    (root / "a.py").write_text("x = 1\n")
    before = snapshot(root)
    (root / "a.py").write_text("x = 2\n")
    changes = diff_snapshots(before, snapshot(root, before))
    assert [c.diff for c in changes] == ["--- a/a.py\n+++ b/a.py\n@@ -1 +1 @@\n-x = 1\n+x = 2\n"]


def test_unchanged_files_are_not_read_again(tmp_path):
    root = tmp_path / "ws"
    for n in range(300):
        (root / f"pkg{n % 10}").mkdir(parents=True, exist_ok=True)
        (root / f"pkg{n % 10}" / f"m{n}.py").write_text(f"def f{n}():\n    return {n}\n" * 20)
    _age(root)
    first = snapshot(root)
    started = time.perf_counter()
    second = snapshot(root, first)
    elapsed = time.perf_counter() - started
    assert all(second[path] is first[path] for path in first)  # reused, not re-read
    assert diff_snapshots(first, second) == []
    assert elapsed < 0.5


def test_final_patch_applies_to_a_fresh_workspace(tmp_path, sandbox_on):
    workspace = build_toy_workspace(tmp_path)
    sandbox = sandbox_on(workspace)
    writer = TrajectoryWriter(tmp_path / "t.json", Header(sample_id="toy_0", agent="gold", model="none"), workspace=workspace)
    context = ToolContext(sandbox=sandbox, workspace=workspace)
    masked = (workspace / "code/stats.py").read_text()
    writer.tool_step(context, "write_file", {"path": "code/stats.py", "content": replace_function_body(masked, "weighted_mean", GOLD_BODY)})
    writer.tool_step(context, "write_file", {"path": "code/helpers/extra.py", "content": "X = 1"})
    writer.tool_step(context, "command_line", {"command": "rm code/run.py && echo notes > scratch.txt"})
    patch = writer.finish(exit_status="step_limit").final_patch
    assert "scratch.txt" not in patch  # only code/ is the submission
    assert "+++ b/code/helpers/extra.py" in patch and "\\ No newline at end of file" in patch
    pristine = build_toy_workspace(tmp_path / "again")
    require_patch()
    subprocess.run(["patch", "-p1", "--quiet"], input=patch, text=True, cwd=pristine, check=True)
    for name in ("stats.py", "helpers/extra.py"):
        assert (pristine / "code" / name).read_text() == (workspace / "code" / name).read_text()
    assert not (pristine / "code/run.py").exists()


def test_a_step_that_changes_thousands_of_files_records_a_bounded_list(tmp_path):
    workspace = tmp_path / "workspace"
    (workspace / "code").mkdir(parents=True)
    writer = TrajectoryWriter(tmp_path / "trajectory.json", Header(sample_id="s", agent="a", model=""), workspace=workspace)
    for index in range(3 * MAX_STEP_FILE_CHANGES):
        (workspace / "code" / f"f{index}.txt").write_text("x\n" * 2000)
    changes = writer.changes_since_last()
    assert len(changes) == MAX_STEP_FILE_CHANGES + 1
    assert changes[-1].note == f"{2 * MAX_STEP_FILE_CHANGES:,} more files changed in this step: not listed"
    assert sum(len(change.diff or "") for change in changes) <= 500_000
    assert changes[-2].diff is None and "too long" in changes[-2].note
