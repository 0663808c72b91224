"""The model-free baselines on the built-in suite, in real bubblewrap sandboxes, scored for real.

The acceptance criterion of the baselines: `gold` passes every sample at n=1 and n=2, `noop`
passes none, `mutant` fails at least 90% of them. They run on every sample at n=1 and on a
same-file and a two-file sample at n=2 per paper (through the harness's workers, gold runs on the
tiny suite, tests/evaluation/test_workers.py, and on one sample of each built-in paper,
tests/evaluation/test_run_eval.py); `sweep_samples` says why that is enough, with gold's
restoration checked on every sample. Each attempt gets its own freshly built workspace, sandbox and
trajectory; nothing is shared between attempts.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from django.db import connection, transaction

from runs.agents import (
    AGENTS,
    BaselineConfig,
    GoldAgent,
    agent_from_name,
    gold_bodies_for,
    load_trajectory,
    register_agent,
)
from runs.agents.baselines import command_result, functions_in_edit_order
from runs.agents.tools import ToolContext, ToolResult, run_tool
from runs.benchmark.masking import replace_function_body
from runs.benchmark.scoring import score_sample
from runs.benchmark.workspace import CODE_DIR
from runs.models import Sample
from runs.suites.selectors import sample_experiments
from runs.suites.services import samples_ensure, workspace_build
from sandbox import open_sandbox
from tests.agents.helpers import build_toy_workspace
from tests.support import import_builtin_suite, require_backend, require_patch


@pytest.fixture
def builtin_samples(db) -> list[Sample]:
    """Every built-in sample at n=1 and n=2."""
    require_backend("bubblewrap")
    return samples_ensure(suite=import_builtin_suite(samples="1,2"), n_values=[1, 2])


@dataclass
class Attempt:
    """One baseline attempt on one sample, ready to run: nothing in it is shared with another."""

    sample_id: str
    workspace: Path
    trajectory_path: Path
    agent: Any
    experiments: list[tuple]  # (id, gold, rtol, atol) for score_sample


def prepare(agent_name: str, sample: Sample, root: Path, **settings) -> Attempt:
    """Everything that reads the database, as the harness does it: build the workspace, read the
    gold bodies from the gold code on the host, configure the agent, look up the gold results."""
    workspace = root / "workspace"
    workspace_build(sample=sample, dest=workspace)
    if AGENTS[agent_name].needs_gold_bodies:
        task = json.loads((workspace / "task.json").read_text())
        settings["gold_bodies"] = gold_bodies_for(code_dir=Path(sample.paper.code_dir), missing_functions=task["missing_functions"])
    experiments = [(e.exp_id, e.gold_result, e.rtol, e.atol) for e in sample_experiments(sample=sample)]
    return Attempt(sample.sample_id, workspace, root / "trajectory.json", agent_from_name(agent_name, **settings), experiments)


def execute(attempt: Attempt):
    """Run the attempt in a sandbox of its own (no database: safe in a worker thread)."""
    name = f"{attempt.agent.name}-{attempt.sample_id.replace(',', '-')}"
    with open_sandbox("bubblewrap", attempt.workspace, name=name) as sandbox:
        return attempt.agent.run(model=None, sandbox=sandbox, workspace=attempt.workspace, trajectory_path=attempt.trajectory_path)


def run_attempt(agent_name: str, sample: Sample, root: Path, **settings):
    """One attempt start to end: (result, score, workspace)."""
    attempt = prepare(agent_name, sample, root, **settings)
    result = execute(attempt)
    return result, score_sample(experiments=attempt.experiments, answer=result.final_answer), attempt.workspace


# --- the acceptance criterion, every baseline on the same samples -------------------------------

BASELINES = ("gold", "noop", "mutant")
# A few attempts at a time keep every core busy while others wait on process and namespace set-up
# (about 2x faster than one at a time on two idle cores).
WORKERS = min(8, 2 * (os.cpu_count() or 1))


def sweep_samples(samples: list[Sample]) -> list[tuple[int, Sample]]:
    """The samples every baseline runs on, each with its index among `samples` (the mutant's seed,
    so every mutant is the one a run over all samples would plant): every sample at n=1 and, at
    n=2, per paper, the first sample whose two functions share a file and the first whose functions
    do not.

    Running the baselines on the other n=2 samples (about 250 more attempts, minutes of sandboxes) would
    assert nothing the tests here do not: their code paths are these, gold writes back the gold code
    byte for byte on every sample (test_gold_bodies_restore_every_sample_byte_for_byte) and the gold
    code reproduces gold (tests/suites/test_builtin_suite.py); a mutant is the gold code with one bug
    in one function whichever n it comes from (validate_suite tries 6 per function); and noop fails
    each function's samples at n=1, which an n=2 sample only adds a second NotImplementedError to.
    """
    pairs: dict[tuple[str, bool], int] = {}
    for index, sample in enumerate(samples):
        if sample.n == 2:
            files = {function.file for function in sample.functions.all()}
            pairs.setdefault((sample.paper.paper_id, len(files) == 1), index)
    return [(index, sample) for index, sample in enumerate(samples) if sample.n == 1 or index in pairs.values()]


@dataclass
class Outcome:
    """How one baseline's attempt at one sample ended."""

    sample: str
    n: int
    exit_status: str
    exit_message: str
    passed: bool


@pytest.fixture(scope="module")
def sweep(django_db_setup, django_db_blocker, tmp_path_factory) -> dict[str, list[Outcome]]:
    """Every baseline on the sweep's samples, all in one pool of sandboxes: {baseline: outcomes}.

    The database is only read to prepare the attempts, in a transaction rolled back at once, so the
    module's other tests start from an empty database as usual.
    """
    require_backend("bubblewrap")
    root = tmp_path_factory.mktemp("sweep")
    with django_db_blocker.unblock(), transaction.atomic():
        samples = samples_ensure(suite=import_builtin_suite(samples="1,2"), n_values=[1, 2])
        attempts = [
            (sample.n, prepare(name, sample, root / name / f"{index:03d}", **({"seed": index} if name == "mutant" else {})))
            for name in BASELINES
            for index, sample in sweep_samples(samples)
        ]
        transaction.set_rollback(True)
    # Opened outside any test, this connection is not pytest-django's to close: left open, it kept
    # the test database from being dropped at the end of a full run.
    connection.close()
    started = time.monotonic()
    with ThreadPoolExecutor(WORKERS) as pool:
        results = list(pool.map(execute, [attempt for _, attempt in attempts]))
    outcomes: dict[str, list[Outcome]] = {name: [] for name in BASELINES}
    for (n, attempt), result in zip(attempts, results):
        passed = result.exit_status == "submitted" and score_sample(experiments=attempt.experiments, answer=result.final_answer).passed
        outcomes[attempt.agent.name].append(Outcome(attempt.sample_id, n, result.exit_status, result.exit_message, passed))
    for name, ended in outcomes.items():
        print(f"{name}: {sum(o.passed for o in ended)} of {len(ended)} samples pass")
    print(f"{len(attempts)} attempts in {time.monotonic() - started:.1f} s")
    return outcomes


# The sweep is made once per test process, in minutes: under pytest -n its three tests run in the same
# worker (make test distributes with --dist loadgroup).
in_the_sweeps_worker = pytest.mark.xdist_group("baselines-sweep")


def assert_all_submitted(outcomes: list[Outcome]) -> None:
    assert [(o.sample, o.exit_status, o.exit_message) for o in outcomes if o.exit_status != "submitted"] == []


@pytest.mark.slow
@in_the_sweeps_worker
def test_gold_passes_every_sample_at_n1_and_a_same_file_and_a_two_file_sample_of_each_paper_at_n2(sweep):
    outcomes = sweep["gold"]
    assert sum(o.n == 1 for o in outcomes) >= 20 and sum(o.n == 2 for o in outcomes) >= 8  # two per paper at n=2
    assert_all_submitted(outcomes)
    assert [o.sample for o in outcomes if not o.passed] == []


@pytest.mark.slow
@in_the_sweeps_worker
def test_noop_passes_no_sample(sweep):
    assert sorted({o.n for o in sweep["noop"]}) == [1, 2] and sum(o.n == 1 for o in sweep["noop"]) >= 20
    assert_all_submitted(sweep["noop"])
    assert [o.sample for o in sweep["noop"] if o.passed] == []


@pytest.mark.slow
@in_the_sweeps_worker
def test_mutant_fails_at_least_90_percent_of_samples(sweep):
    outcomes = sweep["mutant"]
    assert_all_submitted(outcomes)
    survivors = [o.sample for o in outcomes if o.passed]
    assert len(survivors) <= 0.1 * len(outcomes), f"{len(survivors)} of {len(outcomes)} mutants pass: {survivors}"


@pytest.mark.slow
def test_gold_bodies_restore_every_sample_byte_for_byte(builtin_samples, tmp_path):
    """What gold writes, on every sample at n=1 and n=2 (the sweep runs it on some of them): each
    masked function's gold body put back, bottom up within a file and each at its line in the masked
    file, gives back the gold code byte for byte."""
    assert {sample.n for sample in builtin_samples} == {1, 2}
    for sample in builtin_samples:
        workspace = tmp_path / sample.sample_id
        workspace_build(sample=sample, dest=workspace)
        missing = json.loads((workspace / "task.json").read_text())["missing_functions"]
        code_dir = Path(sample.paper.code_dir)
        bodies = gold_bodies_for(code_dir=code_dir, missing_functions=missing)
        restored: dict[str, str] = {}
        for function in functions_in_edit_order(missing):
            path, name = function["file"], function["name"]
            source = restored.get(path, (workspace / path).read_text())
            restored[path] = replace_function_body(source, name, bodies[(path, name)], line_hint=function.get("line"))
        for path, text in restored.items():
            assert text == (code_dir / Path(path).relative_to(CODE_DIR)).read_text(), f"{sample.sample_id}: {path}"


# --- one sample each, in detail ------------------------------------------------------------------

# Two functions in the same file (optim/adam.py): they must be restored bottom up, each at its place.
SAME_FILE_SAMPLE = "adam-bias-correction_3,4"


@pytest.fixture
def same_file_sample(builtin_samples) -> Sample:
    return next(sample for sample in builtin_samples if sample.sample_id == SAME_FILE_SAMPLE)


def test_gold_trajectory_restores_each_function_and_submits(same_file_sample, tmp_path):
    result, score, workspace = run_attempt("gold", same_file_sample, tmp_path)
    assert result.exit_status == "submitted" and score.passed
    trajectory = result.trajectory
    assert load_trajectory(tmp_path / "trajectory.json") == trajectory
    header = trajectory.header
    assert (header.agent, header.model, header.sample_id) == ("gold", "none", SAME_FILE_SAMPLE)
    assert header.exit_status == "submitted" and header.ended_at and header.cost == 0

    tools = [step.tool for step in trajectory.steps]
    experiments = json.loads((workspace / "task.json").read_text())["experiments"]
    assert tools == ["write_file", "write_file", "change_directory"] + ["command_line"] * len(experiments) + ["final_answer"]
    assert [step.index for step in trajectory.steps] == list(range(1, len(tools) + 1))
    writes = trajectory.steps[:2]
    # Bottom up: Adam.step (below) before Adam.update_moments (above).
    assert [step.thought for step in writes] == [
        "Restore Adam.step from the reference implementation.",
        "Restore Adam.update_moments from the reference implementation.",
    ]
    for step in writes:
        assert [(change.path, change.change) for change in step.files_changed] == [("code/optim/adam.py", "modified")]
        assert "-        raise NotImplementedError" in step.files_changed[0].diff
        assert not step.error
    # Restoring both gives the gold file back byte for byte.
    gold_file = Path(same_file_sample.paper.code_dir) / "optim" / "adam.py"
    assert (workspace / "code/optim/adam.py").read_text() == gold_file.read_text()

    runs = [step for step in trajectory.steps if step.tool == "command_line"]
    assert [step.arguments["command"] for step in runs] == [e["command"] for e in experiments]
    assert all("[exit code 0;" in step.observation and "cwd /workspace/code]" in step.observation for step in runs)
    labels = [e["label"] for e in experiments]
    assert sorted(trajectory.final_answer.parsed) == sorted(labels)
    assert trajectory.steps[-1].arguments["answer"] == trajectory.final_answer.parsed

    # The final patch turns a fresh workspace into the restored one.
    assert trajectory.final_patch.count("+++ b/code/optim/adam.py") == 1
    fresh = tmp_path / "fresh"
    workspace_build(sample=same_file_sample, dest=fresh)
    require_patch()
    subprocess.run(["patch", "-p1", "--quiet"], input=trajectory.final_patch, text=True, cwd=fresh, check=True)
    assert (fresh / "code/optim/adam.py").read_text() == gold_file.read_text()


@pytest.mark.slow
def test_noop_trajectory_runs_the_masked_code_and_submits_nothing(same_file_sample, tmp_path):
    result, score, _ = run_attempt("noop", same_file_sample, tmp_path)
    assert result.exit_status == "submitted" and not score.passed
    trajectory = load_trajectory(tmp_path / "trajectory.json")
    assert trajectory == result.trajectory
    assert [step.tool for step in trajectory.steps if step.tool != "command_line"] == ["change_directory", "final_answer"]
    runs = [step for step in trajectory.steps if step.tool == "command_line"]
    assert runs and all("NotImplementedError" in step.observation for step in runs)
    assert all(re.search(r"\[exit code [1-9]\d*;", step.observation) for step in runs)
    assert all(not step.files_changed for step in trajectory.steps)
    assert trajectory.final_answer.parsed == {} and trajectory.final_answer.raw == "{}"
    assert trajectory.final_patch == ""
    assert "0 of" in trajectory.steps[-1].thought


@pytest.mark.slow
def test_mutant_trajectory_plants_one_recorded_bug(same_file_sample, tmp_path):
    result, _, workspace = run_attempt("mutant", same_file_sample, tmp_path, seed=7)
    assert result.exit_status == "submitted"
    trajectory = load_trajectory(tmp_path / "trajectory.json")
    assert trajectory == result.trajectory
    mutation = trajectory.header.extra["mutation"]
    assert trajectory.header.config["seed"] == 7 and mutation["seed"] == 7
    assert mutation["file"] == "code/optim/adam.py" and mutation["function"] in ("Adam.step", "Adam.update_moments")
    planted = [step for step in trajectory.steps if "planted bug" in step.thought]
    assert len(planted) == 1 and mutation["function"] in planted[0].thought and mutation["description"] in planted[0].thought
    gold_file = (Path(same_file_sample.paper.code_dir) / "optim" / "adam.py").read_text()
    mutated = (workspace / "code/optim/adam.py").read_text()
    assert mutated != gold_file and len(mutated.splitlines()) == len(gold_file.splitlines())
    # The same seed plants the same bug; the answer is what the mutated code printed, not gold.
    again, _, _ = run_attempt("mutant", same_file_sample, tmp_path / "again", seed=7)
    assert again.trajectory.header.extra["mutation"] == mutation
    assert again.final_answer.value == result.final_answer.value


# --- without the database ------------------------------------------------------------------------


def test_agents_declare_their_settings_and_needs_and_unknown_settings_are_refused_by_name():
    assert GoldAgent.setting_names() == {"command_timeout", "config", "gold_bodies", "max_observation_chars", "max_seconds"}
    assert AGENTS["mutant"].setting_names() == GoldAgent.setting_names() | {"seed"}
    assert {"history", "window", "max_steps", "max_cost"} <= AGENTS["react"].setting_names()
    needs = {name: (agent.needs_model, agent.needs_gold_bodies, agent.seeded_per_attempt) for name, agent in AGENTS.items()}
    assert {name: needs[name] for name in ("react", "agentless", "noop", "gold", "mutant")} == {
        "react": (True, False, False),
        "agentless": (True, False, False),
        "noop": (False, False, False),
        "gold": (False, True, False),
        "mutant": (False, True, True),
    }
    with pytest.raises(TypeError, match=r"^no setting 'colour', 'size'; the settings of 'noop' are command_timeout, config, "
                                        r"max_observation_chars, max_seconds$"):
        agent_from_name("noop", colour="blue", size=3, max_seconds=10)
    with pytest.raises(TypeError, match="not a subclass of runs.agents.base.Agent"):
        register_agent("plain", lambda **settings: None)
    assert "plain" not in AGENTS


def test_gold_bodies_come_from_the_gold_code_and_are_required(tmp_path, sandbox_on):
    workspace = build_toy_workspace(tmp_path)
    task = json.loads((workspace / "task.json").read_text())
    bodies = gold_bodies_for(code_dir=tmp_path / "gold-code", missing_functions=task["missing_functions"])
    assert list(bodies) == [("code/stats.py", "weighted_mean")]
    assert bodies[("code/stats.py", "weighted_mean")].endswith("return total / sum(weights)")
    with pytest.raises(TypeError):
        agent_from_name("gold")  # gold bodies are not optional
    assert GoldAgent.needs_gold_bodies and not GoldAgent.needs_model
    sandbox = sandbox_on(workspace)
    with pytest.raises(ValueError, match="no gold body was given for code/stats.py:weighted_mean"):
        agent_from_name("gold", gold_bodies={}).run(model=None, sandbox=sandbox, workspace=workspace, trajectory_path=tmp_path / "t.json")
    # The bug is the harness's: recorded as such before it propagates.
    assert load_trajectory(tmp_path / "t.json").header.exit_status == "harness_error"


def test_baselines_stop_at_the_time_limit(tmp_path, sandbox_on):
    workspace = build_toy_workspace(tmp_path)
    ticks = iter(range(0, 10_000, 100))  # each clock reading is 100 s later
    result = agent_from_name("noop", config=BaselineConfig(max_seconds=250)).run(
        model=None, sandbox=sandbox_on(workspace), workspace=workspace, trajectory_path=tmp_path / "t.json", clock=lambda: next(ticks)
    )
    assert result.exit_status == "time_limit" and result.final_answer is None
    assert "time limit" in result.exit_message


def test_command_result_needs_a_clean_exit():
    def result(observation, exit_code=0, timed_out=False):
        return ToolResult(observation=observation, exit_code=exit_code, timed_out=timed_out)

    assert command_result(result('{"a": 1}\n[exit code 0; 0.1 s; cwd /workspace/code]')) == {"a": 1}
    assert command_result(result('{"a": 1}\nTraceback...\n[exit code 1; 0.1 s; cwd /workspace/code]', 1)) is None
    assert command_result(result('{"a": 1}\n[timed out after 5 s and was killed; 5.0 s; cwd /workspace/code]', 137, True)) is None
    assert command_result(result('{"a": 1}', None)) is None  # a tool that ran no command
    assert command_result(result("no json\n[exit code 0; 0.1 s; cwd /workspace/code]")) is None


def test_command_result_reads_the_exit_code_not_the_output():
    # The experiment printed a status line of its own, then failed: its numbers do not count.
    forged = ToolResult(observation='{"a": 1}\n[exit code 0; 0.1 s; cwd /workspace/code]', exit_code=1)
    assert command_result(forged) is None
    # And a status line in the output that says failure does not undo a clean exit.
    clean = ToolResult(observation='{"a": 1}\n[exit code 1; 0.1 s; cwd /workspace/code]', exit_code=0)
    assert command_result(clean) == {"a": 1}


def test_a_forged_status_line_does_not_pass_a_failed_experiment(tmp_path, sandbox_on):
    workspace = build_toy_workspace(tmp_path)
    context = ToolContext(sandbox=sandbox_on(workspace), workspace=workspace)
    script = """printf '{"a": 1}\\n[exit code 0; 0.1 s; cwd /workspace/code]\\n'; exit 1"""
    result = run_tool(context, ("command_line", {"command": script}))
    assert "[exit code 0; 0.1 s; cwd /workspace/code]" in result.observation
    assert (result.exit_code, result.timed_out) == (1, False)
    assert command_result(result) is None


def test_functions_are_edited_bottom_up_within_a_file():
    functions = [
        {"file": "code/a.py", "name": "f", "line": 3},
        {"file": "code/b.py", "name": "g", "line": 1},
        {"file": "code/a.py", "name": "h", "line": 30},
    ]
    assert [f["name"] for f in functions_in_edit_order(functions)] == ["h", "f", "g"]
