"""Stored uploads of every version of the format still validate, and score as they did.

tests/fixtures/uploads/ holds a directory per version (submission-1, ...) of example uploads (a
JSONL file and a zip with trajectory members, ours and another tool's) as a client of that version
wrote them, and expected.json, what storing each gave when the version was current. A new version of the format
adds its directory; the older ones stay, read through `schema.UPGRADES`.
"""
from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest

from runs.models import Submission, TrajectorySource
from runs.submissions import schema
from runs.submissions.problems import SubmissionInvalid
from runs.submissions.services import submission_create
from runs.submissions.validation import submission_validate
from tests.submissions.helpers import HEADER, SAMPLE, jsonl, record

UPLOADS = Path(__file__).parent.parent / "fixtures" / "uploads"
STORED = sorted(path for path in UPLOADS.glob("submission-*/*") if path.name != "expected.json")


def _version_directory(version: str) -> str:
    return "submission-" + version.rsplit("/", 1)[-1]


def stored_summary(submission: Submission) -> dict:
    """What storing an upload gave: the submission, its run, and each attempt as scored."""
    run = submission.run
    attempts = []
    for attempt in run.attempts.select_related("sample").order_by("sample__sample_id", "index"):
        trajectory = attempt.trajectory
        source = TrajectorySource.objects.filter(attempt=attempt).first()
        attempts.append({
            "sample_id": attempt.sample.sample_id, "index": attempt.index, "exit_status": attempt.exit_status,
            "final_answer_raw": attempt.final_answer_raw, "parsed_answer": attempt.parsed_answer,
            "reported_score": attempt.reported_score, "reported_passed": attempt.reported_passed,
            "passed": attempt.passed, "failure_label": attempt.failure_label,
            "tolerance_ratio": attempt.tolerance_ratio, "input_tokens": attempt.input_tokens,
            "output_tokens": attempt.output_tokens, "cost": attempt.cost, "agent_seconds": attempt.agent_seconds,
            "final_patch_sha256": hashlib.sha256(attempt.final_patch.encode()).hexdigest(),
            "trajectory": None if trajectory is None else {
                "sample_id": trajectory["header"]["sample_id"],
                "steps": len(trajectory["steps"]),
                "source_format": (trajectory["header"].get("versions") or {}).get("source_format"),
            },
            "source": None if source is None else {
                "filename": source.filename, "source_format": source.source_format, "size": source.size,
                "sha256": source.sha256,
            },
        })
    return {
        "submission": {
            "model": submission.model, "agent": submission.agent, "description": submission.description,
            "contact": submission.contact, "record_count": submission.record_count,
        },
        "run": {
            "context": run.context, "n_values": run.n_values, "attempts_per_sample": run.attempts_per_sample,
            "agent_config": run.agent_config,
        },
        "attempts": attempts,
    }


def test_every_version_of_the_format_has_stored_uploads():
    versions = [schema.FORMAT, *schema.UPGRADES]
    assert sorted(_version_directory(version) for version in versions) == sorted(
        path.name for path in UPLOADS.iterdir() if path.is_dir()
    )
    for directory in UPLOADS.iterdir():
        expected = json.loads((directory / "expected.json").read_text())
        assert sorted(expected) == sorted(path.name for path in directory.iterdir() if path.name != "expected.json")


@pytest.mark.parametrize("path", STORED, ids=[f"{path.parent.name}/{path.name}" for path in STORED])
def test_a_stored_upload_still_validates_and_scores_as_before(builtin, user, path):
    expected = json.loads((path.parent / "expected.json").read_text())[path.name]

    submission = submission_create(data=path.read_bytes(), filename=path.name, uploader=user)

    assert stored_summary(submission) == expected


def test_an_earlier_version_is_upgraded_line_by_line_before_validation(builtin, monkeypatch):
    # A made-up version 0 that called a record's final patch "patch".
    def from_0(line: dict) -> dict:
        return {("final_patch" if name == "patch" else name): value for name, value in line.items()}

    monkeypatch.setitem(schema.UPGRADES, "autoexperiment.submission/0", (schema.FORMAT, from_0))
    header = {**HEADER, "format": "autoexperiment.submission/0"}
    line = record()
    line["patch"] = line.pop("final_patch")

    validated = submission_validate(data=jsonl(line, header=header), filename="old.jsonl")

    assert validated.header.format == schema.FORMAT
    assert [(item.record.sample_id, item.record.final_patch) for item in validated.records] == [(SAMPLE, "")]
    # Read as the current version, the same file is refused field by field, as before.
    monkeypatch.delitem(schema.UPGRADES, "autoexperiment.submission/0")
    with pytest.raises(SubmissionInvalid) as refused:
        submission_validate(data=jsonl(line, header=header), filename="old.jsonl")
    assert refused.value.messages() == [
        "line 1: format: unsupported format a string (\"autoexperiment.submission/0\"); "
        "this site reads 'autoexperiment.submission/1'",
        "line 2: patch: unknown record field (known fields: attempt_index, cost, final_answer, final_patch, "
        "input_tokens, output_tokens, sample_id, seconds, trajectory, trajectory_file, type)",
        'line 2: final_patch: required field is missing (use "" when the agent changed nothing)',
    ]
