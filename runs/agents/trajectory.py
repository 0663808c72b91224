"""The trajectory format: one versioned JSON document per attempt, its pydantic model, and how
older versions of it are read.

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

Versions. `FORMAT` is the version this code writes; `MIGRATIONS` holds, for each older version, the
function that turns a document of it into the next version (as Inspect AI migrates its logs), and
`trajectory_from_json` applies them in turn before validating. Version 1 is the only one so far: the
documents written before `exit_code` and `timed_out` existed are version 1 too, read by those
fields' defaults. A change that an older reader could not read gets a new version, a migration
from the one before, and a stored example in tests/fixtures/trajectories. The replay reads what the
database holds with `trajectory_from_stored`, which also reads uploads stored before the fields were
typed.

Unknown keys of the document, its header and its steps (a newer writer's, or an uploader's own) are
kept and written back out (`extra`); unknown keys of a file change or a final answer are dropped.

This module is the document only: it imports neither the tools nor the sandbox, so the upload
validator and the replay read trajectories without the agent runtime. Writing one while an agent
runs (running tools, recording diffs, atomic saves) is `runs.agents.recorder`.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, ValidationError
from pydantic_core import PydanticCustomError

from runs.benchmark.answers import ParsedAnswer

from .llm import Usage

# The version this code writes (the document's "format"), as a type and as a value.
FormatVersion = Literal["autoexperiment.trajectory/1"]
FORMAT: FormatVersion = "autoexperiment.trajectory/1"
_FORMAT_FAMILY = "autoexperiment.trajectory/"
# The exit codes a step may record: a process's status is a C int (negative: killed by a signal).
EXIT_CODES = (-(2**31), 2**31 - 1)
# Written in the header while the run is going, so a reader can tell an unfinished trajectory.
RUNNING = "running"

# An older version -> (the next version, the function that turns a document of the first into one
# of the second). Empty while version 1 is the only one; see the module's docstring.
MIGRATIONS: dict[str, tuple[str, Callable[[dict[str, Any]], dict[str, Any]]]] = {}
# At most this many problems of a malformed document are named in its error.
_LISTED_PROBLEMS = 5


class TrajectoryFormatError(ValueError):
    """A document that is not a trajectory this code can read: a wrong or missing format version,
    or a field of the wrong type (the message names where)."""


# --- the command outcome: readers act on these fields (the replay marks failed steps by them), so
# an uploaded trajectory may not put anything else there.


def _exit_code(value: Any) -> int | None:
    if value is None or (type(value) is int and EXIT_CODES[0] <= value <= EXIT_CODES[1]):
        return value
    raise PydanticCustomError("exit_code", "must be an integer or null")


def _timed_out(value: Any) -> bool:
    if type(value) is bool:
        return value
    raise PydanticCustomError("timed_out", "must be true or false")


ExitCode = Annotated[int | None, BeforeValidator(_exit_code)]
TimedOut = Annotated[bool, BeforeValidator(_timed_out)]


# --- the document --------------------------------------------------------------------------------


class _KeepsUnknownKeys(BaseModel):
    """A part of the document whose unknown keys are kept and written back out."""

    model_config = ConfigDict(extra="allow")

    @property
    def extra(self) -> dict[str, Any]:
        """The keys this version does not define, as read (and written back out)."""
        if self.__pydantic_extra__ is None:  # only for a model built without validation
            self.__pydantic_extra__ = {}
        return self.__pydantic_extra__


class FileChange(BaseModel):
    """One file a step changed. `change` is a runs.benchmark.patches.ChangeKind ("added", "modified"
    or "deleted"); `diff` is None for binary or large files (then `note` says why)."""

    path: str
    change: str
    diff: str | None = None
    note: str = ""


class Step(_KeepsUnknownKeys):
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
    arguments: dict[str, Any] = Field(default_factory=dict)
    tool_call_id: str | None = None
    observation: str = ""
    exit_code: ExitCode = None
    timed_out: TimedOut = False
    truncated: bool = False
    error: bool = False
    traceback: str | None = None
    files_changed: list[FileChange] = Field(default_factory=list)
    input_tokens: int = 0
    output_tokens: int = 0
    cost: float = 0.0
    cost_unknown: bool = False
    notes: list[str] = Field(default_factory=list)
    summary: str | None = None

    def charge(self, usage: Usage, cost: float | None) -> None:
        """Add one model call's tokens and cost to the step."""
        self.input_tokens += usage.input_tokens
        self.output_tokens += usage.output_tokens
        if cost is None:
            self.cost_unknown = True
        else:
            self.cost += cost


class FinalAnswer(BaseModel):
    """The submitted answer as given (`raw`) and as parsed by runs.benchmark.answers.parse_answer."""

    raw: str | None
    parsed: dict[str, Any] | None
    parse_error: str | None = None
    parse_method: str = "none"

    @classmethod
    def from_parsed(cls, raw: str | None, parsed: ParsedAnswer) -> FinalAnswer:
        return cls(raw=raw, parsed=parsed.value, parse_error=parsed.error, parse_method=parsed.method)


class Header(_KeepsUnknownKeys):
    """Who ran what, with which settings, when, and how it ended."""

    sample_id: str
    agent: str
    model: str
    config: dict[str, Any] = Field(default_factory=dict)
    versions: dict[str, str] = Field(default_factory=dict)
    started_at: str = ""
    ended_at: str | None = None
    exit_status: str = RUNNING
    exit_message: str = ""
    input_tokens: int = 0
    output_tokens: int = 0
    cost: float = 0.0
    cost_unknown: bool = False


class Trajectory(_KeepsUnknownKeys):
    """A whole attempt. Build one with `runs.agents.recorder.TrajectoryWriter`; read one with
    `load_trajectory` or `trajectory_from_json`; `model_dump()` is the document as JSON values."""

    format: FormatVersion = FORMAT
    header: Header
    steps: list[Step] = Field(default_factory=list)
    final_answer: FinalAnswer | None = None
    final_patch: str | None = None

    def to_json(self) -> str:
        # Python's json, not pydantic's: it writes NaN and Infinity in a parsed answer as the
        # reader expects, and a lone surrogate (a model may send one in tool arguments) as text the
        # recorder's writer escapes.
        return json.dumps(self.model_dump(), indent=1, ensure_ascii=False) + "\n"


# --- reading -------------------------------------------------------------------------------------


def migrated(data: dict[str, Any]) -> dict[str, Any]:
    """`data`, a document of any version this code reads, as a document of `FORMAT`."""
    version: object = data.get("format")
    while isinstance(version, str) and version in MIGRATIONS:
        version, migrate = MIGRATIONS[version]
        data = migrate(data)
    if version != FORMAT:
        if isinstance(version, str) and version.startswith(_FORMAT_FAMILY):
            raise TrajectoryFormatError(f"trajectory format {version!r} is not supported; this code reads {FORMAT!r}")
        raise TrajectoryFormatError(f"not an AutoExperiment trajectory (format is {version!r}, expected {FORMAT!r})")
    return data


def trajectory_from_json(data: Any) -> Trajectory:
    """The trajectory a parsed JSON document holds, migrated from its version to `FORMAT`. Raises
    TrajectoryFormatError naming the version, or each field that is wrong and where."""
    if not isinstance(data, dict):
        raise TrajectoryFormatError("a trajectory is a JSON object")
    try:
        return Trajectory.model_validate(migrated(data))
    except ValidationError as error:
        raise TrajectoryFormatError(_problems(error)) from None


def trajectory_from_stored(data: Any) -> Trajectory:
    """`trajectory_from_json` for a document stored in the database. Uploads were checked only for
    their required fields and the command outcome until the fields were typed, so a stored one may
    hold a value of another type where a field has one: each such value is read as the replay
    showed it (text as str() writes it, a count or cost as 0, a flag by its truth, arguments that
    are no object under "input", as the importers of other tools' trajectories put them)."""
    if not isinstance(data, dict):
        raise TrajectoryFormatError("a trajectory is a JSON object")
    document = migrated(data)
    try:
        return Trajectory.model_validate(document)
    except ValidationError as error:
        document = _with_values_as_shown(document, error)
    try:
        return Trajectory.model_validate(document)
    except ValidationError as error:  # what is left is not a value's type (a required field missing)
        raise TrajectoryFormatError(_problems(error)) from None


def _with_values_as_shown(document: dict[str, Any], error: ValidationError) -> dict[str, Any]:
    """A copy of `document` with each wrongly typed value that `error` names replaced."""
    copied = json.loads(json.dumps(document))  # NaN and Infinity survive: Python's json reads them back
    for problem in error.errors(include_url=False):
        *parents, name = problem["loc"]
        holder = copied
        for key in parents:
            holder = holder[key]
        value = problem["input"]
        kind = problem["type"]
        if kind == "string_type":
            holder[name] = str(value)
        elif kind in ("int_type", "int_parsing", "int_from_float", "float_type", "float_parsing"):
            holder[name] = 0
        elif kind in ("bool_type", "bool_parsing", "timed_out"):
            holder[name] = bool(value)
        elif kind == "exit_code":
            holder[name] = None  # as the replay's SQL reads it: no exit status
        elif kind == "dict_type" and name == "arguments":
            holder[name] = {"input": value}
        elif kind == "list_type" and name == "notes":
            holder[name] = [str(value)]
        elif kind in ("list_type", "model_type", "dict_type") and parents[-1:] == ["files_changed"]:
            holder[name] = {"path": str(value), "change": "changed"}
        elif kind == "list_type" and name == "files_changed":
            holder[name] = []
    return copied


def load_trajectory(path: str | os.PathLike[str]) -> Trajectory:
    """Read a trajectory file. Raises TrajectoryFormatError for a wrong version or shape."""
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
    except ValueError as error:
        raise TrajectoryFormatError(f"{path} is not valid JSON: {error}") from None
    return trajectory_from_json(data)


# --- errors that say where -----------------------------------------------------------------------

_SAYS = {
    "missing": "is missing",
    "string_type": "must be a string",
    "int_type": "must be an integer",
    "int_parsing": "must be an integer",
    "int_from_float": "must be an integer",
    "float_type": "must be a number",
    "float_parsing": "must be a number",
    "bool_type": "must be true or false",
    "bool_parsing": "must be true or false",
    "dict_type": "must be an object",
    "model_type": "must be an object",
    "model_attributes_type": "must be an object",
    "list_type": "must be a list",
}


def _problems(error: ValidationError) -> str:
    """Each problem as `<where> <what>, got <value>`; a step is named by its number from 1 (as the
    replay numbers them, and the upload's limits do): "step 3: files_changed[0].path must be a string"."""
    found = error.errors(include_url=False)
    messages = []
    for problem in found[:_LISTED_PROBLEMS]:
        message = f"{_where(problem['loc'])} {_SAYS.get(problem['type'], problem['msg'])}"
        if problem["type"] != "missing":
            message += f", got {_shown(problem['input'])}"
        messages.append(message)
    if len(found) > _LISTED_PROBLEMS:
        messages.append(f"and {len(found) - _LISTED_PROBLEMS} more")
    return "; ".join(messages)


def _where(location: tuple[int | str, ...]) -> str:
    if len(location) >= 2 and location[0] == "steps" and isinstance(location[1], int):
        rest = _path(location[2:])
        return f"step {location[1] + 1}: {rest}" if rest else f"step {location[1] + 1}"
    return _path(location) or "the document"


def _path(location: tuple[int | str, ...]) -> str:
    text = ""
    for part in location:
        text += f"[{part}]" if isinstance(part, int) else f".{part}" if text else str(part)
    return text


def _shown(value: Any) -> str:
    try:
        text = json.dumps(value, ensure_ascii=False)
    except (TypeError, ValueError):
        text = repr(value)
    return text if len(text) <= 40 else text[:39] + "…"
