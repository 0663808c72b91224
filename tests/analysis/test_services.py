"""Recording the failure analysis of stored attempts (runs.analysis.services), its backfill command,
what the search may see of gold code, and links to a step."""
import io

import pytest
from django.contrib.auth import get_user_model
from django.contrib.postgres.search import SearchQuery
from django.core.management import call_command
from django.db import connection

from runs.analysis.links import step_url_maker
from runs.analysis.services import RULES_VERSION, attempt_analysis_record
from runs.evaluation.services import run_create
from runs.models import Attempt, AttemptAnalysis, AttemptException, Run, StepText, Suite
from tests.analysis.test_trajectories import TRACEBACK, python, step, trajectory

GOLD_BODY = "return sum(v * w for v, w in zip(values, weights)) / sum(weights)  # gold-secret-body"
REEXECUTION_OUTPUT = (
    "=== Experiment 1 (exit 1, 0.05 s, exited with status 1) ===\n"
    'Traceback (most recent call last):\n  File "/work/code/stats.py", line 9, in weighted_mean\n'
    "    raise NotImplementedError\nNotImplementedError\n"
)


def writes_and_reads_gold():
    return trajectory(
        step("write_file", {"path": "code/stats.py", "content": GOLD_BODY}, "wrote code/stats.py",
             thought="Restore the gold body", files_changed=[{"path": "code/stats.py", "change": "modified", "diff": GOLD_BODY}]),
        step("inspect_file_lines", {"path": "code/stats.py"}, f"1: {GOLD_BODY}"),
        python("import run", TRACEBACK, exit_code=1),
        step("command_line", {"command": "python3 run.py mean"}, 'computing mean\n{"mean": 2.0}\n[exit code 0; 0.1 s; cwd code]',
             exit_code=0),
    )


@pytest.fixture
def attempts(tiny_suite):
    run = run_create(suite=tiny_suite, agent="noop", n_values=[1], enqueue=False)
    return list(run.attempts.order_by("pk"))


def store(attempt, document, **fields):
    Attempt.objects.filter(pk=attempt.pk).update(trajectory=document, **fields)


@pytest.mark.django_db
def test_an_attempt_gets_its_facts_exceptions_and_step_texts(attempts):
    attempt = attempts[0]
    store(attempt, writes_and_reads_gold(), reexecution_output=REEXECUTION_OUTPUT)

    assert attempt_analysis_record([attempt.pk]) == 1

    analysis = AttemptAnalysis.objects.get(attempt=attempt)
    assert (analysis.rules_version, analysis.steps, analysis.experiment_runs) == (RULES_VERSION, 4, 2)
    assert (analysis.first_run_step, analysis.first_run_crashed, analysis.working_run_step) == (3, True, 4)
    assert (analysis.first_error_step, analysis.first_error_line) == (3, "ValueError: expected 3 values, got 4")
    exceptions = list(AttemptException.objects.filter(attempt=attempt).order_by("step").values_list("step", "exception_type", "pattern"))
    assert sorted(exceptions, key=str) == sorted([(3, "ValueError", "expected <n> values, got <n>"), (None, "NotImplementedError", "")], key=str)
    assert list(StepText.objects.filter(attempt=attempt).order_by("step").values_list("step", flat=True)) == [1, 2, 3, 4]
    # A non-gold agent's code is public: its search text holds it.
    assert GOLD_BODY in StepText.objects.get(attempt=attempt, step=1).text


@pytest.mark.django_db
def test_recording_again_replaces_the_rows_and_no_trajectory_leaves_an_empty_analysis(attempts):
    attempt = attempts[0]
    store(attempt, writes_and_reads_gold(), reexecution_output=REEXECUTION_OUTPUT)
    attempt_analysis_record([attempt.pk])
    attempt_analysis_record([attempt.pk])
    assert (StepText.objects.filter(attempt=attempt).count(), AttemptException.objects.filter(attempt=attempt).count()) == (4, 2)

    store(attempt, None, reexecution_output="")
    attempt_analysis_record([attempt.pk, 987654])  # an id that does not exist is skipped
    analysis = AttemptAnalysis.objects.get(attempt=attempt)
    assert (analysis.steps, analysis.experiment_runs, analysis.first_run_crashed) == (0, 0, None)
    assert not StepText.objects.filter(attempt=attempt).exists()
    assert not AttemptException.objects.filter(attempt=attempt).exists()


@pytest.mark.django_db
@pytest.mark.parametrize("gold_by", ["run", "header"])
def test_the_search_text_of_a_gold_agent_leaves_its_gold_code_out(attempts, gold_by):
    attempt = attempts[0]
    document = writes_and_reads_gold()
    if gold_by == "run":
        Run.objects.filter(pk=attempt.run_id).update(agent="gold")
    else:
        document["header"]["agent"] = "mutant"  # an upload that says it is a gold-bearing baseline
    store(attempt, document)

    # A suite whose gold numbers are public: a private suite's gold baseline shows none of its output (runs.analysis.public).
    Suite.objects.filter(pk=attempt.run.suite_id).update(gold_public=True)
    attempt_analysis_record([attempt.pk])

    texts = dict(StepText.objects.filter(attempt=attempt).values_list("step", "text"))
    everything = "\n".join(texts.values())
    assert "gold-secret-body" not in everything
    assert "Restore the gold body" not in everything  # a writing step's thought is left out too
    assert "code/stats.py" in texts[1] and "(hidden)" in texts[1]  # the path stays, as the replay shows it
    assert "ValueError: expected 3 values" in texts[3]  # what is not code stays searchable


@pytest.mark.django_db
def test_on_postgres_the_documents_are_filled_and_a_phrase_finds_its_step(attempts):
    if connection.vendor != "postgresql":
        pytest.skip("full-text documents are Postgres only")
    first, second = attempts[0], attempts[1]
    store(first, writes_and_reads_gold())
    store(second, trajectory(step("list_files", {"path": "."}, "values out of range")))
    attempt_analysis_record([first.pk, second.pk])

    assert not StepText.objects.filter(attempt__in=[first, second], document__isnull=True).exists()
    phrase = SearchQuery("expected 3 values", config="simple", search_type="phrase")
    assert list(StepText.objects.filter(document=phrase).values_list("attempt_id", "step")) == [(first.pk, 3)]
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT attempt_id FROM runs_steptext WHERE document @@ plainto_tsquery('simple', %s)", ["range"]
        )
        assert [row[0] for row in cursor.fetchall()] == [second.pk]


@pytest.mark.django_db
def test_the_command_backfills_missing_and_old_analyses(attempts):
    for attempt in attempts:
        store(attempt, writes_and_reads_gold())
    attempt_analysis_record([attempts[0].pk])
    AttemptAnalysis.objects.filter(attempt=attempts[0]).update(rules_version=RULES_VERSION - 1)
    attempt_analysis_record([attempts[1].pk])

    out = io.StringIO()
    call_command("analyse_attempts", stdout=out)
    assert "2 attempts to analyse" in out.getvalue()  # the third (none) and the first (older rules)
    assert set(AttemptAnalysis.objects.values_list("attempt_id", "rules_version")) == {(a.pk, RULES_VERSION) for a in attempts}

    out = io.StringIO()
    call_command("analyse_attempts", stdout=out)
    assert "0 attempts to analyse" in out.getvalue()
    call_command("analyse_attempts", "--all", stdout=out)
    assert "done: 3 attempts analysed" in out.getvalue()


@pytest.mark.django_db
def test_an_upload_is_analysed_when_it_is_stored(builtin, tmp_path):
    from runs.submissions.services import submission_create
    from tests.submissions.helpers import SAMPLE, jsonl, record
    from tests.submissions.helpers import trajectory as upload_trajectory

    uploaded = upload_trajectory(SAMPLE)
    uploaded["steps"].append({**uploaded["steps"][0], "tool": "bash", "arguments": {"command": "python run.py"},
                              "observation": TRACEBACK, "exit_code": 1})
    user = get_user_model().objects.create_user("uploader", password="x")
    submission = submission_create(data=jsonl(record(SAMPLE, 0, trajectory=uploaded)), filename="r.jsonl", uploader=user)

    attempt = submission.run.attempts.get()
    assert attempt.outcome == Attempt.NO_ANSWER
    analysis = AttemptAnalysis.objects.get(attempt=attempt)
    assert (analysis.steps, analysis.first_run_step, analysis.first_run_crashed) == (2, 2, True)
    assert AttemptException.objects.get(attempt=attempt).exception_type == "ValueError"


@pytest.mark.django_db
def test_step_links_point_at_the_replay_page_holding_the_step(settings):
    settings.REPLAY_STEPS_PER_PAGE = 20
    url = step_url_maker()
    assert url(7, None) == "/attempts/7/"
    assert url(7, 1) == "/attempts/7/?page=1#step-1"
    assert url(7, 20) == "/attempts/7/?page=1#step-20"
    assert url(7, 21) == "/attempts/7/?page=2#step-21"
