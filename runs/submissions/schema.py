"""The upload format `autoexperiment.submission/1` as pydantic models: its one description.

Validation reads every line into these models and hands them on as they are: services store a
`SubmissionHeader` and its `AttemptRecord`s, so no second description of a line exists.

Validation (runs.submissions.validation) reads every line through `SubmissionHeader` and
`AttemptRecord`, and the upload page renders its format section from them (`format_fields`), so
the page cannot document a field the validator does not accept, or the reverse. What needs more
than one line or the database (runs.submissions.cross_checks), or the limits of runs.limits (patch
and trajectory sizes, runs.submissions.validation), is checked outside the models.

`field_problems` words pydantic's errors for people who edit JSONL: `(field, message)`, the message
naming what was expected and the JSON value that was given ("must be an integer, got a string
("0")"); validation.py adds the line.
"""

import json
import re
from collections.abc import Callable
from dataclasses import dataclass
from functools import cache
from typing import Annotated, Any, Literal

from pydantic import AfterValidator, BaseModel, BeforeValidator, ConfigDict, Field, ValidationInfo
from pydantic_core import ErrorDetails, PydanticCustomError

from runs.benchmark.answers import MAX_ANSWER_CHARS
from runs.benchmark.json_objects import refused_as
from runs.benchmark.text import json_type

FORMAT = "autoexperiment.submission/1"

# The format's earlier versions, each with the next version and the step that turns one of its lines
# (the header or a record) into a line of that version. A file whose header names an earlier version
# is read through every step up to FORMAT before validation, as Inspect AI migrates its older logs;
# the steps change shapes only, so what a line meant is what it still means. Version 1 is the first:
# every upload this site has accepted is in it (its fields were only ever added to, never renamed).
UPGRADES: dict[str, tuple[str, Callable[[dict[str, Any]], dict[str, Any]]]] = {}
# Ours is .json; the others are trajectories of other tools, read by runs.agents.foreign.
TRAJECTORY_MEMBER = re.compile(r"^trajectories/[^/]+\.(?:json|traj|eval|txt|log)$")

MAX_SAMPLE_ID_CHARS = 300
MAX_ATTEMPT_INDEX = 99  # k of pass@k at most 100
MAX_TOKENS = 2**31 - 1  # Attempt's PositiveIntegerField
MAX_COST = 1e6
MAX_SECONDS = 1e7

# Shown on the upload page; tests/submissions/test_schema_agreement.py checks the models accept them.
HEADER_EXAMPLE = {
    "type": "header", "suite": "builtin", "model": "gpt-4o", "agent": "my-react-agent", "context": "full",
    "description": "ReAct, 50 steps, temperature 0", "contact": "me@example.org",
}
RECORD_EXAMPLE = {
    "sample_id": "temperature-scaling_4", "attempt_index": 0,
    # Placeholder numbers: a real sample's gold result here would hand every visitor a passing answer.
    "final_answer": {"Experiment 1": {"ece": 0.5, "mce": 0.5}},
    "final_patch": "--- a/code/metrics.py\n+++ b/code/metrics.py\n@@ ... @@\n...",
    "input_tokens": 18200, "output_tokens": 2400, "cost": 0.071, "seconds": 312.5,
}


def upgraded(line: dict[str, Any], *, version: str) -> dict[str, Any]:
    """A line of a file in `version` as a line of FORMAT (its header naming FORMAT). A version
    without a step is left as it is: FORMAT itself, or one the header's model refuses."""
    while version in UPGRADES:
        version, step = UPGRADES[version]
        line = step(line)
        if line.get("type") == "header":
            line = {**line, "format": version}
    return line


def declared_version(header: dict[str, Any]) -> str:
    """The version a header line names, FORMAT when it names none (or names it wrongly: the model says so)."""
    version = header.get("format", FORMAT)
    return version if isinstance(version, str) else FORMAT


# --- field types ----------------------------------------------------------------------------------


def _stripped(value: Any) -> Any:
    return value.strip() if isinstance(value, str) else value


def _without_nul(value: str) -> str:
    if "\x00" in value:
        raise PydanticCustomError("nul_character", "contains a NUL character")
    return value


def _text(max_chars: int, *, required: bool = True) -> Any:
    """A string with surrounding white space removed; a required one must not be empty then."""
    return Annotated[
        str, BeforeValidator(_stripped), Field(min_length=1 if required else 0, max_length=max_chars), AfterValidator(_without_nul)
    ]


def _context(value: Any) -> Any:
    return (value.strip() or "full") if isinstance(value, str) else value


def _attempt_type(value: Any) -> Any:
    if value == "header":
        raise PydanticCustomError("second_header", "a second header; only the first line may be the header")
    return value


def _answer_type(value: Any) -> Any:
    if value is not None and not isinstance(value, (str, dict)):
        raise PydanticCustomError("invalid_answer", "must be an object, a string or null, got {given}", {"given": json_type(value)})
    return value


def _answer_size(value: Any) -> Any:
    if isinstance(value, str):
        if len(value) > MAX_ANSWER_CHARS:
            raise PydanticCustomError(
                "answer_size", f"is {len(value):,} characters long; at most {MAX_ANSWER_CHARS:,} are read"
            )
        return _without_nul(value)
    if isinstance(value, dict):
        size = len(json.dumps(value, allow_nan=True))
        if size > MAX_ANSWER_CHARS:
            raise PydanticCustomError("answer_size", f"is {size:,} characters of JSON; at most {MAX_ANSWER_CHARS:,} are read")
    return value


def _patch_type(value: Any) -> Any:
    if value is None:
        return ""  # null: the agent changed nothing
    if not isinstance(value, str):
        raise PydanticCustomError("invalid_patch", "must be a string (a unified diff), got {given}", {"given": json_type(value)})
    return value


def _only_in_zip(value: Any, info: ValidationInfo) -> Any:
    if not (info.context or {}).get("in_zip"):
        raise PydanticCustomError("trajectory_file_outside_zip", "only a zip upload can carry trajectory files; put the trajectory inline")
    return value


def _trajectory_member(value: str) -> str:
    if not TRAJECTORY_MEMBER.match(value):
        raise PydanticCustomError(
            "trajectory_member",
            "must name a member trajectories/<name>.json (or .traj, .eval, .txt, .log for other tools' formats), got {given}", {"given": json.dumps(value)}
        )
    return value


Count = Annotated[int, Field(ge=0, le=MAX_TOKENS)]


# --- the models -----------------------------------------------------------------------------------


class _Line(BaseModel):
    # Strict: a typo must not silently drop a value, "0" is not 0 and true is not 1; numbers finite.
    model_config = ConfigDict(extra="forbid", strict=True, allow_inf_nan=False)


class SubmissionHeader(_Line):
    """The first line of the file: who made the attempts, and how."""

    type: Literal["header"] = Field(description="Marks the line as the header.")
    format: Annotated[
        Literal[FORMAT],
        refused_as(lambda value: f"unsupported format {json_type(value)}; this site reads {FORMAT!r}"),
    ] = Field(default=FORMAT, description="This format's version, if you name it.")
    suite: _text(100) = Field(description="The name of a suite on this site.")
    model: _text(200) = Field(description="The model the agent ran on.")
    agent: _text(100) = Field(description="The agent (scaffold, harness) that made the attempts.")
    contact: _text(200) = Field(description="How to reach you; shown only to you and the site's staff.")
    context: Annotated[Literal["none", "full", "oracle"], BeforeValidator(_context)] = Field(
        default="full", description="How much of the paper the agent was shown."
    )
    description: _text(5000, required=False) = Field(default="", description="Free text shown with the submission.")


class AttemptRecord(_Line):
    """Every other line: one attempt at one sample."""

    type: Annotated[
        Literal["attempt"],
        refused_as(lambda value: f'must be "attempt" when given, got {json_type(value)}'),
        BeforeValidator(_attempt_type),  # last, so it runs first: a second header is told so
    ] = Field(default="attempt", description="Marks the line as an attempt; optional.")
    sample_id: _text(MAX_SAMPLE_ID_CHARS) = Field(description="A sample of the suite: {paper_id}_{function ids}.")
    attempt_index: int = Field(
        ge=0, le=MAX_ATTEMPT_INDEX, description="0..k-1 for each sample, without gaps or duplicates (k at most 100)."
    )
    input_tokens: Count = Field(description="Tokens the model read in this attempt.")
    output_tokens: Count = Field(description="Tokens the model wrote in this attempt.")
    cost: float | None = Field(ge=0, le=MAX_COST, description="What the attempt cost in USD, or null when unknown.")
    seconds: float | None = Field(ge=0, le=MAX_SECONDS, description="How long the attempt took, or null when unknown.")
    final_answer: Annotated[dict[str, Any] | str | None, BeforeValidator(_answer_type), AfterValidator(_answer_size)] = Field(
        description='The answer as an object keyed "Experiment 1", "Experiment 2", ... in the sample\'s order, '
        "or the agent's text holding it, or null for no answer."
    )
    final_patch: Annotated[str | None, BeforeValidator(_patch_type)] = Field(  # null becomes ""
        description="A unified diff against the masked workspace, paths a/code/... and b/code/... (what patch -p1 "
        'applies), or "" or null when the agent changed nothing. Only files under code/; no binary changes.'
    )
    trajectory: dict[str, Any] | None = Field(
        default=None,
        description="The attempt's trajectory in our versioned format (autoexperiment.trajectory/1), or a JSON "
        "trajectory of another tool (see \"Trajectories from other tools\"), converted on upload."
    )
    trajectory_file: Annotated[
        _text(300), BeforeValidator(_only_in_zip), AfterValidator(_trajectory_member)
    ] = Field(  # an explicit null is refused (it is no member name), as before: no None in the type
        default=None,
        description="In a zip, instead of trajectory: the member holding it, trajectories/<name>.json (ours "
        "or another tool's), or .traj, .eval, .txt, .log for other tools' files.",
    )


# What a missing field's message suggests, for the fields that may hold "nothing".
_WHEN_NOTHING = {
    "cost": "use null when unknown",
    "seconds": "use null when unknown",
    "final_answer": "use null when the agent gave no answer",
    "final_patch": 'use "" when the agent changed nothing',
}


# --- messages -------------------------------------------------------------------------------------


@cache
def _properties(model: type[BaseModel]) -> dict[str, dict]:
    return model.model_json_schema()["properties"]


_TYPE_WORDS = {"integer": "an integer", "number": "a number", "string": "a string", "object": "an object",
               "array": "a list", "boolean": "a boolean", "null": "null"}


def _expected(model: type[BaseModel], name: str) -> str:
    """What the schema says a field holds: "a number or null"."""
    prop = _properties(model).get(name, {})
    kinds = [item.get("type") for item in prop.get("anyOf", [prop])]
    return " or ".join(_TYPE_WORDS.get(kind, str(kind)) for kind in kinds)


def field_problems(model: type[_Line], errors: list[ErrorDetails]) -> list[tuple[str, str]]:
    """(field, message) for each of pydantic's errors of one line, unknown fields first."""
    what = "header" if model is SubmissionHeader else "record"
    known = ", ".join(sorted(model.model_fields))
    problems = []
    for error in sorted(errors, key=lambda error: error["type"] != "extra_forbidden"):
        name = str(error["loc"][0]) if error["loc"] else what
        kind, value, ctx = error["type"], error.get("input"), error.get("ctx") or {}
        if kind == "missing":
            hint = _WHEN_NOTHING.get(name)
            message = "required field is missing" + (f" ({hint})" if hint else "")
        elif kind == "extra_forbidden":
            message = f"unknown {what} field (known fields: {known})"
        elif kind.endswith("_type"):
            message = f"must be {_expected(model, name)}, got {json_type(value)}"
        elif kind == "finite_number":
            message = f"must be a finite number, got {json_type(value)}"  # NaN, Infinity
        elif kind == "greater_than_equal":
            bound = ctx["ge"]
            message = f"must not be negative, got {value!r}" if isinstance(bound, float) else f"must be at least {bound}, got {value}"
        elif kind == "less_than_equal":
            bound = ctx["le"]
            message = f"must be at most {bound:g}, got {value!r}" if isinstance(bound, float) else f"must be at most {bound:,}, got {value:,}"
        elif kind in ("too_short", "string_too_short"):
            message = "must not be empty"
        elif kind in ("too_long", "string_too_long"):
            length = ctx.get("actual_length", len(value) if isinstance(value, str) else 0)
            message = f"is {length:,} characters long; at most {ctx['max_length']:,} are accepted"
        elif kind == "literal_error":
            choices = _properties(model)[name]["enum"]
            message = f"must be one of {', '.join(choices)}, got {json_type(value)}"
        else:
            message = error["msg"]  # ours (PydanticCustomError), written for uploaders
        problems.append((name, message))
    return problems


# --- the upload page ------------------------------------------------------------------------------


@dataclass(frozen=True)
class FormatField:
    """One row of the upload page's format tables."""

    name: str
    type: str
    required: bool
    description: str


def _type_text(prop: dict) -> str:
    """A JSON schema property as the page shows its type: "integer, 0 to 99", "number ≥ 0 or null"."""
    if "anyOf" in prop:
        return " or ".join(_type_text(item) for item in prop["anyOf"])
    if "const" in prop:
        return json.dumps(prop["const"])
    if "enum" in prop:
        return "one of " + ", ".join(json.dumps(choice) for choice in prop["enum"])
    text = prop.get("type", "any JSON value")
    if "minimum" in prop and "maximum" in prop:
        text += f", {_number(prop['minimum'])} to {_number(prop['maximum'])}"
    elif "minimum" in prop:
        text += f" ≥ {_number(prop['minimum'])}"
    if prop.get("minLength"):
        text = f"non-empty {text}"
    if "maxLength" in prop:
        text += f" of at most {prop['maxLength']:,} characters"
    return text


def _number(value: float) -> str:
    return f"{int(value):,}" if float(value).is_integer() else f"{value:g}"


def format_fields(model: type[_Line]) -> list[FormatField]:
    """The rows documenting `model` on the upload page, in the order the fields are checked."""
    schema = model.model_json_schema()
    required = set(schema.get("required", []))
    return [
        FormatField(name, _type_text(prop), name in required, prop.get("description", ""))
        for name, prop in schema["properties"].items()
    ]


def example_json(example: dict) -> str:
    """An example line, one key per line so the page need not scroll sideways."""
    return "{" + ",\n ".join(f"{json.dumps(key)}: {json.dumps(value)}" for key, value in example.items()) + "}"
