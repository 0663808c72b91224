"""Scale-out shown, not claimed: two worker "hosts" share one run through Postgres and Redis alone.

Each host is a real `manage.py evaluation_worker` process with its own name (WORKER_HOST_NAME), its own
workspace root (never shared) and its own sandbox: host A bubblewrap, host B Docker. The run is
created with backend `any`, so each attempt runs in the sandbox of the host that claims it. Nothing
passes between the hosts but the database and the queue: a dead host's claims are found by the
other's self-healing through the heartbeat (the pid of another host's claim is never checked).
Transactional: the workers only see committed rows.
"""
from __future__ import annotations

import os
import signal
import socket
from pathlib import Path

import pytest

from runs.evaluation.claims import local_pid, worker_identity
from runs.evaluation.harness import attempt_sandbox_backend
from runs.evaluation.kinds import RUN_ATTEMPT
from runs.evaluation.selectors import run_progress
from runs.evaluation.services import EACH_WORKERS_BACKEND, RunError, run_create
from runs.models import Attempt
from tests.evaluation.helpers import claimed_pid, wait_for
from tests.support import require_backend

pytestmark = pytest.mark.django_db(transaction=True)

BACKENDS = {"host-a": "bubblewrap", "host-b": "docker"}
# Beats every second, taken for dead after 8 s without one; both hosts heal every second.
HEALING = {"ATTEMPT_HEARTBEAT_SECONDS": "1", "ATTEMPT_STALE_SECONDS": "8", "ATTEMPT_RECOVER_INTERVAL_SECONDS": "1"}


@pytest.fixture
def roots(tmp_path) -> dict[str, Path]:
    """Each host's own workspace root."""
    require_backend("docker")
    made = {}
    for host in BACKENDS:
        made[host] = tmp_path / host / "workspaces"
        made[host].mkdir(parents=True)
    return made


def test_a_claim_names_the_configured_host_and_only_that_host_reads_its_pid(settings):
    settings.WORKER_HOST_NAME = "host-a"
    assert worker_identity() == f"host-a:{os.getpid()}"
    assert local_pid(worker_identity()) == os.getpid()
    settings.WORKER_HOST_NAME = "host-b"  # the same machine, another host: host A's pids are not its to check
    assert local_pid(f"host-a:{os.getpid()}") is None
    settings.WORKER_HOST_NAME = ""
    assert worker_identity() == f"{socket.gethostname()}:{os.getpid()}"


def test_a_run_may_leave_the_sandbox_to_each_worker(tiny_suite, settings):
    run = run_create(suite=tiny_suite, agent="gold", n_values=[1], sandbox_backend=EACH_WORKERS_BACKEND, enqueue=False)
    assert run.sandbox_backend == ""
    for backend in ("docker", "bubblewrap"):
        settings.SANDBOX_BACKEND = backend
        assert attempt_sandbox_backend(run) == backend
    pinned = run_create(suite=tiny_suite, agent="gold", n_values=[1], sandbox_backend="bwrap", enqueue=False)
    assert (pinned.sandbox_backend, attempt_sandbox_backend(pinned)) == ("bubblewrap", "bubblewrap")
    with pytest.raises(RunError, match="docker, bubblewrap, any"):
        run_create(suite=tiny_suite, agent="gold", n_values=[1], sandbox_backend="chroot", enqueue=False)


def host_env(host: str, roots: dict[str, Path], **extra: str) -> dict[str, str]:
    return {"WORKER_HOST_NAME": host, "WORKSPACE_ROOT": str(roots[host]), "SANDBOX_BACKEND": BACKENDS[host], **HEALING, **extra}


def host_of(claimed_by: str) -> str:
    return claimed_by.rpartition(":")[0]


def trajectory_file(root: Path, attempt: Attempt, try_number: int) -> Path:
    return root / "trajectories" / f"attempt-{attempt.pk}-try-{try_number}.json"


def assert_ran_on(attempt: Attempt, host: str, roots: dict[str, Path], *, try_number: int) -> None:
    """The try ran in `host`'s sandbox, its files lived under `host`'s root and never the other's."""
    assert attempt.trajectory["header"]["sandbox_backend"] == BACKENDS[host]
    for root_host, root in roots.items():
        assert trajectory_file(root, attempt, try_number).is_file() == (root_host == host), (attempt, root_host)


@pytest.mark.slow
def test_two_hosts_share_a_run_each_in_its_own_sandbox_and_workspace_root(tiny_suite, workers, redis_queue, roots):
    # The tiny suite's quick attempts (the machinery is under test, not the benchmark), four per
    # sample: enough that both hosts take some while the slower to start (Docker) starts.
    run = run_create(suite=tiny_suite, agent="gold", n_values=[1], attempts_per_sample=4, sandbox_backend=EACH_WORKERS_BACKEND)
    assert run.sandbox_backend == ""  # left to the workers
    started = [workers.start(**host_env(host, roots)) for host in BACKENDS]  # burst: each quits once the queue is empty
    for process in started:
        assert workers.wait(process, timeout=300) == 0, workers.logs()

    attempts = list(run.attempts.all())
    assert len(attempts) == 12
    by_host: dict[str, int] = {}
    for attempt in attempts:
        # Done exactly once: one claim, no failure, and its one job ran once.
        assert (attempt.status, attempt.passed, attempt.tries, attempt.infra_failures) == (Attempt.DONE, True, 1, 0), attempt
        assert [r.return_value for r in redis_queue.fetch_job(RUN_ATTEMPT.job_id(attempt.pk, 0)).results()] == ["done"]
        assert redis_queue.fetch_job(RUN_ATTEMPT.job_id(attempt.pk, 1)) is None
        host = host_of(attempt.claimed_by)
        by_host[host] = by_host.get(host, 0) + 1
        assert_ran_on(attempt, host, roots, try_number=1)
    assert set(by_host) == set(BACKENDS), by_host  # both hosts took part
    # Each host removed its own workspaces: only the trajectories stay, on the host that made them.
    for root in roots.values():
        assert [path.name for path in root.iterdir()] == ["trajectories"]
    assert run_progress(run=run).status == "finished"


def _under_way_on(run, host: str, root: Path) -> Attempt | None:
    """An attempt of the run claimed by `host` whose agent has saved a step (it waits at the gate)."""
    for attempt in run.attempts.filter(status=Attempt.RUNNING, claimed_by__startswith=f"{host}:"):
        path = trajectory_file(root, attempt, attempt.tries)
        if path.is_file() and '"steps": [\n  {' in path.read_text():
            return attempt
    return None


@pytest.mark.slow
def test_a_host_killed_mid_run_leaves_the_other_to_finish_every_attempt_once(tiny_suite, workers, redis_queue, roots, tmp_path):
    gate = tmp_path / "gate"
    gate.touch()  # host A's attempts wait at it (gated_gold); host B's agent has no gate
    run = run_create(suite=tiny_suite, agent="gated_gold", n_values=[1], sandbox_backend=EACH_WORKERS_BACKEND)
    host_a = workers.start(**host_env("host-a", roots, EVAL_TEST_GATE=str(gate)))
    victim = wait_for(lambda: _under_way_on(run, "host-a", roots["host-a"]), timeout=60, message="host A's attempt under way")
    host_b = workers.start(burst=False, **host_env("host-b", roots))
    wait_for(lambda: run.attempts.filter(claimed_by__startswith="host-b:").exists(), timeout=60, message="host B at work")

    # Host A dies at once, worker and work horse, holding its attempt; nobody presses anything.
    os.kill(host_a.pid, signal.SIGKILL)
    os.kill(claimed_pid(victim.claimed_by), signal.SIGKILL)
    host_a.wait(timeout=30)

    wait_for(lambda: run_progress(run=run).status == "finished", timeout=240, message="host B finishing the run")
    host_b.terminate()  # a warm shutdown
    assert workers.wait(host_b, timeout=60) == 0

    victim.refresh_from_db()
    # Recovered by host B through the heartbeat (host A's pid means nothing on host B), retried, done once.
    assert (victim.status, victim.passed, victim.tries, victim.infra_failures) == (Attempt.DONE, True, 2, 1)
    [failure] = victim.infra_history
    assert host_of(failure["worker"]) == "host-a" and "no heartbeat" in failure["reason"]
    assert host_of(victim.claimed_by) == "host-b"
    assert [r.return_value for r in redis_queue.fetch_job(RUN_ATTEMPT.job_id(victim.pk, 1)).results()] == ["done"]
    assert redis_queue.fetch_job(f"attempt-{victim.pk}-try-3") is None
    assert_ran_on(victim, "host-b", roots, try_number=2)
    assert trajectory_file(roots["host-a"], victim, 1).is_file()  # the dead try's partial trajectory stays on host A

    others = list(run.attempts.exclude(pk=victim.pk))
    assert len(others) == 2
    for attempt in others:
        assert (attempt.status, attempt.passed, attempt.tries, attempt.infra_failures) == (Attempt.DONE, True, 1, 0), attempt
        assert host_of(attempt.claimed_by) == "host-b"
        assert_ran_on(attempt, "host-b", roots, try_number=1)
