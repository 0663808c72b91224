"""The sign-up page: off by default (404, no link), on with SIGNUP_ENABLED (a link on the sign-in
page, an account, signed in right after)."""
from __future__ import annotations

import os

import pytest
from django.contrib.auth import get_user_model
from django.test import Client
from django.urls import reverse

SIGNUP = "/accounts/signup/"
NEW = {"username": "researcher", "password1": "a-long-unusual-passphrase-42", "password2": "a-long-unusual-passphrase-42"}


def test_sign_up_is_off_by_default(db, client, settings):
    if "SIGNUP_ENABLED" not in os.environ:
        assert settings.SIGNUP_ENABLED is False
    settings.SIGNUP_ENABLED = False
    assert client.get(SIGNUP).status_code == 404
    assert client.post(SIGNUP, NEW).status_code == 404
    assert not get_user_model().objects.filter(username="researcher").exists()
    login = client.get(reverse("login")).content.decode()
    assert 'id="signup-link"' not in login and SIGNUP not in login


@pytest.fixture
def signup_on(settings):
    settings.SIGNUP_ENABLED = True


def test_sign_up_creates_an_account_and_signs_in(db, client, signup_on):
    login = client.get(reverse("login"), {"next": "/runs/"}).content.decode()
    assert 'id="signup-link"' in login and f'href="{SIGNUP}?next=/runs/"' in login
    assert client.get("/runs/").status_code == 302  # not signed in yet
    form = client.get(SIGNUP, {"next": "/runs/"})
    assert form.status_code == 200 and 'name="password2"' in form.content.decode()

    response = client.post(SIGNUP, {**NEW, "next": "/runs/"})

    assert response.status_code == 302 and response["Location"] == "/runs/"
    user = get_user_model().objects.get(username="researcher")
    assert not user.is_staff and user.check_password(NEW["password1"])
    assert client.get("/runs/").status_code == 200  # signed in
    # Signed in already: the page sends them on.
    assert client.get(SIGNUP)["Location"] == "/"


def test_sign_up_problems_are_shown_and_nothing_is_stored(db, client, signup_on):
    get_user_model().objects.create_user("taken", password="x-long-passphrase-99")
    for data, message in (
        ({**NEW, "password2": "something-else-entirely-7"}, "The two password fields didn"),
        ({**NEW, "username": "taken"}, "A user with that username already exists."),
        ({**NEW, "password1": "short", "password2": "short"}, "This password is too short."),
    ):
        response = client.post(SIGNUP, data)
        assert response.status_code == 400 and message in response.content.decode()
    assert not get_user_model().objects.filter(username="researcher").exists()
    assert client.get("/runs/").status_code == 302


def test_sign_up_needs_csrf_and_a_local_next(db, signup_on):
    client = Client(enforce_csrf_checks=True)
    assert client.post(SIGNUP, NEW).status_code == 403
    assert not get_user_model().objects.filter(username="researcher").exists()
    response = Client().post(SIGNUP, {**NEW, "next": "https://evil.example/"})
    assert response.status_code == 302 and response["Location"] == "/"


def test_a_look_alike_username_is_refused(db, client, signup_on):
    get_user_model().objects.create_user("alice", password="x-long-passphrase-99")
    response = client.post(SIGNUP, {**NEW, "username": "\u0430lice"})  # a Cyrillic а
    assert response.status_code == 400 and "Enter a valid username" in response.content.decode()
    assert get_user_model().objects.count() == 1
