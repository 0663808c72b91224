"""The queue page: signed-in users only, counts by status, and the cancel / retry / resume buttons."""
import pytest
from django.contrib.auth.models import User
from django.urls import reverse

from runs.evaluation.kinds import RUN_ATTEMPT
from runs.evaluation.services import run_create
from runs.models import Attempt

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def alice(db):
    return User.objects.create_user("alice", password="a-long-password")


@pytest.fixture
def signed_in(client, alice):
    client.force_login(alice)
    return client


@pytest.fixture
def run(tiny_suite, redis_queue, alice):
    """Alice's run: the buttons are its owner's (tests/permissions covers everyone else)."""
    return run_create(suite=tiny_suite, agent="gold", n_values=[1], attempts_per_sample=2, created_by=alice)


def test_the_queue_needs_a_signed_in_user(client, run):
    for url in (reverse("runs:queue"), reverse("runs:run_detail", args=[run.pk])):
        response = client.get(url)
        assert response.status_code == 302 and "login" in response["Location"]
    response = client.post(reverse("runs:cancel", args=[run.pk]))
    assert response.status_code == 302 and "login" in response["Location"]
    assert run.attempts.filter(status=Attempt.QUEUED).count() == 6


def test_the_queue_shows_counts_progress_and_buttons(signed_in, run):
    attempts = list(run.attempts.order_by("pk"))
    Attempt.objects.filter(pk=attempts[0].pk).update(status=Attempt.DONE, passed=True)
    Attempt.objects.filter(pk=attempts[1].pk).update(status=Attempt.RUNNING)
    Attempt.objects.filter(pk=attempts[2].pk).update(status=Attempt.ERROR, failure_label=Attempt.INFRASTRUCTURE)

    response = signed_in.get(reverse("runs:queue"))

    assert response.status_code == 200
    html = response.content.decode()
    row = html[html.index(f'id="run-{run.pk}"'):]
    row = row[: row.index("</tr>")]
    assert 'data-status="running"' in row
    for name, count in (("queued", 3), ("done", 1), ("error", 1), ("cancelled", 0)):
        assert f'<td class="count-{name}">{count}</td>' in row
    # The running attempt links to its live replay.
    replay = reverse("replay:attempt", args=[attempts[1].pk])
    assert f'<td class="count-running">1 <a href="{replay}" class="live-link"' in row
    assert "33%" in row  # 2 of 6 ended
    for action in ("cancel", "retry_failed", "resume"):
        assert f'action="{reverse(f"runs:{action}", args=[run.pk])}"' in row
    assert "csrfmiddlewaretoken" in row
    assert 'id="auto-refresh"' in html and "js/auto_refresh.js" in html


def test_cancel_button(signed_in, run, redis_queue):
    assert redis_queue.count == 6
    response = signed_in.post(reverse("runs:cancel", args=[run.pk]), follow=True)
    assert response.status_code == 200
    assert "6 queued attempt(s) will not run" in response.content.decode()
    assert set(run.attempts.values_list("status", flat=True)) == {Attempt.CANCELLED}
    assert redis_queue.count == 0  # their jobs left the queue
    run.refresh_from_db()
    assert run.cancelled_at is not None and run.finished_at is not None


def test_retry_failed_button(signed_in, run, redis_queue):
    failed = run.attempts.order_by("pk").first()
    Attempt.objects.filter(pk=failed.pk).update(
        status=Attempt.ERROR, failure_label=Attempt.INFRASTRUCTURE, infra_failures=3, tries=3
    )
    Attempt.objects.filter(pk=run.attempts.order_by("pk")[1].pk).update(
        status=Attempt.DONE, failure_label=Attempt.WRONG_ANSWER
    )
    redis_queue.empty()

    response = signed_in.post(reverse("runs:retry_failed", args=[run.pk]), follow=True)

    assert "1 failed attempt(s) queued again" in response.content.decode()
    failed.refresh_from_db()
    assert (failed.status, failed.infra_failures, failed.failure_label) == (Attempt.QUEUED, 0, "")
    assert redis_queue.job_ids == [RUN_ATTEMPT.job_id(failed.pk, 3)]
    # A wrong answer is the model's result: not retried.
    assert run.attempts.filter(status=Attempt.DONE, failure_label=Attempt.WRONG_ANSWER).count() == 1


def test_resume_button_after_cancel(signed_in, run, redis_queue):
    signed_in.post(reverse("runs:cancel", args=[run.pk]))
    response = signed_in.post(reverse("runs:resume", args=[run.pk]), data={"next": reverse("runs:run_detail", args=[run.pk])})
    assert response.status_code == 302 and response["Location"] == reverse("runs:run_detail", args=[run.pk])
    assert set(run.attempts.values_list("status", flat=True)) == {Attempt.QUEUED}
    assert redis_queue.count == 6
    run.refresh_from_db()
    assert run.cancelled_at is None


def test_buttons_only_accept_post_and_known_runs(signed_in, run):
    assert signed_in.get(reverse("runs:cancel", args=[run.pk])).status_code == 405
    assert signed_in.post(reverse("runs:cancel", args=[run.pk + 1000])).status_code == 404
    response = signed_in.post(reverse("runs:cancel", args=[run.pk]), data={"next": "https://evil.example/"})
    assert response["Location"] == reverse("runs:queue")


def test_run_detail_lists_attempts(signed_in, run):
    attempt = run.attempts.order_by("pk").first()
    Attempt.objects.filter(pk=attempt.pk).update(
        status=Attempt.DONE, reported_passed=True, reexecution_passed=False, mismatch=True,
        failure_label=Attempt.WRONG_ANSWER, exit_status="submitted", cost=0.0123,
    )
    html = signed_in.get(reverse("runs:run_detail", args=[run.pk])).content.decode()
    row = html[html.index(f'id="attempt-{attempt.pk}"'):]
    row = row[: row.index("</tr>")]
    assert attempt.sample.sample_id in row and "submitted" in row
    assert "pass" in row and "fail" in row and "flagged" in row and "Wrong answer" in row and "$0.0123" in row
    assert html.count('<tr id="attempt-') == 6


def test_run_detail_links_running_attempts_to_their_live_replay(signed_in, run):
    running, queued = run.attempts.order_by("pk")[:2]
    Attempt.objects.filter(pk=running.pk).update(status=Attempt.RUNNING)
    html = signed_in.get(reverse("runs:run_detail", args=[run.pk])).content.decode()
    rows = {attempt.pk: html[html.index(f'id="attempt-{attempt.pk}"'):] for attempt in (running, queued)}
    rows = {pk: row[: row.index("</tr>")] for pk, row in rows.items()}
    assert f'<a href="{reverse("replay:attempt", args=[running.pk])}" class="live-link"' in rows[running.pk]
    assert "live-link" not in rows[queued.pk]
