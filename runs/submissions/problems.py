"""What is wrong with an upload, and where: collected while it is read, raised once it is all read.

`submission_validate` (runs.submissions.validation) raises `SubmissionInvalid` listing every problem
as "line N: field: message" (zip members: "member: message"), or `SubmissionTooLarge`.
"""
from __future__ import annotations

from dataclasses import dataclass

from runs.limits import human_bytes
from runs.submissions.upload_limits import max_problems


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

    def raise_if_any(self) -> None:
        if self:
            raise SubmissionInvalid(self.items, self.count)


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
