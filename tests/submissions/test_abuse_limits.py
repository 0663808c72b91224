"""Abuse limits on submissions: the API's rates (wrong tokens per address, requests per user and
per address), uploads and re-execution requests per user on both channels, and the cap on queued
re-executions per user, checked against a real RQ queue on Redis."""
from __future__ import annotations

import io

import pytest
from django.test import Client

from runs.models import Sample, Submission
from runs.submissions.services import submission_create, token_create
from tests.replay.factories import make_user
from tests.submissions.helpers import SAMPLE, gold_answer, jsonl, record

API = "/api/submissions/"
UPLOAD = "/submissions/upload/"


@pytest.fixture
def limits(settings):
    """Set some of settings.RATE_LIMITS for this test: limits(upload="2/h")."""

    def set_limits(**rates: str) -> None:
        settings.RATE_LIMITS = {**settings.RATE_LIMITS, **{name.replace("_", "-"): rate for name, rate in rates.items()}}

    return set_limits


@pytest.fixture
def key(builtin, user) -> str:
    return token_create(user=user, name="ci")[1]


def good_file(attempts: int = 1) -> bytes:
    answer = gold_answer(Sample.objects.get(sample_id=SAMPLE))
    return jsonl(*(record(SAMPLE, index, final_answer=answer) for index in range(attempts)))


def api_post(data: bytes, key: str, *, query: str = "", address: str = "127.0.0.1"):
    return Client(REMOTE_ADDR=address).post(
        API + query, data=data, content_type="application/jsonl", HTTP_AUTHORIZATION=f"Token {key}"
    )


def api_get(pk: int, key: str, *, address: str = "127.0.0.1"):
    return Client(REMOTE_ADDR=address).get(f"{API}{pk}/", HTTP_AUTHORIZATION=f"Token {key}")


def web_upload(client: Client, data: bytes, *, reexecute: bool = False, follow: bool = False):
    upload = io.BytesIO(data)
    upload.name = "results.jsonl"
    return client.post(UPLOAD, {"file": upload, **({"reexecute": "on"} if reexecute else {})}, follow=follow)


def assert_429_json(response, text: str) -> dict:
    assert response.status_code == 429, response.content
    assert response["Content-Type"] == "application/json"
    body = response.json()
    assert text in body["error"], body
    assert body["retry_after"] >= 1 and int(response["Retry-After"]) == body["retry_after"]
    return body


# --- the API's rates -----------------------------------------------------------------------------


def test_wrong_tokens_from_one_address_are_cut_off_then_even_a_right_one(stored, key, settings):
    allowed = int(settings.RATE_LIMITS["api-bad-token"].split("/")[0])
    attacker = "203.0.113.50"
    for number in range(allowed):
        assert api_get(stored.pk, f"aex_guess{number}", address=attacker).status_code == 401
    body = assert_429_json(api_get(stored.pk, "aex_guess-again", address=attacker), "Too many API requests with a missing or wrong token")
    assert f"the limit is {allowed} per 10 minutes per address" in body["error"]
    assert Client(REMOTE_ADDR=attacker).get(f"{API}{stored.pk}/").status_code == 429  # no token at all
    assert api_get(stored.pk, key, address=attacker).status_code == 429  # a guess that hits is no use either
    assert api_get(stored.pk, key, address="198.51.100.1").status_code == 200  # other addresses are unaffected


def test_a_valid_token_is_limited_per_user_across_its_tokens_and_addresses(stored, user, key, limits):
    limits(api_user="3/m")
    second_key = token_create(user=user, name="laptop")[1]
    statuses = [api_get(stored.pk, key, address="203.0.113.1").status_code for _ in range(2)]
    statuses.append(api_get(stored.pk, second_key, address="203.0.113.2").status_code)
    assert statuses == [200, 200, 200]
    assert_429_json(api_get(stored.pk, second_key, address="203.0.113.3"), "Too many API requests: the limit is 3 per minute per user")
    other_key = token_create(user=make_user(), name="other")[1]
    assert api_get(stored.pk, other_key, address="203.0.113.1").status_code != 429


def test_every_api_request_counts_per_address(stored, key, limits):
    limits(api_address="2/m")
    assert api_get(stored.pk, key).status_code != 429
    assert api_get(stored.pk, "aex_wrong").status_code == 401
    assert_429_json(api_get(stored.pk, key), "Too many API requests: the limit is 2 per minute per address")


# --- uploads and re-execution requests -----------------------------------------------------------


def test_uploads_are_limited_per_user_on_both_channels_and_nothing_is_stored_past_it(snapshot, user, key, limits):
    limits(upload="2/h")
    client = Client()
    client.force_login(user)
    assert web_upload(client, good_file()).status_code == 302
    assert api_post(good_file(), key).status_code == 201
    stored = Submission.objects.count()

    response = web_upload(client, good_file())
    assert response.status_code == 429 and int(response["Retry-After"]) >= 1
    html = response.content.decode()
    assert 'id="rate-limited"' in html and "Too many uploads: the limit is 2 per hour per user. Try again in" in html
    assert_429_json(api_post(good_file(), key), "Too many uploads: the limit is 2 per hour per user")
    assert Submission.objects.count() == stored

    other = Client()
    other.force_login(make_user())
    assert web_upload(other, good_file()).status_code == 302


def test_reexecution_requests_are_limited_per_user(builtin, user, key, limits, capture_queue):
    limits(reexecution="2/h")
    client = Client()
    client.force_login(user)
    with capture_queue() as queue:
        assert web_upload(client, good_file(), reexecute=True).status_code == 302
        assert api_post(good_file(), key, query="?reexecute=1").status_code == 201
    submission = Submission.objects.filter(uploader=user).first()
    queued, count = list(queue.job_ids), Submission.objects.count()
    assert len(queued) == 2

    with capture_queue():
        assert_429_json(api_post(good_file(), key, query="?reexecute=1"), "Too many re-execution requests: the limit is 2 per hour per user")
        response = web_upload(client, good_file(), reexecute=True)
        assert response.status_code == 429 and "Too many re-execution requests" in response.content.decode()
        response = client.post(f"/submissions/{submission.pk}/reexecute/")
        assert response.status_code == 429
    assert Submission.objects.count() == count and queue.job_ids == queued
    # An upload without re-execution is still welcome.
    assert api_post(good_file(), key).status_code == 201


# --- the cap on queued re-executions -------------------------------------------------------------


@pytest.fixture
def capture_queue(private_queue, django_capture_on_commit_callbacks):
    """`with capture_queue() as queue:` a real RQ queue of this test alone; jobs enqueued on commit
    inside the block are put on it when the block ends."""
    import contextlib

    @contextlib.contextmanager
    def capturing():
        with django_capture_on_commit_callbacks(execute=True):
            yield private_queue

    return capturing


def test_the_cap_refuses_reexecution_but_keeps_the_upload(builtin, user, key, settings, capture_queue):
    settings.MAX_QUEUED_REEXECUTIONS_PER_USER = 3
    client = Client()
    client.force_login(user)
    with capture_queue() as queue:
        first = api_post(good_file(2), key, query="?reexecute=1")
        assert first.status_code == 201 and first.json()["reexecution_requested"] is True
    assert queue.count == 2

    # Two more would make four queued: stored and scored, not queued, and the answer says why.
    with capture_queue():
        response = api_post(good_file(2), key, query="?reexecute=1")
    body = response.json()
    assert response.status_code == 201, body
    assert body["reexecution_requested"] is False and body["status"] == "scored"
    assert body["summary"]["attempts"] == 2 and body["summary"]["reported_passed"] == 2
    expected = (
        f"{user.username} has 2 re-execution attempt(s) queued or running and this would add 2, over the limit of 3 per user"
    )
    assert body["reexecution_refused"] == f"re-execution was not queued: {expected}; request it again once some have finished"
    assert queue.count == 2

    # The upload page says so too, and the Re-execute button of the refused submission as well.
    with capture_queue():
        page = web_upload(client, good_file(2), reexecute=True, follow=True)
    html = page.content.decode()
    assert page.status_code == 200 and "Re-execution was not queued: " + expected in html
    assert "Re-execution is queued." not in html
    refused = Submission.objects.get(pk=body["id"])
    with capture_queue():
        page = client.post(f"/submissions/{refused.pk}/reexecute/", follow=True)
    assert "Re-execution was not queued: " + expected in page.content.decode()
    refused.refresh_from_db()
    assert refused.status == Submission.Status.SCORED and refused.reexecution_requested_at is None
    assert queue.count == 2

    # Staff are not capped: a staff member's press queues the refused submission's attempts.
    staff = Client()
    staff.force_login(make_user(is_staff=True))
    with capture_queue():
        page = staff.post(f"/submissions/{refused.pk}/reexecute/", follow=True)
    assert "Re-execution queued for 2 attempt(s)." in page.content.decode()
    assert queue.count == 4


def test_the_cap_counts_only_live_reexecutions(builtin, user, settings, capture_queue):
    settings.MAX_QUEUED_REEXECUTIONS_PER_USER = 2
    with capture_queue() as queue:
        done = submission_create(data=good_file(2), uploader=user, reexecute=True)
    assert queue.count == 2
    # Those two end (one with a verdict, one given up after infrastructure failures): room again.
    first, second = done.run.attempts.order_by("pk")
    first.reexecution_passed = True
    first.save()
    second.infra_failures = 99
    second.save()
    with capture_queue():
        again = submission_create(data=good_file(2), uploader=user, reexecute=True)
    again.refresh_from_db()
    assert again.status == Submission.Status.REEXECUTING and again.status_detail == ""
    assert queue.count == 4
