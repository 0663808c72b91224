"""Each tool's arguments have one source, a pydantic model: the schema the model is shown is that
model's, and the check run_tool applies accepts what the schema allows and refuses what it does not."""
from __future__ import annotations

import json

import pytest

from runs.agents.tool_arguments import ArgumentsError, parse_arguments, tool_schema
from runs.agents.tools import TOOLS, tool_specs

# A value of each JSON schema type, and the types it is an instance of.
VALUES = {
    "string": ("x", {"string"}),
    "integer": (3, {"integer", "number"}),
    "number": (2.5, {"number"}),
    "boolean": (True, {"boolean"}),
    "object": ({"Experiment 1": {"x": 1.0}}, {"object"}),
    "array": ([1], {"array"}),
}
# What run_tool takes beyond the schema, for what models send: an answer as a JSON string.
ALLOWANCES = {("final_answer", "answer", "string")}


def _properties(name: str) -> dict[str, dict]:
    return TOOLS[name].spec.parameters["properties"]


def test_the_specs_shown_to_the_model_are_the_argument_models_schemas():
    for spec in tool_specs():
        model = TOOLS[spec.name].arguments
        assert spec.parameters == tool_schema(model)
        assert list(spec.parameters["properties"]) == list(model.model_fields)
        assert set(spec.parameters["required"]) == {name for name, field in model.model_fields.items() if field.is_required()}
        for name, prop in spec.parameters["properties"].items():
            assert prop.get("description") == model.model_fields[name].description


def test_the_schemas_are_plain_json_schema_both_providers_take():
    for spec in tool_specs():
        text = json.dumps(spec.parameters)
        for construct in ('"title"', '"anyOf"', '"$ref"', '"$defs"', '"default"', '"additionalProperties"'):
            assert construct not in text, f"{spec.name}: {construct}"
        assert all(set(prop) <= {"type", "description"} for prop in spec.parameters["properties"].values())


def _valid_call(name: str) -> dict:
    return {arg: VALUES[prop["type"]][0] for arg, prop in _properties(name).items()}


@pytest.mark.parametrize("name", list(TOOLS))
def test_arguments_of_the_schemas_types_are_accepted(name):
    arguments = _valid_call(name)
    assert parse_arguments(name, TOOLS[name].arguments, arguments).model_dump() == arguments


@pytest.mark.parametrize(
    ("name", "argument", "kind"),
    [
        (name, argument, kind)
        for name in TOOLS
        for argument, prop in _properties(name).items()
        for kind, (_, kinds) in VALUES.items()
        if prop["type"] not in kinds and (name, argument, kind) not in ALLOWANCES
    ],
)
def test_an_argument_of_another_type_is_refused_with_what_the_schema_asks(name, argument, kind):
    arguments = {**_valid_call(name), argument: VALUES[kind][0]}
    expected = _properties(name)[argument]["type"]
    with pytest.raises(ArgumentsError, match=f"argument '{argument}' of {name} must be an? {expected}; got "):
        parse_arguments(name, TOOLS[name].arguments, arguments)


@pytest.mark.parametrize("name", list(TOOLS))
def test_exactly_the_schemas_required_arguments_are_required(name):
    required = TOOLS[name].spec.parameters["required"]
    for argument in _properties(name):
        arguments = {key: value for key, value in _valid_call(name).items() if key != argument}
        if argument in required:
            with pytest.raises(ArgumentsError, match=f"missing required argument\\(s\\) for {name}: {argument}$"):
                parse_arguments(name, TOOLS[name].arguments, arguments)
        else:
            parse_arguments(name, TOOLS[name].arguments, arguments)
