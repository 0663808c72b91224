"""The built-in PyTorch suite (runs/suites/builtin-pytorch) as users run it: its environment built and
its data fetched by `build_environment`, then gold passing and noop failing through the queue, on real
workers, in both sandboxes (on the CPU); and scripts/check_gpu.py on a machine without a GPU."""
import io
import subprocess
import sys

import pytest
from django.core.management import call_command

from runs.evaluation.services import run_create
from runs.models import Attempt, Experiment, Paper, Suite
from sandbox.environments import Declaration, environment_build
from tests.evaluation.helpers import statuses
from tests.support import PYTORCH_SUITE_DIR, SHARED_ENVIRONMENTS_ROOT, require_backend

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]


@pytest.fixture
def pytorch_suite(settings, data_cache, workspace_root) -> Suite:
    """The suite imported with its n = 1 samples, prepared on this machine as `build_environment` does."""
    settings.ENVIRONMENTS_ROOT = SHARED_ENVIRONMENTS_ROOT
    call_command("import_suite", str(PYTORCH_SUITE_DIR), "--samples", "1", stdout=io.StringIO())
    out = io.StringIO()
    call_command("build_environment", "builtin-pytorch", stdout=out)
    assert "data file digits.npz: fetched" in out.getvalue() and "the environments and data of 2 paper(s) are ready" in out.getvalue()
    return Suite.objects.get(name="builtin-pytorch")


def _worker_env(settings) -> dict:
    return {"ENVIRONMENTS_ROOT": str(settings.ENVIRONMENTS_ROOT), "DATA_CACHE_ROOT": str(settings.DATA_CACHE_ROOT)}


def _only(suite: Suite, paper_id: str, exp_id: int) -> None:
    """Keep one paper of the suite and one of its experiments (every experiment depends on every
    function): each attempt trains its network three times over (the agent's run, re-execution, the
    held-out variant), so CI trains each paper's cheapest experiment, on one backend."""
    Paper.objects.filter(suite=suite).exclude(paper_id=paper_id).delete()
    Experiment.objects.filter(paper__suite=suite).exclude(exp_id=exp_id).delete()


# The experiments with the fewest training steps: 200 images for 60 epochs; 100 tumours for 60 epochs.
@pytest.mark.parametrize(("backend", "paper", "exp_id"), [
    ("bubblewrap", "mixup-label-smoothing", 4), ("docker", "stochastic-weight-averaging", 5),
])
def test_gold_passes_and_noop_fails_through_the_queue(pytorch_suite, workers, settings, backend, paper, exp_id):
    require_backend(backend)
    _only(pytorch_suite, paper, exp_id)
    gold = run_create(suite=pytorch_suite, agent="gold", n_values=[1], sample_cap=1, transplants=False, sandbox_backend=backend)
    noop = run_create(suite=pytorch_suite, agent="noop", n_values=[1], sample_cap=1, transplants=False, sandbox_backend=backend)
    workers.run(1, timeout=900, **_worker_env(settings))

    assert statuses(gold) == {Attempt.DONE: 1} and statuses(noop) == {Attempt.DONE: 1}, workers.logs()
    attempt = gold.attempts.get()
    assert attempt.passed and attempt.held_out_passed, (attempt.failure_detail, attempt.reexecution_error)
    assert attempt.trajectory["header"]["sandbox_backend"] == backend
    failed = noop.attempts.get()
    # Masked functions raise: each experiment fails in the paper's code, not in the sandbox or the environment.
    assert not failed.passed and "NotImplementedError" in failed.reexecution_output, failed.reexecution_output[-2000:]


@pytest.mark.django_db
def test_check_gpu_says_there_is_no_gpu_and_reproduces_the_cpu_gold(tmp_path):
    require_backend("bubblewrap")
    import json

    environment, _ = environment_build(
        SHARED_ENVIRONMENTS_ROOT, Declaration.from_json(json.loads((PYTORCH_SUITE_DIR / "suite.json").read_text())["environment"])
    )
    checked = subprocess.run(
        [sys.executable, "scripts/check_gpu.py", "--python", str(environment / "bin" / "python3"), "--experiments", "1",
         "--require-gpu"],
        cwd=PYTORCH_SUITE_DIR.parents[2], capture_output=True, text=True, timeout=900,
    )
    assert checked.returncode == 2, checked.stdout + checked.stderr  # no GPU here, and one was required
    assert "NO GPU: no /dev/nvidia* device" in checked.stdout
    assert "verdict: PASS: 2/2 experiments within tolerance of the CPU gold on the CPU (no GPU)" in checked.stdout
