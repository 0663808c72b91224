"""Reading an uploaded submission and checking all of it before anything is stored.

Format `autoexperiment.submission/1` (also shown on the upload page):

- A JSONL file, UTF-8, one JSON object per line; blank lines are ignored.
- The first line is the header::

    {"type": "header", "suite": "builtin", "model": "gpt-4o", "agent": "my-react",
     "context": "full", "description": "...", "contact": "me@example.org"}

  `suite`, `model`, `agent` and `contact` are required; `context` is one of none, full, oracle
  (default full); `description` is optional; `format` may name this format's version.
- Every other line is one attempt::

    {"sample_id": "temperature-scaling_4", "attempt_index": 0,
     "final_answer": {"Experiment 1": {"ece": 0.097}} | "text holding the answer" | null,
     "final_patch": "unified diff against the masked workspace (paths a/code/..., b/code/...)",
     "input_tokens": 1200, "output_tokens": 300, "cost": 0.01 | null, "seconds": 42.0 | null,
     "trajectory": {...}}                    # optional, our versioned trajectory format

  In a zip, `"trajectory_file": "trajectories/x.json"` may name a member instead of `trajectory`.
- Unknown fields are errors (a typo must not silently drop a value). Integers must be integers
  (not booleans, not strings), counts non-negative, numbers finite.
- (sample_id, attempt_index) is unique; each sample's indexes run 0..k-1 without gaps.
- A zip holds exactly one `results.jsonl` at its root and optional `trajectories/*.json`, nothing
  else: no absolute paths, no "..", no symlinks, no encrypted members, bounded member count and
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
import math
import re
import stat
import zipfile
import zlib
from dataclasses import dataclass, field
from pathlib import PurePosixPath
from typing import Any

from django.conf import settings

from runs.benchmark.patches import PatchError, parse_patch
from runs.benchmark.scoring import MAX_ANSWER_CHARS
from runs.limits import patch_problem, step_count_problem, trajectory_limits, trajectory_problems
from runs.submissions.json_limits import MAX_DEPTH, JSONLimitError
from runs.submissions.json_limits import loads as _bounded_loads

FORMAT = "autoexperiment.submission/1"
RESULTS_MEMBER = "results.jsonl"
TRAJECTORY_MEMBER = re.compile(r"^trajectories/[^/]+\.json$")
CONTEXTS = ("none", "full", "oracle")

HEADER_FIELDS = {
    # name: (required, max length)
    "suite": (True, 100),
    "model": (True, 200),
    "agent": (True, 100),
    "contact": (True, 200),
    "context": (False, 10),
    "description": (False, 5000),
}
RECORD_REQUIRED = (
    "sample_id", "attempt_index", "final_answer", "final_patch", "input_tokens", "output_tokens", "cost", "seconds",
)
RECORD_OPTIONAL = ("type", "trajectory", "trajectory_file")

MAX_SAMPLE_ID_CHARS = 300
MAX_ATTEMPT_INDEX = 99  # k of pass@k at most 100
MAX_TOKENS = 2**31 - 1  # Attempt's PositiveIntegerField
MAX_COST = 1e6
MAX_SECONDS = 1e7
UTF8_BOM = b"\xef\xbb\xbf"


# --- limits (settings override the defaults; tests lower them) -----------------------------------


def max_upload_bytes() -> int:
    """The largest upload (the JSONL file or the zip as sent), default 20 MiB."""
    return int(getattr(settings, "SUBMISSION_MAX_BYTES", 20 * 2**20))


def max_uncompressed_bytes() -> int:
    """The most a zip's members may decompress to, all together, default 50 MiB (parsed JSON takes
    several times its size in memory, and this happens inside a web request)."""
    return int(getattr(settings, "SUBMISSION_MAX_UNCOMPRESSED_BYTES", 50 * 2**20))


def max_zip_members() -> int:
    return int(getattr(settings, "SUBMISSION_MAX_ZIP_MEMBERS", 2000))


def max_records() -> int:
    return int(getattr(settings, "SUBMISSION_MAX_RECORDS", 10_000))


def max_patch_bytes() -> int:
    """The largest final patch of one attempt (runs.limits), default 1 MiB."""
    return trajectory_limits().patch_bytes


def max_trajectory_bytes() -> int:
    """The largest trajectory of one attempt (its JSON; runs.limits), default 10 MiB."""
    return trajectory_limits().trajectory_bytes


def max_problems() -> int:
    """How many problems are listed; the rest are counted."""
    return int(getattr(settings, "SUBMISSION_MAX_PROBLEMS", 200))


def human_bytes(count: int) -> str:
    """1536 -> "1.5 KiB"; exact bytes follow in messages that matter."""
    value = float(count)
    for unit in ("bytes", "KiB", "MiB", "GiB"):
        if value < 1024 or unit == "GiB":
            return f"{int(value)} bytes" if unit == "bytes" else f"{value:.1f} {unit}"
        value /= 1024
    return f"{count} bytes"


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


def _json_type(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return f"a boolean ({'true' if value else 'false'})"
    if isinstance(value, int):
        return f"an integer ({value})"
    if isinstance(value, float):
        return f"a number ({value!r})" if math.isfinite(value) else f"{_nonfinite(value)}"
    if isinstance(value, str):
        shown = value if len(value) <= 40 else value[:37] + "..."
        return f"a string ({json.dumps(shown)})"
    if isinstance(value, list):
        return "a list"
    if isinstance(value, dict):
        return "an object"
    return type(value).__name__


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


def _nonfinite(value: float) -> str:
    return "NaN" if math.isnan(value) else ("Infinity" if value > 0 else "-Infinity")


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


class _Checker:
    """Checks one object's fields, reporting problems at its line."""

    def __init__(self, value: dict, line: int, problems: Problems, member: str | None) -> None:
        self.value, self.line, self.problems, self.member = value, line, problems, member
        self.ok = True

    def problem(self, field_name: str | None, message: str) -> None:
        self.ok = False
        self.problems.add(message, line=self.line, field=field_name, member=self.member)

    def string(self, name: str, *, required: bool, max_chars: int, allow_empty: bool = False) -> str | None:
        if name not in self.value:
            if required:
                self.problem(name, "required field is missing")
            return None
        value = self.value[name]
        if not isinstance(value, str):
            self.problem(name, f"must be a string, got {_json_type(value)}")
            return None
        value = value.strip() if name != "final_patch" else value
        if not value and not allow_empty:
            if required:
                self.problem(name, "must not be empty")
            return None if required else ""
        if len(value) > max_chars:
            self.problem(name, f"is {len(value):,} characters long; at most {max_chars:,} are accepted")
            return None
        if "\x00" in value:
            self.problem(name, "contains a NUL character")
            return None
        return value

    def integer(self, name: str, *, minimum: int, maximum: int) -> int | None:
        if name not in self.value:
            self.problem(name, "required field is missing")
            return None
        value = self.value[name]
        if isinstance(value, bool) or not isinstance(value, int):
            self.problem(name, f"must be an integer, got {_json_type(value)}")
            return None
        if value < minimum:
            self.problem(name, f"must be at least {minimum}, got {value}")
            return None
        if value > maximum:
            self.problem(name, f"must be at most {maximum:,}, got {value:,}")
            return None
        return value

    def number(self, name: str, *, maximum: float) -> tuple[bool, float | None]:
        """(valid, value) for a non-negative finite number or null."""
        if name not in self.value:
            self.problem(name, "required field is missing (use null when unknown)")
            return False, None
        value = self.value[name]
        if value is None:
            return True, None
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            self.problem(name, f"must be a number or null, got {_json_type(value)}")
            return False, None
        if not math.isfinite(value):
            self.problem(name, f"must be a finite number, got {_nonfinite(value)}")
            return False, None
        if value < 0:
            self.problem(name, f"must not be negative, got {value!r}")
            return False, None
        if value > maximum:
            self.problem(name, f"must be at most {maximum:g}, got {value!r}")
            return False, None
        return True, float(value)

    def unknown(self, known: set[str], what: str) -> None:
        for name in self.value:
            if name not in known:
                self.problem(name, f"unknown {what} field (known fields: {', '.join(sorted(known))})")


def _check_header(value: Any, line: int, problems: Problems, member: str | None) -> Header | None:
    if not isinstance(value, dict):
        problems.add(f"the header must be a JSON object, got {_json_type(value)}", line=line, field="header", member=member)
        return None
    check = _Checker(value, line, problems, member)
    check.unknown({"type", "format", *HEADER_FIELDS}, "header")
    if "format" in value and value["format"] != FORMAT:
        check.problem("format", f"unsupported format {_json_type(value['format'])}; this site reads {FORMAT!r}")
    texts = {
        name: check.string(name, required=required, max_chars=limit, allow_empty=not required)
        for name, (required, limit) in HEADER_FIELDS.items()
    }
    context = texts["context"] or "full"
    if texts["context"] and texts["context"] not in CONTEXTS:
        check.problem("context", f"must be one of {', '.join(CONTEXTS)}, got {_json_type(value['context'])}")
    if not check.ok:
        return None
    return Header(
        line=line,
        suite=texts["suite"],
        model=texts["model"],
        agent=texts["agent"],
        contact=texts["contact"],
        context=context,
        description=texts["description"] or "",
    )


def _check_record(
    value: Any, line: int, problems: Problems, member: str | None, *, in_zip: bool
) -> tuple[Record | None, RecordKey | None]:
    if not isinstance(value, dict):
        problems.add(f"a record must be a JSON object, got {_json_type(value)}", line=line, field="record", member=member)
        return None, None
    check = _Checker(value, line, problems, member)
    check.unknown({*RECORD_REQUIRED, *RECORD_OPTIONAL}, "record")
    if "type" in value and value["type"] != "attempt":
        if value["type"] == "header":
            check.problem("type", "a second header; only the first line may be the header")
        else:
            check.problem("type", f"must be \"attempt\" when given, got {_json_type(value['type'])}")
    sample_id = check.string("sample_id", required=True, max_chars=MAX_SAMPLE_ID_CHARS)
    index = check.integer("attempt_index", minimum=0, maximum=MAX_ATTEMPT_INDEX)
    input_tokens = check.integer("input_tokens", minimum=0, maximum=MAX_TOKENS)
    output_tokens = check.integer("output_tokens", minimum=0, maximum=MAX_TOKENS)
    _, cost = check.number("cost", maximum=MAX_COST)
    _, seconds = check.number("seconds", maximum=MAX_SECONDS)
    answer = _check_answer(check)
    patch = _check_patch(check)
    trajectory = None
    trajectory_file = None
    if "trajectory" in value and "trajectory_file" in value:
        check.problem("trajectory_file", "give either trajectory or trajectory_file, not both")
    elif "trajectory" in value:
        if value["trajectory"] is not None:
            trajectory = check_trajectory(value["trajectory"], sample_id, report=lambda m: check.problem("trajectory", m))
    elif "trajectory_file" in value:
        if not in_zip:
            check.problem("trajectory_file", "only a zip upload can carry trajectory files; put the trajectory inline")
        else:
            trajectory_file = check.string("trajectory_file", required=True, max_chars=300)
            if trajectory_file is not None and not TRAJECTORY_MEMBER.match(trajectory_file):
                check.problem(
                    "trajectory_file", f"must name a member trajectories/<name>.json, got {json.dumps(trajectory_file)}"
                )
                trajectory_file = None
    key = RecordKey(line, sample_id, index) if sample_id is not None else None
    if not check.ok:
        return None, key
    return Record(
        line=line,
        sample_id=sample_id,
        attempt_index=index,
        final_answer=answer,
        final_patch=patch,
        input_tokens=input_tokens,
        output_tokens=output_tokens,
        cost=cost,
        seconds=seconds,
        trajectory=trajectory,
        trajectory_file=trajectory_file,
    ), key


def _check_answer(check: _Checker) -> Any:
    if "final_answer" not in check.value:
        check.problem("final_answer", "required field is missing (use null when the agent gave no answer)")
        return None
    answer = check.value["final_answer"]
    if answer is None:
        return None
    if isinstance(answer, str):
        if len(answer) > MAX_ANSWER_CHARS:
            check.problem("final_answer", f"is {len(answer):,} characters long; at most {MAX_ANSWER_CHARS:,} are read")
        if "\x00" in answer:
            check.problem("final_answer", "contains a NUL character")
        return answer
    if isinstance(answer, dict):
        size = len(json.dumps(answer, allow_nan=True))
        if size > MAX_ANSWER_CHARS:
            check.problem("final_answer", f"is {size:,} characters of JSON; at most {MAX_ANSWER_CHARS:,} are read")
        return answer
    check.problem("final_answer", f"must be an object, a string or null, got {_json_type(answer)}")
    return None


def _check_patch(check: _Checker) -> str | None:
    limit = max_patch_bytes()
    if "final_patch" not in check.value:
        check.problem("final_patch", 'required field is missing (use "" when the agent changed nothing)')
        return None
    patch = check.value["final_patch"]
    if patch is None:
        return ""
    if not isinstance(patch, str):
        check.problem("final_patch", f"must be a string (a unified diff), got {_json_type(patch)}")
        return None
    size = len(patch.encode("utf-8", errors="surrogatepass"))
    if size > limit:
        check.problem(
            "final_patch",
            f"is {human_bytes(size)} ({size:,} bytes); one patch may hold at most {human_bytes(limit)} ({limit:,} bytes)",
        )
        return None
    lines_problem = patch_problem(patch, trajectory_limits())
    if lines_problem:
        check.problem("final_patch", lines_problem)
        return None
    if "\x00" in patch:
        check.problem("final_patch", "contains a NUL character")
        return None
    if not patch.strip():
        return ""
    # The same parser re-execution uses: what passes here is understood there, line for line.
    try:
        parse_patch(patch)
    except PatchError as error:
        check.problem("final_patch", str(error))
        return None
    return patch


def check_trajectory(value: Any, sample_id: str | None, *, report) -> dict | None:
    """A trajectory object in our versioned format, normalised, or None after `report(message)`."""
    from runs.agents.trajectory import Trajectory, TrajectoryFormatError

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
                        f"the header must be a JSON object, got {_json_type(value)}",
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
    for name in sorted(set(trajectories) - referenced.keys()):
        problems.add("not referenced by any record's trajectory_file", member=name)


def _database_checks(header: Header, keys: list[RecordKey], problems: Problems, member: str | None) -> tuple[Any, dict, dict]:
    from runs.models import Sample, Suite
    from runs.suites.selectors import sample_experiments

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
