"""Reads for submissions. Who may see or act on one is decided by runs.visibility."""
from __future__ import annotations

from dataclasses import dataclass

from django.db.models import Count, Q, QuerySet
from django.db.models.functions import Left

from runs.models import Attempt, Sample, Submission


@dataclass
class SubmissionSummary:
    attempts: int = 0
    samples: int = 0
    reported_passed: int = 0
    reexecuted: int = 0
    passed: int = 0  # reported AND re-executed pass
    reexecution_passed: int = 0
    mismatches: int = 0
    pending: int = 0
    suite_samples: int = 0  # samples of the suite at the submission's n values

    @staticmethod
    def _rate(part: int, whole: int) -> float | None:
        return part / whole if whole else None

    @property
    def reported_rate(self) -> float | None:
        return self._rate(self.reported_passed, self.attempts)

    @property
    def reexecuted_rate(self) -> float | None:
        """Share of re-executed attempts whose reported answer and re-execution both pass."""
        return self._rate(self.passed, self.reexecuted)

    def as_dict(self) -> dict:
        return {
            "attempts": self.attempts,
            "samples": self.samples,
            "suite_samples_at_these_n": self.suite_samples,
            "reported_passed": self.reported_passed,
            "reported_pass_rate": self.reported_rate,
            "reexecuted": self.reexecuted,
            "reexecution_passed": self.reexecution_passed,
            "passed": self.passed,
            "reexecuted_pass_rate": self.reexecuted_rate,
            "mismatches": self.mismatches,
            "pending_reexecution": self.pending,
        }


def submission_summary(*, submission: Submission) -> SubmissionSummary:
    run = submission.run
    aggregated = run.attempts.aggregate(
        n_attempts=Count("id"),
        n_samples=Count("sample", distinct=True),
        n_reported_passed=Count("id", filter=Q(reported_passed=True)),
        n_reexecuted=Count("id", filter=Q(reexecution_passed__isnull=False)),
        n_reexecution_passed=Count("id", filter=Q(reexecution_passed=True)),
        n_passed=Count("id", filter=Q(reexecution_passed__isnull=False, passed=True)),
        n_mismatches=Count("id", filter=Q(mismatch=True)),
    )
    counts = {key.removeprefix("n_"): value for key, value in aggregated.items()}
    counts["pending"] = counts["attempts"] - counts["reexecuted"]
    counts["suite_samples"] = Sample.objects.filter(paper__suite_id=run.suite_id, n__in=run.n_values or []).count()
    return SubmissionSummary(**counts)


# The submission page's table: everything but the big columns, and the answer's head only.
_ATTEMPT_TABLE_DEFERRED = (
    "trajectory", "final_patch", "final_answer_raw", "parsed_answer", "reported_score", "reexecution_score",
    "reexecution_output", "out_of_scope_edits", "infra_history", "timings", "held_out_scores",
)


def submission_attempts(*, submission: Submission) -> QuerySet[Attempt]:
    """The submission's attempts in sample order, as its page lists them: the heavy columns (each
    may hold megabytes) left out, the final answer's first 121 characters as `answer_head`."""
    return (
        submission.run.attempts.select_related("sample")
        .defer(*_ATTEMPT_TABLE_DEFERRED)
        .annotate(answer_head=Left("final_answer_raw", 121))
        .order_by("sample__n", "sample__sample_id", "index")
    )


def submissions_of(*, user) -> QuerySet[Submission]:
    return Submission.objects.filter(uploader=user).select_related("run__suite").order_by("-created_at", "-id")


def submission_get(*, pk: int) -> Submission:
    return Submission.objects.select_related("run__suite", "uploader").get(pk=pk)
