"""Trajectories written by other tools, converted to ours (runs.agents.trajectory FORMAT).

`detect_and_convert(data, filename)` recognises the format by content (the file name only picks
which reader explains a file that no reader recognises), converts it, and records the source
format and version in the header's `versions`. A file it cannot read raises
`ForeignTrajectoryError`, whose message names the format and what is wrong, and where.

Formats, one module each: the upstream AutoExperiment text logs (`autoexperiment_log`),
mini-swe-agent `.traj.json` (`mini_swe_agent`), SWE-agent `.traj` (`swe_agent`) and Inspect AI
eval logs, `.eval` and `.json` (`inspect_log`). Pure: no Django models, no ORM.
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from . import autoexperiment_log, inspect_log, mini_swe_agent, swe_agent
from .base import ConvertedTrajectory, ForeignTrajectoryError

__all__ = [
    "FORMATS", "ConvertedTrajectory", "ForeignFormat", "ForeignTrajectoryError", "detect", "detect_and_convert",
]



@dataclass(frozen=True)
class ForeignFormat:
    """One accepted format as the upload page documents it: a short example of the file."""

    name: str
    title: str
    files: str
    example: str
    reads: str


FORMATS = (
    ForeignFormat(
        autoexperiment_log.NAME, "AutoExperiment (upstream) text log", "trajectories/<name>.txt or .log",
        "SYSTEM PROMPT\n...\n######################################\nStep: 0\n\nThought:\nList the files.\n\n"
        "Action:\narguments='{\"command\": \"ls code\"}' name='execute_bash'\n\nObservation:\nrun.py\n\n"
        "######################################\nCompute Cost: 0.0125\nPrompt tokens: 1500\nCompletion tokens: 210\n"
        "Compute Time: 12.5\n######################################",
        "steps, tool calls and observations; the footer's total tokens and cost",
    ),
    ForeignFormat(
        mini_swe_agent.NAME, "mini-swe-agent trajectory (trajectory_format mini-swe-agent-1 or -1.1)",
        "trajectories/<name>.json (a .traj.json renamed), or inline as trajectory",
        '{"trajectory_format": "mini-swe-agent-1.1",\n "info": {"exit_status": "Submitted", "model_stats": '
        '{"instance_cost": 0.05}},\n "messages": [{"role": "user", "content": "..."},\n  {"role": "assistant", '
        '"content": "THOUGHT ...", "extra": {"actions": [{"command": "ls"}], "cost": 0.05}},\n  {"role": "user", '
        '"content": "<returncode>0</returncode>\\n<output>\\nrun.py\\n</output>"}]}',
        "one step per assistant message: thought, bash command, observation and exit code, tokens and cost where recorded",
    ),
    ForeignFormat(
        swe_agent.NAME, "SWE-agent trajectory", "trajectories/<name>.traj, or inline as trajectory",
        '{"trajectory": [{"thought": "...", "action": "cat code/run.py", "observation": "...",\n   '
        '"state": {"diff": "diff --git ..."}}],\n "info": {"swe_agent_version": "1.0.1", "submission": "...",\n   '
        '"model_stats": {"instance_cost": 0.3, "tokens_sent": 12000, "tokens_received": 800}}}',
        "one step per trajectory entry; the repository diff after a step that changed it; total tokens and cost",
    ),
    ForeignFormat(
        inspect_log.NAME_EVAL, "Inspect AI eval log (.eval), one sample", "trajectories/<name>.eval",
        "a zip: header.json {\"version\": 2, \"eval\": {\"task\": ..., \"model\": ...}, ...}\n"
        "       samples/1_epoch_1.json {\"messages\": [...], \"model_usage\": {...}}  (deflate or zstd)",
        "one step per tool call (tool, arguments, result, error); the sample's total tokens",
    ),
    ForeignFormat(
        inspect_log.NAME_JSON, "Inspect AI eval log (.json), one sample", "trajectories/<name>.json, or inline as trajectory",
        '{"version": 2, "eval": {"task": "...", "model": "openai/gpt-4o"},\n "samples": [{"messages": [\n  '
        '{"role": "assistant", "content": "...", "tool_calls": [{"id": "c1", "function": "bash", "arguments": '
        '{"cmd": "ls"}}]},\n  {"role": "tool", "tool_call_id": "c1", "content": "run.py"}]}]}',
        "as the .eval log",
    ),
)
NOT_RECOGNISED = (
    "not a trajectory format this site reads (ours, autoexperiment.trajectory/1, or an AutoExperiment text log, "
    "a mini-swe-agent .traj.json, a SWE-agent .traj, an Inspect .eval or .json log)"
)


def _json(data: bytes) -> Any:
    try:
        return json.loads(data.decode("utf-8-sig"))
    except (UnicodeDecodeError, json.JSONDecodeError, RecursionError):
        return None


def detect(data: bytes, value: Any = None) -> str | None:
    """The foreign format `data` is in, judged by content, or None (ours, or unknown). `value` is
    `data` already parsed as JSON, when the caller has it."""
    if inspect_log.looks_like_eval(data):
        return inspect_log.NAME_EVAL
    if value is None and data.lstrip()[:1] in (b"{", b"["):
        value = _json(data)
    if value is not None:
        if mini_swe_agent.looks_like(value):
            return mini_swe_agent.NAME
        if inspect_log.looks_like_json(value):
            return inspect_log.NAME_JSON
        if swe_agent.looks_like(value):
            return swe_agent.NAME
        return None
    if autoexperiment_log.looks_like(data):
        return autoexperiment_log.NAME
    return None


_BY_SUFFIX = (
    (".traj.json", mini_swe_agent.NAME),
    (".traj", swe_agent.NAME),
    (".eval", inspect_log.NAME_EVAL),
    (".txt", autoexperiment_log.NAME),
    (".log", autoexperiment_log.NAME),
)
_CONVERTERS = {
    autoexperiment_log.NAME: autoexperiment_log.convert,
    mini_swe_agent.NAME: mini_swe_agent.convert,
    swe_agent.NAME: swe_agent.convert,
    inspect_log.NAME_EVAL: inspect_log.convert_eval,
    inspect_log.NAME_JSON: inspect_log.convert_json,
}


def detect_and_convert(data: bytes, filename: str = "", value: Any = None) -> ConvertedTrajectory:
    """`data` converted to our trajectory format. Raises ForeignTrajectoryError naming the format
    (the one detected, else the one the file name suggests) and the problem."""
    name = detect(data, value)
    if name is None:
        lowered = filename.lower()
        name = next((format_name for suffix, format_name in _BY_SUFFIX if lowered.endswith(suffix)), None)
    if name is None:
        raise ForeignTrajectoryError("unknown format", NOT_RECOGNISED)
    converter = _CONVERTERS[name]
    source = value if value is not None and name in (mini_swe_agent.NAME, swe_agent.NAME, inspect_log.NAME_JSON) else data
    try:
        return converter(source, filename)
    except ForeignTrajectoryError:
        raise
    except (TypeError, AttributeError, KeyError, ValueError, RecursionError) as error:
        # A shape no reader check foresaw: still the uploader's file at fault, so told as such.
        raise ForeignTrajectoryError(name, f"unreadable ({type(error).__name__}: {error})") from None
