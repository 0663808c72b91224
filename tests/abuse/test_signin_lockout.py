"""Sign-in lockout (django-axes): failures count per username and address, on the site's sign-in
page and the admin's, and a locked-out sign-in is refused even with the right password."""
from __future__ import annotations

from django.conf import settings
from django.contrib.auth import SESSION_KEY
from django.test import Client

from tests.replay.factories import make_user

PASSWORD = "correct-horse-battery"
LOGIN = "/accounts/login/"
ADMIN_LOGIN = "/admin/login/"


def client_from(address: str) -> Client:
    return Client(REMOTE_ADDR=address)


def sign_in(client: Client, username: str, password: str, url: str = LOGIN):
    return client.post(url, {"username": username, "password": password, "next": "/"})


def signed_in(client: Client) -> bool:
    return SESSION_KEY in client.session


def test_failure_limit_locks_the_username_from_that_address_only(db):
    limit = settings.AXES_FAILURE_LIMIT
    alice, bob = make_user(username="alice"), make_user(username="bob")
    attacker = client_from("203.0.113.7")
    for attempt in range(limit - 1):
        response = sign_in(attacker, "alice", f"wrong-{attempt}")
        assert response.status_code == 200 and "did not match" in response.content.decode()
    response = sign_in(attacker, "alice", "wrong-last")
    assert response.status_code == 429

    # Now even the right password is refused, with the reason and the wait on the sign-in page.
    response = sign_in(attacker, "alice", PASSWORD)
    html = response.content.decode()
    assert response.status_code == 429 and not signed_in(attacker)
    assert 'id="locked-out"' in html and "Too many failed sign-ins for “alice” from your address" in html
    assert f"locked for {settings.AXES_COOLOFF_TIME.seconds // 60} minutes" in html
    assert int(response["Retry-After"]) == settings.AXES_COOLOFF_TIME.seconds
    assert 'name="username"' in html  # the form is still there

    # Another user from the same address, and alice from elsewhere, sign in as usual.
    assert sign_in(attacker, bob.username, PASSWORD).status_code == 302 and signed_in(attacker)
    elsewhere = client_from("198.51.100.20")
    assert sign_in(elsewhere, alice.username, PASSWORD).status_code == 302 and signed_in(elsewhere)


def test_fresh_ipv6_addresses_of_one_network_share_the_lockout(db):
    """A host holds a whole /64: moving to the next address of it must not start a new count."""
    make_user(username="dora")
    for attempt in range(settings.AXES_FAILURE_LIMIT):
        sign_in(client_from(f"2001:db8:1:2::{attempt + 1:x}"), "dora", f"wrong-{attempt}")
    response = sign_in(client_from("2001:db8:1:2::ffff"), "dora", PASSWORD)
    assert response.status_code == 429
    assert sign_in(client_from("2001:db8:1:3::1"), "dora", PASSWORD).status_code == 302  # another network


def test_a_success_before_the_limit_starts_the_count_again(db):
    make_user(username="carol")
    client = client_from("203.0.113.8")
    for _ in range(settings.AXES_FAILURE_LIMIT - 1):
        sign_in(client, "carol", "wrong")
    assert sign_in(client, "carol", PASSWORD).status_code == 302
    client.post("/accounts/logout/")
    for _ in range(settings.AXES_FAILURE_LIMIT - 1):
        assert sign_in(client, "carol", "wrong").status_code == 200
    assert sign_in(client, "carol", PASSWORD).status_code == 302 and signed_in(client)


def test_admin_sign_in_locks_too(db):
    admin = make_user(username="root", is_staff=True, is_superuser=True)
    attacker = client_from("203.0.113.9")
    for _ in range(settings.AXES_FAILURE_LIMIT):
        response = sign_in(attacker, admin.username, "wrong", url=ADMIN_LOGIN)
    assert response.status_code == 429
    response = sign_in(attacker, admin.username, PASSWORD, url=ADMIN_LOGIN)
    assert response.status_code == 429 and not signed_in(attacker)
    assert "Too many failed sign-ins for “root” from your address" in response.content.decode()
    assert attacker.get("/admin/").status_code == 302  # still sent to sign in

    # The lockout is shared with the site's sign-in page (same username, same address).
    assert sign_in(attacker, admin.username, PASSWORD).status_code == 429
    staff_desk = client_from("192.0.2.1")
    assert sign_in(staff_desk, admin.username, PASSWORD, url=ADMIN_LOGIN).status_code == 302
    assert staff_desk.get("/admin/").status_code == 200
