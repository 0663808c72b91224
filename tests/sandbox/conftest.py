"""Fixtures running the sandbox tests against every backend.

A backend that cannot run here is skipped on a workstation but fails under CI (env CI set), with
the command that provides it: CI must exercise both.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from sandbox import Limits, open_sandbox
from sandbox.base import sandbox_identity
from tests.support import require_backend, worker_scratch  # noqa: F401 (a fixture)

BACKENDS = ["bubblewrap", "docker"]
# Set in the test process before sandboxes open: it must never be visible inside one.
SECRET_NAME = "AUTOEXPERIMENT_TEST_SECRET"
SECRET_VALUE = "sk-test-0f9e8d7c6b5a-do-not-leak"
EXTRA_NAME = "SANDBOX_EXTRA"
EXTRA_VALUE = "passed-on-purpose"
# Small enough that the attacks hit the limits quickly.
TEST_LIMITS = Limits(memory_mb=512, pids=64, cpus=1.0, file_size_mb=40, disk_mb=100)

@pytest.fixture(scope="module", params=BACKENDS)
def backend(request) -> str:
    require_backend(request.param)
    return request.param


@pytest.fixture(scope="module")
def secret_in_environment():
    """The worker's secrets, present in the test process while sandboxes are opened and used."""
    secrets = {SECRET_NAME: SECRET_VALUE, "DATABASE_URL": f"postgres://app:{SECRET_VALUE}@127.0.0.1/app"}
    with pytest.MonkeyPatch.context() as patch:
        for name, value in secrets.items():
            patch.setenv(name, value)
        yield secrets


@pytest.fixture(scope="module")
def extra_env() -> dict[str, str]:
    """What the module's sandbox is opened with as the caller's extra environment."""
    return {EXTRA_NAME: EXTRA_VALUE}


@pytest.fixture(scope="module")
def sandbox(backend, secret_in_environment, extra_env, tmp_path_factory):
    """One sandbox per backend and test module (a Docker container takes seconds to start)."""
    workspace = tmp_path_factory.mktemp(f"workspace-{backend}")
    with open_sandbox(backend, workspace, limits=TEST_LIMITS, env=extra_env) as box:
        yield box


@pytest.fixture
def open_fresh(backend, secret_in_environment, tmp_path_factory):
    """Opens more sandboxes of the current backend; all are closed after the test."""
    opened = []

    def open_one(**options):
        options.setdefault("limits", TEST_LIMITS)
        workspace = options.pop("workspace", None) or tmp_path_factory.mktemp("fresh")
        box = open_sandbox(backend, workspace, **options)
        opened.append(box)
        return box

    yield open_one
    for box in opened:
        box.close()


def _sandbox_user_processes(uid: int | None = None, *, mounting: Path) -> list[str]:
    """Live host processes of the uid sandboxed commands run as (Docker shares the host's uids,
    bwrap's user namespace maps onto it) that have a directory under `mounting` mounted (bind
    mounts keep the host path as their root in mountinfo): the sandboxes of a test, or of this test
    process (its pytest temporary directory), so that other test runs and xdist workers on the
    machine do not count. `uid` names another (an ordinary user's worker runs them as itself).
    Zombies are left out: they run nothing, and the host's init reaps them."""
    uid = str(sandbox_identity()[0] if uid is None else uid)
    found = []
    for entry in filter(str.isdigit, os.listdir("/proc")):
        try:
            status = Path(f"/proc/{entry}/status").read_text()
            fields = dict(line.split(":", 1) for line in status.splitlines() if ":" in line)
            if fields["Uid"].split()[0] != uid or fields["State"].strip().startswith("Z"):
                continue
            if str(mounting) in Path(f"/proc/{entry}/mountinfo").read_text():
                found.append(f"{entry} {fields['Name'].strip()}")
        except OSError:
            continue
    return found


class HostHealth:
    def __init__(self, run_directory: Path) -> None:
        self.run_directory = run_directory
        self.processes_before = len(_sandbox_user_processes(mounting=run_directory))

    def check(self) -> None:
        """The host still runs commands, has memory to spare, and no sandboxed process of this test
        process remains."""
        assert subprocess.run(["true"], timeout=10, check=False).returncode == 0
        meminfo = Path("/proc/meminfo").read_text()
        available = next(line for line in meminfo.splitlines() if line.startswith("MemAvailable"))
        assert int(available.split()[1]) > 2**20, "less than 1 GiB of memory left on the host"
        left = _sandbox_user_processes(mounting=self.run_directory)
        # Fresh sandboxes opened by the test may add their init process.
        assert len(left) <= self.processes_before + 3, f"sandboxed processes were left running: {left}"


@pytest.fixture
def host_health(tmp_path_factory) -> HostHealth:
    """Captures the host's state before the test; call .check() after an attack. The sandboxes of
    this test process are those whose workspace is under its temporary directory (the fixtures
    above make them there)."""
    return HostHealth(tmp_path_factory.getbasetemp())
