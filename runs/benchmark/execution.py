"""Running a workspace's experiments in a sandbox and reading the numbers they print.

The harness runs the commands itself (make_gold, the suite validator, re-execution of an agent's
final code), so what it scores is what the code produces, not what anyone reports.
"""
import json
from dataclasses import dataclass

from runs.benchmark.workspace import CODE_DIR, ExperimentSpec
from sandbox import Sandbox
from sandbox.fs import FileKind


@dataclass(frozen=True)
class ExperimentOutcome:
    exp_id: int
    result: dict | None
    error: str | None
    output: str
    exit_code: int
    timed_out: bool
    duration: float


def printed_result(output: str) -> dict | None:
    """The experiment's answer: the last line of its output that is a JSON object."""
    for line in reversed(output.splitlines()):
        line = line.strip()
        if line.startswith("{") and line.endswith("}"):
            try:
                value = json.loads(line)
            except (ValueError, RecursionError):  # the code under test prints what it likes
                continue
            if isinstance(value, dict):
                return value
    return None


def run_experiment(sandbox: Sandbox, experiment: ExperimentSpec) -> ExperimentOutcome:
    """Run one experiment's command from the workspace's code directory and parse what it printed.

    The code under test runs with write access to the workspace: an earlier experiment may have
    removed or replaced code/ itself. That is the code's result, not a broken sandbox."""
    if sandbox.path_kind(CODE_DIR) != FileKind.DIR:
        return ExperimentOutcome(
            exp_id=experiment.exp_id, result=None, output="", exit_code=1, timed_out=False, duration=0.0,
            error=f"{CODE_DIR}/ is no longer a directory (an earlier experiment's code removed or replaced it)",
        )
    executed = sandbox.execute(experiment.command, timeout=experiment.timeout_seconds, cwd=CODE_DIR)
    result = printed_result(executed.output) if executed.exit_code == 0 and not executed.timed_out else None
    if executed.timed_out:
        error = f"timed out after {experiment.timeout_seconds} s"
    elif executed.exit_code != 0:
        error = f"exited with status {executed.exit_code}"
    elif result is None:
        error = "printed no JSON object"
    else:
        error = None
    return ExperimentOutcome(
        exp_id=experiment.exp_id,
        result=result,
        error=error,
        output=executed.output,
        exit_code=executed.exit_code,
        timed_out=executed.timed_out,
        duration=executed.duration,
    )
