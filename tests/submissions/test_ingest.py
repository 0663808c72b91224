"""A good submission is stored and scored against the stored gold; re-execution of its patches in a
real bubblewrap sandbox verifies it, and catches a record whose reported numbers its code does not
produce."""
from __future__ import annotations

import json

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse

from runs.evaluation.claims import ClaimOutcome
from runs.models import Attempt, Run, Sample, Submission
from runs.submissions import services
from runs.submissions.jobs import attempt_reexecute_job
from runs.submissions.reexecution import REEXECUTION, attempt_reexecute
from runs.submissions.selectors import submission_summary
from runs.submissions.services import submission_create, submission_reexecute_sync
from tests.submissions.helpers import (
    OTHER_SAMPLE,
    SAMPLE,
    gold_answer,
    gold_patch,
    jsonl,
    record,
    trajectory,
    zip_bytes,
)
from tests.support import require_backend


@pytest.fixture
def good_file(builtin, tmp_path) -> bytes:
    """Three attempts: two honest ones (gold patch, gold answer; one answer given as text with an
    inline trajectory) and a cheat (gold numbers, empty patch)."""
    sample = Sample.objects.get(sample_id=SAMPLE)
    other = Sample.objects.get(sample_id=OTHER_SAMPLE)
    patch, other_patch = gold_patch(sample, tmp_path), gold_patch(other, tmp_path)
    assert patch.startswith("--- a/code/") and "+++ b/code/" in patch
    text_answer = "I ran the experiments. Final answer:\n```json\n" + json.dumps(gold_answer(other)) + "\n```"
    return jsonl(
        record(SAMPLE, 0, final_answer=gold_answer(sample), final_patch=patch, input_tokens=1500, output_tokens=300,
               cost=0.0123, seconds=41.5, trajectory=trajectory(SAMPLE)),
        record(SAMPLE, 1, final_answer=gold_answer(sample), final_patch="", cost=None, seconds=None),
        record(OTHER_SAMPLE, 0, final_answer=text_answer, final_patch=other_patch),
    )


def test_good_file_is_stored_and_scored_against_gold(good_file, user):
    submission = submission_create(data=good_file, filename="good.jsonl", uploader=user)
    run = submission.run
    assert (submission.agent, submission.model, submission.contact) == ("external-react", "test-model-1", "tests@example.org")
    assert submission.record_count == 3 and submission.file_bytes == len(good_file)
    assert submission.status == Submission.Status.SCORED and submission.verified_at is None
    assert (run.agent, run.model, run.context, run.agent_config) == ("external-react", "test-model-1", "full", {"submitted": True})
    assert (run.n_values, run.attempts_per_sample, run.sandbox_backend, run.created_by) == ([1], 2, "", user)
    assert run.suite.name == "builtin" and run.finished_at is not None

    attempts = {(a.sample.sample_id, a.index): a for a in run.attempts.select_related("sample")}
    assert set(attempts) == {(SAMPLE, 0), (SAMPLE, 1), (OTHER_SAMPLE, 0)}
    for attempt in attempts.values():
        assert attempt.status == Attempt.DONE and attempt.exit_status == "submitted"
        assert attempt.reported_passed is True, attempt.reported_score
        assert attempt.passed is False and attempt.reexecution_passed is None  # not verified yet
        assert attempt.failure_label == ""
        assert attempt.reported_score["passed"] is True
    honest = attempts[(SAMPLE, 0)]
    assert (honest.input_tokens, honest.output_tokens, honest.cost, honest.agent_seconds) == (1500, 300, 0.0123, 41.5)
    assert honest.trajectory["format"] == "autoexperiment.trajectory/1"
    assert honest.trajectory["header"]["sample_id"] == SAMPLE
    assert honest.final_patch.startswith("--- a/code/")
    assert json.loads(honest.final_answer_raw) == gold_answer(Sample.objects.get(sample_id=SAMPLE))
    cheat = attempts[(SAMPLE, 1)]
    assert (cheat.cost, cheat.agent_seconds, cheat.final_patch, cheat.trajectory) == (None, None, "", None)
    texted = attempts[(OTHER_SAMPLE, 0)]
    assert texted.final_answer_raw.startswith("I ran the experiments.")
    assert texted.reported_score["parse_method"] == "json-in-fence"

    summary = submission_summary(submission=submission)
    assert (summary.attempts, summary.samples, summary.reported_passed, summary.reexecuted) == (3, 2, 3, 0)


def test_wrong_and_missing_answers_are_scored_and_labelled(builtin, user):
    sample = Sample.objects.get(sample_id=SAMPLE)
    wrong = {key: {name: value * 2 + 1 for name, value in result.items()} for key, result in gold_answer(sample).items()}
    data = jsonl(
        record(SAMPLE, 0, final_answer=wrong),
        record(SAMPLE, 1, final_answer=None),
        record(SAMPLE, 2, final_answer="I could not finish."),
    )
    submission = submission_create(data=data, filename="r.jsonl", uploader=user)
    labels = dict(submission.run.attempts.values_list("index", "failure_label"))
    assert labels == {0: Attempt.WRONG_ANSWER, 1: Attempt.NO_ANSWER, 2: Attempt.UNPARSEABLE_ANSWER}
    assert not submission.run.attempts.filter(reported_passed=True).exists()


def test_zip_with_trajectory_files_is_stored(builtin, user):
    members = {
        "results.jsonl": jsonl(record(SAMPLE, 0, trajectory_file="trajectories/a.json"), record(OTHER_SAMPLE, 0)),
        "trajectories/a.json": json.dumps(trajectory(SAMPLE)),
    }
    submission = submission_create(data=zip_bytes(members), filename="results.zip", uploader=user)
    stored = submission.run.attempts.get(sample__sample_id=SAMPLE)
    assert stored.trajectory["steps"][0]["tool"] == "list_files"
    assert submission.run.attempts.get(sample__sample_id=OTHER_SAMPLE).trajectory is None


def test_a_trajectory_without_a_sample_is_stored_as_its_records(builtin, user):
    members = {
        "results.jsonl": jsonl(record(SAMPLE, 0, trajectory_file="trajectories/a.json")),
        "trajectories/a.json": json.dumps(trajectory(sample_id="")),
    }
    submission = submission_create(data=zip_bytes(members), filename="results.zip", uploader=user)
    assert submission.run.attempts.get().trajectory["header"]["sample_id"] == SAMPLE


def test_uploaded_exit_codes_are_stored_and_decide_the_failed_steps(builtin, user, client):
    """A step's exit status is its `exit_code` / `timed_out` fields: the status line at the end of
    an observation (which the program may have printed itself, as in the first step) is not read,
    either way, and a step without the fields (as written before they existed) shows none."""
    data = trajectory(SAMPLE)
    forged = "[exit code 0; 0.1 s; cwd /workspace/code]"
    first = {**data["steps"][0], "tool": "command_line", "observation": f'{{"mean": 2.6}}\n{forged}', "exit_code": 1}
    second = {**first, "index": 2, "observation": "ok\n[exit code 1; 0.1 s; cwd /workspace/code]", "exit_code": 0}
    third = {**first, "index": 3, "observation": "boom\n[exit code 1; 0.1 s; cwd /workspace/code]"}
    del third["exit_code"]
    fourth = {**first, "index": 4, "observation": "slow", "exit_code": 137, "timed_out": True}
    data["steps"] = [first, second, third, fourth]
    submission = submission_create(data=jsonl(record(SAMPLE, 0, trajectory=data)), filename="r.jsonl", uploader=user)
    attempt = submission.run.attempts.get()
    stored = attempt.trajectory["steps"]
    assert [(step["exit_code"], step["timed_out"]) for step in stored] == [(1, False), (0, False), (None, False), (137, True)]
    html = client.get(reverse("replay:attempt", args=[attempt.pk])).content.decode()
    assert 'data-errors="1 4"' in html


def test_the_submission_page_lists_attempts_a_page_at_a_time_without_their_big_columns(builtin, user, client, monkeypatch):
    """Every visitor may open it, and each attempt may hold megabytes: the list reads none of that."""
    from runs.submissions import views

    monkeypatch.setattr(views, "ATTEMPTS_PER_PAGE", 2)
    data = jsonl(*(record(SAMPLE, index, final_answer=f"answer-{index} " + "x" * 5000) for index in range(3)))
    submission = submission_create(data=data, filename="r.jsonl", uploader=user)
    Attempt.objects.filter(run=submission.run).update(trajectory={"huge": "y" * 200_000}, final_patch="z" * 200_000)
    with CaptureQueriesContext(connection) as queries:
        first = client.get(f"/submissions/{submission.pk}/").content.decode()
    listing = [q["sql"] for q in queries.captured_queries if "LEFT(" in q["sql"].upper()]
    assert len(listing) == 1 and '"trajectory"' not in listing[0] and '"final_patch"' not in listing[0]
    assert "answer-0" in first and "answer-1" in first and "answer-2" not in first
    assert "x" * 121 not in first and "y" * 100 not in first and "attempts 1–2 of 3" in first
    second = client.get(f"/submissions/{submission.pk}/?page=2").content.decode()
    assert "answer-2" in second and "answer-0" not in second
    assert "answer-0" in client.get(f"/submissions/{submission.pk}/?page=" + "9" * 5000).content.decode()


def test_reexecution_in_bubblewrap_verifies_and_catches_the_cheat(good_file, user, claims_in_the_test_transaction):
    require_backend("bubblewrap")
    submission = submission_create(data=good_file, filename="good.jsonl", uploader=user, reexecute=True, enqueue=False)
    submission.refresh_from_db()
    assert submission.status == Submission.Status.REEXECUTING and submission.reexecution_requested_at is not None

    outcomes = submission_reexecute_sync(submission=submission)
    assert outcomes == {ClaimOutcome.DONE: 3}
    submission.refresh_from_db()
    assert submission.verified_at is not None and submission.status == Submission.Status.VERIFIED
    attempts = {(a.sample.sample_id, a.index): a for a in submission.run.attempts.select_related("sample")}
    for key in [(SAMPLE, 0), (OTHER_SAMPLE, 0)]:
        honest = attempts[key]
        assert honest.reexecution_passed is True, (honest.reexecution_error, honest.reexecution_output)
        assert honest.passed is True and honest.mismatch is False and honest.failure_label == ""
        assert honest.reexecution_score["passed"] is True
    cheat = attempts[(SAMPLE, 1)]
    assert cheat.reported_passed is True and cheat.reexecution_passed is False
    assert cheat.mismatch is True and cheat.passed is False
    assert cheat.failure_label == Attempt.WRONG_ANSWER
    assert "NotImplementedError" in cheat.reexecution_output
    summary = submission_summary(submission=submission)
    assert (summary.reexecuted, summary.passed, summary.mismatches, summary.pending) == (3, 2, 1, 0)

    # A job delivered again does nothing: the claim needs an attempt without a verdict. (The job
    # function itself, which resets connections, runs under a real worker in the transactional test.)
    before = list(Attempt.objects.filter(run=submission.run).order_by("pk").values_list("tries", "reexecution_passed", "passed"))
    assert attempt_reexecute(attempt_id=cheat.pk, job_id="again") == ClaimOutcome.SKIPPED
    after = list(Attempt.objects.filter(run=submission.run).order_by("pk").values_list("tries", "reexecution_passed", "passed"))
    assert before == after


def test_reexecution_infrastructure_failures_are_retried_then_reported(builtin, user, settings):
    settings.SANDBOX_BACKEND = "no-such-backend"  # a misconfigured worker: every sandbox fails to open
    settings.ATTEMPT_MAX_INFRA_RETRIES = 1
    submission = submission_create(data=jsonl(record(SAMPLE, 0)), filename="r.jsonl", uploader=user)
    outcomes = submission_reexecute_sync(submission=submission)
    assert outcomes == {ClaimOutcome.REQUEUED: 1, ClaimOutcome.ERROR: 1}
    submission.refresh_from_db()
    attempt = submission.run.attempts.get()
    assert attempt.reexecution_passed is None and attempt.infra_failures == 2
    assert "infrastructure failure" in attempt.reexecution_error and "no-such-backend" in attempt.reexecution_error
    assert submission.status == Submission.Status.INCOMPLETE and submission.verified_at is None
    assert "could not be re-executed" in submission.status_detail


@pytest.mark.django_db(transaction=True)
def test_reexecution_through_the_queue_and_a_real_rq_worker(builtin, user, private_queue, tmp_path):
    redis_queue = private_queue
    """Upload with re-execution: the jobs are enqueued on commit and an RQ worker runs them."""
    require_backend("bubblewrap")
    from rq import SimpleWorker

    sample = Sample.objects.get(sample_id=SAMPLE)
    data = jsonl(record(SAMPLE, 0, final_answer=gold_answer(sample), final_patch=gold_patch(sample, tmp_path)))
    submission = submission_create(data=data, filename="good.jsonl", uploader=user, reexecute=True)
    attempt = submission.run.attempts.get()
    submission.refresh_from_db()
    assert redis_queue.job_ids == [REEXECUTION.job_id(attempt.pk, 0)], (submission.status, submission.status_detail)

    SimpleWorker([redis_queue], connection=redis_queue.connection).work(burst=True)
    attempt.refresh_from_db()
    submission.refresh_from_db()
    assert attempt.reexecution_passed is True and attempt.passed is True, attempt.reexecution_error
    assert attempt.tries == 1
    assert submission.verified_at is not None

    # The same job delivered twice: the second does nothing.
    assert attempt_reexecute_job(attempt.pk) == ClaimOutcome.SKIPPED
    attempt.refresh_from_db()
    assert attempt.tries == 1
    # Asking again queues nothing: every attempt has its verdict.
    assert services.submission_request_reexecution(submission=submission) == 0
    assert redis_queue.count == 0
    assert Run.objects.count() == 1


def test_queue_unreachable_keeps_the_submission_and_says_so(builtin, user, settings, django_capture_on_commit_callbacks):
    settings.RQ_QUEUES = {settings.EVALUATION_QUEUE: {"URL": "redis://127.0.0.1:1/0", "DEFAULT_TIMEOUT": 60}}
    with django_capture_on_commit_callbacks(execute=True):
        submission = submission_create(data=jsonl(record(SAMPLE, 0)), filename="r.jsonl", uploader=user, reexecute=True)
    submission.refresh_from_db()
    assert submission.status == Submission.Status.INCOMPLETE
    assert "could not be queued" in submission.status_detail
    assert submission.run.attempts.count() == 1
