"""`manage.py run_eval`: in-process (--sync), queued (--no-wait), and followed to the end with a
real worker."""
import io
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from django.conf import settings
from django.core.management import CommandError, call_command

from runs.models import Attempt, Run
from tests.evaluation.helpers import wait_for

pytestmark = pytest.mark.django_db(transaction=True)


def test_run_eval_sync_runs_gold_on_the_builtin_suite(builtin_suite):
    out = io.StringIO()
    call_command("run_eval", "--suite", "builtin", "--agent", "gold", "--n", "1", "--cap", "1", "--k", "1", "--sync", stdout=out)
    text = out.getvalue()
    run = Run.objects.get()
    assert (run.agent, run.n_values, run.attempts_per_sample, run.model) == ("gold", [1], 1, "")
    assert run.attempts.count() == 4 and run.attempts.filter(passed=True).count() == 4
    lines = [line for line in text.splitlines() if line.startswith("[")]
    assert lines[0].startswith("[......") and "0/4" in lines[0]
    assert "4/4 100%" in lines[-1] and "passed 4" in lines[-1]
    assert len(lines) == 5  # one line per change when not on a terminal
    assert "4 of 4 attempts passed" in text


def test_run_eval_passes_budgets_and_agent_settings(tiny_suite, redis_queue):
    out = io.StringIO()
    call_command(
        "run_eval", "--suite", "tiny", "--agent", "react", "--model", "openai:gpt-4o", "--n", "1", "--k", "2",
        "--max-steps", "7", "--max-seconds", "60", "--max-cost", "0.5", "--history", "window", "--window", "3",
        "--context", "oracle", "--no-wait", stdout=out,
    )
    run = Run.objects.get()
    assert (run.max_steps, run.max_seconds, run.max_cost, run.context) == (7, 60.0, 0.5, "oracle")
    assert run.agent_config == {"history": "window", "window": 3}
    assert run.attempts.count() == 6 and redis_queue.count == 6
    assert f"Run {run.pk} queued" in out.getvalue()


def test_run_eval_refuses_what_it_cannot_run(tiny_suite):
    with pytest.raises(CommandError, match="unknown agent"):
        call_command("run_eval", "--suite", "tiny", "--agent", "nope", "--sync", stdout=io.StringIO())
    with pytest.raises(CommandError, match="needs a model"):
        call_command("run_eval", "--suite", "tiny", "--agent", "react", "--sync", stdout=io.StringIO())
    with pytest.raises(CommandError, match="could not be configured"):
        call_command("run_eval", "--suite", "tiny", "--agent", "react", "--model", "openai:gpt-4o", "--history", "sliding",
                     "--sync", stdout=io.StringIO())
    with pytest.raises(CommandError, match="could not be configured"):
        call_command("run_eval", "--suite", "tiny", "--agent", "gold", "--agent-config", '{"colour": "blue"}',
                     "--sync", stdout=io.StringIO())
    with pytest.raises(CommandError, match="no suite named"):
        call_command("run_eval", "--suite", "missing", "--agent", "gold", "--sync", stdout=io.StringIO())
    assert not Run.objects.exists()


def test_run_eval_exits_non_zero_after_infrastructure_errors(tiny_suite, settings):
    settings.SANDBOX_IMAGE = "autoexperiment-missing:test"
    out = io.StringIO()
    with pytest.raises(CommandError, match="3 attempt\\(s\\) ended in infrastructure errors"):
        call_command("run_eval", "--suite", "tiny", "--agent", "gold", "--backend", "docker", "--sync", stdout=out)
    assert "Failures: infrastructure 3" in out.getvalue()
    assert set(Attempt.objects.values_list("failure_label", flat=True)) == {Attempt.INFRASTRUCTURE}


@pytest.mark.slow
def test_run_eval_follows_a_run_on_a_real_worker(tiny_suite, workers):
    worker = workers.start(burst=False)
    out = io.StringIO()
    call_command("run_eval", "--suite", "tiny", "--agent", "gold", "--n", "1", "--poll", "0.2", stdout=out)
    worker.terminate()
    workers.wait(worker, timeout=30)
    text = out.getvalue()
    assert f"3 attempts on queue {settings.EVALUATION_QUEUE!r}" in text
    assert "3/3 100%" in text and "3 of 3 attempts passed" in text
    assert Attempt.objects.filter(passed=True).count() == 3


def test_run_eval_resume_continues_a_run_in_process(tiny_suite):
    call_command("run_eval", "--suite", "tiny", "--agent", "gold", "--sync", stdout=io.StringIO())
    run = Run.objects.get()
    Attempt.objects.filter(pk=run.attempts.first().pk).update(status=Attempt.CANCELLED)
    out = io.StringIO()
    call_command("run_eval", "--resume", str(run.pk), "--sync", stdout=out)
    assert "1 un-cancelled" in out.getvalue()
    assert run.attempts.filter(passed=True).count() == 3


@pytest.mark.slow
def test_a_killed_sync_run_resumes_at_once(tiny_suite, workers, tmp_path):
    """`run_eval --sync` killed mid-attempt: on the same host its dead process is recognised
    without waiting for the heartbeat to go stale, and `--resume --sync` finishes the run."""
    gate = tmp_path / "gate"
    gate.touch()
    # run_eval in a process of its own, with the test agents registered.
    script = (
        "import django; django.setup(); import tests.evaluation.agents; "
        "from django.core.management import call_command; "
        "call_command('run_eval', '--suite', 'tiny', '--agent', 'gated_gold', '--sync')"
    )
    log = tmp_path / "run_eval.log"
    with open(log, "w") as output:
        process = subprocess.Popen(
            [sys.executable, "-c", script],
            cwd=Path(__file__).resolve().parents[2],
            env=workers.env(EVAL_TEST_GATE=str(gate), DJANGO_SETTINGS_MODULE="autoexperiment_site.settings"),
            stdout=output,
            stderr=subprocess.STDOUT,
        )
    running = wait_for(
        lambda: Attempt.objects.filter(status=Attempt.RUNNING).first() or (process.poll() is not None and pytest.fail(log.read_text())),
        message="a running attempt",
    )
    process.send_signal(signal.SIGKILL)
    process.wait(timeout=30)
    gate.unlink()

    out = io.StringIO()
    call_command("run_eval", "--resume", str(running.run_id), "--sync", stdout=out)

    assert "1 attempt(s) of dead workers recovered" in out.getvalue()
    running.refresh_from_db()
    assert (running.status, running.passed, running.tries, running.infra_failures) == (Attempt.DONE, True, 2, 1)
    assert "no longer exists" in running.infra_history[0]["reason"]
    assert Attempt.objects.filter(passed=True).count() == 3
