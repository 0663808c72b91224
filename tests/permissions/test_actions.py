"""Acting on a run or a submission (cancel, resume, retry failed, re-execute, hide, unhide) is for
its owner and staff; a command-line run is staff's. Anyone else is refused (403 for a visible one,
404 for a hidden one, the sign-in page when anonymous) and nothing changes: not a row, not a job."""
from __future__ import annotations

import re

import pytest
from django.test import Client
from django.urls import reverse

from runs.evaluation.kinds import RUN_ATTEMPT
from runs.evaluation.queue import attempts_enqueue
from runs.models import Attempt, Run, Submission
from runs.submissions.reexecution import REEXECUTION
from tests.replay.factories import make_attempt, make_run, make_sample, make_user

RUN_ACTIONS = ["cancel", "resume", "retry_failed", "hide", "unhide"]
SUBMISSION_ACTIONS = ["reexecute", "hide", "unhide"]


@pytest.fixture
def live_run(people, redis_queue, django_capture_on_commit_callbacks):
    """The owner's run with one attempt of each kind the buttons act on: queued (its job waiting in
    Redis: cancel takes it off), failed (retry queues it) and cancelled (resume queues it)."""
    sample = make_sample(func_ids=(0,))
    run = make_run(suite=sample.paper.suite, created_by=people.owner)
    queued = make_attempt(sample=sample, run=run, status=Attempt.QUEUED, index=0)
    make_attempt(sample=sample, run=run, status=Attempt.ERROR, failure_label=Attempt.INFRASTRUCTURE, index=1)
    make_attempt(sample=sample, run=run, status=Attempt.CANCELLED, index=2)
    with django_capture_on_commit_callbacks(execute=True):
        attempts_enqueue(attempts=[queued])
    assert redis_queue.job_ids == [RUN_ATTEMPT.job_id(queued.pk, 0)]
    return run


def _state(run: Run) -> tuple:
    run = Run.objects.get(pk=run.pk)
    attempts = list(run.attempts.order_by("pk").values_list("pk", "status", "tries", "infra_failures", "failure_label", "finished_at"))
    return run.hidden, run.cancelled_at, run.finished_at, attempts


def _post(client: Client, url: str, capture) -> tuple:
    """POST, running whatever the request left to do on commit (enqueueing jobs) as a commit would."""
    with capture(execute=True) as callbacks:
        response = client.post(url)
    return response, callbacks


@pytest.mark.parametrize("hidden", [False, True], ids=["visible", "hidden"])
@pytest.mark.parametrize("who", ["anonymous", "stranger"])
def test_others_cannot_act_on_a_run(people, live_run, redis_queue, django_capture_on_commit_callbacks, who, hidden):
    Run.objects.filter(pk=live_run.pk).update(hidden=hidden)
    before, jobs = _state(live_run), redis_queue.job_ids
    client = people.client(who)
    for action in RUN_ACTIONS:
        response, callbacks = _post(client, reverse(f"runs:{action}", args=[live_run.pk]), django_capture_on_commit_callbacks)
        if who == "anonymous":
            assert response.status_code == 302 and "/accounts/login/" in response["Location"], action
        else:
            assert response.status_code == (404 if hidden else 403), action
        assert callbacks == [], action
    assert _state(live_run) == before
    assert redis_queue.job_ids == jobs


def test_no_buttons_on_other_peoples_runs(people, live_run):
    client = people.client("stranger")
    queue = client.get(reverse("runs:queue")).content.decode()
    row = queue[queue.index(f'id="run-{live_run.pk}"'):]
    assert "<form" not in row[: row.index("</tr>")]
    assert "<form" not in client.get(reverse("runs:run_detail", args=[live_run.pk])).content.decode().split("<main>")[1]


def test_the_owner_acts_on_their_run(people, live_run, redis_queue, django_capture_on_commit_callbacks):
    client = people.client("owner")
    page = client.get(reverse("runs:run_detail", args=[live_run.pk])).content.decode()
    for action in ("cancel", "retry_failed", "resume", "hide"):
        assert f'action="{reverse(f"runs:{action}", args=[live_run.pk])}"' in page
    failed = live_run.attempts.get(status=Attempt.ERROR)
    response, _ = _post(client, reverse("runs:retry_failed", args=[live_run.pk]), django_capture_on_commit_callbacks)
    assert response.status_code == 302
    assert RUN_ATTEMPT.job_id(failed.pk, 0) in redis_queue.job_ids
    response, _ = _post(client, reverse("runs:hide", args=[live_run.pk]), django_capture_on_commit_callbacks)
    assert response.status_code == 302 and Run.objects.get(pk=live_run.pk).hidden
    assert "Unhide" in client.get(reverse("runs:run_detail", args=[live_run.pk])).content.decode()
    client.post(reverse("runs:unhide", args=[live_run.pk]))
    assert not Run.objects.get(pk=live_run.pk).hidden


def test_a_command_line_run_is_staffs(people, live_run, redis_queue, django_capture_on_commit_callbacks):
    Run.objects.filter(pk=live_run.pk).update(created_by=None)
    before = _state(live_run)
    for who in ("owner", "stranger"):  # the former owner is nobody's now: no one but staff
        response, callbacks = _post(people.client(who), reverse("runs:retry_failed", args=[live_run.pk]),
                                    django_capture_on_commit_callbacks)
        assert response.status_code == 403 and callbacks == []
    assert _state(live_run) == before
    staff = people.client("staff")
    response, _ = _post(staff, reverse("runs:cancel", args=[live_run.pk]), django_capture_on_commit_callbacks)
    assert response.status_code == 302
    assert Run.objects.get(pk=live_run.pk).cancelled_at is not None and redis_queue.job_ids == []


def test_hide_needs_csrf(people, live_run):
    client = Client(enforce_csrf_checks=True)
    client.force_login(people.owner)
    assert client.post(reverse("runs:hide", args=[live_run.pk])).status_code == 403
    assert client.get(reverse("runs:hide", args=[live_run.pk])).status_code == 405
    assert not Run.objects.get(pk=live_run.pk).hidden


@pytest.fixture
def submission(people, world) -> Submission:
    """The world's submission, made public; one attempt not re-executed yet."""
    Run.objects.filter(pk=world.submission.run_id).update(hidden=False)
    return Submission.objects.get(pk=world.submission.pk)


def _submission_state(submission: Submission) -> tuple:
    fresh = Submission.objects.select_related("run").get(pk=submission.pk)
    attempts = list(fresh.run.attempts.values_list("pk", "tries", "infra_failures", "reexecution_passed"))
    return fresh.run.hidden, fresh.status, fresh.reexecution_requested_at, attempts


@pytest.mark.parametrize("hidden", [False, True], ids=["visible", "hidden"])
@pytest.mark.parametrize("who", ["anonymous", "stranger"])
def test_others_cannot_act_on_a_submission(people, submission, redis_queue, django_capture_on_commit_callbacks, who, hidden):
    Run.objects.filter(pk=submission.run_id).update(hidden=hidden)
    before = _submission_state(submission)
    client = people.client(who)
    for action in SUBMISSION_ACTIONS:
        response, callbacks = _post(client, reverse(f"submissions:{action}", args=[submission.pk]),
                                    django_capture_on_commit_callbacks)
        if who == "anonymous":
            assert response.status_code == 302 and "/accounts/login/" in response["Location"], action
        else:
            assert response.status_code == (404 if hidden else 403), action
        assert callbacks == [], action
    assert _submission_state(submission) == before
    assert redis_queue.job_ids == []
    if who == "stranger" and not hidden:
        assert "<form" not in client.get(reverse("submissions:detail", args=[submission.pk])).content.decode().split("<main>")[1]


@pytest.mark.parametrize("who", ["owner", "staff"])
def test_uploader_and_staff_act_on_a_submission(people, submission, redis_queue, django_capture_on_commit_callbacks, who):
    client = people.client(who)
    page = client.get(reverse("submissions:detail", args=[submission.pk])).content.decode()
    assert re.search(r'action="/submissions/\d+/hide/"', page)
    response, _ = _post(client, reverse("submissions:reexecute", args=[submission.pk]), django_capture_on_commit_callbacks)
    assert response.status_code == 302
    attempt = submission.run.attempts.get()
    assert redis_queue.job_ids == [REEXECUTION.job_id(attempt.pk, 0)]
    _post(client, reverse("submissions:hide", args=[submission.pk]), django_capture_on_commit_callbacks)
    assert Submission.objects.get(pk=submission.pk).hidden
    assert "Hidden: this submission" in client.get(reverse("submissions:detail", args=[submission.pk])).content.decode()
    _post(client, reverse("submissions:unhide", args=[submission.pk]), django_capture_on_commit_callbacks)
    assert not Submission.objects.get(pk=submission.pk).hidden


def test_staff_hide_and_unhide_runs_in_the_admin(people, world):
    admin = Client()
    admin.force_login(make_user(is_staff=True, is_superuser=True))
    changelist = "/admin/runs/run/"
    admin.post(changelist, {"action": "hide", "_selected_action": [world.public_run.pk]})
    assert Run.objects.get(pk=world.public_run.pk).hidden
    assert admin.get(changelist + "?hidden__exact=1").context["cl"].result_count == 4
    admin.post(changelist, {"action": "unhide", "_selected_action": [world.public_run.pk, world.hidden_run.pk]})
    assert set(Run.objects.filter(hidden=False).values_list("pk", flat=True)) == {world.public_run.pk, world.hidden_run.pk}
    # The submission's list shows and filters by its run's flag.
    assert admin.get("/admin/runs/submission/?run__hidden__exact=1").context["cl"].result_count == 1
