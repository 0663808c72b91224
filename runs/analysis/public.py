"""What the anonymous replay shows of a step: how the gold rule (runs.visibility.gold_access) applies to steps.

The `gold` and `mutant` baselines restore masked functions from the reference implementation, so
the arguments of their steps that write code, the observations of their steps that read it, their
diffs and their final patch hold the gold bodies, and whatever their programs print is the gold
code's output (the gold numbers). Viewers who may not see the suite's gold code never see those
(runs.replay.steps.step_view applies `gold_code_redaction`), nor any output of theirs when
they may not see its gold numbers. In every agent's steps, lines quoting a gold body and gold
numbers in full are withheld from those viewers (runs.analysis.gold_text). The search across
trajectories indexes exactly what an anonymous visitor sees (`step_search_text`), so a search can
never reveal more than the public replay.
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from runs.analysis.gold_text import NOTHING, GoldRedaction
from runs.analysis.marks import step_text

# Agents whose trajectories contain the reference implementation of masked functions.
GOLD_CODE_AGENTS = frozenset({"gold", "mutant"})
# Tools whose arguments carry source code, and tools whose observations show source code.
CODE_WRITING_TOOLS = frozenset({"write_file", "edit_file"})
CODE_READING_TOOLS = frozenset({"inspect_file_lines", "understand_file"})

HIDDEN = "(hidden)"
# What a gold-bearing agent's hidden output is replaced by.
OUTPUT_HIDDEN = "(output of the reference implementation: hidden)"
# How much of one step the search indexes: a step's text is mostly its observation, which our
# tools cut at 10,000 characters; an uploaded step may hold far more.
MAX_STEP_SEARCH_CHARS = 8_000
# Each field is cut before joining, so a huge thought cannot crowd out the observation.
_FIELD_CHARS = MAX_STEP_SEARCH_CHARS // 2


@dataclass(frozen=True)
class Redaction:
    """A step's thought, arguments and observation as a viewer may see them."""

    redacted: bool  # something was left out (or the step's diffs are hidden)
    thought: str
    arguments: Any
    observation: str


def gold_code_redaction(
    *, tool: str, thought: str, arguments: Any, observation: str, changes_files: bool, hide_gold_code: bool,
    hide_gold_output: bool = False, redaction: GoldRedaction = NOTHING,
) -> Redaction:
    """What of a step a viewer sees when `hide_gold_code` (a viewer who may not see the suite's
    gold code, on a gold-bearing agent's attempt): a step that writes code loses its thought (a
    mutant's quotes the gold expression it breaks) and every argument but the path; a step that
    reads code loses its observation; any step that changed files has its diffs hidden (the
    caller's part). With `hide_gold_output` (a gold-bearing agent's attempt, for a viewer who may not
    see the gold numbers) every observation is left out (the caller leaves out the traceback).
    `redaction` then withholds the gold lines and numbers any text left quotes."""
    redacted = hide_gold_code and (tool in CODE_WRITING_TOOLS or tool in CODE_READING_TOOLS or changes_files)
    if redacted and tool in CODE_WRITING_TOOLS:
        thought = ""
        if isinstance(arguments, dict):
            arguments = {key: value if key == "path" else HIDDEN for key, value in arguments.items()}
    if redacted and tool in CODE_READING_TOOLS:
        observation = ""
    if hide_gold_output and observation:
        redacted, observation = True, OUTPUT_HIDDEN
    return Redaction(redacted=redacted, thought=redaction.text(thought), arguments=redaction.json(arguments),
                     observation=redaction.text(observation))


def is_gold_code_agent(*names: Any) -> bool:
    """Whether any of these agent names (the run's, the trajectory header's) is a gold-bearing one."""
    return any(isinstance(name, str) and name in GOLD_CODE_AGENTS for name in names)


def public_steps(
    steps: list, *, gold_code_agent: bool, hide_gold_output: bool = False, redaction: GoldRedaction = NOTHING
) -> list:
    """Stored steps as the anonymous replay shows them, for what the analysis derives and shows
    publicly (exceptions, the first error's line): a gold-bearing agent's steps lose the thought
    and arguments of code writes and the observation of code reads (a read of the gold file can
    hold a traceback or an error line quoting the gold code), and with `hide_gold_output` every
    observation and traceback; `redaction` withholds the gold any text left quotes. Other agents'
    steps are as stored when there is nothing to withhold."""
    if not gold_code_agent and not redaction:
        return steps
    shown = []
    for step in steps:
        if isinstance(step, dict):
            shown_step = gold_code_redaction(
                tool=step_text(step.get("tool")), thought=step_text(step.get("thought")), arguments=step.get("arguments"),
                observation=step_text(step.get("observation")), changes_files=bool(step.get("files_changed")),
                hide_gold_code=gold_code_agent, hide_gold_output=hide_gold_output, redaction=redaction,
            )
            step = {**step, "thought": shown_step.thought, "arguments": shown_step.arguments,
                    "observation": shown_step.observation,
                    "traceback": public_traceback(step.get("traceback"), hide_gold_output=hide_gold_output, redaction=redaction)}
        shown.append(step)
    return shown


def public_traceback(traceback: Any, *, hide_gold_output: bool, redaction: GoldRedaction) -> Any:
    """A step's traceback field as a viewer sees it (the rule of `gold_code_redaction`)."""
    if not isinstance(traceback, str) or not traceback:
        return traceback
    return "" if hide_gold_output else redaction.text(traceback)


def _cut(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[:limit]


def step_search_text(
    step: Any, *, gold_code_agent: bool, hide_gold_output: bool = False, redaction: GoldRedaction = NOTHING
) -> str:
    """The searchable text of one stored step (a dict; anything else gives ""): its thought, tool,
    arguments as JSON, observation and traceback as the anonymous replay shows them (the
    arguments as `gold_code_redaction` leaves them: see there), at most MAX_STEP_SEARCH_CHARS characters."""
    if not isinstance(step, dict):
        return ""
    files = step.get("files_changed")
    shown = gold_code_redaction(
        tool=step_text(step.get("tool")),
        thought=_cut(step_text(step.get("thought")), _FIELD_CHARS),
        arguments=step.get("arguments"),
        observation=_cut(step_text(step.get("observation")), _FIELD_CHARS),
        changes_files=bool(files),
        hide_gold_code=gold_code_agent,
        hide_gold_output=hide_gold_output,
        redaction=redaction,
    )
    arguments = ""
    if shown.arguments not in (None, {}, ""):
        try:
            arguments = json.dumps(shown.arguments, ensure_ascii=False, default=str)
        except (TypeError, ValueError, RecursionError):
            arguments = str(shown.arguments)
    traceback = public_traceback(_cut(step_text(step.get("traceback")), _FIELD_CHARS), hide_gold_output=hide_gold_output,
                                 redaction=redaction)
    parts = [
        shown.thought,
        step_text(step.get("tool")),
        _cut(arguments, _FIELD_CHARS),
        shown.observation,
        traceback,
    ]
    text = "\n".join(part for part in parts if part)
    # Postgres text cannot hold NUL characters.
    return _cut(text.replace("\x00", ""), MAX_STEP_SEARCH_CHARS)
