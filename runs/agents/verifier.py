"""Choosing one of k candidate implementations of the same sample: model-as-verifier and oracle.

The paper's model-as-verifier shows a model the task and the k candidates (each one's patch to the
masked code, its reported answer and, when the harness re-executed it, the experiments' outputs)
and lets it pick one; Pass@1 of the picked candidates is then compared with Pass@k. The oracle
picks a passing candidate whenever there is one: the upper bound any verifier could reach, which
is Pass@k itself.

    choice = select_with_model(model=model, task=task, candidates=candidates, paper=paper_text)
    choice.index, choice.reasoning, choice.cost
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from runs.benchmark.workspace import task_json

from .llm import ChatModel, Message, ToolSpec, Usage
from .tools import truncate
from .trajectory import Trajectory

__all__ = ["CHOOSE_TOOL", "Candidate", "VerifierChoice", "parse_choice", "select_oracle", "select_with_model", "verifier_prompt"]

MAX_PATCH_CHARS = 12_000
MAX_OUTPUT_CHARS = 3_000
MAX_PAPER_CHARS = 20_000


@dataclass(frozen=True)
class Candidate:
    """One attempt at a sample: its final patch, the answer it reported and, optionally, what the
    harness's re-execution of its code printed (a label, such as an experiment's, -> output)."""

    patch: str | None
    answer: Any
    outputs: Mapping[str, str] | None = None

    @classmethod
    def from_trajectory(cls, trajectory: Trajectory, *, outputs: Mapping[str, str] | None = None) -> Candidate:
        """The candidate an attempt's trajectory holds (answer: parsed if it parsed, else raw)."""
        answer = None
        if trajectory.final_answer is not None:
            answer = trajectory.final_answer.parsed if trajectory.final_answer.parsed is not None else trajectory.final_answer.raw
        return cls(patch=trajectory.final_patch, answer=answer, outputs=outputs)


class ChoiceMethod(StrEnum):
    MODEL = "model"  # the verifier model chose (or had only one candidate, or gave no choice: `fallback`)
    ORACLE = "oracle"  # the first candidate that passes, the upper bound


@dataclass(frozen=True)
class VerifierChoice:
    """The chosen candidate (0-based `index`), why, and what choosing cost (None: price unknown).

    `fallback` is True when no choice could be read from the model and candidate 0 was taken.
    """

    index: int
    reasoning: str
    usage: Usage = field(default_factory=Usage)
    cost: float | None = 0.0
    method: ChoiceMethod = ChoiceMethod.MODEL
    fallback: bool = False


CHOOSE_TOOL = ToolSpec(
    "choose_candidate",
    "Choose the candidate implementation most likely to be correct.",
    {
        "type": "object",
        "properties": {
            "candidate": {"type": "integer", "description": "The candidate's number, from 1."},
            "reasoning": {"type": "string", "description": "Why this candidate, briefly."},
        },
        "required": ["candidate"],
    },
)

SYSTEM_PROMPT = """\
You review candidate solutions of a research-replication task. In each, an agent re-implemented
functions that had been removed from a paper's code, ran the paper's experiments and reported the
numbers they printed. Exactly one candidate is to be kept: the one whose implementation is most
likely faithful to the paper and the functions' docstrings, so that its numbers match what the
original code produces.

Judge the code itself: does it do what the paper and the docstrings say, and would it run? Use
the reported numbers and experiment outputs as evidence (a crash, a missing result, or numbers
wildly unlike the others point to a bug), but do not favour a candidate for agreeing with the
majority alone.

Reason briefly, then give your choice with the choose_candidate tool, or end your reply with a
line `CHOICE: <n>`, where n is the candidate's number (1 to {count}).
"""


def _task_text(task: Mapping[str, Any]) -> str:
    # The workspace's task.json itself, spelled as the file is: the verifier judges the candidates
    # against exactly the task the agents were given (functions with their lines in the masked
    # files, experiments, answer format, context condition).
    return f"The task.json of the agents' workspace (code/ holds the codebase):\n```json\n{task_json(dict(task)).rstrip()}\n```"


def _candidate_text(number: int, candidate: Candidate, *, max_patch_chars: int, max_output_chars: int) -> str:
    patch = candidate.patch or ""
    patch_text, cut = truncate(patch, max_patch_chars) if patch else ("(no changes to the code)", False)
    answer = candidate.answer if isinstance(candidate.answer, str) else json.dumps(candidate.answer, indent=1)
    parts = [
        f"## Candidate {number}",
        f"Patch{' (cut in the middle)' if cut else ''}:\n```diff\n{patch_text.rstrip()}\n```",
        f"Reported answer:\n```\n{truncate(answer or 'null', max_output_chars)[0]}\n```"
        if candidate.answer is not None
        else "Reported answer: none (the agent submitted nothing)",
    ]
    if candidate.outputs:
        for label, output in candidate.outputs.items():
            parts.append(f"Output when the harness re-ran the code ({label}):\n```\n{truncate(output.rstrip(), max_output_chars)[0]}\n```")
    return "\n\n".join(parts)


def verifier_prompt(
    *,
    task: Mapping[str, Any],
    candidates: Sequence[Candidate],
    paper: str | None = None,
    max_patch_chars: int = MAX_PATCH_CHARS,
    max_output_chars: int = MAX_OUTPUT_CHARS,
    max_paper_chars: int = MAX_PAPER_CHARS,
) -> list[Message]:
    """The system and user messages the verifier model is sent."""
    parts = ["# The task", _task_text(task)]
    if paper:
        text, cut = truncate(paper.strip(), max_paper_chars)
        parts += [f"# The paper{' (cut in the middle)' if cut else ''}", text]
    parts.append(f"# The {len(candidates)} candidates")
    parts += [
        _candidate_text(number, candidate, max_patch_chars=max_patch_chars, max_output_chars=max_output_chars)
        for number, candidate in enumerate(candidates, start=1)
    ]
    parts.append(f"Which candidate is most likely correct? Answer with choose_candidate or `CHOICE: <n>` (1 to {len(candidates)}).")
    return [Message.system(SYSTEM_PROMPT.format(count=len(candidates))), Message.user("\n\n".join(parts))]


_CHOICE = re.compile(r"CHOICE\s*[:=]\s*(?:candidate\s*)?#?\s*(\d+)", re.IGNORECASE)


def parse_choice(text: str, tool_calls: Sequence[Any], count: int) -> tuple[int | None, str]:
    """The 0-based index a verifier reply chooses, or None and why not.

    A choose_candidate call wins over text; in text, the last `CHOICE: n` counts. Numbers are 1..count.
    """
    number = None
    for call in tool_calls:
        if call.name == CHOOSE_TOOL.name:
            value = call.arguments.get("candidate")
            if isinstance(value, str) and value.strip().isdigit():
                value = int(value)
            if isinstance(value, float) and value.is_integer():
                value = int(value)
            if isinstance(value, int) and not isinstance(value, bool):
                number = value
                break
    if number is None:
        found = _CHOICE.findall(text or "")
        if not found:
            return None, "no valid choose_candidate call and no 'CHOICE: <n>' line"
        number = int(found[-1])
    if not 1 <= number <= count:
        return None, f"candidate {number} does not exist (there are {count})"
    return number - 1, ""


def select_with_model(
    *,
    model: ChatModel,
    task: Mapping[str, Any],
    candidates: Sequence[Candidate],
    paper: str | None = None,
    max_patch_chars: int = MAX_PATCH_CHARS,
    max_output_chars: int = MAX_OUTPUT_CHARS,
    max_tokens: int = 2048,
    temperature: float = 0.0,
) -> VerifierChoice:
    """The candidate `model` picks (the paper's model-as-verifier).

    `task` is the workspace's task.json; `paper` its paper.md when the context condition had one
    (`runs.benchmark.workspace.task_document` gives both without building the workspace).
    Patches and outputs are cut (head and tail) to the given bounds. A single candidate is chosen
    without asking. A reply from which no valid choice can be read falls back to candidate 0,
    with `fallback=True` and the reasoning saying so. Raises ValueError for no candidates and
    ModelError when the model cannot be reached (a verifier that never ran must not count).
    """
    if not candidates:
        raise ValueError("select_with_model needs at least one candidate")
    if len(candidates) == 1:
        return VerifierChoice(0, "Only one candidate: nothing to choose.", method=ChoiceMethod.MODEL)
    messages = verifier_prompt(
        task=task, candidates=candidates, paper=paper, max_patch_chars=max_patch_chars, max_output_chars=max_output_chars
    )
    completion = model.complete(messages, tools=[CHOOSE_TOOL], max_tokens=max_tokens, temperature=temperature)
    index, problem = parse_choice(completion.text, completion.tool_calls, len(candidates))
    reasoning = completion.text.strip()
    for call in completion.tool_calls:
        if call.name == CHOOSE_TOOL.name and isinstance(call.arguments.get("reasoning"), str):
            reasoning = "\n\n".join(part for part in (reasoning, call.arguments["reasoning"].strip()) if part)
    if index is None:
        reply = reasoning or "(empty reply)"
        return VerifierChoice(
            0,
            f"Could not read a choice from the verifier ({problem}); candidate 1 was taken by default. Reply: {reply}",
            completion.usage,
            completion.cost,
            fallback=True,
        )
    return VerifierChoice(index, reasoning, completion.usage, completion.cost)


def select_oracle(*, candidates: Sequence[Candidate], passed: Sequence[bool]) -> VerifierChoice:
    """The first passing candidate, or candidate 0 when none passes: the best any verifier can do."""
    if not candidates:
        raise ValueError("select_oracle needs at least one candidate")
    if len(passed) != len(candidates):
        raise ValueError(f"{len(candidates)} candidates but {len(passed)} pass flags")
    for index, ok in enumerate(passed):
        if ok:
            return VerifierChoice(index, f"Candidate {index + 1} passes.", method=ChoiceMethod.ORACLE)
    return VerifierChoice(0, "No candidate passes; candidate 1 is taken.", method=ChoiceMethod.ORACLE)
