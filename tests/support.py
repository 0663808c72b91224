"""Helpers for tests that need a component of the machine (a sandbox backend, a browser, fixtures)."""
import functools
import os
import shutil
import subprocess
import sys
from io import StringIO
from pathlib import Path

import pytest

BUILTIN_SUITE_DIR = Path(__file__).resolve().parents[1] / "runs" / "suites" / "builtin"


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


def require_patch() -> None:
    """Skip, or fail under CI, when patch(1) is missing: tests check with it that a final patch
    applies with the standard tool, as a submitter's or a reader's would."""
    require(shutil.which("patch") is not None, "patch(1) is not installed: run `make system-packages` (apt-get install patch)")


def import_builtin_suite(samples: str = "1"):
    """The built-in suite imported into the test database, with its samples at each n of `samples`
    ("1", "1,2"); returns the Suite."""
    from django.core.management import call_command

    from runs.models import Suite

    call_command("import_suite", str(BUILTIN_SUITE_DIR), "--samples", samples, stdout=StringIO())
    return Suite.objects.get(name="builtin")


def shared_database_url() -> str:
    """The test database as a URL other processes (workers, gunicorn) can use. They need Postgres:
    fails in CI, or skips, under any other database."""
    from django.db import connection

    db = connection.settings_dict
    require(db["ENGINE"].endswith("postgresql"), "tests that start other processes need Postgres: set DATABASE_URL=postgres://...")
    password = f":{db['PASSWORD']}" if db.get("PASSWORD") else ""
    return f"postgres://{db['USER']}{password}@{db['HOST'] or '127.0.0.1'}:{db['PORT'] or 5432}/{db['NAME']}"


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


def standings_refreshed() -> None:
    """What the leaderboard's refresh job does after a change (leaderboard.standings), for tests that
    write attempts and runs with the ORM directly, which announces nothing: every system recomputed."""
    from leaderboard.standings import standings_refresh

    standings_refresh(everything=True)


def in_fresh_django(code: str) -> list[str]:
    """The lines `code` prints in a new interpreter after django.setup() (DEBUG on), for what only a
    fresh process can show, such as which modules start-up imports. Fails the test if it fails."""
    environment = {**os.environ, "DEBUG": "1", "DJANGO_SETTINGS_MODULE": "autoexperiment_site.settings"}
    result = subprocess.run(
        [sys.executable, "-c", f"import django\ndjango.setup()\n{code}"],
        cwd=Path(__file__).resolve().parent.parent, env=environment, capture_output=True, text=True, timeout=120,
    )
    assert result.returncode == 0, result.stderr
    return result.stdout.splitlines()
