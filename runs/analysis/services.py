"""Writes of the failure analysis: an attempt's AttemptAnalysis, AttemptException and StepText rows,
rebuilt from its stored trajectory and re-execution output.

`attempt_analysis_record` is called whenever an attempt's trajectory or re-execution output is
written (runs.evaluation.claims, runs.evaluation.recovery, runs.submissions.services) and by
`manage.py analyse_attempts` (backfill). Those writers use `attempt_analysis_record_quietly`: a
failure of the analysis must never lose the result it derives from, so it is logged and the
command redoes it later.
"""
from __future__ import annotations

import logging
from collections.abc import Iterable

from django.db import connection, transaction

from runs.analysis.gold_text import GoldRedaction, gold_redaction_for
from runs.analysis.public import is_gold_code_agent, public_steps, step_search_text
from runs.analysis.trajectories import MAX_ERROR_LINE_CHARS, exceptions_in, trajectory_facts, trajectory_steps
from runs.limits import trajectory_limits
from runs.models import Attempt, AttemptAnalysis, AttemptException, Paper, StepText
from runs.visibility import gold_access

logger = logging.getLogger(__name__)

# Which rules built a row: raise it when the facts, the exception patterns or the step text
# change, and `manage.py analyse_attempts` redoes the rows built by older rules.
# 2: linear patterns; a gold-bearing agent's facts from what its public replay shows.
# 3: a private suite's gold withheld (runs.analysis.gold_text): quoted gold lines and numbers, gold agents' output.
RULES_VERSION = 3

# Attempts read per query: a stored trajectory may be megabytes.
CHUNK = 20
# Exceptions kept per attempt (a step may print the same traceback in a loop).
MAX_EXCEPTIONS_PER_ATTEMPT = 500


def _clean(text: str, limit: int) -> str:
    # Postgres text cannot hold NUL characters.
    return text.replace("\x00", "")[:limit]


def _chunks(ids: list[int], size: int) -> Iterable[list[int]]:
    for start in range(0, len(ids), size):
        yield ids[start:start + size]


def attempt_analysis_record(attempt_ids: Iterable[int]) -> int:
    """Rebuild the analysis rows of these attempts from what is stored now: replaces each one's
    AttemptAnalysis, AttemptException (its steps' and its re-execution output's) and StepText
    rows, a few attempts per transaction (their rows locked meanwhile, so two writers of the same
    attempt take turns). An attempt without a trajectory keeps an analysis row with 0 steps and
    no step texts. On Postgres each StepText's `document` is its to_tsvector('simple', text).
    Returns how many attempts were analysed (ids that no longer exist are skipped)."""
    ids = sorted({int(pk) for pk in attempt_ids})
    done = 0
    for chunk in _chunks(ids, CHUNK):
        done += _record_chunk(chunk)
    return done


def attempt_analysis_record_quietly(attempt_ids: Iterable[int]) -> bool:
    """`attempt_analysis_record`, for the paths that write results: a failure is logged, never
    raised (the result is stored; `manage.py analyse_attempts` redoes the analysis). Returns
    whether it succeeded."""
    ids = list(attempt_ids)
    try:
        attempt_analysis_record(ids)
    except Exception:  # noqa: BLE001 - the result it derives from must never be lost to it
        logger.exception("the failure analysis of attempts %s could not be recorded; manage.py analyse_attempts redoes it",
                         ids[:20])
        return False
    return True


def _record_chunk(ids: list[int]) -> int:
    max_steps = trajectory_limits().steps
    with transaction.atomic():
        rows = list(
            Attempt.objects.select_for_update(of=("self",))
            .filter(pk__in=ids)
            .order_by("pk")
            .values_list("pk", "trajectory", "reexecution_output", "run__agent", "sample__paper_id")
        )
        found = [pk for pk, *_ in rows]
        papers = Paper.objects.select_related("suite").in_bulk({paper_id for *_, paper_id in rows})
        analyses, exceptions, texts = [], [], []
        for pk, trajectory, reexecution_output, agent, paper_id in rows:
            analysis, attempt_exceptions, step_texts = _attempt_rows(pk, trajectory, reexecution_output, agent, max_steps,
                                                                     papers[paper_id])
            analyses.append(analysis)
            exceptions.extend(attempt_exceptions)
            texts.extend(step_texts)
        AttemptException.objects.filter(attempt_id__in=found).delete()
        StepText.objects.filter(attempt_id__in=found).delete()
        AttemptAnalysis.objects.filter(attempt_id__in=found).delete()
        AttemptAnalysis.objects.bulk_create(analyses, batch_size=500)
        AttemptException.objects.bulk_create(exceptions, batch_size=500)
        StepText.objects.bulk_create(texts, batch_size=200)
        if texts and connection.vendor == "postgresql":
            with connection.cursor() as cursor:
                cursor.execute(
                    f"UPDATE {connection.ops.quote_name(StepText._meta.db_table)} "
                    "SET document = to_tsvector('simple', text) WHERE attempt_id = ANY(%s)",
                    [found],
                )
    return len(found)


def _attempt_rows(pk: int, trajectory, reexecution_output, agent: str, max_steps: int, paper: Paper):
    header = trajectory.get("header") if isinstance(trajectory, dict) else None
    gold = is_gold_code_agent(agent, header.get("agent") if isinstance(header, dict) else None)
    # Everything here is shown to anyone: derived from what the anonymous replay shows.
    anonymous = gold_access(user=None, suite=paper.suite)
    redaction: GoldRedaction = gold_redaction_for(access=anonymous, paper=paper)
    hide_output = gold and not anonymous.numbers
    steps = trajectory_steps(trajectory)
    shown = {"gold_code_agent": gold, "hide_gold_output": hide_output, "redaction": redaction}
    facts = trajectory_facts({"steps": public_steps(steps[:max_steps], **shown)}, max_steps=max_steps)
    facts.steps = len(steps)
    analysis = AttemptAnalysis(
        attempt_id=pk,
        rules_version=RULES_VERSION,
        steps=facts.steps,
        experiment_runs=facts.experiment_runs,
        first_run_step=facts.first_run_step,
        first_run_crashed=facts.first_run_crashed,
        working_run_step=facts.working_run_step,
        seconds_to_working=facts.seconds_to_working,
        cost_to_working=facts.cost_to_working,
        first_error_step=facts.first_error_step,
        first_error_line=_clean(facts.first_error_line, MAX_ERROR_LINE_CHARS),
    )
    found = [(item.step, item.exception) for item in facts.exceptions]
    if not hide_output:
        found += [(None, exception) for exception in exceptions_in(redaction.text(reexecution_output or ""))]
    exceptions = [
        AttemptException(
            attempt_id=pk, step=step, exception_type=_clean(exception.type, 200),
            pattern=_clean(exception.pattern, 300), message=_clean(exception.message, 500),
        )
        for step, exception in found[:MAX_EXCEPTIONS_PER_ATTEMPT]
    ]
    texts = []
    for number, step in enumerate(steps[:max_steps], start=1):
        text = step_search_text(step, **shown)
        if text:
            texts.append(StepText(attempt_id=pk, step=number, text=text))
    return analysis, exceptions, texts


def attempts_to_analyse(*, redo_all: bool = False):
    """The ids of the attempts whose analysis is missing or was built by older rules (every
    attempt with `redo_all`), in id order, as a lazy queryset."""
    attempts = Attempt.objects.order_by("pk")
    if not redo_all:
        attempts = attempts.exclude(analysis__rules_version__gte=RULES_VERSION)
    return attempts.values_list("pk", flat=True)
