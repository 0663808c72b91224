"""Checks of an upload's records together, and against the database: attempt indexes without
duplicates or gaps, the number of records, the suite, its samples and their gold results.

They read every record's `RecordKey`, known even for a record whose other fields are wrong, so
that a wrong cost and an unknown sample on one line are both reported.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from runs.models import Sample, Suite
from runs.submissions.problems import Problems
from runs.submissions.schema import SubmissionHeader
from runs.submissions.upload_limits import max_records
from runs.suites.selectors import sample_experiments


@dataclass(frozen=True)
class RecordKey:
    """Where a record is and which attempt it claims to be, known even when other fields are bad."""

    line: int
    sample_id: str
    attempt_index: int | None


def attempt_indexes_check(keys: list[RecordKey], record_lines: int, problems: Problems, member: str | None) -> None:
    """Each (sample_id, attempt_index) once, each sample's indexes 0..k-1, at most max_records()."""
    first_line: dict[tuple[str, int], int] = {}
    by_sample: dict[str, list[RecordKey]] = {}
    for key in keys:
        if key.attempt_index is None:
            continue
        pair = (key.sample_id, key.attempt_index)
        if pair in first_line:
            problems.add(
                f"duplicate attempt: sample {key.sample_id!r} attempt {key.attempt_index} is already given on line "
                f"{first_line[pair]}",
                line=key.line, field="attempt_index", member=member,
            )
            continue
        first_line[pair] = key.line
        by_sample.setdefault(key.sample_id, []).append(key)
    for sample_id, sample_keys in by_sample.items():
        given = sorted({key.attempt_index for key in sample_keys})
        missing = sorted(set(range(given[-1] + 1)) - set(given))
        if missing:
            shown = ", ".join(str(index) for index in missing[:10]) + (" ..." if len(missing) > 10 else "")
            listed = ", ".join(str(index) for index in given[:10]) + (" ..." if len(given) > 10 else "")
            problems.add(
                f"sample {sample_id!r} has attempts {listed} but not {shown}; "
                "each sample's attempt indexes run 0..k-1 without gaps",
                line=max(sample_keys, key=lambda key: key.attempt_index).line, field="attempt_index", member=member,
            )
    if record_lines > max_records():
        problems.add(
            f"the file holds {record_lines:,} records; at most {max_records():,} are accepted per submission", member=member
        )


def database_check(
    header: SubmissionHeader, header_line: int, keys: list[RecordKey], problems: Problems, member: str | None
) -> tuple[Any, dict, dict]:
    """(suite, {sample_id: Sample}, {sample_id: [Experiment]}) for the samples the records name,
    each of them scorable; what is unknown or cannot be scored goes to `problems`."""
    suite = Suite.objects.filter(name=header.suite).first()
    if suite is None:
        known = ", ".join(Suite.objects.order_by("name").values_list("name", flat=True)) or "none"
        problems.add(
            f"no suite named {header.suite!r} on this site (imported suites: {known})",
            line=header_line, field="suite", member=member,
        )
        return None, {}, {}
    wanted = sorted({key.sample_id for key in keys})
    samples = {
        sample.sample_id: sample
        for sample in Sample.objects.filter(paper__suite=suite, sample_id__in=wanted).select_related("paper")
    }
    hint = _sample_hint(suite)
    experiments: dict[str, list] = {}
    reported: set[str] = set()
    for record in keys:
        sample = samples.get(record.sample_id)
        if sample is None:
            problems.add(
                f"no sample {record.sample_id!r} in suite {suite.name!r}{hint}",
                line=record.line, field="sample_id", member=member,
            )
            continue
        if record.sample_id in experiments or record.sample_id in reported:
            continue
        found = sample_experiments(sample=sample)
        problem = _unscorable(sample, found)
        if problem:
            problems.add(problem, line=record.line, field="sample_id", member=member)
            reported.add(record.sample_id)
            continue
        experiments[record.sample_id] = found
    return suite, samples, experiments


def _sample_hint(suite: Suite) -> str:
    """Sample ids the suite has, to show beside one it does not."""
    example = list(Sample.objects.filter(paper__suite=suite).order_by("n", "sample_id").values_list("sample_id", flat=True)[:3])
    if example:
        return f" (for example {', '.join(repr(s) for s in example)})"
    return " (the suite has no samples yet: import_suite --samples N creates them)"


def _unscorable(sample: Sample, found: list) -> str | None:
    """Why an answer to `sample` (whose experiments are `found`) cannot be scored here, or None."""
    if not found:
        return f"sample {sample.sample_id!r} cannot be scored: it has no experiments"
    missing = [experiment.exp_id for experiment in found if experiment.gold_result is None]
    if missing:
        return (
            f"sample {sample.sample_id!r} cannot be scored: experiment(s) {', '.join(map(str, missing))} of paper "
            f"{sample.paper.paper_id} have no gold result on this site"
        )
    return None
