"""The agent tools against a real bubblewrap sandbox (and the fake LLM server for the two tools that
ask a model)."""

from __future__ import annotations

import os

import pytest

from runs.agents.base import ModelFailed, SandboxFailed
from runs.agents.llm import INVALID_JSON_KEY, ToolCall
from runs.agents.tools import (
    TOOLS,
    ToolContext,
    run_tool,
    tool_specs,
    truncate,
)
from tests.agents.helpers import GOLD_BODY, STATS, model_for
from tests.fakes import FakeError, FakeTurn


@pytest.fixture
def context(sandbox, workspace):
    return ToolContext(sandbox=sandbox, workspace=workspace)


def call(context, name, **arguments):
    return run_tool(context, (name, arguments))


# --- specs ------------------------------------------------------------------------------------------


def test_every_paper_tool_has_a_spec_with_an_object_schema():
    names = [spec.name for spec in tool_specs()]
    assert names == [
        "list_files", "inspect_file_lines", "understand_file", "edit_file", "write_file",
        "execute_python_script", "execute_bash_script", "command_line", "move", "change_directory",
        "final_answer",
    ]
    for spec in tool_specs():
        assert spec.description
        assert spec.parameters["type"] == "object"
        assert set(spec.parameters["required"]) <= set(spec.parameters["properties"])


# --- dispatch errors ----------------------------------------------------------------------------------


def test_unknown_tool_is_an_error_observation(context):
    result = call(context, "rm_rf")
    assert result.error and "unknown tool 'rm_rf'" in result.observation and "list_files" in result.observation


def test_invalid_json_arguments_are_an_error_observation(context):
    result = run_tool(context, ToolCall("c1", "write_file", {INVALID_JSON_KEY: '{"path": "a.txt", '}))
    assert result.error and "not a JSON object" in result.observation
    assert not (context.workspace / "a.txt").exists()


def test_missing_and_mistyped_arguments_are_error_observations(context):
    missing = call(context, "write_file", path="a.txt")
    assert missing.error and "missing required argument(s) for write_file: content" in missing.observation
    mistyped = call(context, "inspect_file_lines", path="TASK.md", start_line="three")
    assert mistyped.error and "'start_line' of inspect_file_lines must be an integer" in mistyped.observation


def test_unknown_arguments_are_ignored_with_a_note(context):
    result = call(context, "list_files", path=".", colour="blue")
    assert not result.error and "ignored unknown argument(s): colour" in result.observation


def test_integral_floats_pass_as_integers(context):
    result = call(context, "inspect_file_lines", path="code/stats.py", start_line=4.0, end_line=4)
    assert not result.error and "4 | def weighted_mean" in result.observation


# --- truncation ----------------------------------------------------------------------------------------


def test_truncate_keeps_head_and_tail_around_a_marker():
    text = "HEAD" + "x" * 1000 + "TAIL"
    cut, truncated = truncate(text, 100)
    assert truncated and cut.startswith("HEAD") and cut.endswith("TAIL")
    assert "[... 908 characters truncated ...]" in cut
    assert truncate("short", 100) == ("short", False)


def test_long_command_output_is_truncated_with_a_marker(sandbox, workspace):
    context = ToolContext(sandbox=sandbox, workspace=workspace, max_observation_chars=2000)
    result = call(context, "command_line", command="echo FIRST; seq 1 20000; echo LAST")
    assert result.truncated and not result.error
    assert result.observation.startswith("FIRST") and "characters truncated ...]" in result.observation
    assert "LAST" in result.observation and "[exit code 0" in result.observation
    assert len(result.observation) < 2200


# --- list_files / inspect_file_lines --------------------------------------------------------------------


def test_list_files(context):
    top = call(context, "list_files")
    assert not top.error
    assert top.observation.splitlines() == ["/workspace:", "TASK.md", "code/", "paper.md", "refsol.sh", "task.json"]
    nested = call(context, "list_files", path="code", recursive=True)
    assert nested.observation.splitlines() == ["/workspace/code:", "run.py", "stats.py"]


def test_list_files_errors(context):
    assert "is not a directory" in call(context, "list_files", path="TASK.md").observation
    outside = call(context, "list_files", path="..")
    assert outside.error and "outside the workspace" in outside.observation


def test_inspect_file_lines_numbers_lines(context):
    result = call(context, "inspect_file_lines", path="code/stats.py", start_line=4, end_line=6)
    assert result.observation == (
        "/workspace/code/stats.py lines 4-6 of 10:\n"
        " 4 | def weighted_mean(values, weights):\n"
        ' 5 |     """The weighted mean."""\n'
        " 6 |     raise NotImplementedError"
    )


@pytest.mark.parametrize(
    "arguments, message",
    [
        ({"path": "code/nope.py"}, "does not exist"),
        ({"path": "code"}, "is a directory"),
        ({"path": "code/stats.py", "start_line": 5, "end_line": 2}, "need 1 <= start_line <= end_line"),
        ({"path": "code/stats.py", "start_line": 50}, "has only 10 lines"),
        ({"path": "/etc/passwd"}, "outside the workspace"),
    ],
)
def test_inspect_file_lines_errors(context, arguments, message):
    result = call(context, "inspect_file_lines", **arguments)
    assert result.error and message in result.observation


# --- write_file / move / change_directory ---------------------------------------------------------------


def test_write_file_creates_parents_and_overwrites(context):
    created = call(context, "write_file", path="notes/a/b.txt", content="hello\n")
    assert created.observation == "Created /workspace/notes/a/b.txt (6 characters)"
    assert (context.workspace / "notes/a/b.txt").read_text() == "hello\n"
    again = call(context, "write_file", path="notes/a/b.txt", content="bye\n")
    assert again.observation.startswith("Overwrote")


def test_write_file_errors(context):
    assert "outside the workspace" in call(context, "write_file", path="../escape.txt", content="x").observation
    assert "is a directory" in call(context, "write_file", path="code", content="x").observation
    assert not (context.workspace.parent / "escape.txt").exists()


def test_move(context):
    result = call(context, "move", source="paper.md", destination="code/paper_copy.md")
    assert not result.error, result.observation
    assert (context.workspace / "code/paper_copy.md").is_file() and not (context.workspace / "paper.md").exists()
    assert "does not exist" in call(context, "move", source="nothing.txt", destination="x.txt").observation
    assert "outside the workspace" in call(context, "move", source="TASK.md", destination="/tmp/TASK.md").observation
    assert "cannot move the workspace" in call(context, "move", source=".", destination="code/ws").observation


def test_change_directory_sets_where_paths_and_commands_resolve(context):
    assert call(context, "change_directory", path="code").observation == "Current directory is now /workspace/code"
    assert "4 | def weighted_mean" in call(context, "inspect_file_lines", path="stats.py").observation
    assert "[exit code 0" in call(context, "command_line", command="pwd").observation
    assert call(context, "command_line", command="pwd").observation.startswith("/workspace/code")
    call(context, "change_directory", path="..")
    assert context.cwd == "."


@pytest.mark.parametrize("target", ["..", "code/../..", "/", "/etc", "/workspace/../tmp", "escape"])
def test_change_directory_cannot_leave_the_workspace(context, target, tmp_path_factory):
    # A symlink in the workspace pointing out of it must not be a way out either.
    os.symlink(tmp_path_factory.mktemp("outside"), context.workspace / "escape")
    result = call(context, "change_directory", path=target)
    expected = "a symbolic link; the file tools never follow links" if target == "escape" else "outside the workspace"
    assert result.error and expected in result.observation
    assert context.cwd == "."


def test_change_directory_to_a_file_is_refused(context):
    assert "is not a directory" in call(context, "change_directory", path="TASK.md").observation


# --- running code ------------------------------------------------------------------------------------------


def test_execute_python_script_writes_then_runs_it(context):
    script = "import sys\nprint('args', sys.argv[1:])\nraise SystemExit(3)\n"
    result = call(context, "execute_python_script", path="check.py", content=script, arguments="--n 2")
    # A failing script is information for the agent, not a tool error.
    assert not result.error
    assert result.observation.startswith("args ['--n', '2']") and "[exit code 3;" in result.observation
    # The status line is for the model; callers read the exit code from the result.
    assert (result.exit_code, result.timed_out) == (3, False)
    assert (context.workspace / "check.py").read_text() == script
    rerun = call(context, "execute_python_script", path="check.py")
    assert "[exit code 3;" in rerun.observation and rerun.exit_code == 3


def test_execute_python_script_runs_the_experiment(context):
    call(context, "change_directory", path="code")
    result = call(context, "execute_python_script", path="run.py")
    assert "NotImplementedError" in result.observation and "[exit code 1;" in result.observation


def test_execute_script_without_content_needs_the_file(context):
    result = call(context, "execute_bash_script", path="missing.sh")
    assert result.error and "pass `content` to create it" in result.observation


def test_execute_bash_script(context):
    result = call(context, "execute_bash_script", path="go.sh", content='echo "$1 from $(pwd)"\n', arguments="hi")
    assert result.observation.startswith("hi from /workspace\n[exit code 0;")
    assert (result.exit_code, result.timed_out) == (0, False)
    # Tools that run no command have no exit code.
    assert call(context, "write_file", path="x.txt", content="x").exit_code is None


def test_command_line_timeout(context):
    result = call(context, "command_line", command="echo started; sleep 20", timeout=1)
    assert "started" in result.observation and "timed out after 1 s and was killed" in result.observation
    assert result.timed_out and not result.error


def test_command_timeout_is_capped_by_the_time_left(sandbox, workspace):
    context = ToolContext(sandbox=sandbox, workspace=workspace, time_left=lambda: 1.5)
    result = call(context, "command_line", command="sleep 20")
    assert "timed out after 2 s (the time budget's remainder)" in result.observation
    no_time = ToolContext(sandbox=sandbox, workspace=workspace, time_left=lambda: 0.2)
    refused = call(no_time, "command_line", command="echo hi")
    assert refused.error and "no time is left" in refused.observation


def test_command_line_rejects_bad_timeouts_and_empty_commands(context):
    assert "timeout must be a positive" in call(context, "command_line", command="true", timeout=-1).observation
    assert "command is empty" in call(context, "command_line", command="  ").observation


def test_a_broken_sandbox_ends_the_run_rather_than_the_step(sandbox, workspace):
    context = ToolContext(sandbox=sandbox, workspace=workspace)
    sandbox.close()
    with pytest.raises(SandboxFailed, match="sandbox is closed"):
        call(context, "command_line", command="true")
    with pytest.raises(SandboxFailed, match="sandbox is closed"):
        call(context, "write_file", path="a.txt", content="")


def test_a_deleted_cwd_falls_back_to_the_workspace(context):
    call(context, "write_file", path="tmpdir/x", content="")
    call(context, "change_directory", path="tmpdir")
    call(context, "command_line", command="rm -r /workspace/tmpdir")
    assert call(context, "command_line", command="pwd").observation.startswith("/workspace\n")


# --- final_answer -----------------------------------------------------------------------------------------


def test_final_answer_accepts_an_object_or_json_text(context):
    answer = {"Experiment 1": {"mean": 2.6}}
    result = call(context, "final_answer", answer=answer)
    assert result.submitted and result.answer.value == answer and result.answer_raw == '{"Experiment 1": {"mean": 2.6}}'
    text = call(context, "final_answer", answer='{"Experiment 1": {"mean": 2.6}}')
    assert text.submitted and text.answer.value == answer


def test_an_unreadable_final_answer_is_not_submitted(context):
    result = call(context, "final_answer", answer="the mean is about 2.6")
    assert result.error and not result.submitted and "nothing was submitted" in result.observation


# --- the tools that ask a model ---------------------------------------------------------------------------


def test_understand_file_asks_the_model_and_counts_its_cost(sandbox, workspace, fake_llm):
    context = ToolContext(sandbox=sandbox, workspace=workspace, model=model_for("openai", fake_llm))
    fake_llm.script([FakeTurn("Line 6 raises NotImplementedError.", input_tokens=1000, output_tokens=100)])
    result = call(context, "understand_file", path="code/stats.py", question="What does weighted_mean do?")
    assert result.observation == "Line 6 raises NotImplementedError." and not result.error
    assert result.model_calls == 1 and result.usage.input_tokens == 1000
    assert result.cost == pytest.approx((1000 * 2.5 + 100 * 10) / 1e6)
    request = fake_llm.requests[-1].json
    assert "tools" not in request
    prompt = request["messages"][-1]["content"]
    assert " 6 |     raise NotImplementedError" in prompt and "Question: What does weighted_mean do?" in prompt


def test_understand_file_without_a_model_is_an_error(context):
    result = call(context, "understand_file", path="code/stats.py", question="?")
    assert result.error and "needs a language model" in result.observation


@pytest.mark.parametrize("provider", ["openai", "anthropic"])
def test_edit_file_applies_the_models_edit_and_returns_the_diff(sandbox, workspace, fake_llm, provider):
    context = ToolContext(sandbox=sandbox, workspace=workspace, model=model_for(provider, fake_llm))
    masked = (workspace / "code/stats.py").read_text()
    edited = masked.replace("    raise NotImplementedError\n", "    return sum(v * w for v, w in zip(values, weights)) / sum(weights)\n")
    fake_llm.script([FakeTurn(f"```python\n{edited}```")])
    result = call(context, "edit_file", path="code/stats.py", instruction="Implement weighted_mean.")
    assert not result.error and result.model_calls == 1 and result.cost > 0
    assert (workspace / "code/stats.py").read_text() == edited
    assert result.observation.startswith("Edited /workspace/code/stats.py:\n--- a/code/stats.py\n+++ b/code/stats.py\n")
    assert "-    raise NotImplementedError\n+    return sum(v * w" in result.observation
    body = fake_llm.requests[-1].json
    assert "Instruction: Implement weighted_mean." in str(body["messages"]) and "raise NotImplementedError" in str(body["messages"])


def test_edit_file_creates_a_missing_file(context, fake_llm):
    context.model = model_for("openai", fake_llm)
    fake_llm.script([FakeTurn("```\nprint('hi')\n```")])
    result = call(context, "edit_file", path="new.py", instruction="Print hi.")
    assert (context.workspace / "new.py").read_text() == "print('hi')\n"
    assert "--- /dev/null\n+++ b/new.py\n@@ -0,0 +1 @@\n+print('hi')" in result.observation


def test_edit_file_without_a_code_block_changes_nothing(context, fake_llm):
    context.model = model_for("openai", fake_llm)
    before = (context.workspace / "code/stats.py").read_text()
    fake_llm.script([FakeTurn("Sure! I replaced the body.")])
    result = call(context, "edit_file", path="code/stats.py", instruction="Implement it.")
    assert result.error and "did not return the file in a code block" in result.observation
    assert result.model_calls == 1  # the failed edit still cost money
    assert (context.workspace / "code/stats.py").read_text() == before


def test_helper_model_refusal_is_an_observation_but_an_outage_ends_the_run(context, fake_llm):
    context.model = model_for("openai", fake_llm)
    fake_llm.script([FakeError(400, message="prompt is too long")])
    refused = call(context, "understand_file", path="code/stats.py", question="?")
    assert refused.error and "prompt is too long" in refused.observation
    fake_llm.script([FakeError(500, times=2)])
    with pytest.raises(ModelFailed, match="HTTP 500"):
        call(context, "understand_file", path="code/stats.py", question="?")


def test_gold_body_fixture_is_the_original():
    # Guards the end-to-end tests: they write GOLD_BODY and expect the gold numbers.
    assert "sum(weights)" in GOLD_BODY and GOLD_BODY in STATS.replace("\n    ", "\n")
    assert set(TOOLS) == {spec.name for spec in tool_specs()}
