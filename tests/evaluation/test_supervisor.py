"""The worker's supervisor (runs.evaluation.supervisor, the Procfile's `supervised_worker`), on a
stand-in worker: a process that forks a "work horse" into a process group of its own, as RQ's
worker does, and records each SIGTERM it gets. No Django, no Redis."""
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.evaluation.helpers import wait_for

ROOT = Path(__file__).resolve().parents[2]

STAND_IN_WORKER = """
import os, signal, sys, time
from pathlib import Path
scratch = Path(sys.argv[1])
horse = os.fork()
if horse == 0:
    os.setpgrp()
    while True:
        time.sleep(1)
def warm_shutdown(signum, frame):
    with open(scratch / "sigterms", "a") as log:
        log.write(f"{os.getpid()}\\n")
    time.sleep(0.5)  # the job under way ends first; a second signal is not wanted
    os.kill(horse, signal.SIGKILL)
    sys.exit(0)
signal.signal(signal.SIGTERM, warm_shutdown)
(scratch / f"horse-of-{os.getpid()}").write_text(str(horse))
while True:
    time.sleep(1)
"""

SUPERVISOR = """
import sys
from runs.evaluation.supervisor import supervise
worker = [sys.executable, "-c", sys.argv[1], sys.argv[2]]
sys.exit(supervise(worker, pause=0.1, on_start=lambda pid: print("started", pid, flush=True)))
"""


def _gone(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    return state == "Z"


def _started(supervisor: subprocess.Popen) -> int:
    line = supervisor.stdout.readline().split()
    assert line[:1] == ["started"], line
    return int(line[1])


@pytest.fixture
def supervisor(tmp_path):
    process = subprocess.Popen(
        [sys.executable, "-c", SUPERVISOR, STAND_IN_WORKER, str(tmp_path)], cwd=ROOT, stdout=subprocess.PIPE, text=True,
        start_new_session=True,  # as honcho starts each Procfile line: signals go to the whole group
    )
    yield process
    if process.poll() is None:
        os.killpg(process.pid, signal.SIGKILL)
        process.wait()


def test_a_killed_worker_is_started_again_once_its_orphaned_horse_is_ended(supervisor, tmp_path):
    first = _started(supervisor)
    horse = int(wait_for(lambda: (tmp_path / f"horse-of-{first}").exists() and (tmp_path / f"horse-of-{first}").read_text(),
                         timeout=30, message="the first worker's horse"))

    os.kill(first, signal.SIGKILL)
    second = _started(supervisor)
    assert second != first
    assert _gone(horse)  # ended before the new worker started: it would find the attempt's process gone
    wait_for(lambda: (tmp_path / f"horse-of-{second}").exists(), timeout=30, message="the second worker's horse")

    # Stopping, as honcho does: SIGTERM to the supervisor's process group, then again.
    os.killpg(supervisor.pid, signal.SIGTERM)
    time.sleep(0.1)
    os.killpg(supervisor.pid, signal.SIGTERM)
    assert supervisor.wait(timeout=30) == 0
    assert (tmp_path / "sigterms").read_text().split() == [str(second)]  # forwarded once: a warm shutdown
    assert _gone(second)


def test_a_worker_dies_with_its_supervisor(supervisor, tmp_path):
    worker = _started(supervisor)
    horse = int(wait_for(lambda: (tmp_path / f"horse-of-{worker}").exists() and (tmp_path / f"horse-of-{worker}").read_text(),
                         timeout=30, message="the worker's horse"))
    os.kill(supervisor.pid, signal.SIGKILL)  # a process manager that gave up waiting
    supervisor.wait(timeout=30)
    try:
        wait_for(lambda: _gone(worker), timeout=10, message="the worker gone with its supervisor")
    finally:
        # Its horse outlives it here: a real one ends itself (runs.evaluation.claims.serve_worker).
        os.killpg(horse, signal.SIGKILL)
