"""Sign-up form posts are rate-limited per address, so one address cannot mint accounts in bulk."""
from __future__ import annotations

from django.contrib.auth import get_user_model
from django.test import Client


def test_signups_are_limited_per_address(db, settings):
    settings.SIGNUP_ENABLED = True
    settings.RATE_LIMITS = {**settings.RATE_LIMITS, "signup": "2/h"}
    form = {"password1": "a-long-enough-pass-7", "password2": "a-long-enough-pass-7"}
    assert Client(REMOTE_ADDR="203.0.113.70").post("/accounts/signup/", {"username": "", **form}).status_code == 400
    assert Client(REMOTE_ADDR="203.0.113.70").post("/accounts/signup/", {"username": "gina", **form}).status_code == 302
    response = Client(REMOTE_ADDR="203.0.113.70").post("/accounts/signup/", {"username": "hal", **form})
    assert response.status_code == 429
    assert "Too many sign-up attempts: the limit is 2 per hour per address." in response.content.decode()
    assert Client(REMOTE_ADDR="203.0.113.70").get("/accounts/signup/").status_code == 200  # the form itself is not counted
    assert Client(REMOTE_ADDR="198.51.100.70").post("/accounts/signup/", {"username": "hal", **form}).status_code == 302
    assert sorted(get_user_model().objects.values_list("username", flat=True)) == ["gina", "hal"]
