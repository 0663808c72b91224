"""Reading an uploaded submission and checking all of it before anything is stored.

Format `autoexperiment.submission/1` (also shown on the upload page):

- A JSONL file, UTF-8, one JSON object per line; blank lines are ignored.
- The first line is the header, every other line one attempt: their fields are the pydantic models
  of runs.submissions.schema, which the upload page documents and every line is checked with.
  In a zip, a record's `trajectory_file` may name a member instead of giving `trajectory`.
- (sample_id, attempt_index) is unique; each sample's indexes run 0..k-1 without gaps.
- A zip holds exactly one `results.jsonl` at its root and optional `trajectories/*.json` (or other
  tools' `.traj`, `.eval`, `.txt`, `.log`, converted by runs.agents.foreign), nothing else: no
  absolute paths, no "..", no symlinks, no encrypted members, bounded member count and
  decompressed sizes (checked from the declared sizes first, then while reading).
- Each final patch and trajectory within the limits of runs.limits (steps, bytes per text field
  and per step, files and diff lines per step, diff lines per trajectory, patch bytes and lines),
  so that its replay is bounded; a problem names the step and the limit.

`submission_validate` returns a `ValidatedSubmission` or raises `SubmissionInvalid` listing every
problem as "line N: field: message" (zip members: "member: message"), or `SubmissionTooLarge`.
"""
from __future__ import annotations

import hashlib
import io
import json
import re
import stat
import zipfile
import zlib
from dataclasses import dataclass, field
from pathlib import PurePosixPath
from typing import Any

from django.conf import settings

from runs.agents import foreign
from runs.agents.trajectory import FORMAT as TRAJECTORY_FORMAT
from runs.agents.trajectory import Trajectory, TrajectoryFormatError
from runs.benchmark.json_objects import read_object
from runs.benchmark.patch_parsing import parse_patch
from runs.benchmark.patches import PatchError
from runs.benchmark.text import json_type
from runs.limits import human_bytes, patch_problem, step_count_problem, trajectory_limits, trajectory_problems
from runs.models import Sample, Suite
from runs.submissions.json_limits import MAX_DEPTH, JSONLimitError
from runs.submissions.json_limits import loads as _bounded_loads
from runs.submissions.schema import TRAJECTORY_MEMBER, AttemptRecord, SubmissionHeader, field_problems
from runs.suites.selectors import sample_experiments

RESULTS_MEMBER = "results.jsonl"
UTF8_BOM = b"\xef\xbb\xbf"


# --- limits (declared in autoexperiment_site/settings.py; tests lower them) ----------------------


def max_upload_bytes() -> int:
    """The largest upload (the JSONL file or the zip as sent), default 20 MiB."""
    return settings.SUBMISSION_MAX_BYTES


def max_uncompressed_bytes() -> int:
    """The most a zip's members may decompress to, all together, default 50 MiB (parsed JSON takes
    several times its size in memory, and this happens inside a web request)."""
    return settings.SUBMISSION_MAX_UNCOMPRESSED_BYTES


def max_zip_members() -> int:
    return settings.SUBMISSION_MAX_ZIP_MEMBERS


def max_records() -> int:
    return settings.SUBMISSION_MAX_RECORDS


def max_patch_bytes() -> int:
    """The largest final patch of one attempt (runs.limits), default 1 MiB."""
    return trajectory_limits().patch_bytes


def max_trajectory_bytes() -> int:
    """The largest trajectory of one attempt (its JSON; runs.limits), default 10 MiB."""
    return trajectory_limits().trajectory_bytes


def max_problems() -> int:
    """How many problems are listed; the rest are counted."""
    return settings.SUBMISSION_MAX_PROBLEMS


# --- problems ------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Problem:
    """One thing wrong with an upload, and where: a zip member and/or a line, and a field."""

    message: str
    line: int | None = None
    field: str | None = None
    member: str | None = None

    def __str__(self) -> str:
        parts = []
        if self.member:
            parts.append(self.member)
        if self.line is not None:
            parts.append(f"line {self.line}")
        if self.field:
            parts.append(self.field)
        return ": ".join([*parts, self.message])

    def as_dict(self) -> dict:
        return {"line": self.line, "field": self.field, "member": self.member, "message": self.message, "text": str(self)}


class Problems:
    """Collects problems, keeping the first `cap` and counting the rest."""

    def __init__(self, cap: int | None = None) -> None:
        self.cap = max_problems() if cap is None else cap
        self.items: list[Problem] = []
        self.count = 0

    def add(self, message: str, *, line: int | None = None, field: str | None = None, member: str | None = None) -> None:
        self.count += 1
        if len(self.items) < self.cap:
            self.items.append(Problem(message, line, field, member))

    def __bool__(self) -> bool:
        return self.count > 0


class SubmissionInvalid(Exception):
    """The upload has problems; nothing was stored. `problems` lists at most the cap, `count` all."""

    def __init__(self, problems: list[Problem], count: int | None = None) -> None:
        self.problems = problems
        self.count = len(problems) if count is None else count
        super().__init__(f"{self.count} problem(s): " + "; ".join(str(p) for p in problems[:5]))

    @property
    def omitted(self) -> int:
        return self.count - len(self.problems)

    def messages(self) -> list[str]:
        """Every listed problem as text, then "... and K more problems" when some were left out."""
        texts = [str(problem) for problem in self.problems]
        if self.omitted:
            texts.append(f"... and {self.omitted} more problem(s) (only the first {len(self.problems)} are listed)")
        return texts


class SubmissionTooLarge(Exception):
    """The upload itself is over the size limit; nothing was read or stored."""

    def __init__(self, size: int | None, limit: int) -> None:
        self.size, self.limit = size, limit
        super().__init__(too_large_message(size, limit))


def too_large_message(size: int | None, limit: int) -> str:
    got = f" ({human_bytes(size)}, {size:,} bytes)" if size else ""
    return (
        f"The upload is larger than the limit of {human_bytes(limit)} ({limit:,} bytes){got}; nothing was stored. "
        "Split the results into several submissions, or leave the trajectories out."
    )


# --- parsed upload -------------------------------------------------------------------------------


@dataclass
class Header:
    line: int
    suite: str
    model: str
    agent: str
    contact: str
    context: str = "full"
    description: str = ""


@dataclass(frozen=True)
class OriginalTrajectory:
    """Another tool's trajectory as the uploader sent it (a zip member's bytes, or an inline
    object as JSON), kept for download once converted (runs.models.TrajectorySource)."""

    filename: str
    content: bytes


@dataclass
class Record:
    line: int
    sample_id: str
    attempt_index: int
    final_answer: Any  # a dict, a string or None
    final_patch: str
    input_tokens: int
    output_tokens: int
    cost: float | None
    seconds: float | None
    trajectory: dict | None = None
    trajectory_file: str | None = None
    original_trajectory: OriginalTrajectory | None = None  # only when `trajectory` was converted


@dataclass(frozen=True)
class RecordKey:
    """Where a record is and which attempt it claims to be, known even when other fields are bad."""

    line: int
    sample_id: str
    attempt_index: int | None


@dataclass
class ValidatedSubmission:
    """An upload with no problems, and what its records refer to in the database."""

    header: Header
    records: list[Record]
    filename: str
    size: int
    sha256: str
    suite: Any = None  # runs.models.Suite
    samples: dict[str, Any] = field(default_factory=dict)  # sample_id -> Sample
    experiments: dict[str, list] = field(default_factory=dict)  # sample_id -> [Experiment]


# --- JSON helpers --------------------------------------------------------------------------------


class _DuplicateKey(ValueError):
    def __init__(self, key: str) -> None:
        super().__init__(key)
        self.key = key


def _object_without_duplicates(pairs: list[tuple[str, Any]]) -> dict:
    result = {}
    for key, value in pairs:
        if key in result:
            raise _DuplicateKey(key)
        result[key] = value
    return result


def _loads(text: str) -> Any:
    # Bounded depth and integer length: see json_limits (raises JSONLimitError).
    return _bounded_loads(text, object_pairs_hook=_object_without_duplicates)


def _surrogate(value: Any) -> str | None:
    """JSON may escape half a UTF-16 pair ("\\ud800"); such text cannot be stored or shown."""
    try:
        json.dumps(value, ensure_ascii=False, allow_nan=True).encode("utf-8")
    except UnicodeEncodeError as error:
        return (
            f"contains an unpaired surrogate escape (\\u{ord(error.object[error.start]):04x}), which is not text "
            "and cannot be stored"
        )
    except (ValueError, RecursionError):
        return None  # reported elsewhere
    return None


# --- the zip -------------------------------------------------------------------------------------


def is_zip(data: bytes, filename: str = "") -> bool:
    return data[:4] in (b"PK\x03\x04", b"PK\x05\x06") or filename.lower().endswith(".zip")


def _member_name_problem(name: str) -> str | None:
    if "\x00" in name:
        return "the name contains a NUL character"
    if "\\" in name:
        return "the name contains a backslash; zip paths use '/'"
    if name.startswith("/") or re.match(r"^[A-Za-z]:", name):
        return "absolute path; every member must be relative to the archive's root"
    if ".." in PurePosixPath(name).parts:
        return "the path contains '..' and would escape the archive's root"
    return None


def _is_symlink(info: zipfile.ZipInfo) -> bool:
    return info.create_system == 3 and stat.S_ISLNK(info.external_attr >> 16)


def _read_member(archive: zipfile.ZipFile, info: zipfile.ZipInfo, limit: int) -> bytes:
    """The member's bytes, read in chunks; raises _TooBig past `limit` whatever the header said."""
    chunks, total = [], 0
    with archive.open(info) as handle:
        while True:
            chunk = handle.read(64 * 1024)
            if not chunk:
                break
            total += len(chunk)
            if total > limit:
                raise _TooBig(total)
            chunks.append(chunk)
    return b"".join(chunks)


class _TooBig(Exception):
    pass


# The smallest central directory entry (46 bytes) plus a generous name and extra fields.
_CENTRAL_ENTRY_BUDGET = 46 + 512


def _central_directory_problem(data: bytes) -> str | None:
    """Check the end-of-central-directory record before zipfile parses the directory: a small
    upload must not make it build hundreds of thousands of entries."""
    end = data.rfind(b"PK\x05\x06", max(0, len(data) - 22 - 65535))
    if end < 0 or end + 22 > len(data):
        return None  # not found: zipfile reports the archive as invalid
    entries = int.from_bytes(data[end + 10:end + 12], "little")
    directory_size = int.from_bytes(data[end + 12:end + 16], "little")
    if entries == 0xFFFF or directory_size == 0xFFFFFFFF:
        return "ZIP64 archives are not accepted (they are for more members or bytes than a submission may hold)"
    limit = max_zip_members()
    if entries > limit or directory_size > limit * _CENTRAL_ENTRY_BUDGET:
        return f"the archive has {entries:,} members ({directory_size:,} bytes of directory); at most {limit:,} are accepted"
    return None


def read_zip(data: bytes, problems: Problems) -> tuple[bytes | None, dict[str, bytes]]:
    """(results.jsonl bytes or None, {trajectory member name: bytes}); problems go to `problems`."""
    problem = _central_directory_problem(data)
    if problem:
        problems.add(problem, member="zip")
        return None, {}
    try:
        archive = zipfile.ZipFile(io.BytesIO(data))
    except (zipfile.BadZipFile, zipfile.LargeZipFile, ValueError, EOFError) as error:
        problems.add(f"not a valid zip archive ({error})", member="zip")
        return None, {}
    infos = archive.infolist()
    if len(infos) > max_zip_members():
        problems.add(f"the archive has {len(infos)} members; at most {max_zip_members()} are accepted", member="zip")
        return None, {}
    total_limit = max_uncompressed_bytes()
    declared = sum(info.file_size for info in infos)
    if declared > total_limit:
        problems.add(
            f"the members declare {human_bytes(declared)} ({declared:,} bytes) uncompressed; at most "
            f"{human_bytes(total_limit)} ({total_limit:,} bytes) are accepted (is this a zip bomb?)",
            member="zip",
        )
        return None, {}
    member_limit = max_upload_bytes()
    results: bytes | None = None
    trajectories: dict[str, bytes] = {}
    seen: set[str] = set()
    read_total = 0
    for info in infos:
        name = info.filename
        problem = _member_name_problem(name)
        if problem:
            problems.add(problem, member=name)
            continue
        if name in seen:
            problems.add("the archive holds this name twice", member=name)
            continue
        seen.add(name)
        if _is_symlink(info):
            problems.add("symbolic links are not accepted in a submission zip", member=name)
            continue
        if info.is_dir():
            if name.rstrip("/") != "trajectories":
                problems.add(
                    "unexpected directory; a submission zip holds results.jsonl and trajectories/*.json only", member=name
                )
            continue
        if name != RESULTS_MEMBER and not TRAJECTORY_MEMBER.match(name):
            hint = " (results.jsonl must be at the archive's root)" if name.endswith("/" + RESULTS_MEMBER) else ""
            problems.add(
                f"unexpected member; a submission zip holds results.jsonl and trajectories/*.json only{hint}", member=name
            )
            continue
        if info.flag_bits & 0x1:
            problems.add("encrypted members are not accepted", member=name)
            continue
        if info.file_size > member_limit:
            problems.add(
                f"declares {human_bytes(info.file_size)} ({info.file_size:,} bytes) uncompressed; "
                f"one member may hold at most {human_bytes(member_limit)} ({member_limit:,} bytes)",
                member=name,
            )
            continue
        limit = min(member_limit, total_limit - read_total)
        try:
            content = _read_member(archive, info, limit)
        except _TooBig:
            problems.add(
                f"decompresses to more than {limit:,} bytes although it declares {info.file_size:,} "
                "(a forged size, or a zip bomb); reading stopped",
                member=name,
            )
            return None, {}
        except (zipfile.BadZipFile, zlib.error, EOFError, OSError) as error:
            problems.add(f"cannot be read: {error}", member=name)
            continue
        except (NotImplementedError, RuntimeError) as error:  # unsupported compression, encryption
            problems.add(f"cannot be read: {error}", member=name)
            continue
        read_total += len(content)
        if name == RESULTS_MEMBER:
            results = content
        else:
            trajectories[name] = content
    if results is None and RESULTS_MEMBER not in seen:
        problems.add("missing: the archive must contain exactly one results.jsonl at its root", member=RESULTS_MEMBER)
    return results, trajectories


# --- lines ---------------------------------------------------------------------------------------


def _check_header(value: Any, line: int, problems: Problems, member: str | None) -> Header | None:
    if not isinstance(value, dict):
        problems.add(f"the header must be a JSON object, got {json_type(value)}", line=line, field="header", member=member)
        return None
    read = read_object(SubmissionHeader, value)
    for name, message in field_problems(SubmissionHeader, read.errors):
        problems.add(message, line=line, field=name, member=member)
    if read.instance is None:
        return None
    fields = read.instance
    return Header(
        line=line,
        suite=fields.suite,
        model=fields.model,
        agent=fields.agent,
        contact=fields.contact,
        context=fields.context,
        description=fields.description,
    )


def _check_record(
    value: Any, line: int, problems: Problems, member: str | None, *, in_zip: bool
) -> tuple[Record | None, RecordKey | None]:
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
    if found:
        return None, key
    return Record(
        line=line,
        sample_id=sample_id,
        attempt_index=fields["attempt_index"],
        final_answer=fields["final_answer"],
        final_patch=patch,
        input_tokens=fields["input_tokens"],
        output_tokens=fields["output_tokens"],
        cost=fields["cost"],
        seconds=fields["seconds"],
        trajectory=trajectory,
        trajectory_file=fields["trajectory_file"],
        original_trajectory=original,
    ), key


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


def parse_jsonl(
    data: bytes, problems: Problems, *, member: str | None, in_zip: bool
) -> tuple[Header | None, list[Record], list[RecordKey], int]:
    """(header, valid records, keys of every record with a valid sample id, number of record
    lines): every line checked, every problem reported."""
    data = data.removeprefix(UTF8_BOM)
    header: Header | None = None
    records: list[Record] = []
    keys: list[RecordKey] = []
    record_lines = 0
    first = True
    for number, raw in enumerate(data.split(b"\n"), start=1):
        raw = raw.rstrip(b"\r")
        if not raw.strip():
            continue
        is_first, first = first, False
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError as error:
            problems.add(f"not valid UTF-8 (byte {error.start + 1} of the line)", line=number, member=member)
            record_lines += 0 if is_first else 1
            continue
        try:
            value = _loads(text)
        except _DuplicateKey as error:
            problems.add("the key appears twice in one object", line=number, field=error.key, member=member)
            record_lines += 0 if is_first else 1
            continue
        except json.JSONDecodeError as error:
            problems.add(f"invalid JSON: {error.msg} (column {error.colno})", line=number, member=member)
            record_lines += 0 if is_first else 1
            continue
        except JSONLimitError as error:
            problems.add(error.message, line=number, field=error.field, member=member)
            record_lines += 0 if is_first else 1
            continue
        except RecursionError:
            problems.add(
                f"nested more than {MAX_DEPTH} levels deep; at most {MAX_DEPTH} levels are accepted", line=number, member=member
            )
            record_lines += 0 if is_first else 1
            continue
        surrogate = _surrogate(value)
        if surrogate:
            problems.add(surrogate, line=number, member=member)
            record_lines += 0 if is_first else 1
            continue
        if is_first:
            if isinstance(value, dict) and value.get("type") == "header":
                header = _check_header(value, number, problems, member)
                continue
            if not isinstance(value, dict) or "sample_id" not in value:
                if isinstance(value, dict):
                    problems.add(
                        'the first line must be the header {"type": "header", "suite": ..., "model": ..., '
                        '"agent": ..., "contact": ...}',
                        line=number, field="type", member=member,
                    )
                else:
                    problems.add(
                        f"the header must be a JSON object, got {json_type(value)}",
                        line=number, field="header", member=member,
                    )
                continue
            problems.add(
                'the header is missing: the first line must be {"type": "header", "suite": ..., "model": ..., '
                '"agent": ..., "contact": ...}, and this line is a record',
                line=number, field="type", member=member,
            )
        record_lines += 1
        record, key = _check_record(value, number, problems, member, in_zip=in_zip)
        if record is not None:
            records.append(record)
        if key is not None:
            keys.append(key)
    return header, records, keys, record_lines


# --- the whole upload ----------------------------------------------------------------------------


def _cross_checks(keys: list[RecordKey], record_lines: int, problems: Problems, member: str | None) -> None:
    first_line: dict[tuple[str, int], int] = {}
    by_sample: dict[str, list[RecordKey]] = {}
    for key in keys:
        if key.attempt_index is None:
            continue
        pair = (key.sample_id, key.attempt_index)
        if pair in first_line:
            problems.add(
                f"duplicate attempt: sample {key.sample_id!r} attempt {key.attempt_index} is already given on line "
                f"{first_line[pair]}",
                line=key.line, field="attempt_index", member=member,
            )
            continue
        first_line[pair] = key.line
        by_sample.setdefault(key.sample_id, []).append(key)
    for sample_id, sample_keys in by_sample.items():
        given = sorted({key.attempt_index for key in sample_keys})
        missing = sorted(set(range(given[-1] + 1)) - set(given))
        if missing:
            shown = ", ".join(str(index) for index in missing[:10]) + (" ..." if len(missing) > 10 else "")
            listed = ", ".join(str(index) for index in given[:10]) + (" ..." if len(given) > 10 else "")
            problems.add(
                f"sample {sample_id!r} has attempts {listed} but not {shown}; "
                "each sample's attempt indexes run 0..k-1 without gaps",
                line=max(sample_keys, key=lambda key: key.attempt_index).line, field="attempt_index", member=member,
            )
    if record_lines > max_records():
        problems.add(
            f"the file holds {record_lines:,} records; at most {max_records():,} are accepted per submission", member=member
        )


def _resolve_trajectory_files(
    records: list[Record], trajectories: dict[str, bytes], problems: Problems, member: str | None
) -> None:
    referenced: dict[str, int] = {}  # member -> the line of the record that names it
    for record in records:
        name = record.trajectory_file
        if name is None:
            continue
        if name in referenced:
            # One member for many records would be parsed and stored once per record: a few
            # kilobytes of archive could then stand for gigabytes, past every size limit.
            problems.add(
                f"names {name!r}, which line {referenced[name]} names already; each record needs a trajectory file of its own",
                line=record.line, field="trajectory_file", member=member,
            )
            continue
        referenced[name] = record.line
        if name not in trajectories:
            problems.add(f"names {name!r}, which is not in the archive", line=record.line, field="trajectory_file", member=member)
            continue
        if not name.endswith(".json"):
            # Another tool's file (.traj, .eval, a text log): converted, then checked as ours.
            def report(message: str, name: str = name) -> None:
                problems.add(message, member=name, field="trajectory")

            try:
                converted = foreign.detect_and_convert(trajectories[name], name).trajectory
            except foreign.ForeignTrajectoryError as error:
                report(str(error))
                continue
            record.trajectory = check_trajectory(converted, record.sample_id, report=report)
            _keep_original(record, name, trajectories[name])
            continue
        try:
            value = _loads(trajectories[name].decode("utf-8-sig"))
        except UnicodeDecodeError as error:
            problems.add(f"not valid UTF-8 (byte {error.start + 1})", member=name, field="trajectory")
            continue
        except _DuplicateKey as error:
            problems.add(f"invalid JSON: the key {error.key!r} appears twice in one object", member=name, field="trajectory")
            continue
        except JSONLimitError as error:
            where = f"{error.field}: " if error.field else ""
            problems.add(f"{where}{error.message}", member=name, field="trajectory")
            continue
        except (json.JSONDecodeError, RecursionError) as error:
            if isinstance(error, json.JSONDecodeError):
                detail = f"invalid JSON: {error.msg} (line {error.lineno}, column {error.colno})"
            else:
                detail = f"nested more than {MAX_DEPTH} levels deep; at most {MAX_DEPTH} levels are accepted"
            problems.add(detail, member=name, field="trajectory")
            continue
        surrogate = _surrogate(value)
        if surrogate:
            problems.add(surrogate, member=name, field="trajectory")
            continue
        record.trajectory = check_trajectory(
            value, record.sample_id, report=lambda message, name=name: problems.add(message, member=name, field="trajectory")
        )
        if _is_foreign_json(value):
            _keep_original(record, name, trajectories[name])
    for name in sorted(set(trajectories) - referenced.keys()):
        problems.add("not referenced by any record's trajectory_file", member=name)


def _keep_original(record: Record, member: str, content: bytes) -> None:
    """Keep a converted member's bytes on its record, once the conversion was accepted."""
    if record.trajectory is not None:
        record.original_trajectory = OriginalTrajectory(member.rsplit("/", 1)[-1], content)


def _database_checks(header: Header, keys: list[RecordKey], problems: Problems, member: str | None) -> tuple[Any, dict, dict]:
    suite = Suite.objects.filter(name=header.suite).first()
    if suite is None:
        known = ", ".join(Suite.objects.order_by("name").values_list("name", flat=True)) or "none"
        problems.add(
            f"no suite named {header.suite!r} on this site (imported suites: {known})",
            line=header.line, field="suite", member=member,
        )
        return None, {}, {}
    wanted = sorted({key.sample_id for key in keys})
    samples = {
        sample.sample_id: sample
        for sample in Sample.objects.filter(paper__suite=suite, sample_id__in=wanted).select_related("paper")
    }
    example = list(Sample.objects.filter(paper__suite=suite).order_by("n", "sample_id").values_list("sample_id", flat=True)[:3])
    if example:
        hint = f" (for example {', '.join(repr(s) for s in example)})"
    else:
        hint = " (the suite has no samples yet: import_suite --samples N creates them)"
    experiments: dict[str, list] = {}
    reported: set[str] = set()
    for record in keys:
        sample = samples.get(record.sample_id)
        if sample is None:
            problems.add(
                f"no sample {record.sample_id!r} in suite {suite.name!r}{hint}",
                line=record.line, field="sample_id", member=member,
            )
            continue
        if record.sample_id in experiments or record.sample_id in reported:
            continue
        found = sample_experiments(sample=sample)
        if not found:
            problems.add(
                f"sample {record.sample_id!r} cannot be scored: it has no experiments",
                line=record.line, field="sample_id", member=member,
            )
            reported.add(record.sample_id)
            continue
        missing = [experiment.exp_id for experiment in found if experiment.gold_result is None]
        if missing:
            problems.add(
                f"sample {record.sample_id!r} cannot be scored: experiment(s) {', '.join(map(str, missing))} of paper "
                f"{sample.paper.paper_id} have no gold result on this site",
                line=record.line, field="sample_id", member=member,
            )
            reported.add(record.sample_id)
            continue
        experiments[record.sample_id] = found
    return suite, samples, experiments


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
        raise SubmissionInvalid(problems.items, problems.count)
    member = None
    trajectories: dict[str, bytes] = {}
    in_zip = is_zip(data, filename)
    if in_zip:
        results, trajectories = read_zip(data, problems)
        if results is None:
            raise SubmissionInvalid(problems.items, problems.count)
        member = RESULTS_MEMBER
        if not results.strip():
            problems.add("is empty; expected a header line and one line per attempt", member=member)
            raise SubmissionInvalid(problems.items, problems.count)
    else:
        results = data
    header, records, keys, record_lines = parse_jsonl(results, problems, member=member, in_zip=in_zip)
    if not record_lines:
        problems.add("the file has no records after its header; add one line per attempt", member=member or (filename or "file"))
    if in_zip:
        _resolve_trajectory_files(records, trajectories, problems, member)
    _cross_checks(keys, record_lines, problems, member)
    suite, samples, experiments = (None, {}, {})
    if header is not None and keys:
        suite, samples, experiments = _database_checks(header, keys, problems, member)
    if problems:
        raise SubmissionInvalid(problems.items, problems.count)
    return ValidatedSubmission(
        header=header,
        records=records,
        filename=filename,
        size=len(data),
        sha256=hashlib.sha256(data).hexdigest(),
        suite=suite,
        samples=samples,
        experiments=experiments,
    )
