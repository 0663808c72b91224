"""Choosing among k candidates: the model verifier through the fake LLM server, and the oracle."""

from __future__ import annotations

import json
import re

import pytest

from leaderboard.services import run_select_with_verifier
from runs.agents import agent_from_name, gold_bodies_for
from runs.agents.llm import ToolCall
from runs.agents.verifier import (
    CHOOSE_TOOL,
    Candidate,
    parse_choice,
    select_oracle,
    select_with_model,
    verifier_prompt,
)
from runs.benchmark.workspace import CONTEXT_CONDITIONS
from runs.models import Sample
from runs.suites.services import workspace_build
from tests.agents.helpers import PROVIDERS, build_toy_workspace, model_for, texts
from tests.fakes import FakeTurn
from tests.leaderboard.factories import PASS, make_attempt, make_run
from tests.support import import_builtin_suite

TASK = {
    "sample_id": "toy_0",
    "paper_title": "Weighted Means",
    "missing_functions": [{"file": "code/stats.py", "name": "weighted_mean", "line": 4}],
    "experiments": [
        {"label": "Experiment 1", "description": "Compute the weighted mean.", "command": "python3 run.py", "answer_format": {"mean": 0.0}}
    ],
    "answer_format": {"Experiment 1": {"mean": 0.0}},
}
RIGHT = Candidate(
    patch="--- a/code/stats.py\n+++ b/code/stats.py\n@@ -5 +5 @@\n-    raise NotImplementedError\n+    return total / sum(weights)\n",
    answer={"Experiment 1": {"mean": 2.6}},
    outputs={"Experiment 1": 'computing the weighted mean\n{"mean": 2.6}'},
)
WRONG = Candidate(
    patch="--- a/code/stats.py\n+++ b/code/stats.py\n@@ -5 +5 @@\n-    raise NotImplementedError\n+    return total / len(weights)\n",
    answer={"Experiment 1": {"mean": 6.5}},
)
NOTHING = Candidate(patch="", answer=None)


@pytest.mark.parametrize("provider", PROVIDERS)
def test_the_model_picks_the_scripted_candidate_by_tool_call(fake_llm, provider):
    fake_llm.script([FakeTurn(text="Candidate 2 divides by the total weight.", tool_calls=[("choose_candidate", {"candidate": 2, "reasoning": "Matches the paper."})], input_tokens=900, output_tokens=40)])
    choice = select_with_model(model=model_for(provider, fake_llm), task=TASK, candidates=[WRONG, RIGHT, NOTHING], paper="We divide by the total weight.")
    assert (choice.index, choice.fallback, choice.method) == (1, False, "model")
    assert choice.reasoning == "Candidate 2 divides by the total weight.\n\nMatches the paper."
    assert (choice.usage.input_tokens, choice.usage.output_tokens) == (900, 40) and choice.cost > 0

    (request,) = fake_llm.requests
    prompt = texts(request.json, "user")[0]
    for expected in ("# The task", "weighted_mean", "python3 run.py", "# The paper", "We divide by the total weight.",
                     "## Candidate 1", "## Candidate 2", "## Candidate 3", "+    return total / len(weights)",
                     "Output when the harness re-ran the code (Experiment 1)", "Reported answer: none (the agent submitted nothing)", "(no changes to the code)"):
        assert expected in prompt
    assert prompt.index("total / len(weights)") < prompt.index("total / sum(weights)")  # candidates in order
    assert "CHOICE: <n>" in texts(request.json, "system")[0] and "1 to 3" in texts(request.json, "system")[0]


def test_the_model_may_answer_with_a_choice_line(fake_llm):
    fake_llm.script([FakeTurn(text="Candidate 1 uses len(weights), which is wrong.\nCHOICE: 2")])
    choice = select_with_model(model=model_for("openai", fake_llm), task=TASK, candidates=[WRONG, RIGHT])
    assert (choice.index, choice.fallback) == (1, False)
    assert choice.reasoning.endswith("CHOICE: 2")


@pytest.mark.parametrize(
    ("turn", "why"),
    [
        (FakeTurn(text="They all look fine to me."), "no valid choose_candidate call"),
        (FakeTurn(text="CHOICE: 7"), "candidate 7 does not exist (there are 2)"),
        (FakeTurn(tool_calls=[("choose_candidate", {"candidate": "the second"})]), "no valid choose_candidate call"),
    ],
    ids=["prose", "out-of-range", "bad-tool-argument"],
)
def test_garbage_falls_back_to_the_first_candidate_and_says_so(fake_llm, turn, why):
    fake_llm.script([turn])
    choice = select_with_model(model=model_for("anthropic", fake_llm), task=TASK, candidates=[WRONG, RIGHT])
    assert (choice.index, choice.fallback) == (0, True)
    assert choice.reasoning.startswith(f"Could not read a choice from the verifier ({why}")
    assert "candidate 1 was taken by default" in choice.reasoning
    assert choice.usage.input_tokens == turn.input_tokens  # the call still cost something


def test_one_candidate_needs_no_model_call(fake_llm):
    choice = select_with_model(model=model_for("openai", fake_llm), task=TASK, candidates=[RIGHT])
    assert choice.index == 0 and fake_llm.requests == [] and choice.cost == 0
    with pytest.raises(ValueError):
        select_with_model(model=model_for("openai", fake_llm), task=TASK, candidates=[])


def test_patches_and_outputs_are_cut_to_their_bounds():
    huge = Candidate(patch="+x = 1\n" * 10_000, answer={"Experiment 1": {"mean": 1.0}}, outputs={"Experiment 1": "noise\n" * 10_000})
    _, user = verifier_prompt(task=TASK, candidates=[huge, RIGHT], max_patch_chars=2_000, max_output_chars=500)
    assert len(user.content) < 5_000
    assert user.content.count("characters truncated") == 2 and "Patch (cut in the middle)" in user.content


def test_parse_choice_prefers_the_tool_call():
    call = ToolCall("call_1", CHOOSE_TOOL.name, {"candidate": 3})
    assert parse_choice("CHOICE: 1", [call], 3) == (2, "")
    assert parse_choice("first CHOICE: 1 then choice = candidate #2", [], 3) == (1, "")
    assert parse_choice("CHOICE: 0", [], 3) == (None, "candidate 0 does not exist (there are 3)")


def test_the_oracle_picks_a_passing_candidate():
    candidates = [WRONG, NOTHING, RIGHT, RIGHT]
    choice = select_oracle(candidates=candidates, passed=[False, False, True, True])
    assert (choice.index, choice.method, choice.cost) == (2, "oracle", 0.0)
    none = select_oracle(candidates=candidates, passed=[False] * 4)
    assert none.index == 0 and "No candidate passes" in none.reasoning
    with pytest.raises(ValueError):
        select_oracle(candidates=candidates, passed=[True])


def test_candidates_come_from_real_trajectories(fake_llm, tmp_path, sandbox_on):
    """k baseline attempts of one sample (gold and a mutant) judged by the verifier."""
    trajectories = []
    for name, settings in (("mutant", {"seed": 1}), ("gold", {})):
        workspace = build_toy_workspace(tmp_path / name)
        task = json.loads((workspace / "task.json").read_text())
        bodies = gold_bodies_for(code_dir=tmp_path / name / "gold-code", missing_functions=task["missing_functions"])
        result = agent_from_name(name, gold_bodies=bodies, **settings).run(
            model=None, sandbox=sandbox_on(workspace), workspace=workspace, trajectory_path=tmp_path / f"{name}.json"
        )
        trajectories.append(result.trajectory)
    candidates = [Candidate.from_trajectory(t) for t in trajectories]
    assert candidates[1].answer == {"Experiment 1": {"mean": 2.6, "spread": 7.0}}
    assert "return total / sum(weights)" in candidates[1].patch
    fake_llm.script([FakeTurn(text="CHOICE: 2")])
    assert select_with_model(model=model_for("openai", fake_llm), task=task, candidates=candidates).index == 1
    prompt = texts(fake_llm.requests[0].json, "user")[0]
    assert candidates[0].patch != candidates[1].patch
    assert all(candidate.patch.rstrip() in prompt for candidate in candidates)  # each whole patch is shown


@pytest.mark.slow
@pytest.mark.django_db
def test_the_verifier_is_shown_the_task_and_paper_of_the_agents_workspace(fake_llm, tmp_path):
    """Under each context condition, the verifier's request quotes the sample's task.json and its
    paper.md as the workspace the agents worked in holds them (built by the harness's service)."""
    suite = import_builtin_suite(samples="2")
    # Two functions of one file: the second one's line in the masked file is not its gold line.
    sample = next(
        sample for sample in Sample.objects.filter(paper__suite=suite).prefetch_related("functions").order_by("sample_id")
        if len({function.file for function in sample.functions.all()}) == 1
    )
    fake_llm.script([FakeTurn(tool_calls=[(CHOOSE_TOOL.name, {"candidate": 2})])] * len(CONTEXT_CONDITIONS))
    for request_number, context in enumerate(CONTEXT_CONDITIONS):
        run = make_run(suite, context=context, k=2, n_values=(2,))
        for index in range(2):
            make_attempt(run, sample, index, PASS)
        assert run_select_with_verifier(run=run, verifier=f"openai-compatible:judge@{fake_llm.base_url_openai}").selected == 1

        workspace = tmp_path / context
        workspace_build(sample=sample, dest=workspace, context=context)
        prompt = texts(fake_llm.requests[request_number].json, "user")[0]
        task_text = (workspace / "task.json").read_text()
        [quoted] = re.findall(r"```json\n(.*?)\n```", prompt, flags=re.DOTALL)
        assert json.loads(quoted) == json.loads(task_text) and quoted == task_text.rstrip()
        gold_lines = {f.name: f.line_hint for f in sample.functions.all()}
        assert any(entry["line"] != gold_lines[entry["name"]] for entry in json.loads(quoted)["missing_functions"])
        paper = workspace / "paper.md"
        if context == "none":
            assert not paper.exists() and "# The paper" not in prompt
        else:
            assert paper.read_text().strip() in prompt
