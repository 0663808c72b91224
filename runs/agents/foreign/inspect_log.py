"""Inspect AI eval logs, one sample each: the `.eval` zip archive and the `.json` log.

`.eval` (Inspect's documented log layout): a zip holding `header.json` (`{"version": 2, "status":
"success", "eval": {"task": ..., "model": ...}, "results": ..., "stats": ...}`), one
`samples/<id>_epoch_<n>.json` per sample, and summaries (`summaries.json`, `reductions.json`,
`_journal/...`) that are not read. Members may be deflated or zstd-compressed (method 93).

`.json`: one object, the header's fields plus `"samples": [<sample>, ...]`.

A sample is `{"id": 1, "epoch": 1, "messages": [...], "model_usage": {"<model>": {"input_tokens":
..., "output_tokens": ...}}, "total_time": 12.3, "error": null, ...}`. Its messages are chat messages
(`role` system, user, assistant or tool; `content` a string or a list of parts `{"type": "text",
"text": ...}` / `{"type": "reasoning", "reasoning": ...}`); an assistant message's `tool_calls`
are `{"id", "function", "arguments": {...}}`, and a tool message answers one by `tool_call_id`,
with `error` `{"type", "message"}` when the call failed. Each tool call becomes one step (the
message's text its thought); an assistant message without calls is a step with no tool.
Inspect logs have no per-step tokens or cost; the sample's `model_usage` gives the totals.
"""
from __future__ import annotations

import io
import json
import struct
import zipfile
from typing import Any

from runs.agents.trajectory import Step

from .base import ConvertedTrajectory, ForeignTrajectoryError, as_text, build, integer, load_json, object_at, require

NAME_EVAL = "inspect-eval"
NAME_JSON = "inspect-json"
ZSTD_METHOD = 93
# An .eval archive is read in memory inside a request: its members together may not exceed this.
MAX_MEMBER_BYTES = 50 * 2**20


def looks_like_eval(data: bytes) -> bool:
    if data[:4] != b"PK\x03\x04":
        return False
    try:
        names = zipfile.ZipFile(io.BytesIO(data)).namelist()
    except (zipfile.BadZipFile, ValueError, EOFError):
        return False
    return "header.json" in names or "_journal/start.json" in names


def looks_like_json(value: Any) -> bool:
    return isinstance(value, dict) and isinstance(value.get("eval"), dict) and "samples" in value and "version" in value


def convert_eval(data: bytes, filename: str = "") -> ConvertedTrajectory:
    try:
        archive = zipfile.ZipFile(io.BytesIO(data))
    except (zipfile.BadZipFile, ValueError, EOFError) as error:
        raise ForeignTrajectoryError(NAME_EVAL, f"not a valid zip archive ({error})") from None
    names = archive.namelist()
    require("header.json" in names, NAME_EVAL, "the archive has no header.json (an unfinished or foreign log?)")
    header = load_json(_member(archive, data, "header.json"), f"{NAME_EVAL}: header.json")
    require(isinstance(header, dict), NAME_EVAL, "header.json: must be a JSON object")
    samples = sorted(name for name in names if name.startswith("samples/") and name.endswith(".json"))
    require(len(samples) == 1, NAME_EVAL, f"the log holds {len(samples)} samples (samples/*.json); one trajectory is one sample")
    sample = load_json(_member(archive, data, samples[0]), f"{NAME_EVAL}: {samples[0]}")
    return _convert(NAME_EVAL, header, sample, where=samples[0])


def convert_json(data: bytes | Any, filename: str = "") -> ConvertedTrajectory:
    value = load_json(data, NAME_JSON) if isinstance(data, bytes) else data
    require(isinstance(value, dict) and isinstance(value.get("eval"), dict), NAME_JSON, "not an eval log: no 'eval' object")
    samples = value.get("samples")
    require(isinstance(samples, list), NAME_JSON, "'samples' must be a list (was the log written without samples?)")
    require(len(samples) == 1, NAME_JSON, f"the log holds {len(samples)} samples; one trajectory is one sample")
    return _convert(NAME_JSON, value, samples[0], where="samples[0]")


def _member(archive: zipfile.ZipFile, data: bytes, name: str) -> bytes:
    info = archive.getinfo(name)
    if info.file_size > MAX_MEMBER_BYTES:
        raise ForeignTrajectoryError(NAME_EVAL, f"{name}: declares {info.file_size:,} bytes; at most {MAX_MEMBER_BYTES:,} are read")
    if info.compress_type != ZSTD_METHOD:
        try:
            with archive.open(info) as handle:
                content = handle.read(MAX_MEMBER_BYTES + 1)
        except (zipfile.BadZipFile, NotImplementedError, EOFError, OSError) as error:
            raise ForeignTrajectoryError(NAME_EVAL, f"{name}: cannot be read ({error})") from None
    else:
        content = _zstd_member(data, info)
    if len(content) > MAX_MEMBER_BYTES:
        raise ForeignTrajectoryError(NAME_EVAL, f"{name}: decompresses to more than {MAX_MEMBER_BYTES:,} bytes")
    return content


def _zstd_member(data: bytes, info: zipfile.ZipInfo) -> bytes:
    # Python's zipfile cannot decompress method 93: read the member's raw bytes after its local
    # header (30 bytes, then the name and the extra field) and decompress them here.
    import zstandard

    start = info.header_offset
    local = data[start:start + 30]
    if len(local) < 30 or local[:4] != b"PK\x03\x04":
        raise ForeignTrajectoryError(NAME_EVAL, f"{info.filename}: its local header is missing or damaged")
    name_length, extra_length = struct.unpack("<HH", local[26:30])
    begin = start + 30 + name_length + extra_length
    raw = data[begin:begin + info.compress_size]
    try:
        reader = zstandard.ZstdDecompressor().stream_reader(io.BytesIO(raw))
        chunks, total = [], 0
        while total <= MAX_MEMBER_BYTES and (chunk := reader.read(2**20)):
            chunks.append(chunk)
            total += len(chunk)
        return b"".join(chunks)
    except zstandard.ZstdError as error:
        raise ForeignTrajectoryError(NAME_EVAL, f"{info.filename}: not valid zstd data ({error})") from None


def _convert(name: str, header: dict, sample: Any, *, where: str) -> ConvertedTrajectory:
    require(isinstance(sample, dict), name, f"{where}: a sample must be an object")
    messages = sample.get("messages")
    require(isinstance(messages, list), name, f"{where}: 'messages' must be a list of chat messages")
    steps: list[Step] = []
    by_call: dict[str, Step] = {}
    for position, message in enumerate(messages, start=1):
        require(isinstance(message, dict), name, f"{where}: message {position}: must be an object")
        role = message.get("role")
        if role == "assistant":
            steps.extend(_assistant_steps(name, where, message, position, len(steps), by_call))
        elif role == "tool":
            call_id = message.get("tool_call_id")
            step = by_call.get(call_id) if isinstance(call_id, str) else None
            if step is None:
                raise ForeignTrajectoryError(
                    name, f"{where}: message {position}: answers tool call {call_id!r}, which no assistant message made"
                )
            step.observation = as_text(message.get("content"))
            error = message.get("error")
            if isinstance(error, dict):
                step.error = True
                step.observation = step.observation or str(error.get("message") or "")
                step.notes.append(f"tool error: {error.get('type', 'unknown')}: {error.get('message', '')}")
        elif role not in ("system", "user"):
            raise ForeignTrajectoryError(name, f"{where}: message {position}: unknown role {role!r}")
    require(bool(steps), name, f"{where}: no assistant message: no steps")
    usage = object_at(sample, "model_usage")
    totals = [value for value in usage.values() if isinstance(value, dict)]
    eval_spec = object_at(header, "eval")
    return build(
        format_name=name, version=str(header.get("version", "unknown")), steps=steps,
        agent=f"inspect {eval_spec.get('task', '')}".strip(), model=str(eval_spec.get("model") or ""),
        input_tokens=sum(integer(total.get("input_tokens")) for total in totals),
        output_tokens=sum(integer(total.get("output_tokens")) for total in totals),
        cost=None, exit_status="error" if sample.get("error") else str(header.get("status") or ""),
    )


def _assistant_steps(name: str, where: str, message: dict, position: int, done: int, by_call: dict[str, Step]) -> list[Step]:
    thought = as_text(message.get("content"))
    calls = message.get("tool_calls") or []
    require(isinstance(calls, list), name, f"{where}: message {position}: 'tool_calls' must be a list")
    if not calls:
        return [Step(index=done + 1, started_at="", thought=thought)]
    steps = []
    for offset, call in enumerate(calls):
        require(isinstance(call, dict) and isinstance(call.get("function"), str), name,
                f"{where}: message {position}: tool call {offset + 1} has no 'function' name")
        arguments = call.get("arguments")
        if isinstance(arguments, str):  # some providers' raw JSON text
            try:
                arguments = json.loads(arguments)
            except json.JSONDecodeError:
                arguments = {"input": arguments}
        if not isinstance(arguments, dict):
            arguments = {"input": arguments}
        step = Step(index=done + offset + 1, started_at="", thought=thought if offset == 0 else "",
                    tool=call["function"], arguments=arguments, tool_call_id=call.get("id"))
        if isinstance(call.get("id"), str):
            by_call[call["id"]] = step
        steps.append(step)
    return steps
