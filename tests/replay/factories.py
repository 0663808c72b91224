"""Rows for page tests: a suite, paper, functions, experiments, a sample, a run and attempts whose
trajectory and scores are in the real stored formats.

The trajectory is built with `runs.agents.trajectory` (Trajectory/Header/Step/FileChange/
FinalAnswer → to_dict()) and the scores with `runs.benchmark.scoring.score_sample` + `runs.evaluation.verdicts.score_dict`,
so a page that renders these renders what the harness stores. Reuse them from any test::

    from tests.replay.factories import make_attempt, make_step

    attempt = make_attempt(steps=[make_step(1, thought="look"), make_step(2, error=True)])

Everything takes keyword arguments with working defaults; nothing here needs a sandbox or a model.
"""
from __future__ import annotations

import html
import itertools
import re
from typing import Any

from django.contrib.auth import get_user_model

from runs.agents.trajectory import FileChange, FinalAnswer, Header, Step, Trajectory
from runs.benchmark.answers import parse_answer
from runs.benchmark.scoring import score_sample
from runs.benchmark.text import json_safe
from runs.benchmark.workspace import experiment_label
from runs.evaluation.verdicts import score_dict
from runs.models import Attempt, Experiment, Function, Paper, Run, Sample, Suite

_counter = itertools.count(1)

GOLD_BODY = "    total = sum(w * v for v, w in zip(values, weights))\n    return total / sum(weights)\n"
# Diff of a step that restores the masked function (what the gold baseline writes).
FUNCTION_DIFF = (
    "--- a/code/stats.py\n"
    "+++ b/code/stats.py\n"
    "@@ -1,4 +1,4 @@\n"
    " def weighted_mean(values, weights):\n"
    '     """The mean of `values`, each counted `weights` times."""\n'
    "-    raise NotImplementedError\n"
    "+    total = sum(w * v for v, w in zip(values, weights))  # the gold line\n"
    "+    return total / sum(weights)\n"
)
TRACEBACK_OUTPUT = (
    "computing the weighted mean\n"
    "Traceback (most recent call last):\n"
    '  File "/workspace/code/run.py", line 8, in <module>\n'
    "    print(json.dumps({\"mean\": weighted_mean(values, weights)}))\n"
    "NotImplementedError\n"
    "[exit code 1; 0.1 s; cwd code]"
)
DEFAULT_GOLD = {"mean": 2.6, "spread": 7.0}


def text_of(markup: str) -> str:
    """What a reader sees of `markup`: tags dropped, entities decoded (highlighting splits a line
    of code into spans, so the line is only found whole in the text)."""
    return html.unescape(re.sub(r"<[^>]+>", "", markup))


def unique(prefix: str) -> str:
    return f"{prefix}-{next(_counter)}"


def make_user(*, username: str | None = None, password: str = "correct-horse-battery", **fields: Any):
    """A user with a usable password (`password`)."""
    return get_user_model().objects.create_user(username=username or unique("user"), password=password, **fields)


def make_sample(
    *,
    suite: Suite | None = None,
    paper_id: str | None = None,
    gold: list[dict] | None = None,
    func_ids: tuple[int, ...] = (0,),
) -> Sample:
    """A sample with one masked function per `func_ids`, and one experiment per `gold` result (each
    depending on every masked function)."""
    suite = suite or Suite.objects.create(name=unique("suite"), version="1", gold_root="/nonexistent")
    paper = Paper.objects.create(suite=suite, paper_id=paper_id or unique("2401.0"), title="A Paper on Weighted Means")
    functions = [
        Function.objects.create(paper=paper, func_id=func_id, file="stats.py", name=f"weighted_mean_{func_id}",
                                description="The weighted mean.")
        for func_id in func_ids
    ]
    for exp_id, result in enumerate(gold if gold is not None else [DEFAULT_GOLD]):
        experiment = Experiment.objects.create(
            paper=paper, exp_id=exp_id, description=f"Experiment {exp_id}", command="python3 run.py",
            answer_format={key: 0.0 for key in result}, gold_result=result,
        )
        experiment.dependencies.set(functions)
    sample = Sample.objects.create(
        paper=paper, sample_id=f"{paper.paper_id}_{','.join(map(str, func_ids))}", n=len(func_ids)
    )
    sample.functions.set(functions)
    return sample


def make_run(*, suite: Suite, agent: str = "react", model: str = "openai:gpt-4o", **fields: Any) -> Run:
    fields.setdefault("n_values", [1])
    fields.setdefault("sandbox_backend", "bubblewrap")
    return Run.objects.create(suite=suite, agent=agent, model=model, **fields)


def make_step(
    index: int,
    *,
    thought: str = "",
    tool: str | None = "command_line",
    arguments: dict | None = None,
    observation: str = "ok\n[exit code 0; 0.1 s; cwd code]",
    exit_code: int | None = 0,
    error: bool = False,
    traceback: str | None = None,
    files: list[tuple[str, str, str | None]] | None = None,
    truncated: bool = False,
    input_tokens: int = 1200,
    output_tokens: int = 80,
    cost: float = 0.0042,
    cost_unknown: bool = False,
    duration: float = 2.5,
    model_seconds: float = 1.5,
    **fields: Any,
) -> Step:
    """A finished step. `files` lists (path, change, diff or None). `exit_code` is the command's
    (None: the tool ran none); the replay reads it, never the status line in `observation`."""
    return Step(
        index=index,
        started_at=f"2025-01-01T00:00:{index % 60:02d}+00:00",
        duration=duration,
        model_seconds=model_seconds,
        thought=thought or f"Thinking about step {index}.",
        tool=tool,
        arguments={"command": f"python3 run.py  # step {index}"} if arguments is None else arguments,
        observation=observation,
        exit_code=exit_code,
        truncated=truncated,
        error=error,
        traceback=traceback,
        files_changed=[FileChange(path, change, diff) for path, change, diff in files or []],
        input_tokens=input_tokens,
        output_tokens=output_tokens,
        cost=cost,
        cost_unknown=cost_unknown,
        **fields,
    )


def default_steps() -> list[Step]:
    """Four steps: read, edit (with a Python diff), a crash with a traceback, then a good run."""
    return [
        make_step(1, thought="List the files first.", tool="list_files", arguments={"path": "code"},
                  observation="code/run.py\ncode/stats.py", exit_code=None),
        make_step(2, thought="Implement weighted_mean as the paper says.", tool="write_file",
                  arguments={"path": "code/stats.py", "content": "def weighted_mean(values, weights): ..."},
                  observation="Wrote code/stats.py", exit_code=None, files=[("code/stats.py", "modified", FUNCTION_DIFF)]),
        make_step(3, thought="Run the experiment.", observation=TRACEBACK_OUTPUT, exit_code=1),
        make_step(4, thought="Run it again after the fix.",
                  observation='{"mean": 2.6, "spread": 7.0}\n[exit code 0; 0.2 s; cwd code]'),
    ]


def make_trajectory(
    *,
    steps: list[Step] | None = None,
    sample_id: str = "toy_0",
    agent: str = "react",
    model: str = "openai:gpt-4o",
    answer: str | None = '{"mean": 2.6, "spread": 7.0}',
    final_patch: str | None = FUNCTION_DIFF,
    exit_status: str = "submitted",
    exit_message: str = "the agent submitted a final answer",
    **header_fields: Any,
) -> dict:
    """A trajectory dict as stored in Attempt.trajectory (totals summed from the steps)."""
    header = Header(sample_id=sample_id, agent=agent, model=model, config={"history": "full", "context": "full"},
                    started_at="2025-01-01T00:00:00+00:00", ended_at="2025-01-01T00:05:00+00:00",
                    exit_status=exit_status, exit_message=exit_message, **header_fields)
    trajectory = Trajectory(header=header, steps=list(default_steps() if steps is None else steps))
    for step in trajectory.steps:
        header.input_tokens += step.input_tokens
        header.output_tokens += step.output_tokens
        header.cost += step.cost
        header.cost_unknown = header.cost_unknown or step.cost_unknown
    if answer is not None:
        trajectory.final_answer = FinalAnswer.from_parsed(answer, parse_answer(answer))
    trajectory.final_patch = final_patch
    return json_safe(trajectory.to_dict())


def make_score(sample: Sample, answer: Any) -> dict:
    """The stored SampleScore dict of `answer` (a mapping or text) against the sample's gold."""
    experiments = list(sample.paper.experiments.order_by("exp_id"))
    specs = [(experiment_label(n), e.gold_result, e.rtol, e.atol) for n, e in enumerate(experiments, start=1)]
    return score_dict(score_sample(experiments=specs, answer=answer), experiments)


def make_attempt(
    *,
    sample: Sample | None = None,
    run: Run | None = None,
    agent: str = "react",
    model: str = "openai:gpt-4o",
    steps: list[Step] | None = None,
    trajectory: dict | None | bool = True,
    answer: str | None = '{"mean": 2.6, "spread": 7.0}',
    reexecuted: Any = "same",
    final_patch: str | None = FUNCTION_DIFF,
    index: int | None = None,
    **fields: Any,
) -> Attempt:
    """A finished attempt with its trajectory and both scores.

    `trajectory=True` builds one from `steps` (default: `default_steps()`), a dict is stored as
    given, None stores none. `reexecuted` is what the re-executed code printed: "same" (the
    answer), None (not re-executed) or a mapping/text scored like an answer. `passed`, `mismatch`
    and the failure label follow from the two scores unless given in `fields`.
    """
    sample = sample or make_sample()
    run = run or make_run(suite=sample.paper.suite, agent=agent, model=model)
    if trajectory is True:
        trajectory = make_trajectory(steps=steps, sample_id=sample.sample_id, agent=run.agent, model=run.model,
                                     answer=answer, final_patch=final_patch)
    reported = make_score(sample, answer) if answer is not None else None
    if reexecuted is None:
        reexecution = None
    elif isinstance(reexecuted, str) and reexecuted == "same":
        reexecution = reported
    else:
        reexecution = make_score(sample, reexecuted)
    reported_passed = bool(reported and reported["passed"])
    reexecution_passed = None if reexecution is None else bool(reexecution["passed"])
    passed = reported_passed and bool(reexecution_passed)
    defaults = {
        "status": Attempt.DONE,
        "exit_status": "submitted",
        "final_answer_raw": answer,
        "parsed_answer": json_safe(parse_answer(answer).value) if answer is not None else None,
        "reported_score": reported,
        "reported_passed": reported_passed,
        "reexecution_score": reexecution,
        "reexecution_passed": reexecution_passed,
        "passed": passed,
        "mismatch": reported_passed and reexecution_passed is False,
        "failure_label": "" if passed else (Attempt.NO_ANSWER if answer is None else Attempt.WRONG_ANSWER),
        "final_patch": final_patch or "",
        "trajectory": trajectory,
        "agent_seconds": 42.0,
    }
    if isinstance(trajectory, dict):
        header = trajectory.get("header") or {}
        defaults.update(input_tokens=header.get("input_tokens", 0), output_tokens=header.get("output_tokens", 0),
                        cost=header.get("cost"))
    defaults.update(fields)
    if index is None:
        index = Attempt.objects.filter(run=run, sample=sample).count()
    return Attempt.objects.create(run=run, sample=sample, index=index, **defaults)


def synthetic_trajectory(*, steps: int = 500, diff_lines_per_step: int = 30, observation_chars: int = 4000,
                         error_every: int = 7, sample_id: str = "bench_0", agent: str = "react",
                         model: str = "fake:bench") -> dict:
    """A trajectory dict in the stored format with `steps` steps, each with a Python diff and a long
    observation (every `error_every`-th one a crash with a traceback): a worst case for the page."""
    header = Header(sample_id=sample_id, agent=agent, model=model, config={"history": "full"},
                    started_at="2025-01-01T00:00:00+00:00", ended_at="2025-01-01T00:30:00+00:00",
                    exit_status="submitted")
    trajectory = Trajectory(header=header)
    filler = "".join(f"line {i}: loss={i / 7:.6f} accuracy={(i % 97) / 97:.4f}\n" for i in range(observation_chars // 40 + 1))
    for index in range(1, steps + 1):
        body = "".join(f"+    value_{index}_{i} = compute(x, {i}) * 0.5  # step {index}\n" for i in range(diff_lines_per_step))
        diff = (f"--- a/code/model_{index % 5}.py\n+++ b/code/model_{index % 5}.py\n"
                f"@@ -1,3 +1,{diff_lines_per_step + 3} @@\n def forward(x):\n-    return x\n{body}     pass\n")
        crashed = error_every and index % error_every == 0
        observation = filler[:observation_chars]
        if crashed:
            observation += ('Traceback (most recent call last):\n  File "run.py", line 3, in <module>\n'
                            "    main()\nValueError: shapes do not match\n[exit code 1; 0.4 s; cwd code]")
        else:
            observation += "[exit code 0; 0.4 s; cwd code]"
        step = Step(index=index, started_at="2025-01-01T00:00:00+00:00", duration=1.5, model_seconds=1.0,
                    thought=f"Step {index}: implement part {index} of the method.", tool="command_line",
                    arguments={"command": f"python run.py --step {index}"}, observation=observation,
                    exit_code=1 if crashed else 0, files_changed=[FileChange(f"code/model_{index % 5}.py", "modified", diff)],
                    input_tokens=1000 + index, output_tokens=100, cost=0.001)
        trajectory.steps.append(step)
        header.input_tokens += step.input_tokens
        header.output_tokens += step.output_tokens
        header.cost += step.cost
    trajectory.final_answer = FinalAnswer(raw='{"Experiment 1": {"loss": 0.5}}', parsed={"Experiment 1": {"loss": 0.5}}, parse_method="json")
    trajectory.final_patch = "".join(step.files_changed[0].diff for step in trajectory.steps[:20])
    return trajectory.to_dict()


def make_long_attempt(*, steps: int = 500, **fields: Any) -> Attempt:
    """An attempt with `synthetic_trajectory(steps=...)`: diffs and long observations
    in every step, a crash every seventh."""
    sample = fields.pop("sample", None) or make_sample()
    trajectory = synthetic_trajectory(steps=steps, sample_id=sample.sample_id)
    return make_attempt(sample=sample, trajectory=trajectory, **fields)


# Payloads that would run script if any of them reached the page unescaped.
XSS_PAYLOADS = (
    "<script>alert(1)</script>",
    "<img src=x onerror=alert(1)>",
    '"><svg onload=alert(1)>',
)
XSS = " ".join(XSS_PAYLOADS)


def make_xss_attempt(**fields: Any) -> Attempt:
    """An attempt with the payloads in every piece of model- or uploader-written content: thought,
    tool name and arguments, observation, traceback, notes, file names and diffs, final answer,
    exit message, answer keys and the final patch."""
    diff = f"--- a/code/{XSS_PAYLOADS[2]}.py\n+++ b/code/{XSS_PAYLOADS[2]}.py\n@@ -1 +1 @@\n-x = '{XSS_PAYLOADS[0]}'\n+x = \"{XSS_PAYLOADS[1]}\"  # {XSS}\n"
    steps = [
        make_step(1, thought=XSS, tool="command_line", arguments={"command": XSS, XSS_PAYLOADS[1]: XSS},
                  observation=f"{XSS}\n[exit code 0; 0.1 s; cwd code]", notes=[XSS], summary=XSS),
        make_step(2, thought=XSS, tool=XSS_PAYLOADS[1], arguments={"path": XSS}, observation=XSS, error=True,
                  traceback=f"Traceback (most recent call last):\n  {XSS}\nValueError: {XSS}",
                  files=[(f"code/{XSS_PAYLOADS[2]}.py", "modified", diff), (XSS_PAYLOADS[0], XSS, None)]),
    ]
    answer = '{"mean": "' + XSS.replace('"', '\\"') + '", "' + XSS_PAYLOADS[1] + '": 1}'
    return make_attempt(steps=steps, answer=answer, final_patch=diff, exit_message=XSS, failure_detail=XSS, **fields)
