"""The upstream AutoExperiment agents' text logs (agents/logger.py `write_log` of
github.com/j1mk1m/AutoExperiment)::

    SYSTEM PROMPT
    <the system prompt>

    ######################################
    Step: 0

    Thought:
    <the model's thought>

    Action:
    arguments='{"command": "ls"}' name='execute_bash'

    Observation:
    <what the tool returned>

    ######################################
    Compute Cost: 0.0123
    Prompt tokens: 1500
    Completion tokens: 200
    Compute Time: 12.5
    ######################################

The action line is the printed tool call (a pydantic object: `arguments='...' name='...'`, or
`Function(arguments=..., name=...)`); its arguments are JSON. The log has no per-step tokens or
cost, only the footer's totals, and no file diffs. A step is marked failed when its observation is
one of the environment's error messages ("Execution of <tool> resulted in error ...", "Tool <tool>
not supported", "Something went wrong in executing ...").
"""
from __future__ import annotations

import ast
import json
import re

from runs.agents.trajectory import Step

from .base import ConvertedTrajectory, ForeignTrajectoryError, build, integer, number

NAME = "autoexperiment-text-log"
VERSION = "1"

_SEPARATOR = re.compile(r"^#{10,}[ \t]*\r?$", re.MULTILINE)
_STEP_LINE = re.compile(r"\AStep: (\d+)[ \t]*\n")
_PY_STRING = r"""('(?:[^'\\\n]|\\.)*'|"(?:[^"\\\n]|\\.)*"|None)"""
_FIELD = re.compile(r"(\w+)=" + _PY_STRING)
# What the upstream environment (agents/environment.py) writes when a tool call fails; a command's
# non-zero exit leaves no mark in the log (its stderr is the observation), so it is not flagged.
_ERROR_OBSERVATION = re.compile(r"\A(?:Execution of \w+ resulted in error |Something went wrong in executing |Tool \w+ not supported\Z)")
_FOOTER = {"compute cost": "cost", "prompt tokens": "input", "completion tokens": "output", "compute time": "seconds"}


def looks_like(data: bytes) -> bool:
    head = data[:200_000]
    return bool(re.search(rb"^#{10,}[ \t]*\r?\nStep: \d+", head, re.MULTILINE)) or (
        head.startswith(b"SYSTEM PROMPT") and b"Compute Cost:" in data[-2000:]
    )


def convert(data: bytes, filename: str = "") -> ConvertedTrajectory:
    try:
        text = data.decode("utf-8-sig").replace("\r\n", "\n")
    except UnicodeDecodeError as error:
        raise ForeignTrajectoryError(NAME, f"not valid UTF-8 (byte {error.start + 1})") from None
    # Blocks start after a separator line; the first block is the system prompt.
    matches = list(_SEPARATOR.finditer(text))
    if not matches:
        raise ForeignTrajectoryError(NAME, "no '#####' separator lines: not an AutoExperiment text log")
    bounds = [(m.end() + 1, matches[i + 1].start() if i + 1 < len(matches) else len(text)) for i, m in enumerate(matches)]
    steps: list[Step] = []
    totals: dict[str, float] | None = None
    for start, end in bounds:
        block = text[start:end]
        line = text.count("\n", 0, start) + 1
        if not block.strip():
            continue
        step_line = _STEP_LINE.match(block)
        if step_line:
            if totals is not None:
                raise ForeignTrajectoryError(NAME, f"line {line}: a step after the cost and token footer")
            steps.append(_step(block[step_line.end():], len(steps) + 1, line))
        elif block.lstrip().lower().startswith("compute cost:"):
            totals = _footer(block, line)
        else:
            raise ForeignTrajectoryError(
                NAME, f"line {line}: a block that is neither a step ('Step: N') nor the footer ('Compute Cost: ...')"
            )
    if not steps:
        raise ForeignTrajectoryError(NAME, "the log has no steps ('Step: N' blocks)")
    totals = totals or {}
    return build(
        format_name=NAME, version=VERSION, steps=steps, agent="autoexperiment-upstream",
        input_tokens=int(totals.get("input", 0)), output_tokens=int(totals.get("output", 0)),
        cost=totals.get("cost"), exit_status="completed" if totals else "unfinished",
    )


def _section(block: str, name: str, line: int, step_number: int) -> int:
    index = block.find(f"{name}:\n")
    if index < 0 or (index and block[index - 1] != "\n"):
        raise ForeignTrajectoryError(NAME, f"step {step_number} (line {line}): no '{name}:' section")
    return index


def _step(block: str, step_number: int, line: int) -> Step:
    thought_at = _section(block, "Thought", line, step_number)
    # The action is one line (the printed tool call escapes its newlines), so the last
    # "Action:" line directly followed by "Observation:" ends the thought whatever it says.
    found = list(re.finditer(r"\nAction:\n([^\n]*)\n\nObservation:\n", block))
    if not found:
        raise ForeignTrajectoryError(
            NAME, f"step {step_number} (line {line}): no 'Action:' line followed by an 'Observation:' section"
        )
    action = found[0]
    thought = block[thought_at + len("Thought:\n"):action.start()].strip("\n")
    observation = block[action.end():].rstrip("\n")
    tool, arguments = _tool_call(action.group(1).strip(), step_number, line)
    failed = bool(_ERROR_OBSERVATION.match(observation))
    return Step(index=step_number, started_at="", thought=thought, tool=tool, arguments=arguments, observation=observation,
                error=failed)


def _tool_call(text: str, step_number: int, line: int) -> tuple[str | None, dict]:
    body = text.removeprefix("Function(").removesuffix(")") if text.startswith("Function(") else text
    fields = {}
    for match in _FIELD.finditer(body):
        try:
            fields[match.group(1)] = ast.literal_eval(match.group(2))
        except (ValueError, SyntaxError):
            raise ForeignTrajectoryError(NAME, f"step {step_number} (line {line}): unreadable {match.group(1)} in the action") from None
    if "name" not in fields or "arguments" not in fields:
        raise ForeignTrajectoryError(
            NAME, f"step {step_number} (line {line}): the action is not a tool call (expected arguments='...' name='...'), "
            f"got {text[:80]!r}"
        )
    raw = fields["arguments"] or "{}"
    try:
        arguments = json.loads(raw)
    except json.JSONDecodeError as error:
        raise ForeignTrajectoryError(NAME, f"step {step_number} (line {line}): the action's arguments are not JSON ({error.msg})") from None
    if not isinstance(arguments, dict):
        arguments = {"input": arguments}
    return fields["name"], arguments


def _footer(block: str, line: int) -> dict[str, float]:
    totals: dict[str, float] = {}
    for offset, row in enumerate(block.strip().splitlines()):
        key, _, value = row.partition(":")
        field = _FOOTER.get(key.strip().lower())
        if field is None:
            continue
        try:
            totals[field] = float(value.strip())
        except ValueError:
            raise ForeignTrajectoryError(NAME, f"line {line + offset}: {key.strip()} is not a number: {value.strip()!r}") from None
    return {"cost": number(totals.get("cost")), "input": integer(int(totals.get("input", 0))),
            "output": integer(int(totals.get("output", 0))), **({"seconds": totals["seconds"]} if "seconds" in totals else {})}
