"""The database is the truth: the healing queues again the waiting work whose job Redis lost.

A round of runs.evaluation.recovery.attempts_heal finds every kind of work the database holds as
waiting with no live job in Redis (missing: Redis restarted or flushed; or ended without claiming
it) and enqueues it once more, marked so that the run page says so; work queued a moment ago and
work never handed to RQ are left alone. With the tests' Redis database and no worker: each job is
looked at where it lies.
"""
from datetime import timedelta

import pytest
from django.conf import settings
from django.urls import reverse
from django.utils import timezone
from rq.job import JobStatus

from runs.evaluation.claims import claim
from runs.evaluation.kinds import RUN_ATTEMPT
from runs.evaluation.queue import enqueue, job_id_for, queue_named
from runs.evaluation.recovery import attempts_heal, attempts_requeue_lost
from runs.evaluation.services import run_create
from runs.evaluation.transplants import TRANSPLANT
from runs.models import Attempt, Transplant
from runs.submissions.reexecution import REEXECUTION
from runs.submissions.services import submission_create
from tests.replay.factories import make_user
from tests.submissions.helpers import HEADER, jsonl, record

pytestmark = pytest.mark.django_db


def _healed(capture) -> list[tuple[str, int]]:
    """One healing round's work queued again, its jobs enqueued as its transactions commit."""
    with capture(execute=True):
        return sorted(attempts_heal().requeued)


def _lost_notes(client, run) -> int:
    """How many of the run's attempts its page says were queued again after their job was lost."""
    page = client.get(reverse("runs:run_detail", args=[run.pk])).content.decode()
    notes = page.count('data-waiting="re-queued"')
    assert ("re-queued after its job was lost: Redis held no job for it" in page) == bool(notes)
    return notes


def test_waiting_attempts_whose_job_redis_lost_are_queued_again_once_and_say_so_until_claimed(
    tiny_suite, redis_queue, settings, admin_client, django_capture_on_commit_callbacks
):
    settings.ATTEMPT_LOST_JOB_GRACE_SECONDS = 20
    with django_capture_on_commit_callbacks(execute=True):
        run = run_create(suite=tiny_suite, agent="gold", n_values=[1])
    lost, ended, fresh = run.attempts.order_by("pk")
    assert sorted(redis_queue.job_ids) == sorted(job_id_for(attempt) for attempt in (lost, ended, fresh))
    an_hour_ago = timezone.now() - timedelta(hours=1)
    Attempt.objects.filter(pk__in=[lost.pk, ended.pk]).update(queued_at=an_hour_ago)
    assert _healed(django_capture_on_commit_callbacks) == []  # every job is there

    redis_queue.fetch_job(job_id_for(lost)).delete()  # as a Redis restart or flush leaves it
    job = redis_queue.fetch_job(job_id_for(ended))
    redis_queue.remove(job)
    job.set_status(JobStatus.FINISHED)  # ended without claiming its attempt
    # Enqueued a moment ago: as far as the healing can tell, its job may not be in Redis yet.
    redis_queue.fetch_job(job_id_for(fresh)).delete()

    assert _healed(django_capture_on_commit_callbacks) == sorted([("attempt", lost.pk), ("attempt", ended.pk)])
    # Their jobs again, with the ids of the tries they will make: enqueueing one twice does nothing.
    assert sorted(redis_queue.job_ids) == sorted([job_id_for(lost), job_id_for(ended)])
    assert redis_queue.fetch_job(job_id_for(ended)).get_status() == JobStatus.QUEUED
    assert _lost_notes(admin_client, run) == 2
    assert _healed(django_capture_on_commit_callbacks) == []  # once

    Attempt.objects.filter(pk=fresh.pk).update(queued_at=an_hour_ago)  # its grace is over
    assert _healed(django_capture_on_commit_callbacks) == [("attempt", fresh.pk)]
    assert _lost_notes(admin_client, run) == 3

    # Until a try claims it; the claim is fenced by the try number as ever.
    assert claim(RUN_ATTEMPT, attempt_id=lost.pk, job_id=job_id_for(lost)).job_lost_at is None
    assert _lost_notes(admin_client, run) == 2
    assert Attempt.objects.get(pk=lost.pk).tries == 1


def test_a_delayed_retry_is_live_until_lost_then_waits_the_rest_of_its_back_off(
    tiny_suite, redis_queue, admin_client, django_capture_on_commit_callbacks
):
    run = run_create(suite=tiny_suite, agent="gold", n_values=[1], sample_cap=1, enqueue=False)
    attempt = run.attempts.get()
    # Never handed to RQ (an in-process run, run_eval --sync): its process executes it.
    assert _healed(django_capture_on_commit_callbacks) == [] and redis_queue.connection.dbsize() == 0

    retry_at = timezone.now() + timedelta(seconds=60)
    entry = {"try": 1, "reason": "sandbox could not be opened", "at": timezone.now().isoformat(), "retry_at": retry_at.isoformat()}
    Attempt.objects.filter(pk=attempt.pk).update(tries=1, infra_failures=1, infra_history=[entry])
    attempt.refresh_from_db()
    with django_capture_on_commit_callbacks(execute=True):
        enqueue(RUN_ATTEMPT, attempts=[attempt], delay=60)
    Attempt.objects.filter(pk=attempt.pk).update(queued_at=timezone.now() - timedelta(hours=1))
    assert redis_queue.fetch_job(job_id_for(attempt)).get_status() == JobStatus.SCHEDULED
    assert _healed(django_capture_on_commit_callbacks) == []  # scheduled: live

    redis_queue.connection.flushdb()
    assert _healed(django_capture_on_commit_callbacks) == [("attempt", attempt.pk)]
    job = redis_queue.fetch_job(job_id_for(attempt))
    assert job.get_status() == JobStatus.SCHEDULED and redis_queue.count == 0
    due = redis_queue.scheduled_job_registry.get_scheduled_time(job)
    assert abs((due - retry_at).total_seconds()) <= 2  # the rest of its back-off, not another one
    assert _lost_notes(admin_client, run) == 1


def test_re_executions_and_transplants_whose_jobs_were_lost_are_queued_again_on_their_queues(
    tiny_suite, redis_queue, django_capture_on_commit_callbacks
):
    data = jsonl(record("tiny-paper_0", 0), header={**HEADER, "suite": "tiny"})
    with django_capture_on_commit_callbacks(execute=True):
        submission = submission_create(data=data, filename="lost.jsonl", uploader=make_user(), reexecute=True)
    [reexecution] = submission.run.attempts.all()
    function = reexecution.sample.functions.get()
    transplant = Transplant.objects.create(attempt=reexecution, function=function)
    an_hour_ago = timezone.now() - timedelta(hours=1)
    Attempt.objects.filter(pk=reexecution.pk).update(queued_at=an_hour_ago)
    Transplant.objects.filter(pk=transplant.pk).update(queued_at=an_hour_ago)
    redis_queue.connection.flushdb()

    assert _healed(django_capture_on_commit_callbacks) == sorted([("reexecution", reexecution.pk), ("transplant", transplant.pk)])
    assert redis_queue.job_ids == [REEXECUTION.job_id(reexecution.pk, 0)]
    assert queue_named(settings.TRANSPLANT_QUEUE).job_ids == [TRANSPLANT.job_id(transplant.pk, 0)]
    assert attempts_requeue_lost() == []
