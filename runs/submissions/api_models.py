"""The submissions API's response bodies as pydantic models: runs.submissions.api builds its
answers through them, and autoexperiment_site.openapi publishes their JSON schemas, so the
OpenAPI description and the live responses come from one definition.

The shapes are those of api.py's docstring; they must not change without a new API version
(a command-line client and researchers' scripts read them).
"""
from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field


class Strict(BaseModel):
    # A key the code adds without adding it here fails the response, and the schema says so.
    model_config = ConfigDict(extra="forbid")


class SubmissionSummary(Strict):
    """Counts of a submission's attempts, as runs.submissions.selectors.SubmissionSummary.as_dict gives them."""

    attempts: int
    samples: int
    suite_samples_at_these_n: int = Field(description="samples of the suite at the submission's n values")
    reported_passed: int
    reported_pass_rate: float | None = Field(description="reported_passed / attempts; null without attempts")
    reexecuted: int
    reexecution_passed: int
    passed: int = Field(description="attempts whose reported answer and re-execution both pass")
    reexecuted_pass_rate: float | None
    mismatches: int
    pending_reexecution: int


class Submission(Strict):
    """A stored submission: the 201 of an upload and the body of its status GET."""

    id: int
    url: str = Field(description="the submission's page on the site (absolute)")
    run_id: int
    suite: str
    agent: str
    model: str
    status: Literal["scored", "reexecuting", "verified", "incomplete"]
    status_detail: str
    verified: bool
    verified_at: str | None = Field(description="ISO 8601, when re-execution verified every attempt")
    reexecution_requested: bool
    hidden: bool
    flagged: bool
    summary: SubmissionSummary
    reexecution_refused: str | None = Field(
        default=None,
        description="only on a 201 that asked to re-execute over the uploader's cap: why nothing was queued "
                    "(the submission is stored and scored all the same)",
    )


class Error(Strict):
    """Every refusal: `error` names the problem."""

    error: str = Field(min_length=1)
    limit_bytes: int | None = Field(default=None, description="413 only: the largest body accepted")
    retry_after: int | None = Field(default=None, description="429 only: seconds to wait (also the Retry-After header)")


class UploadProblem(Strict):
    line: int | None
    field: str | None
    member: str | None = Field(description="the zip member the problem is in, for a zip upload")
    message: str
    text: str = Field(description="the problem as one line: member, line, field and message")


class UploadRefused(Strict):
    """A 400 for a file whose records are wrong: nothing was stored."""

    error: str = Field(min_length=1)
    problem_count: int = Field(description="every problem found; `problems` holds the first SUBMISSION_MAX_PROBLEMS")
    problems: list[str]
    details: list[UploadProblem]


def dump(model: type[BaseModel], payload: dict) -> dict:
    """`payload` checked against `model`, as JSON-ready data, without the optional keys it did not have."""
    return model.model_validate(payload).model_dump(mode="json", exclude_unset=True)
