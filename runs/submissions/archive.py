"""Reading a submission zip within bounds, before any of its JSON is parsed.

A zip holds exactly one `results.jsonl` at its root and optional `trajectories/*.json` (or other
tools' `.traj`, `.eval`, `.txt`, `.log`, converted by runs.agents.foreign), nothing else: no
absolute paths, no "..", no symlinks, no encrypted members, bounded member count and decompressed
sizes (checked from the declared sizes first, then while reading).
"""
from __future__ import annotations

import io
import re
import stat
import zipfile
import zlib
from pathlib import PurePosixPath

from runs.limits import human_bytes
from runs.submissions.problems import Problems
from runs.submissions.schema import TRAJECTORY_MEMBER
from runs.submissions.upload_limits import max_uncompressed_bytes, max_upload_bytes, max_zip_members

RESULTS_MEMBER = "results.jsonl"
_ONLY = "a submission zip holds results.jsonl and trajectories/*.json only"

# The smallest central directory entry (46 bytes) plus a generous name and extra fields.
_CENTRAL_ENTRY_BUDGET = 46 + 512


def is_zip(data: bytes, filename: str = "") -> bool:
    return data[:4] in (b"PK\x03\x04", b"PK\x05\x06") or filename.lower().endswith(".zip")


def read_zip(data: bytes, problems: Problems) -> tuple[bytes | None, dict[str, bytes]]:
    """(results.jsonl bytes or None, {trajectory member name: bytes}); problems go to `problems`."""
    archive = _open_archive(data, problems)
    if archive is None:
        return None, {}
    member_limit, total_limit = max_upload_bytes(), max_uncompressed_bytes()
    results: bytes | None = None
    trajectories: dict[str, bytes] = {}
    seen: set[str] = set()
    read_total = 0
    for info in archive.infolist():
        name = info.filename
        problem = _member_problem(info, seen, member_limit)
        if problem:
            problems.add(problem, member=name)
            continue
        if info.is_dir():
            continue  # trajectories/
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


def _open_archive(data: bytes, problems: Problems) -> zipfile.ZipFile | None:
    """The archive, once its directory and declared sizes are within the limits; None after a problem."""
    problem = _central_directory_problem(data)
    if problem:
        problems.add(problem, member="zip")
        return None
    try:
        archive = zipfile.ZipFile(io.BytesIO(data))
    except (zipfile.BadZipFile, zipfile.LargeZipFile, ValueError, EOFError) as error:
        problems.add(f"not a valid zip archive ({error})", member="zip")
        return None
    infos = archive.infolist()
    if len(infos) > max_zip_members():
        problems.add(f"the archive has {len(infos)} members; at most {max_zip_members()} are accepted", member="zip")
        return None
    total_limit = max_uncompressed_bytes()
    declared = sum(info.file_size for info in infos)
    if declared > total_limit:
        problems.add(
            f"the members declare {human_bytes(declared)} ({declared:,} bytes) uncompressed; at most "
            f"{human_bytes(total_limit)} ({total_limit:,} bytes) are accepted (is this a zip bomb?)",
            member="zip",
        )
        return None
    return archive


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


def _member_problem(info: zipfile.ZipInfo, seen: set[str], member_limit: int) -> str | None:
    """What keeps a member from being read, or None; a sound name joins `seen`."""
    name = info.filename
    problem = _member_name_problem(name)
    if problem:
        return problem
    if name in seen:
        return "the archive holds this name twice"
    seen.add(name)
    if _is_symlink(info):
        return "symbolic links are not accepted in a submission zip"
    if info.is_dir():
        return None if name.rstrip("/") == "trajectories" else f"unexpected directory; {_ONLY}"
    if name != RESULTS_MEMBER and not TRAJECTORY_MEMBER.match(name):
        hint = " (results.jsonl must be at the archive's root)" if name.endswith("/" + RESULTS_MEMBER) else ""
        return f"unexpected member; {_ONLY}{hint}"
    if info.flag_bits & 0x1:
        return "encrypted members are not accepted"
    if info.file_size > member_limit:
        return (
            f"declares {human_bytes(info.file_size)} ({info.file_size:,} bytes) uncompressed; "
            f"one member may hold at most {human_bytes(member_limit)} ({member_limit:,} bytes)"
        )
    return None


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


class _TooBig(Exception):
    pass


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
