"""What every reader of another tool's trajectory shares: the result type, the error, and small
helpers to build our steps. Pure: no Django, no ORM."""
from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from runs.agents.trajectory import FORMAT, FileChange, Header, Step, Trajectory
from runs.benchmark.patch_parsing import parse_patch
from runs.benchmark.patches import ChangeKind, PatchError


class ForeignTrajectoryError(ValueError):
    """A file in another tool's format that cannot be read: the message names the format, what is
    wrong and where (a step, a message, a line or a member)."""

    def __init__(self, format_name: str, problem: str) -> None:
        self.format_name = format_name
        self.problem = problem
        super().__init__(f"{format_name}: {problem}")


@dataclass
class ConvertedTrajectory:
    """A foreign trajectory in our format (`trajectory`, a dict per runs.agents.trajectory.FORMAT),
    and where it came from."""

    trajectory: dict[str, Any]
    source_format: str
    source_version: str

    @property
    def steps(self) -> list[dict[str, Any]]:
        return self.trajectory["steps"]


def build(
    *, format_name: str, version: str, steps: list[Step], agent: str, model: str = "", input_tokens: int = 0,
    output_tokens: int = 0, cost: float | None = None, exit_status: str = "", final_patch: str | None = None,
    sample_id: str = "",
) -> ConvertedTrajectory:
    """Our trajectory from converted steps. The header records the source format and version
    (`versions.source_format`, `versions.source_version`), and totals: the source's own when it has
    them, else the sum of the steps'."""
    header = Header(
        sample_id=sample_id,
        agent=agent,
        model=model,
        versions={"trajectory_format": FORMAT, "source_format": format_name, "source_version": version},
        exit_status=exit_status or "imported",
        input_tokens=input_tokens or sum(step.input_tokens for step in steps),
        output_tokens=output_tokens or sum(step.output_tokens for step in steps),
        cost=cost if cost is not None else sum(step.cost for step in steps),
        cost_unknown=cost is None and not any(step.cost for step in steps),
    )
    trajectory = Trajectory(header=header, steps=steps, final_patch=final_patch or None)
    return ConvertedTrajectory(trajectory.to_dict(), format_name, version)


def as_text(value: Any) -> str:
    """A message content as text: strings as they are, lists of content parts joined."""
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    if isinstance(value, list):
        parts = []
        for part in value:
            if isinstance(part, dict):
                parts.append(str(part.get("text") or part.get("reasoning") or ""))
            else:
                parts.append(str(part))
        return "\n".join(part for part in parts if part)
    return json.dumps(value, ensure_ascii=False, default=str)


def load_json(data: bytes, format_name: str) -> Any:
    try:
        return json.loads(data.decode("utf-8-sig"))
    except UnicodeDecodeError as error:
        raise ForeignTrajectoryError(format_name, f"not valid UTF-8 (byte {error.start + 1})") from None
    except json.JSONDecodeError as error:
        raise ForeignTrajectoryError(
            format_name, f"invalid JSON: {error.msg} (line {error.lineno}, column {error.colno})"
        ) from None
    except RecursionError:
        raise ForeignTrajectoryError(format_name, "invalid JSON: nested too deeply") from None


def require(condition: bool, format_name: str, problem: str) -> None:
    if not condition:
        raise ForeignTrajectoryError(format_name, problem)


def object_at(mapping: dict, key: str) -> dict:
    """`mapping[key]` when it is a JSON object, else an empty one (missing, null or something else)."""
    value = mapping.get(key)
    return value if isinstance(value, dict) else {}


def list_at(mapping: dict, key: str) -> list:
    """`mapping[key]` when it is a JSON array, else an empty one."""
    value = mapping.get(key)
    return value if isinstance(value, list) else []


def text_at(mapping: dict, key: str) -> str | None:
    """`mapping[key]` when it is a string, else None."""
    value = mapping.get(key)
    return value if isinstance(value, str) else None


def integer(value: Any) -> int:
    """A token count from a source that may omit it or write null."""
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else 0


def number(value: Any) -> float:
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) and value >= 0 else 0.0


def diff_changes(diff: str, note: str = "") -> list[FileChange]:
    """A source's unified diff as our per-file changes; one entry for the whole text when it does
    not parse as a patch (it is still shown, as the source wrote it)."""
    try:
        files = parse_patch(diff)
    except PatchError:
        files = []
    if not files:
        return [FileChange(path="(unparsed diff)", change=ChangeKind.MODIFIED, diff=diff, note=note or "the source's diff, unparsed")]
    return [FileChange(path=file.path, change=file.change, diff=file.text, note=note) for file in files]
