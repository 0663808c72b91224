"""Helpers for agent tests: a tiny masked codebase, models pointed at the fake server, and readers of
the requests the fake server recorded (provider-neutral, so tests can run against both APIs)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from runs.benchmark.execution import printed_result
from runs.benchmark.masking import function_body_source
from runs.benchmark.workspace import ExperimentSpec, MaskedFunctionSpec, WorkspaceSpec, build_workspace
from tests.fakes import FakeTurn

PROVIDERS = ["openai", "anthropic"]
# Priced models, so cost budgets can be tested: gpt-4o $2.50/$10, claude-3-5-sonnet $3/$15 per Mtok.
MODELS = {"openai": "gpt-4o", "anthropic": "claude-3-5-sonnet-20241022"}

STATS = '''"""Small statistics helpers."""


def weighted_mean(values, weights):
    """The mean of `values`, each counted `weights` times."""
    total = 0.0
    for value, weight in zip(values, weights):
        total += value * weight
    return total / sum(weights)


def spread(values):
    return max(values) - min(values)
'''
RUN = '''import json

from stats import spread, weighted_mean

values = [1.0, 2.0, 4.0, 8.0]
weights = [4.0, 3.0, 2.0, 1.0]
print("computing the weighted mean")
print(json.dumps({"mean": weighted_mean(values, weights), "spread": spread(values)}))
'''
# What run.py prints with the gold code: (4 + 6 + 8 + 8) / 10 and 8 - 1.
GOLD = {"mean": 2.6, "spread": 7.0}
GOLD_BODY = function_body_source(STATS, "weighted_mean")
# Off by the usual slip: the count instead of the total weight (26 / 4 = 6.5).
WRONG_BODY = GOLD_BODY.replace("sum(weights)", "len(weights)")
EXPERIMENT = ExperimentSpec(0, "Compute the weighted mean.", "python3 run.py", {"mean": 0.0, "spread": 0.0}, 60)
PAPER = "# Weighted Means\n\nWe weight each value by its count and divide by the total weight.\n"


def write_toy_code(root: Path) -> Path:
    """The gold codebase: stats.py and run.py."""
    root.mkdir(parents=True, exist_ok=True)
    (root / "stats.py").write_text(STATS)
    (root / "run.py").write_text(RUN)
    return root


def build_toy_workspace(tmp_path: Path, *, context: str = "full", masked: bool = True, paper: str = PAPER) -> Path:
    """A built workspace with `weighted_mean` masked (sample toy_0); `paper` is its paper.md."""
    code = write_toy_code(tmp_path / "gold-code")
    functions = [MaskedFunctionSpec(0, "stats.py", "weighted_mean", "The weighted mean.", "Divide by the total weight.", 4)]
    spec = WorkspaceSpec(
        sample_id="toy_0",
        paper_title="Weighted Means",
        paper_text=paper,
        code_dir=code,
        masked=functions if masked else [],
        experiments=[EXPERIMENT],
        context=context,
    )
    dest = tmp_path / ("workspace" if masked else "gold-workspace")
    build_workspace(spec, dest)
    return dest


def model_for(provider: str, fake, **kwargs):
    """A real SDK adapter for `provider` talking to the fake server."""
    # Imported here, as the product imports them (runs.agents.llm): each SDK takes seconds to import,
    # which every test process paid at collection when this module imported them.
    from runs.agents.llm import AnthropicModel, OpenAIChatModel

    kwargs = {"api_key": "sk-test", "max_retries": 1, **kwargs}
    if provider == "openai":
        return OpenAIChatModel(MODELS["openai"], base_url=fake.base_url_openai, **kwargs)
    return AnthropicModel(MODELS["anthropic"], base_url=fake.base_url_anthropic, **kwargs)


# --- reading recorded requests --------------------------------------------------------------------


def transcript(body: dict[str, Any]) -> list[tuple[str, str]]:
    """A request's conversation as (kind, text) pairs, the same for both APIs: kinds are system,
    user, assistant, tool_call (text: name + arguments JSON) and tool_result."""
    out: list[tuple[str, str]] = []
    if isinstance(body.get("system"), str):
        out.append(("system", body["system"]))
    for message in body["messages"]:
        role, content = message["role"], message.get("content")
        if role == "tool":
            out.append(("tool_result", content or ""))
            continue
        if isinstance(content, str) or content is None:
            if content:
                out.append((role, content))
            for call in message.get("tool_calls") or []:
                out.append(("tool_call", f"{call['function']['name']} {call['function']['arguments']}"))
            continue
        for block in content:
            if block["type"] == "text":
                out.append((role, block["text"]))
            elif block["type"] == "tool_use":
                out.append(("tool_call", f"{block['name']} {json.dumps(block['input'])}"))
            elif block["type"] == "tool_result":
                out.append(("tool_result", block.get("content", "")))
    return out


def texts(body: dict[str, Any], kind: str) -> list[str]:
    return [text for k, text in transcript(body) if k == kind]


def last_tool_result(body: dict[str, Any]) -> str:
    results = texts(body, "tool_result")
    assert results, "the request holds no tool result"
    return results[-1]


def submit_printed_result(body: dict[str, Any]) -> FakeTurn:
    """A reactive script entry: submit what the last command printed, as a model would."""
    result = printed_result(last_tool_result(body))
    return FakeTurn(text="The experiment ran; submitting its output.", tool_calls=[("final_answer", {"answer": {"Experiment 1": result}})])


def is_summary_request(body: dict[str, Any]) -> bool:
    """Summary calls are the only ones made without tools."""
    return "tools" not in body
