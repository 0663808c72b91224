"""Helpers for the evaluation tests (test modules cannot import conftest)."""
from __future__ import annotations

import time
from pathlib import Path

import pytest
from django.conf import settings

from runs.models import Attempt, Run


def wait_for(condition, *, timeout: float = 60, interval: float = 0.1, message: str = "condition"):
    """Poll `condition()` until it returns something truthy; fail after `timeout` seconds."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = condition()
        if value:
            return value
        time.sleep(interval)
    pytest.fail(f"timed out after {timeout} s waiting for {message}")


def claimed_pid(claimed_by: str) -> int:
    """The process id in an attempt's `claimed_by` ("host:pid"): the work horse that claimed it."""
    return int(claimed_by.rsplit(":", 1)[1])


def gold_answer(attempt: Attempt) -> dict:
    """The gold results of an attempt's sample, keyed as the workspace labels its experiments."""
    from runs.benchmark.workspace import experiment_label
    from runs.suites.selectors import sample_experiments

    experiments = sample_experiments(sample=attempt.sample)
    return {experiment_label(number): e.gold_result for number, e in enumerate(experiments, start=1)}


def trajectory_files(attempt: Attempt) -> list[Path]:
    return sorted((Path(settings.WORKSPACE_ROOT) / "trajectories").glob(f"attempt-{attempt.pk}-try-*.json"))


def statuses(run: Run) -> dict[str, int]:
    counts: dict[str, int] = {}
    for status in run.attempts.values_list("status", flat=True):
        counts[status] = counts.get(status, 0) + 1
    return counts
