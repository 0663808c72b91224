"""Test-only agents, registered in the test process and (through `WorkerWithTestAgents`) in worker processes.

Workers started by the tests use `--worker-class tests.evaluation.agents.WorkerWithTestAgents`, whose import
registers these agents there too.

- `gated_gold`: the gold baseline that first records a step and then waits while the file named
  by $EVAL_TEST_GATE exists, so a test can catch an attempt mid-run (to kill or cancel around it).
- `planted_gold`: the gold baseline with chosen functions written otherwise (`bodies`: function
  name -> a body, or "mutant" for the gold body's first seeded mutant, or "stub" to leave it
  masked), for tests that need a known right/wrong function at n >= 2.
- `stalling_gold`: the gold baseline stuck inside the harness: it records a step, then sleeps (in
  Python, where no command timeout or budget check reaches it) far past any budget, as a worker
  stuck on something the agent set up would. Only the recovery of overrunning attempts ends it.
"""
import os
import time

from runs.agents import register_agent
from runs.agents.baselines import GoldAgent, functions_in_edit_order
from runs.benchmark.masking import replace_function_body
from runs.benchmark.mutation import function_mutants
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


class PlantedGoldAgent(GoldAgent):
    name = "planted_gold"

    def __init__(self, *, bodies: dict | None = None, seed: int = 0, **settings):
        super().__init__(**settings)
        self.bodies, self.seed = dict(bodies or {}), seed

    def pipeline(self, run):
        for function in functions_in_edit_order(run.task.get("missing_functions", [])):
            planted = self.bodies.get(function["name"])
            if planted == "stub":
                continue
            key, hint = (function["file"], function["name"]), function.get("line")
            restored = replace_function_body(run.read(function["file"]), function["name"], self.gold_bodies[key], line_hint=hint)
            if planted == "mutant":
                restored = function_mutants(restored, function["name"], line_hint=hint, seed=self.seed)[0].source
            elif planted is not None:
                restored = replace_function_body(restored, function["name"], planted, line_hint=hint)
            run.call("write_file", {"path": function["file"], "content": restored}, thought=f"Write {function['name']}.")
        run.run_and_submit_experiments()


register_agent("planted_gold", PlantedGoldAgent)


class WorkerWithTestAgents(EvaluationWorker):
    """The evaluation worker with the test agents registered."""
