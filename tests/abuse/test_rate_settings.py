"""Rate-limit settings from the environment, the client address limits count by, and a rate-limit
store that cannot be reached."""
from __future__ import annotations

import socket

import pytest
from django.core.exceptions import ImproperlyConfigured
from django.test import Client, RequestFactory

from autoexperiment_site.abuse import client_ip
from autoexperiment_site.env import env_rate, split_rate


@pytest.mark.parametrize(
    ("value", "expected"),
    [("30/h", "30/h"), ("20/10m", "20/10m"), (" 5/D ", "5/d"), ("off", None), ("OFF", None)],
)
def test_rates_are_read_from_the_environment(monkeypatch, value, expected):
    monkeypatch.setenv("RATE_LIMIT_UPLOADS_PER_USER", value)
    assert env_rate("RATE_LIMIT_UPLOADS_PER_USER", "30/h") == expected


@pytest.mark.parametrize("value", ["lots", "30", "30/week", "0/h", "5/0m", "-1/h", "30/h/2"])
def test_a_malformed_rate_names_the_variable(monkeypatch, value):
    monkeypatch.setenv("RATE_LIMIT_UPLOADS_PER_USER", value)
    with pytest.raises(ImproperlyConfigured, match=r"RATE_LIMIT_UPLOADS_PER_USER=.* is not a rate; write <count>/<period>"):
        env_rate("RATE_LIMIT_UPLOADS_PER_USER", "30/h")


def test_split_rate():
    assert split_rate("20/10m") == (20, 600)
    assert split_rate("3/h") == (3, 3600)


def test_client_address_behind_trusted_proxies(settings):
    factory = RequestFactory()
    request = factory.get("/", REMOTE_ADDR="10.0.0.2", HTTP_X_FORWARDED_FOR="6.6.6.6, 203.0.113.9, 10.0.0.1")
    settings.TRUSTED_PROXY_COUNT = 0
    assert client_ip(request) == "10.0.0.2"  # no proxy trusted: the header is the client's word
    settings.TRUSTED_PROXY_COUNT = 2
    assert client_ip(request) == "203.0.113.9"  # what the outer proxy saw; the spoofed entry is ignored
    settings.TRUSTED_PROXY_COUNT = 4
    assert client_ip(request) == "10.0.0.2"  # fewer entries than proxies: not through them all
    settings.TRUSTED_PROXY_COUNT = 1
    assert client_ip(factory.get("/", REMOTE_ADDR="10.0.0.2", HTTP_X_FORWARDED_FOR="not-an-address")) == "10.0.0.2"


def test_an_ipv6_host_counts_as_its_64_and_a_mapped_ipv4_as_itself(settings):
    factory = RequestFactory()
    settings.TRUSTED_PROXY_COUNT = 0
    one, other = (client_ip(factory.get("/", REMOTE_ADDR=f"2001:db8:0:7::{n}")) for n in ("1", "beef:1"))
    assert one == other == "2001:db8:0:7::"  # a new address of the same host's /64 gets no new count
    assert client_ip(factory.get("/", REMOTE_ADDR="2001:db8:0:8::1")) != one
    assert client_ip(factory.get("/", REMOTE_ADDR="::ffff:10.9.9.1")) == "10.9.9.1"
    settings.TRUSTED_PROXY_COUNT = 1
    assert client_ip(factory.get("/", REMOTE_ADDR="10.0.0.1", HTTP_X_FORWARDED_FOR="2001:db8:0:9::5")) == "2001:db8:0:9::"


def test_an_unreachable_rate_limit_store_is_a_503_that_says_so(db, settings):
    with socket.socket() as probe:  # a loopback port with nothing listening
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    settings.CACHES = {
        "default": {"BACKEND": "django.core.cache.backends.redis.RedisCache", "LOCATION": f"redis://127.0.0.1:{port}/0"}
    }
    response = Client().get("/api/submissions/1/", HTTP_AUTHORIZATION="Token aex_x")
    assert response.status_code == 503
    assert "the rate-limit store is unreachable" in response.json()["error"]
    assert Client().get("/").status_code == 200  # pages without a limit do not need it
