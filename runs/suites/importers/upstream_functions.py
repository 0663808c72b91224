"""Finding an upstream functions row's function in its paper's code, for `upstream.import_upstream`.

Upstream gives bare names such as `__call__`, a header_line that may be stale or point at the class
statement, and the body's line_start..line_end: these are only evidence to choose among same-named
defs (the rules of `runs.benchmark.locating.locate_function`), each repair reported with the rule
that made it. A row the evidence cannot resolve is skipped as ambiguous, never guessed.
"""

from pathlib import Path

from runs.benchmark.locating import FunctionNotFound, LocationRule, MaskingError, list_functions, locate_function
from runs.models import Function
from runs.suites.importers.common import ImportReport, hint_repair, resolve_code_file
from runs.suites.importers.upstream_files import Row, parse_id

FIELD_LENGTH = {name: Function._meta.get_field(name).max_length for name in ("file", "name")}


def locate_row_function(row: Row, code_dir: Path, *, sources: dict, report: ImportReport) -> tuple[str, int] | None:
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
    hint = parse_id(raw_hint) if raw_hint else None
    if raw_hint and not hint:
        report.repair(row.at("header_line"), f"{raw_hint!r} is not a line number; ignored")
        hint = None
    span = _span(row, report=report)
    try:
        location = locate_function(source, name, line_hint=hint, span=span)
    except FunctionNotFound as not_found:
        renamed = renamed_at_hint(source, name, hint)
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


def renamed_at_hint(source: str, name: str, hint: int | None) -> str | None:
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


def _span(row: Row, *, report: ImportReport) -> tuple[int, int] | None:
    """The row's line_start..line_end (upstream's lines of the body), or None; unusable values are reported."""
    start, end = row.get("line_start"), row.get("line_end")
    if not start and not end:
        return None
    for column, value in (("line_start", start), ("line_end", end)):
        if not parse_id(value):
            problem = f"{value!r} is not a line number" if value else "empty while the other end is given"
            report.repair(row.at(column), f"{problem}; the row's span is not used")
            return None
    if int(start) > int(end):
        report.repair(row.at("line_end"), f"{int(end)} is before line_start {int(start)}; the row's span is not used")
        return None
    return int(start), int(end)
