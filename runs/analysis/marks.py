"""Which steps of a trajectory are errors: the one rule the replay (runs.replay.pages, which also
reads it in SQL) and the failure analysis (runs.analysis.trajectories) share.

`StepMarks` is what decides whether a step is an error (`error_kind`): the step's `error`,
`traceback`, `exit_code` and `timed_out` fields and whether a Python traceback appears anywhere in
its observation. The status line a command's observation ends with ("[exit code 1; ...]") is text
for the model and is never read back: the program that ran may print one too. Steps stored
before `exit_code` existed show no exit status.
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

TRACEBACK_TEXT = "Traceback (most recent call last):"


@dataclass(frozen=True)
class StepMarks:
    """What decides whether step `number` (1-based) is an error."""

    number: int
    error: bool
    traceback: bool
    exit_code: int | None  # the command's, when the step ran one
    timed_out: bool
    traceback_in_output: bool


def error_kind(marks: StepMarks) -> str:
    """Why a step counts as an error ("" when it does not): the tool failed, the harness recorded a
    traceback, a command exited non-zero or timed out, or the output holds a Python traceback."""
    if marks.error:
        return "tool error"
    if marks.traceback:
        return "traceback"
    if marks.timed_out:
        return "timed out"
    if marks.exit_code not in (None, 0):
        return f"exit code {marks.exit_code}"
    if marks.traceback_in_output:
        return "traceback in output"
    return ""


def step_text(value: Any) -> str:
    """A stored step field as text: strings as they are, anything else as JSON ("" for None)."""
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    try:
        return json.dumps(value, ensure_ascii=False, default=str)
    except (TypeError, ValueError, RecursionError):
        return str(value)


def step_marks(number: int, step: Any) -> StepMarks:
    """The marks of one step read from its stored value (a dict) or a runs.agents.trajectory.Step."""
    get = step.get if isinstance(step, dict) else (lambda name: getattr(step, name, None))
    observation = step_text(get("observation"))
    return StepMarks(
        number=number,
        error=bool(get("error")),
        traceback=bool(get("traceback")),
        exit_code=exit_code_of(get("exit_code")),
        timed_out=bool(get("timed_out")),
        traceback_in_output=TRACEBACK_TEXT in observation,
    )


def exit_code_of(value: Any) -> int | None:
    """A stored exit code, or None for none. Uploads are checked to hold an integer or null here
    (runs.agents.trajectory); anything else in a stored document counts as no exit status, as the
    replay's SQL reads it."""
    return value if isinstance(value, int) and not isinstance(value, bool) else None
