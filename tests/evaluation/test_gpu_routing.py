"""Work on papers that need a GPU goes only to workers with GPUs; each sandbox leases its GPUs for its
life, and an attempt records the GPU-seconds it held. Real RQ workers (subprocesses), real Redis, real
bubblewrap. This machine has no GPU: the workers are told they have GPU "0" (WORKER_GPUS), whose
device node bubblewrap binds where it exists; what is checked is the routing and the leases."""
import io
import subprocess
import sys
from pathlib import Path

import pytest
from django.core.management import call_command
from rq import Queue

from autoexperiment_site.health import queue_check
from runs.evaluation.kinds import RUN_ATTEMPT
from runs.evaluation.queue import evaluation_queue
from runs.evaluation.services import run_create
from runs.models import Attempt, Paper
from tests.evaluation.helpers import statuses

pytestmark = pytest.mark.django_db(transaction=True)


def _needs(suite, gpu: str) -> None:
    Paper.objects.filter(suite=suite).update(gpu=gpu)


@pytest.mark.slow
def test_work_that_needs_a_gpu_waits_for_a_worker_with_one(tiny_suite, workers, redis_queue, settings, tmp_path):
    _needs(tiny_suite, Paper.Gpu.REQUIRED)
    run = run_create(suite=tiny_suite, agent="gold", n_values=[1])
    attempts = list(run.attempts.all())
    gpu_queue = Queue(settings.GPU_QUEUE, connection=redis_queue.connection)
    assert sorted(gpu_queue.job_ids) == sorted(RUN_ATTEMPT.job_id(attempt.pk, 0) for attempt in attempts)
    assert redis_queue.job_ids == []  # none on the evaluation queue, where any worker would take it

    workers.run(1)  # a worker without GPUs empties its queues and quits, leaving the GPU work alone
    assert statuses(run) == {Attempt.QUEUED: len(attempts)}, workers.logs()

    workers.run(1, WORKER_GPUS="0", GPU_LOCK_DIR=str(tmp_path / "leases"))
    assert statuses(run) == {Attempt.DONE: len(attempts)}, workers.logs()
    assert all(attempt.passed and attempt.gpu_seconds > 0 for attempt in run.attempts.all())
    header = run.attempts.first().trajectory["header"]
    assert header["gpus"] == ["0"] and header["sandbox_memory_limit"].startswith("cgroup")  # a root worker here
    assert (tmp_path / "leases" / "gpu-0.lock").exists()


def test_a_paper_that_needs_no_gpu_goes_on_the_evaluation_queue_and_holds_none(tiny_suite, redis_queue, settings):
    run = run_create(suite=tiny_suite, agent="gold", n_values=[1])
    assert len(evaluation_queue().job_ids) == run.attempts.count()
    assert Queue(settings.GPU_QUEUE, connection=redis_queue.connection).count == 0

    call_command("run_eval", "--suite", "tiny", "--agent", "gold", "--sync", stdout=io.StringIO())
    done = Attempt.objects.filter(run__agent="gold", status=Attempt.DONE).exclude(run=run)
    assert done.exists() and all(attempt.gpu_seconds == 0 for attempt in done)


def test_a_worker_without_gpus_says_so_on_the_attempt_instead_of_retrying(tiny_suite, settings):
    _needs(tiny_suite, Paper.Gpu.REQUIRED)
    settings.WORKER_GPUS = []
    call_command("run_eval", "--suite", "tiny", "--agent", "gold", "--sync", stdout=io.StringIO())
    attempt = Attempt.objects.filter(run__agent="gold").first()
    assert (attempt.status, attempt.failure_label, attempt.tries) == (Attempt.ERROR, Attempt.NOT_PREPARED, 1)
    assert "needs 1 GPU(s) and this worker may use 0 (WORKER_GPUS=none)" in attempt.failure_detail


def test_a_paper_that_may_use_a_gpu_runs_on_the_cpu_while_the_gpu_is_leased_elsewhere(tiny_suite, settings, tmp_path):
    _needs(tiny_suite, Paper.Gpu.OPTIONAL)
    settings.WORKER_GPUS, settings.GPU_LOCK_DIR = ["0"], tmp_path
    holder = subprocess.Popen(
        [sys.executable, "-c", f"from sandbox.gpus import gpu_lease\nwith gpu_lease(1, devices=['0'], lock_dir={str(tmp_path)!r}):\n"
                               "    print('held', flush=True); input()"],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, cwd=Path(__file__).resolve().parents[2],
    )
    try:
        assert holder.stdout.readline().strip() == "held"
        call_command("run_eval", "--suite", "tiny", "--agent", "gold", "--sync", stdout=io.StringIO())
    finally:
        holder.communicate("\n", timeout=30)
    on_cpu = list(Attempt.objects.filter(run__agent="gold"))
    assert on_cpu and all(attempt.passed and attempt.gpu_seconds == 0 for attempt in on_cpu)

    call_command("run_eval", "--suite", "tiny", "--agent", "gold", "--sync", stdout=io.StringIO())
    on_gpu = Attempt.objects.filter(run__agent="gold").exclude(pk__in=[attempt.pk for attempt in on_cpu])
    assert on_gpu.exists() and all(attempt.passed and attempt.gpu_seconds > 0 for attempt in on_gpu)


def test_health_fails_when_gpu_work_waits_with_no_worker_with_gpus(tiny_suite, redis_queue):
    _needs(tiny_suite, Paper.Gpu.REQUIRED)
    run_create(suite=tiny_suite, agent="gold", n_values=[1])
    check = queue_check(client=redis_queue.connection, max_age_seconds=0)
    assert check["gpu"]["queued"] == 3 and check["gpu"]["workers"] == 0
    assert not check["ok"] and "no worker with GPUs" in check["error"]
