"""Helpers for tests that need a component of the machine (a sandbox backend, a browser, fixtures)."""
import functools
import os

import pytest


def require(condition: bool, how_to_fix: str) -> None:
    """Fail in CI, where every component must be there; skip elsewhere, saying how to install it."""
    if condition:
        return
    if os.environ.get("CI"):
        pytest.fail(f"missing in CI: {how_to_fix}", pytrace=False)
    pytest.skip(how_to_fix)


_BACKEND_HINTS = {
    "bubblewrap": "run sandbox/images/install_host_packages.sh (apt-get install bubblewrap python3-numpy)",
    "docker": "run sandbox/images/start_docker_engine.sh, then sandbox/images/build_base_image.sh",
}


@functools.cache
def _backend_problem(backend: str) -> str | None:
    from sandbox import backend_problem

    return backend_problem(backend)


def require_backend(backend: str) -> None:
    """Skip, or fail under CI, when a sandbox backend cannot run here."""
    problem = _backend_problem(backend)
    require(problem is None, f"{backend} sandbox unavailable: {problem}. To provide it: {_BACKEND_HINTS[backend]}")


def redis_test_url() -> str:
    """The Redis database of the tests: REDIS_URL's server, database TEST_REDIS_DB (default 15),
    never a developer's. Concurrent test runs on one machine each set their own TEST_REDIS_DB."""
    from urllib.parse import urlsplit, urlunsplit

    base = urlsplit(os.environ.get("REDIS_URL") or "redis://127.0.0.1:6379/0")
    return urlunsplit((base.scheme, base.netloc, f"/{int(os.environ.get('TEST_REDIS_DB', '15'))}", "", ""))


def redis_test_client():
    """A client of redis_test_url(); fails in CI, or skips, saying how to start Redis when it is down."""
    import redis

    url = redis_test_url()
    client = redis.Redis.from_url(url)
    try:
        client.ping()
    except redis.exceptions.ConnectionError as error:
        require(False, f"Redis is not reachable at {url} ({error}); start it: scripts/ensure_services.sh")
    return client
