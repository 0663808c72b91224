"""Hand-built leaderboard data (used by tests/leaderboard and the browser test) whose numbers are checked by hand in the tests.

Suite "toy", paper "p" with functions f0, f1, f2; samples s0, s1, s2 (n=1) and s01, s12 (n=2).

System A: react, openai:gpt-4o, full context, {"history": "full"}, k=2, every attempt re-executed.
    s0: pass, mismatch (reported pass, re-execution fail)  -> c/m = 1/2
    s1: pass, pass                                          -> 2/2
    s2: fail, error (not counted)                           -> 0/1
    s01: pass, fail                                         -> 1/2
    s12: fail, fail                                         -> 0/2
    plus a queued and a cancelled attempt, never counted.
    Pass@1 n=1 = (0.5 + 1 + 0) / 3 = 0.5; n=2 = 0.25.
    Pass@2 n=1 over s0, s1 (s2 has one counted attempt) = (1 + 1) / 2 = 1.0; n=2 = (1 + 0) / 2 = 0.5.
    Cost 0.10 per done attempt except s1 #1 (unknown): mean 0.10 over 8 known, 1 unknown.
System B: react, openai:gpt-4o, full context, {"a": 2, "b": 1} written in two key orders over two
    runs (one system), k=1, uploaded: nothing re-executed, verdict = reported_passed.
    run 1: s0 reported pass, s1 reported fail; run 2: s0 reported fail, s2 reported pass.
    Pass@1 n=1 = (1/2 + 0 + 1) / 3 = 0.5.
System C: agentless, anthropic:claude-3-5-sonnet, no paper, k=1, verified: s0 pass, s1 pass, s2 fail.
    Pass@1 n=1 = 2/3.
"""
from dataclasses import dataclass
from datetime import UTC, datetime

from runs.models import Attempt, Function, Paper, Run, Sample, Suite
from tests.support import standings_refreshed

PASS = {"status": Attempt.DONE, "reported_passed": True, "reexecution_passed": True, "passed": True}
FAIL = {"status": Attempt.DONE, "reported_passed": False, "reexecution_passed": False, "passed": False}
MISMATCH = {"status": Attempt.DONE, "reported_passed": True, "reexecution_passed": False, "passed": False, "mismatch": True}
ERROR = {"status": Attempt.ERROR, "failure_label": Attempt.INFRASTRUCTURE}
QUEUED = {"status": Attempt.QUEUED}
CANCELLED = {"status": Attempt.CANCELLED}
REPORTED_PASS = {"status": Attempt.DONE, "reported_passed": True, "reexecution_passed": None, "passed": False}
REPORTED_FAIL = {"status": Attempt.DONE, "reported_passed": False, "reexecution_passed": None, "passed": False}


@dataclass
class BoardData:
    suite: Suite
    paper: Paper
    functions: list[Function]
    samples: dict[str, Sample]
    run_a: Run
    run_b1: Run
    run_b2: Run
    run_c: Run
    attempts: dict[tuple[str, str, int], Attempt]


def make_run(suite, *, agent="react", model="openai:gpt-4o", config=None, context="full", k=1, n_values=(1, 2),
             finished=None):
    return Run.objects.create(
        suite=suite, agent=agent, model=model, agent_config=config or {}, context=context, n_values=list(n_values),
        attempts_per_sample=k, sandbox_backend="bubblewrap", finished_at=finished,
    )


def make_attempt(run, sample, index, outcome, *, cost=0.10, seconds=60.0):
    fields = dict(outcome)
    if fields["status"] in (Attempt.DONE, Attempt.ERROR):
        fields.setdefault("cost", cost)
        fields.setdefault("agent_seconds", seconds)
    return Attempt.objects.create(run=run, sample=sample, index=index, **fields)


def build_board_data() -> BoardData:
    suite = Suite.objects.create(name="toy", version="1", gold_root="/nonexistent")
    paper = Paper.objects.create(suite=suite, paper_id="p", title="A paper", text="The method.")
    functions = [Function.objects.create(paper=paper, func_id=i, file="m.py", name=f"f{i}") for i in range(3)]
    samples = {}
    for ids in ("0", "1", "2", "0,1", "1,2"):
        numbers = [int(i) for i in ids.split(",")]
        sample = Sample.objects.create(paper=paper, sample_id=f"p_{ids}", n=len(numbers))
        sample.functions.set([functions[i] for i in numbers])
        samples["s" + ids.replace(",", "")] = sample
    attempts = {}

    def add(system, run, name, index, outcome, **kwargs):
        attempts[(system, name, index)] = make_attempt(run, samples[name], index, outcome, **kwargs)

    run_a = make_run(suite, config={"history": "full"}, k=2, finished=datetime(2026, 1, 10, tzinfo=UTC))
    add("A", run_a, "s0", 0, PASS)
    add("A", run_a, "s0", 1, MISMATCH)
    add("A", run_a, "s1", 0, PASS)
    add("A", run_a, "s1", 1, PASS, cost=None)
    add("A", run_a, "s2", 0, FAIL)
    add("A", run_a, "s2", 1, ERROR)
    add("A", run_a, "s01", 0, PASS)
    add("A", run_a, "s01", 1, FAIL)
    add("A", run_a, "s12", 0, FAIL)
    add("A", run_a, "s12", 1, FAIL)
    add("A", run_a, "s2", 2, QUEUED)
    add("A", run_a, "s12", 2, CANCELLED)

    run_b1 = make_run(suite, config={"b": 1, "a": 2}, n_values=(1,), finished=datetime(2026, 1, 5, tzinfo=UTC))
    run_b2 = make_run(suite, config={"a": 2, "b": 1}, n_values=(1,), finished=datetime(2026, 1, 20, tzinfo=UTC))
    add("B", run_b1, "s0", 0, REPORTED_PASS, cost=0.30, seconds=30.0)
    add("B", run_b1, "s1", 0, REPORTED_FAIL, cost=0.30, seconds=30.0)
    add("B", run_b2, "s0", 0, REPORTED_FAIL, cost=0.30, seconds=30.0)
    add("B", run_b2, "s2", 0, REPORTED_PASS, cost=0.30, seconds=30.0)

    run_c = make_run(suite, agent="agentless", model="anthropic:claude-3-5-sonnet", context="none", n_values=(1,),
                     finished=datetime(2026, 1, 15, tzinfo=UTC))
    add("C", run_c, "s0", 0, PASS, cost=0.02)
    add("C", run_c, "s1", 0, PASS, cost=0.02)
    add("C", run_c, "s2", 0, FAIL, cost=0.02)
    standings_refreshed()
    return BoardData(suite, paper, functions, samples, run_a, run_b1, run_b2, run_c, attempts)
