"""The agentless harness end to end (real SDK clients against the fake LLM server, a real
bubblewrap sandbox, the real scorer) and the retrieval it relies on."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from runs.agents import agent_from_name, gold_bodies_for, load_trajectory
from runs.agents.agentless import AgentlessConfig, _file_excerpt, extract_body
from runs.agents.retrieval import (
    LexicalRetriever,
    code_chunks,
    embedder_from_name,
    function_query,
    paper_chunks,
    tokenize,
)
from runs.benchmark.scoring import score_sample
from runs.suites.selectors import sample_experiments
from runs.suites.services import samples_ensure, workspace_build
from tests.agents.helpers import (
    GOLD,
    GOLD_BODY,
    PROVIDERS,
    STATS,
    WRONG_BODY,
    build_toy_workspace,
    model_for,
    texts,
)
from tests.fakes import FakeTurn
from tests.fakes.fake_llm_server import EMBEDDINGS_PATH
from tests.support import BUILTIN_SUITE_DIR, import_builtin_suite, require_backend

# The toy paper, with the paragraph about weighted_mean among others that are not about it.
RELEVANT = (
    "The weighted mean counts each value as many times as its weight: it multiplies every value by "
    "its weight, adds the products and divides the weighted total by the total weight."
)
DISTRACTOR = (
    "The spread of a sample is the difference between its largest and its smallest value; it is "
    "reported next to every average as a rough measure of dispersion."
)
LONG_PAPER = f"""# Weighted Means

## 1. Introduction

Summary statistics condense many noisy measurements into a few numbers that can be compared across
runs, machines and datasets without looking at every single observation.

## 2. Spread

{DISTRACTOR}

## 3. Averaging with weights

{RELEVANT}

## 4. Experiments

We run one experiment on four values and report both statistics as printed by the script.
"""


def reply_with(body: str, text: str = "Divide the weighted total by the total weight.") -> FakeTurn:
    return FakeTurn(text=f"{text}\n\n```python\n{body}\n```\n", input_tokens=1000, output_tokens=200)


def run_agentless(fake, provider, workspace, sandbox, tmp_path, script, **settings):
    """Run agentless on `script`; check the saved trajectory reloads as the one returned."""
    fake.script(script)
    path = tmp_path / "trajectory.json"
    result = agent_from_name("agentless", **settings).run(
        model=model_for(provider, fake), sandbox=sandbox, workspace=workspace, trajectory_path=path
    )
    assert load_trajectory(path) == result.trajectory
    return result


def chat_requests(fake) -> list[dict]:
    return [r.json for r in fake.requests if r.path != EMBEDDINGS_PATH]


def score(result) -> bool:
    return score_sample(experiments=[(0, GOLD, None, None)], answer=result.final_answer).passed


@pytest.fixture
def long_workspace(tmp_path):
    return build_toy_workspace(tmp_path, paper=LONG_PAPER)


# --- end to end on the toy workspace ---------------------------------------------------------------


@pytest.mark.parametrize("provider", PROVIDERS)
def test_the_correct_body_passes(fake_llm, provider, long_workspace, sandbox_on, tmp_path):
    result = run_agentless(fake_llm, provider, long_workspace, sandbox_on(long_workspace), tmp_path, [reply_with(GOLD_BODY)])
    assert result.exit_status == "submitted" and score(result)
    assert result.final_answer.value == {"Experiment 1": GOLD}

    trajectory = result.trajectory
    assert [step.tool for step in trajectory.steps] == ["retrieve", "write_file", "change_directory", "command_line", "final_answer"]
    retrieve, infill = trajectory.steps[:2]
    assert retrieve.arguments["method"] == "bm25" and retrieve.arguments["function"] == "weighted_mean"
    assert "The weighted mean." in retrieve.arguments["query"] and RELEVANT in retrieve.observation
    assert infill.thought.startswith("Divide the weighted total") and GOLD_BODY in infill.thought
    assert [(c.path, c.change) for c in infill.files_changed] == [("code/stats.py", "modified")]
    assert "+    return total / sum(weights)" in infill.files_changed[0].diff
    assert (infill.input_tokens, infill.output_tokens) == (1000, 200) and infill.cost > 0
    assert trajectory.header.agent == "agentless" and trajectory.header.cost == infill.cost
    assert trajectory.header.config["embedding_model"] is None
    assert "+    return total / sum(weights)" in trajectory.final_patch

    (request,) = chat_requests(fake_llm)
    system, (prompt,) = texts(request, "system"), texts(request, "user")
    assert "```python code block" in system[0]
    assert "Implement `weighted_mean` in `code/stats.py`" in prompt
    assert 'def weighted_mean(values, weights):\n    """The weighted mean."""\n    raise NotImplementedError' in prompt
    assert "def spread(values):" in prompt  # the file it is in
    excerpts = prompt.split("## Paper excerpts (retrieved)")[1].split("## Related code")[0]
    assert excerpts.strip().startswith(f"### 3. Averaging with weights (paper.md, line 14)\n\n{RELEVANT}")  # ranked first
    assert "tools" not in request  # a plain completion: the pipeline decides every action itself


def test_only_the_retrieved_paragraphs_reach_the_prompt(fake_llm, long_workspace, sandbox_on, tmp_path):
    run_agentless(fake_llm, "openai", long_workspace, sandbox_on(long_workspace), tmp_path, [reply_with(GOLD_BODY)], paper_k=1, code_k=1)
    prompt = texts(chat_requests(fake_llm)[0], "user")[0]
    assert RELEVANT in prompt and DISTRACTOR not in prompt
    # The code hit is from the other file (stats.py is shown whole already): run.py's module code.
    related = prompt.split("## Related code (retrieved)")[1]
    assert "### code/run.py: module-level code" in related and "code/stats.py:" not in related


def test_a_wrong_body_is_written_run_and_fails(fake_llm, workspace, sandbox_on, tmp_path):
    result = run_agentless(fake_llm, "anthropic", workspace, sandbox_on(workspace), tmp_path, [reply_with(WRONG_BODY)])
    assert result.exit_status == "submitted" and not score(result)
    assert result.final_answer.value["Experiment 1"]["mean"] == pytest.approx(6.5)
    assert "len(weights)" in result.trajectory.final_patch


@pytest.mark.parametrize(
    ("reply", "why"),
    [
        (reply_with("total = 0.0\nfor value, weight in zip(values, weights:\n    total += value"), "does not parse"),
        (FakeTurn(text="The weighted mean divides by the total weight."), "no ``` code block"),
    ],
    ids=["invalid-python", "no-code-block"],
)
def test_an_unusable_reply_is_an_error_step_and_the_stub_stays(fake_llm, workspace, sandbox_on, tmp_path, reply, why):
    masked = (workspace / "code/stats.py").read_text()
    result = run_agentless(fake_llm, "openai", workspace, sandbox_on(workspace), tmp_path, [reply])
    infill = result.trajectory.steps[1]
    assert infill.error and infill.tool is None and why in infill.observation and "The stub is kept" in infill.observation
    assert infill.thought == reply.text and infill.input_tokens == reply.input_tokens
    assert (workspace / "code/stats.py").read_text() == masked and result.trajectory.final_patch == ""
    # The pipeline carries on regardless: the experiment crashes and nothing is reported for it.
    assert result.exit_status == "submitted" and result.final_answer.value == {}
    assert "NotImplementedError" in result.trajectory.steps[3].observation


def test_a_reply_with_the_whole_function_is_accepted(fake_llm, workspace, sandbox_on, tmp_path):
    whole = "def weighted_mean(values, weights):\n" + "\n".join("    " + line for line in GOLD_BODY.splitlines())
    result = run_agentless(fake_llm, "openai", workspace, sandbox_on(workspace), tmp_path, [reply_with(whole)])
    assert score(result)
    assert (workspace / "code/stats.py").read_text() == STATS


def test_embedding_retrieval_through_the_openai_embeddings_api(fake_llm, long_workspace, sandbox_on, tmp_path):
    spec = f"openai-compatible:fake-embed@{fake_llm.base_url_openai}"
    result = run_agentless(
        fake_llm, "openai", long_workspace, sandbox_on(long_workspace), tmp_path, [reply_with(GOLD_BODY)], embedding_model=spec, paper_k=1
    )
    assert result.exit_status == "submitted" and score(result)
    embedding_requests = [r.json for r in fake_llm.requests if r.path == EMBEDDINGS_PATH]
    (request,) = embedding_requests  # the query and every chunk in one batch
    assert request["model"] == "fake-embed" and request["encoding_format"] == "float"
    assert request["input"][0].startswith("weighted_mean") and any(RELEVANT in text for text in request["input"][1:])
    retrieve = result.trajectory.steps[0]
    assert retrieve.arguments["method"] == f"embeddings:{spec}"
    assert retrieve.notes == [f"embedded {len(request['input']) - 1} chunks"]
    assert retrieve.input_tokens > 0 and retrieve.cost_unknown  # fake-embed has no price
    assert result.trajectory.header.config["embedding_model"] == spec
    prompt = texts(chat_requests(fake_llm)[0], "user")[0]
    assert RELEVANT in prompt and DISTRACTOR not in prompt


def test_a_failing_embedding_call_ends_the_run_as_a_model_error(fake_llm, workspace, sandbox_on, tmp_path):
    def broken(text):
        raise RuntimeError("embedding backend down")

    fake_llm.embed = broken
    result = run_agentless(
        fake_llm, "openai", workspace, sandbox_on(workspace), tmp_path, [], embedding_model=f"openai-compatible:e@{fake_llm.base_url_openai}"
    )
    assert result.exit_status == "model_error" and "embedding backend down" in result.exit_message
    assert result.final_answer is None


def test_the_cost_limit_stops_the_pipeline_before_anything_runs(fake_llm, workspace, sandbox_on, tmp_path):
    # 1000 + 200 tokens of gpt-4o cost $0.0045, over the budget.
    result = run_agentless(fake_llm, "openai", workspace, sandbox_on(workspace), tmp_path, [reply_with(GOLD_BODY)], max_cost=0.001)
    assert result.exit_status == "cost_limit" and result.final_answer is None
    infill = result.trajectory.steps[-1]
    assert infill.observation.startswith("Not applied: cost limit") and not infill.files_changed
    assert [step.tool for step in result.trajectory.steps] == ["retrieve", None]
    assert "raise NotImplementedError" in (workspace / "code/stats.py").read_text()


def test_an_unreachable_model_ends_the_run_as_a_model_error(fake_llm, workspace, sandbox_on, tmp_path):
    result = run_agentless(fake_llm, "openai", workspace, sandbox_on(workspace), tmp_path, [])  # script exhausted: 500
    assert result.exit_status == "model_error" and "script exhausted" in result.exit_message
    assert [step.tool for step in result.trajectory.steps] == ["retrieve"]


def test_agentless_settings_are_checked():
    with pytest.raises(ValueError, match="max_cost must be positive"):
        AgentlessConfig(max_cost=0)
    with pytest.raises(ValueError, match="openai:<model>"):
        agent_from_name("agentless", embedding_model="anthropic:claude-3-5-sonnet")
    with pytest.raises(TypeError):
        agent_from_name("agentless", history="full")


# --- two functions of a real paper -----------------------------------------------------------------


@pytest.mark.slow
@pytest.mark.django_db
def test_two_functions_of_a_builtin_paper_each_get_their_paragraph(fake_llm, sandbox_on, tmp_path):
    require_backend("bubblewrap")
    samples = samples_ensure(suite=import_builtin_suite(samples="2"), n_values=[2])
    sample = next(s for s in samples if s.sample_id == "adam-bias-correction_3,4")  # both in optim/adam.py
    workspace = tmp_path / "workspace"
    workspace_build(sample=sample, dest=workspace)
    task = json.loads((workspace / "task.json").read_text())
    bodies = {name: body for (_, name), body in gold_bodies_for(code_dir=Path(sample.paper.code_dir), missing_functions=task["missing_functions"]).items()}

    def answer(request):
        asked = re.search(r"Implement `([^`]+)`", texts(request, "user")[0]).group(1)
        return reply_with(bodies[asked], text=f"Implementing {asked}.")

    result = run_agentless(fake_llm, "openai", workspace, sandbox_on(workspace), tmp_path, [answer, answer])
    experiments = [(e.exp_id, e.gold_result, e.rtol, e.atol) for e in sample_experiments(sample=sample)]
    assert score_sample(experiments=experiments, answer=result.final_answer).passed
    assert [s.tool for s in result.trajectory.steps[:4]] == ["retrieve", "write_file", "retrieve", "write_file"]

    excerpts = {f.name: f.relevant_paper for f in sample.functions.all()}
    for request in chat_requests(fake_llm):
        prompt = texts(request, "user")[0]
        asked = re.search(r"Implement `([^`]+)`", prompt).group(1)
        paper_part = prompt.split("## Paper excerpts (retrieved)")[1].split("## Related code")[0]
        assert _overlaps(paper_part, excerpts[asked]), f"{asked}: its paper excerpt was not retrieved"


def _paragraphs(text: str) -> list[str]:
    return [" ".join(p.split()) for p in re.split(r"\n\s*\n", text) if len(p.strip()) >= 60]


def _overlaps(retrieved: str, excerpt: str) -> bool:
    """Whether a paragraph of `excerpt` was retrieved (whitespace aside)."""
    flat = " ".join(retrieved.split())
    return any(paragraph in flat for paragraph in _paragraphs(excerpt))


# --- retrieval -------------------------------------------------------------------------------------


def test_lexical_retrieval_finds_each_builtin_functions_paper_excerpt():
    """For every function of the built-in suite, the top 4 paragraphs hold part of its excerpt."""
    misses, total = [], 0
    for paper_json in sorted(BUILTIN_SUITE_DIR.glob("*/paper.json")):
        paper = json.loads(paper_json.read_text())
        retriever = LexicalRetriever(paper_chunks((paper_json.parent / "paper.md").read_text()))
        for function in paper["functions"]:
            query = function_query(name=function["name"], docstring=function["description"], file=f"code/{function['file']}")
            hits = retriever.search(query, paper_k=4, code_k=0).paper
            total += 1
            if not any(_overlaps(hit.chunk.text, function["relevant_paper"]) for hit in hits):
                misses.append(f"{paper['id']}: {function['name']}")
    assert total >= 28 and misses == []


def test_paper_chunks_are_paragraphs_titled_by_their_section():
    text = "# Title\n\n## 2. Method\n\n**Short.**\n\nA long paragraph " + "word " * 30 + "\n\n$$\nx = 1\n\ny = 2\n$$\n"
    chunks = paper_chunks(text)
    assert [c.title for c in chunks] == ["2. Method", "2. Method"]
    assert chunks[0].text.startswith("**Short.**\n\nA long paragraph") and chunks[0].line == 5
    assert chunks[1].text == "$$\nx = 1\n\ny = 2\n$$"  # a display equation is not split at its blank line


def test_code_chunks_leave_out_the_stubs(workspace):
    chunks = code_chunks(workspace, exclude=[("code/stats.py", "weighted_mean")])
    assert [(c.source, c.title) for c in chunks] == [
        ("code/run.py", "module-level code"),
        ("code/stats.py", "module-level code"),
        ("code/stats.py", "spread"),
    ]


def test_tokens_meet_across_identifiers_and_inflections():
    assert tokenize("weighted_mean") == tokenize("Weighted means") == ["weight", "mean"]
    assert tokenize("clipByGlobalNorm") == ["clip", "global", "norm"]  # "by" is a stop word
    assert tokenize("clipping the gradients") == ["clip", "gradient"]
    assert tokenize("probabilities") == tokenize("probability")


def test_embedder_specs():
    with pytest.raises(ValueError, match="base URL"):
        embedder_from_name("openai-compatible:nomic-embed-text")
    embedder = embedder_from_name("openai-compatible:nomic-embed-text@http://localhost:11434/v1")
    assert embedder.name == "openai-compatible:nomic-embed-text@http://localhost:11434/v1"


# --- pieces ----------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("reply", "body"),
    [
        ("Here:\n```python\nreturn x + 1\n```", "return x + 1\n"),
        ("```\nreturn x + 1\n```\n```python\nreturn 2\n```", "return 2\n"),  # a python block wins
        ("```py\n    y = x\n    return y\n```", "    y = x\n    return y\n"),  # indentation is fixed when written
        ("```python\ndef step(self, x):\n    '''Doc.'''\n    return x\n```", "'''Doc.'''\nreturn x"),
    ],
)
def test_extract_body(reply, body):
    assert extract_body(reply, "Opt.step") == (body, "")


def test_extract_body_without_a_block():
    assert extract_body("just prose", "f") == (None, "the reply has no ``` code block")


def test_a_long_file_is_shown_around_the_stub():
    source = "import numpy as np\n\n" + "".join(f"x{i} = {i}\n" for i in range(1000)) + "def f():\n    raise NotImplementedError\n"
    excerpt, cut = _file_excerpt(source, 1003, 2000)
    assert cut and len(excerpt) < 2300
    assert excerpt.startswith("import numpy as np") and excerpt.rstrip().endswith("raise NotImplementedError")
    assert "# ... (lines " in excerpt and "x999 = 999" in excerpt
