"""Which function broke it: each masked function of a failed attempt at n >= 2 judged alone.

When an attempt at n >= 2 is re-executed and fails (a run's attempt, or a submitted one once the
harness re-ran it), every masked function f gets a *transplant*: the sample's experiments re-run,
in a fresh workspace and sandbox like any re-execution, with the agent's implementation of f and
the gold bodies of the other masked functions ("f alone"). The agent's code is taken by the same
scope rule as the re-execution's (runs.evaluation.verdicts.scoped_final_code: the masked bodies and
their new helpers and imports); then the other masked bodies are put back from the paper's gold
code, on the worker, in a workspace deleted afterwards.

The verdict of f (`judge`):

- *right*: its transplant passes;
- *wrong*: its transplant prints numbers outside tolerance, crashes with f (or a helper the
  agent added) on the stack, or ends without a traceback and without a result (f called
  `os._exit`, `sys.exit`, or made the gold code give up): with every other function gold (code that
  exits 0 with its result on its own), f's own code made the difference;
- *not decidable*: its transplant crashes outside f's code, or times out, so the run cannot say
  whether f is to blame; or the agent's code cannot be transplanted at all. The reason is recorded.

The agent's code runs next to gold bodies in a transplant, so it can read them: nothing it prints
is kept. A transplant stores only its score reduced to numbers (`numbers_only`: the printed text of
a value that is not a number is dropped), shown to staff alone (runs.replay.functions), and a
reason in the harness's own words (experiment labels, builtin exception types, names of functions
the gold code defines, fixed phrases), never the experiments' output, an exit status or any other
text or number the agent's code chose. What reaches anyone else is the verdict: one of three values
per transplant (docs/security.md, "Transplants leak one verdict each").

Once every transplant of an attempt is settled, the attempt's `function_diagnosis` says whether
it is an *interaction failure* (every function right alone, wrong together), one function wrong,
several, or not decided.

Transplants are jobs of their own kind (`TransplantKind`, `TRANSPLANT`, rows of `Transplant`),
claimed, fenced, retried and healed like attempts (runs.evaluation.claims,
runs.evaluation.recovery), on settings.TRANSPLANT_QUEUE, which every evaluation worker takes last.
A run (or upload) made with `transplants=False` gets none. Their time is recorded on each
transplant, apart from the attempt's. Nothing of a gold body is stored (see above).
"""
from __future__ import annotations

import builtins
import json
import logging
import re
import time
from pathlib import Path
from types import MappingProxyType
from typing import Any

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from runs.agents import gold_bodies_for
from runs.analysis.outcomes import patch_refused_as_too_large
from runs.benchmark.locating import MaskingError, list_functions
from runs.benchmark.masking import replace_function_body
from runs.benchmark.text import storable_text
from runs.benchmark.workspace import CODE_DIR, experiment_label
from runs.evaluation.claims import ClaimOutcome, Heartbeat, execute
from runs.evaluation.harness import attempt_sandbox_backend
from runs.evaluation.kinds import IN_PROCESS, JOB_TIMEOUT_MARGIN_SECONDS, StatusKind, register
from runs.evaluation.queue import cancel_jobs, enqueue, kind_queue
from runs.evaluation.verdicts import Reexecution, reexecute
from runs.evaluation.workdirs import attempt_reexecution_dir, attempt_sandbox_name, remove_tree
from runs.models import Attempt, Transplant
from runs.signals import results_changed_send
from runs.suites.selectors import sample_task
from sandbox import fs

logger = logging.getLogger(__name__)

SETTLED = (Transplant.Status.DONE, Transplant.Status.GIVEN_UP)


# The harness's own opening words of an infrastructure failure ("worker died", "re-execution sandbox
# failed"): what a given-up transplant's reason keeps of it.
_FAILURE_KIND = re.compile(r"[A-Za-z][A-Za-z -]{0,60}(?=:)")


class TransplantKind(StatusKind):
    """Running one transplant (`transplant_execute`): rows of Transplant, on settings.TRANSPLANT_QUEUE.
    Given up, a transplant is settled as not decidable, saying only the harness's own opening words
    of the failure."""

    name = "transplant"
    job_function = "runs.evaluation.jobs.transplant_execute_job"
    job_prefix = "transplant"
    sandbox_prefix = "transplant-"
    model = Transplant
    select_related = ("attempt__run", "attempt__sample__paper", "function")
    history_fields = MappingProxyType({"kind": "transplant"})
    run_field = "attempt__run"
    sample_field = "attempt__sample"
    queued_status = Transplant.Status.QUEUED
    running_status = Transplant.Status.RUNNING

    def released_fields(self, row: Transplant | None, reason: str, retrying: bool) -> dict[str, Any]:
        if retrying:
            return {"status": Transplant.Status.QUEUED}
        # The rest of the failure may name what the agent's code left in the workspace (paths, errors):
        # kept in infra_history, for staff.
        opening = _FAILURE_KIND.match(reason or "")
        return {
            "status": Transplant.Status.GIVEN_UP,
            "verdict": Transplant.Verdict.NOT_DECIDABLE,
            "reason": "the transplant could not run (infrastructure failure)" + (f": {opening[0]}" if opening else ""),
            "finished_at": timezone.now(),
        }

    def settle(self, row: Transplant) -> None:
        diagnosis_refresh(attempt_id=row.attempt_id)

    def job_timeout(self, row: Transplant) -> int:
        # Every experiment's timeout is far below this; it only bounds a stuck work horse.
        return JOB_TIMEOUT_MARGIN_SECONDS

    def queue_name(self) -> str:
        return settings.TRANSPLANT_QUEUE


TRANSPLANT = register(TransplantKind())


# --- planning -------------------------------------------------------------------------------------


def transplants_plan(*, attempt_id: int, enqueue_jobs: bool = True) -> list[Transplant]:
    """Queue one transplant per masked function of the attempt if it is at n >= 2, done, re-executed
    and failed, and its run wants transplants; transplants of an earlier verdict (a submission
    re-executed again) are replaced. `enqueue_jobs=False` leaves them queued without jobs, for an
    in-process caller to execute (run_execute_sync). Returns those queued (none otherwise)."""
    with transaction.atomic():
        attempt = Attempt.objects.select_for_update(of=("self",)).select_related("run", "sample").get(pk=attempt_id)
        if attempt.function_diagnosis:  # set whenever transplants were planned: those of an earlier verdict go
            attempt.transplants.all().delete()
        wanted = (
            attempt.run.transplants
            and attempt.status == Attempt.DONE
            and attempt.reexecution_passed is False
            and attempt.sample.n >= 2
            # Nothing of a patch over the limits ran (its stored copy is cut): nothing to judge it by.
            and not patch_refused_as_too_large(attempt.reexecution_score)
        )
        diagnosis = Attempt.PENDING if wanted else ""
        if attempt.function_diagnosis != diagnosis:
            Attempt.objects.filter(pk=attempt.pk).update(function_diagnosis=diagnosis)
        if not wanted:
            return []
        transplants = Transplant.objects.bulk_create(
            Transplant(attempt=attempt, function=function) for function in attempt.sample.functions.order_by("func_id")
        )
        if enqueue_jobs:
            enqueue(TRANSPLANT, attempts=transplants)
    return transplants


def transplants_plan_on_reexecution(sender, *, attempt_id: int, enqueue: bool = True, **kwargs) -> None:
    """The receiver of runs.signals.attempt_reexecuted (connected by runs.apps.RunsConfig.ready):
    plans the transplants of the attempt just re-executed, with their jobs unless the work is done
    in-process."""
    transplants_plan(attempt_id=attempt_id, enqueue_jobs=enqueue)


def transplants_cancel(*, run_id: int) -> int:
    """A cancelled run's queued transplants are not judged: settled as not decidable (saying why),
    their jobs taken off the queue, their attempts' diagnoses written. Running ones finish. Returns
    how many were cancelled."""
    queued = list(Transplant.objects.filter(attempt__run_id=run_id, status=Transplant.Status.QUEUED).values_list("pk", "tries", "attempt_id"))
    cancelled = Transplant.objects.filter(pk__in=[pk for pk, _, _ in queued], status=Transplant.Status.QUEUED).update(
        status=Transplant.Status.GIVEN_UP, verdict=Transplant.Verdict.NOT_DECIDABLE, reason="not judged: the run was cancelled",
        finished_at=timezone.now(),
    )
    job_ids = [TRANSPLANT.job_id(pk, tries) for pk, tries, _ in queued]
    transaction.on_commit(lambda: cancel_jobs(job_ids, queue=kind_queue(TRANSPLANT)))
    for attempt_id in sorted({attempt_id for _, _, attempt_id in queued}):
        diagnosis_refresh(attempt_id=attempt_id)
    return cancelled


# --- executing one -------------------------------------------------------------------------------


def transplant_execute(*, transplant_id: int, job_id: str = "", requeue: bool = True) -> ClaimOutcome:
    """Run one queued transplant and record its verdict (runs.evaluation.claims.execute: claimed,
    fenced, retried on infrastructure failures). Returns DONE, REQUEUED, ERROR, LOST or SKIPPED."""
    return execute(TRANSPLANT, _verdict_fields, attempt_id=transplant_id, job_id=job_id, requeue=requeue, cleanup=_cleanup)


def transplants_execute_sync(*, attempt_id: int) -> None:
    """Execute the attempt's queued transplants one after another in this process (the in-process
    runs and re-executions plan them without jobs); infrastructure failures are retried in place,
    bounded by the retries."""
    while transplant := Transplant.objects.filter(attempt_id=attempt_id, status=Transplant.Status.QUEUED).order_by("pk").first():
        transplant_execute(transplant_id=transplant.pk, job_id=IN_PROCESS, requeue=False)


def _workspace(transplant: Transplant) -> Path:
    return attempt_reexecution_dir(transplant.pk, transplant.tries, prefix=TRANSPLANT.sandbox_prefix)


def _verdict_fields(transplant: Transplant, heartbeat: Heartbeat) -> dict:
    attempt = transplant.attempt
    run = attempt.run
    started = time.monotonic()
    task = sample_task(sample=attempt.sample, context=run.context)
    kept = transplant.function
    result = reexecute(
        sample=attempt.sample,
        patch=attempt.final_patch,
        context=run.context,
        backend=attempt_sandbox_backend(run),
        dest=_workspace(transplant),
        name=attempt_sandbox_name(transplant.pk, transplant.tries, prefix=TRANSPLANT.sandbox_prefix),
        task=task,
        adjust=lambda workspace: gold_restored_except(
            workspace, code_dir=Path(attempt.sample.paper.code_dir), kept=kept, functions=task.spec.masked
        ),
        # The held-out check too: else a body that prints the public numbers would be judged right
        # alone. Not the gold-literal check, which reads every function of the file, not this one.
        literals=False,
    )
    heartbeat.check()
    verdict, reason = judge(result, function_file=kept.file, function_name=kept.name, code_dir=Path(attempt.sample.paper.code_dir))
    return {
        "status": Transplant.Status.DONE,
        "verdict": verdict,
        "reason": storable_text(reason)[:8000],
        "score": numbers_only(result.score),
        "experiment_seconds": result.experiment_seconds,
        "sandbox_seconds": time.monotonic() - started,
        "finished_at": timezone.now(),
    }


def _cleanup(transplant: Transplant) -> None:
    remove_tree(_workspace(transplant))


def gold_restored_except(workspace: Path, *, code_dir: Path, kept, functions) -> None:
    """Put the gold body back into every masked function of `workspace` but `kept`, on the code the
    agent's final patch left (scoped); `functions` are the sample's (Function rows or the workspace
    spec's MaskedFunctionSpecs, for their gold line hints). Raises ValueError when a body cannot be put back, or `kept` is not one of them (all
    gold would then pass for the agent's)."""
    task = json.loads((workspace / "task.json").read_text(encoding="utf-8"))
    key = (f"{CODE_DIR}/{kept.file}", kept.name)
    others = [f for f in task["missing_functions"] if (f["file"], f["name"]) != key]
    if len(others) != len(task["missing_functions"]) - 1:
        raise ValueError(f"{kept.file}:{kept.name} is not one of the workspace's masked functions")
    hints = {(f"{CODE_DIR}/{function.file}", function.name): function.line_hint for function in functions}
    try:
        bodies = gold_bodies_for(code_dir=code_dir, missing_functions=others, line_hints=hints)
        for function in others:
            data, _ = fs.read_bytes(workspace, function["file"], limit=64 * 2**20)
            source = data.decode("utf-8", "surrogateescape")
            restored = replace_function_body(source, function["name"], bodies[(function["file"], function["name"])],
                                             line_hint=function.get("line"))
            fs.write_bytes(workspace, function["file"], restored.encode("utf-8", "surrogateescape"))
    except (MaskingError, OSError, SyntaxError) as error:
        raise ValueError(f"the gold bodies of the other masked functions could not be put back: {error}") from None


# A traceback frame: File "/work/code/calibration/temperature.py", line 12, in fit
_FRAME = re.compile(r'^\s*File "(?P<path>[^"]+)", line \d+, in (?P<name>[\w<>]+)\s*$', re.MULTILINE)
# The line a traceback ends with: "ZeroDivisionError: float division by zero"
_EXCEPTION = re.compile(r"^(?P<type>[A-Za-z_][\w.]*)(?::|$)", re.MULTILINE)


# Why the agent's code could not be transplanted, by the harness's error's opening words; the rest
# of the error may quote the agent's patch.
_REFUSALS = (
    ("the final patch", "its final patch is refused or does not apply"),
    ("the gold bodies", "the gold bodies of the other masked functions could not be put back"),
)
# An experiment that ended without a result and without a traceback (no frame at all in its output).
_NO_TRACEBACK = "ended without a result and without a traceback"


def judge(result: Reexecution, *, function_file: str, function_name: str, code_dir: Path) -> tuple[str, str]:
    """The verdict of one function from its transplant's run, and the reason (module docstring).
    The output is the agent's code's to write (a fake traceback, say), and so is its exit status:
    only names the harness knows and its own phrases reach the reason."""
    if not result.applied:
        cause = next((words for opening, words in _REFUSALS if (result.error or "").startswith(opening)),
                     "the code could not be prepared")
        return Transplant.Verdict.NOT_DECIDABLE, f"the agent's code could not be transplanted: {cause}"
    if result.passed:
        return Transplant.Verdict.RIGHT, "passes with the gold bodies of the other masked functions"
    if result.held_out_passed is False:  # the experiments passed, so the variants ran
        return Transplant.Verdict.WRONG, "passes the experiments but not their held-out check, with the gold bodies of the other masked functions"
    failed = {item["experiment_id"] for item in (result.score or {}).get("experiments", []) if not item.get("passed")}
    own_name = function_name.rsplit(".", 1)[-1]
    gold_names = _gold_function_names(code_dir / function_file)
    wrong, undecided = [], []
    for number, outcome in enumerate(result.outcomes, start=1):
        label = experiment_label(number)
        if label not in failed:
            continue
        if outcome.error is None:
            wrong.append(f"{label}: numbers outside tolerance")
        elif outcome.timed_out:
            undecided.append(f"{label}: {outcome.error}")  # "timed out after N s": the experiment's own timeout
        else:
            frames = list(_FRAME.finditer(outcome.output))
            if not frames:
                # os._exit, sys.exit or a signal: the gold code alone exits 0 with its result, so with
                # every other function gold this function's code ended it (or made the gold code give up).
                wrong.append(f"{label}: {_NO_TRACEBACK} with {function_name} transplanted")
                continue
            # Its own code: the function itself, or one its file does not define in gold (a helper it added).
            own = any(
                frame["path"].endswith(f"/{CODE_DIR}/{function_file}")
                and (frame["name"] == own_name or (gold_names is not None and frame["name"] not in gold_names | {"<module>"}))
                for frame in frames
            )
            exception = _exception_type(outcome.output, after=frames[-1].end()) or "an exception"
            if own:
                wrong.append(f"{label}: {exception} with {function_name} on the stack")
            else:
                last = frames[-1]["name"]
                where = f" in {last}" if gold_names is not None and last in gold_names else ""
                undecided.append(f"{label}: {exception}{where}, outside {function_name}")
    if wrong:
        return Transplant.Verdict.WRONG, "; ".join(wrong + undecided)
    if undecided:
        return Transplant.Verdict.NOT_DECIDABLE, "; ".join(undecided)
    return Transplant.Verdict.WRONG, "the experiments' numbers are outside tolerance"


def _gold_function_names(path: Path) -> set[str] | None:
    """The (unqualified) names of the functions a gold file defines; None when it cannot be read."""
    try:
        return {qualified.rsplit(".", 1)[-1] for qualified, _ in list_functions(path.read_text(encoding="utf-8"))}
    except (OSError, SyntaxError, ValueError):
        return None


def _exception_type(output: str, *, after: int) -> str:
    """The builtin exception a traceback ends with ("" for any other: its name is the code's to choose,
    and the message may quote data)."""
    match = _EXCEPTION.search(output, after)
    name = match["type"] if match else ""
    return name if isinstance(getattr(builtins, name, None), type) and issubclass(getattr(builtins, name), BaseException) else ""


def numbers_only(score: dict | None) -> dict | None:
    """A transplant's score as stored: per experiment its verdict and, per number, the gold value,
    the value printed (a number or nothing), the error and the verdict; the printed text of a value
    that is not a number, and any message, are left out."""
    if score is None:
        return None
    number_fields = ("key", "gold", "predicted", "relative_error", "passed", "rtol", "atol")
    return {
        "passed": score.get("passed"),
        "experiments": [
            {
                "experiment_id": item.get("experiment_id"),
                "exp_id": item.get("exp_id"),
                "passed": item.get("passed"),
                "numbers": [{name: number[name] for name in number_fields if name in number} for number in item.get("numbers", [])],
            }
            for item in score.get("experiments", [])
        ],
    }


# --- the attempt's diagnosis ------------------------------------------------------------------------


def diagnosis_of(verdicts: list[str]) -> str:
    """An attempt's function_diagnosis from its transplants' verdicts."""
    wrong = verdicts.count(Transplant.Verdict.WRONG)
    if wrong >= 2:
        return Attempt.SEVERAL_WRONG
    if verdicts and all(verdict == Transplant.Verdict.RIGHT for verdict in verdicts):
        return Attempt.INTERACTION
    if wrong == 1 and verdicts.count(Transplant.Verdict.RIGHT) == len(verdicts) - 1:
        return Attempt.ONE_WRONG
    return Attempt.NOT_DECIDED


def diagnosis_refresh(*, attempt_id: int) -> str | None:
    """Once every transplant of the attempt is settled, write its function_diagnosis and announce
    the change (the leaderboard's shares and function difficulty read it). Returns it, or None
    while some are unsettled."""
    with transaction.atomic():
        attempt = Attempt.objects.select_for_update(of=("self",)).filter(pk=attempt_id).only("pk", "run_id").first()
        if attempt is None:
            return None
        rows = list(attempt.transplants.values_list("status", "verdict"))
        if not rows or any(status not in SETTLED for status, _ in rows):
            return None
        diagnosis = diagnosis_of([verdict for _, verdict in rows])
        Attempt.objects.filter(pk=attempt_id).update(function_diagnosis=diagnosis)
        results_changed_send(run_ids=[attempt.run_id])
    return diagnosis
