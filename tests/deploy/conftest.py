"""A real gunicorn, started the way the Procfile starts it (DEBUG off, hashed static files collected
first), on a free loopback port and the test database; and the test Redis database.

Redis: the tests' database (tests.support.redis_test_url), flushed before and after, so concurrent test runs on one machine
can each pick their own.
"""
from __future__ import annotations

import os
import shlex
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from tests.support import redis_test_client, redis_test_url, shared_database_url

BASE_DIR = Path(__file__).resolve().parents[2]
TEST_SECRET_KEY = "deploy-tests-" + "k3y-" * 12  # 50+ characters, as check --deploy wants


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def closed_port() -> int:
    """A loopback port nothing listens on (bound, then released: refused, not blackholed)."""
    return free_port()


def base_environment(**extra: str) -> dict[str, str]:
    """The process environment of a production-like start: DEBUG off, a real key, no file key, and
    none of this test process's own settings (the browser tests set DJANGO_ALLOW_ASYNC_UNSAFE for
    the session, which check --deploy rightly refuses)."""
    own = {"SECRET_KEY_FILE", "DJANGO_SETTINGS_MODULE", "DJANGO_ALLOW_ASYNC_UNSAFE"}
    env = {k: v for k, v in os.environ.items() if k not in own}
    env.update(DEBUG="0", SECRET_KEY=TEST_SECRET_KEY, LOG_LEVEL="WARNING", PYTHONUNBUFFERED="1")
    env.update(extra)
    return env


def http_get(url: str, *, timeout: float = 10) -> tuple[int, dict[str, str], bytes]:
    """GET without following redirects and without raising on 4xx/5xx: (status, headers, body)."""
    request = urllib.request.Request(url)
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:
            return response.status, dict(response.headers), response.read()
    except urllib.error.HTTPError as error:
        return error.code, dict(error.headers), error.read()


def procfile_command(process: str) -> list[str]:
    """The Procfile's command for `process`, run with this interpreter's environment."""
    for line in (BASE_DIR / "Procfile").read_text().splitlines():
        if line.startswith(f"{process}:"):
            command = shlex.split(line.partition(":")[2])
            executable = command[0]
            # `python` and the console scripts (gunicorn) as this virtualenv's, whatever PATH says.
            return [sys.executable, *command[1:]] if executable == "python" else [sys.executable, "-m", executable, *command[1:]]
    raise AssertionError(f"the Procfile has no {process!r} process")


class Gunicorn:
    """The Procfile's web process on a free port; `url` is its base URL."""

    def __init__(self, env: dict[str, str], log: Path) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        # libpq labels this server's database connections, so a test can count them.
        self.application_name = f"gunicorn-test-{self.port}"
        self.log = log
        command = procfile_command("web")
        with open(log, "w") as handle:
            self.process = subprocess.Popen(
                command, cwd=BASE_DIR, env={**env, "PORT": str(self.port), "WEB_HOST": "127.0.0.1", "PGAPPNAME": self.application_name},
                stdout=handle, stderr=subprocess.STDOUT,
            )
        self._wait_until_serving()

    def _wait_until_serving(self, timeout: float = 30) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                pytest.fail(f"gunicorn exited with {self.process.returncode}:\n{self.log.read_text()[-4000:]}")
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=0.5):
                    pass
                http_get(f"{self.url}/healthz", timeout=10)  # the first request loads the application
                return
            except OSError:
                time.sleep(0.1)
        self.stop()
        pytest.fail(f"gunicorn did not serve within {timeout} s:\n{self.log.read_text()[-4000:]}")

    def get(self, path: str, **kwargs):
        return http_get(self.url + path, **kwargs)

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGINT)  # gunicorn's quick shutdown (TERM waits for keep-alives)
            try:
                self.process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(timeout=10)


@pytest.fixture(scope="session")
def redis_client():
    client = redis_test_client()
    client.flushdb()
    yield client
    client.flushdb()
    client.close()


@pytest.fixture(scope="session")
def database_url(django_db_setup) -> str:
    """The test database (created and migrated by pytest-django) as a URL other processes can use."""
    return shared_database_url()


@pytest.fixture(scope="session")
def data_dir(tmp_path_factory, database_url) -> Path:
    """A data directory with the static files collected as `make serve` collects them."""
    root = tmp_path_factory.mktemp("deploy-data")
    result = subprocess.run(
        [sys.executable, "manage.py", "collectstatic", "--no-input", "--verbosity", "0"],
        cwd=BASE_DIR, env=base_environment(AUTOEXPERIMENT_DATA_DIR=str(root), DATABASE_URL=database_url),
        capture_output=True, text=True, timeout=120,
    )
    assert result.returncode == 0, result.stderr
    return root


@pytest.fixture(scope="session")
def start_gunicorn(tmp_path_factory, data_dir, database_url, redis_client):
    """Start a gunicorn with the production settings; keyword arguments override its environment."""
    servers: list[Gunicorn] = []

    def start(**env: str) -> Gunicorn:
        environment = base_environment(
            AUTOEXPERIMENT_DATA_DIR=str(data_dir), DATABASE_URL=database_url, REDIS_URL=redis_test_url(),
            WEB_CONCURRENCY="1", WEB_THREADS="2", RQ_WORKERS="0",
        )
        environment.update(env)
        server = Gunicorn(environment, tmp_path_factory.mktemp("gunicorn") / "gunicorn.log")
        servers.append(server)
        return server

    yield start
    for server in servers:
        server.stop()


@pytest.fixture(scope="session")
def gunicorn(start_gunicorn) -> Gunicorn:
    """A gunicorn with everything it needs reachable: one worker of two threads."""
    return start_gunicorn()
