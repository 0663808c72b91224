"""Reading an uploaded submission and checking all of it before anything is stored.

Format `autoexperiment.submission/1` (also shown on the upload page):

- A JSONL file, UTF-8, one JSON object per line; blank lines are ignored.
- The first line is the header, every other line one attempt: their fields are the pydantic models
  of runs.submissions.schema, which the upload page documents and every line is checked with; a
  file in an earlier version of the format is upgraded line by line first (`schema.UPGRADES`).
  In a zip, a record's `trajectory_file` may name a member instead of giving `trajectory`.
- (sample_id, attempt_index) is unique; each sample's indexes run 0..k-1 without gaps.
- A zip holds exactly one `results.jsonl` at its root and optional trajectory members, within the
  bounds runs.submissions.archive checks before any member is parsed.
- Each final patch and trajectory within the limits of runs.limits (steps, bytes per text field
  and per step, files and diff lines per step, diff lines per trajectory, patch bytes and lines),
  so that its replay is bounded; a problem names the step and the limit.

The story, in order: the zip (`archive`), the lines' JSON (`jsonl`), each line through its model
and the checks of its patch and trajectory (here), trajectory members (here), the records together
and against the database (`cross_checks`).

`submission_validate` returns a `ValidatedSubmission` or raises `SubmissionInvalid` listing every
problem as "line N: field: message" (zip members: "member: message"), or `SubmissionTooLarge`
(runs.submissions.problems).
"""
from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from typing import Any

from runs.agents import foreign
from runs.agents.trajectory import FORMAT as TRAJECTORY_FORMAT
from runs.agents.trajectory import Trajectory, TrajectoryFormatError
from runs.benchmark.json_objects import read_object
from runs.benchmark.patch_parsing import parse_patch
from runs.benchmark.patches import PatchError
from runs.benchmark.text import json_type
from runs.limits import human_bytes, patch_problem, step_count_problem, trajectory_limits, trajectory_problems
from runs.submissions.archive import RESULTS_MEMBER, is_zip, read_zip
from runs.submissions.cross_checks import RecordKey, attempt_indexes_check, database_check
from runs.submissions.jsonl import JsonLine, json_lines, json_member
from runs.submissions.problems import Problems, SubmissionInvalid, SubmissionTooLarge
from runs.submissions.schema import (
    FORMAT,
    AttemptRecord,
    SubmissionHeader,
    declared_version,
    field_problems,
    upgraded,
)
from runs.submissions.upload_limits import max_patch_bytes, max_trajectory_bytes, max_upload_bytes

_HEADER_SHAPE = '{"type": "header", "suite": ..., "model": ..., "agent": ..., "contact": ...}'


# --- what reading an upload gives ----------------------------------------------------------------


@dataclass(frozen=True)
class OriginalTrajectory:
    """Another tool's trajectory as the uploader sent it (a zip member's bytes, or an inline
    object as JSON), kept for download once converted (runs.models.TrajectorySource)."""

    filename: str
    content: bytes


@dataclass
class RecordLine:
    """A record that passed every check, and where it was. `record.final_patch` and
    `record.trajectory` are as checked (a trajectory normalised, another tool's converted, one
    from a zip member read in); `original_trajectory` is the file a converted one came from."""

    line: int
    record: AttemptRecord
    original_trajectory: OriginalTrajectory | None = None


@dataclass
class ParsedLines:
    """What the lines of results.jsonl held: the header if it is sound, the sound records, and the
    keys of every record with a sound sample id (for the checks of all records together)."""

    header: SubmissionHeader | None = None
    header_line: int = 1
    version: str = FORMAT  # the format the header names; every line is upgraded from it
    records: list[RecordLine] = field(default_factory=list)
    keys: list[RecordKey] = field(default_factory=list)
    record_lines: int = 0  # every line after the header, sound or not


@dataclass
class ValidatedSubmission:
    """An upload with no problems, and what its records refer to in the database."""

    header: SubmissionHeader
    records: list[RecordLine]
    filename: str
    size: int
    sha256: str
    suite: Any = None  # runs.models.Suite
    samples: dict[str, Any] = field(default_factory=dict)  # sample_id -> Sample
    experiments: dict[str, list] = field(default_factory=dict)  # sample_id -> [Experiment]


# --- lines ---------------------------------------------------------------------------------------


def _check_header(value: dict, line: int, problems: Problems, member: str | None) -> SubmissionHeader | None:
    read = read_object(SubmissionHeader, value)
    for name, message in field_problems(SubmissionHeader, read.errors):
        problems.add(message, line=line, field=name, member=member)
    return read.instance


def _check_record(
    value: Any, line: int, problems: Problems, member: str | None, *, in_zip: bool
) -> tuple[RecordLine | None, RecordKey | None]:
    if not isinstance(value, dict):
        problems.add(f"a record must be a JSON object, got {json_type(value)}", line=line, field="record", member=member)
        return None, None
    found: list[str] = []

    def problem(field_name: str, message: str) -> None:
        found.append(message)
        problems.add(message, line=line, field=field_name, member=member)

    both = "trajectory" in value and "trajectory_file" in value
    if both:  # which one was meant is unknown, so neither is read
        value = {name: item for name, item in value.items() if name not in ("trajectory", "trajectory_file")}
    read = read_object(AttemptRecord, value, context={"in_zip": in_zip})
    for name, message in field_problems(AttemptRecord, read.errors):
        problem(name, message)
    # The sound fields are checked further even when others are not, so every problem is listed.
    fields = read.values
    sample_id = fields.get("sample_id")
    patch = _check_patch(fields["final_patch"], problem) if "final_patch" in fields else None
    trajectory = None
    if both:
        problem("trajectory_file", "give either trajectory or trajectory_file, not both")
    elif fields.get("trajectory") is not None:
        trajectory = check_trajectory(fields["trajectory"], sample_id, report=lambda message: problem("trajectory", message))
    original = None
    if trajectory is not None and _is_foreign_json(fields["trajectory"]):
        original = OriginalTrajectory(f"line-{line}-trajectory.json", json.dumps(fields["trajectory"]).encode())
    key = RecordKey(line, sample_id, fields.get("attempt_index")) if sample_id is not None else None
    if found or read.instance is None:
        return None, key
    checked = read.instance.model_copy(update={"final_patch": patch, "trajectory": trajectory})
    return RecordLine(line, checked, original), key


def _check_patch(patch: str, problem) -> str | None:
    """A final patch the schema accepted, checked against the limits and parsed; None after `problem`."""
    limit = max_patch_bytes()
    size = len(patch.encode("utf-8", errors="surrogatepass"))
    if size > limit:
        problem(
            "final_patch",
            f"is {human_bytes(size)} ({size:,} bytes); one patch may hold at most {human_bytes(limit)} ({limit:,} bytes)",
        )
        return None
    lines_problem = patch_problem(patch, trajectory_limits())
    if lines_problem:
        problem("final_patch", lines_problem)
        return None
    if "\x00" in patch:
        problem("final_patch", "contains a NUL character")
        return None
    if not patch.strip():
        return ""
    # The same parser re-execution uses: what passes here is understood there, line for line.
    try:
        parse_patch(patch)
    except PatchError as error:
        problem("final_patch", str(error))
        return None
    return patch


def check_trajectory(value: Any, sample_id: str | None, *, report) -> dict | None:
    """A trajectory object in our versioned format, normalised, or None after `report(message)`.
    Another tool's JSON trajectory (runs.agents.foreign, detected by content) is converted first."""
    if _is_foreign_json(value):
        try:
            value = foreign.detect_and_convert(b"", "", value).trajectory
        except foreign.ForeignTrajectoryError as error:
            report(str(error))
            return None
    try:
        size = len(json.dumps(value, allow_nan=True))
    except (TypeError, ValueError, RecursionError) as error:
        report(f"cannot be serialised: {error}")
        return None
    if size > max_trajectory_bytes():
        report(f"is {human_bytes(size)} of JSON; one trajectory may hold at most {human_bytes(max_trajectory_bytes())}")
        return None
    limits = trajectory_limits()
    steps = value.get("steps") if isinstance(value, dict) else None
    if isinstance(steps, list) and step_count_problem(len(steps), limits):
        # Refused before 250,000 small steps become 250,000 objects.
        report(step_count_problem(len(steps), limits))
        return None
    try:
        trajectory = Trajectory.from_dict(value)
        data = trajectory.to_dict()
    except TrajectoryFormatError as error:
        report(f"not a valid trajectory: {error}")
        return None
    except (TypeError, AttributeError, ValueError, RecursionError) as error:
        report(f"not a valid trajectory: {type(error).__name__}: {error}")
        return None
    header_sample = trajectory.header.sample_id
    if sample_id is not None and header_sample and header_sample != sample_id:
        report(f"belongs to sample {header_sample!r} (its header's sample_id), not to {sample_id!r}")
        return None
    if not isinstance(trajectory.steps, list):
        report("not a valid trajectory: steps must be a list")
        return None
    over = trajectory_problems(trajectory, limits)
    for message in over:
        report(message)
    if over:
        return None
    if sample_id is not None and not header_sample:
        data["header"]["sample_id"] = sample_id  # it is the record's: stored and shown as such
    return data


def _is_foreign_json(value: Any) -> bool:
    """Whether a parsed JSON trajectory is another tool's (converted by check_trajectory), not ours."""
    return isinstance(value, dict) and value.get("format") != TRAJECTORY_FORMAT and foreign.detect(b"", value) is not None


def parse_jsonl(data: bytes, problems: Problems, *, member: str | None, in_zip: bool) -> ParsedLines:
    """The header and the records of a JSONL file: every line checked, every problem reported."""
    parsed = ParsedLines()
    first = True
    for line in json_lines(data, problems, member=member):
        is_first, first = first, False
        if is_first:
            parsed.header_line = line.number
            if not line.decoded or not _read_first_line(line, parsed, problems, member):
                continue
        parsed.record_lines += 1
        if not line.decoded:
            continue
        value = upgraded(line.value, version=parsed.version) if isinstance(line.value, dict) else line.value
        record, key = _check_record(value, line.number, problems, member, in_zip=in_zip)
        if record is not None:
            parsed.records.append(record)
        if key is not None:
            parsed.keys.append(key)
    return parsed


def _read_first_line(line: JsonLine, parsed: ParsedLines, problems: Problems, member: str | None) -> bool:
    """Read the first line as the header; True when it is a record after all (the header missing,
    which is reported), to be read as one."""
    value = line.value
    if isinstance(value, dict) and value.get("type") == "header":
        parsed.version = declared_version(value)
        parsed.header = _check_header(upgraded(value, version=parsed.version), line.number, problems, member)
        return False
    if not isinstance(value, dict):
        problems.add(f"the header must be a JSON object, got {json_type(value)}", line=line.number, field="header", member=member)
        return False
    if "sample_id" not in value:
        problems.add(f"the first line must be the header {_HEADER_SHAPE}", line=line.number, field="type", member=member)
        return False
    problems.add(
        f"the header is missing: the first line must be {_HEADER_SHAPE}, and this line is a record",
        line=line.number, field="type", member=member,
    )
    return True


# --- trajectory members of a zip -----------------------------------------------------------------


def _resolve_trajectory_files(
    records: list[RecordLine], trajectories: dict[str, bytes], problems: Problems, member: str | None
) -> None:
    """Read each member a record names in `trajectory_file` into its `trajectory`; every member
    must be named by exactly one record."""
    referenced: dict[str, int] = {}  # member -> the line of the record that names it
    for item in records:
        name = item.record.trajectory_file
        if name is None:
            continue
        if name in referenced:
            # One member for many records would be parsed and stored once per record: a few
            # kilobytes of archive could then stand for gigabytes, past every size limit.
            problems.add(
                f"names {name!r}, which line {referenced[name]} names already; each record needs a trajectory file of its own",
                line=item.line, field="trajectory_file", member=member,
            )
            continue
        referenced[name] = item.line
        if name not in trajectories:
            problems.add(f"names {name!r}, which is not in the archive", line=item.line, field="trajectory_file", member=member)
            continue
        _read_trajectory_member(item, name, trajectories[name], problems)
    for name in sorted(set(trajectories) - referenced.keys()):
        problems.add("not referenced by any record's trajectory_file", member=name)


def _read_trajectory_member(item: RecordLine, name: str, content: bytes, problems: Problems) -> None:
    """Check the member `name` as the trajectory of `item`, another tool's converted first; a
    converted one keeps its member's bytes, once the conversion was accepted."""

    def report(message: str) -> None:
        problems.add(message, member=name, field="trajectory")

    if name.endswith(".json"):
        value, problem = json_member(content)
        if problem:
            report(problem)
            return
        converted = _is_foreign_json(value)
    else:
        # Another tool's file (.traj, .eval, a text log): converted, then checked as ours.
        try:
            value = foreign.detect_and_convert(content, name).trajectory
        except foreign.ForeignTrajectoryError as error:
            report(str(error))
            return
        converted = True
    item.record.trajectory = check_trajectory(value, item.record.sample_id, report=report)
    if converted and item.record.trajectory is not None:
        item.original_trajectory = OriginalTrajectory(name.rsplit("/", 1)[-1], content)


# --- the whole upload ----------------------------------------------------------------------------


def submission_validate(*, data: bytes, filename: str = "") -> ValidatedSubmission:
    """Read and check an upload completely. Raises SubmissionTooLarge or SubmissionInvalid (with
    every problem found, up to the cap); reads the database (suites, samples, gold) but writes
    nothing."""
    limit = max_upload_bytes()
    if len(data) > limit:
        raise SubmissionTooLarge(len(data), limit)
    problems = Problems()
    if not data.strip():
        problems.add(
            "the file is empty; expected a header line and one line per attempt (see the format on the upload page)",
            member=filename or "file",
        )
        problems.raise_if_any()
    in_zip = is_zip(data, filename)
    results, trajectories, member = _results_file(data, problems, in_zip=in_zip)
    parsed = parse_jsonl(results, problems, member=member, in_zip=in_zip)
    if not parsed.record_lines:
        problems.add("the file has no records after its header; add one line per attempt", member=member or (filename or "file"))
    if in_zip:
        _resolve_trajectory_files(parsed.records, trajectories, problems, member)
    attempt_indexes_check(parsed.keys, parsed.record_lines, problems, member)
    suite, samples, experiments = (None, {}, {})
    if parsed.header is not None and parsed.keys:
        suite, samples, experiments = database_check(parsed.header, parsed.header_line, parsed.keys, problems, member)
    problems.raise_if_any()
    assert parsed.header is not None  # no problems: the header was sound
    return ValidatedSubmission(
        header=parsed.header,
        records=parsed.records,
        filename=filename,
        size=len(data),
        sha256=hashlib.sha256(data).hexdigest(),
        suite=suite,
        samples=samples,
        experiments=experiments,
    )


def _results_file(data: bytes, problems: Problems, *, in_zip: bool) -> tuple[bytes, dict[str, bytes], str | None]:
    """(the JSONL, the zip's trajectory members, the member problems name); raises
    SubmissionInvalid when a zip holds no readable results.jsonl."""
    if not in_zip:
        return data, {}, None
    results, trajectories = read_zip(data, problems)
    if results is None:
        raise SubmissionInvalid(problems.items, problems.count)
    if not results.strip():
        problems.add("is empty; expected a header line and one line per attempt", member=RESULTS_MEMBER)
        raise SubmissionInvalid(problems.items, problems.count)
    return results, trajectories, RESULTS_MEMBER
