"""The ReAct loop end to end: real SDK clients against the fake LLM server, a real bubblewrap
sandbox, real workspaces, scored with the real scorer."""

from __future__ import annotations

import json

import pytest

from runs.agents import (
    AgentConfig,
    ReActAgent,
    agent_from_name,
    load_trajectory,
)
from runs.agents.llm import OpenAIChatModel
from runs.benchmark.execution import run_experiment
from runs.benchmark.masking import replace_function_body
from runs.benchmark.scoring import score_sample
from tests.agents.helpers import (
    EXPERIMENT,
    GOLD,
    GOLD_BODY,
    PAPER,
    PROVIDERS,
    WRONG_BODY,
    build_toy_workspace,
    is_summary_request,
    model_for,
    submit_printed_result,
    texts,
    transcript,
)
from tests.fakes import FakeError, FakeTurn


def run(fake, provider, workspace, sandbox, tmp_path, script, *, model=None, **config):
    """Run the agent on `script` and check the saved trajectory reloads as the one returned."""
    fake.script(script)
    path = tmp_path / "trajectory.json"
    result = ReActAgent(AgentConfig(**config)).run(
        model=model or model_for(provider, fake),
        sandbox=sandbox,
        workspace=workspace,
        trajectory_path=path,
    )
    assert load_trajectory(path) == result.trajectory
    assert result.trajectory.header.exit_status == result.exit_status
    return result


def agent_requests(fake):
    return [r.json for r in fake.requests if not is_summary_request(r.json)]


def thoughts_in(body) -> list[int]:
    """Which scripted steps' thoughts ("[thought N]") a request holds."""
    return [int(text.split("]")[0].split()[-1]) for text in texts(body, "assistant") if text.startswith("[thought ")]


def look(n: int) -> FakeTurn:
    return FakeTurn(f"[thought {n}] Looking around.", [("list_files", {"path": "."})])


def scripted_implementation(workspace, body):
    masked = (workspace / "code/stats.py").read_text()
    fixed = replace_function_body(masked, "weighted_mean", body)
    return [
        FakeTurn("[thought 1] Reading the stub.", [("inspect_file_lines", {"path": "code/stats.py"})]),
        FakeTurn("[thought 2] Implementing it.", [("write_file", {"path": "code/stats.py", "content": fixed})]),
        FakeTurn("[thought 3] Running the experiment.", [("change_directory", {"path": "code"})]),
        FakeTurn("[thought 4] Running it.", [("command_line", {"command": "python3 run.py"})]),
        submit_printed_result,
    ]


def score(result):
    return score_sample(experiments=[(EXPERIMENT.exp_id, GOLD, None, None)], answer=result.final_answer)


# --- end to end ---------------------------------------------------------------------------------------


def test_the_gold_numbers_are_what_the_gold_code_prints(tmp_path, sandbox_on):
    gold_workspace = build_toy_workspace(tmp_path, masked=False)
    assert run_experiment(sandbox_on(gold_workspace), EXPERIMENT).result == GOLD


@pytest.mark.parametrize("provider", PROVIDERS)
def test_a_correct_implementation_submits_a_passing_answer(fake_llm, provider, workspace, sandbox, tmp_path):
    result = run(fake_llm, provider, workspace, sandbox, tmp_path, scripted_implementation(workspace, GOLD_BODY))
    assert result.exit_status == "submitted"
    assert result.final_answer.value == {"Experiment 1": GOLD}
    assert score(result).passed
    trajectory = result.trajectory
    assert [s.tool for s in trajectory.steps] == ["inspect_file_lines", "write_file", "change_directory", "command_line", "final_answer"]
    assert trajectory.steps[1].files_changed[0].path == "code/stats.py"
    assert "+    return total / sum(weights)" in trajectory.final_patch
    assert trajectory.final_answer.parsed == {"Experiment 1": GOLD}
    header = trajectory.header
    assert header.sample_id == "toy_0" and header.agent == "react" and header.model.startswith(provider)
    assert header.input_tokens == 50 and header.cost > 0 and not header.cost_unknown
    assert header.config["context"] == "full" and header.versions["python"]
    # Every request after the first carried the previous steps, calls paired with results.
    last = fake_llm.requests[-1].json
    assert len(texts(last, "tool_call")) == len(texts(last, "tool_result")) == 4


@pytest.mark.parametrize("provider", PROVIDERS)
def test_a_subtly_wrong_implementation_fails(fake_llm, provider, workspace, sandbox, tmp_path):
    result = run(fake_llm, provider, workspace, sandbox, tmp_path, scripted_implementation(workspace, WRONG_BODY))
    assert result.exit_status == "submitted"
    assert result.final_answer.value == {"Experiment 1": {"mean": 6.5, "spread": 7.0}}
    scored = score(result)
    assert not scored.passed


# --- limits -------------------------------------------------------------------------------------------


def test_a_run_that_never_submits_ends_at_its_step_limit(fake_llm, workspace, sandbox, tmp_path):
    result = run(fake_llm, "openai", workspace, sandbox, tmp_path, [look(1), look(2), look(3)], max_steps=3)
    assert result.exit_status == "step_limit" and result.final_answer is None and result.final_answer_raw is None
    assert len(result.trajectory.steps) == 3 and result.trajectory.final_answer is None
    assert "step limit of 3" in result.trajectory.header.exit_message
    warnings = ["This is your last step" in json.dumps(r.json) for r in fake_llm.requests]
    assert warnings == [False, False, True]


def test_time_spent_waiting_for_the_model_counts(fake_llm, workspace, sandbox, tmp_path):
    slow = FakeTurn("[thought 1] Slowly.", [("command_line", {"command": "touch /workspace/ran"})], delay=0.6)
    result = run(fake_llm, "openai", workspace, sandbox, tmp_path, [slow], max_seconds=0.5)
    assert result.exit_status == "time_limit"
    (step,) = result.trajectory.steps
    # The model answered after the deadline: its call is recorded, not executed.
    assert step.tool == "command_line" and step.observation.startswith("Not executed: time limit of 0.5 s")
    assert not (workspace / "ran").exists()
    assert step.model_seconds >= 0.6


class FakeClock:
    """A clock the scripted model advances, standing in for long model calls."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now

    def after(self, seconds: float, turn: FakeTurn):
        def advance(request):
            self.now += seconds
            return turn

        return advance


def test_time_limit_with_an_injected_clock(fake_llm, workspace, sandbox, tmp_path):
    clock = FakeClock()
    fake_llm.script([clock.after(850, look(1)), clock.after(850, look(2)), clock.after(850, look(3))])
    path = tmp_path / "t.json"
    result = ReActAgent(AgentConfig(max_seconds=1800)).run(
        model=model_for("openai", fake_llm),
        sandbox=sandbox,
        workspace=workspace,
        trajectory_path=path,
        clock=clock,
    )
    assert result.exit_status == "time_limit" and len(result.trajectory.steps) == 3
    assert [s.model_seconds for s in result.trajectory.steps] == [850, 850, 850]
    # Under a tenth of the time left, the model is told to submit.
    assert ["minutes are left" in json.dumps(r.json) for r in fake_llm.requests] == [False, False, True]
    assert load_trajectory(path) == result.trajectory


def test_commands_are_cut_off_at_the_time_budget(fake_llm, workspace, sandbox, tmp_path):
    long = FakeTurn("[thought 1] Train for a long time.", [("command_line", {"command": "sleep 60", "timeout": 600})])
    result = run(fake_llm, "openai", workspace, sandbox, tmp_path, [long], max_seconds=2)
    assert result.exit_status == "time_limit"
    assert "the time budget's remainder" in result.trajectory.steps[0].observation
    assert len(fake_llm.requests) == 1


@pytest.mark.parametrize("provider", PROVIDERS)
def test_cost_limit(fake_llm, provider, workspace, sandbox, tmp_path):
    # 200k prompt tokens: $0.50 on gpt-4o, $0.60 on claude-3-5-sonnet; the second call crosses $1.
    expensive = [FakeTurn(f"[thought {n}] Thinking hard.", [("list_files", {})], input_tokens=200_000) for n in (1, 2, 3)]
    result = run(fake_llm, provider, workspace, sandbox, tmp_path, expensive, max_cost=1.0)
    assert result.exit_status == "cost_limit"
    first, second = result.trajectory.steps
    assert first.observation.startswith("/workspace:") and second.observation.startswith("Not executed: cost limit of $1")
    assert result.trajectory.header.cost >= 1.0 and not result.trajectory.header.cost_unknown
    assert len(fake_llm.requests) == 2


def test_unknown_prices_count_as_zero_but_are_flagged(fake_llm, workspace, sandbox, tmp_path):
    model = OpenAIChatModel("mystery-model", api_key="sk-test", base_url=fake_llm.base_url_openai)
    script = [FakeTurn("[thought 1] Cheap?", [("list_files", {})], input_tokens=10**7), FakeTurn("Done.", [("final_answer", {"answer": {"mean": 1}})])]
    result = run(fake_llm, "openai", workspace, sandbox, tmp_path, script, model=model, max_cost=0.01)
    assert result.exit_status == "submitted"
    header = result.trajectory.header
    assert header.cost == 0 and header.cost_unknown and all(s.cost_unknown for s in result.trajectory.steps)


@pytest.mark.parametrize("provider", PROVIDERS)
def test_a_model_that_keeps_failing_ends_the_run(fake_llm, provider, workspace, sandbox, tmp_path):
    result = run(fake_llm, provider, workspace, sandbox, tmp_path, [look(1), FakeError(500, times=2)])
    assert result.exit_status == "model_error"
    assert len(result.trajectory.steps) == 1  # the failed call added no step
    assert "HTTP 500" in result.exit_message and "gave up after 1 retries" in result.trajectory.header.exit_message


def test_a_broken_sandbox_ends_the_run(fake_llm, workspace, sandbox, tmp_path):
    fake_llm.script([look(1), FakeTurn("[thought 2] Run.", [("command_line", {"command": "echo hi"})])])
    result = ReActAgent(AgentConfig()).run(
        model=model_for("openai", fake_llm),
        sandbox=sandbox,
        workspace=workspace,
        trajectory_path=tmp_path / "t.json",
        on_step=lambda step: sandbox.close(),  # the backend goes away between steps
    )
    assert result.exit_status == "sandbox_error"
    last = result.trajectory.steps[-1]
    assert last.tool == "command_line" and last.error and "sandbox is closed" in last.observation
    assert load_trajectory(tmp_path / "t.json") == result.trajectory


def test_a_harness_bug_is_recorded_then_raised(fake_llm, workspace, sandbox, tmp_path):
    fake_llm.script([look(1)])

    def broken(step):
        raise RuntimeError("progress report failed")

    with pytest.raises(RuntimeError, match="progress report failed"):
        ReActAgent(AgentConfig()).run(model=model_for("openai", fake_llm), sandbox=sandbox,
                                      workspace=workspace, trajectory_path=tmp_path / "t.json", on_step=broken)
    saved = load_trajectory(tmp_path / "t.json")
    assert saved.header.exit_status == "harness_error" and "RuntimeError" in saved.header.exit_message
    assert len(saved.steps) == 1


# --- one tool call per step ----------------------------------------------------------------------------


@pytest.mark.parametrize("provider", PROVIDERS)
def test_only_the_first_of_several_tool_calls_runs(fake_llm, provider, workspace, sandbox, tmp_path):
    both = FakeTurn("[thought 1] Two at once.", [("list_files", {}), ("command_line", {"command": "touch /workspace/second"})])
    result = run(fake_llm, provider, workspace, sandbox, tmp_path, [both, FakeTurn("ok", [("final_answer", {"answer": {"mean": 1}})])])
    assert result.exit_status == "submitted" and not (workspace / "second").exists()
    step = result.trajectory.steps[0]
    assert step.tool == "list_files" and "1 extra tool call(s) not executed: command_line" in step.notes
    follow_up = fake_llm.requests[1].json
    assert texts(follow_up, "tool_result")[1].startswith("Not executed: only one tool call per turn")


@pytest.mark.parametrize("provider", PROVIDERS)
def test_a_turn_without_a_tool_call_is_nudged(fake_llm, provider, workspace, sandbox, tmp_path):
    script = [FakeTurn("I believe the answer is 2.6."), FakeTurn("", [("final_answer", {"answer": {"mean": 2.6}})])]
    result = run(fake_llm, provider, workspace, sandbox, tmp_path, script)
    assert result.exit_status == "submitted"
    nudged = result.trajectory.steps[0]
    assert nudged.tool is None and nudged.error and "did not call a tool" in nudged.observation
    assert any("did not call a tool" in text for text in texts(fake_llm.requests[1].json, "user"))


def test_a_reply_cut_off_at_the_token_limit_is_explained(fake_llm, workspace, sandbox, tmp_path):
    script = [FakeTurn("Let me write a very long", stop_reason="length"), FakeTurn("", [("final_answer", {"answer": {"mean": 1}})])]
    result = run(fake_llm, "openai", workspace, sandbox, tmp_path, script, max_tokens=256)
    assert result.trajectory.steps[0].observation.startswith("Your reply was cut off at the 256-token limit.")


def test_invalid_tool_arguments_are_shown_to_the_model(fake_llm, workspace, sandbox, tmp_path):
    script = [FakeTurn("[thought 1] Oops.", [("write_file", '{"path": "a.txt", "content": ')]), FakeTurn("ok", [("final_answer", {"answer": {"mean": 1}})])]
    result = run(fake_llm, "openai", workspace, sandbox, tmp_path, script)
    assert result.exit_status == "submitted"
    assert result.trajectory.steps[0].error and "not a JSON object" in result.trajectory.steps[0].observation


def test_an_unreadable_answer_does_not_end_the_run(fake_llm, workspace, sandbox, tmp_path):
    script = [FakeTurn("", [("final_answer", {"answer": "about 2.6"})]), FakeTurn("", [("final_answer", {"answer": {"Experiment 1": {"mean": 2.6}}})])]
    result = run(fake_llm, "openai", workspace, sandbox, tmp_path, script)
    assert result.exit_status == "submitted" and len(result.trajectory.steps) == 2
    assert result.final_answer_raw == '{"Experiment 1": {"mean": 2.6}}'


# --- history strategies --------------------------------------------------------------------------------


@pytest.mark.parametrize("provider", PROVIDERS)
def test_full_history_sends_every_step(fake_llm, provider, workspace, sandbox, tmp_path):
    script = [look(n) for n in range(1, 6)] + [FakeTurn("", [("final_answer", {"answer": {"mean": 1}})])]
    run(fake_llm, provider, workspace, sandbox, tmp_path, script, history="full")
    assert [thoughts_in(r.json) for r in fake_llm.requests] == [[], [1], [1, 2], [1, 2, 3], [1, 2, 3, 4], [1, 2, 3, 4, 5]]


@pytest.mark.parametrize("provider", PROVIDERS)
def test_window_history_keeps_the_last_k_steps(fake_llm, provider, workspace, sandbox, tmp_path):
    script = [look(n) for n in range(1, 6)] + [FakeTurn("", [("final_answer", {"answer": {"mean": 1}})])]
    run(fake_llm, provider, workspace, sandbox, tmp_path, script, history="window", window=2)
    assert [thoughts_in(r.json) for r in fake_llm.requests] == [[], [1], [1, 2], [2, 3], [3, 4], [4, 5]]
    sixth = fake_llm.requests[5].json
    # The system prompt, the task, a note on the omitted steps, then two whole steps.
    kinds = [kind for kind, _ in transcript(sixth)]
    assert kinds == ["system", "user", "user", "assistant", "tool_call", "tool_result", "assistant", "tool_call", "tool_result"]
    assert texts(sixth, "user")[1] == "[Steps 1-3 are not shown; the last 2 follow.]"
    assert len(texts(sixth, "tool_call")) == len(texts(sixth, "tool_result")) == 2
    task = texts(sixth, "user")[0]
    assert task.startswith("# Task: Weighted Means")  # the task is never dropped


class SummaryScript:
    """Agent turns in order, and a numbered summary for every summary request."""

    def __init__(self, turns):
        self.turns = list(turns)
        self.summaries = 0

    def __call__(self, request):
        if is_summary_request(request):
            self.summaries += 1
            return FakeTurn(f"SUMMARY-{self.summaries}", input_tokens=7, output_tokens=3)
        return self.turns.pop(0)


@pytest.mark.parametrize("provider", PROVIDERS)
def test_summary_history_summarises_what_leaves_the_window(fake_llm, provider, workspace, sandbox, tmp_path):
    script = SummaryScript([look(n) for n in range(1, 6)] + [FakeTurn("", [("final_answer", {"answer": {"mean": 1}})])])
    result = run(fake_llm, provider, workspace, sandbox, tmp_path, [script] * 9, history="summary", window=2)
    assert result.exit_status == "submitted"
    kinds = ["summary" if is_summary_request(r.json) else "agent" for r in fake_llm.requests]
    assert kinds == ["agent", "agent", "agent", "summary", "agent", "summary", "agent", "summary", "agent"]
    agents = agent_requests(fake_llm)
    assert [thoughts_in(body) for body in agents] == [[], [1], [1, 2], [2, 3], [3, 4], [4, 5]]
    last = agents[-1]
    assert "Summary of steps 1-3 (no longer shown):\n\nSUMMARY-3" in texts(last, "user")
    assert len(texts(last, "tool_call")) == len(texts(last, "tool_result")) == 2
    # Each summary call folds the newly dropped step into the previous summary.
    third_summary = json.dumps([r.json for r in fake_llm.requests if is_summary_request(r.json)][2])
    assert "SUMMARY-2" in third_summary and "[thought 3]" in third_summary and "[thought 4]" not in third_summary
    steps = result.trajectory.steps
    assert [s.summary for s in steps] == [None, None, None, "SUMMARY-1", "SUMMARY-2", "SUMMARY-3"]
    assert steps[3].input_tokens == 10 + 7  # the summary call is charged to the step that made it


# --- trajectories during and after the run ---------------------------------------------------------------


def test_the_trajectory_on_disk_is_complete_after_every_step(fake_llm, workspace, sandbox, tmp_path):
    path = tmp_path / "t.json"
    seen = []

    def read_mid_run(request):
        # The server thread reads the file while the agent waits for this reply.
        saved = load_trajectory(path)
        seen.append((saved.header.exit_status, len(saved.steps)))
        return look(len(seen))

    fake_llm.script([read_mid_run, read_mid_run, read_mid_run])
    result = ReActAgent(AgentConfig(max_steps=3)).run(model=model_for("openai", fake_llm), sandbox=sandbox,
                                                      workspace=workspace, trajectory_path=path)
    assert seen == [("running", 0), ("running", 1), ("running", 2)]
    assert result.exit_status == "step_limit" and load_trajectory(path) == result.trajectory
    assert sorted(p.name for p in tmp_path.iterdir() if p.name.startswith(".t.json")) == []


# --- prompts and context conditions -------------------------------------------------------------------------


@pytest.mark.parametrize(
    "context, present, absent",
    [
        ("full", [PAPER.strip(), "paper.md (the paper, also given below)"], ["Divide by the total weight."]),
        ("oracle", ["## code/stats.py: weighted_mean\n\nDivide by the total weight."], ["We weight each value by its count"]),
        ("none", ["The paper is not available for this task."], ["# The paper", "paper.md"]),
    ],
)
def test_context_conditions_shape_the_prompt(fake_llm, tmp_path, sandbox_on, context, present, absent):
    workspace = build_toy_workspace(tmp_path, context=context)
    fake_llm.script([FakeTurn("", [("final_answer", {"answer": {"mean": 1}})])])
    ReActAgent(AgentConfig(context=context)).run(model=model_for("openai", fake_llm), sandbox=sandbox_on(workspace),
                                                 workspace=workspace, trajectory_path=tmp_path / "t.json")
    messages = fake_llm.requests[0].json["messages"]
    prompt = messages[0]["content"] + messages[1]["content"]
    assert "## Answer" in prompt and '"Experiment 1"' in prompt and "Budget: at most 50 steps, 30 minutes and $1" in prompt
    for text in present:
        assert text in prompt
    for text in absent:
        assert text not in prompt


def test_a_context_that_contradicts_the_workspace_is_refused(fake_llm, workspace, sandbox, tmp_path):
    with pytest.raises(ValueError, match="built for context 'full'"):
        ReActAgent(AgentConfig(context="none")).run(model=model_for("openai", fake_llm), sandbox=sandbox,
                                                    workspace=workspace, trajectory_path=tmp_path / "t.json")


# --- configuration and registry -------------------------------------------------------------------------------


def test_agent_from_name():
    agent = agent_from_name("react", history="window", window=3, max_steps=10)
    assert isinstance(agent, ReActAgent) and agent.name == "react"
    assert (agent.config.history, agent.config.window, agent.config.max_steps) == ("window", 3, 10)
    with pytest.raises(ValueError, match="unknown agent 'reflexion'; known agents: .*react"):
        agent_from_name("reflexion")
    with pytest.raises(TypeError):
        agent_from_name("react", historie="full")


@pytest.mark.parametrize(
    "config, message",
    [
        ({"history": "everything"}, "history must be one of full, window, summary"),
        ({"context": "partial"}, "context must be one of none, full, oracle"),
        ({"window": 0}, "window must be at least 1"),
        ({"max_cost": 0}, "max_cost must be positive"),
    ],
)
def test_bad_configurations_are_refused(config, message):
    with pytest.raises(ValueError, match=message):
        AgentConfig(**config)
