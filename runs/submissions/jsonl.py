"""Decoding the JSON of an upload: each line of results.jsonl, and each trajectory member of a zip.

Within bounds (depth and integer length: runs.submissions.json_limits), refusing what JSON allows
but the upload cannot mean: a key twice in one object, and half a UTF-16 surrogate pair, which is
no text and cannot be stored. What a line says is checked by runs.submissions.validation.
"""
from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any, NamedTuple

from runs.submissions.json_limits import MAX_DEPTH, JSONLimitError
from runs.submissions.json_limits import loads as bounded_loads
from runs.submissions.problems import Problems

UTF8_BOM = b"\xef\xbb\xbf"
_TOO_DEEP = f"nested more than {MAX_DEPTH} levels deep; at most {MAX_DEPTH} levels are accepted"


class JsonLine(NamedTuple):
    """One non-blank line; `value` means nothing unless `decoded` (its problem is reported)."""

    number: int
    value: Any
    decoded: bool


def json_lines(data: bytes, problems: Problems, *, member: str | None) -> Iterator[JsonLine]:
    """Each non-blank line of a JSONL file, decoded. A line that is not one JSON value is reported
    and yielded all the same, undecoded: it still counts as a line of the file."""
    for number, raw in enumerate(data.removeprefix(UTF8_BOM).split(b"\n"), start=1):
        raw = raw.rstrip(b"\r")
        if not raw.strip():
            continue
        value, problem, field = _decode_line(raw)
        if problem:
            problems.add(problem, line=number, field=field, member=member)
        yield JsonLine(number, value, decoded=problem is None)


def _decode_line(raw: bytes) -> tuple[Any, str | None, str | None]:
    """(value, None, None), or (None, what is wrong, the field it is in if known)."""
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as error:
        return None, f"not valid UTF-8 (byte {error.start + 1} of the line)", None
    try:
        value = _loads(text)
    except _DuplicateKey as error:
        return None, "the key appears twice in one object", error.key
    except json.JSONDecodeError as error:
        return None, f"invalid JSON: {error.msg} (column {error.colno})", None
    except JSONLimitError as error:
        return None, error.message, error.field
    except RecursionError:
        return None, _TOO_DEEP, None
    surrogate = _surrogate(value)
    if surrogate:
        return None, surrogate, None
    return value, None, None


def json_member(content: bytes) -> tuple[Any, str | None]:
    """A zip member's JSON document: (value, None), or (None, what is wrong)."""
    try:
        value = _loads(content.decode("utf-8-sig"))
    except UnicodeDecodeError as error:
        return None, f"not valid UTF-8 (byte {error.start + 1})"
    except _DuplicateKey as error:
        return None, f"invalid JSON: the key {error.key!r} appears twice in one object"
    except JSONLimitError as error:
        where = f"{error.field}: " if error.field else ""
        return None, f"{where}{error.message}"
    except json.JSONDecodeError as error:
        return None, f"invalid JSON: {error.msg} (line {error.lineno}, column {error.colno})"
    except RecursionError:
        return None, _TOO_DEEP
    surrogate = _surrogate(value)
    if surrogate:
        return None, surrogate
    return value, None


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
    return bounded_loads(text, object_pairs_hook=_object_without_duplicates)


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
