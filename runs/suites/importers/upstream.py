"""Import the upstream AutoExperiment release's metadata (DESIGN.md section 4) as a suite.

Inputs, all in `metadata_dir` (upstream's `dataset/MLRC/`, which also holds one folder per paper,
`<paper_id>/` with `paper.txt`, `code/`, `functions.jsonl` and `experiments.jsonl`):

- `mlrc_main.csv` (Title, github, paper_id, conda_env), `mlrc_funcs.csv` (paper_id, func_id, file,
  name, header_line, optional line_start and line_end, ...) and `mlrc_exps.csv` (paper_id, exp_id,
  description, result, func_dependencies, solution): required, the source of truth. A missing file
  or a missing required column is a whole-file problem and raises SuiteFormatError naming the file
  and column.
- `<paper_id>.functions.jsonl` / `<paper_id>.experiments.jsonl`, or upstream's
  `<paper_id>/functions.jsonl` / `<paper_id>/experiments.jsonl`: optional and stale. They only fill
  what the CSVs lack (function descriptions; an empty description or command), and every
  disagreement with the CSVs is reported. They never supply gold results: a stale gold number is
  worse than none.
- `mlrc_n=<K>*.jsonl`: upstream's samples, imported as Sample rows. Their `func_details` also
  supply function descriptions. Samples are only ever added or updated here, never deleted for
  being absent (samples_ensure may have drawn more), except with a function that is deleted.
- The paper text, from the first of `papers/<paper_id>.md`, `papers/<paper_id>.txt` (our own
  files: an explicit override), `<paper_id>/paper.md` and `<paper_id>/paper.txt` (as upstream ships
  it). A paper with none is imported with an empty text and reported with every place looked at;
  text that is not UTF-8 is read with the bad bytes replaced, and reported.

Code: the gold code of paper P is the directory `<code_dir>/<P>/` (a checkout of the paper's
repository), else the `code/` folder upstream ships in `<metadata_dir>/<P>/` (so the release
imports as it is with `code_dir` = `metadata_dir`). A paper with neither is still imported, with
an empty `code_dir`, so it shows up; its functions, experiments and samples are skipped, because
without code nothing can be located, masked or run. Run the import again once the code is there.
`code_dir` itself must exist (a missing one is far more likely a typo than a release without any
code; pass an empty directory to import the metadata alone).

Re-importing deletes the papers, functions and experiments of the suite that are no longer
imported (gone from the CSVs, or now skipped), and the samples masking a deleted function; each
deletion is reported.

Bad rows never stop the import: each is skipped or repaired and reported as
`<file>:<line>: <field>: <reason>` (the line where the CSV record starts; records span lines).
Function names are resolved in the code by AST and stored qualified. Upstream gives bare names such
as `__call__`, a header_line that may be stale or point at the class statement, and the body's
line_start..line_end: these are only evidence to choose among same-named defs (the rules of
`runs.benchmark.locating.locate_function`), each repair reported with the rule that made it. A row
the evidence cannot resolve is skipped as ambiguous, never guessed.
"""
import ast
import csv
import io
import json
import math
import re
from dataclasses import dataclass, field
from pathlib import Path

from django.db import transaction

from runs.benchmark.locating import FunctionNotFound, LocationRule, MaskingError, list_functions, locate_function
from runs.benchmark.sampling import sample_id
from runs.models import Experiment, Function, Paper, Sample, Suite
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
from runs.suites.importers.environments import from_environment_yml, from_requirements_txt
from runs.suites.importers.schema import MAX_ID, PAPER_ID, SLUG

MAIN, FUNCS, EXPS = "mlrc_main.csv", "mlrc_funcs.csv", "mlrc_exps.csv"
REQUIRED_COLUMNS = {
    MAIN: ("paper_id", "Title"),
    FUNCS: ("paper_id", "func_id", "file", "name", "header_line"),
    EXPS: ("paper_id", "exp_id", "description", "result", "func_dependencies", "solution"),
}
SAMPLE_FILE = re.compile(r"^mlrc_n=(\d+).*\.jsonl$")
# Where a paper's text may be, in order of precedence: our own papers/ files override upstream's.
PAPER_TEXT_PLACES = ("papers/{}.md", "papers/{}.txt", "{}/paper.md", "{}/paper.txt")
URL = re.compile(r"^https?://\S+$")
FIELD_LENGTH = {name: Function._meta.get_field(name).max_length for name in ("file", "name")}
TITLE_LENGTH = Paper._meta.get_field("title").max_length
URL_LENGTH = Paper._meta.get_field("source_url").max_length
SAMPLE_ID_LENGTH = Sample._meta.get_field("sample_id").max_length


@dataclass
class _Row:
    file: str
    line: int
    values: dict

    def at(self, column: str) -> str:
        return f"{self.file}:{self.line}: {column}"

    def get(self, column: str) -> str:
        value = self.values.get(column)
        return value.strip() if isinstance(value, str) else ""


@dataclass
class _Paper:
    paper_id: str
    title: str
    text: str
    code_dir: str
    source_url: str
    environment: dict | None = None


@dataclass
class _Function:
    paper_id: str
    func_id: int
    file: str
    name: str
    description: str
    relevant_paper: str
    line_hint: int


@dataclass
class _Experiment:
    paper_id: str
    exp_id: int
    description: str
    command: str
    answer_format: dict
    gold_result: dict
    depends_on: list[int]


@dataclass
class _Sample:
    paper_id: str
    sample_id: str
    n: int
    func_ids: list[int]


@dataclass
class _Plan:
    papers: dict[str, _Paper] = field(default_factory=dict)
    functions: dict[tuple[str, int], _Function] = field(default_factory=dict)
    experiments: dict[tuple[str, int], _Experiment] = field(default_factory=dict)
    samples: dict[str, _Sample] = field(default_factory=dict)
    # Why a function row that exists in the CSV was not imported, to explain dropped dependencies.
    function_skipped: dict[tuple[str, int], str] = field(default_factory=dict)


def _parse_id(text) -> int | None:
    """A non-negative id from an all-string field ("3", " 3 "), or None."""
    if isinstance(text, int) and not isinstance(text, bool):
        return text if 0 <= text <= MAX_ID else None
    if isinstance(text, str) and re.fullmatch(r"\s*\d+\s*", text) and int(text) <= MAX_ID:
        return int(text)
    return None


def _read_csv(path: Path, *, report: ImportReport, problems: list[str]) -> list[_Row]:
    """The rows of one required CSV file, blank and ragged rows reported and left out."""
    name = path.name
    try:
        # utf-8-sig: spreadsheet exports start with a byte-order mark that would rename the first column.
        text = path.read_text(encoding="utf-8-sig")
    except FileNotFoundError:
        problems.append(f"{name}: file not found in {path.parent}")
        return []
    except (OSError, UnicodeDecodeError) as error:
        problems.append(f"{name}: cannot be read: {error}")
        return []
    reader = csv.reader(io.StringIO(text, newline=""))
    rows: list[_Row] = []
    try:
        header = next(reader, None)
        if header is None:
            problems.append(f"{name}: empty file (expected a header row)")
            return []
        columns = [column.strip() for column in header]
        missing = [column for column in REQUIRED_COLUMNS[name] if column not in columns]
        for column in missing:
            problems.append(f"{name}: line 1: missing required column {column!r} (columns: {', '.join(columns)})")
        duplicated = sorted({column for column in columns if column and columns.count(column) > 1})
        for column in duplicated:
            problems.append(f"{name}: line 1: column {column!r} appears more than once")
        if missing or duplicated:
            return []
        start = reader.line_num + 1
        for record in reader:
            line, start = start, reader.line_num + 1
            if not any(cell.strip() for cell in record):
                report.skip(f"{name}:{line}: row", "blank row")
            elif len(record) != len(columns):
                report.skip(f"{name}:{line}: row", f"has {len(record)} fields but the header has {len(columns)}")
            else:
                rows.append(_Row(name, line, dict(zip(columns, record))))
    except csv.Error as error:
        problems.append(f"{name}: line {reader.line_num}: not valid CSV: {error}")
    return rows


def _read_jsonl(path: Path, *, report: ImportReport, name: str | None = None) -> list[_Row]:
    """The objects of an optional JSON-lines file; unreadable lines are reported and left out.

    `name` is the file as reports name it (default: its file name).
    """
    name = name or path.name
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as error:
        report.skip(f"{name}:0: file", f"cannot be read, ignored: {error}")
        return []
    rows = []
    # Split on "\n" only: str.splitlines would also split on U+2028 inside JSON strings.
    lines = text.split("\n")
    if lines and not lines[-1].strip():
        lines.pop()
    for number, raw in enumerate(lines, start=1):
        if not raw.strip():
            report.skip(f"{name}:{number}: row", "blank line")
            continue
        try:
            # NaN is tolerated here: nothing parsed from a jsonl file is stored as JSON (results
            # there are only compared with the CSV's, never used as gold).
            value = json.loads(raw)
        except ValueError as error:
            report.skip(f"{name}:{number}: row", f"not valid JSON: {error}")
            continue
        if not isinstance(value, dict):
            report.skip(f"{name}:{number}: row", f"expected a JSON object, got {type(value).__name__}")
            continue
        rows.append(_Row(name, number, value))
    return rows


def _parse_result(text: str) -> tuple[dict | None, str | None, bool]:
    """(result, error, was a Python literal). Upstream wrote results with json.dumps or with str(dict)."""
    if not text:
        return None, "empty", False
    literal = False
    try:
        value = json.loads(text, parse_constant=reject_json_constant)
    except ValueError as json_error:
        try:
            value = ast.literal_eval(text)
        except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
            return None, f"neither JSON ({json_error}) nor a Python literal", False
        literal = True
    if not isinstance(value, dict) or not value:
        return None, f"expected a non-empty object of numbers, got {type(value).__name__} {str(value)[:60]!r}", literal
    problem = _non_numeric(value, path="")
    if problem:
        return None, problem, literal
    return _to_json(value), None, literal


def _non_numeric(value, *, path: str) -> str | None:
    """Why `value` is not a tree of finite numbers, or None. Gold values are compared numerically."""
    if isinstance(value, dict):
        for key, item in value.items():
            if not isinstance(key, str):
                return f"key {key!r} is not a string"
            problem = _non_numeric(item, path=f"{path}.{key}" if path else key)
            if problem:
                return problem
        return None
    if isinstance(value, list | tuple):
        for index, item in enumerate(value):
            problem = _non_numeric(item, path=f"{path}[{index}]")
            if problem:
                return problem
        return None
    if isinstance(value, bool) or not isinstance(value, int | float):
        return f"value at {path!r} is {value!r}, not a number"
    if not math.isfinite(value):
        return f"value at {path!r} is {value!r}, not a finite number"
    return None


def _to_json(value):
    """Tuples from a Python literal become lists, as they would come back from the database."""
    if isinstance(value, dict):
        return {key: _to_json(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [_to_json(item) for item in value]
    return value


def _read_paper_text(metadata_dir: Path, paper_id: str, *, row: _Row, report: ImportReport) -> str:
    """The paper's text from the first of PAPER_TEXT_PLACES that has it, or "" after reporting it."""
    places = [place.format(paper_id) for place in PAPER_TEXT_PLACES]
    for place in places:
        path = metadata_dir / place
        if not path.is_file():
            continue
        try:
            data = path.read_bytes()
        except OSError as error:
            report.repair(row.at("text"), f"{place} cannot be read ({error}); looking further")
            continue
        try:
            text = data.decode("utf-8-sig")
        except UnicodeDecodeError as error:
            report.repair(row.at("text"), f"{place} is not valid UTF-8 ({error.reason} at byte {error.start}); "
                          "read with every undecodable byte replaced by U+FFFD")
            text = data.decode("utf-8-sig", errors="replace")
        if "\x00" in text:
            # Postgres text cannot hold NUL, and text extracted from a PDF sometimes has one.
            report.repair(row.at("text"), f"{place} holds {text.count(chr(0))} NUL character(s); removed")
            text = text.replace("\x00", "")
        return text
    report.repair(row.at("text"), f"no paper text: none of {', '.join(places)} in the metadata directory; "
                  "paper text left empty")
    return ""


def _paper_code_dir(metadata_dir: Path, code_dir: Path, paper_id: str) -> Path | None:
    """Paper P's gold code: a checkout at `<code_dir>/P/`, else the `code/` upstream ships in `<metadata_dir>/P/`."""
    checkout, shipped = code_dir / paper_id, metadata_dir / paper_id / "code"
    # With code_dir = metadata_dir, `<code_dir>/P/` is upstream's paper folder, not the checkout.
    if checkout.is_dir() and checkout.resolve() != shipped.parent.resolve():
        return checkout
    return shipped if shipped.is_dir() else None


def _plan_papers(rows: list[_Row], *, metadata_dir: Path, code_dir: Path, plan: _Plan, report: ImportReport):
    first_line: dict[str, int] = {}
    for row in rows:
        paper_id = row.get("paper_id")
        if not PAPER_ID.match(paper_id) or len(paper_id) > 100:
            report.skip(row.at("paper_id"), f"{paper_id!r} is not a usable paper id")
            continue
        if paper_id in first_line:
            report.skip(row.at("row"), f"duplicate of line {first_line[paper_id]} (paper {paper_id}); the first is kept")
            continue
        first_line[paper_id] = row.line
        title = row.get("Title")
        if not title:
            title = paper_id
            report.repair(row.at("Title"), f"empty; the paper id {paper_id} is used as title")
        elif len(title) > TITLE_LENGTH:
            title = title[: TITLE_LENGTH - 1] + "…"
            report.repair(row.at("Title"), f"longer than {TITLE_LENGTH} characters; truncated")
        url = row.get("github")
        if url and not (URL.match(url) and len(url) <= URL_LENGTH):
            report.repair(row.at("github"), f"{url[:80]!r} is not an http(s) URL; left empty")
            url = ""
        text = _read_paper_text(metadata_dir, paper_id, row=row, report=report)
        paper_code = _paper_code_dir(metadata_dir, code_dir, paper_id)
        if paper_code is not None:
            code = str(paper_code.resolve())
        else:
            code = ""
            report.skip(row.at("code"), f"no code directory {code_dir / paper_id} (nor "
                        f"{metadata_dir / paper_id / 'code'}): paper imported without code; "
                        "its functions, experiments and samples are skipped")
        environment = _paper_environment(paper_code, paper_id, report=report) if paper_code is not None else None
        plan.papers[paper_id] = _Paper(paper_id=paper_id, title=title, text=text, code_dir=code, source_url=url,
                                       environment=environment)


# The environment files an upstream paper's code may ship, in the order they are preferred.
ENVIRONMENT_FILES = {
    "requirements.txt": from_requirements_txt,
    "environment.yml": from_environment_yml,
    "environment.yaml": from_environment_yml,
}


def _paper_environment(code_dir: Path, paper_id: str, *, report: ImportReport) -> dict | None:
    """The paper's environment declaration, read from the first environment file its code ships;
    each line that cannot be translated is reported (and then nothing is declared: the paper runs
    with the sandboxes' default until its declaration is written by hand)."""
    for name, translate in ENVIRONMENT_FILES.items():
        path = code_dir / name
        if not path.is_file():
            continue
        try:
            text = path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as error:
            report.skip(f"{paper_id}/{name}", f"cannot be read ({error}); no environment declared")
            return None
        translated = translate(text, source=f"{paper_id}/{name}")
        for problem in translated.problems:
            report.skip(problem.split(":", 1)[0], problem.split(":", 1)[1].strip() if ":" in problem else problem)
        if translated.environment is None:
            report.skip(f"{paper_id}/{name}", "not translated into an environment declaration (see the lines above); "
                        "the paper runs with the sandboxes' default until one is written")
        return translated.environment
    return None


def _row_key(row: _Row, id_column: str, *, plan: _Plan, seen: dict, report: ImportReport):
    """(paper_id, id) of a functions/experiments row, or None after reporting why the row is skipped."""
    paper_id = row.get("paper_id")
    if paper_id not in plan.papers:
        report.skip(row.at("paper_id"), f"paper {paper_id!r} is not in {MAIN}")
        return None
    number = _parse_id(row.values.get(id_column))
    if number is None:
        report.skip(row.at(id_column), f"{row.values.get(id_column)!r} is not a non-negative integer")
        return None
    key = (paper_id, number)
    if key in seen:
        earlier = seen[key]
        same = "identical" if earlier.values == row.values else "conflicting"
        report.skip(row.at("row"), f"{same} duplicate of line {earlier.line} ({paper_id} {id_column} {number}); "
                    "the first is kept")
        return None
    seen[key] = row
    return key


def _compare(row: _Row, stale: _Row | None, columns: list[tuple[str, str]], *, report: ImportReport,
             note: str = "") -> None:
    """Report every field where a stale jsonl copy disagrees with the CSV row (the CSV is kept)."""
    if stale is None:
        return
    for csv_column, jsonl_key in columns:
        ours, theirs = row.get(csv_column), _text(stale.values.get(jsonl_key))
        if theirs and ours and _normalise(csv_column, ours) != _normalise(csv_column, theirs):
            theirs_part, ours_part = (_result_difference(_normalise(csv_column, theirs), _normalise(csv_column, ours))
                                      if csv_column == "result" else None) or _difference(theirs, ours)
            report.skip(stale.at(jsonl_key), f"{theirs_part} disagrees with {row.file}:{row.line} "
                        f"({ours_part}); the CSV value is kept{note}")


def _text(value) -> str:
    if value is None:
        return ""
    return value.strip() if isinstance(value, str) else str(value)


def _normalise(column: str, value: str):
    if column == "func_dependencies":
        return sorted(part.strip() for part in value.split(",") if part.strip())
    if column == "result":
        parsed, _, _ = _parse_result(value)
        return parsed if parsed is not None else value
    if column in ("header_line", "func_id", "exp_id"):
        number = _parse_id(value)
        return number if number is not None else value
    return " ".join(value.split())


def _result_difference(a, b) -> tuple[str, str] | None:
    """The first key whose value differs between two parsed results, as two short excerpts."""
    if not isinstance(a, dict) or not isinstance(b, dict):
        return None
    for key in list(a) + [key for key in b if key not in a]:
        if a.get(key, "<missing>") != b.get(key, "<missing>"):
            return f"{key}={str(a.get(key, '<missing>'))[:40]}", f"{key}={str(b.get(key, '<missing>'))[:40]}"
    return None


def _difference(a: str, b: str, *, width: int = 50) -> tuple[str, str]:
    """Short excerpts of `a` and `b` starting just before their first difference."""
    a, b = " ".join(a.split()), " ".join(b.split())
    index = next((i for i, (x, y) in enumerate(zip(a, b)) if x != y), min(len(a), len(b)))
    start = max(0, index - 10)

    def excerpt(text: str) -> str:
        part = text[start : start + width]
        return repr(("..." if start else "") + part + ("..." if start + width < len(text) else ""))

    return excerpt(a), excerpt(b)


def _plan_functions(rows: list[_Row], *, stale: dict, details: dict, plan: _Plan, report: ImportReport):
    seen: dict = {}
    sources: dict[Path, str | None] = {}
    defs: dict[tuple, int] = {}
    for row in rows:
        key = _row_key(row, "func_id", plan=plan, seen=seen, report=report)
        if key is None:
            continue
        paper_id, func_id = key
        stale_row = stale.get(key)
        _compare(row, stale_row, [("file", "file"), ("name", "name"), ("header_line", "header_line"),
                                  ("relevant_paper", "relevant_paper")], report=report)
        paper = plan.papers[paper_id]
        if not paper.code_dir:
            plan.function_skipped[key] = "its paper has no code"
            report.skip(row.at("row"), f"paper {paper_id} has no code directory")
            continue
        function = _locate(row, Path(paper.code_dir), sources=sources, report=report)
        if function is None:
            plan.function_skipped[key] = f"{FUNCS}:{row.line} was skipped"
            continue
        qualified, def_line = function
        other = defs.get((paper_id, row.get("file"), qualified, def_line))
        if other is not None:
            plan.function_skipped[key] = f"{FUNCS}:{row.line} was skipped"
            report.skip(row.at("name"), f"{qualified} at line {def_line} is already function {other}; "
                        "masking it twice would duplicate code")
            continue
        defs[(paper_id, row.get("file"), qualified, def_line)] = func_id
        description = row.get("description")
        if not description and stale_row is not None:
            description = _text(stale_row.values.get("description"))
        if not description:
            description = details.get(key, "")
        if not description:
            report.repair(row.at("description"), f"none in {FUNCS}, {paper_id}.functions.jsonl, "
                          f"{paper_id}/functions.jsonl or the samples' func_details; left empty, so the masked "
                          "stub gets no docstring")
        relevant = row.get("relevant_paper") or (_text(stale_row.values.get("relevant_paper")) if stale_row else "")
        plan.functions[key] = _Function(paper_id=paper_id, func_id=func_id, file=row.get("file"), name=qualified,
                                        description=description, relevant_paper=relevant, line_hint=def_line)
    for key, stale_row in stale.items():
        if key not in seen:
            report.skip(stale_row.at("row"), f"function {key[1]} of {key[0]} has no usable row in {FUNCS} "
                        "(the CSV is the source of truth); ignored")


def _locate(row: _Row, code_dir: Path, *, sources: dict, report: ImportReport) -> tuple[str, int] | None:
    """(qualified name, def line) of a functions row in its paper's code, or None after reporting why not."""
    relative, name = row.get("file"), row.get("name")
    if len(relative) > FIELD_LENGTH["file"]:
        report.skip(row.at("file"), f"longer than {FIELD_LENGTH['file']} characters")
        return None
    path, error = resolve_code_file(code_dir, relative)
    if error:
        report.skip(row.at("file"), error)
        return None
    if not name:
        report.skip(row.at("name"), "empty")
        return None
    if path not in sources:
        try:
            sources[path] = path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as read_error:
            sources[path] = None
            report.skip(row.at("file"), f"cannot be read: {read_error}")
            return None
    source = sources[path]
    if source is None:
        report.skip(row.at("file"), "cannot be read (see above)")
        return None
    raw_hint = row.get("header_line")
    hint = _parse_id(raw_hint) if raw_hint else None
    if raw_hint and not hint:
        report.repair(row.at("header_line"), f"{raw_hint!r} is not a line number; ignored")
        hint = None
    span = _span(row, report=report)
    try:
        location = locate_function(source, name, line_hint=hint, span=span)
    except FunctionNotFound as not_found:
        renamed = _renamed_at_hint(source, name, hint)
        if renamed is None:
            report.skip(row.at("name"), f"{relative}: {not_found}")
            return None
        report.repair(row.at("name"), f"no function `{name}` in {relative}, but `{renamed}` is defined at the hinted "
                      f"line {hint} and its name differs only in underscores or case; {renamed} stored")
        location = locate_function(source, renamed, line_hint=hint)
    except (MaskingError, SyntaxError, ValueError) as locate_error:
        report.skip(row.at("name"), f"{relative}: {locate_error}")
        return None
    if len(location.qualified_name) > FIELD_LENGTH["name"]:
        report.skip(row.at("name"), f"qualified name longer than {FIELD_LENGTH['name']} characters")
        return None
    if hint is not None and hint != location.def_line:
        report.repair(row.at("header_line"), hint_repair(location, hint, span=span))
    elif not raw_hint:
        found_by = f"the row's span {span[0]}-{span[1]}" if location.rule == LocationRule.SPAN else "name"
        report.repair(row.at("header_line"), f"empty; {location.qualified_name} found by {found_by} at line "
                      f"{location.def_line}; stored {location.def_line}")
    return location.qualified_name, location.def_line


def _renamed_at_hint(source: str, name: str, hint: int | None) -> str | None:
    """The qualified name of the one definition on the hinted line whose name is `name` spelled with
    other underscores or case (upstream's `prepare_datalist` for `prepare_data_list`), or None.

    Two pieces of evidence must agree, the exact def line and the same letters; a similar name alone
    is only suggested, never taken. A qualified `name` keeps its qualifier: `A.prepare_datalist` is
    not `B.prepare_data_list` (its dotted parts, so spelled, must end the definition's)."""
    if hint is None:
        return None

    def letters(text: str) -> list[str]:
        return [part.replace("_", "").lower() for part in text.split(".")]

    wanted = letters(name)
    found = [qualified for qualified, line in list_functions(source)
             if line == hint and letters(qualified)[-len(wanted):] == wanted]
    return found[0] if len(found) == 1 else None


def _span(row: _Row, *, report: ImportReport) -> tuple[int, int] | None:
    """The row's line_start..line_end (upstream's lines of the body), or None; unusable values are reported."""
    start, end = row.get("line_start"), row.get("line_end")
    if not start and not end:
        return None
    for column, value in (("line_start", start), ("line_end", end)):
        if not _parse_id(value):
            problem = f"{value!r} is not a line number" if value else "empty while the other end is given"
            report.repair(row.at(column), f"{problem}; the row's span is not used")
            return None
    if int(start) > int(end):
        report.repair(row.at("line_end"), f"{int(end)} is before line_start {int(start)}; the row's span is not used")
        return None
    return int(start), int(end)


def _plan_experiments(rows: list[_Row], *, stale: dict, plan: _Plan, report: ImportReport):
    seen: dict = {}
    commands = {}
    for row in rows:
        commands.setdefault((row.get("paper_id"), row.get("solution")), row.get("exp_id"))

    def renumbered(key, stale_row) -> str:
        # Upstream dropped experiments and renumbered the rest in the CSV but not in the jsonl;
        # saying so explains a wall of disagreements.
        match = commands.get((key[0], _text(stale_row.values.get("solution"))))
        if match is None or _parse_id(match) == key[1]:
            return ""
        return f" (its command is that of {EXPS} exp_id {match}: the jsonl numbering is stale)"

    for row in rows:
        key = _row_key(row, "exp_id", plan=plan, seen=seen, report=report)
        if key is None:
            continue
        paper_id, exp_id = key
        stale_row = stale.get(key)
        if stale_row is not None:
            _compare(row, stale_row, [("description", "description"), ("solution", "solution"),
                                      ("func_dependencies", "func_dependencies"), ("result", "result")],
                     report=report, note=renumbered(key, stale_row))
        if not plan.papers[paper_id].code_dir:
            report.skip(row.at("row"), f"paper {paper_id} has no code directory")
            continue
        texts = {}
        for column in ("description", "solution"):
            texts[column] = row.get(column)
            if not texts[column] and stale_row is not None and _text(stale_row.values.get(column)):
                texts[column] = _text(stale_row.values.get(column))
                report.repair(row.at(column), f"empty; filled from {stale_row.file}:{stale_row.line}")
        if not texts["description"] or not texts["solution"]:
            missing = "description" if not texts["description"] else "solution"
            report.skip(row.at(missing), "empty" + (" (no command to run)" if missing == "solution" else ""))
            continue
        result, error, literal = _parse_result(row.get("result"))
        if error:
            report.skip(row.at("result"), f"{error}; experiment skipped (stale jsonl results are never used as gold)")
            continue
        if literal:
            report.repair(row.at("result"), "a Python literal, not JSON; parsed with ast.literal_eval")
        depends_on = _dependencies(row, paper_id, plan=plan, report=report)
        if not depends_on:
            report.skip(row.at("func_dependencies"), "no importable function dependencies remain; experiment skipped")
            continue
        plan.experiments[key] = _Experiment(paper_id=paper_id, exp_id=exp_id, description=texts["description"],
                                            command=texts["solution"], answer_format=answer_format_of(result),
                                            gold_result=result, depends_on=depends_on)
    for key, stale_row in stale.items():
        if key not in seen:
            report.skip(stale_row.at("row"), f"experiment {key[1]} of {key[0]} has no usable row in {EXPS} "
                        f"(the CSV is the source of truth); ignored{renumbered(key, stale_row)}")


def _dependencies(row: _Row, paper_id: str, *, plan: _Plan, report: ImportReport) -> list[int]:
    kept = []
    for token in row.get("func_dependencies").split(","):
        token = token.strip()
        if not token:
            continue
        func_id = _parse_id(token)
        if func_id is None:
            report.repair(row.at("func_dependencies"), f"{token!r} is not a function id; dropped")
        elif (paper_id, func_id) in plan.functions:
            if func_id not in kept:
                kept.append(func_id)
        elif (paper_id, func_id) in plan.function_skipped:
            report.repair(row.at("func_dependencies"), f"function {func_id} is not imported "
                          f"({plan.function_skipped[(paper_id, func_id)]}); dropped")
        else:
            report.repair(row.at("func_dependencies"), f"function {func_id} is not in {FUNCS}; dropped")
    return sorted(kept)


def _sample_ids(value) -> list[int] | None:
    if isinstance(value, int) and not isinstance(value, bool):
        value = [value]
    elif isinstance(value, str):
        value = [part for part in value.split(",") if part.strip()]
    if not isinstance(value, list):
        return None
    ids = [_parse_id(item) for item in value]
    return None if any(item is None for item in ids) else ids


def _plan_samples(files: list[tuple[int, list[_Row]]], *, plan: _Plan, report: ImportReport):
    first: dict[str, _Row] = {}
    for declared_n, rows in files:
        for row in rows:
            paper_id = _text(row.values.get("paper_id"))
            if paper_id not in plan.papers:
                report.skip(row.at("paper_id"), f"paper {paper_id!r} is not in {MAIN}")
                continue
            ids = _sample_ids(row.values.get("func_ids"))
            if not ids:
                report.skip(row.at("func_ids"), f"{row.values.get('func_ids')!r} is not a list of function ids")
                continue
            if len(set(ids)) != len(ids):
                report.skip(row.at("func_ids"), f"{row.values.get('func_ids')!r} names a function twice")
                continue
            name = sample_id(paper_id, ids)
            if name in first:
                report.skip(row.at("row"), f"duplicate of {first[name].file}:{first[name].line} (sample {name})")
                continue
            first[name] = row
            if not plan.papers[paper_id].code_dir:
                report.skip(row.at("row"), f"paper {paper_id} has no code directory")
                continue
            missing = [i for i in ids if (paper_id, i) not in plan.functions]
            if missing:
                reasons = "; ".join(f"{i}: {plan.function_skipped.get((paper_id, i), f'not in {FUNCS}')}" for i in missing)
                report.skip(row.at("func_ids"), f"masks function(s) that are not imported ({reasons})")
                continue
            if len(name) > SAMPLE_ID_LENGTH:
                report.skip(row.at("func_ids"), f"sample id longer than {SAMPLE_ID_LENGTH} characters")
                continue
            if len(ids) != declared_n:
                report.repair(row.at("func_ids"), f"the file name says n={declared_n} but the sample masks "
                              f"{len(ids)} function(s); stored n={len(ids)}")
            _check_sample_results(row, paper_id, ids, plan=plan, report=report)
            plan.samples[name] = _Sample(paper_id=paper_id, sample_id=name, n=len(ids), func_ids=sorted(ids))


def _check_sample_results(row: _Row, paper_id: str, ids: list[int], *, plan: _Plan, report: ImportReport):
    """Report where a sample's copy of the gold ("Experiment 1..k") disagrees with mlrc_exps.csv.

    Upstream renumbers a sample's experiments 1..k in exp_id order; ours are derived from the
    dependencies, so this only reports, it never changes what is imported.
    """
    results = row.values.get("results")
    if not isinstance(results, dict):
        return
    ours = [e for (p, _), e in sorted(plan.experiments.items()) if p == paper_id and set(e.depends_on) & set(ids)]
    if len(results) != len(ours):
        report.skip(row.at("results"), f"{len(results)} experiment(s) but {len(ours)} imported experiment(s) of "
                    f"{paper_id} depend on functions {sorted(ids)}; the CSV experiments are used")
        return
    for index, experiment in enumerate(ours, start=1):
        theirs = results.get(f"Experiment {index}")
        if theirs != experiment.gold_result:
            report.skip(row.at(f"results.Experiment {index}"), f"disagrees with the gold of {EXPS} {paper_id} "
                        f"exp_id {experiment.exp_id}; the CSV gold is kept")


def _collect_details(files: list[tuple[int, list[_Row]]]) -> dict[tuple[str, int], str]:
    """Function descriptions found in the samples' func_details (the CSV has no description column)."""
    found = {}
    for _, rows in files:
        for row in rows:
            details = row.values.get("func_details")
            for detail in details if isinstance(details, list) else []:
                if not isinstance(detail, dict):
                    continue
                func_id = _parse_id(detail.get("func_id"))
                description = _text(detail.get("description"))
                paper_id = _text(detail.get("paper_id") or row.values.get("paper_id"))
                if func_id is not None and description:
                    found.setdefault((paper_id, func_id), description)
    return found


def _stale_rows(metadata_dir: Path, suffix: str, id_column: str, *, report: ImportReport) -> dict:
    """The rows of every `<paper>.<suffix>` file, then of upstream's `<paper>/<suffix>`, by (paper_id, id)."""
    rows = {}
    files = [(path.name[: -len(f".{suffix}")], path) for path in sorted(metadata_dir.glob(f"*.{suffix}"))]
    files += [(path.parent.name, path) for path in sorted(metadata_dir.glob(f"*/{suffix}"))]
    for paper_id, path in files:
        for row in _read_jsonl(path, report=report, name=path.relative_to(metadata_dir).as_posix()):
            number = _parse_id(row.values.get(id_column))
            if _text(row.values.get("paper_id")) not in ("", paper_id):
                report.skip(row.at("paper_id"), f"{row.values.get('paper_id')!r} in the file of paper {paper_id}; ignored")
            elif number is None:
                report.skip(row.at(id_column), f"{row.values.get(id_column)!r} is not a non-negative integer; ignored")
            elif (paper_id, number) in rows:
                report.skip(row.at("row"), f"duplicate {id_column} {number}; ignored")
            else:
                rows[(paper_id, number)] = row
    return rows


def _write(plan: _Plan, *, suite_name: str, metadata_dir: Path, code_dir: Path, report: ImportReport) -> Suite:
    suite = upsert(Suite, lookup={"name": suite_name}, report=report, kind="suite",
                   values={"version": "", "source_format": Suite.Format.UPSTREAM, "gold_root": str(code_dir.resolve()),
                           "description": f"Upstream AutoExperiment metadata imported from {metadata_dir.resolve()}"})
    for paper_plan in plan.papers.values():
        paper = upsert(Paper, lookup={"suite": suite, "paper_id": paper_plan.paper_id}, report=report, kind="paper",
                       values={"title": paper_plan.title, "text": paper_plan.text, "code_dir": paper_plan.code_dir,
                               "source_url": paper_plan.source_url, "environment": paper_plan.environment})
        functions = {}
        for (paper_id, func_id), spec in plan.functions.items():
            if paper_id == paper.paper_id:
                functions[func_id] = upsert(
                    Function, lookup={"paper": paper, "func_id": func_id}, report=report, kind="function",
                    values={"file": spec.file, "name": spec.name, "description": spec.description,
                            "relevant_paper": spec.relevant_paper, "line_hint": spec.line_hint},
                )
        delete_gone_functions(paper=paper, keep=set(functions), report=report, where=f"{FUNCS}: {paper.paper_id}")
        kept_experiments = set()
        for (paper_id, exp_id), spec in plan.experiments.items():
            if paper_id != paper.paper_id:
                continue
            kept_experiments.add(exp_id)
            # timeout_seconds and tolerances are not in upstream's data: left as set here or in the admin.
            experiment, created = upsert_tracked(
                Experiment, lookup={"paper": paper, "exp_id": exp_id}, report=report, kind="experiment",
                values={"description": spec.description, "command": spec.command,
                        "answer_format": spec.answer_format, "gold_result": spec.gold_result},
            )
            relation_sync(experiment.dependencies, [functions[i] for i in spec.depends_on], created=created,
                          report=report, kind="experiment dependencies")
        delete_gone_experiments(paper=paper, keep=kept_experiments, report=report, where=f"{EXPS}: {paper.paper_id}")
        for spec in plan.samples.values():
            if spec.paper_id != paper.paper_id:
                continue
            sample, created = upsert_tracked(Sample, lookup={"paper": paper, "sample_id": spec.sample_id},
                                             values={"n": spec.n}, report=report, kind="sample")
            relation_sync(sample.functions, [functions[i] for i in spec.func_ids], created=created,
                          report=report, kind="sample functions")
    delete_gone_papers(suite=suite, keep=set(plan.papers), report=report, where=f"{MAIN}")
    return suite


def import_upstream(*, metadata_dir: Path, code_dir: Path, suite_name: str = "upstream") -> tuple[Suite, ImportReport]:
    """Import upstream metadata from `metadata_dir`, with paper P's gold code at `<code_dir>/P/`.

    Sound rows are imported and every skipped or repaired row is in the report; only whole-file
    problems (a required file or column missing, a directory that does not exist) raise
    SuiteFormatError, before anything is written. The writes are one transaction, and importing
    the same data twice changes nothing the second time.
    """
    metadata_dir, code_dir = Path(metadata_dir), Path(code_dir)
    problems = []
    if not SLUG.match(suite_name) or len(suite_name) > 100:
        problems.append(f"suite name {suite_name!r} is not a slug (letters, digits, '-' and '_')")
    if not metadata_dir.is_dir():
        raise SuiteFormatError(f"{metadata_dir}: metadata directory not found")
    if not code_dir.is_dir():
        problems.append(f"{code_dir}: code directory not found (paper P's code is expected at {code_dir}/P/)")
    report = ImportReport()
    tables = {name: _read_csv(metadata_dir / name, report=report, problems=problems) for name in REQUIRED_COLUMNS}
    existing = Suite.objects.filter(name=suite_name).exclude(source_format=Suite.Format.UPSTREAM).first()
    if existing is not None:
        problems.append(f"a suite named {suite_name!r} was imported from another format ({existing.source_format})")
    if problems:
        raise SuiteFormatError("the upstream metadata cannot be imported:\n" + "\n".join(f"  {p}" for p in problems))

    sample_files = []
    for path in sorted(metadata_dir.glob("mlrc_n=*.jsonl")):
        match = SAMPLE_FILE.match(path.name)
        if match is None:
            report.skip(f"{path.name}:0: file", "name does not start with mlrc_n=<number>; ignored")
            continue
        sample_files.append((int(match.group(1)), _read_jsonl(path, report=report)))

    plan = _Plan()
    _plan_papers(tables[MAIN], metadata_dir=metadata_dir, code_dir=code_dir, plan=plan, report=report)
    _plan_functions(tables[FUNCS], stale=_stale_rows(metadata_dir, "functions.jsonl", "func_id", report=report),
                    details=_collect_details(sample_files), plan=plan, report=report)
    _plan_experiments(tables[EXPS], stale=_stale_rows(metadata_dir, "experiments.jsonl", "exp_id", report=report),
                      plan=plan, report=report)
    _plan_samples(sample_files, plan=plan, report=report)
    with transaction.atomic():
        suite = _write(plan, suite_name=suite_name, metadata_dir=metadata_dir, code_dir=code_dir, report=report)
        mark_suite_changed(suite, report)
    return suite, report
