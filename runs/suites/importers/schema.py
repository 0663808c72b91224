"""The native suite format's JSON files as pydantic models: suite.json, paper.json (its functions and
experiments), gold.json.

runs.suites.importers.native reads each object through its model (`native_problem` words the
errors as `<what is wrong>`; native.py adds the file and the JSON path), then checks what needs
the code or the other files: function names against the source, dependencies, gold shapes.
Unknown keys are errors except in gold.json, which `make_gold` writes and may extend.
"""

import re
from pathlib import PurePosixPath
from typing import Annotated, Any, Literal

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, TypeAdapter
from pydantic_core import ErrorDetails, PydanticCustomError

from runs.benchmark.datafiles import DATA_NAME, SHA256, data_source_problem
from runs.benchmark.json_objects import refused_as
from runs.benchmark.text import json_type
from runs.models import Experiment, Function, Paper, Suite
from sandbox.environments import debian_package_problem, requirement_problem

# PositiveIntegerField is a 32-bit integer in Postgres; a larger id would crash the write.
MAX_ID = 2**31 - 1
SLUG = re.compile(r"^[-a-zA-Z0-9_]+$")
PAPER_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")
DEFAULT_TIMEOUT = Experiment._meta.get_field("timeout_seconds").default


def _not_blank(value: str) -> str:
    if not value.strip():
        raise PydanticCustomError("blank", "must not be empty")
    return value


def _not_empty_answer_format(value: dict) -> dict:
    if not value:
        raise PydanticCustomError("blank", "must not be empty (it tells the agent which numbers to report)")
    return value


def resolve_dir_error(relative: str) -> str | None:
    pure = PurePosixPath(relative)
    if not relative or pure.is_absolute() or ".." in pure.parts or "\\" in relative:
        return f"{relative!r} is not a relative directory inside the suite"
    return None


def _id_error(value: Any) -> bool:
    return isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= MAX_ID


def _function_ids_described(value: Any) -> str:
    if not isinstance(value, list):
        return f"expected an array of function ids, got {json_type(value)}"
    return f"expected function ids (non-negative integers), got {[item for item in value if _id_error(item)]!r}"


def _function_ids_once(value: list[int]) -> list[int]:
    if len(set(value)) != len(value):
        raise PydanticCustomError("duplicate", "lists a function more than once: {value}", {"value": repr(value)})
    return value


def _paper_dirs_described(value: Any) -> str:
    if not isinstance(value, list) or not value:
        return "expected a non-empty array of paper directory names"
    bad = [item for item in value if not isinstance(item, str) or resolve_dir_error(item)]
    return f"expected relative directory names inside the suite, got {bad!r}"


def _paper_dirs(value: list[str]) -> list[str]:
    bad = [item for item in value if resolve_dir_error(item)]
    if bad:
        raise PydanticCustomError("paper_dirs", "expected relative directory names inside the suite, got {bad}", {"bad": repr(bad)})
    if len(set(value)) != len(value):
        raise PydanticCustomError("duplicate", "lists a paper directory more than once")
    return value


def _column(model, name: str) -> int:
    """The database column's length: a longer value would fail at write time."""
    return model._meta.get_field(name).max_length


String = Annotated[str, refused_as(lambda value: f"expected a string, got {json_type(value)}")]
Text = Annotated[str, refused_as(lambda value: f"expected a non-empty string, got {json_type(value)}"), AfterValidator(_not_blank)]
Id = Annotated[int, Field(ge=0, le=MAX_ID), refused_as(lambda value: f"expected a non-negative integer, got {value!r}")]
Tolerance = Annotated[
    float | None, Field(ge=0), refused_as(lambda value: f"expected null or a non-negative number, got {value!r}")
]
AnyObject = Annotated[dict[str, Any], refused_as(lambda value: f"expected an object, got {json_type(value)}")]
Array = Annotated[list[Any], refused_as(lambda value: f"expected an array, got {json_type(value)}")]


class _Object(BaseModel):
    # Strict: "60" is not 60 and true is not 1. Unknown keys are errors: a misspelt optional key
    # would otherwise be silently ignored.
    model_config = ConfigDict(extra="forbid", strict=True, allow_inf_nan=False)


def _entries_checked(problem_of, what: str):
    """An AfterValidator refusing a list whose entries `problem_of` finds fault with, naming each."""

    def check(value: list[str]) -> list[str]:
        bad = [f"{entry!r} {problem}" for entry in value if (problem := problem_of(entry))]
        if bad:
            raise PydanticCustomError(what, "{bad}", {"bad": "; ".join(bad)})
        if len(set(value)) != len(value):
            raise PydanticCustomError("duplicate", "lists an entry more than once")
        return value

    return AfterValidator(check)


Strings = Annotated[list[str], refused_as(lambda value: f"expected an array of strings, got {json_type(value)}")]


class EnvironmentEntry(_Object):
    """suite.json's or paper.json's "environment": what the sandboxes of its papers run with
    (runs.suites.environments). Absent: the host's /usr (bubblewrap) or the base image (Docker)."""

    requirements: Annotated[Strings, _entries_checked(requirement_problem, "requirement")] = Field(
        default_factory=list, description='Python packages, each pinned exactly: "name==version" (extras allowed).'
    )
    debian_packages: Annotated[Strings, _entries_checked(debian_package_problem, "debian_package")] = Field(
        default_factory=list, description="Debian packages installed on the host (bubblewrap only)."
    )


def _source_checked(value: str) -> str:
    if problem := data_source_problem(value):
        raise PydanticCustomError("source", "{problem}", {"problem": problem})
    return value


class DataEntry(_Object):
    """One of paper.json's "data" files: fetched once into the data cache (runs.benchmark.datafiles), checked,
    and bound read-only at /data/<name> in every sandbox of the paper."""

    name: Annotated[
        str,
        Field(pattern=DATA_NAME.pattern, max_length=200),
        refused_as(lambda value: f"{value!r} is not a plain file name (letters, digits, '.', '-', '_')"),
    ]
    source: Annotated[String, AfterValidator(_source_checked)] = Field(
        description="An http(s) URL, or a path relative to the paper's directory (inside the suite)."
    )
    sha256: Annotated[
        str, Field(pattern=SHA256.pattern), refused_as(lambda value: f"expected 64 lowercase hex digits, got {value!r}")
    ]
    size: Annotated[
        int, Field(ge=0), refused_as(lambda value: f"expected the file's size in bytes (an integer >= 0), got {value!r}")
    ]


def _data_names_once(value: list) -> list:
    names = [item.get("name") for item in value if isinstance(item, dict)]
    if len(set(names)) != len(names):
        raise PydanticCustomError("duplicate", "names a file more than once: {names}", {"names": repr(names)})
    return value


Environment = Annotated[
    dict[str, Any] | None, refused_as(lambda value: f"expected an object (requirements, debian_packages), got {json_type(value)}")
]


class SuiteFile(_Object):
    """suite.json"""

    name: Annotated[
        str,
        Field(pattern=SLUG.pattern, max_length=100),
        refused_as(lambda value: f"{value!r} is not a slug (letters, digits, '-' and '_', at most 100 characters)"),
    ] = Field(description="The suite's name, as the site shows it.")
    version: Annotated[String, Field(max_length=_column(Suite, "version"))] = ""
    description: String = ""
    papers: Annotated[list[str], Field(min_length=1), refused_as(_paper_dirs_described), AfterValidator(_paper_dirs)] = Field(
        description="The papers' directories, relative to the suite's."
    )
    unstable_policy: Annotated[
        Literal["widen", "exclude"],
        refused_as(lambda value: f'expected "widen" or "exclude", got {value!r}'),
    ] = Field(default=Suite.UnstablePolicy.WIDEN, description="How experiments whose gold runs disagree are scored (Suite.unstable_policy).")
    gold_public: Annotated[
        bool, Field(strict=True), refused_as(lambda value: f"expected true or false, got {json_type(value)}")
    ] = Field(
        default=False, description="The gold code is public (replays show it beside agents' code to everyone; Suite.gold_public)."
    )
    environment: Environment = Field(default=None, description="Every paper's environment (EnvironmentEntry) unless it declares its own.")


class PaperFile(_Object):
    """<paper>/paper.json; its functions and experiments are read one by one (FunctionEntry,
    ExperimentEntry), so that one broken entry does not hide the others' problems."""

    id: Annotated[
        str,
        Field(pattern=PAPER_ID.pattern, max_length=100),
        refused_as(lambda value: f"{value!r} is not a paper id (letters, digits, '.', '-', '_', at most 100 characters)"),
    ]
    title: Annotated[Text, Field(max_length=_column(Paper, "title"))] = Field(description='As paper.md\'s "# Title" line.')
    functions: Array = Field(description="The functions a sample may mask (FunctionEntry).")
    experiments: Array = Field(description="The experiments the agent runs (ExperimentEntry).")
    environment: Environment = Field(default=None, description="Replaces the suite's environment (EnvironmentEntry), no merge.")
    data: Annotated[Array, AfterValidator(_data_names_once)] = Field(
        default_factory=list, description="Data files (DataEntry), at /data/<name> in the paper's sandboxes."
    )
    gpu: Annotated[
        Literal["none", "optional", "required"],
        refused_as(lambda value: f'expected "none", "optional" or "required", got {value!r}'),
    ] = Field(default=Paper.Gpu.NONE, description="Whether its experiments need a GPU, may use one, or need none.")
    gpus: Annotated[
        int, Field(ge=1, le=64), refused_as(lambda value: f"expected a number of GPUs from 1 to 64, got {value!r}")
    ] = Field(default=1, description="How many GPUs one attempt uses when it gets any.")


class FunctionEntry(_Object):
    """One of paper.json's functions."""

    id: Id
    file: Annotated[Text, Field(max_length=_column(Function, "file"))] = Field(description="Relative to the paper's code/.")
    name: Text = Field(description="The function's (qualified) name in the file.")
    description: Text
    relevant_paper: String = ""
    line: Annotated[
        int | None,
        Field(ge=1, le=MAX_ID),
        refused_as(lambda value: f"expected null or a line number (integer >= 1), got {value!r}"),
    ] = Field(default=None, description="Where the def is, when the name is ambiguous; a stale hint is repaired.")


class HeldOutEntry(_Object):
    """A hidden variant of an experiment (runs.models.HeldOutCheck): another seed or configuration
    of the same kind of command. Never shown to agents or visitors; its gold comes from make_gold."""

    id: Id
    command: Text = Field(description="Run in the workspace like the experiment's; prints numbers of the same shape.")


def _held_out_ids_once(value: list) -> list:
    ids = [item.get("id") for item in value if isinstance(item, dict)]
    if len(set(ids)) != len(ids):
        raise PydanticCustomError("duplicate", "lists a variant id more than once: {ids}", {"ids": repr(ids)})
    return value


class ExperimentEntry(_Object):
    """One of paper.json's experiments."""

    id: Id
    description: Text
    command: Text = Field(description="Run in the workspace; prints the experiment's numbers.")
    answer_format: Annotated[
        dict[str, Any],
        refused_as(lambda value: f'expected an object such as {{"IoU": 0.0}}, got {json_type(value)}'),
        AfterValidator(_not_empty_answer_format),
    ]
    depends_on: Annotated[
        list[Annotated[int, Field(ge=0, le=MAX_ID)]], refused_as(_function_ids_described), AfterValidator(_function_ids_once)
    ] = Field(description="The ids of the functions the experiment runs.")
    rtol: Tolerance = None
    atol: Tolerance = None
    timeout: Annotated[
        int, Field(ge=1, le=MAX_ID), refused_as(lambda value: f"expected a positive integer number of seconds, got {value!r}")
    ] = DEFAULT_TIMEOUT
    held_out: Annotated[Array, AfterValidator(_held_out_ids_once)] = Field(
        default_factory=list,
        description="Hidden variants (HeldOutEntry): re-execution runs them too, and a pass needs them all.",
    )


class GoldFile(_Object):
    """<paper>/gold.json, written by `make_gold`: extra keys are allowed."""

    model_config = ConfigDict(extra="ignore")

    results: AnyObject = Field(description="Experiment id -> its gold result.")
    # Absent is fine, null is not (there is no None in the type).
    spread: AnyObject = Field(default=None, description="Experiment id -> the spread of its result over runs.")
    repeats: Annotated[
        int | None, Field(ge=1, le=MAX_ID), refused_as(lambda value: f"expected a positive number of gold runs, got {value!r}")
    ] = Field(default=None, description="How many fresh-sandbox gold runs the spreads were measured over.")
    spreads: AnyObject = Field(
        default=None, description='Experiment id -> number key -> {"min": ..., "max": ...} over the gold runs.'
    )
    unstable: Annotated[
        list[Annotated[int, Field(ge=0, le=MAX_ID)]],
        refused_as(lambda value: f"expected an array of experiment ids, got {value!r}"),
    ] = Field(default_factory=list, description="The ids of the experiments whose gold runs disagree.")
    generated_by: String = ""
    python: String = ""
    numpy: String = ""
    held_out: AnyObject = Field(
        default=None,
        description='Experiment id -> variant id -> {"result", "spread", "spreads", "unstable"}, as for experiments.',
    )


TOLERANCE = TypeAdapter(Tolerance, config=ConfigDict(strict=True, allow_inf_nan=False))


def native_problem(model: type[_Object], error: ErrorDetails) -> str:
    """What is wrong with one key, in the words of the native format's messages."""
    kind = error["type"]
    if kind == "missing":
        return "missing required key"
    if kind == "extra_forbidden":
        return f"unknown key (expected one of: {', '.join(model.model_fields)})"
    if kind in ("too_long", "string_too_long"):
        return f"longer than {error['ctx']['max_length']} characters"
    return error["msg"]  # ours (PydanticCustomError), written for suite authors
