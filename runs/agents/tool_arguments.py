"""Each agent tool's arguments as a pydantic model: the JSON schema the model is shown and the check
of what it sends back come from the same class, so they cannot disagree.

`tool_schema` is a model's schema in the plain form both providers' tool APIs take (no titles, no
`anyOf` for an optional argument: it is one left out of `required`). `parse_arguments` checks one
call's arguments and raises `ArgumentsError` with the text the agent is shown. It is deliberately
no stricter and no looser than the schema says, with two allowances for what models send: a whole
float (4.0) for an integer, and the final answer as a JSON string instead of an object.
"""

from __future__ import annotations

import json
from typing import Annotated, Any

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, ValidationError, WithJsonSchema

DEFAULT_COMMAND_TIMEOUT = 600.0

PATH = "A path relative to the current directory, or absolute under /workspace."
TIMEOUT = f"Seconds before the command is killed (default {DEFAULT_COMMAND_TIMEOUT:g}; never beyond the time left)."


def _whole_float_as_int(value: Any) -> Any:
    return int(value) if isinstance(value, float) and value.is_integer() else value


LineNumber = Annotated[int, BeforeValidator(_whole_float_as_int)]


class ToolArguments(BaseModel):
    # Strict: "3" is no line number and 1 is no boolean. Unknown arguments are ignored (run_tool
    # notes them in the observation), and an explicit null means "the default" (parse_arguments).
    model_config = ConfigDict(strict=True, extra="ignore", frozen=True)


class ListFilesArguments(ToolArguments):
    path: str = Field(default=".", description="The directory; default: the current directory.")
    recursive: bool = Field(default=False, description="List subdirectories too (default false).")


class InspectFileLinesArguments(ToolArguments):
    path: str = Field(description=PATH)
    start_line: LineNumber = Field(default=1, description="First line, from 1 (default 1).")
    end_line: LineNumber | None = Field(default=None, description="Last line, inclusive.")


class UnderstandFileArguments(ToolArguments):
    path: str = Field(description=PATH)
    question: str = Field(description="What you want to know.")


class EditFileArguments(ToolArguments):
    path: str = Field(description=PATH)
    instruction: str = Field(description="The edit to make, precisely.")


class WriteFileArguments(ToolArguments):
    path: str = Field(description=PATH)
    content: str = Field(description="The complete file content.")


class PythonScriptArguments(ToolArguments):
    path: str = Field(description="The script file (e.g. check.py).")
    content: str | None = Field(default=None, description="Script source to write to `path` before running.")
    arguments: str = Field(default="", description="Command-line arguments, as shell words.")
    timeout: float | None = Field(default=None, description=TIMEOUT)


class BashScriptArguments(PythonScriptArguments):
    path: str = Field(description="The script file (e.g. run.sh).")
    content: str | None = Field(default=None, description="Script text to write to `path` before running.")
    arguments: str = Field(default="", description="Arguments, as shell words.")


class CommandLineArguments(ToolArguments):
    command: str
    timeout: float | None = Field(default=None, description=TIMEOUT)


class MoveArguments(ToolArguments):
    source: str = Field(description=PATH)
    destination: str = Field(description=PATH)


class ChangeDirectoryArguments(ToolArguments):
    path: str = Field(description=PATH)


class FinalAnswerArguments(ToolArguments):
    # The schema asks for an object; a JSON string is taken too (models send both) and parsed by
    # the tool, which tells the agent when it is no object.
    answer: Annotated[dict[str, Any] | str, WithJsonSchema({"type": "object"})] = Field(
        description='e.g. {"Experiment 1": {"accuracy": 0.91}}'
    )


def tool_schema(model: type[ToolArguments]) -> dict[str, Any]:
    """The JSON schema of `model` as the providers' tool APIs take it."""
    schema = model.model_json_schema()
    properties = {}
    for name, prop in schema["properties"].items():
        variants = [variant for variant in prop.pop("anyOf", []) if variant.get("type") != "null"]
        if variants:  # X | None: null is read as "left out", which `required` already says
            (variant,) = variants
            prop = {**variant, **prop}
        prop.pop("title", None)
        prop.pop("default", None)  # the descriptions say the default in words
        properties[name] = prop
    return {"type": "object", "properties": properties, "required": schema.get("required", [])}


class ArgumentsError(ValueError):
    """A call's arguments do not fit the tool's schema; the message is for the agent."""


def parse_arguments(tool: str, model: type[ToolArguments], arguments: dict[str, Any]) -> ToolArguments:
    """The call's arguments as `model`; unknown ones are left out, null ones take the default."""
    fields = model.model_fields
    given = {
        name: value for name, value in arguments.items()
        if name in fields and not (value is None and not fields[name].is_required())
    }
    try:
        return model.model_validate(given)
    except ValidationError as error:
        errors = error.errors()
    missing = [str(item["loc"][0]) for item in errors if item["type"] == "missing"]
    if missing:
        raise ArgumentsError(f"missing required argument(s) for {tool}: {', '.join(missing)}") from None
    name = str(errors[0]["loc"][0])
    kind = tool_schema(model)["properties"][name]["type"]
    article = "an" if kind[0] in "aeiou" else "a"
    raise ArgumentsError(f"argument {name!r} of {tool} must be {article} {kind}; got {json.dumps(arguments[name])[:100]}") from None
