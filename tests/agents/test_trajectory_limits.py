"""Our own workers' trajectories stay within the same limits as an upload's (runs.limits): the
writer cuts what is over them and says so in the step, so the replay's bounds hold for our runs."""
from __future__ import annotations

import pytest

from runs.agents.recorder import TrajectoryWriter
from runs.agents.trajectory import FileChange, Header, Step, load_trajectory
from runs.evaluation.services import RunError, run_create
from runs.limits import trajectory_problems


@pytest.fixture
def small_limits(settings):
    settings.TRAJECTORY_MAX_STEPS = 3
    settings.TRAJECTORY_MAX_TEXT_BYTES = 2048
    settings.TRAJECTORY_MAX_STEP_BYTES = 16384
    settings.TRAJECTORY_MAX_STEP_FILES = 4
    settings.TRAJECTORY_MAX_STEP_DIFF_LINES = 30
    settings.TRAJECTORY_MAX_DIFF_LINES = 50
    return settings


def diff(lines: int, name: str = "code/m.py", width: int = 0) -> str:
    return f"--- a/{name}\n+++ b/{name}\n@@ -0,0 +1,{lines - 3} @@\n" + "".join(f"+x{i}{'y' * width}\n" for i in range(lines - 3))


def step(index: int, **fields) -> Step:
    return Step(index=index, started_at="2025-01-01T00:00:00+00:00", input_tokens=10, output_tokens=2, cost=0.5, **fields)


def test_the_writer_cuts_each_step_to_the_limits_and_says_so(tmp_path, small_limits):
    writer = TrajectoryWriter(tmp_path / "t.json", Header(sample_id="s", agent="react", model="m"))
    writer.add_step(step(1, thought="é" * 1500, observation="o" * 10_000 + "[exit code 1; 0.1 s; cwd code]",
                         arguments={"path": "code/m.py", "content": "c" * 5000}, notes=["n" * 900] * 10))
    writer.add_step(step(2, files_changed=[FileChange(path=f"code/f{i}.py", change="modified", diff=diff(5, f"code/f{i}.py")) for i in range(6)]))
    writer.add_step(step(3, files_changed=[FileChange(path="code/a.py", change="modified", diff=diff(25)), FileChange(path="code/b.py", change="modified", diff=diff(25))]))
    writer.add_step(step(4, thought="past the step limit"))
    writer.add_step(step(5, thought="and another"))
    trajectory = load_trajectory(tmp_path / "t.json")

    assert trajectory_problems(trajectory) == []  # what an upload would be held to
    first, second, third = trajectory.steps
    assert len(first.thought.encode()) <= 2048 and "characters truncated" in first.thought
    assert first.observation.endswith("[exit code 1; 0.1 s; cwd code]") and first.truncated  # the status line survives
    assert first.arguments["path"] == "code/m.py" and "characters truncated" in first.arguments["content"]
    assert first.notes[-2].startswith("notes cut") and "arguments were cut" in first.notes[-1]
    assert [change.path for change in second.files_changed][-1] == "."
    assert second.files_changed[-1].note == "3 more files changed in this step: not listed"
    # 25 + 25 lines: the second diff passes the step's 30 lines and is replaced by a note.
    assert third.files_changed[0].diff is not None
    assert third.files_changed[1].diff is None and "this step's diffs passed 30 lines" in third.files_changed[1].note
    assert "2 later steps not recorded: a trajectory holds at most 3 steps" in third.notes[-1]
    assert len([note for note in third.notes if "not recorded" in note]) == 1  # one note, kept up to date
    assert trajectory.header.cost == 2.5  # dropped steps are still paid for


def test_the_attempts_diff_lines_are_capped_across_steps(tmp_path, small_limits):
    small_limits.TRAJECTORY_MAX_STEPS = 10
    writer = TrajectoryWriter(tmp_path / "t.json", Header(sample_id="s", agent="react", model="m"))
    for index in range(1, 4):
        writer.add_step(step(index, files_changed=[FileChange(path="code/m.py", change="modified", diff=diff(20))]))
    trajectory = load_trajectory(tmp_path / "t.json")
    assert trajectory_problems(trajectory) == []
    kept = [change.diff is not None for s in trajectory.steps for change in s.files_changed]
    assert kept == [True, True, False]
    assert "this attempt's diffs passed 50 lines" in trajectory.steps[2].files_changed[0].note


def test_a_step_over_the_step_limit_loses_its_longest_diffs_then_text(tmp_path, small_limits):
    small_limits.TRAJECTORY_MAX_STEP_BYTES = 6000
    small_limits.TRAJECTORY_MAX_STEP_DIFF_LINES = 500
    small_limits.TRAJECTORY_MAX_DIFF_LINES = 1000
    writer = TrajectoryWriter(tmp_path / "t.json", Header(sample_id="s", agent="react", model="m"))
    writer.add_step(step(1, thought="t" * 2000, observation="o" * 2000,
                         files_changed=[FileChange(path="code/a.py", change="modified", diff=diff(200, width=40)), FileChange(path="code/b.py", change="modified", diff=diff(10))]))
    writer.add_step(step(2, thought="t" * 2000, observation="o" * 2000, traceback="x" * 2000, summary="s" * 2000))
    trajectory = load_trajectory(tmp_path / "t.json")
    assert trajectory_problems(trajectory) == []
    first, second = trajectory.steps
    assert first.files_changed[0].diff is None and "this step passed 6,000 bytes" in first.files_changed[0].note
    assert first.files_changed[1].diff is not None and first.thought == "t" * 2000  # the rest fits
    assert sum(len(getattr(second, name)) for name in ("thought", "observation", "traceback", "summary")) < 6000
    assert "characters truncated" in second.thought


def test_steps_past_the_trajectorys_byte_limit_keep_only_a_little_text(tmp_path, small_limits):
    small_limits.TRAJECTORY_MAX_STEPS = 20
    small_limits.TRAJECTORY_MAX_STEP_DIFF_LINES = 500
    small_limits.TRAJECTORY_MAX_DIFF_LINES = 10_000
    small_limits.SUBMISSION_MAX_PATCH_BYTES = 4096
    small_limits.SUBMISSION_MAX_TRAJECTORY_BYTES = 250_000  # about a dozen of these 15 KB steps, with the reserve
    writer = TrajectoryWriter(tmp_path / "t.json", Header(sample_id="s", agent="react", model="m"))
    for index in range(1, 21):
        writer.add_step(step(index, thought="t" * 2000, observation="o" * 2000, traceback="x" * 2000, summary="s" * 2000,
                             files_changed=[FileChange(path="code/m.py", change="modified", diff=diff(200, width=25))]))
    trajectory = load_trajectory(tmp_path / "t.json")
    assert trajectory_problems(trajectory) == [] and len(trajectory.steps) == 20
    assert len(trajectory.to_json().encode()) <= 250_000 - 4096
    cut = [s for s in trajectory.steps if any("reached its limit of 250,000 bytes" in note for note in s.notes)]
    assert 0 < len(cut) < 20 and cut[-1] is trajectory.steps[-1]  # the last steps, not the first
    assert len(cut[0].observation) < 600 and cut[0].files_changed[0].diff is None


def test_a_run_cannot_ask_for_more_steps_than_a_trajectory_holds(small_limits):
    with pytest.raises(RunError, match="max steps is 4; a trajectory holds at most 3 steps"):
        run_create(suite=None, agent="noop", n_values=[1], max_steps=4, enqueue=False)
