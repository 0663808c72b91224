"""Leaderboard data on the built-in suite rich enough that every page's JSON holds every key the OpenAPI
description names: tests/leaderboard/test_api_models.py checks the live responses against it (and
that none of its keys went unseen), tests/deploy/test_api_fuzz.py fuzzes a server holding it.

Two systems, both re-executed, on the same samples (three at n = 1, two at n = 2, in suite order):

System A: react, openai:gpt-4o, k = 2, oracle verifier choices.
    n = 1: s1a passed (read, crash, works) and wrong_answer within 1.5 tolerances (a near miss, cost
           unknown); s1b passed twice; s1c no_answer (crashes twice) and an infrastructure error.
    n = 2: s2a passed and wrong_answer (one function wrong); s2b budget_exhausted (interaction
           failure) and reexecution_failed (a ZeroDivisionError in the re-execution output).
System B: agentless, anthropic:claude-3-5-sonnet, k = 1: s1a wrong_answer, s1b and s1c passed, s2a
    wrong_answer (several functions wrong), s2b passed.
"""
from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime

from django.db.models import Q

from leaderboard.models import VerifierSelection
from leaderboard.rules import runs_frame
from runs.analysis.services import attempt_analysis_record
from runs.models import Attempt, Experiment, Function, Run, Sample, Suite
from tests.leaderboard.factories import make_run
from tests.support import import_builtin_suite, standings_refreshed

SHAPE = "RuntimeError: shape mismatch (3, 4) vs (4, 3)"
# A word of a step's text (SHAPE's), for the explorer's search.
SEARCH_WORD = "mismatch"


@dataclass
class ApiData:
    suite: Suite
    run_a: Run
    run_b: Run
    slug_a: str
    slug_b: str
    function: Function  # masked by s1a, which both systems attempted
    experiment: Experiment  # one that depends on it


def _step(index: int, tool: str, observation: str, *, exit_code: int | None = None) -> dict:
    data = {"index": index, "tool": tool, "arguments": {"command": "cd code && python main.py"}, "observation": observation,
            "duration": 10, "cost": 0.125, "cost_unknown": False, "thought": "", "truncated": False, "error": None,
            "traceback": None}
    if exit_code is not None:
        data.update(exit_code=exit_code, timed_out=False)
    return data


def _trajectory(*kinds: str) -> dict:
    steps = []
    for index, kind in enumerate(kinds):
        if kind == "read":
            steps.append(_step(index, "read_file", "def forward(x):\n    return x\n"))
        elif kind == "crash":
            steps.append(_step(index, "execute_bash_script",
                               f'Traceback (most recent call last):\n  File "/work/code/main.py", line 3, in <module>\n'
                               f"{SHAPE}\n[exit code 1; 1.0 s; cwd code]", exit_code=1))
        else:
            steps.append(_step(index, "execute_bash_script", "accuracy: 0.91\n[exit code 0; 2.0 s; cwd code]", exit_code=0))
    return {"format": "autoexperiment.trajectory/1", "header": {"sample_id": "x", "exit_status": "submitted"},
            "steps": steps, "final_answer": None, "final_patch": None}


def _done(outcome: str, **fields) -> dict:
    passed = outcome == Attempt.PASSED
    return {"status": Attempt.DONE, "outcome": outcome, "passed": passed, "reported_passed": passed,
            "reexecution_passed": passed, "tolerance_ratio": 0.5 if passed else None,
            "failure_label": "" if passed else outcome, "cost": 0.10, "agent_seconds": 60.0, **fields}


def _slug(run: Run) -> str:
    return runs_frame(Q(pk=run.pk)).iloc[0]["slug"]


def seed_api_data() -> ApiData:
    suite = import_builtin_suite("1,2")
    samples = Sample.objects.filter(paper__suite=suite).order_by("pk")
    s1a, s1b, s1c = samples.filter(n=1)[:3]
    s2a, s2b = samples.filter(n=2)[:2]
    finished = datetime(2026, 1, 10, tzinfo=UTC)
    run_a = make_run(suite, config={"history": "full"}, k=2, finished=finished)
    run_b = make_run(suite, agent="agentless", model="anthropic:claude-3-5-sonnet", context="none", finished=finished)
    specs = [
        (run_a, s1a, 0, _done(Attempt.PASSED), _trajectory("read", "crash", "works")),
        (run_a, s1a, 1, _done(Attempt.WRONG_ANSWER, tolerance_ratio=1.5, cost=None), _trajectory("read", "works")),
        (run_a, s1b, 0, _done(Attempt.PASSED), _trajectory("works")),
        (run_a, s1b, 1, _done(Attempt.PASSED), None),
        (run_a, s1c, 0, _done(Attempt.NO_ANSWER), _trajectory("crash", "crash")),
        (run_a, s1c, 1, {"status": Attempt.ERROR, "failure_label": Attempt.INFRASTRUCTURE}, _trajectory("read")),
        (run_a, s2a, 0, _done(Attempt.PASSED), _trajectory("read", "works")),
        (run_a, s2a, 1, _done(Attempt.WRONG_ANSWER, function_diagnosis=Attempt.ONE_WRONG), _trajectory("crash", "works")),
        (run_a, s2b, 0, _done(Attempt.BUDGET_EXHAUSTED, function_diagnosis=Attempt.INTERACTION), _trajectory("read")),
        (run_a, s2b, 1, _done(Attempt.REEXECUTION_FAILED, reexecution_output=(
            'Traceback (most recent call last):\n  File "main.py", line 9\nZeroDivisionError: division by zero\n')),
         _trajectory("works")),
        (run_b, s1a, 0, _done(Attempt.WRONG_ANSWER, cost=0.02), _trajectory("crash")),
        (run_b, s1b, 0, _done(Attempt.PASSED, cost=0.02), _trajectory("works")),
        (run_b, s1c, 0, _done(Attempt.PASSED, cost=0.02), None),
        (run_b, s2a, 0, _done(Attempt.WRONG_ANSWER, cost=0.02, function_diagnosis=Attempt.SEVERAL_WRONG), None),
        (run_b, s2b, 0, _done(Attempt.PASSED, cost=0.02), None),
    ]
    attempts = [Attempt.objects.create(run=run, sample=sample, index=index, trajectory=trajectory, **fields)
                for run, sample, index, fields, trajectory in specs]
    VerifierSelection.objects.bulk_create([
        VerifierSelection(run=run_a, sample_id=attempt.sample_id, attempt=attempt, verifier="oracle", candidates=2)
        for attempt in attempts if attempt.run_id == run_a.pk and attempt.index == 0
    ])
    attempt_analysis_record([attempt.pk for attempt in attempts])
    standings_refreshed()
    function = s1a.functions.order_by("func_id").first()
    return ApiData(suite=suite, run_a=run_a, run_b=run_b, slug_a=_slug(run_a), slug_b=_slug(run_b), function=function,
                   experiment=function.experiments.order_by("exp_id").first())
