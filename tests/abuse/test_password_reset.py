"""Password reset exists only with a mail server (EMAIL_HOST): without one its pages are 404 and
the sign-in page says to ask staff; with one (Django's locmem backend here) the whole reset works,
within its rate limits."""
from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from django.core import mail
from django.test import Client

from tests.replay.factories import make_user

RESET = "/accounts/password_reset/"
ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def mail_server(settings):
    settings.PASSWORD_RESET_ENABLED = True
    settings.EMAIL_BACKEND = "django.core.mail.backends.locmem.EmailBackend"
    settings.DEFAULT_FROM_EMAIL = "noreply@example.org"


def test_without_mail_the_reset_pages_are_404_and_sign_in_says_ask_staff(db, settings):
    assert settings.PASSWORD_RESET_ENABLED is False  # no EMAIL_HOST in the test environment
    client = Client()
    for url in (RESET, "/accounts/password_reset/done/", "/accounts/reset/MQ/set-password/", "/accounts/reset/done/"):
        assert client.get(url).status_code == 404, url
    make_user(username="dora", email="dora@example.org")
    assert client.post(RESET, {"email": "dora@example.org"}).status_code == 404
    assert mail.outbox == []
    html = client.get("/accounts/login/").content.decode()
    assert RESET not in html and "Forgot your password? Ask staff to reset it" in html


def test_with_mail_a_user_resets_the_password_and_signs_in(db, mail_server):
    user = make_user(username="erin", email="erin@example.org")
    client = Client()
    html = client.get("/accounts/login/").content.decode()
    assert f'href="{RESET}"' in html and "Ask staff" not in html

    response = client.post(RESET, {"email": "Erin@example.org"})
    assert response.status_code == 302 and response["Location"] == "/accounts/password_reset/done/"
    assert "a link to choose a new password is on its way" in client.get(response["Location"]).content.decode()
    assert len(mail.outbox) == 1 and mail.outbox[0].to == ["erin@example.org"]
    link = re.search(r"http://testserver(/accounts/reset/\S+/)", mail.outbox[0].body).group(1)

    form = client.get(link, follow=True)
    assert form.status_code == 200 and 'name="new_password1"' in form.content.decode()
    set_url = form.redirect_chain[-1][0]
    done = client.post(set_url, {"new_password1": "a-new-long-password-9", "new_password2": "a-new-long-password-9"})
    assert done.status_code == 302 and done["Location"] == "/accounts/reset/done/"
    assert "Your new password is set" in client.get(done["Location"]).content.decode()
    user.refresh_from_db()
    assert user.check_password("a-new-long-password-9")
    assert Client().post("/accounts/login/", {"username": "erin", "password": "a-new-long-password-9"}).status_code == 302


def test_reset_requests_are_rate_limited_per_address_and_per_email(db, mail_server, settings):
    settings.RATE_LIMITS = {**settings.RATE_LIMITS, "password-reset": "3/h", "password-reset-email": "2/h"}
    make_user(username="finn", email="finn@example.org")
    client = Client(REMOTE_ADDR="203.0.113.5")
    for number in range(3):
        assert client.post(RESET, {"email": f"nobody{number}@example.org"}).status_code == 302
    response = client.post(RESET, {"email": "finn@example.org"})
    assert response.status_code == 429
    assert "Too many password-reset requests: the limit is 3 per hour per address." in response.content.decode()
    assert 0 < int(response["Retry-After"]) <= 3600
    assert mail.outbox == []

    # One inbox is not flooded from many addresses either.
    for number in range(2):
        assert Client(REMOTE_ADDR=f"198.51.100.{number + 1}").post(RESET, {"email": "finn@example.org"}).status_code == 302
    response = Client(REMOTE_ADDR="198.51.100.9").post(RESET, {"email": "FINN@example.org "})
    assert response.status_code == 429
    assert "limit is 2 per hour per email address" in response.content.decode()
    assert len(mail.outbox) == 2


def _settings_with(**env) -> subprocess.CompletedProcess:
    environment = {key: value for key, value in os.environ.items() if not key.startswith("EMAIL_")}
    environment.update({"DEBUG": "1", "DJANGO_SETTINGS_MODULE": "autoexperiment_site.settings", **env})
    code = (
        "import django; django.setup(); from django.conf import settings as s; "
        "print(s.PASSWORD_RESET_ENABLED, s.EMAIL_BACKEND, s.EMAIL_PORT, s.EMAIL_USE_TLS, s.EMAIL_USE_SSL)"
    )
    return subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=environment, capture_output=True, text=True, timeout=60)


def test_email_host_turns_smtp_and_reset_on_and_a_contradiction_stops_start_up():
    result = _settings_with(EMAIL_HOST="smtp.example.org")
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["True", "django.core.mail.backends.smtp.EmailBackend", "587", "True", "False"]
    result = _settings_with(EMAIL_HOST="smtp.example.org", EMAIL_PORT="465", EMAIL_USE_TLS="1")
    assert result.returncode != 0
    assert "EMAIL_USE_TLS and EMAIL_USE_SSL are both on" in result.stderr
