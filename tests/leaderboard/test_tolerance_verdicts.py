"""The tolerance ratio is written with every verdict, by the real write paths: upload scoring, then
re-execution of the uploaded patch. It must agree with the leaderboard's verdict at every step
(ratio <= 1 exactly when the attempt counts as passing)."""
from datetime import timedelta

import pytest
from django.utils import timezone

from leaderboard.rules import attempt_verdict
from runs.benchmark.scoring import DEFAULT_ATOL, DEFAULT_RTOL, flatten_numbers
from runs.evaluation.claims import ClaimOutcome
from runs.evaluation.recovery import attempt_overrun
from runs.models import Attempt, Sample
from runs.submissions.services import submission_create, submission_reexecute_sync
from runs.suites.selectors import sample_experiments
from tests.replay.factories import make_user
from tests.submissions import helpers
from tests.support import require_backend

pytestmark = pytest.mark.django_db


@pytest.fixture
def user(db):
    return make_user()


def scaled(value, factor):
    """A gold result with every number multiplied by `factor`."""
    if isinstance(value, dict):
        return {key: scaled(item, factor) for key, item in value.items()}
    if isinstance(value, list):
        return [scaled(item, factor) for item in value]
    return value * factor if isinstance(value, (int, float)) and not isinstance(value, bool) else value


def expected_ratio(sample: Sample, error: float) -> float:
    """The largest |error * gold| / (rtol * |gold| + atol) over the sample's numbers."""
    ratios = []
    for experiment in sample_experiments(sample=sample):
        rtol = DEFAULT_RTOL if experiment.rtol is None else experiment.rtol
        atol = DEFAULT_ATOL if experiment.atol is None else experiment.atol
        for gold in flatten_numbers(experiment.gold_result).values():
            ratios.append(abs(error * gold) / (rtol * abs(gold) + atol) if rtol * abs(gold) + atol else 0.0)
    return max(ratios)


def assert_agrees_with_verdict(attempts):
    for attempt in attempts:
        ratio = attempt.tolerance_ratio
        assert (ratio is not None and ratio <= 1) == attempt_verdict(attempt), (attempt.index, ratio)


def test_upload_scoring_sets_the_ratio(builtin, user):
    sample = Sample.objects.get(sample_id=helpers.SAMPLE)
    gold = helpers.gold_answer(sample)
    data = helpers.jsonl(
        helpers.record(index=0, final_answer=scaled(gold, 1.01)),
        helpers.record(index=1, final_answer=scaled(gold, 1.07)),
        helpers.record(index=2, final_answer="I could not run it."),
        helpers.record(index=3),  # no answer
    )
    submission = submission_create(data=data, filename="r.jsonl", uploader=user)
    attempts = list(submission.run.attempts.order_by("index"))
    assert attempts[0].tolerance_ratio == pytest.approx(expected_ratio(sample, 0.01), rel=1e-6)
    assert attempts[1].tolerance_ratio == pytest.approx(expected_ratio(sample, 0.07), rel=1e-6)
    assert attempts[1].tolerance_ratio > 1 and not attempts[1].reported_passed
    assert attempts[2].tolerance_ratio is None and attempts[3].tolerance_ratio is None
    assert_agrees_with_verdict(attempts)


@pytest.mark.slow
def test_reexecution_sets_the_ratio_of_the_final_verdict(builtin, user, workspace_root, tmp_path, settings):
    require_backend("bubblewrap")
    # The heartbeat thread's own connection cannot see this test's transaction, so a beat would
    # find the claim gone: keep it from beating during the few seconds this takes.
    settings.ATTEMPT_HEARTBEAT_SECONDS = 600
    sample = Sample.objects.get(sample_id=helpers.SAMPLE)
    gold, patch = helpers.gold_answer(sample), helpers.gold_patch(sample, tmp_path)
    masked_file = sample.functions.first().file
    stale = f"--- a/code/{masked_file}\n+++ b/code/{masked_file}\n@@ -1 +1 @@\n-no such line\n+nor this one\n"
    data = helpers.jsonl(
        helpers.record(index=0, final_answer=scaled(gold, 1.03), final_patch=patch),  # 3% off, the gold code
        helpers.record(index=1, final_answer=gold, final_patch=stale),  # exact, but the patch does not apply
    )
    submission = submission_create(data=data, filename="r.jsonl", uploader=user)
    reported = {attempt.index: attempt.tolerance_ratio for attempt in submission.run.attempts.all()}
    assert reported == {0: pytest.approx(expected_ratio(sample, 0.03), rel=1e-6), 1: 0.0}

    assert submission_reexecute_sync(submission=submission) == {"done": 2}
    gold_code, not_applied = submission.run.attempts.order_by("index")
    # The gold code reproduces gold (ratio about 0): the reported numbers' ratio is the larger.
    assert gold_code.reexecution_passed and gold_code.passed
    assert gold_code.tolerance_ratio == pytest.approx(reported[0], rel=1e-3)
    # Reported exactly, but the re-run printed no numbers: no tolerance would make it pass.
    assert "does not apply" in not_applied.reexecution_error
    assert not_applied.reported_passed and not not_applied.passed and not_applied.tolerance_ratio is None
    assert_agrees_with_verdict([gold_code, not_applied])


def test_an_overrun_try_keeps_no_verdict_of_an_earlier_try(builtin, user):
    # A try that scored (here: an uploaded attempt's passing answer) is followed by one that runs past
    # its budget and is killed; the killed try gave no answer, so nothing of the earlier score may count.
    sample = Sample.objects.get(sample_id=helpers.SAMPLE)
    submission = submission_create(data=helpers.jsonl(helpers.record(index=0, final_answer=helpers.gold_answer(sample))),
                                   filename="r.jsonl", uploader=user)
    attempt = submission.run.attempts.get()
    assert attempt.reported_passed and attempt.tolerance_ratio is not None and attempt.tolerance_ratio <= 1
    Attempt.objects.filter(pk=attempt.pk).update(
        status=Attempt.RUNNING, claimed_at=timezone.now() - timedelta(days=1), job_id="in-process")
    attempt.refresh_from_db()

    assert attempt_overrun(attempt=attempt) == ClaimOutcome.OVERRAN
    attempt.refresh_from_db()
    assert (attempt.reported_passed, attempt.reported_score, attempt.final_answer_raw, attempt.tolerance_ratio) == (
        None, None, None, None)
    assert attempt_verdict(attempt) is False
