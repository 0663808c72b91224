"""mini-swe-agent trajectories (`*.traj.json`), formats "mini-swe-agent-1" (mini-swe-agent 1.x) and
"mini-swe-agent-1.1" (2.x)::

    {"trajectory_format": "mini-swe-agent-1.1",
     "info": {"exit_status": "Submitted", "submission": "<patch or answer>", "mini_version": "2.0.0",
              "model_stats": {"instance_cost": 0.05, "api_calls": 12}, "config": {...}},
     "messages": [{"role": "system", "content": "..."}, {"role": "user", "content": "<task>"},
                  {"role": "assistant", "content": "THOUGHT ...\n```bash\nls\n```",
                   "extra": {"actions": [{"command": "ls"}], "cost": 0.01, "response": {"usage": {...}}}},
                  {"role": "user", "content": "<returncode>0</returncode>\n<output>\n...\n</output>",
                   "extra": {"returncode": 0}}, ...]}

Each assistant message is one step: its text is the thought, its command (the `extra.actions`
of 1.1, tool calls, or the one ```bash block of 1) the call of tool "bash", and the user or tool
messages after it the observation. Tokens and cost come from the message's `extra` when the
format records them; the total cost from `info.model_stats.instance_cost`.
"""
from __future__ import annotations

import json
import re
from typing import Any

from runs.agents.trajectory import EXIT_CODES, Step

from .base import (
    ConvertedTrajectory,
    ForeignTrajectoryError,
    as_text,
    build,
    integer,
    list_at,
    load_json,
    number,
    object_at,
    require,
    text_at,
)

NAME = "mini-swe-agent"
VERSIONS = ("mini-swe-agent-1", "mini-swe-agent-1.1")

_CODE_BLOCK = re.compile(r"```(?:bash|mswea_bash_command|sh)?[ \t]*\n(.*?)\n?```", re.DOTALL)
_RETURNCODE = re.compile(r"<returncode>\s*(-?\d+)\s*</returncode>")
_OUTPUT = re.compile(r"<output>\n?(.*?)\n?</output>", re.DOTALL)


def looks_like(value: Any) -> bool:
    return isinstance(value, dict) and str(value.get("trajectory_format", "")).startswith("mini-swe-agent")


def convert(data: bytes | Any, filename: str = "") -> ConvertedTrajectory:
    value = load_json(data, NAME) if isinstance(data, bytes) else data
    require(isinstance(value, dict), NAME, "a trajectory is a JSON object")
    version = value.get("trajectory_format")
    require(version in VERSIONS, NAME, f"trajectory_format {version!r} is not one this site reads ({', '.join(VERSIONS)})")
    messages = value.get("messages")
    require(isinstance(messages, list), NAME, "'messages' must be a list of chat messages")
    info = object_at(value, "info")
    steps: list[Step] = []
    for position, message in enumerate(messages, start=1):
        require(isinstance(message, dict), NAME, f"message {position}: must be an object, got {type(message).__name__}")
        role = message.get("role")
        require(isinstance(role, str), NAME, f"message {position}: 'role' is missing")
        if role == "assistant":
            steps.append(_assistant_step(message, len(steps) + 1, position))
        elif role in ("user", "tool") and steps:
            _add_observation(steps[-1], message)
        elif role == "exit" and steps:
            steps[-1].notes.append(as_text(message.get("content")))
    require(bool(steps), NAME, "the messages hold no assistant message: no steps")
    stats = object_at(info, "model_stats")
    submission = text_at(info, "submission") or ""
    model = _model_name(info)
    return build(
        format_name=NAME, version=version, steps=steps, agent=f"mini-swe-agent {info.get('mini_version', '')}".strip(),
        model=model, cost=number(stats["instance_cost"]) if "instance_cost" in stats else None,
        exit_status=str(info.get("exit_status") or ""),
        final_patch=submission if submission.lstrip().startswith(("diff --git", "--- ")) else None,
    )


def _model_name(info: dict) -> str:
    config = object_at(info, "config")
    model = object_at(config, "model")
    return str(model.get("model_name") or "")


def _assistant_step(message: dict, step_number: int, position: int) -> Step:
    content = as_text(message.get("content"))
    extra = object_at(message, "extra")
    actions = list_at(extra, "actions")
    commands: list[Any] = [action.get("command") for action in actions if isinstance(action, dict)]
    # mini-swe-agent 2 stores each tool call twice: as the model's `tool_calls` and as the parsed
    # `extra.actions`; the calls are read only when there are no parsed actions.
    calls = list_at(message, "tool_calls") if not commands else []
    for call in calls:
        function = call.get("function") if isinstance(call, dict) else None
        if isinstance(function, dict):
            try:
                arguments = json.loads(function.get("arguments") or "{}")
            except (TypeError, json.JSONDecodeError):
                raise ForeignTrajectoryError(NAME, f"message {position}: a tool call's arguments are not JSON") from None
            commands.append(arguments.get("command") if isinstance(arguments, dict) else None)
    thought = content
    if not commands:
        blocks = _CODE_BLOCK.findall(content)
        if len(blocks) == 1:
            commands = blocks
            thought = _CODE_BLOCK.sub("", content).strip()
    texts = [command for command in commands if isinstance(command, str)]
    step = Step(index=step_number, started_at="", thought=thought.strip())
    if texts:
        step.tool = "bash"
        step.arguments = {"command": "\n".join(texts)}
    usage = object_at(extra, "response").get("usage")
    if isinstance(usage, dict):
        step.input_tokens = integer(usage.get("prompt_tokens") or usage.get("input_tokens"))
        step.output_tokens = integer(usage.get("completion_tokens") or usage.get("output_tokens"))
    if "cost" in extra:
        step.cost = number(extra["cost"])
    else:
        step.cost_unknown = True
    return step


def _add_observation(step: Step, message: dict) -> None:
    content = as_text(message.get("content"))
    extra = object_at(message, "extra")
    code = extra.get("returncode")
    found = _RETURNCODE.search(content)
    if code is None and found:
        code = int(found.group(1))
    output = _OUTPUT.search(content)
    text = output.group(1) if output else content
    step.observation = f"{step.observation}\n{text}" if step.observation else text
    if isinstance(code, int) and not isinstance(code, bool) and EXIT_CODES[0] <= code <= EXIT_CODES[1]:
        step.exit_code = code
        step.error = step.error or code != 0
    elif step.tool is None:
        step.error = True  # a format error the agent was told about: no command ran
