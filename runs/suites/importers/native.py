"""Import a suite in our own format (DESIGN.md section 4).

Layout::

    <suite>/suite.json          {"name", "version", "description", "papers": ["<paper dir>", ...],
                                 optional "unstable_policy": "widen" (default) or "exclude",
                                 optional "gold_public": false (default) or true,
                                 optional "environment": {"requirements": ["name==version", ...],
                                                          "debian_packages": [...]}}
    <suite>/<paper>/paper.md    "# Title" on the first line; the whole file is the paper text
    <suite>/<paper>/paper.json  {"id", "title", "functions": [...], "experiments": [...],
                                 optional "environment" (replaces the suite's, no merge),
                                 optional "data": [{"name", "source", "sha256", "size"}],
                                 optional "gpu": "none" (default), "optional" or "required", "gpus": 1}
    <suite>/<paper>/gold.json   optional, written by `make_gold`: {"results": {...}, "spread": {...},
                                 "repeats": N, "spreads": {id: {key: {"min", "max"}}}, "unstable": [ids],
                                 "held_out": {id: {variant id: {"result", "spread", "spreads", "unstable"}}}}
    <suite>/<paper>/code/       the gold codebase

Our own format is strict, unlike the upstream importer: every problem found is collected and the
import is refused with all of them listed (`<file>: <json path>: <what is wrong>`), so a suite author
fixes everything in one round. Unknown keys in suite.json and paper.json are errors (a misspelt
optional key would otherwise be silently ignored); gold.json is generated, so extra keys are allowed.

An experiment may declare hidden variants (`"held_out": [{"id": 0, "command": "..."}]`): held-out
checks (runs.models.HeldOutCheck) that re-execution also runs and a pass needs. They are stored apart
from the experiments, so nothing that shows or exports experiments can show them.

Two things are not errors: a stale `line` hint (the real def line is stored and reported) and an
experiment without a gold result yet (imported with `gold_result=None` and reported).

The keys and types of each file are the pydantic models of `runs.suites.importers.schema`; this
module adds what needs the code or the other files. The helpers shared with the upstream importer
live in `runs.suites.importers.common`.
"""
import json
import math
import re
from dataclasses import dataclass, field
from pathlib import Path

from django.db import transaction
from pydantic import BaseModel, ValidationError

from runs.benchmark.datafiles import file_sha256, is_url
from runs.benchmark.json_objects import read_object
from runs.benchmark.locating import MaskingError, locate_function
from runs.benchmark.scoring import as_number, flatten_numbers
from runs.benchmark.text import json_type
from runs.models import Experiment, Function, HeldOutCheck, Paper, Suite
from runs.suites.importers.common import (
    ImportReport,
    SuiteFormatError,
    answer_format_of,
    delete_gone_experiments,
    delete_gone_functions,
    delete_gone_papers,
    hint_repair,
    mark_suite_changed,
    reject_json_constant,
    relation_sync,
    resolve_code_file,
    upsert,
    upsert_tracked,
)
from runs.suites.importers.schema import (
    TOLERANCE,
    DataEntry,
    EnvironmentEntry,
    ExperimentEntry,
    FunctionEntry,
    GoldFile,
    HeldOutEntry,
    PaperFile,
    SuiteFile,
    native_problem,
)


class _Problems(list):
    def add(self, file: str, path: str, message: str) -> None:
        self.append(f"{file}: {path}: {message}" if path else f"{file}: {message}")


def _read_object(obj, model: type[BaseModel], *, file: str, path: str, problems: _Problems) -> dict | None:
    """The checked values of a JSON object (defaults filled in), or None if it is not an object.

    Keys whose value is wrong are left out, so later checks only see sound values; the caller knows
    the object is incomplete because `problems` grew.
    """
    if not isinstance(obj, dict):
        problems.add(file, path, f"expected an object, got {json_type(obj)}")
        return None
    prefix = f"{path}." if path else ""
    read = read_object(model, obj)
    for error in read.errors:
        problems.add(file, f"{prefix}{error['loc'][0]}", native_problem(model, error))
    return read.values


def _tolerance_error(value) -> str | None:
    try:
        TOLERANCE.validate_python(value)
    except ValidationError as error:
        return error.errors()[0]["msg"]
    return None


def _load_json(path: Path, *, file: str, problems: _Problems):
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        problems.add(file, "", "file not found")
        return None
    except (OSError, UnicodeDecodeError) as error:
        problems.add(file, "", f"cannot be read: {error}")
        return None
    try:
        return json.loads(text, parse_constant=reject_json_constant)
    except json.JSONDecodeError as error:
        problems.add(file, "", f"invalid JSON at line {error.lineno} column {error.colno}: {error.msg}")
    except ValueError as error:
        problems.add(file, "", f"invalid JSON: {error}")
    return None


@dataclass
class _FunctionSpec:
    func_id: int
    file: str
    name: str
    description: str
    relevant_paper: str
    line_hint: int


@dataclass
class _GoldSpec:
    """Gold as make_gold stores it, for an experiment or one of its hidden variants."""

    gold_result: dict | None = None
    gold_spread: float | None = None
    gold_repeats: int | None = None
    gold_spreads: dict = field(default_factory=dict)
    gold_unstable: bool = False

    def gold_values(self) -> dict:
        return {"gold_result": self.gold_result, "gold_spread": self.gold_spread, "gold_repeats": self.gold_repeats,
                "gold_spreads": self.gold_spreads, "gold_unstable": self.gold_unstable}


@dataclass
class _VariantSpec(_GoldSpec):
    variant_id: int = 0
    command: str = ""


@dataclass
class _ExperimentSpec(_GoldSpec):
    exp_id: int = 0
    description: str = ""
    command: str = ""
    answer_format: dict = field(default_factory=dict)
    depends_on: list[int] = field(default_factory=list)
    rtol: float | None = None
    atol: float | None = None
    timeout: int = 0
    held_out: list[_VariantSpec] = field(default_factory=list)


@dataclass
class _PaperSpec:
    directory: str
    paper_id: str
    title: str
    text: str
    code_dir: str
    functions: list[_FunctionSpec] = field(default_factory=list)
    experiments: list[_ExperimentSpec] = field(default_factory=list)
    environment: dict | None = None
    data: list[dict] = field(default_factory=list)
    gpu: str = Paper.Gpu.NONE
    gpus: int = 1


@dataclass
class _SuiteSpec:
    name: str
    version: str
    description: str
    root: str
    unstable_policy: str
    gold_public: bool = False
    environment: dict | None = None
    papers: list[_PaperSpec] = field(default_factory=list)


def _check_paper_md(path: Path, *, file: str, title: str | None, problems: _Problems) -> str:
    try:
        text = path.read_text(encoding="utf-8-sig")
    except FileNotFoundError:
        problems.add(file, "", "file not found (the paper text is required)")
        return ""
    except (OSError, UnicodeDecodeError) as error:
        problems.add(file, "", f"cannot be read: {error}")
        return ""
    first_line = text.splitlines()[0] if text else ""
    if not first_line.startswith("# "):
        problems.add(file, "line 1", 'must be the title as a heading: "# Title"')
    elif title is not None and first_line[2:].strip() != title.strip():
        # Two disagreeing copies of the title is exactly the kind of drift we refuse (DESIGN.md §2).
        problems.add(file, "line 1", f"title {first_line[2:].strip()!r} differs from paper.json title {title!r}")
    return text


def _check_functions(raw: list, *, code_dir: Path, file: str, problems: _Problems,
                     report: ImportReport) -> list[_FunctionSpec]:
    functions: list[_FunctionSpec] = []
    seen_ids: dict[int, int] = {}
    seen_defs: dict[tuple, int] = {}
    sources: dict[Path, str | None] = {}
    for index, item in enumerate(raw):
        path = f"functions[{index}]"
        values = _read_object(item, FunctionEntry, file=file, path=path, problems=problems)
        if values is None:
            continue
        if "id" in values:
            if values["id"] in seen_ids:
                problems.add(file, f"{path}.id", f"duplicate id {values['id']} (also functions[{seen_ids[values['id']]}])")
            seen_ids.setdefault(values["id"], index)
        if "file" not in values:
            continue
        source_path, error = resolve_code_file(code_dir, values["file"])
        if error:
            problems.add(file, f"{path}.file", error)
            continue
        if source_path not in sources:
            try:
                sources[source_path] = source_path.read_text(encoding="utf-8")
            except (OSError, UnicodeDecodeError) as read_error:
                sources[source_path] = None
                problems.add(file, f"{path}.file", f"cannot be read: {read_error}")
        source = sources[source_path]
        if source is None or "name" not in values:
            continue
        hint = values.get("line")
        try:
            location = locate_function(source, values["name"], line_hint=hint)
        except (MaskingError, SyntaxError, ValueError) as locate_error:
            problems.add(file, f"{path}.name", f"{values['file']}: {locate_error}")
            continue
        if len(location.qualified_name) > Function._meta.get_field("name").max_length:
            problems.add(file, f"{path}.name", "qualified name is longer than 300 characters")
            continue
        key = (values["file"], location.qualified_name, location.def_line)
        if key in seen_defs:
            problems.add(file, f"{path}.name", f"same function as functions[{seen_defs[key]}] "
                         f"({location.qualified_name} at line {location.def_line})")
            continue
        seen_defs[key] = index
        if hint is not None and hint != location.def_line:
            report.repair(f"{file}: {path}.line", hint_repair(location, hint))
        if location.qualified_name != values["name"]:
            report.repair(f"{file}: {path}.name", f"{values['name']!r} resolved to the qualified name "
                          f"{location.qualified_name!r}, which is stored")
        if "id" in values and "description" in values:
            functions.append(_FunctionSpec(
                func_id=values["id"], file=values["file"], name=location.qualified_name,
                description=values["description"], relevant_paper=values["relevant_paper"],
                line_hint=location.def_line,
            ))
    return functions


def _check_experiments(raw: list, *, function_ids: set[int], file: str,
                       problems: _Problems) -> list[_ExperimentSpec]:
    experiments: list[_ExperimentSpec] = []
    seen: dict[int, int] = {}
    for index, item in enumerate(raw):
        path = f"experiments[{index}]"
        values = _read_object(item, ExperimentEntry, file=file, path=path, problems=problems)
        if values is None:
            continue
        if "id" in values:
            if values["id"] in seen:
                problems.add(file, f"{path}.id", f"duplicate id {values['id']} (also experiments[{seen[values['id']]}])")
            seen.setdefault(values["id"], index)
        unknown = [i for i in values.get("depends_on", []) if i not in function_ids]
        if unknown:
            problems.add(file, f"{path}.depends_on", f"unknown function id(s) {unknown} (functions have ids "
                         f"{sorted(function_ids)})")
        variants = []
        for number, entry in enumerate(values.get("held_out", [])):
            variant = _read_object(entry, HeldOutEntry, file=file, path=f"{path}.held_out[{number}]", problems=problems)
            if variant is not None and len(variant) == len(HeldOutEntry.model_fields):
                variants.append(_VariantSpec(variant_id=variant["id"], command=variant["command"]))
        if len(values) == len(ExperimentEntry.model_fields):
            experiments.append(_ExperimentSpec(
                exp_id=values["id"], description=values["description"], command=values["command"],
                answer_format=values["answer_format"], depends_on=values["depends_on"],
                rtol=values["rtol"], atol=values["atol"], timeout=values["timeout"], held_out=variants,
            ))
    return experiments


def _check_gold(path: Path, *, file: str, experiments: list[_ExperimentSpec], suite_name: str,
                problems: _Problems, report: ImportReport) -> None:
    """Attach gold results, spreads and stability to `experiments`; report those still without gold."""
    by_id = {experiment.exp_id: experiment for experiment in experiments}
    gold = {"results": {}, "spread": {}}
    stability = {"repeats": None, "spreads": {}, "unstable": []}
    held_out = {}
    if path.exists():
        raw = _load_json(path, file=file, problems=problems)
        if raw is not None:
            values = _read_object(raw, GoldFile, file=file, path="", problems=problems)
            if values:
                gold["results"] = values.get("results") or {}
                gold["spread"] = values.get("spread") or {}
                stability = {key: values.get(key) or stability[key] for key in stability}
                held_out = values.get("held_out") or {}
    for section in ("results", "spread"):
        for key, value in gold[section].items():
            where = f"{section}.{key}"
            if not re.fullmatch(r"0|[1-9][0-9]*", key) or int(key) not in by_id:
                problems.add(file, where, f"no experiment with id {key!r} in paper.json")
                continue
            experiment = by_id[int(key)]
            if section == "results":
                if not isinstance(value, dict):
                    problems.add(file, where, f"expected an object, got {json_type(value)}")
                elif answer_format_of(value) != answer_format_of(experiment.answer_format):
                    shape = json.dumps(answer_format_of(value))
                    problems.add(file, where, f"has the shape {shape[:200]} but the experiment's answer_format is "
                                 f"{json.dumps(experiment.answer_format)[:200]}")
                elif infinite := _infinite_numbers(value):
                    problems.add(file, f"{where}.{infinite[0]}", "must be a finite number, got a literal beyond the "
                                 "range of a float")
                else:
                    experiment.gold_result = value
            elif (tolerance_error := _tolerance_error(value)) is not None:
                problems.add(file, where, tolerance_error)
            elif value is not None and key not in gold["results"]:
                problems.add(file, where, "a spread without a gold result")
            elif value is not None:
                experiment.gold_spread = float(value)
    _check_stability(stability, by_id=by_id, file=file, problems=problems)
    _check_held_out_gold(held_out, by_id=by_id, repeats=stability["repeats"], file=file, problems=problems)
    for experiment in experiments:
        if experiment.gold_result is None:
            report.skip(f"{file}: results.{experiment.exp_id}",
                        f"no gold result yet: run `python manage.py make_gold {suite_name}`")
        for variant in experiment.held_out:
            if variant.gold_result is None:
                report.skip(f"{file}: held_out.{experiment.exp_id}.{variant.variant_id}",
                            f"no gold result for a hidden variant yet: run `python manage.py make_gold {suite_name}`")


def _check_held_out_gold(section: dict, *, by_id: dict[int, _ExperimentSpec], repeats, file: str,
                         problems: _Problems) -> None:
    """Attach gold.json's gold of hidden variants to them: each a result of the experiment's shape,
    with its spread, per-number spreads and unstable mark, as make_gold writes them."""
    for key, variants in section.items():
        where = f"held_out.{key}"
        experiment = by_id.get(int(key)) if re.fullmatch(r"0|[1-9][0-9]*", key) else None
        if experiment is None:
            problems.add(file, where, f"no experiment with id {key!r} in paper.json")
            continue
        if not isinstance(variants, dict):
            problems.add(file, where, f"expected an object, got {json_type(variants)}")
            continue
        declared = {variant.variant_id: variant for variant in experiment.held_out}
        for variant_key, gold in variants.items():
            at = f"{where}.{variant_key}"
            variant = declared.get(int(variant_key)) if re.fullmatch(r"0|[1-9][0-9]*", variant_key) else None
            if variant is None:
                problems.add(file, at, f"no hidden variant with id {variant_key!r} in experiment {key}'s held_out")
            elif not isinstance(gold, dict) or not isinstance(gold.get("result"), dict):
                problems.add(file, at, 'expected an object with "result" (an object)')
            elif answer_format_of(gold["result"]) != answer_format_of(experiment.answer_format):
                problems.add(file, f"{at}.result", f"has the shape {json.dumps(answer_format_of(gold['result']))[:200]} "
                             f"but the experiment's answer_format is {json.dumps(experiment.answer_format)[:200]}")
            elif infinite := _infinite_numbers(gold["result"]):
                problems.add(file, f"{at}.result.{infinite[0]}", "must be a finite number")
            elif (tolerance_error := _tolerance_error(gold.get("spread"))) is not None:
                problems.add(file, f"{at}.spread", tolerance_error)
            else:
                spreads = gold.get("spreads") or {}
                numbers = flatten_numbers(gold["result"])
                bad = [(number, problem) for number, spread in spreads.items()
                       if (problem := "not a number of the variant's gold result" if number not in numbers
                           else _spread_problem(spread)) is not None] if isinstance(spreads, dict) else [("", "expected an object")]
                for number, problem in bad:
                    problems.add(file, f"{at}.spreads.{number}".rstrip("."), problem)
                if bad:
                    continue
                unstable = gold.get("unstable", False)
                if not isinstance(unstable, bool) or (unstable and not spreads):
                    problems.add(file, f"{at}.unstable", "expected true (with spreads) or false")
                    continue
                variant.gold_result = gold["result"]
                variant.gold_spread = None if gold.get("spread") is None else float(gold["spread"])
                variant.gold_spreads = spreads
                variant.gold_repeats = repeats if spreads else None
                variant.gold_unstable = unstable


def _infinite_numbers(result: dict) -> list[str]:
    """The keys of a gold result's numbers that read as infinite (1e999: json has no other way to
    spell one; Postgres jsonb and the scorer refuse them)."""
    return [key for key, value in flatten_numbers(result).items()
            if (number := as_number(value)) is not None and not math.isfinite(number)]


def _spread_problem(spread) -> str | None:
    """What is wrong with one number's {"min": ..., "max": ...}, or None."""
    if not isinstance(spread, dict) or set(spread) != {"min", "max"}:
        return 'expected {"min": number, "max": number}'
    low, high = spread["min"], spread["max"]
    if any(isinstance(value, bool) or not isinstance(value, (int, float)) for value in (low, high)):
        return f'expected numbers for "min" and "max", got {json.dumps(spread)[:200]}'
    for bound, value in (("min", low), ("max", high)):
        # NaN and Infinity are refused when the file is read, but a literal beyond float range reads
        # as inf (1e999) or an int no float holds (as_number gives inf for both).
        if not math.isfinite(as_number(value)):
            return f'"{bound}" must be a finite number, got {str(value)[:40]} (beyond the range of a float)'
    if low > high:
        return f'"min" {low!r} is larger than "max" {high!r}'
    return None


def _check_stability(stability: dict, *, by_id: dict[int, _ExperimentSpec], file: str, problems: _Problems) -> None:
    """Attach make_gold's repeats, per-number spreads and unstable marks to experiments with gold.

    A spread must belong to a number of the experiment's gold result, and an unstable experiment
    needs its spreads: the "widen" policy widens its tolerance to cover them.
    """
    for key, spreads in stability["spreads"].items():
        where = f"spreads.{key}"
        experiment = by_id.get(int(key)) if re.fullmatch(r"0|[1-9][0-9]*", key) else None
        if experiment is None:
            problems.add(file, where, f"no experiment with id {key!r} in paper.json")
        elif experiment.gold_result is None:
            problems.add(file, where, "spreads without a gold result")
        elif not isinstance(spreads, dict):
            problems.add(file, where, f"expected an object, got {json_type(spreads)}")
        else:
            numbers = flatten_numbers(experiment.gold_result)
            bad = False
            for number, spread in spreads.items():
                if number not in numbers:
                    problems.add(file, f"{where}.{number}", "not a number of the experiment's gold result")
                    bad = True
                elif (problem := _spread_problem(spread)) is not None:
                    problems.add(file, f"{where}.{number}", problem)
                    bad = True
            if not bad:
                experiment.gold_spreads = spreads
                experiment.gold_repeats = stability["repeats"]
    for index, exp_id in enumerate(stability["unstable"]):
        experiment = by_id.get(exp_id)
        if experiment is None:
            problems.add(file, f"unstable[{index}]", f"no experiment with id {exp_id} in paper.json")
        elif not stability["spreads"].get(str(exp_id)):
            problems.add(file, f"unstable[{index}]", f"experiment {exp_id} is marked unstable but has no spreads")
        else:
            experiment.gold_unstable = True


def _check_paper(suite_dir: Path, directory: str, *, suite_name: str, problems: _Problems,
                 report: ImportReport) -> _PaperSpec | None:
    paper_dir = suite_dir / directory
    file = f"{directory}/paper.json"
    if not paper_dir.is_dir():
        problems.add("suite.json", "papers", f"{directory!r}: no such directory in the suite")
        return None
    code_dir = paper_dir / "code"
    if not code_dir.is_dir():
        problems.add(f"{directory}/code", "", "directory not found (the gold codebase is required)")
    raw = _load_json(paper_dir / "paper.json", file=file, problems=problems)
    values = _read_object(raw, PaperFile, file=file, path="", problems=problems) if raw is not None else None
    text = _check_paper_md(paper_dir / "paper.md", file=f"{directory}/paper.md",
                           title=(values or {}).get("title"), problems=problems)
    if values is None:
        return None
    functions = []
    if code_dir.is_dir():
        functions = _check_functions(values.get("functions", []), code_dir=code_dir, file=file,
                                     problems=problems, report=report)
    # Dependencies are checked against every declared id, not only the sound functions, so a
    # broken function is reported once (at the function) rather than again at each experiment.
    declared_ids = {item.get("id") for item in values.get("functions", []) if isinstance(item, dict)}
    experiments = _check_experiments(values.get("experiments", []), function_ids=declared_ids,
                                     file=file, problems=problems)
    _check_gold(paper_dir / "gold.json", file=f"{directory}/gold.json", experiments=experiments,
                suite_name=suite_name, problems=problems, report=report)
    environment = _check_environment(values.get("environment"), file=file, problems=problems)
    data = _check_data(values.get("data", []), paper_dir=paper_dir, suite_dir=suite_dir, file=file, problems=problems)
    if "id" not in values or "title" not in values:
        return None
    return _PaperSpec(directory=directory, paper_id=values["id"], title=values["title"], text=text,
                      code_dir=str(code_dir.resolve()), functions=functions, experiments=experiments,
                      environment=environment, data=data, gpu=values.get("gpu", Paper.Gpu.NONE),
                      gpus=values.get("gpus", 1))


def _check_environment(raw, *, file: str, problems: _Problems) -> dict | None:
    """The declared environment as stored ({"requirements", "debian_packages"}), None when none is."""
    if raw is None:
        return None
    values = _read_object(raw, EnvironmentEntry, file=file, path="environment", problems=problems)
    if not values or len(values) != len(EnvironmentEntry.model_fields):
        return None
    return {"requirements": values["requirements"], "debian_packages": values["debian_packages"]}


def _check_data(raw: list, *, paper_dir: Path, suite_dir: Path, file: str, problems: _Problems) -> list[dict]:
    """The declared data files; a local source must be a file inside the suite (what it holds is
    checked when it is fetched, runs.benchmark.datafiles)."""
    entries = []
    for index, item in enumerate(raw):
        path = f"data[{index}]"
        values = _read_object(item, DataEntry, file=file, path=path, problems=problems)
        if not values or len(values) != len(DataEntry.model_fields):
            continue
        if not is_url(values["source"]):
            local = (paper_dir / values["source"]).resolve()
            if not local.is_relative_to(suite_dir.resolve()):
                problems.add(file, f"{path}.source", "leads outside the suite (through a symbolic link)")
                continue
            if not local.is_file():
                problems.add(file, f"{path}.source", f"no file {values['source']} in {paper_dir.name}/")
                continue
            # The suite's own copy is checked now, so a stale hash is the author's error at import,
            # not every worker's at fetch time.
            size, digest = local.stat().st_size, file_sha256(local)
            if (size, digest) != (values["size"], values["sha256"]):
                problems.add(file, path, f"{values['source']} has {size} bytes with sha256 {digest}, but "
                             f"{values['size']} bytes with sha256 {values['sha256']} are declared")
                continue
        entries.append({key: values[key] for key in ("name", "source", "sha256", "size")})
    return entries


def _check_suite(suite_dir: Path, *, report: ImportReport) -> _SuiteSpec:
    """Read and validate the whole suite without touching the database; raise listing every problem."""
    problems = _Problems()
    raw = _load_json(suite_dir / "suite.json", file="suite.json", problems=problems)
    values = _read_object(raw, SuiteFile, file="suite.json", path="", problems=problems) if raw is not None else None
    if values is None or "papers" not in values:
        _raise(suite_dir, problems)
    name = values.get("name", suite_dir.name)
    spec = _SuiteSpec(name=name, version=values.get("version", ""), description=values.get("description", ""),
                      root=str(suite_dir.resolve()), unstable_policy=values.get("unstable_policy", Suite.UnstablePolicy.WIDEN),
                      gold_public=values.get("gold_public", False),
                      environment=_check_environment(values.get("environment"), file="suite.json", problems=problems))
    seen: dict[str, str] = {}
    for directory in values["papers"]:
        paper = _check_paper(suite_dir, directory, suite_name=name, problems=problems, report=report)
        if paper is None:
            continue
        if paper.paper_id in seen:
            problems.add(f"{directory}/paper.json", "id", f"paper id {paper.paper_id!r} is also used by "
                         f"{seen[paper.paper_id]}/paper.json")
        seen.setdefault(paper.paper_id, directory)
        spec.papers.append(paper)
    existing = Suite.objects.filter(name=name).exclude(source_format=Suite.Format.NATIVE).first()
    if existing is not None:
        problems.add("suite.json", "name", f"a suite named {name!r} was imported from another format "
                     f"({existing.source_format}); choose another name")
    if problems:
        _raise(suite_dir, problems)
    return spec


def _raise(suite_dir: Path, problems: _Problems):
    listing = "\n".join(f"  {problem}" for problem in problems)
    raise SuiteFormatError(f"{suite_dir}: the suite cannot be imported ({len(problems)} problem(s)):\n{listing}")


def _write_paper(suite: Suite, spec: _PaperSpec, *, report: ImportReport) -> None:
    file = f"{spec.directory}/paper.json"
    paper = upsert(Paper, lookup={"suite": suite, "paper_id": spec.paper_id}, report=report, kind="paper",
                   values={"title": spec.title, "text": spec.text, "code_dir": spec.code_dir, "source_url": "",
                           "environment": spec.environment, "data": spec.data, "gpu": spec.gpu, "gpus": spec.gpus})
    functions = {}
    for function in spec.functions:
        functions[function.func_id] = upsert(
            Function, lookup={"paper": paper, "func_id": function.func_id}, report=report, kind="function",
            values={"file": function.file, "name": function.name, "description": function.description,
                    "relevant_paper": function.relevant_paper, "line_hint": function.line_hint},
        )
    delete_gone_functions(paper=paper, keep=set(functions), report=report, where=f"{file}: functions")
    for experiment in spec.experiments:
        row, created = upsert_tracked(
            Experiment, lookup={"paper": paper, "exp_id": experiment.exp_id}, report=report, kind="experiment",
            values={"description": experiment.description, "command": experiment.command,
                    "answer_format": experiment.answer_format, **experiment.gold_values(),
                    "rtol": experiment.rtol, "atol": experiment.atol,
                    "timeout_seconds": experiment.timeout},
        )
        relation_sync(row.dependencies, [functions[i] for i in experiment.depends_on], created=created,
                      report=report, kind="experiment dependencies")
        for variant in experiment.held_out:
            upsert(HeldOutCheck, lookup={"experiment": row, "variant_id": variant.variant_id}, report=report,
                   kind="held-out check", values={"command": variant.command, **variant.gold_values()})
        gone = row.held_out_checks.exclude(variant_id__in=[variant.variant_id for variant in experiment.held_out])
        if ids := sorted(gone.values_list("variant_id", flat=True)):
            report.delete(f"{file}: experiments[{experiment.exp_id}].held_out", f"hidden variants {ids} are gone",
                          kind="held-out check", count=len(ids))
            gone.delete()
    delete_gone_experiments(paper=paper, keep={e.exp_id for e in spec.experiments}, report=report,
                            where=f"{file}: experiments")


def native_suite_read(path: Path) -> _SuiteSpec:
    """The suite in directory `path`, checked as an import checks it, without writing anything
    (preparing a suite's environments before it is imported). Raises SuiteFormatError."""
    suite_dir = Path(path)
    if not suite_dir.is_dir():
        raise SuiteFormatError(f"{suite_dir}: not a directory")
    return _check_suite(suite_dir, report=ImportReport())


def import_native_suite(path: Path) -> tuple[Suite, ImportReport]:
    """Import (or re-import) the suite in directory `path`; return the suite and what was done.

    Everything is validated before anything is written, and the writes happen in one transaction:
    on SuiteFormatError (whose message lists every problem) the database is unchanged. Re-importing
    an unchanged suite writes nothing. Papers, functions and experiments that are gone from the
    source are deleted, together with the samples masking a deleted function.
    """
    suite_dir = Path(path)
    if not suite_dir.is_dir():
        raise SuiteFormatError(f"{suite_dir}: not a directory")
    report = ImportReport()
    spec = _check_suite(suite_dir, report=report)
    with transaction.atomic():
        suite = upsert(Suite, lookup={"name": spec.name}, report=report, kind="suite",
                       values={"version": spec.version, "description": spec.description,
                               "source_format": Suite.Format.NATIVE, "gold_root": spec.root,
                               "unstable_policy": spec.unstable_policy, "gold_public": spec.gold_public,
                               "environment": spec.environment})
        for paper in spec.papers:
            _write_paper(suite, paper, report=report)
        delete_gone_papers(suite=suite, keep={paper.paper_id for paper in spec.papers}, report=report,
                           where="suite.json: papers")
        mark_suite_changed(suite, report)
    return suite, report
