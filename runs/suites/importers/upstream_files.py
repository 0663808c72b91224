"""Reading the upstream release's files for `upstream.import_upstream`: the required CSVs and the
optional JSON-lines files as rows that know where they are (`Row.at` gives `<file>:<line>: <column>`
for reports), upstream's results (JSON or a Python literal), and the cross-check of the stale
jsonl rows against the CSVs, which stay the source of truth.
"""

import ast
import csv
import io
import json
import math
import re
from dataclasses import dataclass
from pathlib import Path

from runs.suites.importers.common import ImportReport, reject_json_constant
from runs.suites.importers.schema import MAX_ID

MAIN, FUNCS, EXPS = "mlrc_main.csv", "mlrc_funcs.csv", "mlrc_exps.csv"
REQUIRED_COLUMNS = {
    MAIN: ("paper_id", "Title"),
    FUNCS: ("paper_id", "func_id", "file", "name", "header_line"),
    EXPS: ("paper_id", "exp_id", "description", "result", "func_dependencies", "solution"),
}


@dataclass
class Row:
    """One row of a CSV or JSON-lines file and where it is (`at` names a field of it for reports)."""

    file: str
    line: int
    values: dict

    def at(self, column: str) -> str:
        return f"{self.file}:{self.line}: {column}"

    def get(self, column: str) -> str:
        value = self.values.get(column)
        return value.strip() if isinstance(value, str) else ""


def parse_id(text) -> int | None:
    """A non-negative id from an all-string field ("3", " 3 "), or None."""
    if isinstance(text, int) and not isinstance(text, bool):
        return text if 0 <= text <= MAX_ID else None
    if isinstance(text, str) and re.fullmatch(r"\s*\d+\s*", text) and int(text) <= MAX_ID:
        return int(text)
    return None


def read_csv(path: Path, *, report: ImportReport, problems: list[str]) -> list[Row]:
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
    rows: list[Row] = []
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
                rows.append(Row(name, line, dict(zip(columns, record))))
    except csv.Error as error:
        problems.append(f"{name}: line {reader.line_num}: not valid CSV: {error}")
    return rows


def read_jsonl(path: Path, *, report: ImportReport, name: str | None = None) -> list[Row]:
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
        rows.append(Row(name, number, value))
    return rows


def parse_result(text: str) -> tuple[dict | None, str | None, bool]:
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


def text_of(value) -> str:
    """A cell or a JSON value as stripped text ("" for None)."""
    if value is None:
        return ""
    return value.strip() if isinstance(value, str) else str(value)


def compare_with_stale(row: Row, stale: Row | None, columns: list[tuple[str, str]], *, report: ImportReport,
                       note: str = "") -> None:
    """Report every field where a stale jsonl copy disagrees with the CSV row (the CSV is kept)."""
    if stale is None:
        return
    for csv_column, jsonl_key in columns:
        ours, theirs = row.get(csv_column), text_of(stale.values.get(jsonl_key))
        if theirs and ours and _normalise(csv_column, ours) != _normalise(csv_column, theirs):
            theirs_part, ours_part = (_result_difference(_normalise(csv_column, theirs), _normalise(csv_column, ours))
                                      if csv_column == "result" else None) or _difference(theirs, ours)
            report.skip(stale.at(jsonl_key), f"{theirs_part} disagrees with {row.file}:{row.line} "
                        f"({ours_part}); the CSV value is kept{note}")


def _normalise(column: str, value: str):
    if column == "func_dependencies":
        return sorted(part.strip() for part in value.split(",") if part.strip())
    if column == "result":
        parsed, _, _ = parse_result(value)
        return parsed if parsed is not None else value
    if column in ("header_line", "func_id", "exp_id"):
        number = parse_id(value)
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


def stale_rows(metadata_dir: Path, suffix: str, id_column: str, *, report: ImportReport) -> dict:
    """The rows of every `<paper>.<suffix>` file, then of upstream's `<paper>/<suffix>`, by (paper_id, id)."""
    rows = {}
    files = [(path.name[: -len(f".{suffix}")], path) for path in sorted(metadata_dir.glob(f"*.{suffix}"))]
    files += [(path.parent.name, path) for path in sorted(metadata_dir.glob(f"*/{suffix}"))]
    for paper_id, path in files:
        for row in read_jsonl(path, report=report, name=path.relative_to(metadata_dir).as_posix()):
            number = parse_id(row.values.get(id_column))
            if text_of(row.values.get("paper_id")) not in ("", paper_id):
                report.skip(row.at("paper_id"), f"{row.values.get('paper_id')!r} in the file of paper {paper_id}; ignored")
            elif number is None:
                report.skip(row.at(id_column), f"{row.values.get(id_column)!r} is not a non-negative integer; ignored")
            elif (paper_id, number) in rows:
                report.skip(row.at("row"), f"duplicate {id_column} {number}; ignored")
            else:
                rows[(paper_id, number)] = row
    return rows
