"""SWE-agent trajectories (`*.traj`), as SWE-agent 0.x and 1.x write them::

    {"trajectory": [{"thought": "...", "action": "ls -la\n", "observation": "...", "response": "...",
                     "execution_time": 0.1, "state": {"working_dir": "/repo", "diff": "..."}}, ...],
     "history": [<the chat messages>],
     "info": {"exit_status": "submitted", "submission": "diff --git ...", "swe_agent_version": "1.0.1",
              "model_stats": {"instance_cost": 0.3, "tokens_sent": 12000, "tokens_received": 800}}}

One step per entry of `trajectory`: its thought, its action (a command line, our tool "bash"),
its observation. A step's diff is recorded when the entry's `state.diff` (what SWE-agent 1.x
keeps of `git diff` after the step) changed since the step before. SWE-agent has no per-step
tokens; the totals come from `info.model_stats`.
"""
from __future__ import annotations

from typing import Any

from runs.agents.trajectory import Step

from .base import ConvertedTrajectory, as_text, build, diff_changes, integer, load_json, number, object_at, require, text_at

NAME = "swe-agent"


def looks_like(value: Any) -> bool:
    return (
        isinstance(value, dict) and isinstance(value.get("trajectory"), list)
        and ("history" in value or "info" in value) and "trajectory_format" not in value
        and not (isinstance(value.get("format"), str) and value["format"].startswith("autoexperiment"))
    )


def convert(data: bytes | Any, filename: str = "") -> ConvertedTrajectory:
    value = load_json(data, NAME) if isinstance(data, bytes) else data
    require(isinstance(value, dict), NAME, "a .traj file is a JSON object")
    entries = value.get("trajectory")
    require(isinstance(entries, list), NAME, "'trajectory' must be a list of steps")
    require(bool(entries), NAME, "'trajectory' is empty: no steps")
    info = object_at(value, "info")
    steps: list[Step] = []
    previous_diff = ""
    for number_, entry in enumerate(entries, start=1):
        require(isinstance(entry, dict), NAME, f"step {number_}: must be an object, got {type(entry).__name__}")
        require(
            "action" in entry or "observation" in entry, NAME,
            f"step {number_}: has neither 'action' nor 'observation' (fields given: {', '.join(sorted(entry)) or 'none'})",
        )
        action = entry.get("action")
        require(action is None or isinstance(action, str), NAME, f"step {number_}: 'action' must be a string")
        step = Step(
            index=number_, started_at="",
            thought=as_text(entry.get("thought") or entry.get("response")),
            observation=as_text(entry.get("observation")),
            duration=number(entry.get("execution_time")),
        )
        if action and action.strip():
            step.tool = "bash"
            step.arguments = {"command": action.rstrip("\n")}
        state = object_at(entry, "state")
        diff = text_at(state, "diff")
        if diff is not None:
            if diff != previous_diff and diff.strip():
                # SWE-agent keeps the repository's whole diff, not the step's: shown as the state after it.
                step.files_changed = diff_changes(diff, note="SWE-agent's git diff of the repository after this step")
            previous_diff = diff
        steps.append(step)
    stats = object_at(info, "model_stats")
    version = str(info.get("swe_agent_version") or "unknown")
    submission = text_at(info, "submission")
    return build(
        format_name=NAME, version=version, steps=steps, agent=f"swe-agent {version}",
        input_tokens=integer(stats.get("tokens_sent")), output_tokens=integer(stats.get("tokens_received")),
        cost=number(stats["instance_cost"]) if "instance_cost" in stats else None,
        exit_status=str(info.get("exit_status") or ""), final_patch=submission,
    )
