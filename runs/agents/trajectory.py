"""The trajectory format: one versioned JSON document per attempt, and how it is read and written.

Layout (format `autoexperiment.trajectory/1`)::

    {
      "format": "autoexperiment.trajectory/1",
      "header": {sample_id, agent, model, config, versions, started_at, ended_at, exit_status,
                 exit_message, input_tokens, output_tokens, cost, cost_unknown},
      "steps": [{index, started_at, duration, model_seconds, thought, tool, arguments, tool_call_id,
                 observation, exit_code?, timed_out?, truncated, error, traceback,
                 files_changed: [{path, change, diff, note}], input_tokens, output_tokens, cost,
                 cost_unknown, notes, summary}],
      "final_answer": {raw, parsed, parse_error, parse_method} | null,
      "final_patch": "unified diff of code/ against the masked workspace as built" | null
    }

Times are ISO 8601 UTC; durations seconds. `exit_status` is "running" until the run ends, so a
reader can tell an unfinished file. A step that ran a command carries the command's `exit_code`
and `timed_out` as fields; both are optional (absent from trajectories written before they
existed, and from steps that ran no command). Parsed answers may hold NaN or infinities; they are
written as Python's json writes them (NaN, Infinity), which `load_trajectory` reads back.

This module is the document only: it imports neither the tools nor the sandbox, so the upload
validator and the replay read trajectories without the agent runtime. Writing one while an agent
runs (running tools, recording diffs, atomic saves) is `runs.agents.recorder`.
"""

from __future__ import annotations

import dataclasses
import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from runs.benchmark.answers import ParsedAnswer

from .llm import Usage

FORMAT = "autoexperiment.trajectory/1"
_FORMAT_FAMILY = "autoexperiment.trajectory/"
# The exit codes a step may record: a process's status is a C int (negative: killed by a signal).
EXIT_CODES = (-(2**31), 2**31 - 1)
# Written in the header while the run is going, so a reader can tell an unfinished trajectory.
RUNNING = "running"


class TrajectoryFormatError(ValueError):
    """A file that is not a trajectory this code can read (wrong or missing format version)."""


# --- the document --------------------------------------------------------------------------------


@dataclass
class FileChange:
    """One file a step changed. `change` is a runs.benchmark.patches.ChangeKind ("added", "modified"
    or "deleted"); `diff` is None for binary or large files (then `note` says why)."""

    path: str
    change: str
    diff: str | None = None
    note: str = ""


@dataclass
class Step:
    """One step: the agent's thought, the tool it called and what that produced.

    `tool` is None when the model called no tool (it was nudged). `model_seconds` is the part of
    `duration` spent waiting for the model. `exit_code` and `timed_out` are the command's outcome
    when the tool ran one (None and False otherwise); the status line at the end of `observation`
    repeats them for the model and is never read back. Tokens and cost count every model call of the step
    (the agent's, a history summary's, a helper call of understand_file / edit_file); `cost` is
    the known part and `cost_unknown` flags a call whose price is unknown.
    """

    index: int
    started_at: str
    duration: float = 0.0
    model_seconds: float = 0.0
    thought: str = ""
    tool: str | None = None
    arguments: dict[str, Any] = field(default_factory=dict)
    tool_call_id: str | None = None
    observation: str = ""
    exit_code: int | None = None
    timed_out: bool = False
    truncated: bool = False
    error: bool = False
    traceback: str | None = None
    files_changed: list[FileChange] = field(default_factory=list)
    input_tokens: int = 0
    output_tokens: int = 0
    cost: float = 0.0
    cost_unknown: bool = False
    notes: list[str] = field(default_factory=list)
    summary: str | None = None
    extra: dict[str, Any] = field(default_factory=dict)

    def charge(self, usage: Usage, cost: float | None) -> None:
        """Add one model call's tokens and cost to the step."""
        self.input_tokens += usage.input_tokens
        self.output_tokens += usage.output_tokens
        if cost is None:
            self.cost_unknown = True
        else:
            self.cost += cost


@dataclass
class FinalAnswer:
    """The submitted answer as given (`raw`) and as parsed by runs.benchmark.answers.parse_answer."""

    raw: str | None
    parsed: dict | None
    parse_error: str | None = None
    parse_method: str = "none"

    @classmethod
    def from_parsed(cls, raw: str | None, parsed: ParsedAnswer) -> FinalAnswer:
        return cls(raw=raw, parsed=parsed.value, parse_error=parsed.error, parse_method=parsed.method)


@dataclass
class Header:
    """Who ran what, with which settings, when, and how it ended."""

    sample_id: str
    agent: str
    model: str
    config: dict[str, Any] = field(default_factory=dict)
    versions: dict[str, str] = field(default_factory=dict)
    started_at: str = ""
    ended_at: str | None = None
    exit_status: str = RUNNING
    exit_message: str = ""
    input_tokens: int = 0
    output_tokens: int = 0
    cost: float = 0.0
    cost_unknown: bool = False
    extra: dict[str, Any] = field(default_factory=dict)


@dataclass
class Trajectory:
    """A whole attempt. Build one with `runs.agents.recorder.TrajectoryWriter`; read one with
    `load_trajectory`."""

    header: Header
    steps: list[Step] = field(default_factory=list)
    final_answer: FinalAnswer | None = None
    final_patch: str | None = None
    format: str = FORMAT
    extra: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {
            "format": self.format,
            "header": _to_dict(self.header),
            "steps": [_to_dict(step) for step in self.steps],
            "final_answer": None if self.final_answer is None else _to_dict(self.final_answer),
            "final_patch": self.final_patch,
            **self.extra,
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Trajectory:
        if not isinstance(data, dict):
            raise TrajectoryFormatError("a trajectory is a JSON object")
        version = data.get("format")
        if version != FORMAT:
            if isinstance(version, str) and version.startswith(_FORMAT_FAMILY):
                raise TrajectoryFormatError(
                    f"trajectory format {version!r} is not supported; this code reads {FORMAT!r}"
                )
            raise TrajectoryFormatError(f"not an AutoExperiment trajectory (format is {version!r}, expected {FORMAT!r})")
        known = {"format", "header", "steps", "final_answer", "final_patch"}
        steps = []
        for number, raw in enumerate(data.get("steps") or [], start=1):
            step = _from_dict(Step, raw)
            _check_command_outcome(number, step)
            step.files_changed = [_from_dict(FileChange, change) for change in raw.get("files_changed") or []]
            steps.append(step)
        answer = data.get("final_answer")
        return cls(
            header=_from_dict(Header, data.get("header") or {}),
            steps=steps,
            final_answer=None if answer is None else _from_dict(FinalAnswer, answer),
            final_patch=data.get("final_patch"),
            format=version,
            extra={key: value for key, value in data.items() if key not in known},
        )

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), indent=1, ensure_ascii=False) + "\n"


def _to_dict(obj: Any) -> dict[str, Any]:
    # Unknown fields read from a newer writer go back out unchanged.
    data = {f.name: getattr(obj, f.name) for f in dataclasses.fields(obj) if f.name != "extra"}
    if "files_changed" in data:
        data["files_changed"] = [_to_dict(change) for change in data["files_changed"]]
    return {**data, **getattr(obj, "extra", {})}


def _from_dict(cls: type, data: Any) -> Any:
    if not isinstance(data, dict):
        raise TrajectoryFormatError(f"expected an object for {cls.__name__}, got {type(data).__name__}")
    names = {f.name for f in dataclasses.fields(cls)} - {"extra"}
    try:
        obj = cls(**{key: value for key, value in data.items() if key in names})
    except TypeError as error:
        raise TrajectoryFormatError(f"{cls.__name__}: {error}") from None
    if hasattr(obj, "extra"):
        obj.extra = {key: value for key, value in data.items() if key not in names}
    return obj


def _check_command_outcome(number: int, step: Step) -> None:
    # Readers act on these fields (the replay marks failed steps by them), so an uploaded
    # trajectory may not put anything else there.
    code = step.exit_code
    if code is not None and (isinstance(code, bool) or not isinstance(code, int) or not EXIT_CODES[0] <= code <= EXIT_CODES[1]):
        raise TrajectoryFormatError(f"step {number}: exit_code must be an integer or null, got {json.dumps(code)[:40]}")
    if not isinstance(step.timed_out, bool):
        raise TrajectoryFormatError(f"step {number}: timed_out must be true or false, got {json.dumps(step.timed_out)[:40]}")


def load_trajectory(path: str | os.PathLike[str]) -> Trajectory:
    """Read a trajectory file. Raises TrajectoryFormatError for a wrong version or shape."""
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
    except ValueError as error:
        raise TrajectoryFormatError(f"{path} is not valid JSON: {error}") from None
    return Trajectory.from_dict(data)
