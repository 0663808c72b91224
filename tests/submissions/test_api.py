"""The token-authenticated API: 401/403 for missing, unknown and revoked tokens, 201 with a score
summary, 400 with every problem, 413 for oversized bodies, and the read endpoint."""
from __future__ import annotations

import io

import pytest
from django.test import Client

from runs.models import ApiToken, Run, Sample, Submission
from runs.submissions.services import token_create, token_revoke
from tests.replay.factories import make_user
from tests.submissions.helpers import SAMPLE, gold_answer, jsonl, record

URL = "/api/submissions/"


@pytest.fixture
def token_key(builtin, user):
    token, key = token_create(user=user, name="ci")
    return token, key


@pytest.fixture
def good(builtin) -> bytes:
    return jsonl(record(SAMPLE, 0, final_answer=gold_answer(Sample.objects.get(sample_id=SAMPLE))), record(SAMPLE, 1))


def post(data: bytes, key: str | None = None, *, query: str = "", client: Client | None = None, **extra):
    headers = {"HTTP_AUTHORIZATION": f"Token {key}"} if key is not None else {}
    return (client or Client()).post(URL + query, data=data, content_type="application/jsonl", **headers, **extra)


def test_missing_token_is_401_with_a_challenge(good):
    response = post(good)
    assert response.status_code == 401
    assert response["WWW-Authenticate"].startswith("Token")
    assert "Authorization: Token <key>" in response.json()["error"]
    assert Submission.objects.count() == 0


def test_unknown_token_is_401(good):
    response = post(good, "aex_not-a-real-key")
    assert response.status_code == 401 and response.json() == {"error": "invalid token"}


def test_other_scheme_is_401(good, token_key):
    response = Client().post(URL, data=good, content_type="application/jsonl", HTTP_AUTHORIZATION="Basic dXNlcjpwYXNz")
    assert response.status_code == 401
    assert "unsupported authorization scheme" in response.json()["error"]


def test_revoked_token_is_403(good, token_key):
    token, key = token_key
    token_revoke(token=token)
    response = post(good, key)
    assert response.status_code == 403
    assert "revoked" in response.json()["error"]
    assert Submission.objects.count() == 0


def test_inactive_user_is_403(good, token_key, user):
    user.is_active = False
    user.save()
    response = post(good, token_key[1])
    assert response.status_code == 403 and "inactive" in response.json()["error"]


def test_get_on_the_collection_is_405(token_key):
    response = Client().get(URL, HTTP_AUTHORIZATION=f"Token {token_key[1]}")
    assert response.status_code == 405 and response["Allow"] == "POST"


def test_raw_body_is_stored_and_scored(good, token_key, user):
    token, key = token_key
    client = Client(enforce_csrf_checks=True)  # the token API needs no CSRF token
    response = post(good, key, client=client, HTTP_X_FILENAME="run-17.jsonl")
    assert response.status_code == 201, response.content
    body = response.json()
    submission = Submission.objects.get(pk=body["id"])
    assert response["Location"] == f"/api/submissions/{submission.pk}/"
    assert body["url"].endswith(f"/submissions/{submission.pk}/")
    assert (body["run_id"], body["suite"], body["agent"], body["model"]) == (submission.run_id, "builtin", "external-react", "test-model-1")
    assert body["status"] == "scored" and body["verified"] is False and body["reexecution_requested"] is False
    assert body["summary"]["attempts"] == 2
    assert body["summary"]["reported_passed"] == 1
    assert body["summary"]["reported_pass_rate"] == 0.5
    assert body["summary"]["reexecuted"] == 0
    assert (submission.uploader, submission.token, submission.channel, submission.filename) == (user, token, "api", "run-17.jsonl")
    token.refresh_from_db()
    assert token.last_used_at is not None


def test_reexecute_flag_in_the_query(good, token_key):
    response = post(good, token_key[1], query="?reexecute=1")
    assert response.status_code == 201
    body = response.json()
    assert body["reexecution_requested"] is True and body["status"] == "reexecuting"


def test_multipart_body_with_reexecute_field(good, token_key):
    upload = io.BytesIO(good)
    upload.name = "results.jsonl"
    response = Client().post(URL, {"file": upload, "reexecute": "1"}, HTTP_AUTHORIZATION=f"Token {token_key[1]}")
    assert response.status_code == 201, response.content
    body = response.json()
    assert body["reexecution_requested"] is True
    assert Submission.objects.get(pk=body["id"]).filename == "results.jsonl"


def test_transplants_switched_off_in_the_query_or_a_multipart_field(good, token_key):
    assert Run.objects.get(submission__pk=post(good, token_key[1]).json()["id"]).transplants is True
    assert Run.objects.get(submission__pk=post(good, token_key[1], query="?transplants=0").json()["id"]).transplants is False
    upload = io.BytesIO(good)
    upload.name = "results.jsonl"
    response = Client().post(URL, {"file": upload, "transplants": "false"}, HTTP_AUTHORIZATION=f"Token {token_key[1]}")
    assert Run.objects.get(submission__pk=response.json()["id"]).transplants is False


def test_a_transplants_flag_that_is_not_a_boolean_is_400_and_stores_nothing(good, token_key):
    response = post(good, token_key[1], query="?transplants=sometimes")
    assert response.status_code == 400
    assert response.json()["error"] == "transplants must be 1 or 0 (true or false), got 'sometimes'"
    assert Submission.objects.count() == 0


def test_multipart_without_a_file_field_is_400(token_key):
    response = Client().post(URL, {"results": "x"}, HTTP_AUTHORIZATION=f"Token {token_key[1]}")
    assert response.status_code == 400
    assert "field named 'file'" in response.json()["error"]


def test_invalid_file_is_400_with_every_problem(token_key):
    data = jsonl(record(SAMPLE, 0, cost=-1), record(SAMPLE, 0, seconds="slow"))
    response = post(data, token_key[1])
    assert response.status_code == 400
    body = response.json()
    assert body["problem_count"] == 3
    assert body["problems"] == [
        "line 2: cost: must not be negative, got -1",
        'line 3: seconds: must be a number or null, got a string ("slow")',
        f"line 3: attempt_index: duplicate attempt: sample '{SAMPLE}' attempt 0 is already given on line 2",
    ]
    assert body["details"][0] == {
        "line": 2, "field": "cost", "member": None, "message": "must not be negative, got -1",
        "text": "line 2: cost: must not be negative, got -1",
    }
    assert Submission.objects.count() == 0


def test_oversized_multipart_is_413(token_key, settings):
    settings.SUBMISSION_MAX_BYTES = 1000
    upload = io.BytesIO(b"x" * 50_000)
    upload.name = "big.jsonl"
    response = Client().post(URL, {"file": upload}, HTTP_AUTHORIZATION=f"Token {token_key[1]}")
    assert response.status_code == 413
    assert response.json()["limit_bytes"] == 1000
    assert "nothing was stored" in response.json()["error"]
    assert Submission.objects.count() == 0


def test_oversized_raw_body_is_413(token_key, settings):
    settings.SUBMISSION_MAX_BYTES = 1000
    response = post(b"{}" * 1000, token_key[1])
    assert response.status_code == 413
    assert response.json()["limit_bytes"] == 1000


def test_read_endpoint_and_hidden_submissions(good, token_key):
    created = post(good, token_key[1]).json()
    response = Client().get(f"{URL}{created['id']}/", HTTP_AUTHORIZATION=f"Token {token_key[1]}")
    assert response.status_code == 200 and response.json()["summary"] == created["summary"]
    _, stranger_key = token_create(user=make_user())
    assert Client().get(f"{URL}{created['id']}/", HTTP_AUTHORIZATION=f"Token {stranger_key}").status_code == 200
    Run.objects.filter(submission=created["id"]).update(hidden=True)
    assert Client().get(f"{URL}{created['id']}/", HTTP_AUTHORIZATION=f"Token {stranger_key}").status_code == 404
    owner = Client().get(f"{URL}{created['id']}/", HTTP_AUTHORIZATION=f"Token {token_key[1]}")
    assert owner.status_code == 200 and owner.json()["hidden"] is True
    assert Client().get(f"{URL}{created['id']}/").status_code == 401
    assert Client().get(f"{URL}999999/", HTTP_AUTHORIZATION=f"Token {token_key[1]}").status_code == 404


def test_only_the_hash_of_a_key_is_stored(token_key):
    token, key = token_key
    import hashlib

    stored = ApiToken.objects.filter(pk=token.pk).values()[0]
    assert key not in [str(value) for value in stored.values()]
    assert stored["key_hash"] == hashlib.sha256(key.encode()).hexdigest()
    assert key.startswith(stored["prefix"]) and len(stored["prefix"]) == 12
