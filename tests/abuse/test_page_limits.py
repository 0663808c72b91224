"""Page views are rate-limited per address (per user once signed in), the heavier pages more
strictly; the health check is not counted and the API keeps its own limits. (Static files are
served by WhiteNoise's middleware before any view, so never counted.)"""
from __future__ import annotations

import pytest
from django.test import Client
from django.urls import reverse

from tests.replay.factories import make_user

pytestmark = pytest.mark.django_db

HEAVY = "/explore/"  # a page whose work grows with the attempts stored (abuse.heavy_page)
LIGHT = "/"  # the leaderboard, read from stored numbers


@pytest.fixture
def limits(settings):
    """Small page limits for this test: limits(pages_address="3/m"), "off" for none."""
    def set_limits(**rates):
        settings.RATE_LIMITS = {
            **settings.RATE_LIMITS,
            **{name.replace("_", "-"): None if rate == "off" else rate for name, rate in rates.items()},
        }
    return set_limits


def visitor(address: str = "198.51.100.7") -> Client:
    return Client(REMOTE_ADDR=address)


@pytest.mark.slow
def test_a_visitor_past_the_page_limit_gets_a_429_that_says_when_to_come_back(limits):
    limits(pages_address="3/m", heavy_pages_address="off")
    client = visitor()
    assert [client.get(LIGHT).status_code for _ in range(3)] == [200, 200, 200]
    refused = client.get(LIGHT)
    assert refused.status_code == 429 and 1 <= int(refused["Retry-After"]) <= 60
    text = refused.content.decode()
    assert "Too many page views: the limit is 3 per minute per address." in text
    assert "Signed-in users have a higher limit." in text
    assert client.head(LIGHT).status_code == 429  # HEAD counts as GET
    assert visitor("198.51.100.8").get(LIGHT).status_code == 200  # another address has its own count


@pytest.mark.slow
def test_heavy_pages_have_a_stricter_limit_of_their_own(limits):
    limits(pages_address="10/m", heavy_pages_address="2/m")
    client = visitor()
    assert [client.get(HEAVY).status_code for _ in range(2)] == [200, 200]
    refused = client.get(HEAVY)
    assert refused.status_code == 429 and "Retry-After" in refused
    assert "Too many views of the heavier pages" in refused.content.decode()
    assert "the limit is 2 per minute per address" in refused.content.decode()
    assert client.get(LIGHT).status_code == 200  # the light pages are still served


@pytest.mark.slow
def test_signed_in_users_are_counted_per_user_with_a_higher_limit(limits):
    limits(pages_address="1/m", pages_user="3/m", heavy_pages_address="off", heavy_pages_user="off")
    address = "198.51.100.9"
    assert visitor(address).get(LIGHT).status_code == 200
    assert visitor(address).get(LIGHT).status_code == 429  # the address's one view is used up
    reader = visitor(address)
    reader.force_login(make_user())
    assert [reader.get(LIGHT).status_code for _ in range(3)] == [200, 200, 200]  # same address, own count
    refused = reader.get(LIGHT)
    assert refused.status_code == 429 and "per user" in refused.content.decode()
    other = visitor(address)
    other.force_login(make_user())
    assert other.get(LIGHT).status_code == 200


def test_the_health_check_and_the_api_are_not_page_views(limits):
    limits(pages_address="1/m", heavy_pages_address="1/m")
    client = visitor()
    assert client.get(LIGHT).status_code == 200
    assert client.get(LIGHT).status_code == 429
    for _ in range(3):
        assert client.get(reverse("healthz")).status_code in (200, 503)  # its checks' answer, never 429
        api = client.get(reverse("submissions:api_create"))
        assert api.status_code != 429 and "Too many page views" not in api.content.decode()

