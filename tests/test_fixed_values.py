"""The fixed sets of values (TextChoices on the models, StrEnum elsewhere): their members are the
strings that are stored, exported and shown, the models' choices agree with their migrations, and
a set that several layers name is one set."""
import ast
import json

import pytest
from django.apps import apps
from django.db.migrations.autodetector import MigrationAutodetector
from django.db.migrations.loader import MigrationLoader
from django.db.migrations.state import ProjectState

from runs.agents.base import ExitStatus
from runs.benchmark.patches import ChangeKind
from runs.benchmark.source_lines import SourceLines
from runs.benchmark.workspace import CONTEXT_CONDITIONS, Context
from runs.evaluation.claims import ClaimOutcome
from runs.models import Attempt, Run, Transplant
from runs.submissions.schema import SubmissionHeader
from sandbox import BACKEND_NAMES, BACKENDS, Backend, canonical_backend


def test_the_models_need_no_migration():
    """Choices given as TextChoices keep the values and labels the migrations recorded."""
    loader = MigrationLoader(None, ignore_no_migrations=True)
    changes = MigrationAutodetector(loader.project_state(), ProjectState.from_apps(apps)).changes(graph=loader.graph)
    assert not changes, f"the models differ from their migrations: {changes}"


def test_members_are_the_strings_that_are_stored_and_shown():
    assert Attempt.DONE is Attempt.Status.DONE
    assert [str(Attempt.Status.DONE), f"{ExitStatus.TIME_LIMIT}", format(ClaimOutcome.LOST, "")] == ["done", "time_limit", "lost"]
    assert json.dumps({Attempt.Outcome.PASSED: [Transplant.Verdict.RIGHT, ExitStatus.SUBMITTED]}) == '{"passed": ["right", "submitted"]}'
    # A plain string from the database or a form finds its member.
    assert "done" in Attempt.Status and {Attempt.Status.ERROR: 1}.get("error") == 1


def test_the_context_conditions_are_one_set_in_every_layer():
    assert CONTEXT_CONDITIONS == tuple(Context) == ("none", "full", "oracle")
    assert Run.Context.values == list(Context)
    assert SubmissionHeader.model_json_schema()["properties"]["context"]["enum"] == list(Context)


def test_every_spelling_of_a_backend_names_a_backend():
    assert set(BACKEND_NAMES.values()) == set(BACKENDS) == set(Backend)
    assert canonical_backend("bwrap") is Backend.BUBBLEWRAP


def test_a_change_is_named_by_which_side_exists():
    assert [ChangeKind.between(None, "new"), ChangeKind.between("old", None), ChangeKind.between("old", "new")] == [
        ChangeKind.ADDED, ChangeKind.DELETED, ChangeKind.MODIFIED,
    ]


def test_a_node_without_an_end_position_is_named():
    built_by_hand = ast.Name("x", ast.Load(), lineno=1, col_offset=0)
    lines = SourceLines("x = 1\n")
    assert lines.start_of(built_by_hand) == 0
    with pytest.raises(ValueError, match="the Name node has no end position"):
        lines.end_of(built_by_hand)


@pytest.mark.parametrize(("counts", "cancelled", "status"), [
    ({"queued": 2}, False, Run.Status.QUEUED),
    ({"queued": 1, "done": 1}, False, Run.Status.RUNNING),  # started: some ended, more to come
    ({"running": 1, "queued": 1}, True, Run.Status.RUNNING),  # cancelling waits for the running one
    ({"cancelled": 2, "done": 1}, True, Run.Status.CANCELLED),
    ({"done": 2, "error": 1}, False, Run.Status.FAILED),
    ({"done": 3}, False, Run.Status.FINISHED),
])
def test_a_runs_status_follows_from_its_attempts(counts, cancelled, status):
    assert Run.status_from_counts(counts, cancelled=cancelled) == status
