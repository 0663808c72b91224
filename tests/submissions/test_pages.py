"""The submission pages: sign-in and CSRF on the forms, token management, the submission page
(escaping, hidden and flagged submissions, re-execution requests), the admin, `runs.visibility`."""
from __future__ import annotations

import io
import re

import pytest
from django.test import Client

from runs.models import ApiToken, Attempt, Run, Sample, Submission
from runs.submissions.services import submission_create, token_create
from runs.visibility import public_runs_q, runs_visible_q, runs_visible_to
from tests.replay.factories import make_user
from tests.submissions.helpers import HEADER, SAMPLE, gold_answer, jsonl, record

UPLOAD = "/submissions/upload/"


def _file(data: bytes, name: str = "results.jsonl") -> io.BytesIO:
    upload = io.BytesIO(data)
    upload.name = name
    return upload


@pytest.fixture
def good(builtin) -> bytes:
    return jsonl(record(SAMPLE, 0, final_answer=gold_answer(Sample.objects.get(sample_id=SAMPLE))))


# --- sign-in and CSRF ----------------------------------------------------------------------------


def test_upload_page_requires_sign_in(good):
    client = Client()
    response = client.get(UPLOAD)
    assert response.status_code == 302 and response["Location"].startswith("/accounts/login/?next=/submissions/upload/")
    response = client.post(UPLOAD, {"file": _file(good)})
    assert response.status_code == 302 and "/accounts/login/" in response["Location"]
    assert Submission.objects.count() == 0


@pytest.mark.parametrize("url", ["/submissions/", "/submissions/tokens/"])
def test_my_pages_require_sign_in(db, url):
    response = Client().get(url)
    assert response.status_code == 302 and "/accounts/login/" in response["Location"]


def test_upload_form_enforces_csrf(good, user):
    client = Client(enforce_csrf_checks=True)
    client.force_login(user)
    response = client.post(UPLOAD, {"file": _file(good)})
    assert response.status_code == 403
    assert Submission.objects.count() == 0

    page = client.get(UPLOAD)
    token = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', page.content.decode()).group(1)
    response = client.post(UPLOAD, {"file": _file(good), "csrfmiddlewaretoken": token})
    assert response.status_code == 302
    assert Submission.objects.count() == 1


def test_the_upload_form_can_switch_transplants_off(good, signed_in):
    assert "do not judge each masked function" in signed_in.get(UPLOAD).content.decode()
    assert signed_in.post(UPLOAD, {"file": _file(good)}).status_code == 302
    assert signed_in.post(UPLOAD, {"file": _file(good), "no_transplants": "on"}).status_code == 302
    assert [s.run.transplants for s in Submission.objects.order_by("pk")] == [True, False]


def test_token_forms_enforce_csrf(builtin, user):
    client = Client(enforce_csrf_checks=True)
    client.force_login(user)
    assert client.post("/submissions/tokens/", {"name": "x"}).status_code == 403
    token, _ = token_create(user=user)
    assert client.post(f"/submissions/tokens/{token.pk}/revoke/").status_code == 403
    token.refresh_from_db()
    assert token.revoked_at is None and ApiToken.objects.count() == 1


def test_upload_link_in_the_navigation_only_when_signed_in(builtin, signed_in):
    assert 'href="/submissions/upload/"' not in Client().get("/accounts/login/").content.decode()
    assert 'href="/submissions/upload/"' in signed_in.get("/submissions/").content.decode()


# --- uploading through the page ------------------------------------------------------------------


def test_good_upload_redirects_to_its_page(good, signed_in, user):
    response = signed_in.post(UPLOAD, {"file": _file(good), "reexecute": "on"}, follow=True)
    submission = Submission.objects.get()
    assert response.redirect_chain == [(f"/submissions/{submission.pk}/", 302)]
    html = response.content.decode()
    assert f"Submission {submission.pk} stored: 1 attempt(s) scored against the gold results. Re-execution is queued." in html
    assert submission.uploader == user and submission.channel == "web" and submission.status == "reexecuting"
    assert 'id="reported-rate">1 of 1 (100%)' in html
    assert "not verified" in html
    attempt = submission.run.attempts.get()
    assert f'href="/attempts/{attempt.pk}/"' in html
    assert "tests@example.org" in html  # the uploader sees the contact


def test_upload_without_a_file_says_so(builtin, signed_in):
    response = signed_in.post(UPLOAD, {})
    assert response.status_code == 400
    assert "Results file: This field is required." in response.content.decode()


def test_upload_page_documents_the_format(builtin, signed_in):
    html = signed_in.get(UPLOAD).content.decode()
    for text in ("autoexperiment.submission/1", "attempt_index", "final_patch", "trajectory_file", "20.0 MB", "Authorization: Token"):
        assert text in html


# --- the submission page -------------------------------------------------------------------------


def test_submission_content_is_escaped(builtin, user):
    header = dict(HEADER, description="<script>alert('description')</script>", agent="<b>agent</b>",
                  model="<img src=x onerror=alert(1)>")
    data = jsonl(record(SAMPLE, 0, final_answer="<script>alert('answer')</script>"), header=header)
    submission = submission_create(data=data, filename="<i>name</i>.jsonl", uploader=user)
    submission.flagged, submission.flag_reason = True, "<script>alert('flag')</script>"
    submission.save()
    html = Client().get(f"/submissions/{submission.pk}/").content.decode()
    assert "<script>alert" not in html and "<img src=x" not in html and "<b>agent</b>" not in html and "<i>name" not in html
    assert "&lt;script&gt;alert(&#x27;description&#x27;)&lt;/script&gt;" in html
    assert "&lt;script&gt;alert(&#x27;answer&#x27;)&lt;/script&gt;" in html
    assert "&lt;script&gt;alert(&#x27;flag&#x27;)&lt;/script&gt;" in html
    assert "&lt;img src=x onerror=alert(1)&gt;" in html


def test_validation_messages_are_escaped(builtin, signed_in):
    data = jsonl(record("<script>alert(1)</script>", 0))
    html = signed_in.post(UPLOAD, {"file": _file(data, "<b>x</b>.jsonl")}).content.decode()
    assert "<script>alert(1)</script>" not in html
    assert "no sample &#x27;&lt;script&gt;alert(1)&lt;/script&gt;&#x27; in suite" in html


def test_submission_page_is_public_but_the_contact_is_not(good, user):
    submission = submission_create(data=good, filename="r.jsonl", uploader=user)
    html = Client().get(f"/submissions/{submission.pk}/").content.decode()
    assert "external-react" in html and "tests@example.org" not in html
    assert "Re-execute 1 attempt" not in html


def test_hidden_submission_is_only_for_its_uploader_and_staff(good, user):
    submission = submission_create(data=good, filename="r.jsonl", uploader=user)
    Run.objects.filter(submission=submission).update(hidden=True)
    url = f"/submissions/{submission.pk}/"
    assert Client().get(url).status_code == 404
    stranger = Client()
    stranger.force_login(make_user())
    assert stranger.get(url).status_code == 404
    owner = Client()
    owner.force_login(user)
    assert "Hidden: this submission is not shown" in owner.get(url).content.decode()
    staff = Client()
    staff.force_login(make_user(is_staff=True))
    assert staff.get(url).status_code == 200


def test_visibility_leaves_hidden_submissions_out(builtin, good, user):
    ordinary = Run.objects.create(suite=builtin, agent="gold", sandbox_backend="bubblewrap")
    shown = submission_create(data=good, filename="a.jsonl", uploader=user)
    hidden = submission_create(data=good, filename="b.jsonl", uploader=user)
    Run.objects.filter(submission=hidden).update(hidden=True)
    assert set(Run.objects.filter(public_runs_q())) == {ordinary, shown.run}
    assert set(runs_visible_to(user=make_user())) == {ordinary, shown.run}
    assert set(runs_visible_to(user=user)) == {ordinary, shown.run, hidden.run}
    assert set(runs_visible_to(user=make_user(), queryset=Run.objects.filter(agent="external-react"))) == {shown.run}
    stranger = make_user()
    attempts = Attempt.objects.filter(runs_visible_q(user=stranger, prefix="run__"))
    assert set(attempts.values_list("run", flat=True)) == {shown.run_id}


def test_reexecute_button_for_the_owner_only(good, user):
    submission = submission_create(data=good, filename="r.jsonl", uploader=user)
    url = f"/submissions/{submission.pk}/reexecute/"
    assert Client().post(url).status_code == 302  # to the sign-in page
    stranger = Client()
    stranger.force_login(make_user())
    assert stranger.post(url).status_code == 403  # visible, not theirs
    submission.refresh_from_db()
    assert submission.reexecution_requested_at is None

    owner = Client()
    owner.force_login(user)
    assert "Re-execute 1 attempt(s)" in owner.get(f"/submissions/{submission.pk}/").content.decode()
    assert owner.get(url).status_code == 405
    response = owner.post(url, follow=True)
    assert "Re-execution queued for 1 attempt(s)." in response.content.decode()
    submission.refresh_from_db()
    assert submission.status == Submission.Status.REEXECUTING and submission.reexecution_requested_at is not None


def test_my_submissions_lists_only_mine(good, user, other_user, signed_in):
    mine = submission_create(data=good, filename="a.jsonl", uploader=user)
    theirs = submission_create(data=good, filename="b.jsonl", uploader=other_user)
    html = signed_in.get("/submissions/").content.decode()
    assert f'href="/submissions/{mine.pk}/"' in html and f'href="/submissions/{theirs.pk}/"' not in html


# --- tokens --------------------------------------------------------------------------------------


def test_token_is_shown_once_and_works(good, signed_in, user):
    response = signed_in.post("/submissions/tokens/", {"name": "laptop"}, follow=True)
    html = response.content.decode()
    key = re.search(r'id="new-token-key">([^<]+)<', html).group(1)
    assert key.startswith("aex_")
    token = ApiToken.objects.get(user=user)
    assert token.name == "laptop" and key.startswith(token.prefix)
    again = signed_in.get("/submissions/tokens/").content.decode()
    assert key not in again and f"{token.prefix}…" in again and "never" in again
    response = Client().post("/api/submissions/", data=good, content_type="application/jsonl", HTTP_AUTHORIZATION=f"Token {key}")
    assert response.status_code == 201


def test_revoking_a_token(good, signed_in, user):
    token, key = token_create(user=user)
    response = signed_in.post(f"/submissions/tokens/{token.pk}/revoke/", follow=True)
    assert "revoked" in response.content.decode()
    token.refresh_from_db()
    assert token.revoked_at is not None
    response = Client().post("/api/submissions/", data=good, content_type="application/jsonl", HTTP_AUTHORIZATION=f"Token {key}")
    assert response.status_code == 403


def test_other_users_cannot_revoke_my_token(builtin, user):
    token, _ = token_create(user=user)
    stranger = Client()
    stranger.force_login(make_user())
    assert stranger.post(f"/submissions/tokens/{token.pk}/revoke/").status_code == 404
    assert stranger.get("/submissions/tokens/").content.decode().count(token.prefix) == 0
    token.refresh_from_db()
    assert token.revoked_at is None


def test_revoke_needs_post(builtin, user, signed_in):
    token, _ = token_create(user=user)
    assert signed_in.get(f"/submissions/tokens/{token.pk}/revoke/").status_code == 405


def test_active_token_limit(builtin, user, signed_in):
    for _ in range(20):
        token_create(user=user)
    response = signed_in.post("/submissions/tokens/", {"name": "one too many"})
    assert response.status_code == 400
    assert "already have 20 active tokens" in response.content.decode()


# --- admin ---------------------------------------------------------------------------------------


@pytest.fixture
def admin_client(db) -> Client:
    client = Client()
    client.force_login(make_user(is_staff=True, is_superuser=True))
    return client


def test_admin_hide_unhide_and_filters(good, user, admin_client):
    submission = submission_create(data=good, filename="r.jsonl", uploader=user)
    changelist = "/admin/runs/submission/"
    response = admin_client.post(changelist, {"action": "hide", "_selected_action": [submission.pk]})
    assert response.status_code == 302
    submission.refresh_from_db()
    assert submission.hidden is True
    assert submission.run not in Run.objects.filter(public_runs_q())
    assert admin_client.get(changelist + "?run__hidden__exact=1").context["cl"].result_count == 1
    assert admin_client.get(changelist + "?verified=yes").context["cl"].result_count == 0
    assert admin_client.get(changelist + "?verified=no").context["cl"].result_count == 1
    admin_client.post(changelist, {"action": "unhide", "_selected_action": [submission.pk]})
    submission.refresh_from_db()
    assert submission.hidden is False


def test_admin_flag_asks_for_a_reason(good, user, admin_client):
    submission = submission_create(data=good, filename="r.jsonl", uploader=user)
    changelist = "/admin/runs/submission/"
    page = admin_client.post(changelist, {"action": "flag", "_selected_action": [submission.pk]})
    assert page.status_code == 200 and "Flag 1 submission(s)" in page.content.decode()
    submission.refresh_from_db()
    assert submission.flagged is False
    admin_client.post(changelist, {"action": "flag", "_selected_action": [submission.pk], "apply": "1", "reason": "numbers copied"})
    submission.refresh_from_db()
    assert submission.flagged is True and submission.flag_reason == "numbers copied"
    assert "Flagged by staff: numbers copied" in Client().get(f"/submissions/{submission.pk}/").content.decode()


def test_admin_cannot_mark_verified_add_or_delete(good, user, admin_client):
    submission = submission_create(data=good, filename="r.jsonl", uploader=user)
    url = f"/admin/runs/submission/{submission.pk}/change/"
    page = admin_client.get(url)
    assert page.status_code == 200
    assert 'name="verified_at"' not in page.content.decode() and 'name="status"' not in page.content.decode()
    admin_client.post(url, {"flagged": "on", "flag_reason": "copied", "verified_at_0": "2025-01-01", "verified_at_1": "00:00",
                            "status": "verified"})
    submission.refresh_from_db()
    assert submission.flagged is True and submission.verified_at is None and submission.status == "scored"
    assert admin_client.get("/admin/runs/submission/add/").status_code == 403
    assert admin_client.get(f"/admin/runs/submission/{submission.pk}/delete/").status_code == 403
    actions = admin_client.get("/admin/runs/submission/").context["action_form"].fields["action"].choices
    assert {name for name, _ in actions} == {"", "hide", "unhide", "flag", "unflag"}
