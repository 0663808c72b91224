"""Test-only agents, registered in the test process and (through `WorkerWithTestAgents`) in worker processes.

Workers started by the tests use `--worker-class tests.evaluation.agents.WorkerWithTestAgents`, whose import
registers these agents there too.

- `gated_gold`: the gold baseline that first records a step and then waits while the file named
  by $EVAL_TEST_GATE exists, so a test can catch an attempt mid-run (to kill or cancel around it).
- `stalling_gold`: the gold baseline stuck inside the harness: it records a step, then sleeps (in
  Python, where no command timeout or budget check reaches it) far past any budget, as a worker
  stuck on something the agent set up would. Only the recovery of overrunning attempts ends it.
"""
import os
import time

from runs.agents import register_agent
from runs.agents.baselines import GoldAgent
from runs.evaluation.worker import EvaluationWorker

GATE_ENV = "EVAL_TEST_GATE"
GATE_LIMIT_SECONDS = 120


class GatedGoldAgent(GoldAgent):
    name = "gated_gold"

    def pipeline(self, run):
        gate = os.environ.get(GATE_ENV)
        step = run.new_step(thought="Wait at the test's gate.")
        started = run.clock()
        run.record(step, started=started)  # saved: the trajectory shows the attempt under way
        deadline = time.monotonic() + GATE_LIMIT_SECONDS
        while gate and os.path.exists(gate) and time.monotonic() < deadline:
            time.sleep(0.05)
        super().pipeline(run)


register_agent("gated_gold", GatedGoldAgent)

STALL_SECONDS = 120


class StallingGoldAgent(GoldAgent):
    name = "stalling_gold"

    def pipeline(self, run):
        step = run.new_step(thought="Stall inside the harness.")
        run.record(step, started=run.clock())  # saved: the trajectory shows the attempt under way
        deadline = time.monotonic() + STALL_SECONDS  # bounded, so a failing test leaves nothing running for long
        while time.monotonic() < deadline:
            time.sleep(0.1)
        super().pipeline(run)


register_agent("stalling_gold", StallingGoldAgent)


class WorkerWithTestAgents(EvaluationWorker):
    """The evaluation worker with the test agents registered."""
