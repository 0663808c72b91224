"""Throwaway Redis and Postgres servers on free ports, for tests that restart or flush them: the
shared ones on the standard ports are never touched (other test runs and engineers use them)."""
from __future__ import annotations

import os
import pwd
import shutil
import socket
import subprocess
import tempfile
import time
from pathlib import Path

from tests.support import ordinary_worker_identity, require

POSTGRES_BIN = Path("/usr/lib/postgresql/15/bin")


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def parent_pid(pid: int) -> int:
    """The parent of process `pid` (a work horse's: its worker)."""
    return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])


class ThrowawayRedis:
    """redis-server on a free loopback port, keeping nothing on disk: `restart` loses everything."""

    def __init__(self, directory: Path) -> None:
        require(shutil.which("redis-server") is not None, "redis-server is missing: apt-get install redis-server")
        self.directory = directory
        self.port = free_port()
        self.url = f"redis://127.0.0.1:{self.port}/0"
        self.process: subprocess.Popen | None = None

    def start(self) -> None:
        self.process = subprocess.Popen(
            ["redis-server", "--port", str(self.port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
             "--dir", str(self.directory)],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )
        import redis

        client = redis.Redis.from_url(self.url)
        deadline = time.monotonic() + 30
        while True:
            try:
                client.ping()
                break
            except redis.exceptions.ConnectionError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.05)
        client.close()

    def stop(self) -> None:
        """Gone at once, as a crashed or restarted server is: what it held is lost."""
        if self.process is not None and self.process.poll() is None:
            self.process.kill()
            self.process.wait(timeout=30)


class ThrowawayPostgres:
    """A Postgres 15 cluster of its own (the Debian binaries) in a temporary directory, on a free
    port, trusting loopback connections; run as the `postgres` account when the tests run as root
    (initdb refuses root)."""

    def __init__(self) -> None:
        require((POSTGRES_BIN / "initdb").exists(), f"{POSTGRES_BIN}/initdb is missing: apt-get install postgresql-15")
        self.root = Path(tempfile.mkdtemp(prefix="autoexperiment-postgres-"))
        self.data = self.root / "data"
        self.port = free_port()
        self._user: list[str] = []
        if os.geteuid() == 0:
            try:
                account = pwd.getpwnam("postgres")
                uid, gid = account.pw_uid, account.pw_gid
            except KeyError:
                uid, gid = ordinary_worker_identity()
            os.chown(self.root, uid, gid)
            self._user = ["setpriv", f"--reuid={uid}", f"--regid={gid}", "--clear-groups", "--"]

    def url(self, database: str = "postgres") -> str:
        return f"postgres://postgres@127.0.0.1:{self.port}/{database}"

    def _run(self, *argv: str) -> None:
        result = subprocess.run([*self._user, *argv], capture_output=True, text=True, timeout=120, cwd=self.root)
        assert result.returncode == 0, f"{' '.join(argv)} failed:\n{result.stdout}\n{result.stderr}"

    def init(self) -> None:
        self._run(str(POSTGRES_BIN / "initdb"), "--no-sync", "-U", "postgres", "--auth=trust", "-E", "UTF8", "-D", str(self.data))

    def start(self) -> None:
        options = f"-p {self.port} -c listen_addresses=127.0.0.1 -c unix_socket_directories={self.root} -c fsync=off"
        self._run(str(POSTGRES_BIN / "pg_ctl"), "-D", str(self.data), "-o", options, "-l", str(self.root / "log"), "-w", "start")

    def stop(self) -> None:
        """A fast shutdown: every connection is dropped."""
        self._run(str(POSTGRES_BIN / "pg_ctl"), "-D", str(self.data), "-m", "fast", "-w", "stop")

    def copy_database(self, source_url: str, name: str) -> str:
        """A copy of the database at `source_url` (schema and rows) as `name` here; returns its URL."""
        import psycopg

        with psycopg.connect(self.url(), autocommit=True) as connection:
            connection.execute(f'CREATE DATABASE "{name}"')
        dump = subprocess.run([str(POSTGRES_BIN / "pg_dump"), "--no-owner", "--no-privileges", source_url],
                              capture_output=True, timeout=120, check=True).stdout
        subprocess.run([str(POSTGRES_BIN / "psql"), "-q", "-v", "ON_ERROR_STOP=1", self.url(name)],
                       input=dump, capture_output=True, timeout=120, check=True)
        return self.url(name)

    def remove(self) -> None:
        try:
            self.stop()
        except AssertionError:
            pass  # not running
        shutil.rmtree(self.root, ignore_errors=True)
