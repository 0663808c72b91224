"""Real foreign agents (the `dev` extra pins them) solve one exported built-in task against the fake
LLM server, so the files they write are their own, not hand-made fixtures.

mini-swe-agent: the scripted model writes the gold body in with a bash heredoc, runs the experiments
and submits what they printed; its `.traj.json` is checked, and the diff of its workspace is uploaded
and re-executed in bubblewrap like any submitter's. Inspect AI: the same steps with its basic agent;
its `.eval` log converts (runs.agents.foreign) to one step per tool call."""
from __future__ import annotations

import html
import json
import logging
import os
import re
import shlex
import subprocess
import sys
import tarfile
from importlib.metadata import version
from pathlib import Path

import pytest
from django.urls import reverse

from runs.agents.foreign import detect_and_convert
from runs.benchmark.masking import function_body_source, replace_function_body
from runs.benchmark.workspace import CODE_DIR
from runs.models import Attempt, Sample, Submission
from runs.submissions.format_text import upload_format_markdown
from runs.submissions.services import submission_create, submission_reexecute_sync
from runs.suites.export import sample_archive_name, tasks_export
from tests.fakes import FakeTurn
from tests.replay.factories import make_user
from tests.submissions.helpers import SAMPLE, jsonl, record, zip_bytes
from tests.support import require_backend

pytestmark = pytest.mark.django_db

SUBMIT_MARKER = "COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT"  # mini-swe-agent ends when a command prints it first
HEREDOC_END = "MINI_SWE_AGENT_EOF"


def run_mini_swe_agent(fake_llm, monkeypatch, tmp_path: Path, *, cwd: Path, task: str) -> tuple[dict, Path]:
    """Run mini-swe-agent's default agent the way its `mini` command builds it (mini.yaml: bash as
    a tool call, a local shell in `cwd`) against the fake model. Returns its outcome and its
    saved trajectory.

    Offline: LiteLLM reads its bundled model-cost map instead of fetching one, and mini-swe-agent
    its global config (API keys, defaults) from an empty directory, not ~/.config/mini-swe-agent.
    Both are read when the packages are first imported, hence the imports here.
    """
    monkeypatch.setenv("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    monkeypatch.setenv("MSWEA_GLOBAL_CONFIG_DIR", str(tmp_path / "mswea-config"))
    monkeypatch.setenv("MSWEA_SILENT_STARTUP", "1")
    # One try per model call: a broken script fails at once, not after ten backed-off retries.
    monkeypatch.setenv("MSWEA_MODEL_RETRY_STOP_AFTER_ATTEMPT", "1")
    import yaml
    from minisweagent.agents import get_agent
    from minisweagent.config import builtin_config_dir
    from minisweagent.environments import get_environment
    from minisweagent.models import get_model

    config = yaml.safe_load((builtin_config_dir / "mini.yaml").read_text())
    model = get_model(config=config["model"] | {
        "model_name": "openai/fake-model",
        "model_kwargs": {"api_base": fake_llm.base_url_openai, "api_key": "sk-test", "num_retries": 0},
        "cost_tracking": "ignore_errors",  # the fake model has no price in LiteLLM's map
    })
    # Commands run with this interpreter (numpy and all) first on PATH, as in a submitter's venv.
    shell_env = config["environment"].get("env", {}) | {"PATH": f"{Path(sys.executable).parent}:{os.environ.get('PATH', '')}"}
    env = get_environment(config["environment"] | {"cwd": str(cwd), "env": shell_env}, default_type="local")
    trajectory_path = tmp_path / "mini.traj.json"
    agent = get_agent(model, env, config["agent"] | {"output_path": trajectory_path}, default_type="default")
    return agent.run(task), trajectory_path


def sent_commands(trajectory: dict) -> list[str]:
    """The commands of the assistant messages of a mini-swe-agent trajectory, in order."""
    return [action["command"] for m in trajectory["messages"] if m.get("role") == "assistant" for action in m["extra"]["actions"]]


def exported_task(suite, tmp_path: Path) -> tuple[Sample, Path]:
    """The sample SAMPLE as a submitter gets it (export_tasks' archive), unpacked twice under work/:
    a/ stays pristine and the agent works in b/, so `diff -ruN a/code b/code` names the files as uploads need."""
    export = tmp_path / "export"
    tasks_export(suite=suite, n_values=[1], context="full", dest=export, upload_format=upload_format_markdown())
    work = tmp_path / "work"
    work.mkdir()
    for copy in ("a", "b"):
        with tarfile.open(export / sample_archive_name(SAMPLE)) as archive:
            archive.extractall(tmp_path / f"unpacked-{copy}", filter="tar")
        (tmp_path / f"unpacked-{copy}" / SAMPLE).rename(work / copy)
    return Sample.objects.get(sample_id=SAMPLE), work


def workspace_diff(work: Path) -> str:
    diff = subprocess.run(["diff", "-ruN", "a/code", "b/code"], cwd=work, capture_output=True, text=True, check=False)
    assert diff.returncode == 1 and "--- a/code/" in diff.stdout, diff.stderr
    return diff.stdout


def bash_call(command: str, thought: str) -> FakeTurn:
    return FakeTurn(thought, [("bash", {"command": command})])


def gold_file_command(sample: Sample, code_dir: Path) -> str:
    """A heredoc writing the masked file back with its gold function body (one masked function at n=1)."""
    (function,) = sample.functions.all()
    gold_source = (Path(sample.paper.code_dir) / function.file).read_text(encoding="utf-8")
    body = function_body_source(gold_source, function.name, line_hint=function.line_hint)
    restored = replace_function_body((code_dir / function.file).read_text(encoding="utf-8"), function.name, body)
    assert HEREDOC_END not in restored
    return f"cat > {shlex.quote(function.file)} <<'{HEREDOC_END}'\n{restored.removesuffix(chr(10))}\n{HEREDOC_END}"


def printed_results(output: str) -> dict:
    """What refsol.sh printed: after each "=== Experiment N ===" line, the last line that is a JSON object."""
    results = {}
    for label, section in re.findall(r"=== (Experiment \d+) ===\n(.*?)(?=^=== |\Z)", output, flags=re.DOTALL | re.MULTILINE):
        results[label] = json.loads([line for line in section.splitlines() if line.startswith("{")][-1])
    return results


def submit_what_ran(request: dict) -> FakeTurn:
    """The model's last turn: submit what the experiments printed, read from the last tool result
    (mini.yaml renders a command's outcome as a JSON object with its output)."""
    output = json.loads(request["messages"][-1]["content"])["output"]
    results = printed_results(output)
    assert results, f"no experiment results in the last command's output: {output!r}"
    return bash_call(f"echo {SUBMIT_MARKER} && echo {shlex.quote(json.dumps(results))}", "Submit the numbers.")


@pytest.mark.slow  # an export, a real agent run of the experiments, a bubblewrap re-execution
def test_mini_swe_agent_solves_an_exported_task_and_its_diff_is_verified(builtin, fake_llm, tmp_path, settings, monkeypatch, client, claims_in_the_test_transaction):
    require_backend("bubblewrap")
    settings.WORKSPACE_ROOT = tmp_path / "workspaces"
    settings.SANDBOX_BACKEND = "bubblewrap"
    sample, work = exported_task(builtin, tmp_path)
    code_dir = work / "b" / CODE_DIR
    commands = [gold_file_command(sample, code_dir), "bash ../refsol.sh"]
    fake_llm.script([
        bash_call(commands[0], "Write the missing function body."),
        bash_call(commands[1], "Run the experiments."),
        submit_what_ran,
    ])

    outcome, trajectory_path = run_mini_swe_agent(
        fake_llm, monkeypatch, tmp_path, cwd=code_dir, task=(work / "b" / "TASK.md").read_text(encoding="utf-8")
    )

    assert outcome["exit_status"] == "Submitted", outcome
    assert fake_llm.remaining == 0 and len(fake_llm.requests) == 3
    assert "NotImplementedError" in fake_llm.requests[0].json["messages"][1]["content"]  # it was handed TASK.md
    saved = json.loads(trajectory_path.read_text())
    assert saved["trajectory_format"] == "mini-swe-agent-1.1" and saved["info"]["mini_version"] == version("mini-swe-agent")
    assert saved["info"]["exit_status"] == "Submitted"
    sent = sent_commands(saved)
    assert sent[:2] == commands and sent[2].startswith(f"echo {SUBMIT_MARKER}")
    answer = json.loads(outcome["submission"])
    assert list(answer) == [f"Experiment {n}" for n in range(1, len(answer) + 1)]

    converted = detect_and_convert(trajectory_path.read_bytes(), trajectory_path.name)
    assert converted.source_format == "mini-swe-agent" and converted.source_version == "mini-swe-agent-1.1"
    assert [step.get("arguments", {}).get("command") for step in converted.steps] == sent

    # Uploaded as it is (the real .traj.json, inline), with the workspace diff: re-executed, verified.
    data = jsonl(record(SAMPLE, 0, final_answer=answer, final_patch=workspace_diff(work), trajectory=saved))
    submission = submission_create(data=data, filename="mini.jsonl", uploader=make_user(), reexecute=True, enqueue=False)
    submission_reexecute_sync(submission=submission)
    submission.refresh_from_db()
    assert submission.status == Submission.Status.VERIFIED
    attempt = Attempt.objects.get(run=submission.run)
    assert attempt.reexecution_passed is True, (attempt.reexecution_error, attempt.reexecution_output)
    assert attempt.passed is True and attempt.mismatch is False
    assert attempt.trajectory_source.source_format == "mini-swe-agent"

    # Its replay shows the agent's steps: the commands it ran, escaped, in order.
    page = client.get(reverse("replay:attempt", args=[attempt.pk])).content.decode()
    assert page.index(html.escape("bash ../refsol.sh")) < page.index(html.escape(f"echo {SUBMIT_MARKER}"))


@pytest.mark.slow
def test_the_converted_steps_of_a_real_trajectory_hold_each_command_once(fake_llm, tmp_path, monkeypatch):
    fake_llm.script([
        bash_call("echo looking && ls", "Look around."),
        bash_call(f"echo {SUBMIT_MARKER} && echo '{{\"Experiment 1\": 1.0}}'", "Submit."),
    ])
    outcome, trajectory_path = run_mini_swe_agent(fake_llm, monkeypatch, tmp_path, cwd=tmp_path, task="Say hello.")
    assert outcome == {"exit_status": "Submitted", "submission": '{"Experiment 1": 1.0}\n'}
    sent = sent_commands(json.loads(trajectory_path.read_text()))
    converted = detect_and_convert(trajectory_path.read_bytes(), trajectory_path.name)
    assert [step.get("arguments", {}).get("command") for step in converted.steps] == sent
    assert [step.get("thought") for step in converted.steps] == ["Look around.", "Submit."]


def run_inspect_agent(fake_llm, monkeypatch, tmp_path: Path, *, task: str) -> Path:
    """Run Inspect AI's basic agent (bash and submit tools, the "local" sandbox) on one sample against
    the fake model, and return its `.eval` log. Chat completions, not the Responses API the OpenAI
    provider prefers, which the fake server does not speak."""
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    monkeypatch.setenv("INSPECT_LOG_DIR", str(tmp_path / "inspect-logs"))
    # Its traces and sample buffers go under the XDG data directory: the test's, not the home's.
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "xdg-data"))
    from inspect_ai import Task
    from inspect_ai import eval as inspect_eval
    from inspect_ai.dataset import Sample as InspectSample
    from inspect_ai.solver import basic_agent
    from inspect_ai.tool import bash

    inspect_task = Task(dataset=[InspectSample(input=task)], solver=basic_agent(tools=[bash(timeout=120)]), sandbox="local")
    # eval() sets the root logger's level and adds its display handler to it for good: put both
    # back, so the tests that run after this one see logging as they would without it.
    root = logging.getLogger()
    root_level, root_handlers = root.level, list(root.handlers)
    try:
        (log,) = inspect_eval(
            inspect_task, model="openai/fake-model", model_base_url=fake_llm.base_url_openai,
            model_args={"responses_api": False}, log_dir=str(tmp_path / "inspect-logs"), display="none", max_retries=0,
        )
    finally:
        root.setLevel(root_level)
        root.handlers[:] = root_handlers
    assert log.status == "success", log.error
    return Path(log.location)


@pytest.mark.slow  # an export, Inspect's start-up, a real run of the experiments
def test_inspect_ai_solves_an_exported_task_and_its_log_converts(builtin, fake_llm, tmp_path, monkeypatch, client):
    """Inspect AI on the same task: its `.eval` log converts to our steps, one per scripted tool call.
    (Re-executing its diff is the mini-swe-agent test's; here the diff only has to be the gold one.)"""
    sample, work = exported_task(builtin, tmp_path)
    code_dir = work / "b" / CODE_DIR
    # Inspect's local sandbox starts each command in a scratch directory of its own.
    commands = [f"cd {shlex.quote(str(code_dir))} && {gold_file_command(sample, code_dir)}", f"bash {shlex.quote(str(work / 'b' / 'refsol.sh'))}"]

    def submit_printed(request: dict) -> FakeTurn:
        results = printed_results(request["messages"][-1]["content"])
        assert results, "no experiment results in the last tool output"
        return FakeTurn("Submit the numbers.", [("submit", {"answer": json.dumps(results)})])

    fake_llm.script([
        FakeTurn("Write the missing function body.", [("bash", {"command": commands[0]})]),
        FakeTurn("Run the experiments.", [("bash", {"command": commands[1]})]),
        submit_printed,
    ])
    log_path = run_inspect_agent(fake_llm, monkeypatch, tmp_path, task=(work / "b" / "TASK.md").read_text(encoding="utf-8"))

    assert fake_llm.remaining == 0 and len(fake_llm.requests) == 3
    assert log_path.suffix == ".eval" and workspace_diff(work).count("\n+") > 1
    converted = detect_and_convert(log_path.read_bytes(), log_path.name)
    assert converted.source_format == "inspect-eval"
    answer = json.dumps(printed_results(fake_llm.requests[-1].json["messages"][-1]["content"]))
    assert [(step.get("tool"), step.get("arguments")) for step in converted.steps] == [
        ("bash", {"command": commands[0]}), ("bash", {"command": commands[1]}), ("submit", {"answer": answer}),
    ]

    # The real .eval log, uploaded in a zip beside its record, imports and replays.
    members = {
        "results.jsonl": jsonl(record(SAMPLE, 0, final_answer=json.loads(answer), final_patch=workspace_diff(work),
                                      trajectory_file="trajectories/inspect.eval")),
        "trajectories/inspect.eval": log_path.read_bytes(),
    }
    submission = submission_create(data=zip_bytes(members), filename="inspect.zip", uploader=make_user())
    attempt = Attempt.objects.get(run=submission.run)
    assert attempt.reported_passed and attempt.trajectory_source.source_format == "inspect-eval"
    page = client.get(reverse("replay:attempt", args=[attempt.pk])).content.decode()
    assert page.index(html.escape(f"bash {shlex.quote(str(work / 'b' / 'refsol.sh'))}")) < page.index("Submit the numbers.")
